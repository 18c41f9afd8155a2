"""Durable actor types in a cluster: confirmed writes go to the store too, and come back from it when every replica lost them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from casty import ActorSystem, Askable, Context, MemoryStore, actor
from casty.cluster.config import Cluster
from casty.protocol.key_owner import KeyOwner
from casty.protocol.replication import ZERO_EPOCH, Epoch, Promise, Stamp, Write
from casty.protocol.sansio import Send
from casty._core.state import STATE_PAGE
from sim.world import World

NODES = ("n1", "n2", "n3")
CLUSTER = Cluster(seeds=["n1", "n2"], heartbeat=0.2, suspect_after=1, dead_after=1)


@dataclass(frozen=True)
class Inc(Askable[int]):
    pass


@actor(initial=0, durable="write")
async def stored_counter(ctx: Context[int, Inc]) -> None:
    """Counts Inc asks; every confirmed count is saved to the store as well."""
    async for msg in ctx.inbox:
        msg.reply_to.tell(await ctx.state.update(lambda n: n + 1))


@actor(initial=0, durable=timedelta(seconds=5), write="one")
async def loose_counter(ctx: Context[int, Inc]) -> None:
    """Counts Inc asks; a write is confirmed by one replica, and the store gets the latest count every 5 s."""
    async for msg in ctx.inbox:
        msg.reply_to.tell(await ctx.state.update(lambda n: n + 1))


@actor(initial=0, durable="write", write="one")
async def loose_writer(ctx: Context[int, Inc]) -> None:
    """Counts Inc asks; a write is confirmed by one replica and saved to the store before it is answered."""
    async for msg in ctx.inbox:
        msg.reply_to.tell(await ctx.state.update(lambda n: n + 1))


@dataclass(frozen=True)
class Wipe(Askable[int]):
    pass


@actor(initial=0, durable="write", idle_after=0.5)
async def wiped_counter(ctx: Context[int, Inc | Wipe]) -> None:
    """Inc counts, Wipe deletes the count (answers 0); idle after 0.5 s, so a deleted key leaves a tombstone in the store."""
    async for msg in ctx.inbox:
        if isinstance(msg, Inc):
            msg.reply_to.tell(await ctx.state.update(lambda n: n + 1))
        else:
            await ctx.state.delete()
            msg.reply_to.tell(0)


def _ask(world: World, node: str, key: str) -> Any:
    async def client(system: ActorSystem) -> Any:
        try:
            return await system.ref(stored_counter, key).ask(Inc())
        except Exception as exc:
            return exc

    task = world.spawn(node, client)
    world.run(until=world.now + 1.0)
    assert task.done()
    return task.result()


def _stored(world: World, database: MemoryStore, key: str) -> tuple[int, int] | None:
    """(version, count) as the store holds the key."""
    system = world.system("n1")
    loaded = asyncio.run(database.load(stored_counter.name, key))
    if loaded is None:
        return None
    return loaded[0], system.codec.decode_value(system.codec.decode_pages(loaded[1])[STATE_PAGE], int, "state")


def test_write_back_version_exceeds_the_floor() -> None:
    """KeyOwner.acquire(floor=v) writes back above v even when every replica holds nothing (versions keep growing after a store recovery)."""
    owner = KeyOwner(("t", "k"), "n1#1", resend_every=None)
    owner.acquire(0.0, ("a", "b", "c"), floor=41)
    owner.receive("a", Promise(("t", "k"), owner.epoch, Stamp(ZERO_EPOCH, 0), {}), 0.1)
    out = owner.receive("b", Promise(("t", "k"), owner.epoch, Stamp(ZERO_EPOCH, 0), {}), 0.1)
    writes = [o.frame for o in out if isinstance(o, Send) and isinstance(o.frame, Write)]
    assert writes and all(w.version == 42 for w in writes)
    assert owner.epoch == Epoch(1, "n1#1")


def test_every_confirmed_write_of_a_durable_type_is_in_the_store() -> None:
    """In a cluster, a durable="write" key's answered counts are in the shared store under the replicated version."""
    world = World(1)
    database = MemoryStore()
    for name in NODES:
        world.add_node(name, cluster=CLUSTER, store=database, ask_timeout=2.0, write_timeout=1.0)
    world.run(until=2.0)
    counts = [_ask(world, node, "k") for node in ("n1", "n2", "n3", "n1")]
    assert counts == [1, 2, 3, 4]
    stored = _stored(world, database, "k")
    assert stored is not None and stored[1] == 4
    confirmed = [r.get("version") for r in world.trace.of("write.confirmed", key="k")]
    assert stored[0] == max(confirmed)
    world.close()


