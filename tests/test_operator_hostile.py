"""The operator's path under hostile input: a real ``python -m casty node`` and strangers speaking raw TCP to it.

What ``test_tcp``, ``test_framing``, ``test_wire`` and ``test_node_process`` do not try, tried here against a real
node process (``--module tests.cluster_app``): a stranger that completes the handshake (no secret) and then sends
cluster frames naming a module path as their tag, channel or actor type, a routed ``Deliver`` whose message names
a module, client ``Call`` frames naming a module as actor, message class or a ref inside the fields, and NaN,
negative and huge timeouts; an oversized length header after the handshake; and, with ``--secret-file``, a stranger
whose client call never gets an answer dialled back. The module they name, ``hostile_marker`` (written to the test's
``tmp_path`` and put on the node's ``PYTHONPATH``), writes a file when imported: nothing from the network may
import it. After each, the node must still serve a confirmed ``Inc``; each client call must be answered with a
typed error naming what was wrong. Also bad CLI input the existing tests do not try. About 20 s.
"""

from __future__ import annotations

import asyncio
import math
import struct
from pathlib import Path
from typing import Any

import msgspec
import pytest

from casty.__main__ import main
from casty.cluster.client_wire import Call, Result, decode_client_frame, encode_client_frame, is_client_frame
from casty.cluster.routing import CLUSTER_WIRE, ROUTING_CHANNEL, Deliver
from casty.protocol.framing import MAGIC, FrameDecoder, Hello, Welcome, encode_frame, encode_handshake
from tests.nodes import free_ports, reap, run, spawn, until
from tests.test_node_process import client_cli

TIMINGS = ["--heartbeat", "0.2", "--suspect-after", "1", "--dead-after", "1"]
MARKER = "hostile_marker"
TALLY = "tests.cluster_app:tally"
MARKER_SOURCE = """
import os, pathlib
pathlib.Path(os.environ["HOSTILE_MARK"]).write_text("imported")
class Evil:
    pass
def evil():
    pass
"""


@pytest.fixture
def marker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``hostile_marker.py`` on the children's PYTHONPATH; the path of the file its import would write."""
    (tmp_path / f"{MARKER}.py").write_text(MARKER_SOURCE)
    mark = tmp_path / "imported"
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setenv("HOSTILE_MARK", str(mark))
    return mark


