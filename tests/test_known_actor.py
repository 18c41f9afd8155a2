"""No actor type name that arrives from outside the program ever imports a module (issue 10, finding 3).

A type name reaches a node in a routed frame, inside a ref carried by a message (from a
peer or from a client's JSON), in an ``@behavior`` page, or as a key of the durable store.
Each time the node may only use types this process already defined: an unknown name is an
``UnknownActor`` naming it, and the module it names is never imported. Each test points
the name at a throwaway module on ``sys.path`` and checks ``sys.modules`` afterwards.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest

from casty import ActorSystem, Askable, Context, MemoryStore, UnknownActor, actor
from casty._core.activation import PendingAsk
from casty.cluster.client import ClusterClient
from casty.cluster.config import Cluster
from casty.protocol.membership import MembershipConfig
from casty.cluster.node import NodeConfig, NodeProcess
from casty.cluster.routing import CLUSTER_WIRE, ROUTING_CHANNEL, Deliver
from casty._core.codec import type_tag
from casty.errors import ActorFailed
from casty.observer import ActivationFailed
from casty._core.ref import EntityRef, Ref
from casty._core.state import ACTIVE_PAGE, BEHAVIOR_PAGE
from conftest import LoopClock, Recorder, run_virtual
from sim.network import Latency, LinkModel
from sim.world import World
from tests.nodes import free_ports, run

PROBE = "casty_lab_probe_never_imported"
"""A module that exists on ``sys.path`` during each test: importing it would be the bug."""


@dataclass(frozen=True)
class Relay(Askable[int]):
    """Asks the ref it carries for a number and answers with it."""

    to: Ref[Any]


@dataclass(frozen=True)
class Number(Askable[int]):
    pass


@actor(initial=0)
async def relay(ctx: Context[int, Relay | Number]) -> None:
    """Answers Number with 7; Relay by telling its ref a Number (its reply goes to the original asker)."""
    async for msg in ctx.inbox:
        if isinstance(msg, Number):
            msg.reply_to.tell(7)
        else:
            msg.to.tell(Number(reply_to=msg.reply_to))


@actor(initial=0, durable="write")
async def kept(ctx: Context[int, Number]) -> None:
    """A durable key that answers Number with 7."""
    async for msg in ctx.inbox:
        msg.reply_to.tell(7)


@pytest.fixture
def probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The type name ``<probe module>:thing``, its module importable from ``tmp_path``; never imported by the test."""
    (tmp_path / f"{PROBE}.py").write_text("IMPORTED = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop(PROBE, None)
    yield f"{PROBE}:thing"
    sys.modules.pop(PROBE, None)


def relay_bytes(name: str, reply_to: list[Any] | None = None) -> bytes:
    """A ``Relay`` as a peer would encode it, its ref naming ``name``: what any node of the cluster may send."""
    fields: dict[str, Any] = {"to": ["@e", name, "k"]}
    if reply_to is not None:
        fields["reply_to"] = reply_to
    return msgspec.msgpack.encode((type_tag(Relay), fields))


# ============================================================================ a peer's frame


def test_a_ref_in_a_peer_frame_naming_an_unknown_type_is_unknown_actor_not_an_import(probe: str) -> None:
    """A Deliver whose message carries a ref to module:thing is refused with UnknownActor at the asker; the module is not imported."""
    cluster = Cluster(seeds=["n1"], heartbeat=0.2, suspect_after=1, dead_after=1)
    world = World(5, network=LinkModel(latency=Latency(0.002, 0.0)))
    try:
        for name in ("n1", "n2", "n3"):
            world.add_node(name, cluster=cluster, ask_timeout=2.0, write_timeout=1.0)
        world.run(until=2.0)
        key = next(k for k in (f"k{i}" for i in range(100)) if world.system("n1").placement(relay, k).owner == "n2")
        got: dict[str, Any] = {}

        async def client(system: ActorSystem) -> None:
            future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            system._pending[990001] = PendingAsk(future, Relay(EntityRef(None, relay.name, "x")))
            deliver = Deliver(990001, relay.name, key, relay_bytes(probe, ["@r", "n1", 990001]), "n1", 990001)
            assert system.transport is not None
            system.transport.send("n2", CLUSTER_WIRE.encode(ROUTING_CHANNEL, deliver))
            try:
                got["result"] = await asyncio.wait_for(future, 1.0)
            except Exception as exc:
                got["result"] = exc
            got["after"] = await system.ref(relay, key).ask(Number())

        world.spawn("n1", client)
        world.run(until=world.now + 1.5)
        result = got["result"]
        assert isinstance(result, UnknownActor) and probe in str(result), result
        assert PROBE not in sys.modules
        assert got["after"] == 7  # the owner serves on
    finally:
        world.close()


def test_a_decoded_ref_to_an_unknown_type_never_imports_when_told(probe: str) -> None:
    """A ref naming module:thing that reached the program anyway (built by hand) raises UnknownActor when told; no import."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock) as system:
            with pytest.raises(UnknownActor, match=PROBE):
                EntityRef(system, probe, "k").tell(Number())
            with pytest.raises(UnknownActor, match=PROBE):
                await EntityRef(system, probe, "k").ask(Number())
            assert await system.ref(relay, "k").ask(Number()) == 7

    run_virtual(main)
    assert PROBE not in sys.modules


def test_a_ref_in_a_decoded_message_naming_an_unknown_type_is_unknown_actor(probe: str) -> None:
    """Decoding a message whose ref names a type this process never defined raises UnknownActor naming it; no import."""
    system = ActorSystem(node="a")
    with pytest.raises(UnknownActor, match=PROBE):
        system.codec.decode_message(relay_bytes(probe), relay.schema)
    assert PROBE not in sys.modules
    decoded = system.codec.decode_message(relay_bytes(relay.name), relay.schema)
    assert decoded.to == EntityRef(None, relay.name, "k")


# ============================================================================ a client's JSON


def test_a_ref_in_a_client_message_naming_an_unknown_type_is_unknown_actor(probe: str) -> None:
    """A gateway given --message ["Relay", {"to": ["@e", "module:thing", "k"]}] answers UnknownActor; the module is not imported."""

    async def body() -> None:
        (port,) = free_ports(1)
        config = NodeConfig(
            bind=("127.0.0.1", port),
            modules=(relay.name.partition(":")[0],),
            membership=MembershipConfig(heartbeat=0.2, suspect_after=1, dead_after=1),
            ask_timeout=2.0,
            write_timeout=2.0,
        )
        node = NodeProcess(config, lambda fact: None)
        await node.start()
        try:
            async with ClusterClient([f"127.0.0.1:{port}"], timeout=2.0) as client:
                with pytest.raises(UnknownActor, match=PROBE):
                    await client.tell(relay.name, "k", "Relay", {"to": ["@e", probe, "k"]})
                with pytest.raises(UnknownActor, match=PROBE):
                    await client.ask(relay.name, "k", "Relay", {"to": ["@e", probe, "k"]})
                assert await client.ask(relay.name, "k", "Number") == 7  # the node kept serving
        finally:
            await node.stop()

    run(body)
    assert PROBE not in sys.modules


# ============================================================================ pages and the store


def test_a_behavior_page_naming_an_unknown_type_fails_the_activation_with_unknown_actor(probe: str, recorder: Recorder) -> None:
    """A stored @behavior page naming module:thing fails that key's activation with UnknownActor; no import; other keys serve."""

    async def main(clock: LoopClock) -> None:
        store = MemoryStore()
        async with ActorSystem(clock=clock, store=store, observer=recorder) as system:
            pages = {BEHAVIOR_PAGE: system.codec.encode_value(probe)}
            await store.save(kept.name, "poisoned", 1, system.codec.encode_pages(pages))
            result: Any = None
            try:
                result = await system.ref(kept, "poisoned").ask(Number())
            except Exception as exc:
                result = exc
            assert isinstance(result, UnknownActor) or (isinstance(result, ActorFailed) and isinstance(result.error, UnknownActor)), result
            assert probe in str(result)
            assert await system.ref(kept, "healthy").ask(Number()) == 7

    run_virtual(main)
    assert PROBE not in sys.modules
    failed = [(e.actor, e.key) for e in recorder.of(ActivationFailed)]
    assert failed == [(kept.name, "poisoned")]
    assert recorder.of(ActivationFailed)[0].error.startswith("UnknownActor(")


def test_a_store_key_of_an_unknown_type_marked_active_is_not_imported_at_start(probe: str, recorder: Recorder) -> None:
    """A durable store holding an @active key of type module:thing: the system starts, reports UnknownActor, imports nothing."""

    async def main(clock: LoopClock) -> None:
        store = MemoryStore()
        scratch = ActorSystem(node="scratch")
        await store.save(probe, "k", 1, scratch.codec.encode_pages({ACTIVE_PAGE: scratch.codec.encode_value(["old", 1])}))
        async with ActorSystem(clock=clock, store=store, observer=recorder) as system:
            assert await system.ref(relay, "k").ask(Number()) == 7

    run_virtual(main)
    assert PROBE not in sys.modules
    failed = [(e.actor, e.key) for e in recorder.of(ActivationFailed)]
    assert failed == [(probe, "k")]
    assert recorder.of(ActivationFailed)[0].error.startswith("UnknownActor(")
