"""The mutation harness: patch a copy of the runtime, run scenarios on it in subprocesses, report the first failing seed.

``sim.mutants`` holds the table of mutants (what each breaks, where) and the ``python -m sim mutants``
command; this module is how a mutant is tried: a ``Mutant`` is edits of exact source snippets
(``stale_edits`` names the ones whose snippet moved), ``copy_runtime`` copies ``casty/`` and ``sim/``
(from the working tree or a commit) to a temporary directory, ``apply_mutant`` patches that copy,
``import_error`` checks it imports from itself, and ``hunt`` runs each scenario's seeds on worker
subprocesses until one fails on the mutant and passes on the unpatched baseline (``Baseline``).
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Literal

ROOT = Path(__file__).resolve().parent.parent
"""The repository root (the directory holding ``casty/`` and ``sim/``)."""

PACKAGES = ("casty", "sim")
"""What a copy holds: the runtime and the world that drives it (the scenarios and checks)."""

GENERAL_SCENARIOS = ("cluster-random", "swarm")
"""Tried after a mutant's own scenarios: random fault plans (``swarm`` once it is registered)."""

MAX_WORKERS = 2
"""The machine has two cores: more workers only slow everyone down."""

INVALID_ERRORS = ("NameError", "UnboundLocalError", "SyntaxError", "IndentationError", "ImportError", "ModuleNotFoundError")
"""A run that dies of one of these means the patch is broken code, not a broken rule."""


@dataclass(frozen=True)
class Edit:
    """Replace ``snippet`` (which must occur exactly once in ``file``) with ``replacement``."""

    file: str
    snippet: str
    replacement: str


@dataclass(frozen=True)
class Mutant:
    """One ablation: the edits that break ``rule``, and the scenarios to try first (cheap, targeted)."""

    name: str
    rule: str
    edits: tuple[Edit, ...]
    targets: tuple[str, ...] = ()


class Stale(Exception):
    """A mutant's snippet is not in its file exactly once: the code moved and the mutant must be updated."""


# ================================================================= patching =====


def stale_edits(mutant: Mutant, root: Path = ROOT) -> list[str]:
    """Why each of ``mutant``'s edits cannot apply to the tree at ``root`` (empty: every snippet is there exactly once)."""
    problems: list[str] = []
    for edit in mutant.edits:
        path = root / edit.file
        if not path.is_file():
            problems.append(f"{edit.file}: no such file")
            continue
        count = path.read_text(encoding="utf-8").count(edit.snippet)
        if count != 1:
            first = edit.snippet.strip().splitlines()[0] if edit.snippet.strip() else edit.snippet
            problems.append(f"{edit.file}: snippet {first!r} found {count} times (expected once)")
    return problems


def apply_mutant(mutant: Mutant, root: Path) -> None:
    """Patch the copy at ``root`` in place; ``Stale`` (and nothing written) if any snippet is not there exactly once.

    Several edits of one file apply in order, each to the text the previous one left.
    """
    problems = stale_edits(mutant, root)
    if problems:
        raise Stale(f"{mutant.name}: " + "; ".join(problems))
    texts: dict[str, str] = {}
    for edit in mutant.edits:
        text = texts.get(edit.file)
        if text is None:
            text = (root / edit.file).read_text(encoding="utf-8")
        if text.count(edit.snippet) != 1:  # an earlier edit of the same file removed or doubled it
            raise Stale(f"{mutant.name}: {edit.file}: an earlier edit changed the snippet {edit.snippet.strip()[:60]!r}")
        texts[edit.file] = text.replace(edit.snippet, edit.replacement, 1)
    for file, text in texts.items():
        (root / file).write_text(text, encoding="utf-8")


def _ignore(_dir: str, names: list[str]) -> set[str]:
    return {name for name in names if name == "__pycache__" or name.endswith((".pyc", ".pyo"))}


