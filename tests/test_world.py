"""The world's parts: node clocks, the simulated disk and network, faults, client code on a node."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import timedelta

import pytest
import simpy

from casty import Askable, Context, MemoryStore, actor
from sim.clock import NodeClock
from sim.disk import DiskCrashed, SimDisk
from sim.network import LinkModel, Latency
from sim.world import World

EPOCH = 1_767_225_600_000_000
_OPEN: list[World] = []


def request_close(world: World) -> None:
    _OPEN.append(world)


@pytest.fixture(autouse=True)
def _close_worlds() -> object:
    """Close every world a test made, so no node is left with pending tasks."""
    yield
    while _OPEN:
        _OPEN.pop().close()


def test_node_clock_offset_drift_and_steps() -> None:
    """Wall = start + offset + elapsed*(1+drift), re-based on drift changes, shifted by steps."""
    env = simpy.Environment()
    clock = NodeClock(env, epoch_us=EPOCH, offset=timedelta(seconds=2), drift_ppm=100)
    assert clock.now_us() == EPOCH + 2_000_000
    env.run(until=10**9 * 100)  # 100 s of true time
    assert clock.now_us() == EPOCH + 2_000_000 + 100_000_000 + 10_000  # 100 ppm of 100 s = 10 ms fast
    clock.set_drift(0)
    env.run(until=10**9 * 200)
    assert clock.now_us() == EPOCH + 2_000_000 + 200_000_000 + 10_000
    clock.step(timedelta(seconds=-30))
    assert clock.now_us() == EPOCH - 28_000_000 + 200_000_000 + 10_000
    assert clock.offset_us() == 2_000_000 + 10_000 - 30_000_000


def test_node_clock_noise_is_seeded() -> None:
    """A noisy clock reads within ±noise of the exact time, identically for the same seed."""
    import random

    def reads(seed: int) -> list[int]:
        env = simpy.Environment()
        clock = NodeClock(env, epoch_us=EPOCH, noise_us=50, rng=random.Random(seed))
        return [clock.now_us() - EPOCH for _ in range(100)]

    assert reads(1) == reads(1)
    assert all(-50 <= r <= 50 for r in reads(1))
    assert reads(1) != reads(2)


def _run(world: World, node: str, fn, until: float = 100.0):  # type: ignore[no-untyped-def]
    task = world.spawn(node, fn)
    world.run(until=until)
    assert task.done(), "client did not finish"
    return task.result()


def test_disk_latency_failures_and_crash() -> None:
    """Saves take virtual time; injected failures raise OSError; a crashed disk refuses everything."""
    world = World(1)

    request_close(world)
    world.add_node("n1")
    store = MemoryStore()

    async def client(system: object) -> tuple[float, str, str]:
        loop = asyncio.get_running_loop()
        disk = SimDisk(store, world.rng("n1", "test-disk"))
        start = loop.time()
        await disk.save("t", "k", 1, b"x")
        took = loop.time() - start
        disk.fail_next()
        try:
            await disk.save("t", "k", 2, b"y")
            failed = "no"
        except OSError as exc:
            failed = str(exc)
        disk.crash()
        try:
            await disk.load("t", "k")
            crashed = "no"
        except DiskCrashed as exc:
            crashed = str(exc)
        return took, failed, crashed

    took, failed, crashed = _run(world, "n1", client)
    assert took == pytest.approx(0.0005)
    assert "simulated disk error during save" in failed
    assert "crashed node" in crashed
    assert asyncio.run(store.load("t", "k")) == (1, b"x", (0, ""))


def test_unsynced_writes_are_lost_on_crash() -> None:
    """With fsync off, a save reaches the disk only at the next sync: a crash before it loses the write."""
    world = World(1)

    request_close(world)
    world.add_node("n1")
    store = MemoryStore()

    async def client(system: object) -> int:
        disk = SimDisk(store, world.rng("n1", "d"), fsync=False, sync_interval=1.0)
        await disk.save("t", "a", 1, b"a")
        await asyncio.sleep(2)  # synced
        await disk.save("t", "b", 1, b"b")
        assert await disk.load("t", "b") == (1, b"b", (0, ""))  # readable from the page cache
        return disk.crash()

    assert _run(world, "n1", client) == 1
    assert asyncio.run(store.keys()) == [("t", "a")]


def test_network_latency_loss_partition_and_one_way() -> None:
    """Frames arrive after their link's latency, as the destination node; partitions (one-way too) drop them."""
    world = World(2, network=LinkModel(latency=Latency(base=0.010, jitter=0.0)))

    request_close(world)
    for name in ("a", "b", "c"):
        world.add_node(name)
    got: list[tuple[float, str, str, bytes]] = []
    for name in ("a", "b", "c"):
        endpoint = world.node(name).endpoint
        assert endpoint is not None
        endpoint.set_handler(lambda src, frame, me=name: got.append((world.now, me, src, frame)))
    world.run(until=1)
    a = world.node("a").endpoint
    assert a is not None
    a.send("b", b"hello")
    world.run(until=2)
    assert got == [(1.010, "b", "a", b"hello")]
    world.partition(["a"], ["b"], oneway=True)
    a.send("b", b"lost")
    b = world.node("b").endpoint
    assert b is not None
    b.send("a", b"back")
    world.run(until=3)
    assert [g[3] for g in got] == [b"hello", b"back"]
    assert world.trace.of("net.dropped")[0].get("reason") == "partition"
    world.heal()
    a.send("b", b"again")
    world.run(until=4)
    assert got[-1][3] == b"again"


