"""The behaviour guard of a refactor: every built-in scenario's trace digest for seeds 0-9.

Not a benchmark: a structural change that claims "behaviour does not change" proves it by
leaving every digest as it was. ``--out FILE`` records them (JSON, scenario -> [digest per
seed]); ``--against FILE`` runs them again and prints each one that moved, exiting 1 if any did.
A process pool of ``--workers`` (2 on a 2-core machine) runs the seeds.

    python bench/digests.py --out /tmp/digests-before.json
    python bench/digests.py --against /tmp/digests-before.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from sim import scenarios
from sim.sweep import run_seed


def digest_of(job: tuple[str, int]) -> tuple[str, int, str]:
    """One seed's digest (an error's text in its place, so a run that raises moves too)."""
    name, seed = job
    result = run_seed(name, seed)
    return name, seed, result.digest if result.error is None else f"error: {result.error}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10, help="seeds 0..N-1 of every scenario (default 10)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--only", default="", help="comma-separated scenario names (default: all)")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--out", help="write the digests to this JSON file")
    group.add_argument("--against", help="compare with the digests in this JSON file")
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n] or sorted(scenarios.registered())
    jobs = [(name, seed) for name in names for seed in range(args.seeds)]
    started = time.perf_counter()
    found: dict[str, list[str]] = {name: [""] * args.seeds for name in names}
    with ProcessPoolExecutor(args.workers) as pool:
        for name, seed, digest in pool.map(digest_of, jobs, chunksize=4):
            found[name][seed] = digest
    print(f"{len(jobs)} runs of {len(names)} scenarios in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    if args.out:
        with open(args.out, "w") as out:
            json.dump(found, out, indent=1, sort_keys=True)
        return 0
    with open(args.against) as before_file:
        before: dict[str, list[str]] = json.load(before_file)
    moved = [(n, s) for n in names for s in range(args.seeds) if before.get(n, [None] * args.seeds)[s] != found[n][s]]
    for name, seed in moved:
        print(f"moved: {name} seed {seed}: {before.get(name, ['(absent)'] * args.seeds)[seed]} -> {found[name][seed]}")
    print(f"{len(jobs) - len(moved)} of {len(jobs)} digests unchanged")
    return 1 if moved else 0


if __name__ == "__main__":
    sys.exit(main())
