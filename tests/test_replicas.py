"""ReplicationService on a node: a turn's writes of a key are one replicated write, and a turn's frames leave in typed runs."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta

import pytest
from conftest import LoopClock, run_virtual

from casty import ActorSystem, Askable, Context, actor
from casty.cluster.config import Cluster
from casty.cluster.driver import REPLICATION_CHANNEL
from casty.protocol.limits import KEY_MARGIN, MAX_FRAME
from casty.cluster.replicas import BATCH_BYTES, Acks, Batch, ReplicationService, Writes
from casty.protocol.replication import Ack, Epoch, Prepare, Write
from casty.errors import MessageTooLarge
from sim.network import Latency, LinkModel
from sim.world import World

NODES = ("n1", "n2", "n3")
CLUSTER = Cluster(seeds=["n1"], heartbeat=0.2, suspect_after=1.0, dead_after=1.0)


@dataclass(frozen=True)
class Start(Askable[int]):
    pass


@dataclass(frozen=True)
class Beat:
    pass


@actor(initial=0)
async def beater(ctx: Context[int, Start | Beat]) -> None:
    """Start arms a 1 s schedule of Beat; each Beat counts one."""
    async for msg in ctx.inbox:
        if isinstance(msg, Start):
            await ctx.schedule("beat", timedelta(seconds=1), timedelta(seconds=1), Beat())
            msg.reply_to.tell(ctx.state.value)
        else:
            await ctx.state.update(lambda n: n + 1)


@pytest.fixture
def world() -> Iterator[World]:
    w = World(5, network=LinkModel(latency=Latency(0.002, 0.0005)))
    for name in NODES:
        w.add_node(name, cluster=CLUSTER)
    w.run(until=3.0)
    yield w
    w.close()


def service(world: World, node: str) -> ReplicationService:
    cluster = world.system(node).cluster_node
    assert cluster is not None
    return cluster.replication


def test_a_firing_and_the_state_write_of_its_message_are_one_replicated_write(world: World) -> None:
    """A schedule's next-due write and its message's state write, made in one turn, are confirmed under one version."""

    async def start(system: ActorSystem) -> None:
        await system.ref(beater, "b").ask(Start())

    world.spawn("n1", start)
    world.run(until=9.0)
    fired = world.trace.of("schedule.fired", key="b")
    confirmed = [row for row in world.trace.of("write.confirmed", key="b") if row.t >= fired[0].t]
    assert len(fired) >= 4
    versions = [int(row.get("version")) for row in confirmed]
    by_version: dict[int, list[str]] = {}
    for row in confirmed:
        by_version.setdefault(int(row.get("version")), []).extend(row.get("pages"))
    # every firing: one version carrying both the schedules page and the state page, versions one apart
    assert all(sorted(pages) == ["@schedules", "state"] for pages in by_version.values()), by_version
    assert sorted(by_version) == list(range(min(versions), min(versions) + len(by_version)))
    assert len(by_version) in (len(fired), len(fired) - 1)  # the last firing's write may still be in flight


def test_a_turn_of_writes_leaves_as_one_typed_run(world: World) -> None:
    """Writes queued for one node leave as a single Writes frame; a Prepare between them splits the run, in order."""
    node = service(world, "n1")
    wire = node.wire
    epoch = Epoch(1, "n1#1")
    writes = [Write(("t", f"k{i}"), epoch, 1, {"state": b"x"}) for i in range(5)]
    [one] = node._encode(list(writes))
    run = wire.decode(one).frame
    assert isinstance(run, Writes) and run.frames == tuple(writes)
    mixed = node._encode([writes[0], writes[1], Prepare(("t", "p"), epoch), writes[2]])
    frames = [wire.decode(data).frame for data in mixed]
    assert [type(frame) for frame in frames] == [Writes, Prepare, Write]
    acks = [Ack(("t", f"k{i}"), epoch, 1) for i in range(3)]
    [acked] = node._encode(list(acks))
    assert wire.decode(acked).frame == Acks(tuple(acks))


def test_a_run_too_big_for_one_frame_is_halved_under_the_limit(world: World) -> None:
    """A run whose encoding exceeds BATCH_BYTES is cut into parts that each fit, keeping every frame in order."""
    node = service(world, "n1")
    epoch = Epoch(1, "n1#1")
    page = b"p" * (BATCH_BYTES // 5)
    writes = [Write(("t", f"k{i}"), epoch, 1, {"state": page}) for i in range(12)]
    parts = node._encode(list(writes))
    assert len(parts) > 1 and all(len(data) <= BATCH_BYTES for data in parts)
    back = [frame for data in parts for frame in node.wire.decode(data).frame.frames]
    assert back == writes
    batches = node._batches(parts)
    assert all(len(data) <= BATCH_BYTES + 64 for data in batches)
    assert all(isinstance(node.wire.decode(data).frame, Batch | Writes) for data in batches)
    assert node.wire.decode(parts[0]).channel == REPLICATION_CHANNEL


@dataclass(frozen=True)
class Bump(Askable[int]):
    pass


@actor(initial=0)
async def bumper(ctx: Context[int, Bump]) -> None:
    """Each Bump adds one and answers the count once the write is confirmed."""
    async for msg in ctx.inbox:
        msg.reply_to.tell(await ctx.state.update(lambda n: n + 1))


def test_a_write_lost_on_its_way_is_resent_and_confirmed(world: World) -> None:
    """Frames of a write lost to both other replicas: the owner's resend, half a second later, gets it confirmed."""
    owner = world.system("n1").placement(bumper, "b").owner
    assert owner is not None
    others = [n for n in NODES if n != owner]
    answers: list[int] = []

    async def bump(system: ActorSystem) -> None:
        answers.append(await system.ref(bumper, "b").ask(Bump()))

    world.spawn(owner, bump)
    world.run(until=world.now + 0.5)
    assert answers == [1]
    for other in others:
        world.network.link(owner, other, loss=1.0)
    sent_at = world.now
    world.spawn(owner, bump)
    world.run(until=sent_at + 0.3)
    assert answers == [1]  # no quorum: the owner's own replica alone
    for other in others:
        world.network.link(owner, other, loss=0.0)
    world.run(until=sent_at + 1.0)
    assert answers == [1, 2]
    confirmed = [row for row in world.trace.of("write.confirmed", key="b") if row.t > sent_at]
    assert len(confirmed) == 1 and 0.5 <= confirmed[0].t - sent_at < 0.6  # the resend, not the write timeout


