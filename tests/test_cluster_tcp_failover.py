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
import signal
from dataclasses import dataclass, field
from typing import Any

from casty.cluster.client import ClusterClient
from casty.errors import CastyError
from tests.nodes import Node, free_ports, reap, run, until
from tests.nodes import spawn as spawn_node

TYPE = "tests.cluster_app:tally"
N = 20
EVERY_MS = 500
NODE_ARGS = [
    "--heartbeat", "0.2", "--suspect-after", "1", "--dead-after", "1",
    "--ask-timeout", "2", "--write-timeout", "2", "--module", "tests.cluster_app",
]
GUARD = 40.0  # seconds a test body may take before it fails


async def spawn(port: int, seeds: list[int]) -> Node:
    """A node hosting ``tests.cluster_app`` with this file's short timings, seeded with ``seeds``."""
    return await spawn_node(port, seeds, *NODE_ARGS)


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
            await asyncio.sleep(0.7)  # the listen window (three heartbeats of 0.2 s) before anyone counts a quorum

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

    run(body, GUARD)


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

    run(body, GUARD)
