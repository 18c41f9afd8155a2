"""ClusterNode's sweeps on three simulated nodes: a restarted owner rejoins through the handoff and takes its keys back."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from casty import Context, actor
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


def test_a_cut_off_owner_steps_down_with_its_quorum_and_reads_the_replicas_count_after_the_heal(world: World) -> None:
    """An owner cut off in a minority ends its run (lost) when it loses its quorum, before the majority moves the key; after the heal its Get acquires the key again and reads the majority's count, not its stale memory."""
    from sim.scenarios.cluster import Get as CounterGet
    from sim.scenarios.cluster import Incr, Settle, cl_counter

    key = next(k for k in (f"r{i}" for i in range(200)) if owner(world, "n1", cl_counter, k) == "n3")
    assert [ask_from(world, "n3", cl_counter, key, Incr()) for _ in range(2)] == [1, 2]
    cut_at = world.now
    world.partition(["n3"], ["n1", "n2"])
    world.run(until=world.now + DECLARED_DEAD)
    ended = [(r.node, r.get("reason")) for r in world.trace.of("activation.ended", key=key) if r.t > cut_at]
    assert ended == [("n3", "lost")]
    stepped_down_at = next(r.t for r in world.trace.of("activation.ended", key=key) if r.t > cut_at)
    assert [ask_from(world, "n1", cl_counter, key, Incr()) for _ in range(3)] == [3, 4, 5]  # the majority moved on
    acquired = [r for r in world.trace.of("epoch.acquired", key=key) if r.t > cut_at]
    assert acquired and stepped_down_at < acquired[0].t  # n3 stepped down before a newer epoch existed
    world.heal()
    world.run(until=world.now + 1.0)
    assert owner(world, "n1", cl_counter, key) == "n3"  # back on the ring's first replica
    assert ask_from(world, "n1", cl_counter, key, CounterGet()) == 5  # a new run on n3, from the replicas
    assert ask_from(world, "n1", cl_counter, key, Settle()) == 5


def _cut_off_then_written(world: World, cut: str) -> tuple[str, float]:
    """A counter owned by n3 counts to 2 there; ``cut`` ("partition" or "pause") takes n3 away for 12 s while
    n1 counts on to 5 under a newer epoch; then every fault heals. The key, and when the faults healed."""
    from sim.scenarios.cluster import Incr, cl_counter

    key = next(k for k in (f"q{i}" for i in range(200)) if owner(world, "n1", cl_counter, k) == "n3")
    assert [ask_from(world, "n3", cl_counter, key, Incr()) for _ in range(2)] == [1, 2]
    if cut == "partition":
        world.partition(["n3"], ["n1", "n2"])
    else:
        world.pause("n3")
    world.run(until=world.now + DECLARED_DEAD)
    assert [ask_from(world, "n1", cl_counter, key, Incr()) for _ in range(3)] == [3, 4, 5]  # a newer epoch, elsewhere
    world.run(until=world.now + 12.0 - DECLARED_DEAD - 1.5)
    if cut == "partition":
        world.heal()
    else:
        world.resume("n3")
    return key, world.now


@pytest.mark.parametrize("after", [2.0, 8.0])
@pytest.mark.parametrize("cut", ["partition", "pause"])
def test_the_first_write_after_a_long_cut_off_owner_is_back_is_answered_with_the_confirmed_count(world: World, cut: str, after: float) -> None:
    """n3, cut off alone (partitioned, or paused past the failure detector) for 12 s while n1 counts on under a newer epoch, ends its stale run when it steps down (quorum lost, or told it was declared dead): 2-8 s after the heal the first Incr, routed to n3 again, answers 6, not Unavailable."""
    from sim.scenarios.cluster import Incr, cl_counter

    key, healed_at = _cut_off_then_written(world, cut)
    world.run(until=healed_at + after)
    assert owner(world, "n1", cl_counter, key) == "n3"  # back on the ring's first replica
    assert ask_from(world, "n1", cl_counter, key, Incr()) == 6
    assert ask_from(world, "n3", cl_counter, key, Incr()) == 7
    lost = [r for r in world.trace.of("write.failed", key=key) if r.get("reason") == "fenced"]
    assert lost == []  # no write of the stale epoch reached a replica that had promised the newer one