def copy_runtime(dest: Path, *, source: Path = ROOT, rev: str | None = None) -> Path:
    """Copy ``casty/`` and ``sim/`` from ``source`` (its working tree, or commit ``rev``) into ``dest``; returns ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    if rev is None:
        for package in PACKAGES:
            shutil.copytree(source / package, dest / package, ignore=_ignore)
        return dest
    archive = dest / ".rev.tar"
    with archive.open("wb") as out:
        done = subprocess.run(["git", "-C", str(source), "archive", rev, *PACKAGES], stdout=out, stderr=subprocess.PIPE)
    if done.returncode != 0:
        raise ValueError(f"git archive {rev}: {done.stderr.decode(errors='replace').strip()}")
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
    archive.unlink()
    return dest


# ============================================================ subprocesses ======

_IMPORT_CHECK = """
import importlib, json, pkgutil, sys
import casty, sim
where = [casty.__file__, sim.__file__]
for info in pkgutil.walk_packages(casty.__path__, "casty."):
    if info.name.rsplit(".", 1)[-1] != "__main__":
        importlib.import_module(info.name)
from sim import scenarios
print(json.dumps({"where": where, "scenarios": list(scenarios.registered())}))
"""

_WORKER = """
import json, os, sys
import casty, sim
from sim import scenarios
print(json.dumps({"where": [casty.__file__, sim.__file__]}), flush=True)
name, parent = sys.argv[1], int(sys.argv[3])
for seed in (int(s) for s in sys.argv[2].split(",")):
    if os.getppid() != parent:  # the harness is gone: nobody reads these answers
        break
    try:
        run = scenarios.run(name, seed)
        failures, error = [str(f) for f in run.failures], None
    except Exception as exc:
        failures, error = [], f"{type(exc).__name__}: {exc}"
    print(json.dumps({"seed": seed, "failures": failures, "error": error}), flush=True)
