"""Failover over real TCP with real processes: the owner of a key goes; its confirmed writes and its schedule live on.

Three ``python -m casty node`` processes on 127.0.0.1 (free ports) host ``tests.cluster_app``
in cluster mode, with short membership timings (heartbeat 0.2 s, suspect after 1 s, dead
after 1 s more). A ``ClusterClient`` in the test's own loop talks to them through their
gateways. ``tally[key]`` has three replicas and writes at majority; a persisted schedule on
it fires every 0.5 s.

- kill -9: the key is chosen so that its owner is also the client's first gateway. The
  client confirms N increments, keeps writing, and the owner is killed with SIGKILL
  mid-writes. Then, from the survivors only: every confirmed increment is in the count
  (the counts the confirmed asks returned only grow; the final count is between the
  confirmed and the sent increments), one survivor printed ``epoch.acquired`` for the key
  with the replicated state (``found > 0``, a greater epoch round), and the schedule fires
  there and nowhere else, in that node's stdout facts.
- SIGTERM: an orderly leave hands the key over at once (no wait for a death verdict).

Every wait polls with a deadline (no fixed sleep decides anything), each body runs under an
``asyncio.timeout`` guard, and every process is killed (by its own pid) in a ``finally``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from casty.cluster.client import ClusterClient
from casty.errors import CastyError

T = TypeVar("T")
ROOT = Path(__file__).resolve().parent.parent
TYPE = "tests.cluster_app:tally"
N = 20
EVERY_MS = 500
NODE_ARGS = [
    "--heartbeat", "0.2", "--suspect-after", "1", "--dead-after", "1",
    "--ask-timeout", "2", "--write-timeout", "2", "--module", "tests.cluster_app",
]
GUARD = 40.0


def run(body: Callable[[], Awaitable[T]], timeout: float = GUARD) -> T:
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
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


@dataclass
class Node:
    """A running node process and the facts it printed, each stamped with the test's loop time on arrival."""

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

    def status(self, of: str) -> str | None:
        seen = self.of("member.changed", node=of)
        return seen[-1]["status"] if seen else None

    def describe(self) -> str:
        lines = [json.dumps(f) for _, f in self.facts if f["event"] != "schedule.fired"]
        fired = len(self.of("schedule.fired"))
        return f"--- {self.name} rc={self.proc.returncode} ({fired} schedule.fired not shown)\n" + "\n".join(
            lines[-40:] + self.stderr[-20:]
        )


async def _read_facts(node: Node, stream: asyncio.StreamReader) -> None:
    loop = asyncio.get_running_loop()
    async for line in stream:
        node.facts.append((loop.time(), json.loads(line)))


async def _read_lines(sink: list[str], stream: asyncio.StreamReader) -> None:
    async for line in stream:
        sink.append(line.decode(errors="replace").rstrip())


async def spawn(port: int, seeds: list[int]) -> Node:
    args = ["node", "--bind", f"127.0.0.1:{port}", "--seeds", ",".join(f"127.0.0.1:{p}" for p in seeds), *NODE_ARGS]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "casty", *args,
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
        await asyncio.sleep(0.02)
    return loop.time()


@dataclass
class Writer:
    """Sends ``Inc`` asks one after the other until stopped; what each one came to."""

    key: str
    confirmed: list[tuple[float, int]] = field(default_factory=list)  # (loop time, the count it made)
    unconfirmed: list[str] = field(default_factory=list)  # why each ask got no reply
    stop: bool = False

    async def run(self, client: ClusterClient) -> None:
        loop = asyncio.get_running_loop()
        while not self.stop:
            try:
                count = await client.ask(TYPE, self.key, "Inc", timeout=1.0)
            except (CastyError, TimeoutError) as exc:  # applied or not: at most once, unknown
                self.unconfirmed.append(f"{type(exc).__name__}: {exc}")
                await asyncio.sleep(0.05)
            else:
                self.confirmed.append((loop.time(), count))

    def since(self, at: float) -> list[int]:
        return [count for when, count in self.confirmed if when >= at]


