"""Durable actor types in a cluster: confirmed writes go to the store too, and come back from it when every replica lost them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from casty import ActorSystem, Askable, Context, MemoryStore, actor
from casty.cluster.config import Cluster
from casty.cluster.replication import ZERO_EPOCH, Epoch, KeyOwner, Promise, Stamp, Write
from casty.cluster.sansio import Send
from casty.state import STATE_PAGE
from sim.world import World

NODES = ("n1", "n2", "n3")
CLUSTER = Cluster(seeds=["n1", "n2"], heartbeat=0.2, suspect_after=1, dead_after=1)


@dataclass(frozen=True)
class Inc(Askable[int]):
    pass


@actor(initial=0, durable="write")
async def stored_counter(ctx: Context[int, Inc]) -> None:
    """Counts Inc asks; every confirmed count is saved to the store as well."""
    async for msg in ctx.inbox:
        msg.reply_to.tell(await ctx.state.update(lambda n: n + 1))


def _ask(world: World, node: str, key: str) -> Any:
    async def client(system: ActorSystem) -> Any:
        try:
            return await system.ref(stored_counter, key).ask(Inc())
        except Exception as exc:
            return exc

    task = world.spawn(node, client)
    world.run(until=world.now + 1.0)
    assert task.done()
    return task.result()


def _stored(world: World, database: MemoryStore, key: str) -> tuple[int, int] | None:
    """(version, count) as the store holds the key."""
    system = world.system("n1")
    loaded = asyncio.run(database.load(stored_counter.name, key))
    if loaded is None:
        return None
    version, blob = loaded
    return version, system.codec.decode_value(system.codec.decode_pages(blob)[STATE_PAGE], int, "state")


def test_write_back_version_exceeds_the_floor() -> None:
    """KeyOwner.acquire(floor=v) writes back above v even when every replica holds nothing (versions keep growing after a store recovery)."""
    owner = KeyOwner(("t", "k"), "n1#1", resend_every=None)
    owner.acquire(0.0, ("a", "b", "c"), floor=41)
    owner.receive("a", Promise(("t", "k"), owner.epoch, Stamp(ZERO_EPOCH, 0), {}), 0.1)
    out = owner.receive("b", Promise(("t", "k"), owner.epoch, Stamp(ZERO_EPOCH, 0), {}), 0.1)
    writes = [o.frame for o in out if isinstance(o, Send) and isinstance(o.frame, Write)]
    assert writes and all(w.version == 42 for w in writes)
    assert owner.epoch == Epoch(1, "n1#1")


def test_every_confirmed_write_of_a_durable_type_is_in_the_store() -> None:
    """In a cluster, a durable="write" key's answered counts are in the shared store under the replicated version."""
    world = World(1)
    database = MemoryStore()
    for name in NODES:
        world.add_node(name, cluster=CLUSTER, store=database, ask_timeout=2.0, write_timeout=1.0)
    world.run(until=2.0)
    counts = [_ask(world, node, "k") for node in ("n1", "n2", "n3", "n1")]
    assert counts == [1, 2, 3, 4]
    stored = _stored(world, database, "k")
    assert stored is not None and stored[1] == 4
    confirmed = [r.get("version") for r in world.trace.of("write.confirmed", key="k")]
    assert stored[0] == max(confirmed)
    world.close()


def test_a_durable_key_comes_back_from_the_store_when_every_replica_restarted() -> None:
    """All three nodes restart with empty replicas: the next Inc finds the stored count, not the initial 0, and its version goes on."""
    world = World(2)
    database = MemoryStore()
    for name in NODES:
        world.add_node(name, cluster=CLUSTER, store=database, ask_timeout=2.0, write_timeout=1.0)
    world.run(until=2.0)
    assert [_ask(world, "n2", "k") for _ in range(3)] == [1, 2, 3]
    before = _stored(world, database, "k")
    for name in NODES:
        world.crash(name)
    world.run(until=world.now + 1.0)
    for name in NODES:
        world.restart(name)
    world.run(until=world.now + 3.0)
    assert _ask(world, "n3", "k") == 4
    after = _stored(world, database, "k")
    assert before is not None and after is not None and after[0] > before[0] and after[1] == 4
    world.close()
