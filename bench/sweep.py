"""Seeds per second of a sweep: one process worker, two, and a Dask LocalCluster of two.

A sweep's seeds are independent, so two workers should come close to twice the rate of
one (target: 2 workers >= 1.8x of 1). Each executor is started and warmed up before the
clock starts (its workers have imported casty, sim and every scenario module), so the
figures measure seeds, not process start-up. Every executor runs the same seeds, and the
script checks that their results are identical, seed for seed (failures and digests):
the parallel runs must be the same runs.

    python bench/sweep.py                    # swarm, seeds 0:16, spawn workers, Dask if installed
    python bench/sweep.py --seeds 0:8 --scenario cluster-random --no-dask
    python bench/sweep.py --start fork

The machine's load counts: on a shared 2-core machine another process on a core takes it
from the second worker. The load averages before and after are printed with the figures.
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from multiprocessing import get_context
from typing import Any

from sim.sweep import SeedResult, parse_seeds, reference, sweep

TARGET = 1.8


def _warm(pause: float) -> int:
    """In a worker: import every scenario module (what the first seed would pay), then hold the worker a moment."""
    from sim import scenarios

    scenarios.registered()
    time.sleep(pause)
    return os.getpid()


def _timed(run: Callable[[], list[SeedResult]]) -> tuple[list[SeedResult], float]:
    started = time.perf_counter()
    results = run()
    return results, time.perf_counter() - started


def _pool(workers: int, start: str) -> ProcessPoolExecutor:
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=get_context(start))
    pids = {f.result() for f in [pool.submit(_warm, 0.5) for _ in range(workers)]}
    if len(pids) != workers:
        raise RuntimeError(f"warm-up reached {len(pids)} of {workers} workers")
    return pool


def _line(label: str, seeds: int, elapsed: float, base: float | None) -> str:
    rate = seeds / elapsed
    ratio = f"  ({rate / base:.2f}x of 1 worker)" if base else ""
    return f"{label:<24} {seeds} seeds in {elapsed:6.1f} s = {rate:5.2f} seeds/s{ratio}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", default="swarm", help="a built-in name or MODULE:NAME (default swarm)")
    parser.add_argument("--seeds", default="0:16", help="start:stop (default 0:16)")
    parser.add_argument("--start", default="spawn", choices=("spawn", "fork", "forkserver"), help="process start method")
    parser.add_argument("--no-dask", dest="dask", action="store_false", help="skip the Dask LocalCluster")
    args = parser.parse_args(argv)
    seeds = parse_seeds(args.seeds)
    ref = reference(args.scenario)
    print(f"scenario={ref} seeds={args.seeds} ({len(seeds)}) start={args.start} python={platform.python_version()} cpus={os.cpu_count()}")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    runs: dict[str, tuple[list[SeedResult], float]] = {}
    for workers in (1, 2):
        with _pool(workers, args.start) as pool:
            runs[f"processes x{workers}"] = _timed(lambda: sweep(ref, seeds, executor=pool, progress=False))
    if args.dask:
        try:
            distributed: Any = importlib.import_module("distributed")  # optional and untyped
        except ImportError:
            print("dask: `distributed` is not installed (pip install distributed): skipped")
        else:
            with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None) as cluster:
                with distributed.Client(cluster) as client:
                    client.run(_warm, 0.0)
                    executor: Executor | Any = client.get_executor()
                    runs["dask LocalCluster x2"] = _timed(lambda: sweep(ref, seeds, executor=executor, progress=False))

    base_results, base_elapsed = runs["processes x1"]
    base = len(seeds) / base_elapsed
    for label, (results, elapsed) in runs.items():
        print(_line(label, len(seeds), elapsed, None if label == "processes x1" else base))
    same = all(results == base_results for results, _ in runs.values())
    print(f"same results on every executor: {'yes' if same else 'NO'}; violations={sum(not r.ok for r in base_results)}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    two = len(seeds) / runs["processes x2"][1] / base
    print(f"target: 2 workers >= {TARGET}x of 1: {two:.2f}x {'met' if two >= TARGET else 'NOT met'}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
