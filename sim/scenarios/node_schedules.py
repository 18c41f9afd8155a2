"""Node schedules (seed: grain scheduling) in the world: what a node holds, and what it loses.

Single-node scenarios (timers vs schedules, a restart loses node schedules) and cluster
ones: a cron registered on three nodes is delivered once per tick through a claim per tick
(``casty.cluster.claims``), a winner that dies between its claim and its tell loses that
tick cluster-wide, and an interval registered on three nodes is delivered three times per
tick (node-local).
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from collections.abc import Generator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import simpy

from casty import ActorSystem, Askable, Context, actor
from casty.cluster.claims import claim_key, schedule_fire
from casty.protocol.tick_claim import CLAIM_TTL_MIN_US
from casty.cluster.config import Cluster
from casty._core.state import STATE_PAGE

from ..checks import CheckFailed
from ..trace import Row
from ..world import World
from . import scenario

# =========================================================================== actors ======


@dataclass(frozen=True)
class Beat:
    source: str


@dataclass(frozen=True)
class Arm(Askable[None]):
    """Start a persisted actor schedule and an activation timer, both every 10 s."""


@dataclass(frozen=True)
class Counts(Askable[dict[str, int]]):
    pass


@actor(initial={}, durable="write", idle_after=timedelta(seconds=45))
async def counted(ctx: Context[dict[str, int], Beat | Arm | Counts]) -> None:
    """Counts Beats per source: 'schedule' (persisted), 'timer' (ctx.timer), 'node' (a node schedule)."""
    async for msg in ctx.inbox:
        match msg:
            case Arm(reply_to=reply_to):
                await ctx.schedule("persisted", timedelta(seconds=10), timedelta(seconds=10), Beat("schedule"))
                ctx.timer("volatile", timedelta(seconds=10), timedelta(seconds=10), Beat("timer"))
                reply_to.tell(None)
            case Beat(source=source):
                await ctx.state.update(lambda c: {**c, source: c.get(source, 0) + 1})
            case Counts(reply_to=reply_to):
                reply_to.tell(dict(ctx.state.value))


def _expect(check: str, condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(check, message)


async def _arm_all_three(system: ActorSystem) -> None:
    """Key 'k' gets a persisted schedule and an activation timer (Arm), and a node schedule from outside."""
    ref = system.ref(counted, "k")
    await ref.ask(Arm())
    await system.schedule(Beat("node"), ref, timedelta(seconds=10), reference="node-beat")


def _read(world: World, node: str, key: str, result: str) -> None:
    async def read(system: ActorSystem) -> dict[str, int]:
        return await system.ref(counted, key).ask(Counts())

    task = world.spawn(node, read)
    task.add_done_callback(lambda t: world.results.__setitem__(result, t.result() if t.exception() is None else {}))


# ===================================================================== scenarios =======


def _timers_vs_schedules_explained(world: World) -> None:
    """Before the restart all three sources tick; after it only the persisted actor schedule does."""
    before, after = world.results.get("before"), world.results.get("after")
    _expect("timers_vs_schedules", before is not None and after is not None, "the counts were not read")
    assert before is not None and after is not None
    for source in ("schedule", "timer", "node"):
        _expect("timers_vs_schedules", before.get(source, 0) > 0, f"{source} did not tick before the crash: {before}")
    _expect("timers_vs_schedules", after.get("timer") == before.get("timer"), f"the activation timer ticked after the restart: {before} -> {after}")
    _expect("timers_vs_schedules", after.get("node") == before.get("node"), f"the node schedule ticked after the restart: {before} -> {after}")
    _expect("timers_vs_schedules", after["schedule"] > before["schedule"], "the persisted schedule did not go on after the restart")
    lost = world.trace.of("node_schedule.cancelled", reason="stopped")
    _expect("timers_vs_schedules", len(lost) == 1, "the node schedule was not dropped by the crash")


@scenario(
    "timers-vs-schedules",
    "an activation timer, a node schedule and a persisted actor schedule on one key: a node restart keeps only the last",
    until=timedelta(seconds=200),
    checks=(_timers_vs_schedules_explained,),
)
def timers_vs_schedules(world: World) -> None:
    world.add_node("n1", store="sqlite")
    world.spawn("n1", _arm_all_three)

    def script(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(64)
        _read(world, "n1", "k", "before")
        yield world.timeout(1)
        world.crash("n1")
        yield world.timeout(15)
        world.restart("n1")
        yield world.timeout(100)
        _read(world, "n1", "k", "after")

    world.process(script(world))


def _node_schedule_lost_actor_schedule_kept(world: World) -> None:
    """After the restart the node has no node schedules; the actor schedule resumed from the disk with no message."""
    restart = world.trace.of("fault.restart")[0]
    node_fired_after = [r for r in world.trace.of("node_schedule.fired") if r.t_ns > restart.t_ns]
    _expect("node_restart", not node_fired_after, f"{len(node_fired_after)} node-schedule ticks after the restart")
    actor_fired_after = [r for r in world.trace.of("schedule.fired") if r.t_ns > restart.t_ns]
    _expect("node_restart", len(actor_fired_after) >= 5, f"only {len(actor_fired_after)} actor-schedule firings after the restart")
    listed = world.results.get("listed_after")
    _expect("node_restart", listed == [], f"list_schedules() after the restart: {listed}")


@scenario(
    "node-restart-loses-node-schedules",
    "node schedules live in the node's memory: a restart loses them, while an actor's persisted schedule resumes",
    until=timedelta(seconds=200),
    checks=(_node_schedule_lost_actor_schedule_kept,),
)
def node_restart_loses_node_schedules(world: World) -> None:
    world.add_node("n1", store="sqlite")
    world.spawn("n1", _arm_all_three)

    async def listed(system: ActorSystem) -> list[str]:
        await asyncio.sleep(1)
        return [info.reference for info in system.list_schedules()]

    def script(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(55)
        world.crash("n1")
        yield world.timeout(10)
        world.restart("n1")
        task = world.spawn("n1", listed)
        task.add_done_callback(lambda t: world.results.__setitem__("listed_after", t.result()))

    world.process(script(world))


# ===================================================================== cluster =========

NODES = ("n1", "n2", "n3")
CLUSTER = Cluster(seeds=["n1"], heartbeat=0.2, suspect_after=1, dead_after=1)
CONVERGED = 2.0
CRON = "*/5 * * * * ?"  # every 5 s: the claim TTL is clamped up to 1 min
CRON_REFERENCE = "report-every-5s"


@dataclass(frozen=True)
class Ping:
    source: str


@dataclass(frozen=True)
class Pings(Askable[dict[str, int]]):
    pass


@actor(initial={})
async def pinged(ctx: Context[dict[str, int], Ping | Pings]) -> None:
    """Counts Pings per source (the node whose schedule sent it); Pings answers the counts."""
    async for msg in ctx.inbox:
        if isinstance(msg, Ping):
            await ctx.state.update(lambda c: {**c, msg.source: c.get(msg.source, 0) + 1})
        else:
            msg.reply_to.tell(dict(ctx.state.value))


def _cluster_nodes(world: World, offsets: dict[str, float]) -> None:
    for name in NODES:
        world.add_node(name, offset=timedelta(seconds=offsets.get(name, 0.0)), cluster=CLUSTER, ask_timeout=2.0, write_timeout=1.0)


def _register_cron(world: World, node: str) -> None:
    async def register(system: ActorSystem) -> str:
        return await system.schedule_cron(Ping(node), system.ref(pinged, "report"), CRON, reference=CRON_REFERENCE)

    world.spawn(node, register)


def _cancel(world: World, node: str, reference: str) -> None:
    async def cancel(system: ActorSystem) -> None:
        system.cancel_schedule(reference)

    world.spawn(node, cancel)


def _read_pings(world: World, node: str, result: str) -> None:
    async def read(system: ActorSystem) -> Any:
        try:
            return await system.ref(pinged, "report").ask(Pings())
        except Exception as exc:
            return type(exc).__name__

    task = world.spawn(node, read)
    task.add_done_callback(lambda t: world.results.__setitem__(result, t.result()))


def _claims_by_tick(world: World) -> dict[int, list[Row]]:
    """Every claim outcome row (won, lost, skipped) by nominal tick, in trace order."""
    by_tick: dict[int, list[Row]] = defaultdict(list)
    for row in world.trace.of("node_schedule.claim_won", "node_schedule.claim_lost", "node_schedule.claim_skipped", reference=CRON_REFERENCE):
        by_tick[int(row.get("tick_us"))].append(row)
    return dict(sorted(by_tick.items()))


def _all_registered_us(world: World) -> int:
    """The latest first tick among the three registrations: from this tick on, all three nodes claim every tick."""
    registered = world.trace.of("node_schedule.registered", reference=CRON_REFERENCE)
    _expect("cron_claims", len(registered) == 3, f"the cron was registered on {len(registered)} node(s), not 3")
    return max(int(r.get("due_us")) for r in registered)


def _pings_total(world: World, result: str) -> int:
    counts = world.results.get(result)
    _expect("pings", isinstance(counts, dict), f"the target's counts were not read: {counts!r}")
    assert isinstance(counts, dict)
    return sum(counts.values())


def _cron_once_per_tick(world: World) -> None:
    """Every tick is claimed by each node that runs the trigger, won by exactly one, lost by the others naming that winner, and told once; the target counted exactly the told ticks."""
    check = "cron_single_fire"
    by_tick = _claims_by_tick(world)
    everyone_from = _all_registered_us(world)
    cancelled = world.trace.of("node_schedule.cancelled", reference=CRON_REFERENCE, reason="cancelled")
    _expect(check, len(cancelled) == 3, f"the cron was cancelled on {len(cancelled)} node(s), not 3")
    everyone_until = min(int(r.wall_us or 0) for r in cancelled)  # a node claims tick t iff its clock reached t before its cancel
    fired = Counter(int(r.get("tick_us")) for r in world.trace.of("node_schedule.fired", reference=CRON_REFERENCE))
    _expect(check, len(by_tick) >= 6, f"only {len(by_tick)} ticks were claimed")
    for tick, rows in by_tick.items():
        won = [r for r in rows if r.kind == "node_schedule.claim_won"]
        lost = [r for r in rows if r.kind == "node_schedule.claim_lost"]
        skipped = [r for r in rows if r.kind == "node_schedule.claim_skipped"]
        _expect(check, not skipped, f"tick {tick}: claims skipped: {[(r.node, r.get('reason')) for r in skipped]}")
        _expect(check, len(won) == 1, f"tick {tick}: {len(won)} winners {[r.node for r in won]}")
        winner = won[0].node
        _expect(check, all(r.get("winner") == winner for r in lost), f"tick {tick}: lost claims name {[r.get('winner') for r in lost]}, the winner is {winner}")
        _expect(check, len({r.node for r in rows}) == len(rows), f"tick {tick}: a node claimed twice: {[r.node for r in rows]}")
        if everyone_from <= tick <= everyone_until:
            _expect(check, len(rows) == 3 and len(lost) == 2, f"tick {tick}: {len(rows)} claims ({len(lost)} lost), expected 3 (2 lost)")
        _expect(check, fired[tick] == 1, f"tick {tick}: told {fired[tick]} times")
    _expect(check, set(fired) == set(by_tick), f"ticks told without a claim: {sorted(set(fired) - set(by_tick))}")
    winners = {rows[0].node for rows in by_tick.values() if rows[0].kind == "node_schedule.claim_won"}
    _expect(check, bool(winners), "no tick was won by its first claimant")
    total = _pings_total(world, "pings")
    _expect(check, total == sum(fired.values()), f"the target counted {total} pings, {sum(fired.values())} ticks were told")


def _claims_expire(world: World) -> None:
    """Every claim key removed itself once its TTL (1 min, the clamp of a 5 s period) had passed on its owner's clock, once."""
    check = "claims_expire"
    end_us = world.trace.rows[-1].wall_us or 0
    expired = world.trace.of("schedule.fired", actor=schedule_fire.name, name="expire")
    by_key = Counter(str(r.get("key")) for r in expired)
    _expect(check, all(n == 1 for n in by_key.values()), f"a claim expired twice: {[k for k, n in by_key.items() if n > 1]}")
    for tick in _claims_by_tick(world):
        key = claim_key(CRON_REFERENCE, tick)
        rows = [r for r in expired if r.get("key") == key]
        if tick + CLAIM_TTL_MIN_US + 1_000_000 < end_us:  # a second of slack for clock skew between nodes
            _expect(check, len(rows) == 1, f"claim {key} did not expire")
        for row in rows:
            _expect(check, int(row.get("now_us")) >= tick + CLAIM_TTL_MIN_US, f"claim {key} expired early, at {row.get('now_us')}")


