"""Replication v1 on three simulated nodes: owner epochs over the key's replicas, quorum-confirmed writes.

Each node is a real ``ActorSystem(cluster=Cluster(...), transport=<its SimEndpoint>)``; virtual
time makes every instant exact. The key property: a new owner serves the LAST CONFIRMED state.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from casty import ActorSystem, Askable, Context, actor
from casty.cluster.config import Cluster
from casty.errors import Unavailable
from casty._core.state import STATE_PAGE
from sim.network import Latency, LinkModel
from sim.world import World

NODES = ("n1", "n2", "n3")
CLUSTER = Cluster(seeds=["n1"], heartbeat=0.2, suspect_after=1, dead_after=1)
CONVERGED = 2.0
DECLARED_DEAD = 0.2 + 1 + 1 + 0.5  # silence, suspect_after, dead_after, slack


@dataclass(frozen=True)
class Inc(Askable[int]):
    pass


@dataclass(frozen=True)
class Get(Askable[int]):
    pass


@dataclass(frozen=True)
class Arm(Askable[int]):
    every: float


@dataclass(frozen=True)
class Tick:
    pass


@actor(initial=0)
async def rep_counter(ctx: Context[int, Inc | Get]) -> None:
    """Counts Inc asks; Get answers the count."""
    async for msg in ctx.inbox:
        if isinstance(msg, Inc):
            msg.reply_to.tell(await ctx.state.update(lambda n: n + 1))
        else:
            msg.reply_to.tell(ctx.state.value)


@actor(initial=0, write="all")
async def all_counter(ctx: Context[int, Inc | Get]) -> None:
    """rep_counter at write level all: a write needs every replica."""
    async for msg in ctx.inbox:
        if isinstance(msg, Inc):
            msg.reply_to.tell(await ctx.state.update(lambda n: n + 1))
        else:
            msg.reply_to.tell(ctx.state.value)


@actor(initial=0)
async def ticker(ctx: Context[int, Arm | Tick | Get]) -> None:
    """Arm schedules a Tick every `every` s; each Tick counts one; Get answers the count."""
    async for msg in ctx.inbox:
        if isinstance(msg, Arm):
            await ctx.schedule("tick", timedelta(seconds=msg.every), timedelta(seconds=msg.every), Tick())
            msg.reply_to.tell(ctx.state.value)
        elif isinstance(msg, Tick):
            await ctx.state.update(lambda n: n + 1)
        else:
            msg.reply_to.tell(ctx.state.value)


@pytest.fixture
def world() -> Iterator[World]:
    w = World(11, network=LinkModel(latency=Latency(0.002, 0.0)))
    for name in NODES:
        w.add_node(name, cluster=CLUSTER, ask_timeout=2.0, write_timeout=1.0)
    w.run(until=CONVERGED)
    yield w
    w.close()


def ask_from(world: World, node: str, actor_type: Any, key: str, message: Any, *, run_for: float = 0.5) -> Any:
    """Ask ``actor_type[key]`` from ``node``; run the world; the result, or the exception raised."""

    async def client(system: ActorSystem) -> Any:
        try:
            return await system.ref(actor_type, key).ask(message)
        except Exception as exc:
            return exc

    task = world.spawn(node, client)
    world.run(until=world.now + run_for)
    assert task.done(), f"ask from {node} for {key!r} still pending"
    return task.result()


def owner(world: World, node: str, actor_type: Any, key: str) -> str | None:
    return world.system(node).placement(actor_type, key).owner


def key_not_owned_by(world: World, actor_type: Any, node: str, prefix: str) -> str:
    return next(k for k in (f"{prefix}{i}" for i in range(200)) if owner(world, node, actor_type, k) not in (None, node))


def epochs_only_grow(world: World) -> None:
    by_key: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for row in world.trace.of("epoch.acquired"):
        by_key.setdefault((row.get("actor"), row.get("key")), []).append((row.get("epoch_round"), row.get("epoch_node")))
    for entity, epochs in by_key.items():
        assert epochs == sorted(set(epochs)), (entity, epochs)


def test_new_owner_serves_the_last_confirmed_count(world: World) -> None:
    """A counter bumped from every node survives its owner's crash: the next owner goes on from the last confirmed count, not from initial."""
    key = key_not_owned_by(world, rep_counter, "n1", "c")
    first = owner(world, "n1", rep_counter, key)
    results = [ask_from(world, n, rep_counter, key, Inc()) for n in ("n1", "n2", "n3", "n1", "n2")]
    assert results == [1, 2, 3, 4, 5]
    world.crash(first)
    world.run(until=world.now + DECLARED_DEAD)
    survivor = next(n for n in NODES if n != first)
    successor = owner(world, survivor, rep_counter, key)
    assert successor not in (None, first)
    assert ask_from(world, survivor, rep_counter, key, Get()) == 5
    assert ask_from(world, survivor, rep_counter, key, Inc()) == 6
    acquired = world.trace.of("epoch.acquired", actor=rep_counter.name, key=key)
    assert [r.node for r in acquired] == [first, successor]
    assert acquired[0].get("found") == 0 and acquired[1].get("found") > 0  # a new key, then the replicated one
    epochs_only_grow(world)


