"""Test support for real ``python -m casty node`` processes on 127.0.0.1.

The process tests (``test_node_process``, ``test_cluster_tcp_failover``) and the gateway
tests (``test_client``) all need the same few things: free loopback ports, a node started
as a child process whose JSON facts are read line by line and stamped with the test's own
loop time on arrival, a wait that polls with a deadline and fails with every node's output
instead of hanging, and a ``finally`` that kills whatever was started (by its own pid).
They live here once so the tests cannot drift apart on how a node is started or reaped.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

T = TypeVar("T")
ROOT = Path(__file__).resolve().parent.parent
HIDDEN = "schedule.fired"  # too many to be worth showing in a failure's output: only their number is


def run(body: Callable[[], Awaitable[T]], timeout: float = 15.0) -> T:
    """Run ``body()`` on a fresh loop; fail (never hang) if it takes longer than ``timeout``."""

    async def guarded() -> T:
        async with asyncio.timeout(timeout):
            return await body()

    return asyncio.run(guarded())


def free_ports(count: int) -> list[int]:
    """``count`` distinct loopback ports free right now (bound to port 0 together, then released)."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def child_env() -> dict[str, str]:
    """This environment with the repository root on ``PYTHONPATH``, so a child can import ``casty`` and ``tests``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


@dataclass
class Node:
    """A running ``python -m casty node`` and the facts it printed, each stamped with the test's loop time on arrival."""

    name: str
    proc: asyncio.subprocess.Process
    facts: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    readers: list[asyncio.Task[None]] = field(default_factory=list)

    def of(self, event: str, since: float = float("-inf"), **match: Any) -> list[dict[str, Any]]:
        """The facts of kind ``event`` (arrived from ``since`` on) whose fields equal ``match``."""
        return [
            f for at, f in self.facts
            if f["event"] == event and at >= since and all(f.get(k) == v for k, v in match.items())
        ]

    def fact(self, event: str) -> dict[str, Any] | None:
        """The first fact of kind ``event``, if one arrived."""
        return next((f for _, f in self.facts if f["event"] == event), None)

    def statuses(self, of: str, since: float = float("-inf")) -> list[str]:
        """Every status this node reported for node ``of`` (from time ``since`` on), in order."""
        return [f["status"] for f in self.of("member.changed", since, node=of)]

    def status(self, of: str) -> str | None:
        """The last status this node reported for node ``of``, if any."""
        seen = self.statuses(of)
        return seen[-1] if seen else None

    def when(self, of: str, status: str, since: float = float("-inf")) -> float | None:
        """Arrival time of the first report of ``of`` with ``status`` (from time ``since`` on)."""
        for at, f in self.facts:
            if f["event"] == "member.changed" and f["node"] == of and f["status"] == status and at >= since:
                return at
        return None

    def describe(self) -> str:
        """What a failure shows of this node: its exit status, its last 40 facts and its last 20 stderr lines."""
        lines = [json.dumps(f) for _, f in self.facts if f["event"] != HIDDEN]
        hidden = len(self.of(HIDDEN))
        note = f" ({hidden} {HIDDEN} not shown)" if hidden else ""
        return f"--- {self.name} rc={self.proc.returncode}{note}\n" + "\n".join(lines[-40:] + self.stderr[-20:])


async def _read_facts(node: Node, stream: asyncio.StreamReader) -> None:
    loop = asyncio.get_running_loop()
    async for line in stream:
        node.facts.append((loop.time(), json.loads(line)))


async def _read_lines(sink: list[str], stream: asyncio.StreamReader) -> None:
    async for line in stream:
        sink.append(line.decode(errors="replace").rstrip())


async def spawn(port: int, seeds: list[int], *args: str) -> Node:
    """Start ``python -m casty node --bind 127.0.0.1:<port> <args>`` (with ``--seeds`` when given) and read its output."""
    argv = ["node", "--bind", f"127.0.0.1:{port}", *args]
    if seeds:
        argv += ["--seeds", ",".join(f"127.0.0.1:{p}" for p in seeds)]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "casty", *argv,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=child_env(),
    )
    assert proc.stdout is not None and proc.stderr is not None
    node = Node(f"127.0.0.1:{port}", proc)
    node.readers = [
        asyncio.create_task(_read_facts(node, proc.stdout)),
        asyncio.create_task(_read_lines(node.stderr, proc.stderr)),
    ]
    return node


async def reap(nodes: list[Node]) -> None:
    """Kill every node still running (by its own pid) and wait for it and its pipes to end."""
    for node in nodes:
        if node.proc.returncode is None:
            node.proc.kill()
    for node in nodes:
        await node.proc.wait()
        await asyncio.gather(*node.readers, return_exceptions=True)


async def until(condition: Callable[[], bool], what: str, nodes: list[Node], timeout: float) -> float:
    """Wait for ``condition`` at most ``timeout`` seconds; the loop time it held, or fail with every node's output."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            pytest.fail(f"not within {timeout}s: {what}\n" + "\n".join(n.describe() for n in nodes))
        await asyncio.sleep(0.01)
    return loop.time()
