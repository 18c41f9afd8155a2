"""The pytest plugin of casty lab: ``@pytest.mark.sim``, the ``world`` and ``sim_seed`` fixtures, seed options.

Registered by the ``pytest11`` entry point ``casty_sim`` (pyproject.toml), so it is active in
any project that installs casty-lab::

    @pytest.mark.sim(seeds=200, nodes=1, faults=("crash",), until=60, node_options={"store": "sqlite"})
    def test_charges_once(world):
        world.spawn("n1", subscribe)         # the nodes n1..nK are up; the seed's plan is scheduled
        world.run(until=90)
        assert ...

Each seed is its own test item (``test_charges_once[seed=7]``). The marker's arguments:

- ``seeds``: a count (``range(seeds)``) or the seeds themselves; default 20.
- ``nodes``: a count (``n1``..``nK``) or names; default 3. More than one node makes a cluster.
- ``faults``: what each seed's plan is drawn from, within ``[start, until)`` seconds: kind names
  (``"crash"``, ``("crash", "pause")``: ``sim.faults.generate`` with a ``FaultMix`` of them), a
  ``FaultMix``, ``"swarm"`` (the default: each seed draws its own mix), a strategy made by
  ``sim.testing.fault_plans`` (drawn with the seed), a fixed ``FaultPlan``, a callable
  ``(random.Random, node names) -> FaultPlan``, or None for no faults.
- ``start`` (default 0) and ``until`` (default 30): the window of the drawn faults, in seconds.
- ``cluster``: a ``casty.cluster.config.Cluster`` for every node, True (``Cluster(seeds=[first
  node])``, the default with more than one node) or False (separate single nodes).
- ``node_options``: more keywords for ``World.add_node`` (``store=``, ``ask_timeout=``, ...).

Options: ``--sim-seeds A:B`` (seeds A..B-1 for every marked test), ``--sim-seed N``, and
``--sim-plan JSON`` (replay exactly that plan instead of the seed's). When a seeded test fails,
its report has a "casty sim" section: the seed, the plan on one line, the command that
reproduces it, where its trace was written (JSONL and Perfetto, under ``tmp_path``) and an
ownership or catch-up chart when matplotlib is installed.

Why parametrized items and not a loop inside one test: every seed passes or fails on its own,
``-x`` stops at the first failing seed, ``-k 'seed=7'`` picks one, and the report names it.
The module imports nothing from the simulator at load time: pytest loads every entry-point
plugin at start-up, and a project that never uses the marker should not pay for the world.
"""

from __future__ import annotations

import importlib.util
import os
import random
import shlex
import sys
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .faults import FaultPlan
    from .world import World

__all__ = ["SimSpec", "reproduce_command"]

_DEFAULT_SEEDS = 20
_DEFAULT_NODES = 3
_DEFAULT_UNTIL = 30.0
_KNOWN = ("seeds", "nodes", "faults", "start", "until", "cluster", "node_options")
_SWARM = "swarm"
_UNSET: Any = object()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("casty-sim", "casty lab: seeded simulations (@pytest.mark.sim)")
    group.addoption("--sim-seeds", metavar="A:B", default=None, help="run every @pytest.mark.sim test with seeds A..B-1 (or one seed N)")
    group.addoption("--sim-seed", metavar="N", type=int, default=None, help="run every @pytest.mark.sim test with seed N only")
    group.addoption("--sim-plan", metavar="JSON", default=None, help="replay this fault plan (sim.faults.FaultPlan JSON) instead of each seed's own")


@dataclass(frozen=True)
class _Options:
    seeds: tuple[int, ...] | None
    plan: FaultPlan | None


_OPTIONS = pytest.StashKey[_Options]()