def test_every_write_waits_for_its_quorum(world: World) -> None:
    """A confirmed write is held by a majority of the key's replicas: their ReplicaStores hold the count as the owner replied it."""
    key = key_not_owned_by(world, rep_counter, "n1", "q")
    assert ask_from(world, "n1", rep_counter, key, Inc()) == 1
    assert ask_from(world, "n1", rep_counter, key, Inc()) == 2
    codec = world.system("n1").codec
    replicas = world.system("n1").placement(rep_counter, key).replicas
    held = []
    for node in replicas:
        cluster = world.system(node).cluster_node
        assert cluster is not None
        pages = cluster.replication.store.pages((rep_counter.name, key))
        if STATE_PAGE in pages:
            held.append(codec.decode_value(pages[STATE_PAGE], int, "state"))
    assert held.count(2) >= 2, held


def test_write_level_all_times_out_without_every_replica(world: World) -> None:
    """At write level all, a replica down makes the next write time out: the owner's own ask fails with Unavailable (write_timeout 1 s), not ActorFailed."""
    key = "a0"
    the_owner = owner(world, "n1", all_counter, key)
    assert the_owner is not None
    assert ask_from(world, the_owner, all_counter, key, Inc()) == 1
    replicas = world.system("n1").placement(all_counter, key).replicas
    other = next(r for r in replicas if r != the_owner)
    world.crash(other)
    result = ask_from(world, the_owner, all_counter, key, Inc(), run_for=1.5)
    assert isinstance(result, Unavailable), result
    assert world.trace.of("write.failed", actor=all_counter.name, key=key, reason="unavailable")
    asker = next(n for n in NODES if n not in (the_owner, other))
    remote = ask_from(world, asker, all_counter, key, Inc(), run_for=1.5)  # before ask_timeout (2 s): the owner's Reply says why
    assert isinstance(remote, Unavailable) and "quorum" in str(remote), remote


def test_schedule_keeps_firing_after_its_owner_crashes(world: World) -> None:
    """A key's persisted schedule survives its owner's crash: activated again by a message on the next owner, it goes on ticking from the replicated count."""
    key = key_not_owned_by(world, ticker, "n1", "s")
    first = owner(world, "n1", ticker, key)
    assert ask_from(world, "n1", ticker, key, Arm(0.25)) == 0
    world.run(until=world.now + 1.0)
    before = ask_from(world, "n1", ticker, key, Get(), run_for=0.1)
    assert before >= 3
    world.crash(first)
    world.run(until=world.now + DECLARED_DEAD)
    successor = owner(world, "n1", ticker, key)
    assert successor not in (None, first)
    resumed = ask_from(world, "n1", ticker, key, Get(), run_for=0.1)
    assert resumed >= before  # the last confirmed count, at least (a tick may have been confirmed after the Get)
    world.run(until=world.now + 1.0)
    later = ask_from(world, "n1", ticker, key, Get(), run_for=0.1)
    assert later >= resumed + 3
    assert world.trace.of("schedule.fired", node=successor, actor=ticker.name, key=key)
    epochs_only_grow(world)


