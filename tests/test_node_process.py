"""Real ``python -m casty node`` processes on 127.0.0.1: they join, see a kill -9 and an orderly leave.

Every node here is a separate OS process speaking TCP on loopback, with short membership
timings (heartbeat 0.2 s, suspect after 1 s, dead after 1 s more). The tests read the JSON
facts each node prints on stdout, stamped with the test's own monotonic time when they
arrive. Every process test runs under an ``asyncio.timeout`` guard and kills whatever it
started in a ``finally``, so a failure can never leave a node running or hang the suite.
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from casty.__main__ import main
from casty.cluster.addresses import format_address, node_id, parse_address
from tests.nodes import ROOT, Node, child_env, free_ports, reap, run, until
from tests.nodes import spawn as spawn_node

TIMINGS = ["--heartbeat", "0.2", "--suspect-after", "1", "--dead-after", "1"]
GUARD = 15.0  # seconds a test body may take before it fails


async def spawn(port: int, seeds: list[int], *extra: str) -> Node:
    """A node with this file's short membership timings (and ``extra`` arguments), seeded with ``seeds``."""
    return await spawn_node(port, seeds, *TIMINGS, *extra)


# --- three real nodes ----------------------------------------------------------------------


def test_three_nodes_see_a_kill_as_suspect_then_dead_and_a_sigterm_as_left() -> None:
    """Three node processes join; kill -9 of one is suspect then dead on both others; SIGTERM of another is left."""

    async def body() -> None:
        p1, p2, p3 = free_ports(3)
        # A chain of seeds: n3 knows only n2, so n1 and n3 can reach each other only by the ids
        # they learn from a digest (the node ids are the addresses).
        nodes = [
            await spawn(p1, [], "--module", "casty.demo"),
            await spawn(p2, [p1]),
            await spawn(p3, [p2]),
        ]
        n1, n2, n3 = nodes
        ids = [n.name for n in nodes]
        loop = asyncio.get_running_loop()
        try:
            started = loop.time()
            await until(lambda: all(n.fact("ready") for n in nodes), "every node ready", nodes, 8.0)
            ready = n1.fact("ready")
            assert ready is not None
            assert ready["node"] == ready["address"] == n1.name
            assert ready["actors"] == ["casty.demo:account", "casty.demo:frozen_account"]
            await until(
                lambda: all(n.status(i) == "alive" for n in nodes for i in ids), "all three see three alive", nodes, 5.0
            )
            joined = loop.time() - started
            incarnations = {f["node"]: f["incarnation"] for n in nodes for _, f in n.facts if f["event"] == "member.changed"}
            for n in nodes:
                own = n.fact("ready")
                assert own is not None and incarnations[n.name] == own["incarnation"]

            # kill -9 n3: both survivors suspect it after ~suspect_after, and hold it dead ~dead_after later.
            n3.proc.send_signal(signal.SIGKILL)
            killed = loop.time()
            await until(lambda: all(n.status(n3.name) == "dead" for n in (n1, n2)), "n3 dead on n1 and n2", nodes, 5.0)
            assert await n3.proc.wait() == -signal.SIGKILL
            for n in (n1, n2):
                assert n.statuses(n3.name, since=killed) == ["suspect", "dead"], n.describe()
                suspect, dead = n.when(n3.name, "suspect", since=killed), n.when(n3.name, "dead")
                assert suspect is not None and dead is not None
                assert 0.5 <= suspect - killed <= 2.5, (suspect - killed, n.describe())
                assert dead - suspect >= 0.8, (dead - suspect, n.describe())
                assert dead - killed <= 4.0, (dead - killed, n.describe())
            detect = max(n.when(n3.name, "dead") or killed for n in (n1, n2)) - killed

            # SIGTERM n2: it leaves in order, exits 0, and n1 holds it left (never dead).
            n2.proc.send_signal(signal.SIGTERM)
            termed = loop.time()
            await until(lambda: n1.status(n2.name) == "left", "n2 left on n1", nodes, 3.0)
            left = loop.time() - termed
            assert await asyncio.wait_for(n2.proc.wait(), 3.0) == 0, n2.describe()
            exited = loop.time() - termed
            assert n1.statuses(n2.name, since=termed) == ["left"], n1.describe()
            assert "dead" not in n1.statuses(n2.name), n1.describe()
            assert n2.statuses(n2.name)[-1] == "left"
            assert n2.fact("stopped") == {"event": "stopped", "node": n2.name, "orderly": True}
            assert n1.proc.returncode is None
            print(f"\njoined in {joined:.2f}s; kill -9 -> dead on both in {detect:.2f}s; "
                  f"SIGTERM -> left on n1 in {left:.3f}s, n2 exited in {exited:.2f}s")
        finally:
            await reap(nodes)

    run(body, GUARD)


