"""TCP transport: the sans-I/O framing and handshake by hand and by property, then real sockets on 127.0.0.1.

Every socket test runs in its own ``asyncio.run`` under an ``asyncio.timeout`` guard
(``run`` below), so a bug can fail a test but never hang the suite. Waits poll a
condition (``until``) instead of sleeping a guessed time.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from casty.cluster.tcp import (
    MAX_FRAME,
    ConnectFailed,
    ConnectionLost,
    TcpLimits,
    TcpTransport,
)
from casty.protocol.framing import (
    HANDSHAKE_MAX,
    MAGIC,
    NONCE_SIZE,
    Challenge,
    Proof,
    proof,
    FrameDecoder,
    FrameError,
    Hello,
    HandshakeRefused as Refused,
    Welcome,
    decode_hello,
    decode_reply,
    encode_frame,
    encode_handshake,
    refusal,
)
from casty import Context, Occurrence, actor
from casty.clock import to_us
from casty.observer import Event
from casty.ports import Transport

T = TypeVar("T")
GUARD = 20.0


def run(main: Callable[[], Awaitable[T]], timeout: float = GUARD) -> T:
    """Run ``main()`` on a fresh loop; fail (never hang) if it takes longer than ``timeout``."""

    async def guarded() -> T:
        async with asyncio.timeout(timeout):
            return await main()

    return asyncio.run(guarded())


async def until(condition: Callable[[], bool], *, step: float = 0.005) -> None:
    """Poll ``condition`` until it holds (the caller's ``run`` guard bounds the wait)."""
    while not condition():
        await asyncio.sleep(step)


class Inbox:
    """A frame handler that keeps ``(source, frame)`` pairs."""

    def __init__(self) -> None:
        self.frames: list[tuple[str, bytes]] = []

    def __call__(self, source: str, frame: bytes) -> None:
        self.frames.append((source, frame))

    def payloads(self, source: str) -> list[bytes]:
        return [frame for src, frame in self.frames if src == source]


class Events:
    """An observer that keeps every event."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def __call__(self, event: Event) -> None:
        self.events.append(event)

    def lost(self) -> list[ConnectionLost]:
        return [e for e in self.events if isinstance(e, ConnectionLost)]

    def failed(self) -> list[ConnectFailed]:
        return [e for e in self.events if isinstance(e, ConnectFailed)]


async def started(*nodes: str, **options: Any) -> tuple[list[TcpTransport], list[Inbox], list[Events]]:
    """Start one transport per node id, each knowing all the others, with an inbox and an event log each."""
    transports, inboxes, logs = [], [], []
    for node in nodes:
        events = Events()
        transport = TcpTransport(node, observer=events, **options)
        inbox = Inbox()
        transport.set_handler(inbox)
        await transport.start()
        transports.append(transport)
        inboxes.append(inbox)
        logs.append(events)
    for transport in transports:
        for other in transports:
            if other is not transport:
                transport.add_peer(other.node, other.address)
    return transports, inboxes, logs


async def close_all(*transports: TcpTransport) -> None:
    for transport in transports:
        await transport.close()


async def raw_connect(transport: TcpTransport) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, port = transport.address
    return await asyncio.open_connection(host, port)


async def read_to_eof(reader: asyncio.StreamReader) -> bytes:
    """Everything the other side sends until it closes (a reset counts as closed)."""
    chunks = []
    try:
        while chunk := await reader.read(65536):
            chunks.append(chunk)
    except ConnectionError:
        pass
    return b"".join(chunks)


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    """The next whole frame from a raw connection (the handshake reply)."""
    decoder = FrameDecoder(first_max=HANDSHAKE_MAX)
    frames: list[bytes] = []
    while not frames:
        chunk = await reader.read(HANDSHAKE_MAX)
        assert chunk, "closed before a whole frame"
        frames = decoder.feed(chunk)
    return frames[0]


def free_port() -> int:
    """A loopback port with (very likely) nothing listening on it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


# --- the sans-I/O framing core ---------------------------------------------------------------


def test_decoder_splits_and_merges_by_hand() -> None:
    """Frames come out whole and in order whether chunks cut through a header, a payload, or hold several frames."""
    stream = encode_frame(b"hello") + encode_frame(b"") + encode_frame(b"x" * 300)
    decoder = FrameDecoder()
    assert decoder.feed(stream[:2]) == []  # half a header
    assert decoder.feed(stream[2:6]) == []  # header done, one payload byte
    assert decoder.pending == 6
    assert decoder.feed(stream[6:20]) == [b"hello", b""]  # the rest of frame 1, all of the empty frame, part of 3
    assert decoder.feed(stream[20:]) == [b"x" * 300]
    assert decoder.pending == 0 and decoder.decoded == 3
    assert FrameDecoder().feed(stream) == [b"hello", b"", b"x" * 300]


def test_decoder_refuses_an_oversized_length_from_the_header_alone() -> None:
    """A length over the limit fails as soon as its 4 header bytes are in, keeps the frames before it, and stays failed."""
    decoder = FrameDecoder(max_frame=10)
    with pytest.raises(FrameError) as info:
        decoder.feed(encode_frame(b"ok", 10) + (11).to_bytes(4, "big"))
    assert info.value.frames == [b"ok"]
    assert "11 bytes exceeds the 10-byte limit" in info.value.reason
    assert decoder.error is not None
    with pytest.raises(FrameError):
        decoder.feed(encode_frame(b"fine", 10))
    with pytest.raises(FrameError):
        encode_frame(b"x" * 11, 10)


def test_first_frame_has_its_own_limit() -> None:
    """``first_max`` bounds only the first frame (the handshake); later frames may use all of ``max_frame``."""
    big = b"y" * 5000
    decoder = FrameDecoder(max_frame=10_000, first_max=HANDSHAKE_MAX)
    assert decoder.feed(encode_frame(b"hi") + encode_frame(big, 10_000)) == [b"hi", big]
    with pytest.raises(FrameError, match="handshake frame of 5000 bytes"):
        FrameDecoder(max_frame=10_000, first_max=HANDSHAKE_MAX).feed(encode_frame(big, 10_000))
    # junk such as an HTTP request reads as a huge length: refused at once
    with pytest.raises(FrameError, match="exceeds"):
        FrameDecoder(first_max=HANDSHAKE_MAX).feed(b"GET / HTTP/1.1\r\n\r\n")


def chunked(stream: bytes, cuts: list[int]) -> list[bytes]:
    points = [0, *sorted(set(cuts)), len(stream)]
    return [stream[a:b] for a, b in zip(points, points[1:])]


@settings(max_examples=300, deadline=None)
@given(frames=st.lists(st.binary(max_size=200), max_size=25), data=st.data())
def test_any_chunking_decodes_to_the_same_frames(frames: list[bytes], data: st.DataObject) -> None:
    """Property: however a stream of frames is cut into chunks (empty ones included), it decodes to exactly those frames."""
    stream = b"".join(encode_frame(f) for f in frames)
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=40), label="cuts")
    decoder = FrameDecoder(max_frame=200)
    out: list[bytes] = []
    for chunk in chunked(stream, cuts):
        out += decoder.feed(chunk)
    assert out == frames
    assert decoder.pending == 0