def test_network_loss_and_duplication_are_seeded() -> None:
    """With 50% loss, which frames are lost depends only on the seed."""

    def delivered(seed: int) -> list[int]:
        world = World(seed, network=LinkModel(loss=0.5, duplicate=0.2))
        request_close(world)
        world.add_node("a")
        world.add_node("b")
        got: list[int] = []
        endpoint = world.node("b").endpoint
        assert endpoint is not None
        endpoint.set_handler(lambda src, frame: got.append(frame[0]))
        world.run(until=0.1)
        sender = world.node("a").endpoint
        assert sender is not None
        for i in range(100):
            sender.send("b", bytes([i]))
        world.run(until=1)
        return got

    assert delivered(5) == delivered(5)
    assert delivered(5) != delivered(6)
    assert 20 < len(set(delivered(5))) < 80
    assert len(delivered(5)) > len(set(delivered(5)))  # some duplicates


@dataclass(frozen=True)
class Hit(Askable[int]):
    pass


@actor(initial=0)
async def hits(ctx: Context[int, Hit]) -> None:
    """Counts asks."""
    async for msg in ctx.inbox:
        msg.reply_to.tell(await ctx.state.update(lambda n: n + 1))


def test_crash_cancels_the_node_and_restart_is_a_new_incarnation() -> None:
    """A crash ends every activation of the node at once; a restart brings a fresh system (non-durable state is gone)."""
    world = World(3)

    request_close(world)
    world.add_node("n1")
    first = world.spawn("n1", lambda system: system.ref(hits, "k").ask(Hit()))
    world.run(until=1)
    assert first.result() == 1
    world.crash("n1")
    assert world.node("n1").status == "down"
    with pytest.raises(RuntimeError, match="n1 is down"):
        world.spawn("n1", lambda system: system.ref(hits, "k").ask(Hit()))
    world.restart("n1")
    second = world.spawn("n1", lambda system: system.ref(hits, "k").ask(Hit()))
    world.run(until=2)
    assert second.result() == 1
    assert [r.get("incarnation") for r in world.trace.of("node.started")] == [1, 2]
    assert [r.get("reason") for r in world.trace.of("activation.ended")] == ["crashed"]


def test_pause_holds_everything_until_resume() -> None:
    """A paused node answers nothing; on resume it catches up at the resume instant."""
    world = World(4)

    request_close(world)
    world.add_node("n1")
    world.run(until=1)
    world.pause("n1")
    task = world.spawn("n1", lambda system: system.ref(hits, "p").ask(Hit()))
    world.run(until=5)
    assert not task.done()
    world.resume("n1")
    world.run(until=6)
    assert task.result() == 1
    (started,) = world.trace.of("activation.started")
    assert started.t == 5.0


def test_per_link_override_changes_only_that_direction() -> None:
    """A slow a->b link delays frames from a to b only; b->a keeps the default latency."""
    world = World(5, network=LinkModel(latency=Latency(base=0.001, jitter=0.0)))
    request_close(world)
    world.add_node("a")
    world.add_node("b")
    got: list[tuple[float, str]] = []
    for name in ("a", "b"):
        endpoint = world.node(name).endpoint
        assert endpoint is not None
        endpoint.set_handler(lambda src, frame, me=name: got.append((round(world.now, 6), me)))
    world.network.link("a", "b", latency=Latency(base=0.5, jitter=0.0))
    world.run(until=1)
    a, b = world.node("a").endpoint, world.node("b").endpoint
    assert a is not None and b is not None
    a.send("b", b"slow")
    b.send("a", b"fast")
    world.run(until=2)
    assert got == [(1.001, "a"), (1.5, "b")]
