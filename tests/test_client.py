"""The client surface of a cluster: the sans-I/O ``ClientCore``, the frames, and a gateway over real TCP.

The core is driven line by line (no loop, no socket). The gateway tests run one real node
(``NodeProcess``, cluster mode, a cluster of one) and a ``ClusterClient`` on loopback in
the test's own loop, under an ``asyncio.timeout`` guard.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from casty.cluster.client import (
    ClientCore,
    ClusterClient,
    Failed,
    Send,
    error_from,
    RemoteError,
)
from casty.cluster.client_wire import MARK, Call, Result, decode_client_frame, encode_client_frame, is_client_frame
from casty.protocol.membership import MembershipConfig
from casty.cluster.node import NodeConfig, NodeProcess
from casty.cluster.routing import CLUSTER_WIRE, WrongOwner
from casty.protocol.wire import WireError
from casty.protocol.limits import MAX_FRAME
from casty.errors import InvalidIdentity, MessageTooLarge, SchemaError, Unavailable, UnknownActor
from tests.nodes import free_ports, run

TYPE = "tests.cluster_app:tally"


# --- frames --------------------------------------------------------------------------------


def test_client_frames_are_marked_and_no_cluster_frame_looks_like_one() -> None:
    """A client frame starts with 0xC1 and round-trips; a cluster frame never starts with it; garbage is a WireError."""
    frame = Call(7, TYPE, "k", "Inc", {"a": [1, "x"]}, True, 2.5)
    data = encode_client_frame(frame)
    assert data[:1] == MARK and is_client_frame(data)
    assert decode_client_frame(data) == frame
    cluster = CLUSTER_WIRE.encode("d", WrongOwner(1, None))
    assert not is_client_frame(cluster)
    with pytest.raises(WireError):
        decode_client_frame(cluster)
    with pytest.raises(WireError):
        decode_client_frame(MARK + b"\x00garbage")


def test_errors_come_back_by_class_name() -> None:
    """A Result's error name becomes that exception class; an unknown name a RemoteError carrying it."""
    assert isinstance(error_from(Result(1, None, "Unavailable", "no quorum")), Unavailable)
    assert isinstance(error_from(Result(1, None, "TimeoutError", "late")), TimeoutError)
    other = error_from(Result(1, None, "ActorFailed", "boom"))
    assert isinstance(other, RemoteError) and other.error == "ActorFailed" and "boom" in str(other)


# --- the core, line by line ----------------------------------------------------------------


def test_requests_go_to_the_first_gateway() -> None:
    """Requests go to the first seed while it has not failed; a result is taken only from the gateway it went to."""
    core = ClientCore(["a:1", "b:1"])
    send = core.submit(core.next_request(), b"x", connected=False)
    assert send == Send("a:1", 1, b"x")
    assert core.result("b:1", Result(1, 5)) is None  # not where it went
    assert core.result("a:1", Result(1, 5)) == Result(1, 5)
    assert core.pending == 0


def test_a_request_that_never_left_goes_to_the_next_gateway() -> None:
    """Queued while no connection was up, then the dial failed: it is resent to the next seed, which new requests use too."""
    core = ClientCore(["a:1", "b:1", "c:1"])
    core.submit(core.next_request(), b"x", connected=False)
    out = core.connect_failed("a:1", connected=lambda g: False)
    assert out == [Send("b:1", 1, b"x")]
    assert core.gateway == "b:1"
    assert core.result("b:1", Result(1, "ok")) == Result(1, "ok")


def test_a_request_that_may_have_left_is_never_resent() -> None:
    """Sent on an open connection, or queued before a connection that then broke: a later failed dial resends nothing."""
    core = ClientCore(["a:1", "b:1"])
    core.submit(core.next_request(), b"on-open", connected=True)
    queued = core.next_request()
    core.submit(queued, b"queued", connected=False)
    core.connection_lost("a:1")  # a connection carried frames, then broke
    assert core.connect_failed("a:1", connected=lambda g: False) == []
    assert core.pending == 2  # both wait for their answer (or their timeout)
    assert core.gateway == "b:1"


def test_no_gateway_reachable_fails_the_request() -> None:
    """When every seed's dial fails, the request fails (Failed) instead of going round forever."""
    core = ClientCore(["a:1", "b:1"])
    core.submit(core.next_request(), b"x", connected=False)
    assert core.connect_failed("a:1", connected=lambda g: False) == [Send("b:1", 1, b"x")]
    out = core.connect_failed("b:1", connected=lambda g: False)
    assert len(out) == 1 and isinstance(out[0], Failed) and "a:1, b:1" in out[0].reason
    assert core.pending == 0


