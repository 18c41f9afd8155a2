"""Single-node scenarios: what the schedules seed says happens, on one casty node.

Every actor here is ordinary casty code, defined at module scope like any application's;
the world only supplies its ports and its faults.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Generator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import simpy

from casty import ActorSystem, Askable, Context, Ref, actor
from casty._core.timer_heap import WALL_RECHECK

from ..checks import CheckFailed, never_early, no_burst, occurrences_accounted_for
from ..effects import at_least_once, effects, exactly_once
from ..world import World
from . import scenario

SECOND_US = 1_000_000

# =========================================================================== actors ======


@dataclass(frozen=True)
class Start(Askable[int]):
    pass


@dataclass(frozen=True)
class Tick:
    reply_to: Ref[int]


@actor(initial=0)
async def ticker(ctx: Context[int, Start | Tick]) -> None:
    """The program of the schedules seed, unchanged."""
    async for msg in ctx.inbox:
        match msg:
            case Start(reply_to=reply_to):
                await ctx.schedule("tick", timedelta(milliseconds=10), None, Tick(reply_to))
            case Tick(reply_to):
                total = await ctx.state.update(lambda value: value + 1)
                reply_to.tell(total)


@dataclass(frozen=True)
class Every(Askable[None]):
    """Create (or replace) the schedule ``name``."""

    name: str
    delay: timedelta
    interval: timedelta | None


@dataclass(frozen=True)
class Beat:
    name: str


@dataclass(frozen=True)
class Count(Askable[int]):
    pass


@dataclass(frozen=True)
class StartTimer(Askable[None]):
    """Start a per-run ticker through ctx.merge (lives only as long as this run)."""

    every: timedelta


BeaterMessage = Every | Beat | Count | StartTimer


async def ticks(every: timedelta) -> AsyncIterator[Beat]:
    """An in-memory ticker: the 'grain timer' kind of periodic work."""
    while True:
        await asyncio.sleep(every.total_seconds())
        yield Beat("timer")


async def _beater(ctx: Context[int, BeaterMessage]) -> None:
    async for msg in ctx.inbox:
        match msg:
            case Every(name=name, delay=delay, interval=interval, reply_to=reply_to):
                await ctx.schedule(name, delay, interval, Beat(name))
                reply_to.tell(None)
            case Beat():
                await ctx.state.update(lambda n: n + 1)
            case Count(reply_to=reply_to):
                reply_to.tell(ctx.state.value)
            case StartTimer(every=every, reply_to=reply_to):
                ctx.merge(ticks(every))
                reply_to.tell(None)


@actor(initial=0)
async def beater(ctx: Context[int, BeaterMessage]) -> None:
    """Counts the Beats its schedules (and timers) deliver."""
    await _beater(ctx)


@actor(initial=0, durable="write")
async def durable_beater(ctx: Context[int, BeaterMessage]) -> None:
    """The same, with its pages written through to the node's disk."""
    await _beater(ctx)


# --- the daily report of the seed -----------------------------------------------------


@dataclass(frozen=True)
class ReportTick:
    pass


@dataclass(frozen=True)
class Arm(Askable[None]):
    """Schedule the report for every midnight (UTC, on the node's wall clock)."""


ReportMessage = ReportTick | Arm

REPORT_BUILD_SECONDS = 30.0
DAY = timedelta(days=1)


def _day_of(now_us: int) -> int:
    """Whole days since the epoch on the node's wall clock: the report's day number."""
    return now_us // (86_400 * SECOND_US)


def report_effect(key: str, day: int) -> str:
    """The effect key of the report of ``day`` for the actor key ``key``: ``report:save-first:2026-01-03``.

    The key names the action (this key's report of that date), not the attempt: a second
    row with it is the same report built again (``sim.checks.at_most_once`` counts it)."""
    date = datetime.fromtimestamp(day * 86_400, tz=timezone.utc).date().isoformat()
    return f"report:{key}:{date}"


