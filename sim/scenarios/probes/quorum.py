"""A probe of the membership quorum: a minority cut off past ``remove_after`` must not remove the majority."""

from __future__ import annotations

from collections.abc import Generator
from datetime import timedelta
from typing import Any

import simpy

from casty.cluster.config import Cluster

from ...world import World
from .. import scenario
from . import Read
from .kit import CLUSTER_CHECKS, CONVERGED, FIVE, _adds, _ask, _expect, _ints, _on_a_key, _paced_adds


# ============================================================= membership quorum ======

LONG = Cluster(seeds=["n1"], heartbeat=0.2, suspect_after=1, dead_after=1, remove_after=3)
CUT_AT = 3.0
CUT_FOR = 12.0


def _no_increment_lost(world: World) -> None:
    """Every Add that was answered (confirmed) on either side of the long partition is in the final count."""
    check = "no_increment_lost"
    minority = _ints(world.results.get("minority"))
    majority = _ints(world.results.get("majority"))
    final = world.results.get("final")
    _expect(check, isinstance(final, int), f"the final count was not read: {final!r}")
    assert isinstance(final, int)
    confirmed = len(minority) + len(majority) + len(_ints(world.results.get("before")))
    _expect(check, final >= confirmed, f"final count {final} < {confirmed} confirmed Adds ({len(minority)} on the cut-off side)")
    _expect(check, bool(majority), "the majority confirmed nothing during the partition")


@scenario(
    "long-partition",
    "5 nodes: a key's owner and one more node are cut off for 12 s, past remove_after (3 s); they must not go on as a cluster of two",
    until=timedelta(seconds=30),
    checks=(_no_increment_lost, *CLUSTER_CHECKS),
)
def long_partition(world: World) -> None:
    def script(world: World, key: str) -> Generator[simpy.Event, Any, None]:
        _adds(world, "n1", key, 2, "before")
        yield world.timeout(CUT_AT - CONVERGED)
        world.partition(["n4", "n5"], ["n1", "n2", "n3"])
        _paced_adds(world, "n4", key, CUT_FOR, "minority")
        _paced_adds(world, "n1", key, CUT_FOR, "majority")
        yield world.timeout(CUT_FOR)
        world.heal()
        yield world.timeout(8.0)
        _ask(world, "n1", key, Read(), "final")

    _on_a_key(world, "n4", "cut", script, cluster=LONG, nodes=FIVE)
