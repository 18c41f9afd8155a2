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
  (re-registered by each node when it restarts, as a node's boot code would).

At ``HEAL_AT`` every fault ends (``sim.faults.heal_all``: links whole, loss off, paused nodes
resumed, crashed ones restarted with their disks, clocks corrected). After ``SETTLE`` s the
liveness phase asks what a healed cluster owes: every client operation completes within
``OP_BOUND``, every scheduled key that is owed fires in every ``FIRE_GAP`` window, every cron
tick is told exactly once.

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

from collections.abc import Generator
from datetime import timedelta
from typing import Any

import simpy

from casty import ActorSystem, Context, actor
from casty.codec import type_tag
from casty.cluster.config import Cluster

from ..checks import (
    CheckFailed,
    epochs_only_grow,
    kept_memory,
    memory_losses,
    never_early,
    outages,
    no_burst,
    owed_writes_found,
    repeats_and_misses_explained,
    replica_set,
    single_writer_per_epoch,
)
from ..faults import FaultMix, FaultPlan, generate, heal_all
from ..world import World
from . import scenario
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
DURABLE_COUNTERS = ("d0",)
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


def _counter(key: str) -> Any:
    return sw_kept if key in DURABLE_COUNTERS else cl_counter


def _expect(check: str, condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(check, message)


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
    mix = FaultMix.draw(rng, len(nodes))
    refs = [(cl_counter.name, key, type_tag(Incr)) for key in COUNTERS]
    plan = generate(mix, rng, nodes, HEAL_AT - FAULTS_FROM, start=FAULTS_FROM, seed_nodes=SEEDS, refs=refs)
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
    async def register(system: ActorSystem) -> str:
        return await system.schedule_cron(Ping(node), system.ref(pinged, "swarm"), CRON, reference=CRON_REFERENCE)

    world.spawn(node, register)


def _record_replicas(world: World, nodes: tuple[str, ...]) -> None:
    """The replica set of every checked key, as the converged ring places it (read on a node that is up)."""
    up = next(n for n in nodes if world.node(n).status == "up")
    system = world.system(up)
    keys = [(cl_counter, k) for k in COUNTERS] + [(sw_kept, k) for k in DURABLE_COUNTERS] + [(sw_ticker, k) for k in SCHEDULED]
    world.results["replicas"] = {f"{a.name}/{k}": list(system.placement(a, k).replicas) for a, k in keys}
    world.results["ring"] = {"nodes": list(nodes), "replicas": REPLICAS}


def swarm(world: World) -> None:
    """The swarm's setup (registered as the ``swarm`` scenario at the end of the module, after its checks)."""
    nodes = swarm_nodes(world.rng("swarm", "shape"))
    cluster = Cluster(seeds=list(SEEDS[: len(nodes)]), heartbeat=0.2, suspect_after=1, dead_after=1)
    plan, mix = swarm_plan(world, nodes)  # first: a given plan that does not fit is refused before any node starts
    for name in nodes:
        world.add_node(name, cluster=cluster, ask_timeout=2.0, write_timeout=1.0)
    world.results.update(plan=plan, mix=mix, nodes=list(nodes), durable=[sw_kept.name], ops=[], armed={})
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
        for key in COUNTERS + DURABLE_COUNTERS:
            _read_final_of(world, key)

    world.process(script(world))


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


# ========================================================================== checks =====


def _losses(world: World, key: str, version: int) -> dict[str, list[int]]:
    return memory_losses(world.trace, durable=key in DURABLE_COUNTERS, of=(_counter(key).name, key), version=version)


def _version_at(versions: list[tuple[int, int]], answered: float) -> int:
    """The version of the latest confirmed write of a key at or before an answer (the write the answer reports)."""
    at = round(answered * 1e9)
    return max((v for t, v in versions if t <= at), default=0)


def _replicas_of(world: World, actor_name: str, key: str) -> list[str]:
    replicas = replica_set(world, actor_name, key)
    _expect("swarm", bool(replicas), f"no replica set recorded for {actor_name}/{key}")
    return replicas


def owed_increments_kept(world: World) -> None:
    """Every owed client-confirmed increment is in the final count: per counter, the confirmed counts still owed at the
    final read (a majority of the key's replicas kept their memory from the answer to the read) are distinct, and the
    final count is >= the greatest of them and >= their number."""
    check = "owed_increments_kept"
    read_ns = round(READ_AT * 1e9)
    for key in COUNTERS + DURABLE_COUNTERS:
        final = world.results.get(f"final:{key}")
        _expect(check, isinstance(final, int), f"{key}: the final count was not read: {final!r}")
        assert isinstance(final, int)
        actor_name = _counter(key).name
        replicas = _replicas_of(world, actor_name, key)
        down = outages(world.trace)
        versions = sorted((r.t_ns, int(r.get("version"))) for r in world.trace.of("write.confirmed", actor=actor_name, key=key))
        owed = [
            (answered, count)
            for _phase, k, _node, _asked, answered, count in world.results["ops"]
            if k == key and isinstance(count, int) and kept_memory(replicas, _losses(world, key, _version_at(versions, answered)), round(answered * 1e9), read_ns, down)
        ]
        counts = sorted(c for _, c in owed)
        _expect(check, len(set(counts)) == len(counts), f"{key}: one count was confirmed twice: {counts}")
        _expect(check, final >= max(counts, default=0), f"{key}: final count {final} < owed confirmed count {max(counts, default=0)}")
        _expect(check, final >= len(counts), f"{key}: final count {final} < {len(counts)} owed confirmed increments")


def operations_live(world: World) -> None:
    """In the liveness phase every client increment is answered with a count within ``OP_BOUND`` s, and the final reads succeed."""
    check = "operations_live"
    live = [op for op in world.results["ops"] if op[0] == "live"]
    expected = int((LIVE_OPS_END - LIVE_FROM) / 0.25)
    _expect(check, len(live) >= expected - 1, f"only {len(live)} of ~{expected} liveness operations finished")
    for _phase, key, node, asked, answered, outcome in live:
        _expect(check, isinstance(outcome, int), f"{key} from {node} at t={asked:.3f}s failed: {outcome}")
        _expect(check, answered - asked <= OP_BOUND, f"{key} from {node} at t={asked:.3f}s took {answered - asked:.3f}s > {OP_BOUND:g}s")


def schedules_live(world: World) -> None:
    """Every owed scheduled key fires in every ``FIRE_GAP`` s window of the liveness phase (an arming is owed if a
    majority of the key's replicas kept their memory from its confirmation to the liveness phase)."""
    check = "schedules_live"
    losses = memory_losses(world.trace, durable=False)
    live_ns = round(LIVE_FROM * 1e9)
    for key in SCHEDULED:
        armed = world.results["armed"].get(key)
        _expect(check, armed is not None and isinstance(armed[1], int), f"{key} was not armed: {armed!r}")
        assert armed is not None
        if not kept_memory(_replicas_of(world, sw_ticker.name, key), losses, round(armed[0] * 1e9), live_ns, outages(world.trace)):
            continue  # a majority of its replicas forgot: the schedule is not owed
        fired = sorted(r.t for r in world.trace.of("schedule.fired", actor=sw_ticker.name, key=key) if r.t >= LIVE_FROM)
        edges = [LIVE_FROM, *fired, UNTIL]
        gaps = [(a, b) for a, b in zip(edges, edges[1:], strict=False) if b - a > FIRE_GAP]
        _expect(check, not gaps, f"{key} did not fire from t={gaps[0][0]:.3f}s to t={gaps[0][1]:.3f}s (owed, every 1 s)" if gaps else "")


def cron_live(world: World) -> None:
    """Every cron tick of the liveness phase is told exactly once, cluster-wide."""
    check = "cron_live"
    start_us = world.epoch_us + round(LIVE_FROM * 1e6)
    end_us = world.epoch_us + round((UNTIL - 2.0) * 1e6)
    told: dict[int, list[str]] = {}
    for row in world.trace.of("node_schedule.fired", reference=CRON_REFERENCE):
        told.setdefault(int(row.get("tick_us")), []).append(row.node)
    first = start_us + (-start_us) % CRON_PERIOD_US
    for tick in range(first, end_us, CRON_PERIOD_US):
        nodes = told.get(tick, [])
        _expect(check, len(nodes) == 1, f"cron tick at t={(tick - world.epoch_us) / 1e6:.1f}s told {len(nodes)} time(s) {nodes}")


def _kept_rows(kind: str) -> bool:
    """Every row but the per-frame ``net.sent`` and ``net.delivered`` (counted only): no check reads them, and they are
    most of a swarm trace (a seed runs about twice as fast without them). Dropped frames stay rows."""
    return kind not in ("net.sent", "net.delivered")


SWARM_CHECKS = (
    epochs_only_grow,
    single_writer_per_epoch,
    owed_writes_found,
    never_early,
    no_burst,
    repeats_and_misses_explained,
    owed_increments_kept,
    operations_live,
    schedules_live,
    cron_live,
)


scenario(
    "swarm",
    "3-7 nodes (5 most often): a fault mix and plan drawn per seed (crashes of majorities, wipes, long pauses, clock steps back, flapping links, forged frames), then every fault healed: no owed write lost, every operation and schedule live again",
    until=timedelta(seconds=UNTIL),
    checks=SWARM_CHECKS,
    tags=("fault-plan",),
    keep=_kept_rows,
)(swarm)
