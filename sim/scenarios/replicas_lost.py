"""all-replicas-lost: every replica of two scheduled keys restarts with no memory at once.

Replicas keep pages in memory, so when every node that held a key comes back as a new
process, the key's state and its ``@schedules`` page are gone from the cluster, as the seed
says: "Replication preserves the schedules while replicas survive; persistence across the
loss of every replica requires a durable actor". Two keys show both halves:

* ``plain`` (``cl_ticker``, not durable): after the restart no node knows it; its schedule
  never fires again, and a later ``Get`` starts it from its initial state.
* ``kept`` (``kept_ticker``, ``durable="write"``): every confirmed write was also saved to
  the cluster's database (one ``MemoryStore`` that all three nodes are given: in a cluster a
  durable type needs a store its next owner can read). After the restart its owner finds it
  marked ``@active`` in the store, resumes it with no message, adopts the stored pages (no
  replica holds anything of it) and re-arms its schedule: the occurrences due while the
  cluster was down fire once, then the grid goes on.

Before that, n1 (the owner of ``kept``) crashes and restarts alone, the other nodes keeping
their replicas: back, it acquires ``kept`` again under a newer epoch, so the key has held
epochs above round 1 when the whole cluster goes down. Its owner after the restart must
still start above all of them (``epochs_only_grow``): the store keeps the epoch of each saved
page set, and an owner that recovers the key from the store mints its epoch above that one.
"""

from __future__ import annotations

from collections.abc import Generator
from datetime import timedelta
from typing import Any

import simpy

from casty import Context, MemoryStore, actor

from ..checks import epochs_only_grow, never_early, no_burst
from ..world import World
from . import scenario
from .cluster import CLUSTER, CONVERGED, NODES, Arm, Get, Tick, _ask, _count_ticks, _expect, cl_ticker

OWNER_CRASH = CONVERGED + 1.5
OWNER_BACK = OWNER_CRASH + 1.0
CRASH_AT = CONVERGED + 6.0
RESTART_AT = CRASH_AT + 3.0
READ_AT = RESTART_AT + 8.0


@actor(initial=0, durable="write")
async def kept_ticker(ctx: Context[int, Arm | Tick | Get]) -> None:
    """cl_ticker, durable: each confirmed write is saved to the store as well."""
    await _count_ticks(ctx, work=0.0)


def _rows_of(world: World, kind: str, key: str, after: float) -> list[Any]:
    return [r for r in world.trace.of(kind) if r.get("key") == key and r.t > after]


def _plain_is_lost(world: World) -> None:
    """The non-durable key's schedule never fires after every replica restarted, and its count starts over."""
    check = "plain_is_lost"
    before = _rows_of(world, "schedule.fired", "plain", 0.0)
    _expect(check, any(r.t < CRASH_AT for r in before), "plain never fired before the crash: nothing to lose")
    after = _rows_of(world, "schedule.fired", "plain", RESTART_AT)
    _expect(check, not after, f"plain fired {len(after)} time(s) after every replica restarted: its schedule should be gone")
    count = world.results.get("after:plain")
    _expect(check, count == 0, f"plain answered {count!r} after the restart: its state should be back to the initial 0")


def _kept_is_recovered(world: World) -> None:
    """The durable key resumes by itself on one owner after the restart, from the store, and its schedule goes on."""
    check = "kept_is_recovered"
    started = _rows_of(world, "activation.started", "kept", RESTART_AT)
    _expect(check, bool(started), "kept was not activated after the restart")
    first = started[0]
    _expect(check, bool(first.get("recovered")), "kept started from its initial state, not from the store")
    _expect(check, first.t < READ_AT, "kept waited for the final Get to start: it should resume by itself")
    fired = _rows_of(world, "schedule.fired", "kept", RESTART_AT)
    _expect(check, len(fired) >= 3, f"kept fired {len(fired)} time(s) after the restart")
    _expect(check, len({r.node for r in fired}) == 1, f"kept fired on several nodes: {sorted({r.node for r in fired})}")
    before, after = world.results.get("before:kept"), world.results.get("after:kept")
    _expect(check, isinstance(before, int) and isinstance(after, int), f"counts not read: before={before!r} after={after!r}")
    assert isinstance(before, int) and isinstance(after, int)
    counted = [r for r in fired if r.t < READ_AT]
    _expect(check, after >= before + len(counted), f"kept counted {after} at the final read: {before} before + {len(counted)} firings since")


@scenario(
    "all-replicas-lost",
    "3 nodes, replicas=3: the owner restarts alone, then every node restarts with no memory at once; a plain scheduled key is gone, a durable one resumes from the store above every epoch it had",
    until=timedelta(seconds=READ_AT + 1.0),
    checks=(_plain_is_lost, _kept_is_recovered, never_early, no_burst, epochs_only_grow),
)
def all_replicas_lost(world: World) -> None:
    database = MemoryStore()  # the cluster's one database, outside every node
    for name in NODES:
        world.add_node(name, cluster=CLUSTER, store=database, ask_timeout=2.0, write_timeout=1.0)

    def script(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(CONVERGED)
        _ask(world, "n1", cl_ticker, "plain", Arm(1.0), "armed:plain")
        _ask(world, "n1", kept_ticker, "kept", Arm(1.0), "armed:kept")
        yield world.timeout(OWNER_CRASH - world.now)
        world.crash("n1")  # kept's owner alone first: back, it takes kept under a newer epoch
        yield world.timeout(OWNER_BACK - world.now)
        world.restart("n1")
        yield world.timeout(CRASH_AT - 0.3 - world.now)
        _ask(world, "n2", kept_ticker, "kept", Get(), "before:kept")
        yield world.timeout(CRASH_AT - world.now)
        for name in NODES:
            world.crash(name)
        yield world.timeout(RESTART_AT - world.now)
        for name in NODES:
            world.restart(name)
        yield world.timeout(READ_AT - world.now)
        _ask(world, "n3", cl_ticker, "plain", Get(), "after:plain")
        _ask(world, "n3", kept_ticker, "kept", Get(), "after:kept")

    world.process(script(world))