def test_sigint_leaves_in_order_and_exits_zero() -> None:
    """A lone founder node (no seeds) reports itself alive, and SIGINT makes it leave and exit 0."""

    async def body() -> None:
        (port,) = free_ports(1)
        node = await spawn(port, [])
        try:
            await until(lambda: node.fact("ready") is not None, "ready", [node], 8.0)
            assert node.statuses(node.name) == ["alive"]
            node.proc.send_signal(signal.SIGINT)
            assert await asyncio.wait_for(node.proc.wait(), 3.0) == 0, node.describe()
            await asyncio.gather(*node.readers)
            assert node.statuses(node.name) == ["alive", "left"]
            assert node.facts[-1][1] == {"event": "stopped", "node": node.name, "orderly": True}
        finally:
            await reap([node])

    run(body, GUARD)


async def client_cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any], str]:
    """Run ``python -m casty <args>`` (with ``env`` added to the environment); its exit status, its one JSON line, its stderr."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "casty", *args,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env={**child_env(), **(env or {})},
    )
    out, err = await proc.communicate()
    lines = out.decode().splitlines()
    assert proc.returncode is not None
    assert len(lines) <= 1, lines
    return proc.returncode, json.loads(lines[0]) if lines else {}, err.decode()


def test_cli_client_asks_tells_and_reads_placement_through_a_node() -> None:
    """``python -m casty ask|tell|placement|members`` reach a node's actors (exit 0) and name a bad message (exit 1 or 2)."""

    async def body() -> None:
        (port,) = free_ports(1)
        node = await spawn(port, [], "--module", "tests.cluster_app")
        seeds = ["--seeds", node.name]
        target = ["--type", "tests.cluster_app:tally", "--key", "c1"]
        try:
            await until(lambda: node.fact("ready") is not None, "ready", [node], 8.0)
            ready = node.fact("ready")
            assert ready is not None and ready["actors"] == ["tests.cluster_app:tally"]
            assert await client_cli("ask", *seeds, *target, "--message", '"Inc"') == (
                0, {"event": "reply", "value": 1, "gateway": node.name}, "")
            code, told, _ = await client_cli("tell", *seeds, *target, "--message", '["Inc", {}]')
            assert (code, told["value"]) == (0, None)
            await until(lambda: any(f["event"] == "activation.started" and f["key"] == "c1" for _, f in node.facts),
                        "activation.started for c1", [node], 5.0)
            code, where, _ = await client_cli("placement", *seeds, *target)
            assert (code, where["value"]) == (0, {"owner": node.name, "replicas": [node.name]})
            code, members, _ = await client_cli("members", *seeds)
            assert code == 0 and [m["node"] for m in members["value"]] == [node.name]
            code, error, _ = await client_cli("ask", *seeds, *target, "--message", '["Inc", {"by": 2}]')
            assert code == 1 and error["error"] == "SchemaError" and "'by'" in error["reason"], error
            code, _, err = await client_cli("ask", *seeds, *target, "--message", "[Inc]")
            assert code == 2 and "not JSON" in err
            assert node.proc.returncode is None
        finally:
            await reap([node])

    run(body, GUARD)


def test_nodes_and_clients_with_the_secret_file_talk_and_those_without_it_are_kept_out(tmp_path: Path) -> None:
    """Two nodes given --secret-file join each other; a node without it never does; the CLI asks with the file or CASTY_SECRET, and fails without."""

    async def body() -> None:
        secret = tmp_path / "secret"
        secret.write_bytes(b"s3cret of the lab\n")
        a_port, b_port, c_port = free_ports(3)
        with_secret = ["--secret-file", str(secret), "--module", "tests.cluster_app"]
        a = await spawn(a_port, [], *with_secret)
        b = await spawn(b_port, [a_port], *with_secret)
        c = await spawn(c_port, [a_port], "--module", "tests.cluster_app")
        nodes = [a, b, c]
        target = ["--seeds", a.name, "--type", "tests.cluster_app:tally", "--key", "s1"]
        try:
            await until(lambda: a.status(b.name) == "alive" and b.status(a.name) == "alive", "a and b alive", nodes, 8.0)
            await until(lambda: any("wrong proof" in line or "needs its secret" in line for line in a.stderr),
                        "a refuses c", nodes, 5.0)
            assert a.status(c.name) is None and b.status(c.name) is None and c.status(a.name) is None
            assert b"s3cret" not in Path(f"/proc/{a.proc.pid}/cmdline").read_bytes()
            code, reply, _ = await client_cli("ask", *target, "--secret-file", str(secret), "--message", '"Inc"')
            assert (code, reply["value"]) == (0, 1)
            code, reply, _ = await client_cli("ask", *target, "--message", '"Inc"', env={"CASTY_SECRET": "s3cret of the lab"})
            assert (code, reply["value"]) == (0, 2)
            code, error, _ = await client_cli("ask", *target, "--message", '"Inc"', "--timeout", "2")
            assert (code, error["error"]) == (1, "Unavailable") and "no gateway could be reached" in error["reason"]
            assert all(node.proc.returncode is None for node in nodes)
        finally:
            await reap(nodes)

    run(body, GUARD)