def _parse_seeds(text: str) -> tuple[int, ...]:
    try:
        if ":" in text:
            low, high = (int(part) for part in text.split(":", 1))
            seeds = tuple(range(low, high))
        else:
            seeds = (int(text),)
    except ValueError:
        raise pytest.UsageError(f"--sim-seeds: expected A:B or N (integers), got {text!r}") from None
    if text.lstrip().startswith("-"):
        raise pytest.UsageError(f"--sim-seeds: seeds are >= 0, got {text!r}")
    if not seeds:
        raise pytest.UsageError(f"--sim-seeds: {text!r} is empty: A:B runs the seeds A..B-1, so B must be greater than A")
    return seeds


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "sim(seeds=20, nodes=3, faults='swarm', start=0, until=30, cluster=..., node_options={}): "
        "run the test once per seed, with a `world` fixture whose nodes are up and whose fault plan is scheduled",
    )
    many, one, plan_text = (config.getoption(name) for name in ("--sim-seeds", "--sim-seed", "--sim-plan"))
    if many is not None and one is not None:
        raise pytest.UsageError("give --sim-seeds A:B or --sim-seed N, not both")
    if one is not None and one < 0:
        raise pytest.UsageError(f"--sim-seed must be >= 0, got {one}")
    seeds = _parse_seeds(many) if many is not None else (one,) if one is not None else None
    plan = None
    if plan_text is not None:
        from .faults import FaultPlan

        try:
            plan = FaultPlan.from_json(plan_text)
        except ValueError as exc:
            raise pytest.UsageError(f"--sim-plan: {exc}") from None
    config.stash[_OPTIONS] = _Options(seeds, plan)


# ================================================================== the marker ======


@dataclass(frozen=True)
class SimSpec:
    """A ``@pytest.mark.sim`` marker's arguments, checked: what the ``world`` fixture builds for a seed."""

    seeds: tuple[int, ...]
    names: tuple[str, ...]
    draw: Callable[[random.Random], FaultPlan] | None  # None: no faults
    start: float
    until: float
    cluster: Any  # a casty Cluster, or None
    node_options: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, marker: pytest.Mark | None) -> SimSpec:
        """The spec of ``marker`` (None: an unmarked test using ``world``: the defaults). ``TypeError``/``ValueError`` name a bad argument."""
        args, kwargs = (marker.args, marker.kwargs) if marker is not None else ((), {})
        if args:
            raise TypeError(f"@pytest.mark.sim: takes keyword arguments only ({', '.join(_KNOWN)}), got positional {args!r}")
        unknown = sorted(set(kwargs) - set(_KNOWN))
        if unknown:
            raise TypeError(f"@pytest.mark.sim: unknown argument(s) {', '.join(unknown)}; known: {', '.join(_KNOWN)}")
        seeds = _seeds(kwargs.get("seeds", _DEFAULT_SEEDS))
        names = _nodes(kwargs.get("nodes", _DEFAULT_NODES))
        start, until = kwargs.get("start", 0.0), kwargs.get("until", _DEFAULT_UNTIL)
        for what, value in (("start", start), ("until", until)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
                raise TypeError(f"@pytest.mark.sim: {what} must be a number of seconds >= 0, got {value!r}")
        if until <= start:
            raise ValueError(f"@pytest.mark.sim: until ({until!r}) must be after start ({start!r})")
        options = kwargs.get("node_options", {})
        if not isinstance(options, dict) or not all(isinstance(k, str) for k in options):
            raise TypeError(f"@pytest.mark.sim: node_options must be a dict of World.add_node keywords, got {options!r}")
        if "cluster" in options:
            raise TypeError("@pytest.mark.sim: give the cluster as cluster=, not in node_options")
        unknown = sorted(set(options) - _node_keywords())
        if unknown:
            raise TypeError(
                f"@pytest.mark.sim: node_options: unknown keyword(s) {', '.join(unknown)} for World.add_node; "
                f"it takes {', '.join(sorted(_node_keywords() - {'cluster'}))}"
            )
        cluster = _cluster(kwargs.get("cluster", _UNSET), names)
        if cluster is not None and not set(cluster.seeds) <= set(names):
            outside = [s for s in cluster.seeds if s not in names]
            raise ValueError(
                f"@pytest.mark.sim: cluster seeds {', '.join(outside)} are not among the test's nodes {', '.join(names)}: "
                "the nodes would wait to join a seed that never starts"
            )
        seed_nodes = tuple(cluster.seeds) if cluster is not None else ()
        draw = _drawer(kwargs.get("faults", _UNSET), names, float(start), float(until), seed_nodes)
        return cls(seeds, names, draw, float(start), float(until), cluster, dict(options))

    def plan(self, seed: int) -> FaultPlan:
        """The seed's fault plan (an empty one for ``faults=None``), from a stream of its own."""
        from .faults import FaultPlan

        if self.draw is None:
            return FaultPlan()
        plan = self.draw(random.Random(f"{seed}:pytest:plan"))
        if not isinstance(plan, FaultPlan):
            raise TypeError(f"@pytest.mark.sim: faults= gave {plan!r}, not a FaultPlan")
        return plan

    def build(self, seed: int, plan: FaultPlan) -> World:
        """A world for ``seed``: the nodes added and up, ``plan`` scheduled (``world.results["plan"]``)."""
        from .world import World

        world = World(seed)
        try:
            for name in self.names:
                options = dict(self.node_options)
                if self.cluster is not None:
                    options["cluster"] = self.cluster
                world.add_node(name, **options)
            world.given_plan = plan
            world.results["plan"] = plan
            plan.apply(world)
        except BaseException:
            world.close()
            raise
        return world


def _node_keywords() -> set[str]:
    """The keywords ``World.add_node`` takes: its own and, through ``**system``, ``ActorSystem``'s."""
    import inspect

    from casty._core.system import ActorSystem

    from .world import World

    names: set[str] = set()
    for function in (World.add_node, ActorSystem.__init__):
        for parameter in inspect.signature(function).parameters.values():
            if parameter.kind is inspect.Parameter.KEYWORD_ONLY:
                names.add(parameter.name)
    return names - _WORLD_SETS


_WORLD_SETS = frozenset({"node", "clock", "rng", "observer", "transport"})
"""ActorSystem keywords the world gives each node itself (its name, virtual clock, seeded stream, trace, network)."""


def _nodes(value: Any) -> tuple[str, ...]:
    """``sim.testing.node_names`` of the marker's ``nodes``, its error naming the marker and the argument."""
    from .testing import node_names

    try:
        return node_names(value)
    except (TypeError, ValueError) as exc:
        text = str(exc)
        reason = text if text.startswith("nodes") else f"nodes: {text}"
        raise type(exc)(f"@pytest.mark.sim: {reason}") from None


def _seeds(value: Any) -> tuple[int, ...]:
    if isinstance(value, bool):
        raise TypeError(f"@pytest.mark.sim: seeds must be a count or a list of seeds, got {value!r}")
    if isinstance(value, int):
        if value < 1:
            raise ValueError(f"@pytest.mark.sim: seeds must be at least 1, got {value}")
        return tuple(range(value))
    if isinstance(value, Iterable) and not isinstance(value, (str, bytes)):
        seeds = tuple(value)
        if seeds and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds):
            repeated = sorted({s for s in seeds if seeds.count(s) > 1})
            if repeated:  # pytest would make the repeated ids unique as seed=10, seed=11: read as other seeds
                raise ValueError(f"@pytest.mark.sim: seeds repeat {', '.join(map(str, repeated))}: each seed is one test item")
            return seeds
    raise TypeError(f"@pytest.mark.sim: seeds must be a count or integers >= 0, got {value!r}")