def test_a_durable_key_comes_back_from_the_store_when_every_replica_restarted() -> None:
    """All three nodes restart with empty replicas: the next Inc finds the stored count, not the initial 0, and its version goes on."""
    world = World(2)
    database = MemoryStore()
    for name in NODES:
        world.add_node(name, cluster=CLUSTER, store=database, ask_timeout=2.0, write_timeout=1.0)
    world.run(until=2.0)
    assert [_ask(world, "n2", "k") for _ in range(3)] == [1, 2, 3]
    before = _stored(world, database, "k")
    for name in NODES:
        world.crash(name)
    world.run(until=world.now + 1.0)
    for name in NODES:
        world.restart(name)
    world.run(until=world.now + 3.0)
    assert _ask(world, "n3", "k") == 4
    after = _stored(world, database, "k")
    assert before is not None and after is not None and after[0] > before[0] and after[1] == 4
    world.close()


def _epochs(world: World, key: str) -> list[tuple[int, str]]:
    """The owner epochs of ``key``'s ``epoch.acquired`` rows, in trace order."""
    return [(int(r.get("epoch_round")), str(r.get("epoch_node"))) for r in world.trace.of("epoch.acquired", key=key)]


def test_a_whole_cluster_restart_recovers_the_key_above_every_epoch_it_had() -> None:
    """Every node restarts with empty replicas: the key recovered from the store is acquired at a round above every round it had before."""
    world = World(2)
    database = MemoryStore()
    for name in NODES:
        world.add_node(name, cluster=CLUSTER, store=database, ask_timeout=2.0, write_timeout=1.0, idle_after=0.5)
    world.run(until=2.0)
    counts = []
    for _ in range(3):  # each ask finds the key idle: a new acquisition, one round up
        counts.append(_ask(world, "n2", "k"))
        world.run(until=world.now + 1.0)
    assert counts == [1, 2, 3]
    before = _epochs(world, "k")
    assert [round_ for round_, _node in before] == [1, 2, 3]
    for name in NODES:
        world.crash(name)
    world.run(until=world.now + 1.0)
    for name in NODES:
        world.restart(name)
    world.run(until=world.now + 3.0)
    assert _ask(world, "n3", "k") == 4
    after = _epochs(world, "k")[len(before):]
    assert [round_ for round_, _node in after] == [4]
    assert after[0] > max(before)
    world.close()


def test_a_cut_off_owners_late_save_never_overwrites_the_newer_epochs() -> None:
    """write="one", write-behind: n1, cut off, confirms ten more counts; n2 takes the key over and its two counts are what the store keeps."""
    world = World(3)
    database = MemoryStore()
    for name in NODES:
        world.add_node(name, cluster=CLUSTER, store=database, ask_timeout=2.0, write_timeout=1.0)
    world.run(until=2.0)

    def counts(node: str, n: int, wait: float) -> Any:
        return _counts(world, loose_counter, node, n, wait)

    assert world.system("n1").cluster_node is not None
    assert world.system("n1").cluster_node.owner_of(loose_counter.name, "k") == "n1"
    assert counts("n1", 2, 1.0) == [1, 2]
    world.partition(["n1"], ["n2", "n3"])
    assert counts("n1", 10, 1.0) == list(range(3, 13))  # one replica (its own) confirms each: a stale history
    world.run(until=world.now + 3.0)  # n2 took the key over under a newer epoch, from its replica's count 2
    assert counts("n3", 1, 1.0) == [3]
    world.run(until=world.now + 10.0)  # n1's flush of count 12 and n2's of count 3 both reached the store
    assert counts("n3", 1, 1.0) == [4]
    world.run(until=world.now + 10.0)
    acquired = [(r.node, int(r.get("epoch_round"))) for r in world.trace.of("epoch.acquired", key="k")]
    assert acquired == [("n1", 1), ("n2", 2)]
    record = asyncio.run(database.load(loose_counter.name, "k"))
    assert record is not None
    assert _loose(world, record[1]) == 4
    assert record[2][0] == 2 and record[2][1].startswith("n2#")
    world.close()