def test_a_client_needs_a_gateway() -> None:
    """A client with no seed is refused at construction."""
    with pytest.raises(ValueError, match="at least one gateway"):
        ClientCore([])


# --- a gateway over real TCP ---------------------------------------------------------------


async def one_node(port: int, facts: list[dict[str, Any]], *, secret: bytes | None = None) -> NodeProcess:
    config = NodeConfig(
        bind=("127.0.0.1", port),
        modules=("tests.cluster_app",),
        membership=MembershipConfig(heartbeat=0.2, suspect_after=1, dead_after=1),
        ask_timeout=2.0,
        write_timeout=2.0,
        secret=secret,
    )
    node = NodeProcess(config, facts.append)
    await node.start()
    return node


def test_a_gateway_runs_asks_and_tells_on_the_cluster() -> None:
    """Through a node's gateway: asks reply with plain data, a tell is queued, placement and members answer."""

    async def body() -> None:
        (port,) = free_ports(1)
        facts: list[dict[str, Any]] = []
        node = await one_node(port, facts)
        try:
            async with ClusterClient([f"127.0.0.1:{port}"], timeout=2.0) as client:
                assert await client.ask(TYPE, "k", "Inc") == 1
                assert await client.ask(TYPE, "k", "Inc") == 2
                assert await client.tell(TYPE, "k", "Inc") is None
                loop = asyncio.get_running_loop()
                deadline = loop.time() + 5
                while (state := await client.ask(TYPE, "k", "Get")) != {"count": 3, "ticks": 0}:
                    assert loop.time() < deadline, state
                    await asyncio.sleep(0.02)
                assert await client.placement(TYPE, "k") == {"owner": node.node, "replicas": [node.node]}
                members = await client.members()
                assert [(m["node"], m["status"]) for m in members] == [(node.node, "alive")]
            acquired = [f for f in facts if f["event"] == "epoch.acquired"]
            assert [(f["actor"], f["key"], f["by"]) for f in acquired] == [(TYPE, "k", node.node)]
            assert any(f["event"] == "activation.started" and f["key"] == "k" for f in facts)
        finally:
            await node.stop()
        assert facts[-1] == {"event": "stopped", "node": node.node, "orderly": True}

    run(body)


def test_a_gateway_answers_bad_requests_with_typed_errors_and_keeps_serving() -> None:
    """Unknown type, message, field, a field of the wrong type, a tell-only message asked, an empty key: each a named error."""

    async def body() -> None:
        (port,) = free_ports(1)
        node = await one_node(port, [])
        try:
            async with ClusterClient([f"127.0.0.1:{port}"], timeout=2.0) as client:
                with pytest.raises(UnknownActor, match="'os:path' is not hosted"):
                    await client.ask("os:path", "k", "Inc")
                with pytest.raises(SchemaError, match="takes Inc \\| Get \\| Start \\| Tick, not 'Nope'"):
                    await client.ask(TYPE, "k", "Nope")
                with pytest.raises(SchemaError, match="Inc has no field 'amount'"):
                    await client.ask(TYPE, "k", "Inc", {"amount": 1})
                with pytest.raises(SchemaError, match="every_ms"):
                    await client.ask(TYPE, "k", "Start", {"every_ms": "soon"})
                with pytest.raises(SchemaError, match="Tick is not Askable"):
                    await client.ask(TYPE, "k", "Tick")
                with pytest.raises(InvalidIdentity, match="empty"):
                    await client.ask(TYPE, "", "Inc")
                assert await client.ask(TYPE, "k", "Inc") == 1  # the node kept serving
        finally:
            await node.stop()

    run(body)


def test_a_client_moves_on_from_a_seed_it_cannot_reach() -> None:
    """The first seed refuses connections: the request goes to the second one and is answered there."""

    async def body() -> None:
        dead, port = free_ports(2)  # nothing listens on `dead`
        node = await one_node(port, [])
        try:
            async with ClusterClient([f"127.0.0.1:{dead}", f"127.0.0.1:{port}"], timeout=2.0) as client:
                assert client.gateway == f"127.0.0.1:{dead}"
                assert await client.ask(TYPE, "k", "Inc") == 1
                assert client.gateway == node.node
        finally:
            await node.stop()

    run(body)