@dataclass(frozen=True)
class Put(Askable[int]):
    size: int


@dataclass(frozen=True)
class Size(Askable[int]):
    pass


@actor(initial=b"")
async def blob(ctx: Context[bytes, Put | Size]) -> None:
    """Put sets the state to ``size`` bytes and answers the size, or -1 if the write was too large; Size answers the state's length."""
    async for msg in ctx.inbox:
        if isinstance(msg, Put):
            try:
                await ctx.state.set(b"x" * msg.size)
            except MessageTooLarge:
                msg.reply_to.tell(-1)
            else:
                msg.reply_to.tell(len(ctx.state.value))
        else:
            msg.reply_to.tell(len(ctx.state.value))


def same_owner_keys(world: World, count: int) -> list[str]:
    """``count`` keys of ``blob`` owned by n1 (their writes to a replica leave in one turn, one frame per destination)."""
    placement = world.system("n1").placement
    return [k for k in (f"k{i}" for i in range(400)) if placement(blob, k).owner == "n1"][:count]


def test_a_state_write_over_the_frame_limit_fails_at_once_and_nothing_else(world: World) -> None:
    """A 5 MiB state in a 3-node cluster: MessageTooLarge at the write (not Unavailable after write_timeout), reported too_large; the key keeps its state and serves; a small key written in the same turn is confirmed."""
    big, small = same_owner_keys(world, 2)
    answers: dict[str, int] = {}

    async def put(system: ActorSystem, key: str, size: int) -> None:
        answers[key] = await system.ref(blob, key).ask(Put(size))

    for key in (big, small):
        world.spawn("n1", lambda system, key=key: put(system, key, 10))
    world.run(until=world.now + 0.5)
    assert answers == {big: 10, small: 10}
    start = world.now
    world.spawn("n1", lambda system: put(system, big, 5 * 1024 * 1024))
    world.spawn("n1", lambda system: put(system, small, 20))
    world.run(until=start + 0.05)  # well before write_timeout
    assert answers == {big: -1, small: 20}
    [failed] = [row for row in world.trace.of("write.failed", key=big) if row.t >= start]
    assert failed.get("reason") == "too_large" and failed.t == start
    assert not [row for row in world.trace.of("net.dropped") if row.t >= start]
    sizes: list[int] = []

    async def size(system: ActorSystem) -> None:
        sizes.append(await system.ref(blob, big).ask(Size()))

    world.spawn("n2", size)
    world.run(until=world.now + 0.5)
    assert sizes == [10]  # the confirmed state, unchanged
    world.spawn("n1", lambda system: put(system, big, 30))
    world.run(until=world.now + 0.5)
    assert answers == {big: 30, small: 20}
    replicas = world.system("n1").placement(blob, big).replicas
    held = [service(world, node).store.pages((blob.name, big)).get("state", b"") for node in replicas]
    assert sum(len(page) < 100 for page in held) == 3 and sum(len(page) == 32 for page in held) >= 2  # msgpack: 2 header bytes


def test_a_large_write_beside_small_ones_leaves_alone_under_the_limit(world: World) -> None:
    """A 3 MiB state (under the frame limit) and small writes of other keys in one turn: every frame stays under MAX_FRAME and all are confirmed."""
    big, *smalls = same_owner_keys(world, 4)
    answers: dict[str, int] = {}

    async def put(system: ActorSystem, key: str, size: int) -> None:
        answers[key] = await system.ref(blob, key).ask(Put(size))

    world.spawn("n1", lambda system: put(system, big, 3 * 1024 * 1024))
    for key in smalls:
        world.spawn("n1", lambda system, key=key: put(system, key, 10))
    world.run(until=world.now + 0.5)
    assert answers == {big: 3 * 1024 * 1024, **{key: 10 for key in smalls}}
    assert world.trace.of("net.dropped") == []


def test_on_a_single_node_a_state_over_the_frame_limit_is_written() -> None:
    """The frame limit is a cluster's only: on one node a 5 MiB state is set and read back whole."""

    async def main(clock: LoopClock) -> tuple[int, int]:
        async with ActorSystem(clock=clock) as system:
            ref = system.ref(blob, "one")
            return await ref.ask(Put(5 * 1024 * 1024)), await ref.ask(Size())

    assert run_virtual(main) == (5 * 1024 * 1024, 5 * 1024 * 1024)


def test_a_state_just_under_the_key_limit_is_replicated_whole(world: World) -> None:
    """A state as large as the check lets through (MAX_FRAME - KEY_MARGIN - 200 bytes) is confirmed, and no frame of it is dropped as too large."""
    [key] = same_owner_keys(world, 1)
    size = MAX_FRAME - KEY_MARGIN - 200
    answers: list[int] = []

    async def put(system: ActorSystem) -> None:
        answers.append(await system.ref(blob, key).ask(Put(size)))

    world.spawn("n1", put)
    world.run(until=world.now + 0.5)
    assert answers == [size]
    assert world.trace.of("net.dropped") == []
