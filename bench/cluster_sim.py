"""The simulated hour of ``sim_throughput.py`` on a 3-node cluster, against the same hour on one node.

1000 keys, each with a persisted 1-second interval schedule, over a simulated hour, on three
simulated nodes running the real casty cluster runtime (``Cluster(seeds=["n1"])``): every key
has replicas=3 and write level ``majority``, the defaults of ``@actor``, so each delivery is
the single-node work plus an owner epoch held over three replicas and every state write and
next-due write confirmed by two of them over the simulated network (frames encoded, sent,
delivered by simpy events and decoded). The keys are armed from n1 once the membership has
converged; the owners are spread over the ring.

Printed, for the single node and for the cluster: deliveries, the wall time of the simulated
hour and deliveries per wall second; then the ratio cluster wall / single-node wall (target
under 4x). The cluster runs twice (``--grid``): with every key on one shared grid of dues, like
the single node (its 1000 keys are armed in one instant, so they beat together: one loop turn
serves them all), and with each key on its own grid, 1 s after its arming (the network
scatters the armings over milliseconds, so every key beats at its own instant). Trace rows are counted, not kept (``World(keep=...)``), as in ``sim_throughput.py``.

    python bench/cluster_sim.py                    # the full hour, both runs
    python bench/cluster_sim.py --minutes 5
    python bench/cluster_sim.py --profile out.prof # cProfile the cluster run only, write the stats there
"""

from __future__ import annotations

import argparse
import cProfile
import platform
import pstats

from casty.cluster.config import Cluster
from metronome import keep_faults_and_nodes, metronome, run_metronomes, single_node
from sim.world import World

NODES = ("n1", "n2", "n3")
CLUSTER = Cluster(seeds=["n1"], heartbeat=1.0, suspect_after=5.0, dead_after=5.0)
CONVERGED = 4.0  # simulated seconds for the three members to learn the view (the listen window is 3 heartbeats)
ARMED_BY = CONVERGED + 5.0  # 1000 first asks: an epoch round and a write-back each, over the network


def cluster(
    keys: int, minutes: float, profiler: cProfile.Profile | None = None, *, aligned: bool = False
) -> tuple[int, float, dict[str, int]]:
    """The hour on three cluster nodes: (deliveries, wall seconds, keys owned per node)."""
    world = World(0, keep=keep_faults_and_nodes)
    for name in NODES:
        world.add_node(name, cluster=CLUSTER)
    world.run(until=CONVERGED)
    owners: dict[str, int] = {}
    system = world.system("n1")
    for i in range(keys):
        owner = system.placement(metronome, f"k{i}").owner or "none"
        owners[owner] = owners.get(owner, 0) + 1
    try:
        delivered, elapsed = run_metronomes(world, "n1", keys, minutes, armed_by=ARMED_BY, aligned=aligned, profiler=profiler)
    finally:
        world.close()
    return delivered, elapsed, owners


def shares(stats: pstats.Stats, top: int) -> None:
    """Print the share of profiled time (own time, not counting callees) per source file, then the ``top`` functions."""
    raw: dict[tuple[str, int, str], tuple[int, int, float, float, object]] = stats.stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in raw.values())
    per_file: dict[str, float] = {}
    for (path, _line, name), (_cc, _nc, own, _cum, _callers) in raw.items():
        where = _short(path) if path != "~" else f"builtin {name}"
        per_file[where] = per_file.get(where, 0.0) + own
    print(f"profile: {total:.1f} s of own time; by file")
    for where, own in sorted(per_file.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {100 * own / total:5.1f}%  {where}")
    print("by function (own time, cumulative time, calls)")
    rows = sorted(raw.items(), key=lambda kv: -kv[1][2])[:top]
    for (path, line, name), (_cc, calls, own, cum, _callers) in rows:
        print(f"  {100 * own / total:5.1f}%  {100 * cum / total:5.1f}%  {calls:9d}  {_short(path)}:{line} {name}")


def _short(path: str) -> str:
    for marker in ("/casty/", "/sim/", "/simpy/", "/bench/"):
        if marker in path:
            return marker.strip("/") + "/" + path.split(marker, 1)[1]
    return path.rsplit("/", 1)[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--profile", metavar="FILE", help="cProfile the cluster's timed run, dump the stats to FILE and print shares")
    parser.add_argument("--top", type=int, default=25, help="with --profile: how many files and functions to print")
    parser.add_argument(
        "--grid", choices=("shared", "own", "both"), default="both",
        help="shared: every key's first due at one instant (as on the single node, whose keys are armed in one instant); "
        "own: each key's grid starts 1 s after its arming, scattered by the network",
    )
    args = parser.parse_args()
    print(f"python               {platform.python_version()} {platform.python_implementation()}")
    print(f"keys                 {args.keys}")
    print(f"simulated            {args.minutes:g} min")
    one, one_wall = single_node(args.keys, args.minutes)
    print(f"single.delivered     {one}")
    print(f"single.wall.s        {one_wall:.1f}")
    print(f"single.deliveries/s  {one / one_wall:.0f}")
    for grid in ("shared", "own") if args.grid == "both" else (args.grid,):
        profiler = cProfile.Profile() if args.profile else None
        many, many_wall, owners = cluster(args.keys, args.minutes, profiler, aligned=grid == "shared")
        name = f"cluster.{grid}"
        print(f"{name}.owners       {' '.join(f'{n}={c}' for n, c in sorted(owners.items()))}")
        print(f"{name}.delivered    {many}")
        print(f"{name}.wall.s       {many_wall:.1f}{' (profiled)' if profiler else ''}")
        print(f"{name}.deliveries/s {many / many_wall:.0f}")
        print(f"{name}.ratio.wall   {many_wall / one_wall:.2f}x (target < 4x)")
        if profiler is not None:
            profiler.dump_stats(args.profile)
            shares(pstats.Stats(args.profile), args.top)


if __name__ == "__main__":
    main()
