"""Sweeps: run one scenario under many seeds, on any executor, and report every violation.

``sim.sweep(scenario, seeds, executor=...)`` hands each seed to a ``concurrent.futures``
executor: a ``ProcessPoolExecutor`` (any start method: ``spawn`` is the default on macOS
and Windows), a Dask ``distributed.Client`` (or its ``get_executor()``), or none (this
process, one seed after another). A worker returns only small, picklable facts (seed,
failures, digest, row count, the plan), never the world.

A worker finds the scenario by its reference, never by a pickled function: the built-in
name (``swarm``), or the user's module that registers it (``pkg.mod:name``, with the
module's file as a fallback). A ``spawn`` or Dask worker starts with an empty registry, so
it imports that module, which registers the scenario again. The same reference, printed
as the CLI form, makes each failure's reproduce line (``python -m sim run pkg.mod:name
--seed N --check``) work from the directory the sweep ran in. A reference only ever comes
from the operator (an argument, a call): nothing read from a trace or a network imports.

``sim.sweep`` is this module's ``sweep`` function (``sim/__init__.py`` exports it under the
module's name); the module's other names are imported with ``from sim.sweep import ...``
(``import sim.sweep as m`` gives the function).
"""

from __future__ import annotations

import concurrent.futures as futures
import importlib
import shlex
import sys
import sysconfig
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from . import scenarios
from .faults import FaultPlan
from .progress import bar
from .scenarios import Scenario
from .world import World

__all__ = ["ScenarioRef", "SeedResult", "load", "parse_seeds", "reference", "report", "run_seed", "sweep"]


# --- finding a scenario ---------------------------------------------------------------------


@dataclass(frozen=True)
class ScenarioRef:
    """Where a scenario is registered: ``module`` None for a built-in, else the module (and its file) that registers it."""

    name: str
    module: str | None = None
    file: str | None = None
    spec: str = ""
    """The CLI form, as it works from the directory the reference was made in: ``name``, ``pkg.mod:name`` or ``path/mod.py:name``."""
    local: bool = False
    """Set up by a function no import can reach (defined inside another, or registered by hand): only this process
    and its forked workers know it."""

    def __str__(self) -> str:
        return self.spec or self.name


def reference(scenario: str | Scenario | Callable[[World], None] | ScenarioRef) -> ScenarioRef:
    """The reference a worker can load ``scenario`` by: a registered name, ``MODULE:NAME``, a ``Scenario``, or its setup function.

    A spec string imports its module here (the operator named it). ``KeyError`` for a name
    nobody registers, ``ValueError`` for a ``Scenario`` that is not the registered one of its
    name. A scenario set up by a function defined inside another is kept by name only
    (``local``): it runs here and in forked workers; a spawned worker reports it cannot find it.
    """
    if isinstance(scenario, ScenarioRef):
        return scenario
    if isinstance(scenario, str):
        chosen = load(scenario)
    elif isinstance(scenario, Scenario):
        chosen = scenario
    elif callable(scenario):
        chosen = _registered_setup(scenario)
    else:
        raise TypeError(f"a scenario is a name, 'MODULE:NAME', a Scenario or its setup function, not {type(scenario).__qualname__}")
    if scenarios.registered().get(chosen.name) is not chosen:
        raise ValueError(f"scenario {chosen.name!r} is not registered: decorate its setup with @sim.scenario so a worker can find it")
    module = getattr(chosen.setup, "__module__", None)
    if module is None or module.startswith("sim.scenarios"):
        return ScenarioRef(chosen.name, spec=chosen.name)
    if "<locals>" in getattr(chosen.setup, "__qualname__", ""):
        return ScenarioRef(chosen.name, spec=chosen.name, local=True)
    file = getattr(sys.modules.get(module), "__file__", None)
    if module == "__main__" and (file is None or not Path(file).is_file()):
        return ScenarioRef(chosen.name, spec=chosen.name, local=True)  # a notebook or a REPL (or <stdin>): no file to import
    return ScenarioRef(chosen.name, module, file, _spec(chosen.name, module, file))