def _cluster(value: Any, names: tuple[str, ...]) -> Any:
    from casty.cluster.config import Cluster

    if value is _UNSET:
        value = len(names) > 1
    if value is True:
        return Cluster(seeds=[names[0]])
    if value is False or value is None:
        return None
    if isinstance(value, Cluster):
        return value
    raise TypeError(f"@pytest.mark.sim: cluster must be True, False or a casty Cluster, got {value!r}")


def _drawer(
    faults: Any, names: tuple[str, ...], start: float, until: float, seed_nodes: tuple[str, ...]
) -> Callable[[random.Random], FaultPlan] | None:
    """How a seed's plan is drawn from the marker's ``faults`` (checked now, so a bad marker fails at collection).

    ``seed_nodes``: the cluster's seeds, which a ``FaultMix`` with ``seeds=False`` leaves alone."""
    from .faults import GENERATED_KINDS, FaultMix, FaultPlan, generate
    from .testing import space_of

    if faults is None:
        return None
    window = until - start
    if faults is _UNSET or faults == _SWARM:
        return lambda rng: generate(FaultMix.draw(rng, len(names)), rng, names, window, start=start, seed_nodes=seed_nodes)
    if isinstance(faults, str):
        faults = (faults,)
    if isinstance(faults, FaultPlan):
        plan = faults
        return lambda rng: plan
    if isinstance(faults, FaultMix):
        mix = faults
        return lambda rng: generate(mix, rng, names, window, start=start, seed_nodes=seed_nodes)
    space = space_of(faults)
    if space is not None:
        missing = [n for n in space.names if n not in names]
        if missing:  # each seed's plan would fail when scheduled, with a traceback per seed
            raise ValueError(
                f"@pytest.mark.sim: faults= draws its plans on {', '.join(missing)}, which the test does not have "
                f"(nodes {', '.join(names)})"
            )
        return space.draw
    if type(faults).__module__.startswith("hypothesis"):
        raise TypeError(
            "@pytest.mark.sim: faults= takes a strategy made by sim.testing.fault_plans (drawn with each seed); "
            f"for another Hypothesis strategy use @given, got {faults!r}"
        )
    if isinstance(faults, Sequence) and not faults:
        raise ValueError(f"@pytest.mark.sim: faults={faults!r} names no fault kind; give faults=None for no faults")
    if isinstance(faults, Sequence) and all(isinstance(k, str) for k in faults):
        unknown = [k for k in faults if k not in GENERATED_KINDS]
        if unknown:
            raise ValueError(f"@pytest.mark.sim: faults names unknown kind(s) {unknown}; known: {', '.join(GENERATED_KINDS)}, or 'swarm'")
        # generate skips what it cannot draw: a test of only such kinds would run with no faults and pass
        if "forged_ref" in faults:
            raise ValueError(
                "@pytest.mark.sim: faults forged_ref need(s) an actor, key and message to forge, which the marker does not know: "
                "give faults= a FaultPlan with a sim.faults.ForgedRef, or a callable (rng, names) -> FaultPlan"
            )
        lonely = [k for k in faults if k in ("partition", "flap") and len(names) < 2]
        if lonely:
            raise ValueError(f"@pytest.mark.sim: faults {', '.join(lonely)} need(s) at least two nodes; the test has {', '.join(names)}")
        mix = FaultMix(kinds=tuple(k for k in GENERATED_KINDS if k in faults))
        return lambda rng: generate(mix, rng, names, window, start=start, seed_nodes=seed_nodes)
    if callable(faults):
        user: Callable[[random.Random, tuple[str, ...]], FaultPlan] = faults
        return lambda rng: user(rng, names)
    raise TypeError(f"@pytest.mark.sim: faults must be kind names, 'swarm', a FaultMix, a FaultPlan, a fault_plans strategy, a callable or None; got {faults!r}")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker("sim")
    if marker is None:
        return
    try:
        spec = SimSpec.of(marker)
    except (TypeError, ValueError) as exc:
        reason = f"{metafunc.definition.nodeid}: {exc}"
    else:
        reason = ""
    if reason:  # failed outside the except block: the report is the reason alone, not a chained traceback
        pytest.fail(reason, pytrace=False)
    if "sim_seed" not in metafunc.fixturenames:
        pytest.fail(f"{metafunc.definition.nodeid}: a @pytest.mark.sim test takes the `world` or the `sim_seed` fixture", pytrace=False)
    given = metafunc.config.stash[_OPTIONS].seeds
    seeds = given if given is not None else spec.seeds
    metafunc.parametrize("sim_seed", seeds, ids=[f"seed={s}" for s in seeds])


