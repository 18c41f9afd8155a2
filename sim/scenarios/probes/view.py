"""Probes of learning the membership view while the members that remember it are paused: restarted nodes must not read from nothing, rings must agree."""

from __future__ import annotations

from collections.abc import Generator
from datetime import timedelta
from typing import Any

import simpy

from casty.cluster.config import Cluster
from casty.protocol.placement import Ring

from ...world import World
from .. import scenario
from . import Read, tally
from .kit import CLUSTER_CHECKS, CONVERGED, DECLARED_DEAD, _adds, _ask, _expect, _ints, _nodes, _on_a_key, _placed


# ============================================= learning the view beside paused members ======

SIX = tuple(f"n{i}" for i in range(1, 7))
TWO_SEEDS = Cluster(seeds=["n1", "n2"], heartbeat=0.2, suspect_after=1, dead_after=1)
PAUSED = ("n2", "n6")  # dead to n1 while the others restart, never removed (remove_after is 60 s)
RESTARTED = ("n3", "n4", "n5")
RING_KEYS = tuple(f"ring{i}" for i in range(40))


def _kept_beside_paused(world: World) -> None:
    """A read answered on a restarted node while the key's other replicas (n2 and n6) are paused is the confirmed count."""
    check = "kept_beside_paused"
    confirmed = _ints(world.results.get("before"))
    during = world.results.get("during")
    _expect(check, len(confirmed) == 3, f"the Adds before the faults were not all confirmed: {world.results.get('before')!r}")
    _expect(
        check,
        not isinstance(during, int) or during == max(confirmed),
        f"n3 read {during} while n2 and n6, paused, held {max(confirmed)} (replicas {world.results.get('beside_replicas')})",
    )


def _beside_key(world: World) -> str:
    """A key whose replicas are n2, n6 and a restarted node, and which a ring without n2 and n6 gives to n3, n4, n5 (n3 first)."""
    short = Ring(("n1", *RESTARTED))
    for key in (f"beside{i}" for i in range(2000)):
        replicas = _placed(world, key)[1]
        if set(PAUSED) <= set(replicas) and "n1" not in replicas and short.replicas(tally.name, key, 3)[0] == "n3" and "n1" not in short.replicas(tally.name, key, 3):
            return key
    raise RuntimeError("no key fits the restart-beside-paused plan")


def _rings_agree(world: World) -> None:
    """While n2 and n6 are paused (dead, not removed), every node up gives each key the replica set n1 gives it."""
    check = "rings_agree"
    placements = world.results.get("placements")
    _expect(check, isinstance(placements, dict), f"the placements were not read: {placements!r}")
    assert isinstance(placements, dict)
    reference = placements["n1"]
    for node in RESTARTED:
        differ = [key for key in RING_KEYS if placements[node][key] != reference[key]]
        _expect(
            check,
            not differ,
            f"{node} places {len(differ)} of {len(RING_KEYS)} keys elsewhere than n1 (first: {differ[:1]}"
            f" on {[placements[node][k] for k in differ[:1]]}, n1: {[reference[k] for k in differ[:1]]})",
        )