@settings(max_examples=200, deadline=None)
@given(frames=st.lists(st.binary(max_size=50), max_size=10), excess=st.integers(1, 2**32 - 101), data=st.data())
def test_any_chunking_stops_at_the_same_oversized_frame(frames: list[bytes], excess: int, data: st.DataObject) -> None:
    """Property: valid frames followed by an oversized header yield exactly the valid frames, then one FrameError, for any chunking."""
    stream = b"".join(encode_frame(f) for f in frames) + (100 + excess).to_bytes(4, "big") + b"junk"
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=30), label="cuts")
    decoder = FrameDecoder(max_frame=100)
    out: list[bytes] = []
    error: FrameError | None = None
    for chunk in chunked(stream, cuts):
        try:
            out += decoder.feed(chunk)
        except FrameError as exc:
            out += exc.frames
            error = exc
            break
    assert out == frames
    assert error is not None and "exceeds the 100-byte limit" in error.reason


def test_handshake_messages_round_trip_and_garbage_is_a_frame_error() -> None:
    """Hello, Welcome and Refused survive bytes; anything else in their place raises FrameError with a reason."""
    hello = Hello(MAGIC, "lab", "n1")
    (frame,) = FrameDecoder().feed(encode_handshake(hello))
    assert decode_hello(frame) == hello
    (frame,) = FrameDecoder().feed(encode_handshake(Welcome("n2")))
    assert decode_reply(frame) == Welcome("n2")
    (frame,) = FrameDecoder().feed(encode_handshake(Refused("no")))
    assert decode_reply(frame) == Refused("no")
    for junk in (b"", b"\xc1", b"not msgpack", msgspec.msgpack.encode({"type": "hello", "magic": 1})):
        with pytest.raises(FrameError, match="malformed handshake"):
            decode_hello(junk)
    with pytest.raises(FrameError, match="malformed handshake reply"):
        decode_reply(msgspec.msgpack.encode(hello))  # a Hello is not a reply


def test_refusal_reasons() -> None:
    """The acceptor refuses another magic, another cluster, an empty node id and its own id; it welcomes the rest."""
    assert refusal(Hello(MAGIC, "lab", "n1"), cluster="lab", node="n2") is None
    assert "unsupported protocol" in (refusal(Hello("casty/0", "lab", "n1"), cluster="lab", node="n2") or "")
    assert "cluster 'other'" in (refusal(Hello(MAGIC, "other", "n1"), cluster="lab", node="n2") or "")
    assert "empty node id" in (refusal(Hello(MAGIC, "lab", ""), cluster="lab", node="n2") or "")
    assert "own" in (refusal(Hello(MAGIC, "lab", "n2"), cluster="lab", node="n2") or "")


# --- real sockets on loopback ----------------------------------------------------------------


def test_transport_port_and_loopback_default() -> None:
    """TcpTransport is a casty Transport, listens on 127.0.0.1 by default with a real port, and refuses bad options."""

    async def main() -> None:
        transport = TcpTransport("n1")
        assert isinstance(transport, Transport)
        with pytest.raises(RuntimeError):
            transport.address
        await transport.start()
        host, port = transport.address
        assert host == "127.0.0.1" and port > 0
        await transport.close()
        await transport.close()  # idempotent

    run(main)
    with pytest.raises(ValueError):
        TcpTransport("")
    with pytest.raises(ValueError):
        TcpTransport("n1", max_frame=100, queue_bytes=99)