def test_a_client_with_no_reachable_seed_gets_unavailable() -> None:
    """Every seed refuses connections: the ask fails with Unavailable naming them, not a long timeout."""

    async def body() -> None:
        a, b = free_ports(2)
        async with ClusterClient([f"127.0.0.1:{a}", f"127.0.0.1:{b}"], timeout=5.0) as client:
            loop = asyncio.get_running_loop()
            started = loop.time()
            with pytest.raises(Unavailable, match="no gateway could be reached"):
                await client.ask(TYPE, "k", "Inc")
            assert loop.time() - started < 4.0

    run(body)


def test_a_request_over_the_frame_limit_raises_message_too_large_at_once() -> None:
    """A client request whose frame exceeds MAX_FRAME raises MessageTooLarge at once (not a timeout); the client keeps working."""

    async def body() -> None:
        (port,) = free_ports(1)
        node = await one_node(port, [])
        try:
            async with ClusterClient([f"127.0.0.1:{port}"], timeout=2.0) as client:
                loop = asyncio.get_running_loop()
                started = loop.time()
                with pytest.raises(MessageTooLarge, match=f"over the {MAX_FRAME}-byte frame limit"):
                    await client.ask(TYPE, "k", "Inc", {"pad": "x" * MAX_FRAME})
                with pytest.raises(MessageTooLarge, match=f"over the {MAX_FRAME}-byte frame limit"):
                    await client.tell(TYPE, "k", "Inc", {"pad": "x" * MAX_FRAME})
                assert loop.time() - started < 0.5
                assert await client.ask(TYPE, "k", "Inc") == 1
        finally:
            await node.stop()

    run(body)


def test_a_gateway_with_a_secret_serves_only_clients_that_prove_it() -> None:
    """A node with a cluster secret answers a client given it, and a client without it or with another gets Unavailable; the node keeps serving."""

    async def body() -> None:
        (port,) = free_ports(1)
        facts: list[dict[str, Any]] = []
        node = await one_node(port, facts, secret=b"s3cret")
        assert "s3cret" not in repr(node.config)
        try:
            for secret in (None, "another"):
                async with ClusterClient([f"127.0.0.1:{port}"], timeout=2.0, secret=secret) as stranger:
                    with pytest.raises(Unavailable, match="no gateway could be reached"):
                        await stranger.ask(TYPE, "k", "Inc")
            async with ClusterClient([f"127.0.0.1:{port}"], timeout=2.0, secret="s3cret") as client:
                assert await client.ask(TYPE, "k", "Inc") == 1
            assert [f["key"] for f in facts if f["event"] == "activation.started"] == ["k"]
        finally:
            await node.stop()

    run(body)


def test_a_tell_or_ask_over_the_frame_limit_between_tcp_nodes_raises_message_too_large_at_once() -> None:
    """Over real TCP, as in the simulator: a tell or ask to a key the other node owns whose frame exceeds MAX_FRAME raises MessageTooLarge at once."""
    from tests.test_network import Blob, Put, sink

    async def body() -> None:
        a_port, b_port = free_ports(2)
        timing = MembershipConfig(heartbeat=0.2, suspect_after=1, dead_after=1)
        configs = [
            NodeConfig(bind=("127.0.0.1", port), seeds=(("127.0.0.1", a_port),), modules=("tests.test_network",),
                       membership=timing, ask_timeout=2.0, write_timeout=2.0)
            for port in (a_port, b_port)
        ]
        a, b = NodeProcess(configs[0], lambda _: None), NodeProcess(configs[1], lambda _: None)
        await a.start()
        await b.start()
        try:
            system = a.system
            assert system is not None
            loop = asyncio.get_running_loop()
            while len(system.members()) < 2 or system.placement(sink, "k0").owner is None:
                await asyncio.sleep(0.02)
            key = next(k for k in (f"k{i}" for i in range(100)) if system.placement(sink, k).owner == b.node)
            ref = system.ref(sink, key)
            started = loop.time()
            with pytest.raises(MessageTooLarge, match=f"over the {MAX_FRAME}-byte frame limit"):
                ref.tell(Blob(b"\x00" * MAX_FRAME))
            with pytest.raises(MessageTooLarge, match=f"over the {MAX_FRAME}-byte frame limit"):
                await ref.ask(Put(b"\x00" * MAX_FRAME))
            assert loop.time() - started < 0.5
            assert await ref.ask(Put(b"small")) == 1
            assert a.tcp is not None and a.tcp.stats.dropped_too_large == 0
        finally:
            await b.stop()
            await a.stop()

    run(body)