"""


def _env(copy: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(copy)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.setdefault("MPLBACKEND", "Agg")
    return env


def _inside(copy: Path, files: Sequence[str]) -> bool:
    return all(Path(f).resolve().is_relative_to(copy.resolve()) for f in files)


def import_error(copy: Path, python: str = sys.executable) -> tuple[str | None, list[str]]:
    """Import every module of ``casty`` in the copy and register its scenarios: (the error, if any; the scenario names).

    ``sim``'s figures and tour (matplotlib) are left out: no sweep imports them.
    """
    done = subprocess.run(
        [python, "-c", _IMPORT_CHECK], cwd=copy, env=_env(copy), capture_output=True, text=True, timeout=300
    )
    if done.returncode != 0:
        lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
        return (lines[-1] if lines else f"exit status {done.returncode}"), []
    info = json.loads(done.stdout.strip().splitlines()[-1])
    if not _inside(copy, info["where"]):
        return f"the copy imported casty/sim from elsewhere: {info['where']}", []
    return None, list(info["scenarios"])


@dataclass
class _Worker:
    proc: subprocess.Popen[str]
    seeds: list[int]
    done: int = 0  # how many of its seeds have reported

    @property
    def finished(self) -> bool:
        return self.done >= len(self.seeds)

    @property
    def next_seed(self) -> int | None:
        return None if self.finished else self.seeds[self.done]


SeedVerdict = tuple[int, list[str], str | None]
"""(seed, check failures, error): what one seed of one scenario left."""


def _first_failure(
    copy: Path,
    scenario: str,
    seeds: Sequence[int],
    workers: int,
    deadline: float | None,
    python: str,
    accept: Callable[[SeedVerdict], bool],
) -> tuple[SeedVerdict | None, int, bool]:
    """The first seed (in ``seeds`` order) whose run fails and that ``accept`` takes; seeds known to pass; out of time?

    The workers keep running past a failure that ``accept`` refuses (a seed failing on the
    unpatched copy too), and are killed as soon as the answer is known.
    """
    workers = max(1, min(workers, MAX_WORKERS, len(seeds)))
    procs: list[_Worker] = []
    selector = selectors.DefaultSelector()
    passed: set[int] = set()
    failed: dict[int, SeedVerdict] = {}
    refused: set[int] = set()
    order = {seed: i for i, seed in enumerate(seeds)}
    try:
        for i in range(workers):
            mine = list(seeds[i::workers])
            proc = subprocess.Popen(
                [python, "-c", _WORKER, scenario, ",".join(map(str, mine)), str(os.getpid())],
                cwd=copy, env=_env(copy), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1,
            )
            worker = _Worker(proc, mine)
            procs.append(worker)
            assert proc.stdout is not None
            selector.register(proc.stdout, selectors.EVENT_READ, worker)
        while True:
            best = min((s for s in failed if s not in refused), key=order.__getitem__, default=None)
            if best is not None:
                if not accept(failed[best]):
                    refused.add(best)
                    passed.add(best)  # not the mutant's doing: the search goes on past it
                    continue
                if all(w.next_seed is None or order[w.next_seed] > order[best] for w in procs):
                    return failed[best], len(passed), False
            if all(w.finished for w in procs):
                return None, len(passed), False
            timeout = None if deadline is None else deadline - time.monotonic()
            if timeout is not None and timeout <= 0:
                return None, len(passed), True
            events = selector.select(timeout=timeout)
            for key, _mask in events:
                worker = key.data
                stream: IO[str] = key.fileobj  # type: ignore[assignment]
                line = stream.readline()
                if not line:  # the worker died: every seed it had left counts as an error
                    selector.unregister(stream)
                    worker.proc.wait()
                    if not worker.finished:
                        seed = worker.seeds[worker.done]
                        failed[seed] = (seed, [], f"worker exited with status {worker.proc.returncode} before seed {seed} ended")
                        worker.done = len(worker.seeds)
                    continue
                info = json.loads(line)
                if "where" in info:
                    if not _inside(copy, info["where"]):
                        raise RuntimeError(f"a worker imported casty/sim from outside the copy: {info['where']}")
                    continue
                seed = int(info["seed"])
                worker.done += 1
                if info["failures"] or info["error"]:
                    failed[seed] = (seed, list(info["failures"]), info["error"])
                else:
                    passed.add(seed)
    finally:
        for worker in procs:
            if worker.proc.poll() is None:
                worker.proc.kill()
            worker.proc.wait()
            if worker.proc.stdout is not None:
                worker.proc.stdout.close()
        selector.close()


# ================================================================== hunting =====

Status = Literal["CAUGHT", "NOT CAUGHT", "STALE", "INVALID"]


@dataclass
class Outcome:
    """What one mutant came to: caught (where, how), not caught (what was tried), stale or invalid (why)."""

    mutant: Mutant
    status: Status
    scenario: str | None = None
    seed: int | None = None
    detail: str = ""
    tried: dict[str, int] = field(default_factory=dict)  # scenario -> seeds run on it
    out_of_time: bool = False
    seconds: float = 0.0

    @property
    def caught_by(self) -> str:
        if self.status == "CAUGHT":
            return f"{self.scenario} seed {self.seed}"
        if self.status == "NOT CAUGHT":
            tried = ", ".join(f"{name} ({count})" for name, count in self.tried.items()) or "no scenario"
            limit = max(self.tried.values(), default=0)
            budget = " (time budget spent)" if self.out_of_time else ""
            return f"NOT CAUGHT within {limit} seeds of {tried}{budget}"
        return self.status


@contextmanager
def scratch_dir(keep: bool = False) -> Iterator[Path]:
    """A temporary directory for the copies of one run, removed after it (unless ``keep``)."""
    path = Path(tempfile.mkdtemp(prefix="casty-mutant-"))
    try:
        yield path
    finally:
        if not keep:
            shutil.rmtree(path, ignore_errors=True)


class Baseline:
    """The unpatched copy: a failure counts for a mutant only if the same scenario and seed pass here."""

    def __init__(self, copy: Path, python: str) -> None:
        self.copy = copy
        self.python = python
        self._known: dict[tuple[str, int], bool] = {}

    def passes(self, scenario: str, seed: int) -> bool:
        key = (scenario, seed)
        if key not in self._known:
            verdict, _, _ = _first_failure(self.copy, scenario, [seed], 1, None, self.python, lambda _v: True)
            self._known[key] = verdict is None
        return self._known[key]


def hunt(
    mutant: Mutant,
    *,
    baseline: Baseline,
    seeds: Sequence[int],
    scenarios: Sequence[str] | None = None,
    available: Sequence[str],
    workers: int = 1,
    budget: float | None = None,
    source: Path = ROOT,
    rev: str | None = None,
    python: str = sys.executable,
    progress: Callable[[str], None] | None = None,
) -> Outcome:
    """Patch a fresh copy with ``mutant`` and run scenarios on it until one fails; the ``Outcome``."""
    started = time.monotonic()
    deadline = None if budget is None else started + budget
    with scratch_dir() as scratch:
        copy = copy_runtime(scratch / "tree", source=source, rev=rev)
        try:
            apply_mutant(mutant, copy)
        except Stale as exc:
            return Outcome(mutant, "STALE", detail=str(exc), seconds=time.monotonic() - started)
        error, _names = import_error(copy, python)
        if error is not None:
            return Outcome(mutant, "INVALID", detail=f"does not import: {error}", seconds=time.monotonic() - started)
        order = list(scenarios) if scenarios is not None else [*mutant.targets, *GENERAL_SCENARIOS]
        chosen = [name for i, name in enumerate(order) if name in available and name not in order[:i]]
        outcome = Outcome(mutant, "NOT CAUGHT")
        for name in chosen:
            if progress is not None:
                progress(f"{mutant.name}: {name} seeds {seeds[0]}..{seeds[-1]}")

            def accept(verdict: SeedVerdict, name: str = name) -> bool:
                seed, _failures, err = verdict
                if err is not None and err.split(":", 1)[0] in INVALID_ERRORS:
                    return True  # reported as INVALID below, whatever the baseline does
                return baseline.passes(name, seed)

            verdict, ran, out_of_time = _first_failure(copy, name, seeds, workers, deadline, python, accept)
            outcome.tried[name] = ran + (1 if verdict is not None else 0)
            if verdict is not None:
                seed, failures, err = verdict
                if err is not None and err.split(":", 1)[0] in INVALID_ERRORS:
                    outcome.status, outcome.detail = "INVALID", f"{name} seed {seed} raised {err}"
                else:
                    outcome.status, outcome.scenario, outcome.seed = "CAUGHT", name, seed
                    outcome.detail = failures[0] if failures else f"raised {err}"
                break
            if out_of_time:
                outcome.out_of_time = True
                break
        outcome.seconds = time.monotonic() - started
        return outcome


def format_table(outcomes: Sequence[Outcome]) -> list[str]:
    """One row per mutant: name, the scenario that caught it, the first failing seed, the first failure, the rule it breaks.

    A mutant not caught reads ``NOT CAUGHT within N seeds`` and lists the scenarios tried
    (with the seeds each ran); a stale or invalid one says why in the ``how`` column.
    """
    rows = [("mutant", "caught by", "seed", "how", "rule it breaks")]
    for outcome in outcomes:
        if outcome.status == "CAUGHT":
            by, seed, how = str(outcome.scenario), str(outcome.seed), outcome.detail
        elif outcome.status == "NOT CAUGHT":
            limit = max(outcome.tried.values(), default=0)
            by, seed = f"NOT CAUGHT within {limit} seeds", "-"
            tried = ", ".join(f"{name} ({count})" for name, count in outcome.tried.items()) or "no scenario"
            how = f"tried {tried}" + (" (time budget spent)" if outcome.out_of_time else "")
        else:
            by, seed, how = outcome.status, "-", outcome.detail
        how = " ".join(how.split())
        rows.append((outcome.mutant.name, by, seed, how[:100] + ("..." if len(how) > 100 else ""), outcome.mutant.rule))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = []
    for i, row in enumerate(rows):
        lines.append("  ".join(cell.ljust(widths[j]) for j, cell in enumerate(row[:4])) + "  " + row[4])
        if i == 0:
            lines.append("  ".join("-" * w for w in widths) + "  " + "-" * 14)
    return lines