@scenario(
    "cron-single-fire",
    "3 nodes with clocks skewed by up to 2 s each register the same cron (every 5 s): each tick is claimed by all three, won by one, told once",
    until=timedelta(seconds=110),
    checks=(_cron_once_per_tick, _claims_expire),
)
def cron_single_fire(world: World) -> None:
    skew = world.rng("scenario", "skew")
    _cluster_nodes(world, {name: round(skew.uniform(-2.0, 2.0), 6) for name in NODES})

    def script(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(CONVERGED)
        for name in NODES:
            _register_cron(world, name)
        yield world.timeout(43)
        for name in NODES:
            _cancel(world, name, CRON_REFERENCE)  # cancel is local: each node stops its own trigger
        yield world.timeout(5)
        _read_pings(world, "n2", "pings")

    world.process(script(world))


def _winner_crash_loses_the_tick(world: World) -> None:
    """n1 (clock 1.5 s ahead) won the chosen tick and died before telling it: nobody told that tick, the two others lost their claim to n1, and the following ticks were told once each."""
    check = "cron_claim_winner_crash"
    chosen = world.results.get("chosen_tick_us")
    crash = world.trace.of("fault.crash")
    _expect(check, isinstance(chosen, int) and len(crash) == 1, f"the crash did not happen (tick {chosen}, {len(crash)} crashes)")
    assert isinstance(chosen, int)
    by_tick = _claims_by_tick(world)
    fired = Counter(int(r.get("tick_us")) for r in world.trace.of("node_schedule.fired", reference=CRON_REFERENCE))
    rows = by_tick.get(chosen, [])
    _expect(check, fired[chosen] == 0, f"the tick whose winner crashed was told {fired[chosen]} times")
    _expect(check, sorted(r.node for r in rows) == ["n2", "n3"], f"claims of the lost tick: {[(r.node, r.kind) for r in rows]}")
    _expect(check, all(r.kind == "node_schedule.claim_lost" and r.get("winner") == "n1" for r in rows), f"the lost tick's claims do not name n1 as the winner: {[(r.node, r.kind, r.get('winner')) for r in rows]}")
    confirmed = [r for r in world.trace.of("write.confirmed", actor=schedule_fire.name, key=claim_key(CRON_REFERENCE, chosen)) if STATE_PAGE in (r.get("pages") or ())]
    _expect(check, bool(confirmed) and confirmed[0].t_ns <= crash[0].t_ns, "n1's claim was not confirmed before n1 crashed")
    after = [tick for tick in by_tick if tick > chosen]
    _expect(check, len(after) >= 4, f"only {len(after)} ticks after the lost one")
    for tick in after:
        won = [r for r in by_tick[tick] if r.kind == "node_schedule.claim_won"]
        _expect(check, len(won) == 1 and won[0].node != "n1", f"tick {tick} after the crash: winners {[r.node for r in won]}")
        _expect(check, fired[tick] == 1, f"tick {tick} after the crash was told {fired[tick]} times")
    before = [tick for tick in by_tick if tick < chosen]
    _expect(check, all(fired[tick] == 1 for tick in before), f"ticks before the crash not told once: {[(t, fired[t]) for t in before]}")
    total = _pings_total(world, "pings")
    _expect(check, total == sum(fired.values()), f"the target counted {total} pings, {sum(fired.values())} ticks were told")


def _crash_winner_when_claimed(world: World) -> Generator[simpy.Event, Any, None]:
    """Pick a coming tick whose claim key is owned by n2 or n3; crash n1 the instant that key's claim write is confirmed.

    n1's clock is ahead, so n1 claims every tick first and wins it. With the claim key owned
    elsewhere, n1's answer is still on the wire when the write is confirmed: crashing n1
    then is "between claim and tell", and nobody will tell that tick.
    """
    yield world.timeout(CONVERGED + 10)
    observer = world.system("n2")
    wall_us = observer.clock.now_us()
    first = (wall_us // 5_000_000 + 2) * 5_000_000  # a tick at least 5 s away on n2's clock
    tick = next(
        t for t in range(first, first + 100 * 5_000_000, 5_000_000)
        if observer.placement(schedule_fire, claim_key(CRON_REFERENCE, t)).owner != "n1"
    )
    world.results["chosen_tick_us"] = tick
    key = claim_key(CRON_REFERENCE, tick)
    confirmed = world.env.event()

    def watch(row: Row) -> None:
        if (
            not confirmed.triggered
            and row.kind == "write.confirmed"
            and row.get("actor") == schedule_fire.name
            and row.get("key") == key
            and STATE_PAGE in (row.get("pages") or ())
        ):
            confirmed.succeed(row)

    world.trace.subscribe(watch)
    yield confirmed
    world.crash("n1")


@scenario(
    "cron-claim-winner-crash",
    "3 nodes run the same cron; n1 (clock ahead) wins a tick's claim and crashes before it tells: that tick is lost cluster-wide, the next ones are delivered",
    until=timedelta(seconds=60),
    checks=(_winner_crash_loses_the_tick,),
)
def cron_claim_winner_crash(world: World) -> None:
    _cluster_nodes(world, {"n1": 1.5, "n2": 0.0, "n3": -1.5})

    def script(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(CONVERGED)
        for name in NODES:
            _register_cron(world, name)
        yield world.timeout(48)
        for name in ("n2", "n3"):
            _cancel(world, name, CRON_REFERENCE)
        yield world.timeout(5)
        _read_pings(world, "n2", "pings")

    world.process(script(world))
    world.process(_crash_winner_when_claimed(world))


INTERVAL_REFERENCE = "ping-every-5s"


def _interval_three_times(world: World) -> None:
    """Each node told its own interval ticks (no claim); every tick reached the single activation three times, once per node."""
    check = "interval_per_node"
    claims = world.trace.of("node_schedule.claim_*")
    _expect(check, not claims, f"an interval schedule was claimed: {len(claims)} claim rows")
    fired = world.trace.of("node_schedule.fired", reference=INTERVAL_REFERENCE)
    per_node = Counter(r.node for r in fired)
    _expect(check, sorted(per_node) == list(NODES), f"ticks told per node: {dict(per_node)}")
    _expect(check, len(set(per_node.values())) == 1 and min(per_node.values()) >= 6, f"the nodes told different numbers of ticks: {dict(per_node)}")
    lost = world.trace.of("node_schedule.tick_lost", reference=INTERVAL_REFERENCE)
    _expect(check, not lost, f"ticks lost: {[(r.node, r.get('reason')) for r in lost]}")
    counts = world.results.get("pings")
    _expect(check, counts == dict(sorted(per_node.items())), f"the target counted {counts}, the nodes told {dict(per_node)}")
    for node in NODES:
        ticks = [int(r.get("tick_us")) for r in fired if r.node == node]
        gaps = {b - a for a, b in zip(ticks, ticks[1:])}
        _expect(check, gaps == {5_000_000}, f"{node}'s ticks are not 5 s apart on its clock: {sorted(gaps)}")


@scenario(
    "interval-per-node",
    "3 nodes register the same interval schedule (every 5 s, the same reference on each): node-local, so each tick is delivered three times",
    until=timedelta(seconds=45),
    checks=(_interval_three_times,),
)
def interval_per_node(world: World) -> None:
    skew = world.rng("scenario", "skew")
    _cluster_nodes(world, {name: round(skew.uniform(-2.0, 2.0), 6) for name in NODES})

    def register(world: World, node: str) -> None:
        async def go(system: ActorSystem) -> str:
            return await system.schedule(Ping(node), system.ref(pinged, "report"), timedelta(seconds=5), reference=INTERVAL_REFERENCE)

        world.spawn(node, go)

    def script(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(CONVERGED)
        for name in NODES:
            register(world, name)
        yield world.timeout(33.5)
        for name in NODES:
            _cancel(world, name, INTERVAL_REFERENCE)
        yield world.timeout(2)
        _read_pings(world, "n3", "pings")

    world.process(script(world))