def test_a_partitioned_old_owner_steps_down_before_a_new_one_takes_its_key(world: World) -> None:
    """An owner cut off while a new one takes its key over ends its run (lost) when it loses its quorum, before the new owner acquires the key: after the heal no write of its stale epoch is refused (none is made), and epochs only grow."""
    key = next(k for k in (f"f{i}" for i in range(200)) if owner(world, "n1", ticker, k) == "n3")
    assert ask_from(world, "n1", ticker, key, Arm(0.2)) == 0
    world.run(until=world.now + 0.5)
    cut_at = world.now
    world.partition(["n3"], ["n1", "n2"])
    world.run(until=world.now + DECLARED_DEAD)
    successor = owner(world, "n1", ticker, key)
    assert successor in ("n1", "n2")
    count = ask_from(world, "n1", ticker, key, Get(), run_for=0.2)
    assert isinstance(count, int) and count >= 2
    world.heal()
    world.run(until=world.now + 1.0)
    ended = world.trace.of("activation.ended", node="n3", actor=ticker.name, key=key)
    assert [r.get("reason") for r in ended] == ["lost"]
    taken = [r for r in world.trace.of("epoch.acquired", actor=ticker.name, key=key) if r.t > cut_at]
    assert taken[0].node == successor and ended[0].t < taken[0].t
    assert world.trace.of("write.failed", actor=ticker.name, key=key, reason="fenced") == []
    epochs_only_grow(world)


def test_active_key_resumes_on_the_next_owner_without_a_message(world: World) -> None:
    """A scheduled key whose owner crashes is resumed by the next owner's sweep of its replicas (@active) once the owner is declared dead: it ticks on with no message sent to it."""
    key = key_not_owned_by(world, ticker, "n1", "h")
    first = owner(world, "n1", ticker, key)
    assert ask_from(world, "n1", ticker, key, Arm(0.25)) == 0
    world.run(until=world.now + 1.0)
    before = ask_from(world, "n1", ticker, key, Get(), run_for=0.1)
    world.crash(first)
    crashed_at = world.now
    world.run(until=world.now + DECLARED_DEAD + 1.0)
    successor = owner(world, "n1", ticker, key)
    assert successor not in (None, first)
    started = [r for r in world.trace.of("activation.started", node=successor, actor=ticker.name, key=key)]
    assert started and started[0].t > crashed_at
    fired = world.trace.of("schedule.fired", node=successor, actor=ticker.name, key=key)
    assert len(fired) >= 3
    assert ask_from(world, "n1", ticker, key, Get(), run_for=0.1) >= before + 3
    epochs_only_grow(world)


def test_a_restarted_owner_learns_the_newer_epoch_from_a_lost_acquisition(world: World) -> None:
    """n1 owns a key, crashes, and the next owner takes it at round 2; n1 restarts (it knows no round) and owns it again.
    Its first acquisition (round 1) is lost to the newer epoch; the next one must start above that epoch, not at its own
    local promise + 1 (round 2, which loses again to (2, 'n2#..') or (2, 'n3#..')): the second ask succeeds."""
    key = next(k for k in (f"r{i}" for i in range(200)) if owner(world, "n1", rep_counter, k) == "n1")
    assert ask_from(world, "n2", rep_counter, key, Inc()) == 1
    world.crash("n1")
    world.run(until=world.now + DECLARED_DEAD)
    assert ask_from(world, "n2", rep_counter, key, Inc()) == 2
    world.restart("n1")
    world.run(until=world.now + 2 * CONVERGED)
    assert owner(world, "n2", rep_counter, key) == "n1"
    first = ask_from(world, "n2", rep_counter, key, Inc(), run_for=2.5)
    second = ask_from(world, "n2", rep_counter, key, Inc(), run_for=2.5)
    assert second == (3 if isinstance(first, Unavailable) else 4), (first, second)
    epochs_only_grow(world)