def _loose(world: World, blob: bytes) -> int:
    """The count in an encoded page set of loose_counter."""
    codec = world.system("n2").codec
    return int(codec.decode_value(codec.decode_pages(blob)[STATE_PAGE], int, "state"))


def _counts(world: World, actor_type: Any, node: str, n: int, wait: float) -> list[Any]:
    """``n`` Inc asks of key 'k' from ``node``, one after the other; their answers after ``wait`` s."""

    async def client(system: ActorSystem) -> list[Any]:
        return [await system.ref(actor_type, "k").ask(Inc()) for _ in range(n)]

    task = world.spawn(node, client)
    world.run(until=world.now + wait)
    result: list[Any] = task.result()
    return result


def test_an_owner_adopts_the_store_when_it_holds_a_newer_stamp_than_the_replicas() -> None:
    """write="one", write-through: counts 3..12 that n3 confirmed while cut off are only in the store; the next owner goes on from 12, not from 2."""
    world = World(3)
    database = MemoryStore()
    for name in NODES:
        world.add_node(name, cluster=CLUSTER, store=database, ask_timeout=2.0, write_timeout=1.0)
    world.run(until=2.0)
    assert world.system("n1").cluster_node is not None
    assert world.system("n1").cluster_node.owner_of(loose_writer.name, "k") == "n3"
    assert _counts(world, loose_writer, "n3", 2, 1.0) == [1, 2]
    world.partition(["n3"], ["n1", "n2"])
    assert _counts(world, loose_writer, "n3", 10, 1.0) == list(range(3, 13))
    world.run(until=world.now + 3.0)
    assert _counts(world, loose_writer, "n1", 1, 1.0) == [13]
    (acquired,) = [r for r in world.trace.of("epoch.acquired", key="k") if r.node != "n3"]
    assert (int(acquired.get("epoch_round")), int(acquired.get("found"))) == (2, 13)
    world.close()


def test_after_a_whole_cluster_restart_a_deleted_key_starts_over_above_its_tombstone() -> None:
    """A deleted, idle key's tombstone carries its epoch: after every node restarts, the key starts from 0 and its saves reach the store."""
    world = World(4)
    database = MemoryStore()
    for name in NODES:
        world.add_node(name, cluster=CLUSTER, store=database, ask_timeout=2.0, write_timeout=1.0)
    world.run(until=2.0)

    def ask(node: str, message: Any) -> Any:
        async def client(system: ActorSystem) -> Any:
            return await system.ref(wiped_counter, "k").ask(message)

        task = world.spawn(node, client)
        world.run(until=world.now + 1.0)
        return task.result()

    assert [ask("n2", Inc()), ask("n2", Inc()), ask("n2", Wipe())] == [1, 2, 0]
    world.run(until=world.now + 2.0)  # idle: the tombstone is saved
    tombstone = asyncio.run(database.load(wiped_counter.name, "k"))
    assert tombstone is not None and (tombstone.version, tombstone.state, tombstone.epoch[0]) == (9, b"", 3)
    for name in NODES:
        world.crash(name)
    world.run(until=world.now + 1.0)
    for name in NODES:
        world.restart(name)
    world.run(until=world.now + 3.0)
    assert ask("n3", Inc()) == 1
    record = asyncio.run(database.load(wiped_counter.name, "k"))
    assert record is not None and (record.version, record.epoch[0]) == (12, 4)  # write-back 10, Inc 11, idle 12; one round up
    assert _loose(world, record.state) == 1
    world.close()


@dataclass(frozen=True)
class Peek(Askable[int]):
    pass


