"""ClusterNode's sweeps on three simulated nodes: a restarted owner rejoins through the handoff and takes its keys back."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from casty.cluster.config import Cluster
from sim.network import Latency, LinkModel
from sim.world import World

from test_cluster_replication import DECLARED_DEAD, Arm, Get, Inc, ask_from, key_not_owned_by, owner, rep_counter, ticker

NODES = ("n1", "n2", "n3")
CLUSTER = Cluster(seeds=["n1", "n2"], heartbeat=0.2, suspect_after=1, dead_after=1)
GRACE = 1.0 + 1.0  # write_timeout + 1 s


@pytest.fixture
def world() -> Iterator[World]:
    w = World(5, network=LinkModel(latency=Latency(0.002, 0.0)))
    for name in NODES:
        w.add_node(name, cluster=CLUSTER, ask_timeout=2.0, write_timeout=1.0)
    w.run(until=2.0)
    yield w
    w.close()


def test_the_interim_owner_ends_its_activation_when_the_owner_returns(world: World) -> None:
    """n3 owns a counter, crashes, n2 serves it meanwhile; when n3 is back the handoff ends n2's activation and n3 goes on from the count."""
    key = next(k for k in (f"h{i}" for i in range(200)) if owner(world, "n1", rep_counter, k) == "n3")
    assert [ask_from(world, "n1", rep_counter, key, Inc()) for _ in range(3)] == [1, 2, 3]
    world.crash("n3")
    world.run(until=world.now + DECLARED_DEAD)
    interim = owner(world, "n1", rep_counter, key)
    assert interim not in (None, "n3")
    assert ask_from(world, "n1", rep_counter, key, Inc()) == 4
    restarted_at = world.now
    world.restart("n3")
    world.run(until=world.now + GRACE + 1.0)
    assert owner(world, "n1", rep_counter, key) == "n3"
    ended = [r for r in world.trace.of("activation.ended", key=key) if r.t > restarted_at]
    assert [(r.node, r.get("reason")) for r in ended] == [(interim, "handoff")]
    handoffs = [r for r in world.trace.of("handoff.ended") if r.node == "n3" and r.t > restarted_at]
    assert handoffs and handoffs[0].t >= restarted_at + GRACE  # the restarted node waited its grace before pulling
    assert ask_from(world, "n1", rep_counter, key, Inc()) == 5
    acquired = [r for r in world.trace.of("epoch.acquired", key=key) if r.t > restarted_at]
    assert [r.node for r in acquired] == ["n3"] and acquired[0].get("found") >= 4


def test_a_scheduled_key_moves_back_by_itself(world: World) -> None:
    """A ticking key whose owner restarts resumes on the interim owner, then goes back to the restarted owner with no message."""
    key = key_not_owned_by(world, ticker, "n3", "t")
    home = owner(world, "n1", ticker, key)
    assert home is not None
    ask_from(world, "n1", ticker, key, Arm(0.5))
    world.run(until=world.now + 2.0)
    world.crash(home)
    world.run(until=world.now + DECLARED_DEAD + 1.0)
    restarted_at = world.now
    world.restart(home)
    world.run(until=world.now + GRACE + 3.0)
    fired_after = [r for r in world.trace.of("schedule.fired", key=key) if r.t > restarted_at + GRACE + 1.0]
    assert fired_after and {r.node for r in fired_after} == {home}
    assert ask_from(world, "n1", ticker, key, Get()) >= 10


def test_a_cut_off_owner_answers_a_read_from_memory_until_its_next_write_is_fenced(world: World) -> None:
    """Reads are not linearizable: an owner cut off in a minority, which lost the key without writing, answers Get stale after the heal; its next write is fenced and the retry reads the replicas' count."""
    from sim.scenarios.cluster import Get as CounterGet
    from sim.scenarios.cluster import Incr, Settle, cl_counter

    key = next(k for k in (f"r{i}" for i in range(200)) if owner(world, "n1", cl_counter, k) == "n3")
    assert [ask_from(world, "n3", cl_counter, key, Incr()) for _ in range(2)] == [1, 2]
    world.partition(["n3"], ["n1", "n2"])
    world.run(until=world.now + DECLARED_DEAD)
    assert [ask_from(world, "n1", cl_counter, key, Incr()) for _ in range(3)] == [3, 4, 5]  # the majority moved on
    world.heal()
    world.run(until=world.now + 1.0)
    assert owner(world, "n1", cl_counter, key) == "n3"  # back on the ring's first replica
    assert ask_from(world, "n1", cl_counter, key, CounterGet()) == 2  # n3's memory: stale
    settled = ask_from(world, "n1", cl_counter, key, Settle())
    if not isinstance(settled, int):  # the stale owner's write was fenced: it ended, the next one acquires
        settled = ask_from(world, "n1", cl_counter, key, Settle())
    assert settled == 5
