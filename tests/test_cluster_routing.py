"""Cluster on three simulated nodes: membership + routing to the key's owner (its state replicated, see test_cluster_replication).

Each node is a real ``ActorSystem(cluster=Cluster(...), transport=<its SimEndpoint>)`` built
by ``World.add_node(..., cluster=...)``. Virtual time makes every instant exact.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from casty import ActorSystem, Askable, Context, actor
from casty.cluster.config import Cluster
from casty.errors import ConfigurationError, Unavailable
from sim.network import Latency, LinkModel
from sim.world import World

NODES = ("n1", "n2", "n3")
CLUSTER = Cluster(seeds=["n1"], heartbeat=0.2, suspect_after=1, dead_after=1)
CONVERGED = 2.0  # seconds of virtual time after which every node sees all three alive


@dataclass(frozen=True)
class Bump(Askable[int]):
    pass


@actor(initial=0)
async def routed_counter(ctx: Context[int, Bump]) -> None:
    """Counts the asks it got; replies with the new count."""
    async for msg in ctx.inbox:
        msg.reply_to.tell(await ctx.state.update(lambda n: n + 1))


@pytest.fixture
def world() -> Iterator[World]:
    w = World(7, network=LinkModel(latency=Latency(0.002, 0.0)))
    for name in NODES:
        w.add_node(name, cluster=CLUSTER, ask_timeout=2.0, write_timeout=1.0)
    w.run(until=CONVERGED)
    yield w
    w.close()


def ask_from(world: World, node: str, key: str, *, run_for: float = 0.5) -> Any:
    """Ask ``routed_counter[key]`` from ``node``; run the world; the result, or the exception raised."""

    async def client(system: ActorSystem) -> Any:
        try:
            return await system.ref(routed_counter, key).ask(Bump())
        except Exception as exc:  # returned, to be asserted on
            return exc

    task = world.spawn(node, client)
    world.run(until=world.now + run_for)
    assert task.done(), f"ask from {node} for {key!r} still pending"
    return task.result()


def started_on(world: World, key: str) -> list[str]:
    return [r.node for r in world.trace.of("activation.started", actor=routed_counter.name, key=key)]


def owner(world: World, node: str, key: str) -> str | None:
    return world.system(node).placement(routed_counter, key).owner


def test_cluster_needs_a_transport() -> None:
    """ActorSystem(cluster=...) without transport=, or a transport without a Cluster, is a ConfigurationError."""
    with pytest.raises(ConfigurationError, match="transport"):
        ActorSystem(node="n1", cluster=Cluster(seeds=["n1"]))
    with pytest.raises(ConfigurationError, match="Cluster"):
        ActorSystem(node="n1", cluster={"seeds": ["n1"]})


def test_cluster_options_are_validated() -> None:
    """Cluster takes seconds or timedeltas, refuses non-positive durations, a bare string of seeds and bad vnodes."""
    from datetime import timedelta

    assert Cluster(["a"], heartbeat=timedelta(milliseconds=250)).heartbeat == 0.25
    with pytest.raises(ValueError):
        Cluster(["a"], dead_after=0)
    with pytest.raises(TypeError):
        Cluster("a")
    with pytest.raises(ValueError):
        Cluster(["a"], vnodes=0)


def test_converged_members_and_one_owner_per_key(world: World) -> None:
    """Once converged, all three see three alive members and agree on every key's owner; asks from n1 run each key on exactly that owner."""
    for name in NODES:
        assert {m.node: m.status for m in world.system(name).members()} == {n: "alive" for n in NODES}
    keys = [f"k{i}" for i in range(30)]
    for key in keys:
        assert len({owner(world, n, key) for n in NODES}) == 1
        assert ask_from(world, "n1", key) == 1
    owners = {}
    for key in keys:
        assert started_on(world, key) == [owner(world, "n1", key)]
        owners[key] = owner(world, "n1", key)
    assert set(owners.values()) == set(NODES)  # 30 keys spread over the three nodes


def test_the_same_key_from_every_node_reaches_one_activation(world: World) -> None:
    """The same key asked from n1, n2 and n3 reaches one activation: its counter counts every caller's asks."""
    results = [ask_from(world, n, "shared") for n in ("n1", "n2", "n3", "n2", "n1")]
    assert results == [1, 2, 3, 4, 5]
    assert started_on(world, "shared") == [owner(world, "n1", "shared")]