@actor(initial=0, durable="write", idle_after=5.0)
async def peeked_counter(ctx: Context[int, Inc | Peek]) -> None:
    """Inc counts, Peek answers the count and writes nothing: an activation for a Peek leaves no save of its own."""
    async for msg in ctx.inbox:
        if isinstance(msg, Inc):
            msg.reply_to.tell(await ctx.state.update(lambda n: n + 1))
        else:
            msg.reply_to.tell(ctx.state.value)


@actor(initial=0, durable=timedelta(seconds=30), idle_after=5.0)
async def peeked_lazily(ctx: Context[int, Inc | Peek]) -> None:
    """peeked_counter, write-behind: the store gets the latest count every 30 s."""
    async for msg in ctx.inbox:
        if isinstance(msg, Inc):
            msg.reply_to.tell(await ctx.state.update(lambda n: n + 1))
        else:
            msg.reply_to.tell(ctx.state.value)


@pytest.mark.parametrize("actor_type", [peeked_counter, peeked_lazily], ids=["write-through", "write-behind"])
def test_an_acquisition_with_no_write_after_it_is_durable_before_the_body_starts(actor_type: Any) -> None:
    """A durable key acquired at round 2 for a Peek (no write after the write-back), then a whole-cluster crash: it comes back at round 3."""
    world = World(5)
    database = MemoryStore()
    for name in NODES:
        world.add_node(name, cluster=CLUSTER, store=database, ask_timeout=2.0, write_timeout=1.0)
    world.run(until=2.0)
    assert _counts(world, actor_type, "n2", 1, 1.0) == [1]
    world.run(until=world.now + 40.0)  # idle, and saved (write-behind flushes within 30 s)
    assert _peek(world, actor_type, "n2") == 1  # a new activation: round 2, its write-back the last write
    assert [round_ for round_, _node in _epochs(world, "k")] == [1, 2]
    for name in NODES:
        world.crash(name)
    world.run(until=world.now + 1.0)
    for name in NODES:
        world.restart(name)
    world.run(until=world.now + 3.0)
    assert _peek(world, actor_type, "n3") == 1
    assert [round_ for round_, _node in _epochs(world, "k")] == [1, 2, 3]
    world.close()


def _peek(world: World, actor_type: Any, node: str) -> Any:
    """One Peek of key 'k' from ``node``; its answer (or the error) after 1 s."""

    async def client(system: ActorSystem) -> Any:
        try:
            return await system.ref(actor_type, "k").ask(Peek())
        except Exception as exc:
            return exc

    task = world.spawn(node, client)
    world.run(until=world.now + 1.0)
    return task.result()


def test_with_a_disk_per_node_the_key_comes_back_from_the_disk_of_its_last_owner() -> None:
    """Per-node disks: n1 saves count 2, crashes; the heir saves 3 and 4 on its disk; every node restarts: the key answers 4.

    Replication rule 8 (the disk rule): each restarted replica reads its disk back, so the heir's
    count 4 under (2, 'n2#...') is in the read quorum; before, n1 recovered count 2 from its own
    disk only and answered 2 (a strict xfail until then).
    """
    world = World(6)
    for name in NODES:
        world.add_node(name, cluster=CLUSTER, ask_timeout=2.0, write_timeout=1.0)  # store="memory": a disk of its own
    world.run(until=2.0)
    system = world.system("n1")
    key = next(k for k in (f"k{i}" for i in range(100)) if system.placement(peeked_counter, k).owner == "n1")

    def incs(node: str, n: int) -> list[Any]:
        async def client(system: ActorSystem) -> list[Any]:
            return [await system.ref(peeked_counter, key).ask(Inc()) for _ in range(n)]

        task = world.spawn(node, client)
        world.run(until=world.now + 1.0)
        return list(task.result())

    assert incs("n1", 2) == [1, 2]
    world.crash("n1")
    world.run(until=world.now + 4.0)  # declared dead: the heir resumes the @active key
    assert incs("n2", 2) == [3, 4]
    for name in ("n2", "n3"):
        world.crash(name)
    world.run(until=world.now + 1.0)
    for name in NODES:
        world.restart(name)
    world.run(until=world.now + 5.0)

    async def peek(system: ActorSystem) -> Any:
        return await system.ref(peeked_counter, key).ask(Peek())

    task = world.spawn("n3", peek)
    world.run(until=world.now + 1.0)
    assert task.result() == 4
    world.close()