def test_two_transports_exchange_frames_both_ways_in_order() -> None:
    """1000 frames each way between two transports all arrive, in order, tagged with the sender's node id."""

    async def main() -> None:
        (a, b), (inbox_a, inbox_b), (events_a, events_b) = await started("a", "b")
        sent_ab = [f"a->b {i}".encode() for i in range(1000)]
        sent_ba = [f"b->a {i}".encode() * (i % 7 + 1) for i in range(1000)]
        for x, y in zip(sent_ab, sent_ba):
            a.send("b", x)
            b.send("a", y)
        await until(lambda: len(inbox_b.frames) == 1000 and len(inbox_a.frames) == 1000)
        assert inbox_b.frames == [("a", f) for f in sent_ab]
        assert inbox_a.frames == [("b", f) for f in sent_ba]
        assert a.stats.connects == b.stats.connects == 1
        assert a.stats.sent == b.stats.sent == 1000 and a.stats.dropped == b.stats.dropped == 0
        assert a.outgoing == {"b"} and b.outgoing == {"a"}
        assert events_a.events == events_b.events == []
        await close_all(a, b)

    run(main)


def test_oversized_frame_closes_only_that_connection(caplog: pytest.LogCaptureFixture) -> None:
    """A 4 MiB + 1 frame closes that connection with a logged reason; frames before it arrive, the sender reconnects, a third node is untouched."""

    async def main() -> None:
        (b,), (inbox_b,), (events_b,) = await started("b")
        sender_events, c_events = Events(), Events()
        a = TcpTransport("a", max_frame=2 * MAX_FRAME, queue_bytes=4 * MAX_FRAME, observer=sender_events)
        c = TcpTransport("c", observer=c_events)
        for t in (a, c):
            await t.start()
            t.add_peer("b", b.address)
        c.send("b", b"c before")
        await until(lambda: inbox_b.payloads("c") == [b"c before"])

        a.send("b", b"first")
        a.send("b", b"\x00" * (MAX_FRAME + 1))  # the sender allows it, the receiver does not
        await until(lambda: len(events_b.lost()) == 1)
        (lost,) = events_b.lost()
        assert lost.node == "a" and lost.direction == "in"
        assert f"frame of {MAX_FRAME + 1} bytes exceeds the {MAX_FRAME}-byte limit" in lost.reason
        assert inbox_b.payloads("a") == [b"first"]
        assert b.stats.protocol_errors == 1
        await until(lambda: len(sender_events.lost()) == 1)  # the sender saw its connection go

        # the sender keeps working after reconnecting (a probe or two may fall in the gap)
        probes = 0
        while b"probe" not in inbox_b.payloads("a"):
            a.send("b", b"probe")
            probes += 1
            await asyncio.sleep(0.02)
        assert a.stats.connects == 2 and probes < 100

        # the third node never noticed
        c.send("b", b"c after")
        await until(lambda: inbox_b.payloads("c") == [b"c before", b"c after"])
        assert c.stats.connects == 1 and c_events.events == []
        assert all(e.node != "c" for e in events_b.lost())
        await close_all(a, b, c)

    with caplog.at_level(logging.INFO, logger="casty.tcp"):
        run(main)
    assert any(
        r.name == "casty.tcp" and r.levelno == logging.WARNING and "exceeds" in r.getMessage() for r in caplog.records
    )


def test_garbage_bytes_close_only_that_connection(caplog: pytest.LogCaptureFixture) -> None:
    """Junk before, instead of, or after a handshake closes that raw connection with a logged reason; a real peer's connection lives on."""

    async def main() -> None:
        (a, b), (inbox_a, inbox_b), (events_a, events_b) = await started("a", "b")
        a.send("b", b"one")
        await until(lambda: inbox_b.payloads("a") == [b"one"])

        # 1. not our protocol at all (reads as a huge length)
        reader, writer = await raw_connect(b)
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert await read_to_eof(reader) == b""
        writer.close()

        # 2. a small frame that is not a Hello
        reader, writer = await raw_connect(b)
        writer.write(encode_frame(b"\xde\xad\xbe\xef"))
        assert await read_to_eof(reader) == b""
        writer.close()

        # 3. a proper handshake, then a frame with a corrupt length
        reader, writer = await raw_connect(b)
        writer.write(encode_handshake(Hello(MAGIC, "casty", "mallory")))
        assert decode_reply(await read_frame(reader)) == Welcome("b")
        writer.write(encode_frame(b"legit") + b"\xff\xff\xff\xff" + b"junk")
        assert await read_to_eof(reader) == b""
        writer.close()

        await until(lambda: len(events_b.lost()) == 3)
        first, second, third = events_b.lost()
        assert first.node == "" and "handshake frame of" in first.reason
        assert second.node == "" and "malformed handshake" in second.reason
        assert third.node == "mallory" and "exceeds" in third.reason
        assert inbox_b.payloads("mallory") == [b"legit"]  # frames before the junk were delivered
        assert b.stats.protocol_errors == 3

        # the real peer's connection was never touched, in either direction
        a.send("b", b"two")
        b.send("a", b"back")
        await until(lambda: inbox_b.payloads("a") == [b"one", b"two"] and inbox_a.payloads("b") == [b"back"])
        assert a.stats.connects == 1 and events_a.events == []
        assert b.incoming == 1
        await close_all(a, b)

    with caplog.at_level(logging.INFO, logger="casty.tcp"):
        run(main)
    warnings = [r.getMessage() for r in caplog.records if r.name == "casty.tcp" and r.levelno == logging.WARNING]
    assert sum("protocol error" in m for m in warnings) == 3