def test_a_holder_whose_own_replica_promises_a_newer_epoch_ends_its_run_and_the_key_is_acquired_again_before_the_next_ask(world: World) -> None:
    """n3 holds a counter at 2; n2 starts an acquisition of it with a stale view and abandons it at once (its Prepares already left): n3's own replica promised the newer round, so n3 ends its run then (lost), resumes the key above that round within RESUME_EVERY + write_timeout, and the next Inc answers 3, not Unavailable."""
    from casty.cluster.runtime import RESUME_EVERY

    key = next(k for k in (f"s{i}" for i in range(200)) if owner(world, "n1", rep_counter, k) == "n3")
    assert [ask_from(world, "n1", rep_counter, key, Inc()) for _ in range(2)] == [1, 2]
    entity = (rep_counter.name, key)
    held = world.system("n3")._activations[entity].page_writer.slot
    assert held is not None and held.owner.phase == "held"
    held_round = held.owner.epoch.round

    async def stray(system: Any) -> None:
        """What n2's sweep does when its view names it the owner for an instant (a resumed or healed node)."""
        service = system.cluster_node.replication
        slot = service.open(entity, lambda _event: None, write_timeout=1.0)
        slot.perform(slot.owner.acquire(slot.now(), system.cluster_node.replicas_of(*entity, 3), after=service.round_hint(entity)))
        slot.close()  # the next heartbeat names n3 again: the key moved, the acquisition is dropped

    strayed_at = world.now
    world.spawn("n2", stray)
    world.run(until=strayed_at + 0.1)
    n3 = world.system("n3").cluster_node
    assert n3 is not None
    promised = n3.replication.store.promised(entity)
    assert (promised.round, promised.node.split("#")[0]) == (held_round + 1, "n2")
    ended = [(r.node, r.get("reason")) for r in world.trace.of("activation.ended", key=key) if r.t > strayed_at]
    assert ended == [("n3", "lost")]  # as the prepare reached n3's replica, not at the next write
    world.run(until=strayed_at + RESUME_EVERY + 1.0 + 0.1)
    assert ask_from(world, "n1", rep_counter, key, Inc()) == 3
    acquired = [(r.node, r.get("epoch_round")) for r in world.trace.of("epoch.acquired", key=key) if r.t > strayed_at]
    assert acquired == [("n3", held_round + 2)]
    assert next(r.t for r in world.trace.of("epoch.acquired", key=key) if r.t > strayed_at) <= strayed_at + RESUME_EVERY + 1.0
    assert world.trace.of("write.failed", key=key) == []


def test_a_holder_whose_own_replica_missed_the_newer_prepare_hears_it_from_the_replicas_that_promised(world: World) -> None:
    """As above, but n2's Prepare to n3 is lost (a one-way cut n2 -> n3 for 50 ms): n1's and n2's replicas promised the
    newer round, n3's did not; they tell n3, so n3 ends its run then (lost), not at its next write, resumes the key above
    that round within RESUME_EVERY + write_timeout, and the next Inc answers 3, not Unavailable (no write fenced)."""
    from casty.cluster.runtime import RESUME_EVERY

    key = next(k for k in (f"m{i}" for i in range(200)) if owner(world, "n1", rep_counter, k) == "n3")
    assert [ask_from(world, "n1", rep_counter, key, Inc()) for _ in range(2)] == [1, 2]
    entity = (rep_counter.name, key)
    held = world.system("n3")._activations[entity].page_writer.slot
    assert held is not None and held.owner.phase == "held"
    held_round = held.owner.epoch.round

    async def stray(system: Any) -> None:
        """What n2's sweep does when its view names it the owner for an instant (a resumed or healed node)."""
        service = system.cluster_node.replication
        slot = service.open(entity, lambda _event: None, write_timeout=1.0)
        slot.perform(slot.owner.acquire(slot.now(), system.cluster_node.replicas_of(*entity, 3), after=service.round_hint(entity)))
        slot.close()

    world.partition(["n2"], ["n3"], oneway=True)
    strayed_at = world.now
    world.spawn("n2", stray)
    world.run(until=strayed_at + 0.05)
    world.reconnect(["n2"], ["n3"], oneway=True)
    n3 = world.system("n3").cluster_node
    assert n3 is not None
    assert n3.replication.store.promised(entity).round == held_round  # the Prepare never reached n3's replica
    promised = world.system("n1").cluster_node.replication.store.promised(entity)  # type: ignore[union-attr]
    assert (promised.round, promised.node.split("#")[0]) == (held_round + 1, "n2")
    ended = [(r.node, r.get("reason")) for r in world.trace.of("activation.ended", key=key) if r.t > strayed_at]
    assert ended == [("n3", "lost")]  # as the promising replicas told it, not at the next write
    world.run(until=strayed_at + RESUME_EVERY + 1.0 + 0.1)
    assert ask_from(world, "n1", rep_counter, key, Inc()) == 3
    acquired = [(r.node, r.get("epoch_round")) for r in world.trace.of("epoch.acquired", key=key) if r.t > strayed_at]
    assert acquired == [("n3", held_round + 2)]
    assert world.trace.of("write.failed", key=key) == []