@dataclass(frozen=True)
class PutBytes(Askable[str]):
    size: int


@actor(initial=b"", durable="write")
async def stored_blob(ctx: Context[bytes, PutBytes]) -> None:
    """Sets the state to ``size`` bytes, saved to the store; answers "ok", or the error's class name."""
    async for msg in ctx.inbox:
        try:
            await ctx.state.set(b"x" * msg.size)
        except Exception as exc:
            msg.reply_to.tell(type(exc).__name__)
        else:
            msg.reply_to.tell("ok")


def test_a_durable_write_over_the_frame_limit_is_refused_before_replicas_and_store() -> None:
    """A durable="write" key's 5 MiB state: MessageTooLarge at the write, reported too_large; the store keeps the last confirmed (small) state."""
    world = World(3)
    database = MemoryStore()
    for name in NODES:
        world.add_node(name, cluster=CLUSTER, store=database, ask_timeout=2.0, write_timeout=1.0)
    world.run(until=2.0)
    answers: list[str] = []

    async def put(system: ActorSystem, size: int) -> None:
        answers.append(await system.ref(stored_blob, "b").ask(PutBytes(size)))

    world.spawn("n1", lambda system: put(system, 10))
    world.run(until=world.now + 0.5)
    start = world.now
    world.spawn("n1", lambda system: put(system, 5 * 1024 * 1024))
    world.run(until=start + 0.05)
    assert answers == ["ok", "MessageTooLarge"]
    assert [(r.get("operation"), r.get("reason")) for r in world.trace.of("write.failed", key="b")] == [("state.set", "too_large")]
    loaded = asyncio.run(database.load(stored_blob.name, "b"))
    assert loaded is not None
    assert world.system("n1").codec.decode_pages(loaded[1])[STATE_PAGE] == world.system("n1").codec.encode_typed(b"x" * 10, bytes, "state")
    world.close()


def test_with_a_disk_per_node_a_key_the_heir_deleted_stays_deleted_after_every_node_restarted() -> None:
    """Per-node disks: n1 saves count 2 and crashes; the heir deletes the key (a tombstone on its disk); every node
    restarts and n1 owns the key again: it starts over at 1, not from the count 2 of n1's own older disk (rule 8 reads
    tombstones back too: ``ListsRecords``)."""
    world = World(6)
    for name in NODES:
        world.add_node(name, cluster=CLUSTER, ask_timeout=2.0, write_timeout=1.0)  # store="memory": a disk of its own
    world.run(until=2.0)
    system = world.system("n1")
    key = next(k for k in (f"k{i}" for i in range(100)) if system.placement(wiped_counter, k).owner == "n1")

    def ask(node: str, message: Any) -> Any:
        async def client(system: ActorSystem) -> Any:
            try:
                return await system.ref(wiped_counter, key).ask(message)
            except Exception as exc:  # recorded, to be asserted on
                return exc

        task = world.spawn(node, client)
        world.run(until=world.now + 1.0)
        return task.result()

    assert [ask("n1", Inc()), ask("n1", Inc())] == [1, 2]
    world.crash("n1")
    world.run(until=world.now + 4.0)  # declared dead: the key moves to the heir
    heir = world.system("n2").placement(wiped_counter, key).owner
    assert heir in ("n2", "n3")
    assert ask("n2", Wipe()) == 0
    world.run(until=world.now + 2.0)  # idle: the heir's disk keeps the tombstone
    for name in ("n2", "n3"):
        world.crash(name)
    world.run(until=world.now + 1.0)
    for name in NODES:
        world.restart(name)
    world.run(until=world.now + 5.0)
    assert world.system("n3").placement(wiped_counter, key).owner == "n1"
    assert ask("n3", Inc()) == 1
    world.close()