def test_handshake_from_another_cluster_is_refused() -> None:
    """A node of another cluster (or another protocol) gets Refused with a reason and the connection closes; nothing is delivered."""

    async def main() -> None:
        (blue,), (inbox_blue,), (events_blue,) = await started("blue", cluster="blue")
        (red,), _, (events_red,) = await started("red", cluster="red")
        red.add_peer("blue", blue.address)
        red.send("blue", b"hi")
        await until(lambda: len(events_red.failed()) == 1)
        (failed,) = events_red.failed()
        assert failed.node == "blue" and failed.dropped == 1
        assert "refused" in failed.reason and "cluster 'red'" in failed.reason
        assert red.stats.dropped_unreachable == 1 and red.stats.connects == 0
        await until(lambda: len(events_blue.lost()) == 1)
        assert events_blue.lost()[0].node == "red" and "refused" in events_blue.lost()[0].reason
        assert blue.stats.refused == 1 and inbox_blue.frames == []

        # a raw dialer with the wrong magic reads a Refused frame, then end of stream
        reader, writer = await raw_connect(blue)
        writer.write(encode_handshake(Hello("casty/0", "blue", "old")))
        (reply,) = FrameDecoder().feed(await read_to_eof(reader))
        answer = decode_reply(reply)
        assert isinstance(answer, Refused) and "unsupported protocol" in answer.reason
        writer.close()
        await until(lambda: blue.stats.refused == 2)
        assert inbox_blue.frames == []
        await close_all(red, blue)

    run(main)


def test_send_to_unknown_or_unreachable_node_drops_without_raising() -> None:
    """Frames to an unknown node, a dead address, over max_frame, before start or after close are dropped and counted; send never raises."""

    async def main() -> None:
        events = Events()
        a = TcpTransport("a", max_frame=1000, queue_frames=10, observer=events)
        a.send("ghost", b"too early")
        assert a.stats.dropped_closed == 1
        await a.start()
        a.send("ghost", b"who?")
        assert a.stats.dropped_unknown == 1
        a.add_peer("dead", ("127.0.0.1", free_port()))
        a.send("dead", b"x" * 1001)
        assert a.stats.dropped_too_large == 1
        for i in range(25):
            a.send("dead", b"%d" % i)  # returns at once; the queue keeps the newest 10
        assert a.stats.dropped_overflow == 15
        await until(lambda: len(events.failed()) == 1)
        (failed,) = events.failed()
        assert failed.node == "dead" and failed.dropped == 10 and "ConnectionRefused" in failed.reason
        assert a.stats.dropped_unreachable == 10
        with pytest.raises(TypeError):
            a.send("dead", "not bytes")  # type: ignore[arg-type]
        await a.close()
        a.send("dead", b"too late")
        assert a.stats.dropped_closed == 2
        assert a.stats.dropped == 2 + 1 + 1 + 15 + 10  # closed, unknown, too large, overflow, unreachable

    run(main)


def test_full_queue_drops_the_oldest_frames() -> None:
    """With a full queue the oldest frames go: a burst of 10 into a queue of 3 delivers the last 3, in order."""

    async def main() -> None:
        (a, b), (_, inbox_b), _ = await started("a", "b", queue_frames=3)
        for i in range(10):
            a.send("b", b"%d" % i)  # all queued before the connection task even runs
        await until(lambda: len(inbox_b.frames) == 3)
        assert inbox_b.payloads("a") == [b"7", b"8", b"9"]
        assert a.stats.dropped_overflow == 7
        await close_all(a, b)

    run(main)


def test_backoff_doubles_up_to_its_cap() -> None:
    """Failed attempts to a dead address back off 10, 20, 40 ms then stay at the 50 ms cap (no rng: no jitter)."""

    async def main() -> None:
        events = Events()
        a = TcpTransport("a", backoff_min=0.01, backoff_max=0.05, observer=events)
        await a.start()
        a.add_peer("dead", ("127.0.0.1", free_port()))
        while len(events.failed()) < 5:
            a.send("dead", b"ping")
            await asyncio.sleep(0.005)
        assert [e.retry_in for e in events.failed()[:5]] == [0.01, 0.02, 0.04, 0.05, 0.05]
        await a.close()

    run(main)


def test_reconnects_to_a_restarted_peer() -> None:
    """When a peer goes away and comes back (on a new port, told by add_peer), the sender reports the loss and reconnects."""

    async def main() -> None:
        (a, b), (_, inbox_b), (events_a, _) = await started("a", "b")
        a.send("b", b"before")
        await until(lambda: inbox_b.payloads("a") == [b"before"])
        await b.close()
        await until(lambda: len(events_a.lost()) == 1)
        assert events_a.lost()[0].node == "b" and events_a.lost()[0].direction == "out"

        (b2,), (inbox_b2,), _ = await started("b")
        a.add_peer("b", b2.address)
        while b"after" not in inbox_b2.payloads("a"):
            a.send("b", b"after")
            await asyncio.sleep(0.02)
        assert a.stats.connects == 2
        await close_all(a, b2)

    run(main)


