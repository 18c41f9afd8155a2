"""The swarm: a VOPR-style scenario, each seed its own cluster size, fault mix and plan, then a liveness phase.

Per seed (all drawn from the seed's own streams, so a seed is one exact run):

* the cluster: 3 to 7 nodes (5 most often), ``n1`` and ``n2`` its seeds, each node with its
  own disk (a ``MemoryStore`` that a wiping restart replaces);
* the fault mix (``sim.faults.FaultMix.draw``: which kinds, how often, how many nodes at
  once, majorities, seed nodes, wipes) and the plan drawn from it (``sim.faults.generate``)
  over the safety phase ``[FAULTS_FROM, HEAL_AT)``; ``python -m sim run swarm --plan JSON``
  replays a given plan instead;
* the load: client increments of three in-memory counters and one durable one (the answer is
  the confirmed count), two keys with a 1 s persisted schedule, and a node cron on every node
  (re-registered by each node when it restarts, as a node's boot code would);
* a second load stream (its own random stream, so the first one's choices stay as they were):
  increments of a five-replica counter (room for a write on two replicas of five), reads
  (``Get``, answered from the owner's memory; half of them asked on the node its view names
  owner) of every counter, and operations on two logs (``sw_log``: notes, looks, deletes, and
  now and then a run that fails leaving a late write behind); every node also holds a node
  schedule with an interval (``BEAT``, every 2 s) beside the cron;
* aimed faults: ``OnAcquire`` faults (``FaultMix.aimed``, on a stream of their own) that pause,
  crash, or cut off and crash the node that acquires one of ``AIMS`` right after it does.

At ``HEAL_AT`` every fault ends (``sim.faults.heal_all``: links whole, loss off, paused nodes
resumed, crashed ones restarted with their disks, clocks corrected). After ``SETTLE`` s the
liveness phase asks what a healed cluster owes: every client operation completes within
``OP_BOUND``, every scheduled key that is owed fires in every ``FIRE_GAP`` window, every cron
tick is told exactly once, every node's beat fires in every ``FIRE_GAP`` window and on time.
Under the faults: an owed read is never taken back, a deleted log never comes back and a
failed run's late write never lands (``deleted_stays_deleted``), node schedules are never
early and catch up without a burst (``node_schedules_keep_time``).

What is owed, decided from the trace (``sim.checks.memory_losses``, ``outages``,
``kept_memory``): a write confirmed at time c is owed at time t iff a majority of its key's
replica set (the converged ring's view, recorded at ``CONVERGED``) was up at c (a down node
acknowledged nothing) and lost no memory in (c, t]. A node loses its
memory of an in-memory key at every crash; of a durable key only at a crash whose disk did
not come through (unsynced writes lost, or the restart wiped it, or no restart at all), or
at any crash if it had not saved the key: an owner saves a durable key's confirmed writes
to its own disk, a replica's copy is in memory (``memory_losses(..., of=(actor, key))``).
When more than a minority forgot, nothing is owed: no protocol can bring back a write that
no surviving copy holds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import simpy

from casty import ActorSystem, Askable, Context, actor
from casty._core.codec import type_tag
from casty.cluster.config import Cluster
from casty.errors import Fenced

from ..faults import FaultMix, FaultPlan, generate, heal_all
from ..world import World
from .cluster import Arm, Get, Incr, Settle, Tick, _count_ticks, cl_counter
from .node_schedules import Ping, pinged

CONVERGED = 2.0  # the cluster has formed (heartbeat 0.2 s): placements are read here
FAULTS_FROM = 3.0  # the plan's faults start here (the schedules are armed before)
HEAL_AT = 33.0  # every fault is over and healed here; a plan must end by then
SETTLE = 8.0
"""From the heal to the liveness phase: a restarted node is declared alive again within a heartbeat or two,
waits out the rejoin grace (write_timeout + 1 s = 2 s) and pulls the others' replicas (a handoff round, well
under a second); a paused owner's stale activation is fenced at its first write. 8 s covers all of that twice."""
LIVE_FROM = HEAL_AT + SETTLE
LIVE_OPS_END = LIVE_FROM + 8.0
READ_AT = LIVE_OPS_END + 2.0
UNTIL = READ_AT + 3.0
OP_BOUND = 2.0
"""In the liveness phase every client increment is answered with a count within 2 s (the ask timeout: an answer
comes before it or the ask fails); with no fault left, a key's owner is reachable and a write needs one round trip."""
FIRE_GAP = 3.0
"""An owed 1 s schedule fires at least once in every 3 s window of the liveness phase (a firing may be late by a
catch-up or an owner change; three periods without one is a schedule that stopped)."""
CRON = "*/2 * * * * ?"
CRON_REFERENCE = "swarm-cron"
CRON_PERIOD_US = 2_000_000