async def _connect(port: int, me: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A stranger's connection to the node on ``port``, through the plain handshake (no secret), as node id ``me``."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(encode_handshake(Hello(magic=MAGIC, cluster="casty", node=me)))
    await writer.drain()
    header = await asyncio.wait_for(reader.readexactly(4), 3.0)
    body = await reader.readexactly(struct.unpack(">I", header)[0])
    assert msgspec.msgpack.decode(body, type=Welcome).node == f"127.0.0.1:{port}"
    return reader, writer


async def _send(port: int, me: str, *frames: bytes) -> bool:
    """Send ``frames`` (whole, length-prefixed) on one connection; True if the node closed it within 1 s."""
    reader, writer = await _connect(port, me)
    for frame in frames:
        writer.write(frame)
    await writer.drain()
    try:
        closed = await asyncio.wait_for(reader.read(1), 1.0) == b""
    except TimeoutError:
        closed = False
    writer.close()
    return closed


class Inbox:
    """A listener standing for the stranger's claimed node id: the gateway dials it back with its ``Result`` frames."""

    def __init__(self) -> None:
        self.results: dict[int, Result] = {}
        self.replies: list[Any] = []
        self.dialled = 0
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return f"127.0.0.1:{self.port}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.dialled += 1
        decoder = FrameDecoder()
        first = True
        while data := await reader.read(65536):
            for frame in decoder.feed(data):
                if first:  # the gateway's Hello: welcome it as the node it meant
                    first = False
                    writer.write(encode_handshake(Welcome(node=f"127.0.0.1:{self.port}")))
                    continue
                if not is_client_frame(frame):  # a routed reply to a Deliver: a cluster frame
                    self.replies.append(CLUSTER_WIRE.decode(memoryview(frame)).frame)
                    continue
                result = decode_client_frame(frame)
                assert isinstance(result, Result)
                self.results[result.request] = result

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()


def _cluster_frame(channel: str, tag: str, body: Any) -> bytes:
    return encode_frame(msgspec.msgpack.encode([2, channel, tag, body]))


def _hostile_calls() -> dict[int, tuple[Call, str, str]]:
    """request -> (the call, the error class expected back, a word its reason must contain)."""
    calls = [
        (Call(1, f"{MARKER}:evil", "k", "Evil"), "UnknownActor", MARKER),
        (Call(2, TALLY, "k", f"{MARKER}:Evil"), "SchemaError", "Evil"),
        (Call(3, TALLY, "k", "Inc", {"x": ["@e", f"{MARKER}:evil", "k"]}), "SchemaError", "'x'"),
        (Call(4, TALLY, "k", "Start", {"every_ms": ["@e", f"{MARKER}:evil", "k"]}), "SchemaError", "every_ms"),
        (Call(5, TALLY, "k", "Inc", {}, True, math.nan), "ValueError", "got nan"),
        (Call(6, TALLY, "k", "Inc", {}, True, -1.0), "ValueError", "got -1.0"),
        (Call(7, TALLY, "k", "Inc", {}, True, 1e308), "ValueError", "got 1e+308"),
        (Call(8, TALLY, "k", "Evil"), "SchemaError", "Evil"),
    ]
    return {call.request: (call, error, word) for call, error, word in calls}


def test_a_stranger_naming_modules_and_bad_timeouts_gets_typed_errors_imports_nothing_and_the_node_serves(marker: Path) -> None:
    """Cluster and client frames naming a module path import nothing; each client call gets a typed error; Inc still answered."""

    async def body() -> None:
        (port,) = free_ports(1)
        node = await spawn(port, [], *TIMINGS, "--module", "tests.cluster_app", "--log-level", "INFO")
        inbox = Inbox()
        try:
            await until(lambda: node.fact("ready") is not None, "ready", [node], 8.0)
            me = await inbox.start()
            # cluster frames: a module path as tag, as channel, as the actor of a Deliver and as its message's tag
            evil_message = msgspec.msgpack.encode([f"{MARKER}:Evil", {}])
            cluster = [
                _cluster_frame(ROUTING_CHANNEL, f"{MARKER}:Evil", {}),
                _cluster_frame(MARKER, "Deliver", {}),
                encode_frame(CLUSTER_WIRE.encode(ROUTING_CHANNEL, Deliver(request=1, actor=f"{MARKER}:evil", key="k", message=evil_message, reply_node=me, reply_request=1))),
                encode_frame(CLUSTER_WIRE.encode(ROUTING_CHANNEL, Deliver(request=2, actor=TALLY, key="k", message=evil_message, reply_node=me, reply_request=2))),
            ]
            for frame in cluster:
                await _send(port, me, frame)
            calls = _hostile_calls()
            await _send(port, me, *(encode_frame(encode_client_frame(call)) for call, _, _ in calls.values()))
            await until(lambda: len(inbox.results) == len(calls), "every hostile call answered", [node], 5.0)
            for request, (call, error, word) in calls.items():
                result = inbox.results[request]
                assert (result.error, word in result.reason) == (error, True), (call, result)
            await until(lambda: len(inbox.replies) == 2, "both hostile Delivers answered", [node], 5.0)
            kinds = sorted((reply.request, reply.kind, MARKER in reply.text) for reply in inbox.replies)
            assert kinds == [(1, "unknown", True), (2, "schema", True)], inbox.replies
            # an oversized length header after the handshake closes only that connection
            assert await _send(port, me, struct.pack(">I", 0xFFFFFFF0) + b"x" * 64)
            code, reply, err = await client_cli("ask", "--seeds", node.name, "--type", TALLY, "--key", "after", "--message", '"Inc"')
            assert (code, reply.get("value")) == (0, 1), err
            assert not marker.exists(), "a frame from the network imported hostile_marker"
            assert node.proc.returncode is None
        finally:
            await inbox.close()
            await reap([node])

    run(body, 30.0)


def test_with_a_secret_a_stranger_is_refused_gets_nothing_dialled_back_and_imports_nothing(marker: Path, tmp_path: Path) -> None:
    """With --secret-file a stranger's plain hello is refused; its client calls naming a module never run nor get a dial-back."""

    async def body() -> None:
        secret = tmp_path / "secret"
        secret.write_bytes(b"lab secret\n")
        (port,) = free_ports(1)
        node = await spawn(port, [], *TIMINGS, "--module", "tests.cluster_app", "--secret-file", str(secret))
        inbox = Inbox()
        try:
            await until(lambda: node.fact("ready") is not None, "ready", [node], 8.0)
            me = await inbox.start()
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(encode_handshake(Hello(magic=MAGIC, cluster="casty", node=me)))
            writer.write(b"".join(encode_frame(encode_client_frame(call)) for call, _, _ in _hostile_calls().values()))
            await writer.drain()
            rest = await asyncio.wait_for(reader.read(), 3.0)  # the refusal, then the node closes
            assert b"needs its secret" in rest
            writer.close()
            await asyncio.sleep(1.0)
            assert (inbox.dialled, inbox.results) == (0, {})
            code, reply, err = await client_cli("ask", "--seeds", node.name, "--type", TALLY, "--key", "k", "--message", '"Inc"',
                                                "--secret-file", str(secret))
            assert (code, reply.get("value")) == (0, 1), err
            assert not marker.exists() and node.proc.returncode is None
        finally:
            await inbox.close()
            await reap([node])

    run(body, 20.0)


def test_the_cli_client_does_not_import_the_type_it_names(marker: Path) -> None:
    """``python -m casty ask --type hostile_marker:evil`` answers UnknownActor (exit 1) and neither client nor node imports it."""

    async def body() -> None:
        (port,) = free_ports(1)
        node = await spawn(port, [], *TIMINGS, "--module", "tests.cluster_app")
        try:
            await until(lambda: node.fact("ready") is not None, "ready", [node], 8.0)
            code, reply, _ = await client_cli("ask", "--seeds", node.name, "--type", f"{MARKER}:Evil", "--key", "k", "--message", '"Evil"')
            assert (code, reply["error"], MARKER in reply["reason"]) == (1, "UnknownActor", True)
            code, reply, _ = await client_cli("ask", "--seeds", node.name, "--type", TALLY, "--key", "k", "--message", f'"{MARKER}:Evil"')
            assert (code, reply["error"]) == (1, "SchemaError")
            assert not marker.exists()
        finally:
            await reap([node])

    run(body, 20.0)


def test_cli_client_timeout_over_the_bound_exits_2_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    """``ask --timeout 3601`` (over MAX_TIMEOUT) is refused by the parser: exit 2 naming --timeout, no traceback."""
    with pytest.raises(SystemExit) as exit_info:
        main(["ask", "--seeds", "127.0.0.1:1", "--type", TALLY, "--key", "k", "--message", '"Inc"', "--timeout", "3601"])
    assert exit_info.value.code == 2
    assert "--timeout" in capsys.readouterr().err


def test_a_cluster_name_too_long_for_the_handshake_is_refused_at_start() -> None:
    """``node --cluster`` longer than a handshake frame can carry exits 2 naming --cluster (instead of a mute node)."""

    async def body() -> None:
        (port,) = free_ports(1)
        node = await spawn(port, [], "--cluster", "c" * 1100)
        try:
            await until(lambda: node.proc.returncode is not None or node.fact("ready") is not None, "exit or ready", [node], 8.0)
            await asyncio.sleep(0.2)
            assert node.proc.returncode == 2, "the node started with a cluster name no handshake can carry"
            assert any("--cluster" in line for line in node.stderr)
        finally:
            await reap([node])

    run(body, 15.0)


def test_an_unknown_fact_kind_is_refused_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    """``node --facts schedule.fird`` exits 2 naming the unknown kind (a typo must not silence the facts)."""
    import subprocess
    import sys

    from tests.nodes import ROOT, child_env

    (port,) = free_ports(1)
    try:
        done = subprocess.run([sys.executable, "-m", "casty", "node", "--bind", f"127.0.0.1:{port}", "--facts", "schedule.fird"],
                              capture_output=True, text=True, timeout=4, cwd=ROOT, env=child_env(), stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:  # it ran: the kind was accepted (subprocess.run killed it)
        pytest.fail("--facts schedule.fird was accepted: the node ran")
    assert done.returncode == 2 and "schedule.fird" in done.stderr