def load(spec: str) -> Scenario:
    """The scenario a spec names: ``NAME`` (registered), ``pkg.mod:NAME`` or ``path/to/mod.py:NAME`` (imports the module).

    ``NAME`` after the colon is the registered name or the setup function's name in the
    module. ``KeyError`` naming what the module registers when neither is found.
    """
    module_part, sep, name = spec.rpartition(":")
    if not sep:
        return scenarios.get(spec)
    if not module_part or not name:
        raise KeyError(f"a scenario spec is NAME or MODULE:NAME, got {spec!r}")
    module = _import(module_part)
    known = scenarios.registered()
    if name in known:
        return known[name]
    for chosen in known.values():
        if chosen.setup is getattr(module, name, None):
            return chosen
    own = [n for n, s in known.items() if getattr(s.setup, "__module__", None) == module.__name__]
    raise KeyError(f"module {module_part!r} registers no scenario {name!r}; it registers: {', '.join(own) or 'none'}")


def _registered_setup(setup: Callable[..., Any]) -> Scenario:
    for chosen in scenarios.registered().values():
        if chosen.setup is setup:
            return chosen
    raise ValueError(f"{getattr(setup, '__qualname__', setup)!r} is not a registered scenario's setup: decorate it with @sim.scenario")


def _import(module_part: str) -> ModuleType:
    """A dotted module, or a ``.py`` file (its directory goes first on ``sys.path``, as ``python file.py`` would do)."""
    if not (module_part.endswith(".py") or "/" in module_part or "\\" in module_part):
        return importlib.import_module(module_part)
    path = Path(module_part).resolve()
    if not path.is_file():
        raise KeyError(f"no file {module_part!r}")
    for module in list(sys.modules.values()):
        if getattr(module, "__file__", None) == str(path):
            return module  # imported already (under whatever name): importing it again would register its scenarios twice
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    module = importlib.import_module(path.stem)
    if getattr(module, "__file__", None) != str(path):
        raise KeyError(f"{module_part!r}: a module named {path.stem!r} is already imported from {getattr(module, '__file__', '?')}")
    return module