async def placement_from(gateway: str, key: str) -> dict[str, Any]:
    """Gateway ``gateway``'s view of ``tally[key]``'s owner and replicas."""
    async with ClusterClient([gateway], timeout=2.0) as one:
        return await one.placement(TYPE, key)


def test_kill_9_of_the_owner_loses_no_confirmed_increment_and_the_schedule_fires_on_a_survivor() -> None:
    """kill -9 of a key's owner (also the client's gateway) mid-writes: no confirmed increment is lost, a survivor takes the key and its schedule fires there."""

    async def body() -> None:
        ports = free_ports(3)
        nodes = list(await asyncio.gather(*(spawn(p, [ports[0]]) for p in ports)))
        ids = [n.name for n in nodes]
        loop = asyncio.get_running_loop()
        writer: Writer | None = None
        writing: asyncio.Task[None] | None = None
        try:
            started = loop.time()
            await until(lambda: all(n.of("ready") for n in nodes), "every node ready", nodes, 10.0)
            await until(lambda: all(n.status(i) == "alive" for n in nodes for i in ids), "all see three alive", nodes, 5.0)
            joined = loop.time() - started

            # The key: one whose owner is the first node, the gateway the client talks to first, so
            # that the kill takes the client's gateway too (the client must move on by itself).
            owner = nodes[0]
            async with ClusterClient([owner.name], timeout=2.0) as probe:
                owned = [k for k in (f"k{i}" for i in range(50)) if (await probe.placement(TYPE, k))["owner"] == owner.name]
            assert owned, "no key of 50 is owned by the first node"
            key = owned[0]
            survivors = nodes[1:]
            for n in nodes:  # every gateway names that owner, and all three nodes replicas
                where = await placement_from(n.name, key)
                assert where["owner"] == owner.name and sorted(where["replicas"]) == sorted(ids), (n.name, where)

            async with ClusterClient(ids, timeout=3.0) as client:
                # Arm the schedule; the node that acquires the key says so on its stdout.
                assert await client.ask(TYPE, key, "Start", {"every_ms": EVERY_MS}) == {"count": 0, "ticks": 0}
                await until(lambda: any(n.of("epoch.acquired", key=key) for n in nodes), "an owner acquired the key", nodes, 5.0)
                assert [n for n in nodes if n.of("epoch.acquired", key=key)] == [owner], "the owner runs it"

                # N confirmed increments: each ask returned, with the count its write made.
                confirmed = [await client.ask(TYPE, key, "Inc") for _ in range(N)]
                assert confirmed == list(range(1, N + 1))
                await until(lambda: len(owner.of("schedule.fired", key=key)) >= 2, "the schedule fired twice on the owner", nodes, 5.0)
                assert all(not n.of("schedule.fired", key=key) for n in survivors), "only the owner fires"

                # Keep writing, and kill -9 the owner while writes are in flight.
                writer = Writer(key)
                writing = asyncio.create_task(writer.run(client))
                assert writer is not None
                await until(lambda: len(writer.confirmed) >= 3, "writes go on before the kill", nodes, 5.0)
                owner.proc.send_signal(signal.SIGKILL)
                killed = loop.time()
                assert await owner.proc.wait() == -signal.SIGKILL
                written = await until(lambda: len(writer.since(killed)) >= 5, "five confirmed writes after the kill", nodes, 12.0)
                writer.stop = True
                await writing

                # No confirmed write lost: the counts the confirmed asks returned only grow, and the
                # final count holds every confirmed increment (and no more than were sent).
                counts = confirmed + [count for _, count in writer.confirmed]
                assert counts == sorted(set(counts)), f"a confirmed count was returned twice or went back: {counts}"
                state = await client.ask(TYPE, key, "Get", timeout=2.0)
                sent = N + len(writer.confirmed) + len(writer.unconfirmed)
                assert counts[-1] <= state["count"] <= sent, (state, counts, writer.unconfirmed)
                assert state["count"] >= N + len(writer.confirmed)

                # The next owner: a survivor acquired the key after the kill, from the replicated state...
                (successor,) = [n for n in survivors if n.of("epoch.acquired", killed, key=key)]
                acquired = successor.of("epoch.acquired", killed, key=key)[-1]
                first = owner.of("epoch.acquired", key=key)[0]
                assert acquired["found"] > 0, acquired  # it read the replicated state, not a new key
                assert acquired["epoch_round"] > first["epoch_round"], (first, acquired)
                # ...and the schedule keeps firing there, and only there.
                fired_at = await until(lambda: len(successor.of("schedule.fired", killed, key=key)) >= 3,
                                       "the schedule fired three times on the successor", nodes, 6.0)
                others = [n for n in survivors if n is not successor]
                assert all(not n.of("schedule.fired", killed, key=key) for n in others), "only the new owner fires"
                later = await client.ask(TYPE, key, "Get", timeout=2.0)
                assert later["count"] == state["count"] and later["ticks"] > state["ticks"], (state, later)
                for n in survivors:
                    where = await placement_from(n.name, key)
                    assert where["owner"] == successor.name, (n.name, where)
                print(
                    f"\njoined in {joined:.2f}s; kill -9 of owner+gateway {owner.name} -> 5 confirmed writes on "
                    f"{successor.name} {written - killed:.2f}s later ({len(writer.unconfirmed)} unconfirmed on the way); "
                    f"count {state['count']} >= {N + len(writer.confirmed)} confirmed, <= {sent} sent; "
                    f"schedule fired 3 times there {fired_at - killed:.2f}s after the kill"
                )
        finally:
            if writer is not None:
                writer.stop = True
            if writing is not None:
                writing.cancel()
                await asyncio.gather(writing, return_exceptions=True)
            await reap(nodes)

    run(body)