@scenario(
    "restart-beside-paused",
    "6 nodes: n2 and n6 paused past dead_after, then n3, n4, n5 crash and restart together; their rings must keep n2 and n6",
    until=timedelta(seconds=17),
    checks=(_kept_beside_paused, _rings_agree, *CLUSTER_CHECKS),
)
def restart_beside_paused(world: World) -> None:
    """Swarm seed 679, reduced. n2 and n6 are paused long enough to be dead to n1, which keeps them
    on its ring (dead, not removed). n3, n4 and n5 crash together and restart: each hears n1, which
    learned the view in its life and names n2 and n6, and the other two, still listening, which
    name only whom they heard since they started (their disks were wiped: replaced machines, no remembered view). Only members that learned the view vote for the
    members taken in on learning ("Learning the view", (5)): n1 alone, so n2 and n6 are on every
    restarted ring, as on n1's, and every key has one replica set. Counting the silence of the
    restarted two as votes leaves n2 and n6 off their rings (named by one voter of three), while
    the disk's memory of them gives way: keys whose replicas include n2 or n6 get other replicas
    there, and a replica that holds nothing could accept an owner the others have fenced: a key
    counted to 3 on n2, n6 and a restarted node is read from nothing on n3 (its replicas there are
    all empty), where the whole ring says its replicas are paused (Unavailable).
    """
    _nodes(world, TWO_SEEDS, SIX)

    def script(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(CONVERGED)
        key = _beside_key(world)
        world.results["beside_replicas"] = list(_placed(world, key)[1])  # n2, n6 and a node that restarts wiped
        _adds(world, "n1", key, 3, "before")
        yield world.timeout(1.0)
        for node in PAUSED:
            world.pause(node)
        yield world.timeout(DECLARED_DEAD + 0.5)
        for node in RESTARTED:
            world.crash(node)
        yield world.timeout(1.0)
        for node in RESTARTED:
            world.restart(node, wipe_disk=True)  # replaced machines: they remember nothing
        yield world.timeout(2.5)  # the listen window, the round trips and the sync rounds are long over
        _ask(world, "n3", key, Read(), "during")
        yield world.timeout(2.5)  # the read is answered, or timed out, before n2 and n6 come back
        world.results["placements"] = {
            node: {key: list(world.system(node).placement(tally, key).replicas) for key in RING_KEYS} for node in ("n1", *RESTARTED)
        }
        for node in PAUSED:
            world.resume(node)
        yield world.timeout(4.0)

    world.process(script(world))


# ================================= restarted nodes while the members that remember are paused ======

FIVE_NODES = tuple(f"n{i}" for i in range(1, 6))


def _no_read_from_nothing(world: World) -> None:
    """A read answered while the members that remember the cluster are paused is the last confirmed count."""
    check = "no_read_from_nothing"
    confirmed = _ints(world.results.get("before"))
    during = world.results.get("during")
    _expect(check, len(confirmed) == 3, f"the Adds before the faults were not all confirmed: {world.results.get('before')!r}")
    _expect(
        check,
        not isinstance(during, int) or during == max(confirmed),
        f"a restarted node read {during} while n3 held {max(confirmed)} (the members that remember the cluster were paused)",
    )


def _restart_beside_paused(world: World, crashed: tuple[str, str], paused: tuple[str, ...], wipe: bool) -> None:
    """Count to 3 on a key; pause ``paused``, crash ``crashed`` and restart them 1 s later; read on the first one."""
    def script(world: World, key: str) -> Generator[simpy.Event, Any, None]:
        _adds(world, "n3", key, 3, "before")
        yield world.timeout(1.0)
        for node in paused:
            world.pause(node)
        for node in crashed:
            world.crash(node)
        yield world.timeout(1.0)
        for node in crashed:
            world.restart(node, wipe_disk=wipe)
        yield world.timeout(1.5)  # the listen window is over: a node that learned now would serve
        _ask(world, crashed[0], key, Read(), "during")
        yield world.timeout(2.5)
        for node in paused:
            world.resume(node)
        yield world.timeout(6.0)
        _ask(world, "n3", key, Read(), "final")

    _on_a_key(world, "n3", "kept", script, cluster=TWO_SEEDS, nodes=FIVE_NODES)


@scenario(
    "seed-restart-unheard-seed",
    "5 nodes, seeds n1 and n2: n1, n3, n4 paused while n2 and n5 restart with wiped disks; they must not learn a view of two",
    until=timedelta(seconds=18),
    checks=(_no_read_from_nothing, *CLUSTER_CHECKS),
)
def seed_restart_unheard_seed(world: World) -> None:
    """Swarm seed 1563, reduced. n2 (a seed) and n5 crash and restart with wiped disks (replaced
    machines) while n1 (the other seed), n3 and n4, which remember the cluster, are paused. n2 and
    n5 hear only each other, and neither learned the view in its life: "Learning the view" (2)
    keeps them from learning until one hears a member that learned it, or every other seed.
    Without that rule the two take 2 of 2 for the cluster at the end of their window, own the key,
    and n2 reads it from nothing (0, or what it wrote since) while n3 holds 3.
    """
    _restart_beside_paused(world, ("n2", "n5"), ("n1", "n3", "n4"), wipe=True)


@scenario(
    "seeds-restart-with-disks",
    "5 nodes, seeds n1 and n2: both seeds restart with their disks while n3, n4, n5 are paused; they must not found a cluster of two",
    until=timedelta(seconds=18),
    checks=(_no_read_from_nothing, *CLUSTER_CHECKS),
)
def seeds_restart_with_disks(world: World) -> None:
    """Swarm seed 848, reduced. Both seeds crash and restart with their disks while n3, n4 and n5,
    which remember the cluster, are paused. Every other seed is heard, so (2) lets them found a
    cluster; what stops them is "The remembered view": each disk names n3, n4 and n5, held dead
    until heard, so the two count 2 of 5 and own nothing. A node that drops its disk's list
    founds a cluster of two and n1 reads the key from nothing while n3 holds 3.
    """
    _restart_beside_paused(world, ("n1", "n2"), ("n3", "n4", "n5"), wipe=False)