COUNTERS = ("c0", "c1", "c2")
WIDE_COUNTERS = ("f0",)
"""Counted with five replicas (write quorum 3 of 5): room for a write held by two replicas only, not confirmed."""
DURABLE_COUNTERS = ("d0",)
LOGS = ("e0", "e1")
"""Keys of ``sw_log``: their state is the ids of the notes counted since the last delete."""
LATE = -1
"""The id a failed run's late write would put in a log: refused by the activation lease, it is never seen."""
ERASED_MARGIN = 2.0
"""A note confirmed this long before a delete was asked is ordered before the delete whatever the network did:
a duplicated or reordered frame is held back by at most 0.5 s per hop (two hops: client, owner)."""
BEAT = "swarm-beat"
BEAT_EVERY = 2.0
BEAT_LATE_US = 250_000
"""In the liveness phase a node schedule's tick is told within 0.25 s of its due time (no fault left to delay it)."""
SCHEDULED = ("s0", "s1")
SEEDS = ("n1", "n2")
REPLICAS = 3  # every type's default replica count: the ring places each key on 3 nodes (all of them on 3 nodes)


@actor(initial=0, durable="write")
async def sw_kept(ctx: Context[int, Incr | Settle | Get]) -> None:
    """cl_counter, durable: each confirmed count is also saved to the owner's disk."""
    async for msg in ctx.inbox:
        if isinstance(msg, Incr):
            await ctx.state.update(lambda n: n + 1)
        elif isinstance(msg, Settle):
            await ctx.state.update(lambda n: n)
        msg.reply_to.tell(ctx.state.value)


@actor(initial=0)
async def sw_ticker(ctx: Context[int, Arm | Tick | Get]) -> None:
    """Arm schedules a Tick every ``every`` s; each Tick counts one; Get answers the count."""
    await _count_ticks(ctx, work=0.0)


@actor(initial=0, replicas=5)
async def sw_wide(ctx: Context[int, Incr | Settle | Get]) -> None:
    """cl_counter with five replicas (three on a cluster of three, four on one of four)."""
    async for msg in ctx.inbox:
        if isinstance(msg, Incr):
            await ctx.state.update(lambda n: n + 1)
        elif isinstance(msg, Settle):
            await ctx.state.update(lambda n: n)
        msg.reply_to.tell(ctx.state.value)


@dataclass(frozen=True)
class Note(Askable[tuple[int, ...]]):
    """Add note ``op`` to the log; the answer is the log once the write is confirmed."""

    op: int


@dataclass(frozen=True)
class Look(Askable[tuple[int, ...]]):
    """The log as the owner holds it (no write)."""


@dataclass(frozen=True)
class Erase(Askable[int]):
    """Delete the log (``ctx.state.delete``); the answer (0) comes once the delete is confirmed."""


@dataclass(frozen=True)
class Outlive(Askable[int]):
    """Start a write of ``(LATE,)`` that waits ``after`` s, answer, then fail this run: the write outlives it."""

    after: float


_BACKGROUND: set[asyncio.Task[None]] = set()  # keeps the late writes referenced until they end


@actor(initial=(), idle_after=0.5)
async def sw_log(ctx: Context[tuple[int, ...], Note | Look | Erase | Outlive]) -> None:
    """A log of note ids that can be deleted, and whose failed runs leave a late write behind them. Released after
    0.5 s idle, so the next operation acquires it again and reads its replicas (a delete a replica missed is then
    weighed against that replica's older pages)."""
    async for msg in ctx.inbox:
        if isinstance(msg, Note):
            msg.reply_to.tell(await ctx.state.update(lambda ops: (*ops, msg.op)))
        elif isinstance(msg, Look):
            msg.reply_to.tell(ctx.state.value)
        elif isinstance(msg, Erase):
            await ctx.state.delete()
            msg.reply_to.tell(0)
        else:
            task = asyncio.get_running_loop().create_task(_late_write(ctx, msg.after))
            _BACKGROUND.add(task)
            task.add_done_callback(_BACKGROUND.discard)
            msg.reply_to.tell(0)
            raise RuntimeError("this run ends here; the write it started has not happened yet")


async def _late_write(ctx: Context[tuple[int, ...], Note | Look | Erase | Outlive], after: float) -> None:
    await asyncio.sleep(after)
    try:
        await ctx.state.set((LATE,))
    except Fenced:
        pass
    except Exception:  # noqa: BLE001 - the node may be gone or unavailable: the write is refused either way
        pass


@actor(initial=0)
async def sw_beat(ctx: Context[int, Ping]) -> None:
    """Takes the beats of a node schedule and writes nothing (the check reads the trace's firing rows)."""
    async for _msg in ctx.inbox:
        pass