async def _build_report(ctx: Context[int, ReportMessage], day: int) -> None:
    """The external effect: 30 s of work at a service outside the actor system, then it exists (``ctx.effect``)."""
    await asyncio.sleep(REPORT_BUILD_SECONDS)
    ctx.effect(report_effect(ctx.key, day), day=day)


def _first_due(last_done: int, today: int) -> int:
    """The first day still to report: the one after the checkpoint, or today for a new key."""
    return today if last_done < 0 else last_done + 1


async def _arm(ctx: Context[int, ReportMessage], msg: Arm) -> None:
    day_us = 86_400 * SECOND_US
    until_midnight = timedelta(microseconds=day_us - ctx.system.clock.now_us() % day_us)
    await ctx.schedule("daily", until_midnight, DAY, ReportTick())
    msg.reply_to.tell(None)


@actor(initial=-1, durable="write")
async def report_save_first(ctx: Context[int, ReportMessage]) -> None:
    """Daily report, checkpoint saved BEFORE building: a crash in between omits that day."""
    async for msg in ctx.inbox:
        match msg:
            case Arm():
                await _arm(ctx, msg)
            case ReportTick():
                today = _day_of(ctx.system.clock.now_us()) - 1  # the report covers the day that just ended
                for day in range(_first_due(ctx.state.value, today), today + 1):
                    await ctx.state.set(day)
                    await _build_report(ctx, day)


@actor(initial=-1, durable="write")
async def report_build_first(ctx: Context[int, ReportMessage]) -> None:
    """Daily report, checkpoint saved AFTER building: a crash in between repeats that day."""
    async for msg in ctx.inbox:
        match msg:
            case Arm():
                await _arm(ctx, msg)
            case ReportTick():
                today = _day_of(ctx.system.clock.now_us()) - 1
                for day in range(_first_due(ctx.state.value, today), today + 1):
                    await _build_report(ctx, day)
                    await ctx.state.set(day)


# ======================================================================= helpers =======


def _client(world: World, node: str, fn: Any, *args: Any, result: str | None = None) -> None:
    task = world.spawn(node, fn, *args)
    if result is not None:
        task.add_done_callback(lambda t: world.results.__setitem__(result, t.result() if not t.cancelled() and t.exception() is None else t.exception()))


def _fired(world: World, name: str | None = None, key: str | None = None) -> list[Any]:
    rows = world.trace.of("schedule.fired")
    return [r for r in rows if (name is None or r.get("name") == name) and (key is None or r.get("key") == key)]