def test_crashed_owner_next_replica_serves_the_replicated_state(world: World) -> None:
    """After the owner crashes and is declared dead, the next replica serves the key from its last confirmed state (replicated), so the count goes on at 3."""
    key = next(k for k in (f"c{i}" for i in range(100)) if owner(world, "n1", k) != "n1")
    first = owner(world, "n1", key)
    assert ask_from(world, "n1", key) == 1 and ask_from(world, "n1", key) == 2
    replicas = world.system("n1").placement(routed_counter, key).replicas
    world.crash(first)
    world.run(until=world.now + 0.2 + 1 + 1 + 0.5)  # silence, suspect_after, dead_after, slack
    survivor = "n1"
    assert owner(world, survivor, key) == next(r for r in replicas if r != first)
    assert ask_from(world, survivor, key) == 3  # the count confirmed on a quorum survives the owner
    assert started_on(world, key) == [first, owner(world, survivor, key)]


def test_ask_to_a_dead_owner_not_yet_declared_dead_times_out(world: World) -> None:
    """While the crashed owner is only silent or suspect it still owns the key: the Deliver is lost and the ask fails with TimeoutError (ask_timeout 2 s), not Unavailable."""
    key = next(k for k in (f"d{i}" for i in range(100)) if owner(world, "n1", k) not in (None, "n1"))
    first = owner(world, "n1", key)
    world.crash(first)
    world.run(until=world.now + 0.5)  # silent, not yet suspect (suspect_after 1 s)
    assert owner(world, "n1", key) == first  # still the owner in n1's view when the ask leaves
    result = ask_from(world, "n1", key, run_for=2.5)
    assert isinstance(result, TimeoutError) and not isinstance(result, Unavailable), result
    assert started_on(world, key) == []  # nobody ran it: the Deliver was lost with the crashed node


def test_minority_side_of_a_partition_refuses_with_unavailable(world: World) -> None:
    """n3 cut off from n1 and n2 loses its quorum after suspect_after and owns no keys: its asks fail with Unavailable after write_timeout; the majority still serves."""
    world.partition(["n3"], ["n1", "n2"])
    world.run(until=world.now + 1.5)
    assert world.system("n3").placement(routed_counter, "p").owner is None
    result = ask_from(world, "n3", "p", run_for=1.5)
    assert isinstance(result, Unavailable), result
    key = next(k for k in (f"m{i}" for i in range(100)) if owner(world, "n1", k) in ("n1", "n2"))
    assert ask_from(world, "n2", key) == 1


# ============================================================ more routing behaviour ====


def test_router_retries_wrong_owner_10ms_doubling_then_fails_at_write_timeout() -> None:
    """A Deliver answered WrongOwner each time is re-sent after 10, 20, 40, ... ms and fails (on_failed) once the next wait would pass write_timeout."""
    from casty.cluster.driver import Dispatcher
    from casty.cluster.routing import CLUSTER_WIRE, ROUTING_CHANNEL, Deliver, Router, WrongOwner
    from tests.conftest import LoopClock, run_virtual
    from tests.test_cluster_driver import FakeTransport

    async def main(_clock: LoopClock) -> tuple[list[float], list[str], float]:
        loop = asyncio.get_running_loop()
        transport = FakeTransport("a")
        failed: list[str] = []
        done = loop.create_future()
        sends: list[float] = []

        def on_failed(frame: Deliver, reason: str) -> None:
            failed.append(reason)
            done.set_result(loop.time())

        router = Router(
            "a", transport, CLUSTER_WIRE, Dispatcher(transport, CLUSTER_WIRE), loop,
            owner_of=lambda actor, key: "b", on_deliver=lambda f: None, on_reply=lambda s, f: None,
            on_failed=on_failed, write_timeout=0.5,
        )
        start = loop.time()
        router.route(Deliver(1, "t", "k", b"x"))
        while not done.done():
            while transport.sent:
                to, data = transport.sent.pop(0)
                assert to == "b" and CLUSTER_WIRE.decode(data).channel == ROUTING_CHANNEL
                sends.append(round(loop.time() - start, 6))
                transport.handler("b", CLUSTER_WIRE.encode(ROUTING_CHANNEL, WrongOwner(1, "c")))
            await asyncio.sleep(0.001)
        return sends, failed, done.result() - start

    sends, failed, at = run_virtual(main)
    assert sends[:5] == pytest.approx([0.0, 0.010, 0.030, 0.070, 0.150], abs=0.002)
    assert len(sends) == 6 and at < 0.5  # 0.31 + 0.32 would pass 0.5: fail at once rather than wait
    assert len(failed) == 1 and "wrong owner" in failed[0]


