"""Sweeps: run one scenario under many seeds, in parallel processes, and report every violation.

Each seed runs in a worker process (``concurrent.futures``), with its checks; a worker
returns only small, picklable facts (seed, failures, digest, row count), never the world.
A failure is reported with the exact command that reproduces it on one seed.
"""

from __future__ import annotations

import concurrent.futures as futures
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from . import scenarios
from .faults import FaultPlan
from .world import World

__all__ = ["SeedResult", "parse_seeds", "run_seed", "sweep"]


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

    @property
    def ok(self) -> bool:
        return not self.failures and self.error is None

    @property
    def reproduce(self) -> str:
        return f"python -m sim run {self.name} --seed {self.seed} --check"

    @property
    def replay(self) -> str | None:
        """The command that replays the exact plan (None for a scenario without one)."""
        if self.plan_json is None:
            return None
        return f"{self.reproduce} --plan {shlex.quote(self.plan_json)}"


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


def run_seed(name: str, seed: int) -> SeedResult:
    """Run one seed with its checks (in a worker process); exceptions become results, not crashes."""
    world: list[World] = []
    try:
        result = scenarios.run(name, seed, on_world=world.append)
    except Exception as exc:  # a scenario that blows up is a finding too
        plan = _plan_of(world[0]) if world else (None, None)
        return SeedResult(name, seed, (), "", 0, error=f"{type(exc).__name__}: {exc}", plan=plan[0], plan_json=plan[1])
    plan = _plan_of(result.world)
    return SeedResult(name, seed, tuple(str(f) for f in result.failures), result.trace.digest(), len(result.trace), plan=plan[0], plan_json=plan[1])


def _plan_of(world: World) -> tuple[str | None, str | None]:
    drawn = world.results.get("plan")
    if isinstance(drawn, FaultPlan):
        return str(drawn), drawn.to_json()
    return None, None


def sweep(
    name: str,
    seeds: Sequence[int],
    *,
    workers: int = 2,
    progress: Callable[[SeedResult], None] | None = None,
) -> list[SeedResult]:
    """Run ``name`` for every seed on ``workers`` processes; results in seed order."""
    scenarios.get(name)  # fail fast on an unknown name, in this process
    results: dict[int, SeedResult] = {}
    if workers <= 1:
        for seed in seeds:
            results[seed] = run_seed(name, seed)
            if progress is not None:
                progress(results[seed])
    else:
        with futures.ProcessPoolExecutor(max_workers=workers) as pool:
            pending = {pool.submit(run_seed, name, seed): seed for seed in seeds}
            for done in futures.as_completed(pending):
                result = done.result()
                results[result.seed] = result
                if progress is not None:
                    progress(result)
    return [results[seed] for seed in seeds]


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
    rate = len(results) / elapsed if elapsed > 0 else 0.0
    lines.append(f"scenario={name} seeds={len(results)} ok={len(results) - len(bad)} in {elapsed:.1f} s ({rate:.2f} seeds/s)")
    lines.append(f"violations={len(bad)}")
    return lines


def timed_sweep(name: str, seeds: Sequence[int], workers: int) -> tuple[list[SeedResult], float]:
    started = time.perf_counter()
    results = sweep(name, seeds, workers=workers)
    return results, time.perf_counter() - started