# ================================================================== fixtures ========


@dataclass
class _Run:
    """What a failing seeded test reports: kept on the item by the ``world`` fixture."""

    seed: int
    plan: FaultPlan
    world: World
    out: Path
    reported: bool = False


_RUN = pytest.StashKey[_Run]()


@pytest.fixture
def sim_seed(request: pytest.FixtureRequest) -> int:
    """The seed of this item (``@pytest.mark.sim`` parametrizes it); unmarked: ``--sim-seed`` or 0."""
    given = request.config.stash[_OPTIONS].seeds
    return given[0] if given else 0


@pytest.fixture
def world(request: pytest.FixtureRequest, sim_seed: int, tmp_path: Path) -> Generator[World, None, None]:
    """A fresh ``World`` for ``sim_seed``: nodes n1..nK up, the seed's fault plan (or ``--sim-plan``) scheduled; closed after."""
    try:
        spec = SimSpec.of(request.node.get_closest_marker("sim"))
    except (TypeError, ValueError) as exc:
        reason = str(exc)
    else:
        reason = ""
    if reason:
        pytest.fail(reason, pytrace=False)
    given = request.config.stash[_OPTIONS].plan
    plan = given if given is not None else spec.plan(sim_seed)
    try:
        built = spec.build(sim_seed, plan)
    except ValueError as exc:
        if given is None:  # the seed's own plan fits the nodes: a ValueError is a real error, with its traceback
            raise
        reason = f"--sim-plan: {exc}"  # the operator's plan does not fit this test (a node it lacks)
    if reason:
        pytest.fail(reason, pytrace=False)
    request.node.stash[_RUN] = _Run(sim_seed, plan, built, tmp_path)
    try:
        yield built
    finally:
        built.close()