def _counter(key: str) -> Any:
    return sw_kept if key in DURABLE_COUNTERS else sw_wide if key in WIDE_COUNTERS else cl_counter


AIMS: tuple[tuple[str, str], ...] = tuple(
    (a.name, k) for a, k in ((sw_wide, "f0"), (sw_log, "e0"), (sw_log, "e1"), (cl_counter, "c0"), (sw_kept, "d0"), (sw_ticker, "s0"))
)
"""The keys the plan's ``OnAcquire`` faults watch: the windows that open when one of them changes owner."""


# ======================================================================== the plan =====


def swarm_nodes(seed_rng: Any) -> tuple[str, ...]:
    """3 to 7 nodes, 5 most often."""
    count = seed_rng.choice((3, 4, 5, 5, 5, 6, 7))
    return tuple(f"n{i}" for i in range(1, count + 1))


def swarm_plan(world: World, nodes: tuple[str, ...]) -> tuple[FaultPlan, str]:
    """The seed's plan and a description of its mix (or the plan given from outside, ``world.given_plan``)."""
    if world.given_plan is not None:
        plan: FaultPlan = world.given_plan
        if plan.end > HEAL_AT:
            raise ValueError(f"the swarm heals every fault at {HEAL_AT:g} s: the given plan runs until {plan.end:g} s")
        return plan, "given"
    rng = world.rng("swarm", "faults")
    aim = world.rng("swarm", "aims")  # a stream of its own: the rest of the mix and plan are what they were without it
    mix = FaultMix.draw(rng, len(nodes), aim_rng=aim)
    refs = [(cl_counter.name, key, type_tag(Incr)) for key in COUNTERS]
    plan = generate(mix, rng, nodes, HEAL_AT - FAULTS_FROM, start=FAULTS_FROM, seed_nodes=SEEDS, refs=refs, aims=AIMS, aim_rng=aim)
    return plan, str(mix)


# ========================================================================= clients =====


def _incr(world: World, node: str, key: str, phase: str) -> None:
    """One increment from ``node``: ``(phase, key, node, asked_at, answered_at, count or exception name)`` in results["ops"]."""
    asked = world.now

    async def client(system: ActorSystem) -> None:
        try:
            outcome: Any = await system.ref(_counter(key), key).ask(Incr())
        except Exception as exc:
            outcome = type(exc).__name__
        world.results["ops"].append((phase, key, node, asked, world.now, outcome))

    world.spawn(node, client)


def _arm(world: World, node: str, key: str) -> None:
    async def client(system: ActorSystem) -> None:
        try:
            outcome: Any = await system.ref(sw_ticker, key).ask(Arm(1.0))
        except Exception as exc:
            outcome = type(exc).__name__
        world.results["armed"][key] = (world.now, outcome)

    world.spawn(node, client)


def _register_cron(world: World, node: str) -> None:
    """The node's boot code: the cluster cron, and a node schedule with an interval (node-held: registered again at each start)."""

    async def register(system: ActorSystem) -> str:
        await system.schedule(Ping(node), system.ref(sw_beat, f"beat-{node}"), timedelta(seconds=BEAT_EVERY), reference=BEAT)
        return await system.schedule_cron(Ping(node), system.ref(pinged, "swarm"), CRON, reference=CRON_REFERENCE)

    world.spawn(node, register)


def _ask_into(world: World, node: str, actor_type: Any, key: str, message: Any, into: str, phase: str) -> None:
    """One ask from ``node``: ``(phase, key, node, asked_at, answered_at, answer or exception name, message)`` in results[into]."""
    asked = world.now

    async def client(system: ActorSystem) -> None:
        try:
            outcome: Any = await system.ref(actor_type, key).ask(message)
        except Exception as exc:
            outcome = type(exc).__name__
        world.results[into].append((phase, key, node, asked, world.now, outcome, message))

    world.spawn(node, client)


def _owner_or_any(world: World, live: list[str], actor_type: Any, key: str, rng: Any) -> str:
    """Half the time the node that a live node's view names the key's owner (a local read), else any live node."""
    node: str = rng.choice(live)
    if rng.random() < 0.5:
        system = world.system(node)
        owner = system.placement(actor_type, key).owner
        if owner in live:
            return str(owner)
    return node