def test_sigterm_of_the_owner_hands_the_key_over_at_once() -> None:
    """An orderly leave (SIGTERM) of a key's owner: a survivor takes the key with its count, and the schedule fires there, without waiting for a death verdict."""

    async def body() -> None:
        ports = free_ports(3)
        nodes = list(await asyncio.gather(*(spawn(p, [ports[0]]) for p in ports)))
        ids = [n.name for n in nodes]
        loop = asyncio.get_running_loop()
        try:
            await until(lambda: all(n.of("ready") for n in nodes), "every node ready", nodes, 10.0)
            await until(lambda: all(n.status(i) == "alive" for n in nodes for i in ids), "all see three alive", nodes, 5.0)
            async with ClusterClient(ids[1:], timeout=3.0) as client:
                key = "s"
                await client.ask(TYPE, key, "Start", {"every_ms": EVERY_MS})
                confirmed = [await client.ask(TYPE, key, "Inc") for _ in range(5)]
                assert confirmed == [1, 2, 3, 4, 5]
                await until(lambda: any(n.of("schedule.fired", key=key) for n in nodes), "the schedule fired", nodes, 5.0)
                (owner,) = [n for n in nodes if n.of("epoch.acquired", key=key)]
                survivors = [n for n in nodes if n is not owner]
                owner.proc.send_signal(signal.SIGTERM)
                termed = loop.time()
                assert await asyncio.wait_for(owner.proc.wait(), 5.0) == 0, owner.describe()
                fired = await until(lambda: any(n.of("schedule.fired", termed, key=key) for n in survivors),
                                    "the schedule fired on a survivor", nodes, 5.0)
                (successor,) = [n for n in survivors if n.of("epoch.acquired", termed, key=key)]
                assert all(n.status(owner.name) == "left" for n in survivors)
                assert not any(n.of("member.changed", termed, node=owner.name, status="dead") for n in survivors)
                state = await client.ask(TYPE, key, "Get", timeout=2.0)
                assert state["count"] == 5, state
                assert fired - termed < 1.9, f"the handover waited {fired - termed:.2f}s, as long as a death verdict"
                print(f"\nSIGTERM of {owner.name} -> schedule fired on {successor.name} {fired - termed:.2f}s later")
        finally:
            await reap(nodes)

    run(body)