def _expect(check: str, condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(check, message)


# ===================================================================== scenarios =======


def _ticker_prints_one(world: World) -> None:
    """The seed program answers 1: the scheduled Tick arrives and is counted once."""
    _expect("ticker_prints_one", world.results.get("answer") == 1, f"the ask answered {world.results.get('answer')!r}, not 1")
    _expect("ticker_prints_one", len(_fired(world, "tick")) == 1, f"{len(_fired(world, 'tick'))} firings of 'tick', not 1")


@scenario(
    "ticker",
    "the seed program inside the world: a one-shot schedule answers the ask with 1",
    until=timedelta(seconds=5),
    checks=(_ticker_prints_one, never_early, no_burst),
)
def ticker_scenario(world: World) -> None:
    world.add_node("n1")

    async def main(system: ActorSystem) -> int:
        ticks_ref = system.ref(ticker, "ticks")
        answer = await ticks_ref.ask(Start())
        world.note("n1", f"ask answered {answer}")
        return answer

    _client(world, "n1", main, result="answer")


def _on_grid_all_day(world: World) -> None:
    """96 quarter-hour firings in a day, each exactly at its due time, none caught up."""
    fired = _fired(world, "quarter")
    _expect("on_grid_all_day", len(fired) == 96, f"{len(fired)} firings, expected 96")
    late = [r for r in fired if r.get("now_us") != r.get("due_us")]
    _expect("on_grid_all_day", not late, f"{len(late)} firings off their due time")
    _expect("on_grid_all_day", not world.trace.of("schedule.caught_up"), "a catch-up happened on an undisturbed day")
    _expect("on_grid_all_day", world.results.get("count") == 96, f"the actor counted {world.results.get('count')}")


@scenario(
    "interval-day",
    "an interval schedule (every 15 min) over a simulated day: 96 deliveries, all on time",
    until=timedelta(days=1, minutes=1),
    checks=(_on_grid_all_day, never_early, no_burst, occurrences_accounted_for),
)
def interval_day(world: World) -> None:
    world.add_node("n1")

    async def main(system: ActorSystem) -> int:
        ref = system.ref(beater, "day")
        await ref.ask(Every("quarter", timedelta(minutes=15), timedelta(minutes=15)))
        await asyncio.sleep(86_400 + 30)
        return await ref.ask(Count())

    _client(world, "n1", main, result="count")


PAUSE_AT = 35.0
PAUSE_FOR = 62.0


def _one_delivery_after_pause(world: World) -> None:
    """Resumed at 97 s: the 40 s occurrence is delivered late, once; 50..90 s are skipped (5); then back on the grid."""
    caught = world.trace.of("schedule.caught_up")
    _expect("one_delivery_after_pause", len(caught) == 1, f"{len(caught)} catch-ups, expected 1")
    row = caught[0]
    resumed = world.trace.of("fault.resume")[0]
    _expect("one_delivery_after_pause", row.t_ns == resumed.t_ns, "the catch-up did not happen at the resume instant")
    _expect("one_delivery_after_pause", row.get("skipped") == 5, f"skipped {row.get('skipped')}, expected 5 (50..90 s passed while paused)")
    _expect("one_delivery_after_pause", row.get("next_us") - row.get("due_us") == 60 * SECOND_US, "the next due is not the first grid time after the resume (100 s)")
    at_resume = [r for r in _fired(world, "beat") if r.t_ns == resumed.t_ns]
    _expect("one_delivery_after_pause", len(at_resume) == 1, f"{len(at_resume)} deliveries at resume: a burst")


@scenario(
    "pause-catch-up",
    "a node paused across six 10 s due times resumes with one late delivery, not a burst: the skipped count is visible",
    until=timedelta(seconds=150),
    checks=(_one_delivery_after_pause, never_early, no_burst, occurrences_accounted_for),
)
def pause_catch_up(world: World) -> None:
    world.add_node("n1")

    async def main(system: ActorSystem) -> None:
        await system.ref(beater, "paused").ask(Every("beat", timedelta(seconds=10), timedelta(seconds=10)))

    _client(world, "n1", main)

    def faults(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(PAUSE_AT)
        world.pause("n1")
        yield world.timeout(PAUSE_FOR)
        world.resume("n1")

    world.process(faults(world))


def _steps_explained(world: World) -> None:
    """After the backward step nothing fires early; within a wall-clock re-check of the forward step one delivery skips the hidden due times."""
    steps = world.trace.of("clock.step")
    _expect("steps_explained", len(steps) == 2, "expected two clock steps")
    back, forward = steps
    after_back = [r for r in _fired(world, "minute") if back.t_ns < r.t_ns < forward.t_ns]
    gaps = [b.t_ns - a.t_ns for a, b in zip(after_back, after_back[1:], strict=False)]
    _expect("steps_explained", bool(after_back), "nothing fired between the steps")
    first_gap_s = (after_back[0].t_ns - back.t_ns) / 1e9
    _expect("steps_explained", first_gap_s > 60, f"the first firing after stepping back 90 s came {first_gap_s:.1f} s later: too early")
    _expect("steps_explained", all(g == 60 * 10**9 for g in gaps), "firings between the steps are not 60 s apart")
    caught = [r for r in world.trace.of("schedule.caught_up") if r.t_ns >= forward.t_ns]
    # stepped to wall 470 s at true 360 s: the due of 300 s fires at once (360 and 420 hidden), 480 s is still ahead
    _expect("steps_explained", len(caught) == 1 and caught[0].get("skipped") == 2, f"forward step: caught-up rows {[(r.t, r.get('skipped')) for r in caught]}, expected one skipping 2")
    late_s = (caught[0].t_ns - forward.t_ns) / 1e9
    _expect("steps_explained", late_s <= WALL_RECHECK, f"the forward step was noticed {late_s:.3f} s after it, more than a wall-clock re-check ({WALL_RECHECK:g} s)")


@scenario(
    "clock-step",
    "the wall clock stepped 90 s back then 200 s forward around minute schedule times: late, never early, no burst",
    until=timedelta(minutes=10),
    checks=(_steps_explained, never_early, no_burst, occurrences_accounted_for),
)
def clock_step(world: World) -> None:
    world.add_node("n1")

    async def main(system: ActorSystem) -> None:
        await system.ref(beater, "stepped").ask(Every("minute", timedelta(minutes=1), timedelta(minutes=1)))

    _client(world, "n1", main)

    def faults(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(150)
        world.step_clock("n1", timedelta(seconds=-90))
        yield world.timeout(210)
        world.step_clock("n1", timedelta(seconds=200))

    world.process(faults(world))


def _scheduled_key_stays(world: World) -> None:
    """The key with a 10-minute schedule never idles out in an hour; the plain key idles out after 1 minute."""
    ended = world.trace.of("activation.ended", reason="idle")
    scheduled = [r for r in ended if r.get("key") == "scheduled"]
    plain = [r for r in ended if r.get("key") == "plain"]
    _expect("scheduled_key_stays", not scheduled, f"the scheduled key idled out at t={scheduled[0].t if scheduled else 0:.1f}s")
    _expect("scheduled_key_stays", len(plain) == 1, "the plain key did not idle out")
    started = world.trace.of("activation.started", key="plain")[0]
    idle_s = (plain[0].t_ns - started.t_ns) / 1e9
    _expect("scheduled_key_stays", 60 <= idle_s <= 61, f"the plain key idled after {idle_s:.3f} s, not idle_after = 60 s")
    _expect("scheduled_key_stays", len(_fired(world, "slow")) == 6, f"{len(_fired(world, 'slow'))} firings of the 10-minute schedule in an hour")


@scenario(
    "no-idle-with-schedule",
    "a key whose next occurrence is 10 minutes away does not idle out (idle_after = 1 min); a key without schedules does",
    until=timedelta(hours=1, seconds=5),
    checks=(_scheduled_key_stays, never_early, no_burst),
)
def no_idle_with_schedule(world: World) -> None:
    world.add_node("n1")

    async def main(system: ActorSystem) -> None:
        await system.ref(beater, "scheduled").ask(Every("slow", timedelta(minutes=10), timedelta(minutes=10)))
        await system.ref(beater, "plain").ask(Count())

    _client(world, "n1", main)


def _stays_inactive(world: World) -> None:
    """Between the release and the next message the key is never started, although 9 due times pass; then one firing."""
    released = world.trace.of("activation.ended", reason="released")
    _expect("stays_inactive", len(released) == 1, "the key was not released")
    message_at = world.results["message_at_ns"]
    between = [r for r in world.trace.of("activation.started") if released[0].t_ns < r.t_ns < message_at]
    _expect("stays_inactive", not between, f"the clock started the key at t={between[0].t if between else 0:.1f}s")
    after = [r for r in _fired(world, "beat") if r.t_ns >= message_at]
    _expect("stays_inactive", bool(after) and after[0].t_ns == message_at, "the overdue occurrence did not fire at reactivation")
    at_once = [r for r in after if r.t_ns == message_at]
    _expect("stays_inactive", len(at_once) == 1, f"{len(at_once)} firings at reactivation, expected exactly one")
    caught = [r for r in world.trace.of("schedule.caught_up") if r.t_ns == message_at]
    _expect("stays_inactive", len(caught) == 1 and caught[0].get("skipped") == 8, "the catch-up did not skip the 8 other missed due times")


@scenario(
    "clock-does-not-activate",
    "a released key with an overdue schedule stays inactive until a message comes; then the missed time fires once",
    until=timedelta(seconds=150),
    checks=(_stays_inactive, never_early, no_burst),
)
def clock_does_not_activate(world: World) -> None:
    world.add_node("n1")

    async def main(system: ActorSystem) -> None:
        ref = system.ref(beater, "dormant")
        await ref.ask(Every("beat", timedelta(seconds=10), timedelta(seconds=10)))
        await system.release(beater, "dormant")
        world.note("n1", "released the key: nobody runs it now")
        await asyncio.sleep(95)
        world.results["message_at_ns"] = int(world.env.now)
        world.note("n1", "a message arrives")
        await ref.ask(Count())

    _client(world, "n1", main)


CRASH_AT = 125.0
DOWN_FOR = 300.0


def _resumed_after_restart(world: World) -> None:
    """After crash and restart the durable key comes back by itself, from the disk, and its schedule goes on."""
    restart = world.trace.of("fault.restart")[0]
    started = [r for r in world.trace.of("activation.started") if r.t_ns >= restart.t_ns]
    _expect("resumed_after_restart", bool(started) and started[0].get("recovered") is True, "the key did not come back from the disk")
    after = [r for r in _fired(world, "minute") if r.t_ns >= restart.t_ns]
    _expect("resumed_after_restart", len(after) >= 3, f"only {len(after)} firings after the restart")
    caught = [r for r in world.trace.of("schedule.caught_up") if r.t_ns >= restart.t_ns]
    _expect("resumed_after_restart", len(caught) == 1 and caught[0].get("skipped") == 4, "the downtime's missed due times were not skipped once")
    _expect("resumed_after_restart", world.results.get("count", 0) >= 7, f"count {world.results.get('count')} lost confirmed beats")


@scenario(
    "durable-restart",
    "crash and restart on a durable store: the key resumes with no message, its schedule skips the downtime once",
    until=timedelta(minutes=12),
    checks=(_resumed_after_restart, never_early, no_burst, occurrences_accounted_for),
)
def durable_restart(world: World) -> None:
    world.add_node("n1", store="sqlite")

    async def arm(system: ActorSystem) -> None:
        await system.ref(durable_beater, "ledger").ask(Every("minute", timedelta(minutes=1), timedelta(minutes=1)))

    _client(world, "n1", arm)

    def faults(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(CRASH_AT)
        world.crash("n1")
        yield world.timeout(DOWN_FOR)
        world.restart("n1")
        yield world.timeout(240)

        async def count(system: ActorSystem) -> int:
            return await system.ref(durable_beater, "ledger").ask(Count())

        _client(world, "n1", count, result="count")

    world.process(faults(world))


@dataclass(frozen=True)
class Sources(Askable[tuple[int, int]]):
    """How many Beats came from the per-run ticker and from the persisted schedule."""


@actor(initial=(0, 0), durable="write")
async def timed_beater(ctx: Context[tuple[int, int], Every | StartTimer | Beat | Sources]) -> None:
    """Counts Beats by where they came from: (merge ticker, persisted schedule)."""
    async for msg in ctx.inbox:
        match msg:
            case Every(name=name, delay=delay, interval=interval, reply_to=reply_to):
                await ctx.schedule(name, delay, interval, Beat(name))
                reply_to.tell(None)
            case StartTimer(every=every, reply_to=reply_to):
                ctx.merge(ticks(every))
                reply_to.tell(None)
            case Beat(name="timer"):
                await ctx.state.update(lambda c: (c[0] + 1, c[1]))
            case Beat():
                await ctx.state.update(lambda c: (c[0], c[1] + 1))
            case Sources(reply_to=reply_to):
                reply_to.tell(ctx.state.value)


def _timer_gone_schedule_stays(world: World) -> None:
    """Before the crash both the merge ticker and the schedule deliver; after the restart only the schedule does."""
    before, after = world.results.get("before"), world.results.get("after")
    _expect("timer_gone_schedule_stays", before is not None and after is not None, "the client did not read the counts")
    assert before is not None and after is not None
    _expect("timer_gone_schedule_stays", before[0] > 0 and before[1] > 0, f"before the crash (timer, schedule) = {before}")
    _expect("timer_gone_schedule_stays", after[0] == before[0], f"the per-run ticker delivered {after[0] - before[0]} beats after the restart")
    _expect("timer_gone_schedule_stays", after[1] > before[1], "the persisted schedule did not survive the restart")


@scenario(
    "timer-vs-schedule",
    "a ctx.merge ticker and a persisted schedule side by side: after crash + restart only the schedule ticks",
    until=timedelta(seconds=200),
    checks=(_timer_gone_schedule_stays, never_early, no_burst),
)
def timer_vs_schedule(world: World) -> None:
    world.add_node("n1", store="sqlite")

    async def arm(system: ActorSystem) -> tuple[int, int]:
        ref = system.ref(timed_beater, "both")
        await ref.ask(Every("schedule", timedelta(seconds=10), timedelta(seconds=10)))
        await ref.ask(StartTimer(timedelta(seconds=10)))
        await asyncio.sleep(64)  # just before the crash, between ticks: no tick races the read
        return await ref.ask(Sources())

    async def read(system: ActorSystem) -> tuple[int, int]:
        return await system.ref(timed_beater, "both").ask(Sources())

    _client(world, "n1", arm, result="before")

    def faults(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(65)
        world.crash("n1")
        yield world.timeout(20)
        world.restart("n1")
        yield world.timeout(100)
        _client(world, "n1", read, result="after")

    world.process(faults(world))


def _reports_explained(world: World) -> None:
    """Save-first omits the day it crashed on and never repeats one; build-first repeats it and never omits one; every other day is built exactly once.

    Counted on the effects ledger (each built report is a ``ctx.effect`` row keyed by
    ``report_effect``): the checks' messages name the report, its count and each build."""
    __tracebackhide__ = True
    days, crash_day = world.results["days"], world.results["crash_day"]
    others = [day for day in days if day != crash_day]
    exactly_once(world, "report:save-first", expected=[report_effect("save-first", day) for day in others])  # no repeat
    omitted = report_effect("save-first", crash_day)
    _expect("reports_explained", omitted not in effects(world, omitted), f"{omitted} was built although save-first crashed between its save and the build")
    at_least_once(world, "report:build-first", expected=[report_effect("build-first", day) for day in days])  # no omission
    for day in others:
        exactly_once(world, report_effect("build-first", day))
    repeated = report_effect("build-first", crash_day)
    count = len(effects(world, repeated).get(repeated, []))
    _expect("reports_explained", count == 2, f"{repeated} was built {'once' if count == 1 else f'{count} times'}, expected twice (build-first crashed between the build and its save)")


@scenario(
    "daily-report",
    "the seed's daily report with save-before and build-before checkpoints, each crashed mid-way: one day omitted, one repeated",
    until=timedelta(days=5, hours=1),
    checks=(_reports_explained, never_early, no_burst),
)
def daily_report(world: World) -> None:
    world.add_node("save", store="sqlite")
    world.add_node("build", store="sqlite")
    start = datetime.fromtimestamp(world.epoch_us / SECOND_US, tz=timezone.utc)
    first_midnight = (start + DAY).replace(hour=0, minute=0, second=0, microsecond=0) - start
    epoch_day = _day_of(world.epoch_us)
    world.results["days"] = [epoch_day + i for i in range(5)]
    crash_day_index = 2
    world.results["crash_day"] = epoch_day + crash_day_index

    async def arm(system: ActorSystem, actor_type: Any, key: str) -> None:
        await system.ref(actor_type, key).ask(Arm())

    _client(world, "save", arm, report_save_first, "save-first")
    _client(world, "build", arm, report_build_first, "build-first")

    midnight_of_crash_s = first_midnight.total_seconds() + crash_day_index * 86_400

    def faults(world: World) -> Generator[simpy.Event, Any, None]:
        # save-first: the day is saved at midnight, the 30 s build is under way at +10 s.
        yield world.timeout(midnight_of_crash_s + 10)
        world.crash("save")
        # build-first: the build finishes at +30 s; its checkpoint write is still on the disk.
        yield world.timeout(REPORT_BUILD_SECONDS - 10 + 0.0001)
        world.crash("build")
        yield world.timeout(600)
        world.restart("save")
        world.restart("build")

    world.process(faults(world))


__all__ = [name for name in dict(globals()) if not name.startswith("_")]