def test_router_runs_a_duplicated_deliver_once_and_a_retry_after_wrong_owner() -> None:
    """The owner's router hands a Deliver to on_deliver once per (sender, request): copies are dropped, counted; a copy
    first answered WrongOwner (not accepted) is still taken when the same request comes back once this node owns the key."""
    from casty.cluster.driver import Dispatcher
    from casty.cluster.routing import CLUSTER_WIRE, ROUTING_CHANNEL, Deliver, Router, WrongOwner
    from tests.conftest import LoopClock, run_virtual
    from tests.test_cluster_driver import FakeTransport

    async def main(_clock: LoopClock) -> tuple[list[tuple[int, str]], list[object], int]:
        loop = asyncio.get_running_loop()
        transport = FakeTransport("o")
        owner = {"k": "o", "moving": "x"}
        delivered: list[tuple[int, str]] = []
        router = Router(
            "o", transport, CLUSTER_WIRE, Dispatcher(transport, CLUSTER_WIRE), loop,
            owner_of=lambda actor, key: owner[key], on_deliver=lambda f: delivered.append((f.request, f.key)),
            on_reply=lambda s, f: None, on_failed=lambda f, r: None, write_timeout=0.5,
        )
        first = CLUSTER_WIRE.encode(ROUTING_CHANNEL, Deliver(5, "t", "k", b"x", "a", 5))
        for _ in range(3):
            transport.handler("a", first)  # the frame and two copies of it
        transport.handler("b", CLUSTER_WIRE.encode(ROUTING_CHANNEL, Deliver(5, "t", "k", b"x", "b", 5)))  # b's own 5
        moving = CLUSTER_WIRE.encode(ROUTING_CHANNEL, Deliver(6, "t", "moving", b"y"))
        transport.handler("a", moving)  # not ours: WrongOwner, nothing remembered
        owner["moving"] = "o"
        transport.handler("a", moving)  # a's retry of request 6, now ours
        transport.handler("a", moving)
        answers = [CLUSTER_WIRE.decode(data).frame for _, data in transport.sent]
        return delivered, answers, router.duplicates

    delivered, answers, duplicates = run_virtual(main)
    assert delivered == [(5, "k"), (5, "k"), (6, "moving")]
    assert answers == [WrongOwner(6, "x")]
    assert duplicates == 3


def test_tell_reaches_a_remote_owner(world: World) -> None:
    """A tell from a non-owner is routed to the owner: a later ask sees its effect."""
    key = next(k for k in (f"t{i}" for i in range(100)) if owner(world, "n1", k) != "n1")

    async def tell(system: ActorSystem) -> None:
        system.ref(routed_counter, key).tell(Bump())

    world.spawn("n1", tell)
    world.run(until=world.now + 0.2)
    assert ask_from(world, "n1", key) == 2
    assert started_on(world, key) == [owner(world, "n1", key)]


def test_orderly_stop_leaves_and_keys_move_at_once(world: World) -> None:
    """A node stopped in order tells the others it left: they route its keys to the next replica well before dead_after."""
    key = next(k for k in (f"s{i}" for i in range(100)) if owner(world, "n1", k) == "n3")
    world.stop("n3")
    world.run(until=world.now + 0.1)
    assert {m.node: m.status for m in world.system("n1").members()}["n3"] == "left"
    assert owner(world, "n1", key) in ("n1", "n2")
    assert ask_from(world, "n2", key) == 1


def test_two_systems_decode_refs_bound_to_themselves() -> None:
    """A message type decoded by two systems of one process binds its refs to the decoding system (the decoder cache is per codec)."""
    from casty._core.ref import ReplyRef, with_reply_to

    first, second = ActorSystem(node="a"), ActorSystem(node="b")
    schema = routed_counter.schema
    data = first.codec.encode_message(with_reply_to(Bump(), ReplyRef(first, "a", 1)), schema)
    for system in (first, second):
        decoded = system.codec.decode_message(data, schema)
        assert decoded.reply_to._system is system
