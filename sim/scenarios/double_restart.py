"""A double restart: both seed nodes of a 5-node cluster crash together and come back a few seconds later.

Issue 10, finding 1. The two restarted nodes have no memory of the view: for the first
instants after the restart each sees only the other. If they counted 2 of 2 alive as a
quorum, a restarted node would acquire a key with "found nothing" and confirm writes while
the live owner on the majority side (n3, n4, n5) holds a newer version: confirmed increments
lost, two writers per epoch. The membership rule that forbids it: a node owns nothing until it
has learned the view (``casty.protocol.membership``, "Learning the view").

The plan of a seed (``world.rng("plan", "faults")``): n1 and n2 crash together at a time drawn
in the load, and restart together 1-6 s later. Clients on the majority side increment the
counters throughout; the final counts are read from n3 after a quiet time. Nothing else goes
wrong (no loss, no partition): every confirmed write reached a live replica as well as the
crashed ones, unless it was confirmed in the very instant of the crash.
"""

from __future__ import annotations

from collections.abc import Generator
from datetime import timedelta
from typing import Any

import simpy

from casty import ActorSystem
from casty.cluster.config import Cluster

from ..checks import epochs_only_grow, no_confirmed_write_lost, single_writer_per_epoch
from ..world import World
from . import scenario
from .cluster import RANDOM_COUNTERS, RANDOM_NODES, Settle, _confirm, cl_counter, confirmed_counts_kept

CONVERGED = 2.0
LOAD_END = 28.0  # client increments in [CONVERGED, LOAD_END)
READ_AT = 38.0  # every node up and resynced long before
UNTIL = 42.0
MAJORITY = ("n3", "n4", "n5")  # the nodes that never crash: the clients' side
DOUBLE = ("n1", "n2")  # both seeds


def double_restart_plan(world: World) -> tuple[float, float]:
    """``(crash_at, down)`` of one seed: n1 and n2 crash together at ``crash_at`` and restart ``down`` s later."""
    rng = world.rng("plan", "faults")
    crash_at = CONVERGED + rng.uniform(1.0, 14.0)
    down = rng.uniform(1.0, 6.0)
    return crash_at, down


def setup_double_restart(world: World, crash_at: float, down: float) -> None:
    """Five nodes (seeds n1 and n2), majority-side clients, and the double crash and restart at the times given."""
    for name in RANDOM_NODES:
        world.add_node(name, cluster=Cluster(seeds=["n1", "n2"], heartbeat=0.2, suspect_after=1, dead_after=1), ask_timeout=2.0, write_timeout=1.0)
    world.results["plan"] = {"crash_at": crash_at, "down": down, "nodes": list(DOUBLE)}
    load = world.rng("plan", "load")

    def faults(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(crash_at)
        for node in DOUBLE:
            world.crash(node)
        yield world.timeout(down)
        for node in DOUBLE:
            world.restart(node)

    def clients(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(CONVERGED)
        i = 0
        while world.now < LOAD_END:
            yield world.timeout(load.uniform(0.05, 0.3))
            _confirm(world, load.choice(MAJORITY), load.choice(RANDOM_COUNTERS), f"incr:{i}")
            i += 1
        yield world.timeout(READ_AT - world.now)
        for key in RANDOM_COUNTERS:
            _read_final(world, key)

    world.process(faults(world))
    world.process(clients(world))


def _read_final(world: World, key: str) -> None:
    async def client(system: ActorSystem) -> Any:
        ref = system.ref(cl_counter, key)
        last: Any = None
        for _ in range(4):  # a stale owner's Settle is fenced (Unavailable): the next one acquires a newer epoch
            try:
                return await ref.ask(Settle())
            except Exception as exc:
                last = type(exc).__name__
        return last

    task = world.spawn("n3", client)
    task.add_done_callback(lambda t: world.results.__setitem__(f"final:{key}", t.result()))


def double_restart_counts(world: World) -> None:
    """Every increment a majority-side client saw confirmed is in the final count (distinct counts, none above it)."""
    confirmed_counts_kept(world, RANDOM_COUNTERS, "double_restart_counts")


@scenario(
    "cluster-double-restart",
    "5 nodes: both seed nodes crash together and restart 1-6 s later under majority-side increments; no confirmed increment is lost and no epoch has two writers",
    until=timedelta(seconds=UNTIL),
    checks=(double_restart_counts, epochs_only_grow, single_writer_per_epoch, no_confirmed_write_lost),
)
def cluster_double_restart(world: World) -> None:
    setup_double_restart(world, *double_restart_plan(world))