@actor(initial=0, idle_after=0.5)
async def brief_counter(ctx: Context[int, Inc | Get]) -> None:
    """rep_counter released after 0.5 s idle: every ask after a pause acquires the key again."""
    async for msg in ctx.inbox:
        if isinstance(msg, Inc):
            await ctx.state.update(lambda n: n + 1)
        msg.reply_to.tell(ctx.state.value)


def test_an_owner_whose_replica_missed_newer_rounds_acquires_above_them_at_its_first_ask_after_the_heal(world: World) -> None:
    """n3 owns a key released when idle; cut off, it misses two acquisitions by the interim owner (its replica's promise is two rounds behind); after the heal the first Inc routed to n3 meets the newer promise, tries again above it and answers 4, not Unavailable."""
    key = next(k for k in (f"b{i}" for i in range(200)) if owner(world, "n1", brief_counter, k) == "n3")
    assert ask_from(world, "n3", brief_counter, key, Inc(), run_for=1.0) == 1  # acquired on n3, then released (idle)
    cut_at = world.now
    world.partition(["n3"], ["n1", "n2"])
    world.run(until=world.now + DECLARED_DEAD)
    interim = owner(world, "n1", brief_counter, key)
    assert interim in ("n1", "n2")
    assert [ask_from(world, "n1", brief_counter, key, Inc(), run_for=1.0) for _ in range(2)] == [2, 3]  # two acquisitions
    rounds = [r.get("epoch_round") for r in world.trace.of("epoch.acquired", key=key)]
    assert rounds == [1, 2, 3]
    world.heal()
    world.run(until=world.now + 2.0)
    assert owner(world, "n1", brief_counter, key) == "n3"
    assert world.system("n3").cluster_node is not None
    assert world.system("n3").cluster_node.replication.round_hint((brief_counter.name, key)).round == 1  # n3 never heard rounds 2, 3
    assert ask_from(world, "n1", brief_counter, key, Inc(), run_for=1.0) == 4
    after = [(r.node, r.get("epoch_round")) for r in world.trace.of("epoch.acquired", key=key) if r.t > cut_at + DECLARED_DEAD + 2.0]
    assert after == [("n3", 4)]


def test_a_release_whose_key_is_activated_again_during_its_deactivate_write_returns_at_once(world: World) -> None:
    """A message that activates a key again on its node while the release's deactivate write waits for acks ends that wait at once: release returns at the same instant, not at the write timeout (1 s), and the count goes on."""
    key = next(k for k in (f"r{i}" for i in range(200)) if owner(world, "n1", rep_counter, k) == "n1")

    async def client(system: Any) -> tuple[int, float, int, int]:
        ref = system.ref(rep_counter, key)
        first = await ref.ask(Inc())
        loop = asyncio.get_running_loop()
        started = loop.time()
        releasing = loop.create_task(system.release(rep_counter, key))
        while (rep_counter.name, key) in system.activations():
            await asyncio.sleep(0)  # the run ends; its deactivate write is staged, its acks not back yet
        assert not releasing.done()
        again = loop.create_task(ref.ask(Inc()))  # a new activation of the key here opens a new owner slot: the acks go to it
        await releasing
        released_after = loop.time() - started
        return first, released_after, await again, await ref.ask(Get())

    task = world.spawn("n1", client)
    world.run(until=world.now + 2.0)
    assert task.result() == (1, 0.0, 2, 2)
    failed = [(r.node, r.get("operation"), r.get("reason")) for r in world.trace.of("write.failed", key=key)]
    assert failed == [("n1", "deactivate", "unavailable")]  # its fate is unknown here: the key is resumed, and idles again