def test_self_sends_and_a_failing_handler() -> None:
    """A frame to oneself is delivered locally; a handler that raises is logged and the connection keeps going."""

    async def main() -> None:
        (a, b), (inbox_a, _), _ = await started("a", "b")
        a.send("a", b"me")
        await until(lambda: inbox_a.frames == [("a", b"me")])

        seen: list[bytes] = []

        def fragile(source: str, frame: bytes) -> None:
            seen.append(frame)
            if frame == b"boom":
                raise RuntimeError("handler bug")

        b.set_handler(fragile)
        for frame in (b"boom", b"after"):
            a.send("b", frame)
        await until(lambda: seen == [b"boom", b"after"])
        assert a.stats.connects == 1 and b.stats.connections_lost == 0
        await close_all(a, b)

    run(main)


def test_close_leaves_no_pending_tasks() -> None:
    """close() ends every task of the transport: connected peers, a peer in backoff, a half-open handshake, a raw welcomed dialer."""

    async def main() -> None:
        (a, b), (inbox_a, inbox_b), (events_a, _) = await started("a", "b", connect_timeout=30.0)
        a.send("b", b"x")
        b.send("a", b"y")
        await until(lambda: bool(inbox_a.frames) and bool(inbox_b.frames))
        a.add_peer("dead", ("127.0.0.1", free_port()))
        a.send("dead", b"lost")
        await until(lambda: len(events_a.failed()) == 1)
        a.send("dead", b"waiting out the backoff")

        silent_reader, silent_writer = await raw_connect(b)  # never says hello
        welcomed_reader, welcomed_writer = await raw_connect(b)
        welcomed_writer.write(encode_handshake(Hello(MAGIC, "casty", "raw")))
        assert decode_reply(await read_frame(welcomed_reader)) == Welcome("b")
        await until(lambda: b.incoming == 3)

        await close_all(a, b)
        assert asyncio.all_tasks() == {asyncio.current_task()}
        assert await read_to_eof(silent_reader) == b""
        assert await read_to_eof(welcomed_reader) == b""
        for writer in (silent_writer, welcomed_writer):
            writer.close()
            await writer.wait_closed()
        assert asyncio.all_tasks() == {asyncio.current_task()}

    run(main)


def test_silent_dialer_is_closed_after_the_handshake_timeout() -> None:
    """A connection that never sends its handshake is closed after connect_timeout, with a reason."""

    async def main() -> None:
        (b,), _, (events_b,) = await started("b", connect_timeout=0.1)
        reader, writer = await raw_connect(b)
        assert await read_to_eof(reader) == b""
        writer.close()
        await until(lambda: len(events_b.lost()) == 1)
        assert "no handshake within 0.1s" in events_b.lost()[0].reason
        await b.close()

    run(main)


# --- resource bounds: connection caps, handshake and idle timeouts, buffered bytes -----------


