"""The simulated network: its trace rows (counted always, built only when kept) and its frame limit (TCP's)."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

from casty import ActorSystem, Askable, Context, MessageTooLarge, actor
from casty.protocol.limits import MAX_FRAME
from casty.cluster.tcp import MAX_FRAME as TCP_MAX_FRAME
from sim.scenarios.cluster import CLUSTER, NODES
from sim.world import World


def _three_nodes(world: World) -> World:
    for name in NODES:
        world.add_node(name, cluster=CLUSTER)
    world.run(until=3.0)
    return world


def test_unkept_frame_rows_are_counted_like_kept_ones() -> None:
    """A world that keeps no net.* rows counts the same net.sent / net.delivered events as one that keeps them all."""
    kept = _three_nodes(World(5))
    counted = _three_nodes(World(5, keep=lambda kind: not kind.startswith("net.")))
    assert kept.trace.counts["net.sent"] > 0
    for kind in ("net.sent", "net.delivered"):
        assert counted.trace.counts[kind] == kept.trace.counts[kind] == len(kept.trace.of(kind))
        assert not counted.trace.of(kind)
    same = [(r.t_ns, r.node, r.wall_us, r.kind, dict(r.fields)) for r in kept.trace if not r.kind.startswith("net.")]
    assert [(r.t_ns, r.node, r.wall_us, r.kind, dict(r.fields)) for r in counted.trace] == same


# --- the frame limit, the same as TCP's -------------------------------------------------------


@dataclass(frozen=True)
class Blob:
    """A message carrying ``data`` bytes, to cross the frame limit with."""

    data: bytes


@dataclass(frozen=True)
class Put(Askable[int]):
    """An ask carrying ``data`` bytes; the reply is the number of messages received."""

    data: bytes


@dataclass(frozen=True)
class Fetch(Askable[bytes]):
    """An ask whose reply is ``size`` bytes."""

    size: int


@actor(initial=0)
async def source(ctx: Context[int, Fetch]) -> None:
    """Replies to each ``Fetch`` with that many zero bytes."""
    async for msg in ctx.inbox:
        msg.reply_to.tell(b"\x00" * msg.size)


@actor(initial=0)
async def sink(ctx: Context[int, Blob | Put]) -> None:
    """Counts the messages it receives."""
    async for msg in ctx.inbox:
        await ctx.state.set(ctx.state.value + 1)
        if isinstance(msg, Put):
            msg.reply_to.tell(ctx.state.value)


def test_a_frame_over_the_limit_is_dropped_and_recorded_like_tcp_drops_it() -> None:
    """A frame of MAX_FRAME + 1 bytes handed to the simulated network is dropped with reason "too large"; one of MAX_FRAME is delivered."""
    world = _three_nodes(World(5))
    endpoint = world.node("n1").endpoint
    assert endpoint is not None
    assert endpoint.max_frame == MAX_FRAME == TCP_MAX_FRAME == 4 * 1024 * 1024
    before = world.network.dropped
    endpoint.send("n2", b"\x00" * (MAX_FRAME + 1))
    endpoint.send("n2", b"\x00" * MAX_FRAME)
    world.run(until=3.5)
    dropped = [r.fields for r in world.trace.of("net.dropped") if r.fields.get("reason") == "too large"]
    assert dropped == [{"dst": "n2", "size": MAX_FRAME + 1, "reason": "too large", "frame": None}]
    assert world.network.dropped == before + 1
    assert [r.fields["size"] for r in world.trace.of("net.delivered") if r.fields["size"] > 1024] == [MAX_FRAME]


def test_a_tell_or_ask_over_the_frame_limit_raises_message_too_large_at_the_sender() -> None:
    """In the simulator, a tell or ask to a key another node owns whose frame would exceed MAX_FRAME raises MessageTooLarge at once; small ones pass."""
    world = _three_nodes(World(5))
    key = next(k for k in (f"k{i}" for i in range(100)) if world.system("n1").placement(sink, k).owner != "n1")
    outcome: list[str] = []

    async def send(system: ActorSystem) -> int:
        ref = system.ref(sink, key)
        for attempt in (lambda: ref.tell(Blob(b"\x00" * MAX_FRAME)), lambda: ref.ask(Put(b"\x00" * MAX_FRAME))):
            try:
                result = attempt()
                if result is not None:
                    await result
            except MessageTooLarge as exc:
                outcome.append(re.sub(r"\d+ bytes, over", "N bytes, over", str(exc)))
        first = await ref.ask(Put(b"small"))
        return first * 10 + await ref.ask(Put(b"small"))

    task = world.spawn("n1", send)
    world.run(until=4.0)
    expected = f"{sink.name}[{key!r}]: its frame is N bytes, over the {MAX_FRAME}-byte frame limit"
    assert outcome == [expected, expected]
    assert task.result() == 12  # the key got the two small asks and nothing else
    assert not [r for r in world.trace.of("net.dropped") if r.fields.get("reason") == "too large"]


def test_a_reply_over_the_frame_limit_fails_the_remote_ask_with_message_too_large_at_once() -> None:
    """A body on another node replying MAX_FRAME bytes fails the ask with MessageTooLarge as soon as the answer comes back, not at the ask timeout."""
    world = _three_nodes(World(5))
    key = next(k for k in (f"k{i}" for i in range(100)) if world.system("n1").placement(source, k).owner != "n1")
    outcome: list[tuple[str, str, float]] = []

    async def fetch(system: ActorSystem) -> int:
        ref = system.ref(source, key)
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            await ref.ask(Fetch(MAX_FRAME))
        except Exception as exc:
            text = re.sub(r"ask \d+", "ask R", re.sub(r"\d+ bytes, over", "N bytes, over", str(exc)))
            outcome.append((type(exc).__name__, text, loop.time() - started))
        small = await ref.ask(Fetch(1000))
        return len(small)

    task = world.spawn("n1", fetch)
    world.run(until=6.0)
    ((error, text, took),) = outcome
    owner = world.system("n1").placement(source, key).owner
    assert (error, text) == ("MessageTooLarge", f"{owner}: the reply to ask R of n1: its frame is N bytes, over the {MAX_FRAME}-byte frame limit")
    assert took < 0.1 and task.result() == 1000