def _spec(name: str, module: str, file: str | None) -> str:
    """The CLI form that works from here: the dotted name if the cwd or an installed package holds it, else the file."""
    if file is None:
        return f"{module}:{name}"
    path = Path(file).resolve()
    cwd = Path.cwd().resolve()
    dotted = cwd.joinpath(*module.split("."))
    if module != "__main__" and path in (dotted.with_suffix(".py"), dotted / "__init__.py"):
        return f"{module}:{name}"
    installed = {Path(p).resolve() for p in (sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"])}
    if module != "__main__" and any(path.is_relative_to(p) for p in installed):
        return f"{module}:{name}"
    shown = path.relative_to(cwd) if path.is_relative_to(cwd) else path
    return f"{shown.as_posix()}:{name}"


def _find(ref: ScenarioRef) -> Scenario:
    """In a worker: the registered scenario, importing its module (or file) first if this process has not registered it."""
    known = scenarios.registered()
    if ref.name in known:
        return known[ref.name]  # in this process, a forked worker, or a spawned one that re-ran the caller's __main__
    if ref.local:
        raise KeyError(f"scenario {ref.name!r} is not known in this worker: its setup is defined inside a function (or it was "
                       f"registered by hand), so no import registers it; define the setup at module level with @sim.scenario")
    if ref.module is not None and ref.module != "__main__":
        try:
            importlib.import_module(ref.module)
        except ModuleNotFoundError as exc:  # the module itself, not one it imports: try its file
            missing = exc.name or ""
            if ref.file is None or not (ref.module == missing or ref.module.startswith(missing + ".")):
                raise
            _import(ref.file)
    elif ref.file is not None:
        _import(ref.file)
    return scenarios.get(ref.name)


# --- one seed -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SeedResult:
    """What one seed's run left behind: its check failures (empty when every check held)."""

    name: str
    seed: int
    failures: tuple[str, ...]
    digest: str
    rows: int
    error: str | None = None
    plan: str | None = None  # the seed's fault plan, one line (scenarios that draw one: swarm)
    plan_json: str | None = None
    local: bool = False  # the scenario's ref is local: only the session that defines it can run it again

    @property
    def ok(self) -> bool:
        return not self.failures and self.error is None

    @property
    def reproduce(self) -> str:
        """The shell command; for a local scenario (a notebook's, a function's) the call to paste in its own session."""
        if self.local:
            return f"sim.scenarios.run({self.name!r}, {self.seed})  # in the session that defines it"
        return f"python -m sim run {shlex.quote(self.name)} --seed {self.seed} --check"

    @property
    def replay(self) -> str | None:
        """The command that replays the exact plan (None for a scenario without one)."""
        if self.plan_json is None:
            return None
        if self.local:
            return f"sim.scenarios.run({self.name!r}, {self.seed}, plan=sim.FaultPlan.from_json({self.plan_json!r}))  # in the session that defines it"
        return f"{self.reproduce} --plan {shlex.quote(self.plan_json)}"


def run_seed(scenario: str | ScenarioRef, seed: int) -> SeedResult:
    """Run one seed with its checks (in a worker); exceptions become results, not crashes.

    ``scenario`` is a registered name or a ``ScenarioRef`` (what ``sweep`` sends: a spec string
    never reaches a worker, so a worker imports only what the operator's process resolved).
    """
    ref = scenario if isinstance(scenario, ScenarioRef) else ScenarioRef(scenario, spec=scenario)
    world: list[World] = []
    replays = False  # only a scenario tagged "fault-plan" takes --plan: no replay line for the others
    try:
        chosen = _find(ref)
        replays = "fault-plan" in chosen.tags
        result = scenarios.run(chosen.name, seed, on_world=world.append)
    except Exception as exc:  # a scenario that blows up is a finding too
        plan = _plan_of(world[0], replays) if world else (None, None)
        return SeedResult(str(ref), seed, (), "", 0, error=f"{type(exc).__name__}: {exc}", plan=plan[0], plan_json=plan[1], local=ref.local)
    plan = _plan_of(result.world, replays)
    return SeedResult(
        str(ref), seed, tuple(str(f) for f in result.failures), result.trace.digest(), len(result.trace), plan=plan[0], plan_json=plan[1], local=ref.local
    )


def _plan_of(world: World, replays: bool) -> tuple[str | None, str | None]:
    """The plan a run recorded (``results["plan"]``), one line, and its JSON if the scenario takes ``--plan``."""
    drawn = world.results.get("plan")
    if isinstance(drawn, FaultPlan):
        return str(drawn), drawn.to_json() if replays else None
    return None, None


def parse_seeds(text: str) -> range:
    """``0:500`` (start inclusive, stop exclusive), or a single seed ``7``."""
    start, sep, stop = text.partition(":")
    try:
        if not sep:
            first = int(start)
            return range(first, first + 1)
        seeds = range(int(start or 0), int(stop))
    except ValueError:
        raise ValueError(f"seeds must look like 0:500 or 7, got {text!r}") from None
    if len(seeds) == 0:
        raise ValueError(f"no seeds in {text!r}")
    return seeds


# --- many seeds -----------------------------------------------------------------------------


def sweep(
    scenario: str | Scenario | Callable[[World], None] | ScenarioRef,
    seeds: Sequence[int],
    *,
    executor: futures.Executor | Any = None,
    workers: int = 1,
    progress: bool = True,
    on_result: Callable[[SeedResult], None] | None = None,
) -> list[SeedResult]:
    """Run ``scenario`` with its checks for every seed; the results in seed order.

    ``executor``: any ``concurrent.futures.Executor`` (process pools of any start method,
    thread pools, Dask's ``client.get_executor()``), or a Dask ``distributed.Client`` itself.
    Without one, ``workers > 1`` runs a process pool of that size for this sweep and
    ``workers=1`` runs every seed here. ``progress``: a ``tqdm.auto`` bar (a widget in a
    notebook), shown only where it can be seen (a terminal or a notebook; never in a
    captured or redirected stream), ``False`` for none. ``on_result`` is called with each
    result as it arrives (in completion order).
    """
    ref = reference(scenario)  # fails fast, in this process, on a name nobody registers
    if executor is not None and not isinstance(executor, futures.Executor) and hasattr(executor, "get_executor"):
        executor = executor.get_executor()  # a distributed.Client
    if executor is not None and not isinstance(executor, futures.Executor):
        raise TypeError(f"executor must be a concurrent.futures.Executor or a distributed.Client, not {type(executor).__qualname__}")
    results: dict[int, SeedResult] = {}
    with bar(len(seeds), desc=str(ref), unit="seed", enabled=progress) as shown:

        def arrived(result: SeedResult) -> None:
            results[result.seed] = result
            shown.update(1)
            bad = sum(not r.ok for r in results.values())
            if bad:
                shown.set_postfix_str(f"violations={bad}", refresh=False)
            if on_result is not None:
                on_result(result)

        if executor is None and workers <= 1:
            for seed in seeds:
                arrived(run_seed(ref, seed))
        elif executor is None:
            with futures.ProcessPoolExecutor(max_workers=workers) as pool:
                _drain(pool, ref, seeds, arrived)
        else:
            _drain(executor, ref, seeds, arrived)
    return [results[seed] for seed in seeds]


def _drain(executor: futures.Executor, ref: ScenarioRef, seeds: Sequence[int], arrived: Callable[[SeedResult], None]) -> None:
    pending = [executor.submit(run_seed, ref, seed) for seed in seeds]
    try:
        for done in futures.as_completed(pending):
            arrived(done.result())
    finally:
        for future in pending:
            future.cancel()  # an interrupted sweep leaves no queued seed behind


def wall_time(seconds: float) -> str:
    """``83.2 s`` from 1 s on, ``12.3 ms`` / ``500 ms`` / ``0.4 ms`` below: a quick sweep read as ``0.0 s`` told nothing."""
    if seconds >= 1:
        return f"{seconds:.1f} s"
    ms = seconds * 1000
    return f"{ms:.0f} ms" if ms >= 100 else f"{ms:.1f} ms" if ms >= 1 else f"{ms:.2g} ms"


def report(name: str, results: Sequence[SeedResult], elapsed: float) -> list[str]:
    """The lines a sweep prints: each violation with its reproduce command, then ``violations=N`` last."""
    lines = []
    bad = [r for r in results if not r.ok]
    for result in bad:
        what = result.error or "; ".join(result.failures)
        lines.append(f"seed {result.seed}: {what}")
        if result.plan is not None:
            lines.append(f"  plan: {result.plan}")
        lines.append(f"  reproduce: {result.reproduce}")
        if result.replay is not None:
            lines.append(f"  replay: {result.replay}")
    rate = f"{len(results) / elapsed:.2f} seeds/s" if elapsed > 0 else "too fast to time"
    lines.append(f"scenario={name} seeds={len(results)} ok={len(results) - len(bad)} in {wall_time(elapsed)} ({rate})")
    lines.append(f"violations={len(bad)}")
    return lines


def timed_sweep(
    scenario: str | Scenario | Callable[[World], None] | ScenarioRef,
    seeds: Sequence[int],
    workers: int = 1,
    *,
    executor: futures.Executor | Any = None,
    progress: bool = True,
) -> tuple[list[SeedResult], float]:
    """``sweep`` and its wall time in seconds (what ``report`` prints as seeds/s)."""
    started = time.perf_counter()
    results = sweep(scenario, seeds, workers=workers, executor=executor, progress=progress)
    return results, time.perf_counter() - started