async def raw_hello(transport: TcpTransport, node: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A raw connection that shook hands as ``node`` (its Welcome read), then holds still."""
    reader, writer = await raw_connect(transport)
    writer.write(encode_handshake(Hello(MAGIC, transport.cluster, node)))
    assert isinstance(decode_reply(await read_frame(reader)), Welcome)
    return reader, writer


async def closed_by_peer(reader: asyncio.StreamReader) -> bool:
    """Whether the other side closes this raw connection within 0.3 s."""
    try:
        async with asyncio.timeout(0.3):
            await read_to_eof(reader)
    except TimeoutError:
        return False
    return True


@pytest.mark.parametrize(
    "option, value",
    [
        ("max_connections", 0), ("max_handshakes", -1), ("max_buffered", 0), ("max_connections", 2.5),
        ("handshake_timeout", float("nan")), ("handshake_timeout", float("inf")), ("handshake_timeout", -1.0),
        ("idle_timeout", float("nan")), ("idle_timeout", float("inf")), ("idle_timeout", 0.0),
    ],
)
def test_bad_resource_bounds_are_refused_naming_the_option(option: str, value: float) -> None:
    """A cap or timeout of TcpLimits that is NaN, infinite, zero, negative or not an int is a ValueError naming it."""
    options: dict[str, Any] = {option: value}
    with pytest.raises(ValueError, match=f"^{option} must be "):
        TcpLimits(**options)


def test_transport_timeouts_and_the_byte_bound_are_checked_too() -> None:
    """connect_timeout or backoff NaN/inf, and a max_buffered that cannot hold one max_frame, are ValueErrors naming them."""
    with pytest.raises(ValueError, match="^connect_timeout must be a positive, finite number of seconds, got nan$"):
        TcpTransport("n1", connect_timeout=float("nan"))
    with pytest.raises(ValueError, match="^backoff_max must be a positive, finite number of seconds, got inf$"):
        TcpTransport("n1", backoff_max=float("inf"))
    with pytest.raises(ValueError, match="^max_buffered \\(1003\\) must hold one partial frame of max_frame \\(1000\\) bytes$"):
        TcpTransport("n1", max_frame=1000, limits=TcpLimits(max_buffered=1003))
    assert TcpTransport("n1", max_frame=1000, limits=TcpLimits(max_buffered=1004)).limits.max_buffered == 1004


def test_by_default_three_hundred_idle_sockets_hold_at_most_64_slots_and_a_peer_still_gets_in() -> None:
    """With the default limits, 300 silent raw sockets leave at most 64 connections open (the oldest evicted), and a real peer connects and is served."""

    async def main() -> None:
        (a, b), (_, inbox_b), _ = await started("a", "b")
        idle = [await raw_connect(b) for _ in range(300)]
        await until(lambda: b.stats.evicted == 300 - 64 and b.incoming == 64)
        a.send("b", b"hello")
        await until(lambda: inbox_b.payloads("a") == [b"hello"] and b.incoming == 64)
        assert b.stats.evicted == 300 - 64 + 1 and b.stats.accepts == 1
        for _, writer in idle:
            writer.close()
        await close_all(a, b)

    run(main)


def test_the_connection_cap_refuses_the_next_socket_and_the_node_keeps_serving_its_peer() -> None:
    """With max_connections=4 and a peer connected, 3 idle raw sockets fill the cap; the next is closed at once, the peer's frames still flow both ways."""

    async def main() -> None:
        (a, b), (inbox_a, inbox_b), (_, events_b) = await started("a", "b", limits=TcpLimits(max_connections=4))
        a.send("b", b"before")
        await until(lambda: inbox_b.payloads("a") == [b"before"])
        idle = [await raw_connect(b) for _ in range(3)]
        await until(lambda: b.incoming == 4)
        reader, writer = await raw_connect(b)
        assert await closed_by_peer(reader)
        assert b.incoming == 4 and b.stats.over_cap == 1
        (lost,) = events_b.lost()
        assert (lost.node, lost.reason, lost.direction) == ("", "over the connection cap (4 incoming connections)", "in")
        a.send("b", b"after")
        b.send("a", b"answer")
        await until(lambda: inbox_b.payloads("a") == [b"before", b"after"] and inbox_a.payloads("b") == [b"answer"])
        for _, w in [*idle, (reader, writer)]:
            w.close()
        await close_all(a, b)

    run(main)


def test_connections_stuck_in_the_handshake_make_room_for_a_new_peer() -> None:
    """With max_handshakes=3, three silent sockets hold every handshake slot; a real peer dialing in evicts the oldest and is served."""

    async def main() -> None:
        (a, b), (_, inbox_b), (_, events_b) = await started("a", "b", limits=TcpLimits(max_handshakes=3))
        silent = []
        for _ in range(3):
            silent.append(await raw_connect(b))
            await until(lambda: b.incoming == len(silent))
        a.send("b", b"hello")
        await until(lambda: inbox_b.payloads("a") == [b"hello"])
        assert await closed_by_peer(silent[0][0])
        assert not await closed_by_peer(silent[1][0]) and b.stats.evicted == 1
        assert [e.reason for e in events_b.lost()] == ["evicted: more than 3 connections in the handshake"]
        for _, w in silent:
            w.close()
        await close_all(a, b)

    run(main)


def test_a_silent_connection_is_closed_after_handshake_timeout() -> None:
    """handshake_timeout (not connect_timeout, left at 5 s) bounds how long a connection may stay silent before its Hello."""

    async def main() -> None:
        (b,), _, (events_b,) = await started("b", limits=TcpLimits(handshake_timeout=0.1))
        loop = asyncio.get_running_loop()
        started_at = loop.time()
        reader, writer = await raw_connect(b)
        assert await read_to_eof(reader) == b""
        assert loop.time() - started_at < 1.0
        writer.close()
        await until(lambda: len(events_b.lost()) == 1)
        assert events_b.lost()[0].reason == "no handshake within 0.1s"
        await b.close()

    run(main)


def test_an_idle_connection_is_closed_after_idle_timeout_and_the_dialer_reconnects() -> None:
    """A welcomed connection with no frame for idle_timeout is closed; a transport that dialed it reconnects on its next frame."""

    async def main() -> None:
        (a, b), (_, inbox_b), (events_a, events_b) = await started("a", "b", limits=TcpLimits(idle_timeout=0.2))
        reader, writer = await raw_hello(b, "stranger")
        a.send("b", b"one")
        await until(lambda: inbox_b.payloads("a") == [b"one"])
        assert await read_to_eof(reader) == b""
        await until(lambda: len(events_b.lost()) == 2)
        assert sorted((e.node, e.reason) for e in events_b.lost()) == [("a", "idle for 0.2s"), ("stranger", "idle for 0.2s")]
        await until(lambda: len(events_a.lost()) == 1)
        a.send("b", b"two")
        await until(lambda: inbox_b.payloads("a") == [b"one", b"two"])
        writer.close()
        await close_all(a, b)

    run(main)


def test_partial_frames_over_the_global_byte_bound_are_closed_not_buffered() -> None:
    """Five connections each hold a 9000-byte partial frame; with max_buffered=30000 the fourth and fifth are closed, 27000 bytes stay buffered."""

    async def main() -> None:
        (a, b), (_, inbox_b), (_, events_b) = await started("a", "b", max_frame=10_000, limits=TcpLimits(max_buffered=30_000))
        conns = []
        for i in range(5):
            reader, writer = await raw_hello(b, f"s{i}")
            writer.write(struct.pack(">I", 10_000) + b"\x00" * 9_000)
            await writer.drain()
            conns.append((reader, writer))
            await until(lambda: b.buffered == min(9_004 * (i + 1), 27_012) and len(events_b.lost()) == max(0, i - 2))
        assert [await closed_by_peer(r) for r, _ in conns] == [False, False, False, True, True]
        reason = "protocol error: 36016 bytes buffered across connections, over max_buffered 30000"
        assert [(e.node, e.reason) for e in events_b.lost()] == [("s3", reason), ("s4", reason)]
        assert b.buffered == 27_012 and b.stats.over_buffered == 2
        a.send("b", b"small")
        await until(lambda: inbox_b.payloads("a") == [b"small"])
        for _, w in conns:
            w.close()
        await until(lambda: b.buffered == 0)
        await close_all(a, b)

    run(main)


# --- the cluster secret: an HMAC challenge in the handshake ----------------------------------

SECRET = b"correct horse battery staple"
IDS = {"cluster": "casty", "dialer": "a", "acceptor": "b"}


def test_a_proof_binds_the_secret_the_role_the_ids_and_both_nonces() -> None:
    """Changing any input of a proof (secret, role, cluster, either id, either nonce) changes it: none fits another connection."""
    n1, n2 = b"\x01" * NONCE_SIZE, b"\x02" * NONCE_SIZE
    base = proof(SECRET, "dialer", **IDS, dialer_nonce=n1, acceptor_nonce=n2)
    others = [
        proof(b"another secret", "dialer", **IDS, dialer_nonce=n1, acceptor_nonce=n2),
        proof(SECRET, "acceptor", **IDS, dialer_nonce=n1, acceptor_nonce=n2),
        proof(SECRET, "dialer", cluster="other", dialer="a", acceptor="b", dialer_nonce=n1, acceptor_nonce=n2),
        proof(SECRET, "dialer", cluster="casty", dialer="b", acceptor="a", dialer_nonce=n1, acceptor_nonce=n2),
        proof(SECRET, "dialer", cluster="casty", dialer="a", acceptor="c", dialer_nonce=n1, acceptor_nonce=n2),
        proof(SECRET, "dialer", **IDS, dialer_nonce=n2, acceptor_nonce=n1),
    ]
    assert len(base) == 32 and len({base, *others}) == 7
    assert base == proof(SECRET, "dialer", **IDS, dialer_nonce=n1, acceptor_nonce=n2)


def test_a_secret_is_bytes_or_text_never_empty_never_shown() -> None:
    """secret= takes bytes or str (UTF-8); empty or another type is refused; the transport says whether it uses one without showing it."""
    with pytest.raises(ValueError, match="secret must not be empty"):
        TcpTransport("a", secret="")
    with pytest.raises(TypeError, match="secret must be bytes or str, got int"):
        TcpTransport("a", secret=7)  # type: ignore[arg-type]
    transport = TcpTransport("a", secret="s\u00e9same")
    assert transport.authenticated and transport.uses_secret("s\u00e9same".encode()) and not transport.uses_secret("other")
    assert not TcpTransport("a").authenticated and not TcpTransport("a").uses_secret("s\u00e9same")
    assert "same" not in repr(transport)


def test_the_handshake_nonces_come_from_the_entropy_port() -> None:
    """With a secret, each side's nonce is drawn from the injected Entropy (NONCE_SIZE bytes a call) and the peers still talk."""
    drawn: list[tuple[str, int]] = []

    def entropy_of(node: str) -> Callable[[int], bytes]:
        def entropy(n: int) -> bytes:
            drawn.append((node, n))
            return os.urandom(n)
        return entropy

    async def main() -> None:
        a = TcpTransport("a", secret=SECRET, entropy=entropy_of("a"))
        b = TcpTransport("b", secret=SECRET, entropy=entropy_of("b"))
        inbox = Inbox()
        b.set_handler(inbox)
        await a.start()
        await b.start()
        a.add_peer("b", b.address)
        a.send("b", b"ping")
        await until(lambda: inbox.payloads("a") == [b"ping"])
        await close_all(a, b)

    asyncio.run(main())
    assert sorted(drawn) == [("a", NONCE_SIZE), ("b", NONCE_SIZE)]  # the dialer's Hello nonce, the acceptor's Challenge nonce (drawn at accept)


def test_peers_with_the_secret_talk_and_peers_without_it_or_with_another_are_refused() -> None:
    """Two nodes with the secret exchange frames; a node without it, with another one, or without one facing a dialer that has it, is refused on both sides and nothing of it is delivered."""

    async def main() -> None:
        (a, b), (inbox_a, inbox_b), (events_a, events_b) = await started("a", "b", secret=SECRET)
        a.send("b", b"ping")
        b.send("a", b"pong")
        await until(lambda: inbox_b.payloads("a") == [b"ping"] and inbox_a.payloads("b") == [b"pong"])
        assert events_a.events == events_b.events == []

        (none, plain), (inbox_none, inbox_plain), (log_none, log_plain) = await started("none", "plain")
        (wrong,), _, (log_wrong,) = await started("wrong", secret=b"another secret")
        logs, inboxes = [log_none, log_wrong, log_plain], [inbox_none, inbox_plain, inbox_plain]
        for stranger in (none, wrong):
            stranger.add_peer("b", b.address)
            stranger.send("b", b"let me in")
        b.add_peer("plain", plain.address)
        b.send("plain", b"hello plain")
        await until(lambda: all(len(log.failed()) == 1 for log in (logs[0], logs[1], events_b)))
        assert logs[0].failed()[0].reason == "refused: this cluster needs its secret: the dialer has none"
        assert logs[1].failed()[0].reason == "the acceptor's proof of the cluster secret is wrong"
        assert events_b.failed()[0].reason == "refused: the dialer has a cluster secret and this node has none"
        await until(lambda: len(events_b.lost()) == 2 and len(logs[2].lost()) == 1)
        assert sorted((e.node, e.reason) for e in events_b.lost()) == [
            ("none", "refused: this cluster needs its secret: the dialer has none"),
            ("wrong", "closed by the peer before the handshake"),
        ]
        assert inbox_b.payloads("none") == inbox_b.payloads("wrong") == [] and inboxes[2].frames == []
        assert b.stats.refused == 1 and b.stats.accepts == 1

        a.send("b", b"still here")  # b kept serving its peer
        await until(lambda: inbox_b.payloads("a") == [b"ping", b"still here"])
        await close_all(a, b, none, wrong, plain)

    run(main)


def test_a_stranger_cannot_reflect_the_challenge_nor_slip_a_frame_before_its_proof() -> None:
    """A raw dialer that sends the acceptor's own proof back is refused; one that pipelines a frame after its Hello is closed; neither frame is delivered."""

    async def main() -> None:
        (b,), (inbox_b,), (events_b,) = await started("b", secret=SECRET)
        reader, writer = await raw_connect(b)
        writer.write(encode_handshake(Hello(MAGIC, "casty", "a", b"\x07" * NONCE_SIZE)))
        challenge = decode_reply(await read_frame(reader))
        assert isinstance(challenge, Challenge) and challenge.node == "b" and len(challenge.nonce) == NONCE_SIZE
        assert challenge.proof == proof(SECRET, "acceptor", **IDS, dialer_nonce=b"\x07" * NONCE_SIZE, acceptor_nonce=challenge.nonce)
        writer.write(encode_handshake(Proof(challenge.proof)))  # the reflection
        (refused,) = FrameDecoder().feed(await read_to_eof(reader))
        assert decode_reply(refused) == Refused("wrong proof of the cluster secret")
        writer.close()

        reader, writer = await raw_connect(b)
        writer.write(encode_handshake(Hello(MAGIC, "casty", "a", b"\x08" * NONCE_SIZE)) + encode_frame(b"sneaked in"))
        assert await read_to_eof(reader) == b""
        writer.close()
        await until(lambda: len(events_b.lost()) == 2)
        assert [e.reason for e in events_b.lost()] == [
            "refused: wrong proof of the cluster secret",
            "protocol error: data after the hello, before the challenge",
        ]
        assert inbox_b.frames == [] and b.stats.refused == 1 and b.stats.protocol_errors == 1
        await b.close()

    run(main)


# --- a node schedule's tick over TCP carries its occurrence -----------------------------------------------

TICKS: list[tuple[str, Any]] = []  # (node, ctx.occurrence) of every Tick tcp_ticked handled


@dataclass(frozen=True)
class Tick:
    pass


@actor
async def tcp_ticked(ctx: Context[None, Tick]) -> None:
    """Records the node and occurrence of every Tick; raises on the second (its drop must name it)."""
    async for _ in ctx.inbox:
        TICKS.append((ctx.system.node, ctx.occurrence))
        if len(TICKS) == 2:
            raise RuntimeError("the second tick fails")


def test_a_node_schedule_tick_to_a_key_the_other_tcp_node_owns_carries_its_occurrence() -> None:
    """Two NodeProcesses on loopback TCP: a's node schedule every 0.2 s ticks a key b owns; b's body reads each tick's
    occurrence (reference, due, fired_at, skipped 0) and the drop of the failed second names its reference and tick."""
    from casty.cluster.node import NodeConfig, NodeProcess
    from casty.protocol.membership import MembershipConfig
    from tests.nodes import free_ports
    from tests.nodes import run as run_nodes

    TICKS.clear()
    facts: list[dict[str, Any]] = []

    async def body() -> None:
        a_port, b_port = free_ports(2)
        timing = MembershipConfig(heartbeat=0.2, suspect_after=1, dead_after=1)
        configs = [
            NodeConfig(bind=("127.0.0.1", port), seeds=(("127.0.0.1", a_port),), modules=("tests.test_tcp",),
                       membership=timing, ask_timeout=2.0, write_timeout=2.0)
            for port in (a_port, b_port)
        ]
        a, b = NodeProcess(configs[0], lambda _: None), NodeProcess(configs[1], facts.append)
        await a.start()
        await b.start()
        try:
            system = a.system
            assert system is not None
            while len(system.members()) < 2 or system.placement(tcp_ticked, "k0").owner is None:
                await asyncio.sleep(0.02)
            key = next(k for k in (f"k{i}" for i in range(100)) if system.placement(tcp_ticked, k).owner == b.node)
            await system.schedule(Tick(), system.ref(tcp_ticked, key), timedelta(seconds=0.2), reference="beat")
            while len(TICKS) < 3:
                await asyncio.sleep(0.02)
            system.cancel_schedule("beat")
        finally:
            await b.stop()
            await a.stop()
        assert [node for node, _ in TICKS[:3]] == [b.node] * 3
        occurrences = [o for _, o in TICKS[:3]]
        assert all(isinstance(o, Occurrence) and o.schedule == "beat" and o.skipped == 0 for o in occurrences)
        assert [o.due - occurrences[0].due for o in occurrences] == [timedelta(seconds=0.2 * i) for i in range(3)]
        assert all(o.fired_at >= o.due for o in occurrences)
        (drop,) = [f for f in facts if f["event"] == "message.dropped" and f.get("key") == key]
        assert (drop["schedule"], drop["due_us"], drop["reason"]) == ("beat", to_us(occurrences[1].due), "failed: RuntimeError('the second tick fails')")

    run_nodes(body)