# ================================================================== the report ======


def reproduce_command(item: pytest.Item, seed: int, plan: FaultPlan | None) -> str:
    """``pytest path::test --sim-seed N [--sim-plan '...']``, the path as seen from where pytest was started."""
    nodeid = item.nodeid
    callspec = getattr(item, "callspec", None)
    only_seed = callspec is not None and set(callspec.params) == {"sim_seed"}
    originalname = getattr(item, "originalname", item.name)
    if only_seed and nodeid.endswith(item.name):
        nodeid = nodeid[: -len(item.name)] + originalname
    file_part, sep, rest = nodeid.partition("::")
    where = os.path.relpath(item.config.rootpath / file_part, item.config.invocation_params.dir)
    command = ["pytest", f"{where}{sep}{rest}", "--sim-seed", str(seed)]
    if plan is not None and len(plan):
        command += ["--sim-plan", plan.to_json()]
    return shlex.join(command)


_CHARTED = pytest.StashKey[dict[str, int]]()
"""Per test function, the seed whose failure drew its chart."""


def _chart(item: pytest.Item, run: _Run) -> str:
    """Draw the ownership chart (a cluster's key) or the catch-up chart (a schedule) of the run, if matplotlib is there.

    One chart per test function, for its first failing seed: a chart takes about a second to draw and
    the seed's run milliseconds, so 7 failing seeds of 30 spent 19.5 of their 21.3 s drawing. The
    reproduce line of any other seed runs that seed alone, and draws its chart."""
    if importlib.util.find_spec("matplotlib") is None:
        return "chart: not drawn (matplotlib is not installed)"
    charted = item.config.stash.setdefault(_CHARTED, {})
    test = item.nodeid.partition("[")[0]
    if charted.get(test, run.seed) != run.seed:
        return f"chart: not drawn (one per test, drawn for seed {charted[test]}; this seed's reproduce line draws its own)"
    trace = run.world.trace
    kinds = set(trace.counts)
    if "epoch.acquired" in kinds:
        name, draw = "ownership", "ownership_chart"
    elif "schedule.fired" in kinds:
        name, draw = "catchup", "catchup_chart"
    else:
        return "chart: none (the trace has no owner epochs and no schedule firings)"
    try:
        import matplotlib

        if "matplotlib.pyplot" not in sys.modules and not os.environ.get("MPLBACKEND"):
            matplotlib.use("Agg")
        from . import viz

        figure = getattr(viz, draw)(trace)
        path = run.out / f"{name}-seed{run.seed}.png"
        figure.savefig(path, dpi=90)
        if "matplotlib.pyplot" in sys.modules:  # a figure made through pyplot stays open (and counted) until closed
            sys.modules["matplotlib.pyplot"].close(figure)
    except Exception as exc:  # a chart is a help, never the reason a report is lost
        return f"chart: not drawn ({type(exc).__name__}: {exc})"
    charted[test] = run.seed
    return f"chart: {path}"


def _explain(item: pytest.Item, run: _Run) -> str:
    lines = [f"seed: {run.seed}", f"plan: {run.plan}", f"reproduce: {reproduce_command(item, run.seed, run.plan)}"]
    jsonl, perfetto = run.out / f"trace-seed{run.seed}.jsonl", run.out / f"trace-seed{run.seed}.perfetto.json"
    try:
        run.world.trace.to_jsonl(jsonl)
        run.world.trace.to_perfetto(perfetto)
        lines.append(f"trace: {jsonl} (sim.trace.Trace.from_jsonl)")
        lines.append(f"       {perfetto} (open in https://ui.perfetto.dev)")
    except Exception as exc:
        lines.append(f"trace: not written ({type(exc).__name__}: {exc})")
    lines.append(_chart(item, run))
    return "\n".join(lines)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    run = item.stash.get(_RUN, None)
    if run is not None and report.failed and not run.reported:
        run.reported = True
        report.sections.append(("casty sim", _explain(item, run)))
    if run is not None and call.when == "teardown":
        del item.stash[_RUN]  # the session keeps every item to its end: a kept run would keep its whole world
    return report