# --- the command line ----------------------------------------------------------------------


def test_cli_bad_bind_exits_2_naming_the_value() -> None:
    """``python -m casty node --bind`` with a bad address exits 2 and names the bad value on stderr."""
    done = subprocess.run(
        [sys.executable, "-m", "casty", "node", "--bind", "nowhere:70000"],
        capture_output=True, text=True, timeout=15, cwd=ROOT, env=child_env(), stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    assert "--bind" in done.stderr and "'nowhere:70000'" in done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--bind", "127.0.0.1"], "'127.0.0.1'"),
        (["--bind", "localhost:7001"], "'localhost'"),
        (["--bind", "127.0.0.1:0"], "port 0"),
        (["--bind", "0.0.0.0:7001"], "unspecified"),
        (["--bind", "::1:7001"], "'::1:7001'"),
        (["--bind", "127.0.0.1:7001", "--seeds", "127.0.0.1:7002,10.0.0.x:7003"], "'10.0.0.x'"),
        (["--bind", "127.0.0.1:7001", "--heartbeat", "0"], "'0'"),
        (["--bind", "127.0.0.1:7001", "--ask-timeout", "-1"], "'-1'"),
        (["--bind", "127.0.0.1:7001", "--facts", ","], "','"),
        (["--bind", "127.0.0.1:7001", "--secret", "hunter2"], "--secret: a secret on the command line shows in ps"),
        (["--bind", "127.0.0.1:7001", "--secret-file", "/nonexistent/secret"], "cannot read the secret file '/nonexistent/secret'"),
        (["--bind", "127.0.0.1:7001", "--secret-file", "/dev/null"], "the secret file '/dev/null' is empty"),
        (["--bind", "127.0.0.1:7001", "--max-connections", "0"], "max_connections must be an int of at least 1, got 0"),
        (["--bind", "127.0.0.1:7001", "--idle-timeout", "nan"], "'nan'"),
        (["--bind", "127.0.0.1:7001", "--handshake-timeout", "inf"], "'inf'"),
        (["--bind", "127.0.0.1:7001", "--max-buffered", "100"], "max_buffered (100) must hold one partial frame"),
    ],
)
def test_cli_bad_arguments_exit_2(argv: list[str], named: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Each bad address or timing is refused by the parser (exit 2) with a message naming it."""
    with pytest.raises(SystemExit) as exit_info:
        main(["node", *argv])
    assert exit_info.value.code == 2
    assert named in capsys.readouterr().err


def test_cli_address_in_use_exits_1() -> None:
    """A node whose --bind address is taken exits 1 saying it cannot listen there."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "casty", "node", "--bind", f"127.0.0.1:{port}"],
            capture_output=True, text=True, timeout=15, cwd=ROOT, env=child_env(), stdin=subprocess.DEVNULL,
        )
    assert done.returncode == 1, done.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr


def test_cli_unknown_module_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    """--module naming a module that cannot be imported exits 2 and names the module."""
    (port,) = free_ports(1)
    assert main(["node", "--bind", f"127.0.0.1:{port}", "--module", "casty.no_such_module"]) == 2
    assert "cannot import module 'casty.no_such_module'" in capsys.readouterr().err


# --- addresses as node ids -----------------------------------------------------------------


def test_node_ids_are_canonical_addresses() -> None:
    """HOST:PORT parses to a canonical (host, port); the id prints back the same for IPv4 and bracketed IPv6."""
    assert parse_address("127.0.0.1:7001") == ("127.0.0.1", 7001)
    assert parse_address(" [::1]:7001 ") == ("::1", 7001)
    assert parse_address("[0:0::1]:80") == ("::1", 80)
    assert format_address(("::1", 7001)) == "[::1]:7001"
    assert node_id("[0:0::1]:7001") == "[::1]:7001"
    assert node_id(("::1", 9)) == "[::1]:9"
    for bad in ("", "7001", ":7001", "127.0.0.1:", "127.0.0.1:x", "[::1]7001", "::1:7001", "a.b:1", "0.0.0.0:1"):
        with pytest.raises(ValueError):
            parse_address(bad)
    assert parse_address("0.0.0.0:1", allow_any=True) == ("0.0.0.0", 1)