def _more_load(world: World, live: list[str], rng: Any, phase: str) -> None:
    """One operation of the second load stream: a five-replica increment, a read after writes, or a log operation."""
    results = world.results
    draw = rng.random()
    if draw < 0.3:
        _incr(world, rng.choice(live), WIDE_COUNTERS[0], phase)
    elif draw < 0.5:
        key = rng.choice(COUNTERS + WIDE_COUNTERS + DURABLE_COUNTERS)
        _ask_into(world, _owner_or_any(world, live, _counter(key), key, rng), _counter(key), key, Get(), "reads", phase)
    else:
        key = rng.choice(LOGS)
        node = _owner_or_any(world, live, sw_log, key, rng)
        pick = rng.random()
        if pick < 0.6:
            results["note_id"] += 1
            message: Any = Note(results["note_id"])
        elif pick < 0.8:
            message = Look()
        elif pick < 0.95 or phase != "safety":
            message = Erase()
        else:
            message = Outlive(round(rng.uniform(0.2, 1.5), 3))
        _ask_into(world, node, sw_log, key, message, "logs", phase)


def _record_replicas(world: World, nodes: tuple[str, ...]) -> None:
    """The replica set of every checked key, as the converged ring places it (read on a node that is up)."""
    up = next(n for n in nodes if world.node(n).status == "up")
    system = world.system(up)
    keys = [(cl_counter, k) for k in COUNTERS] + [(sw_wide, k) for k in WIDE_COUNTERS] + [(sw_kept, k) for k in DURABLE_COUNTERS]
    keys += [(sw_ticker, k) for k in SCHEDULED] + [(sw_log, k) for k in LOGS]
    world.results["replicas"] = {f"{a.name}/{k}": list(system.placement(a, k).replicas) for a, k in keys}
    world.results["ring"] = {"nodes": list(nodes), "replicas": REPLICAS}


def swarm(world: World) -> None:
    """The swarm's setup (registered as the ``swarm`` scenario by ``sim.scenarios.swarm_checks``, with its checks)."""
    nodes = swarm_nodes(world.rng("swarm", "shape"))
    cluster = Cluster(seeds=list(SEEDS[: len(nodes)]), heartbeat=0.2, suspect_after=1, dead_after=1)
    plan, mix = swarm_plan(world, nodes)  # first: a given plan that does not fit is refused before any node starts
    for name in nodes:
        world.add_node(name, cluster=cluster, ask_timeout=2.0, write_timeout=1.0)
    world.results.update(plan=plan, mix=mix, nodes=list(nodes), durable=[sw_kept.name], ops=[], armed={}, reads=[], logs=[], note_id=0)
    world.on_start.append(lambda name: _register_cron(world, name))
    load = world.rng("swarm", "load")
    for name in nodes:
        _register_cron(world, name)

    def up() -> list[str]:
        return [n for n in nodes if world.node(n).status == "up"]

    def script(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(CONVERGED)
        _record_replicas(world, nodes)
        for key in SCHEDULED:
            _arm(world, load.choice(nodes), key)
        plan.apply(world)
        while world.now < HEAL_AT - 0.5:
            yield world.timeout(load.uniform(0.1, 0.4))
            live = up()
            if live:
                _incr(world, load.choice(live), load.choice(COUNTERS + DURABLE_COUNTERS), "safety")
        yield world.timeout(HEAL_AT - world.now)
        heal_all(world)
        yield world.timeout(LIVE_FROM - world.now)
        while world.now < LIVE_OPS_END:
            _incr(world, load.choice(nodes), load.choice(COUNTERS + DURABLE_COUNTERS), "live")
            yield world.timeout(0.25)
        yield world.timeout(READ_AT - world.now)
        for key in COUNTERS + WIDE_COUNTERS + DURABLE_COUNTERS:
            _read_final_of(world, key)

    def more(world: World) -> Generator[simpy.Event, Any, None]:
        """The second load stream (its own random stream: the first one's choices are what they were without it)."""
        rng = world.rng("swarm", "load2")
        yield world.timeout(CONVERGED + 0.05)
        while world.now < HEAL_AT - 0.5:
            yield world.timeout(rng.uniform(0.2, 0.6))
            live = up()
            if live:
                _more_load(world, live, rng, "safety")
        yield world.timeout(LIVE_FROM + 0.125 - world.now)
        while world.now < LIVE_OPS_END:
            _more_load(world, list(nodes), rng, "live")
            yield world.timeout(0.5)

    world.process(script(world))
    world.process(more(world))


def _read_final_of(world: World, key: str) -> None:
    """The final count of ``key``, read with ``Settle`` (a write of the count unchanged, so the replicas' count) from n1.

    A stale owner's Settle is fenced (Unavailable) and the next one acquires a newer epoch: up to four tries.
    The result is recorded inside the client (no done callback: a read cut by the end of the run records nothing).
    """

    async def client(system: ActorSystem) -> None:
        last: Any = None
        for _ in range(4):
            try:
                world.results[f"final:{key}"] = await system.ref(_counter(key), key).ask(Settle())
                return
            except Exception as exc:
                last = type(exc).__name__
        world.results[f"final:{key}"] = last

    world.spawn("n1", client)
