"""Node schedules (seed: grain scheduling): every rule and error, on virtual time with a steppable wall clock."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from conftest import START_US, LoopClock, Recorder, run_virtual

from casty import (
    NOBODY,
    ActorSystem,
    Context,
    FireAll,
    InvalidCronExpression,
    Occurrence,
    InvalidIdentity,
    ScheduleReferenceInUse,
    ScheduleReferenceNotFound,
    ScheduleReferenceRequired,
    SchedulerNotStarted,
    ScheduleStateError,
    SchemaError,
    Unavailable,
    actor,
)
from casty.clock import to_datetime, to_us
from casty.cluster.claims import Claim, claim_key, schedule_fire
from casty.observer import (
    ActivationEnded,
    ActivationStarted,
    NodeScheduleCancelled,
    NodeScheduleCaughtUp,
    NodeScheduleClaimLost,
    NodeScheduleClaimSkipped,
    NodeScheduleClaimWon,
    NodeScheduleFired,
    NodeSchedulePaused,
    NodeScheduleRegistered,
    NodeScheduleResumed,
    NodeScheduleTickLost,
)
from casty._core.ref import EntityRef, ReplyRef
from casty._core.scheduler import MAX_COUNTED_SKIPS, NodeScheduleInfo, NodeScheduler

SECOND = 1_000_000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY = 24 * HOUR

# --- messages and actors -------------------------------------------------------------


@dataclass(frozen=True)
class Tick:
    label: str


@dataclass(frozen=True)
class Other:
    pass


HANDLED: defaultdict[str, list[tuple[str, int]]] = defaultdict(list)
"""key -> (label, node wall µs when the body took the message), for every body below."""


@pytest.fixture(autouse=True)
def _clear_handled() -> None:
    HANDLED.clear()


@actor
async def target(ctx: Context[None, Tick]) -> None:
    """Records every Tick with the node's wall time."""
    async for msg in ctx.inbox:
        HANDLED[ctx.key].append((msg.label, ctx.system.clock.now_us()))


@actor
async def slow(ctx: Context[None, Tick]) -> None:
    """Takes 25 s per Tick (longer than the intervals used with it)."""
    async for msg in ctx.inbox:
        HANDLED[ctx.key].append((msg.label, ctx.system.clock.now_us()))
        await asyncio.sleep(25)


@actor(mailbox=1)
async def narrow(ctx: Context[None, Tick]) -> None:
    """A slow body with a one-message mailbox that refuses when full."""
    async for msg in ctx.inbox:
        HANDLED[ctx.key].append((msg.label, ctx.system.clock.now_us()))
        await asyncio.sleep(100)


@actor(idle_after=timedelta(seconds=30))
async def idler(ctx: Context[None, Tick]) -> None:
    """Records Ticks; idles out after 30 s without a message."""
    async for msg in ctx.inbox:
        HANDLED[ctx.key].append((msg.label, ctx.system.clock.now_us()))


def started(system: ActorSystem, **options: Any) -> NodeScheduler:
    scheduler = NodeScheduler(system, **options)
    scheduler.start()
    return scheduler


def handled_at(key: str) -> list[int]:
    return [at for _, at in HANDLED[key]]


# --- errors ----------------------------------------------------------------------------


def test_not_started_scheduler_refuses_every_call() -> None:
    """Before start, after stop, and once the system stopped, every call raises SchedulerNotStarted."""

    async def main(clock: LoopClock) -> NodeScheduler:
        async with ActorSystem(clock=clock) as system:
            ref = system.ref(target, "k")
            scheduler = NodeScheduler(system)
            await check_refused(scheduler, ref)
            scheduler.start()
            await scheduler.schedule(Tick("x"), ref, timedelta(seconds=1), reference="r")
            scheduler.stop()
            await check_refused(scheduler, ref)
            scheduler.start()  # a started scheduler on a system that then stops
        await check_refused(scheduler, ref)
        return scheduler

    async def check_refused(scheduler: NodeScheduler, ref: EntityRef[Any]) -> None:
        calls: list[Any] = [
            lambda: scheduler.schedule_once(Tick("x"), ref, timedelta(seconds=1)),
            lambda: scheduler.schedule(Tick("x"), ref, timedelta(seconds=1)),
            lambda: scheduler.schedule_cron(Tick("x"), ref, "0 * * * * ?"),
        ]
        for call in calls:
            with pytest.raises(SchedulerNotStarted, match="not running"):
                await call()
        for sync in (scheduler.pause_schedule, scheduler.resume_schedule, scheduler.cancel_schedule):
            with pytest.raises(SchedulerNotStarted):
                sync("r")
        with pytest.raises(SchedulerNotStarted):
            scheduler.list_schedules()

    run_virtual(main)


def test_invalid_identity_is_rejected() -> None:
    """Not an entity ref, an empty or non-string key, a malformed or (locally) unknown type name: InvalidIdentity."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock) as system, ActorSystem(clock=clock) as other:
            scheduler = started(system)
            bad: list[Any] = [
                NOBODY,
                ReplyRef(system, "local", 1),
                target,  # an actor type, not a ref
                "tests.test_scheduler:target",
                EntityRef(system, target.name, ""),
                EntityRef(system, target.name, 7),  # type: ignore[arg-type]
                EntityRef(system, "no-colon", "k"),
                EntityRef(system, f"{__name__}:ghost", "k"),  # well-formed, but no such @actor here
                EntityRef(other, target.name, "k"),  # bound to another system
            ]
            for ref in bad:
                with pytest.raises(InvalidIdentity) as caught:
                    await scheduler.schedule(Tick("x"), ref, timedelta(seconds=1))
                assert str(caught.value)
                with pytest.raises(InvalidIdentity):
                    await scheduler.schedule_once(Tick("x"), ref, timedelta(seconds=1))
                with pytest.raises(InvalidIdentity):
                    await scheduler.schedule_cron(Tick("x"), ref, "0 * * * * ?")
            with pytest.raises(InvalidIdentity, match="system.ref"):
                await scheduler.schedule(Tick("x"), target, timedelta(seconds=1))  # type: ignore[arg-type]
            with pytest.raises(InvalidIdentity, match="must not be empty"):
                await scheduler.schedule(Tick("x"), EntityRef(system, target.name, ""), timedelta(seconds=1))
            assert scheduler.list_schedules() == []

    run_virtual(main)


def test_message_and_durations_are_checked_at_registration() -> None:
    """A message the target type refuses is a SchemaError; a negative delay or non-positive interval a ValueError."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock) as system:
            scheduler = started(system)
            ref = system.ref(target, "k")
            with pytest.raises(SchemaError):
                await scheduler.schedule(Other(), ref, timedelta(seconds=1))
            with pytest.raises(ValueError, match="negative"):
                await scheduler.schedule_once(Tick("x"), ref, timedelta(seconds=-1))
            for interval in (timedelta(0), timedelta(seconds=-5)):
                with pytest.raises(ValueError, match="positive"):
                    await scheduler.schedule(Tick("x"), ref, interval)
            with pytest.raises(TypeError, match="timedelta"):
                await scheduler.schedule(Tick("x"), ref, 5)  # type: ignore[arg-type]
            with pytest.raises(ValueError, match="non-empty string"):
                await scheduler.schedule(Tick("x"), ref, timedelta(seconds=1), reference="")
            assert scheduler.list_schedules() == []

    run_virtual(main)


def test_cron_without_reference_in_cluster_mode_is_rejected() -> None:
    """In cluster mode a cron needs a reference (ScheduleReferenceRequired); interval and once do not."""

    async def main(clock: LoopClock) -> list[str]:
        async with ActorSystem(clock=clock) as system:
            scheduler = started(system, cluster_mode=True)
            ref = system.ref(target, "k")
            with pytest.raises(ScheduleReferenceRequired, match="reference"):
                await scheduler.schedule_cron(Tick("x"), ref, "0 * * * * ?")
            await scheduler.schedule_cron(Tick("x"), ref, "0 * * * * ?", reference="cron")
            await scheduler.schedule(Tick("x"), ref, timedelta(minutes=1))
            await scheduler.schedule_once(Tick("x"), ref, timedelta(minutes=1))
            return [info.kind for info in scheduler.list_schedules()]

    assert run_virtual(main) == ["cron", "interval", "once"]


def test_cron_without_reference_is_fine_locally() -> None:
    """Outside cluster mode a cron without a reference gets a generated one."""

    async def main(clock: LoopClock) -> str:
        async with ActorSystem(clock=clock) as system:
            scheduler = started(system)
            return await scheduler.schedule_cron(Tick("x"), system.ref(target, "k"), "0 * * * * ?")

    assert uuid.UUID(run_virtual(main)).version == 4


def test_unknown_reference_is_not_found() -> None:
    """Pause, resume and cancel of an unknown or cancelled reference raise ScheduleReferenceNotFound."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock) as system:
            scheduler = started(system)
            for call in (scheduler.pause_schedule, scheduler.resume_schedule, scheduler.cancel_schedule):
                with pytest.raises(ScheduleReferenceNotFound, match="'nope'"):
                    call("nope")
            await scheduler.schedule(Tick("x"), system.ref(target, "k"), timedelta(seconds=1), reference="r")
            scheduler.cancel_schedule("r")
            for call in (scheduler.pause_schedule, scheduler.resume_schedule, scheduler.cancel_schedule):
                with pytest.raises(ScheduleReferenceNotFound):
                    call("r")

    run_virtual(main)


def test_live_reference_is_in_use() -> None:
    """Registering under a live reference (any kind, even paused) fails and leaves the first; after cancel it is free."""

    async def main(clock: LoopClock) -> list[str]:
        async with ActorSystem(clock=clock) as system:
            scheduler = started(system)
            ref = system.ref(target, "k")
            await scheduler.schedule(Tick("first"), ref, timedelta(seconds=10), reference="r")
            with pytest.raises(ScheduleReferenceInUse, match="'r'"):
                await scheduler.schedule_once(Tick("second"), ref, timedelta(seconds=1), reference="r")
            with pytest.raises(ScheduleReferenceInUse):
                await scheduler.schedule_cron(Tick("second"), ref, "* * * * * ?", reference="r")
            scheduler.pause_schedule("r")
            with pytest.raises(ScheduleReferenceInUse):
                await scheduler.schedule(Tick("second"), ref, timedelta(seconds=1), reference="r")
            scheduler.resume_schedule("r")
            await asyncio.sleep(25)
            scheduler.cancel_schedule("r")
            await scheduler.schedule_once(Tick("third"), ref, timedelta(seconds=1), reference="r")
            await asyncio.sleep(2)
            return [label for label, _ in HANDLED["k"]]

    assert run_virtual(main) == ["first", "first", "third"]


def test_invalid_cron_expression_is_rejected() -> None:
    """A bad cron raises InvalidCronExpression naming the field; so do a non-string and one with no fire time left."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock) as system:
            scheduler = started(system)
            ref = system.ref(target, "k")
            with pytest.raises(InvalidCronExpression) as caught:
                await scheduler.schedule_cron(Tick("x"), ref, "0 70 * * * ?", reference="c")
            assert caught.value.field == "minute"
            with pytest.raises(InvalidCronExpression):
                await scheduler.schedule_cron(Tick("x"), ref, "0 0 9 * * MON")  # both day fields given
            with pytest.raises(InvalidCronExpression, match="string"):
                await scheduler.schedule_cron(Tick("x"), ref, 5)  # type: ignore[arg-type]
            with pytest.raises(InvalidCronExpression, match="no fire time"):
                await scheduler.schedule_cron(Tick("x"), ref, "0 0 0 1 1 ? 2020")
            assert scheduler.list_schedules() == []

    run_virtual(main)


def test_pausing_paused_or_resuming_active_is_a_state_error() -> None:
    """Pause twice or resume an active schedule: ScheduleStateError, and the schedule is unchanged."""

    async def main(clock: LoopClock) -> list[bool]:
        async with ActorSystem(clock=clock) as system:
            scheduler = started(system)
            await scheduler.schedule(Tick("x"), system.ref(target, "k"), timedelta(seconds=10), reference="r")
            with pytest.raises(ScheduleStateError, match="not paused"):
                scheduler.resume_schedule("r")
            scheduler.pause_schedule("r")
            with pytest.raises(ScheduleStateError, match="already paused"):
                scheduler.pause_schedule("r")
            paused = scheduler.list_schedules()[0].paused
            scheduler.resume_schedule("r")
            return [paused, scheduler.list_schedules()[0].paused]

    assert run_virtual(main) == [True, False]


# --- firing ----------------------------------------------------------------------------


def test_once_fires_once_then_reference_not_found(recorder: Recorder) -> None:
    """A one-shot delivers once at its due time, activating the key; then it is gone and its reference unknown."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            scheduler = started(system)
            ref: EntityRef[Tick] = EntityRef(system, target.name, "once")  # not activated yet: the tick activates it
            await scheduler.schedule_once(Tick("hello"), ref, timedelta(minutes=10), reference="r")
            await asyncio.sleep(3600)
            assert scheduler.list_schedules() == []
            for call in (scheduler.pause_schedule, scheduler.resume_schedule, scheduler.cancel_schedule):
                with pytest.raises(ScheduleReferenceNotFound, match="one-shot"):
                    call("r")

    run_virtual(main)
    assert HANDLED["once"] == [("hello", START_US + 10 * MINUTE)]
    (fired,) = recorder.of(NodeScheduleFired)
    assert (fired.reference, fired.actor, fired.key, fired.schedule_kind) == ("r", target.name, "once", "once")
    assert (fired.tick_us, fired.now_us, fired.next_us) == (START_US + 10 * MINUTE, START_US + 10 * MINUTE, None)
    (gone,) = recorder.of(NodeScheduleCancelled)
    assert (gone.reference, gone.reason) == ("r", "done")
    assert [e.key for e in recorder.of(ActivationStarted)] == ["once"]


def test_interval_fires_on_a_fixed_grid_over_an_hour(recorder: Recorder) -> None:
    """Every 5 minutes for an hour: 12 ticks, each exactly on registration + n * 5 min of the wall clock."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            scheduler = started(system)
            await asyncio.sleep(7.25)  # register off any round time: the grid follows the registration
            await scheduler.schedule(Tick("t"), system.ref(target, "grid"), timedelta(minutes=5), reference="r")
            await asyncio.sleep(3600 + 1)

    run_virtual(main)
    origin = START_US + 7_250_000
    grid = [origin + n * 5 * MINUTE for n in range(1, 13)]
    assert handled_at("grid") == grid
    fired = recorder.of(NodeScheduleFired)
    assert [(f.tick_us, f.now_us, f.next_us) for f in fired] == [(t, t, t + 5 * MINUTE) for t in grid]
    (registered,) = recorder.of(NodeScheduleRegistered)
    assert (registered.schedule_kind, registered.due_us, registered.every_us, registered.expression) == (
        "interval",
        origin + 5 * MINUTE,
        5 * MINUTE,
        None,
    )
    assert recorder.of(NodeScheduleCaughtUp) == []


def test_cron_fires_at_quarter_hours_of_the_wall_clock(recorder: Recorder) -> None:
    """`0 */15 * * * ?` registered at 00:07 fires at 00:15, 00:30, 00:45 and 01:00 of the node's wall clock."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            scheduler = started(system)
            await asyncio.sleep(7 * 60)
            await scheduler.schedule_cron(Tick("q"), system.ref(target, "quarter"), "0 */15 * * * ?", reference="q")
            await asyncio.sleep(3600)

    run_virtual(main)
    assert [to_datetime(at).strftime("%H:%M:%S") for at in handled_at("quarter")] == [
        "00:15:00",
        "00:30:00",
        "00:45:00",
        "01:00:00",
    ]
    assert all(f.now_us == f.tick_us for f in recorder.of(NodeScheduleFired))


def test_cron_on_weekday_mornings_fires_five_times_in_a_week() -> None:
    """`0 0 9 ? * MON-FRI` over the week from Thursday 2026-01-01 fires 5 times, at 09:00 on weekdays only."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock) as system:
            scheduler = started(system)
            await scheduler.schedule_cron(Tick("w"), system.ref(target, "week"), "0 0 9 ? * MON-FRI")
            await asyncio.sleep(7 * 86400)

    run_virtual(main)
    fired = [to_datetime(at) for at in handled_at("week")]
    assert [d.strftime("%a %d %H:%M") for d in fired] == [
        "Thu 01 09:00",
        "Fri 02 09:00",
        "Mon 05 09:00",
        "Tue 06 09:00",
        "Wed 07 09:00",
    ]


def test_cron_reads_the_scheduler_zone_and_utc_in_cluster_mode() -> None:
    """`0 0 9 * * ?` fires at 09:00 of the scheduler's zone (03:30Z at +05:30); in cluster mode at 09:00Z."""

    async def main(clock: LoopClock) -> None:
        zone = timezone(timedelta(hours=5, minutes=30))
        async with ActorSystem(clock=clock) as system:
            local = started(system, tz=zone)
            cluster = started(system, tz=zone, cluster_mode=True)
            await local.schedule_cron(Tick("local"), system.ref(target, "zone"), "0 0 9 * * ?")
            await cluster.schedule_cron(Tick("utc"), system.ref(target, "zone"), "0 0 9 * * ?", reference="c")
            await asyncio.sleep(86400)

    run_virtual(main)
    assert [(label, to_datetime(at).strftime("%H:%M")) for label, at in HANDLED["zone"]] == [
        ("local", "03:30"),
        ("utc", "09:00"),
    ]


def test_slow_handler_ticks_queue_in_its_mailbox(recorder: Recorder) -> None:
    """Ticks every 10 s to a 25 s handler keep their cadence and queue up; none is dropped, all are handled."""

    async def main(clock: LoopClock) -> list[int]:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            scheduler = started(system)
            await scheduler.schedule(Tick("s"), system.ref(slow, "slow"), timedelta(seconds=10), reference="r")
            queued = []
            for _ in range(4):
                await asyncio.sleep(25.5)
                queued.append(system.stats()["queued"])
            scheduler.cancel_schedule("r")  # at 102 s: ticks 10..100 were told
            await asyncio.sleep(600)
            return queued

    queued = run_virtual(main)
    assert queued == [1, 3, 4, 6]  # sampled at 25.5, 51, 76.5 and 102 s: the backlog grows by design
    fired = recorder.of(NodeScheduleFired)
    assert [f.tick_us for f in fired] == [START_US + n * 10 * SECOND for n in range(1, 11)]
    assert all(f.now_us == f.tick_us for f in fired)  # the scheduler never waited for the handler
    assert recorder.of(NodeScheduleTickLost) == []
    assert len(HANDLED["slow"]) == 10  # every queued tick was handled, 25 s apart
    assert handled_at("slow") == [START_US + 10 * SECOND + n * 25 * SECOND for n in range(10)]


def test_pause_then_resume_recalculates_from_now_without_catch_up(recorder: Recorder) -> None:
    """Paused for 70 min, a 10-min schedule fires nothing; resumed, it fires 10 min later, with no burst."""

    async def main(clock: LoopClock) -> list[NodeScheduleInfo]:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            scheduler = started(system)
            ref = system.ref(target, "pause")
            await scheduler.schedule(Tick("i"), ref, timedelta(minutes=10), reference="r")
            await scheduler.schedule_once(Tick("o"), ref, timedelta(minutes=10), reference="o")
            await asyncio.sleep(25 * 60)  # "i" fired at 10 and 20 min, "o" at 10 min
            scheduler.pause_schedule("r")
            paused = scheduler.list_schedules()
            await asyncio.sleep(70 * 60)  # 7 ticks of the old grid pass
            scheduler.resume_schedule("r")  # at 95 min
            await asyncio.sleep(21 * 60)
            return paused

    paused = run_virtual(main)
    assert [(p.reference, p.paused, p.next_due) for p in paused] == [("r", True, None)]
    ticks = [at for label, at in HANDLED["pause"] if label == "i"]
    assert ticks == [START_US + m * MINUTE for m in (10, 20, 105, 115)]
    (resumed,) = recorder.of(NodeScheduleResumed)
    assert resumed.due_us == START_US + 105 * MINUTE
    assert len(recorder.of(NodeSchedulePaused)) == 1
    assert recorder.of(NodeScheduleCaughtUp) == []


def test_paused_one_shot_resumes_with_its_delay_from_now() -> None:
    """A one-shot paused before its time fires its full delay after the resume, never in between."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock) as system:
            scheduler = started(system)
            await scheduler.schedule_once(Tick("o"), system.ref(target, "o"), timedelta(minutes=10), reference="o")
            await asyncio.sleep(5 * 60)
            scheduler.pause_schedule("o")
            await asyncio.sleep(55 * 60)
            assert HANDLED["o"] == []
            scheduler.resume_schedule("o")  # at 60 min
            await asyncio.sleep(3600)

    run_virtual(main)
    assert handled_at("o") == [START_US + 70 * MINUTE]


def test_cancel_stops_future_ticks_but_does_not_recall_told_ones(recorder: Recorder) -> None:
    """After cancel no tick fires; ticks already queued in the slow handler's mailbox are still handled."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            scheduler = started(system)
            await scheduler.schedule(Tick("c"), system.ref(slow, "cancel"), timedelta(seconds=10), reference="r")
            await asyncio.sleep(31)  # told at 10, 20, 30; the body is still on the first
            scheduler.cancel_schedule("r")
            assert scheduler.list_schedules() == []
            await asyncio.sleep(600)

    run_virtual(main)
    assert len(recorder.of(NodeScheduleFired)) == 3
    assert len(HANDLED["cancel"]) == 3
    (cancelled,) = recorder.of(NodeScheduleCancelled)
    assert (cancelled.reference, cancelled.reason) == ("r", "cancelled")


def test_tick_to_unknown_type_is_lost_with_a_reason_and_interval_keeps_firing(recorder: Recorder) -> None:
    """In cluster mode an unknown type is accepted; each tick is lost with the reason, and the schedule stays."""

    async def main(clock: LoopClock) -> list[NodeScheduleInfo]:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            scheduler = started(system, cluster_mode=True)
            ghost: EntityRef[Tick] = EntityRef(system, f"{__name__}:ghost", "k")
            await scheduler.schedule(Tick("g"), ghost, timedelta(seconds=10), reference="ghost")
            await scheduler.schedule(Tick("ok"), system.ref(target, "alive"), timedelta(seconds=10), reference="ok")
            await asyncio.sleep(35)
            return scheduler.list_schedules()

    listed = run_virtual(main)
    lost = recorder.of(NodeScheduleTickLost)
    assert [(e.reference, e.actor, e.key, e.tick_us) for e in lost] == [
        ("ghost", f"{__name__}:ghost", "k", START_US + n * 10 * SECOND) for n in (1, 2, 3)
    ]
    assert all(e.reason.startswith("UnknownActor:") and "ghost" in e.reason for e in lost)
    assert all(e.next_us == e.tick_us + 10 * SECOND for e in lost)
    assert [f.reference for f in recorder.of(NodeScheduleFired)] == ["ok"] * 3
    assert [info.reference for info in listed] == ["ghost", "ok"]
    assert len(HANDLED["alive"]) == 3


def test_one_shot_whose_delivery_fails_is_gone(recorder: Recorder) -> None:
    """A one-shot refused by a full mailbox is lost with the reason and removed: no retry, reference unknown."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            scheduler = started(system)
            ref = system.ref(narrow, "full")
            ref.tell(Tick("busy"))
            await asyncio.sleep(1)  # the body holds "busy" for 100 s
            ref.tell(Tick("queued"))  # the one-message mailbox is now full
            await scheduler.schedule_once(Tick("late"), ref, timedelta(seconds=5), reference="r")
            await asyncio.sleep(500)
            assert scheduler.list_schedules() == []
            with pytest.raises(ScheduleReferenceNotFound):
                scheduler.cancel_schedule("r")

    run_virtual(main)
    (lost,) = recorder.of(NodeScheduleTickLost)
    assert lost.reference == "r" and lost.next_us is None and lost.reason.startswith("MailboxFull:")
    assert recorder.of(NodeScheduleFired) == []
    assert [(c.reference, c.reason) for c in recorder.of(NodeScheduleCancelled)] == [("r", "done")]
    assert [label for label, _ in HANDLED["full"]] == ["busy", "queued"]


def test_generated_references_are_deterministic_and_unique(monkeypatch: pytest.MonkeyPatch) -> None:
    """References drawn from the system's seeded random stream repeat across runs, differ within one; no uuid4."""

    def no_uuid4() -> uuid.UUID:
        raise AssertionError("uuid4 reads the OS's randomness")

    monkeypatch.setattr(uuid, "uuid4", no_uuid4)

    def run(seed: int) -> list[str]:
        async def main(clock: LoopClock) -> list[str]:
            async with ActorSystem(clock=clock, rng=random.Random(seed)) as system:
                scheduler = started(system)
                ref = system.ref(target, "k")
                refs = [await scheduler.schedule(Tick("x"), ref, timedelta(seconds=n + 1)) for n in range(5)]
                refs.append(await scheduler.schedule_once(Tick("x"), ref, timedelta(seconds=1)))
                refs.append(await scheduler.schedule_cron(Tick("x"), ref, "0 * * * * ?"))
                assert [info.reference for info in scheduler.list_schedules()] == refs
                return refs

        return run_virtual(main)

    first, again, other = run(7), run(7), run(8)
    assert first == again
    assert len(set(first)) == len(first) == 7
    assert not set(first) & set(other)
    assert all(uuid.UUID(r).version == 4 for r in first)


def test_list_schedules_reports_every_field_in_registration_order() -> None:
    """list_schedules: reference, target, kind, next due (UTC, None when paused), paused, interval, expression."""

    async def main(clock: LoopClock) -> tuple[list[NodeScheduleInfo], list[NodeScheduleInfo]]:
        async with ActorSystem(clock=clock) as system:
            scheduler = started(system)
            await scheduler.schedule_once(Tick("x"), system.ref(target, "a"), timedelta(minutes=5), reference="once")
            await scheduler.schedule(Tick("x"), system.ref(slow, "b"), timedelta(hours=1), reference="every")
            await scheduler.schedule_cron(Tick("x"), system.ref(target, "c"), "0 0 9 * * ?", reference="cron")
            scheduler.pause_schedule("every")
            before = scheduler.list_schedules()
            await asyncio.sleep(6 * 60)
            return before, scheduler.list_schedules()

    before, after = run_virtual(main)
    start = to_datetime(START_US)
    assert before == [
        NodeScheduleInfo("once", target.name, "a", "once", start + timedelta(minutes=5), False, None, None),
        NodeScheduleInfo("every", slow.name, "b", "interval", None, True, timedelta(hours=1), None),
        NodeScheduleInfo("cron", target.name, "c", "cron", start + timedelta(hours=9), False, None, "0 0 9 * * ?"),
    ]
    assert before[2].target == (target.name, "c")
    next_due = before[0].next_due
    assert isinstance(next_due, datetime) and next_due.utcoffset() == timedelta(0)
    assert [info.reference for info in after] == ["every", "cron"]  # the one-shot fired


def test_clock_stepped_back_does_not_fire_early(recorder: Recorder) -> None:
    """The wall clock stepped back 30 s: the timer re-arms and the tick fires when the wall clock reaches it."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            scheduler = started(system)
            await scheduler.schedule_once(Tick("b"), system.ref(target, "back"), timedelta(seconds=10))
            await asyncio.sleep(5)
            clock.step(timedelta(seconds=-30))  # the due time is now 35 s away on the wall clock
            await asyncio.sleep(20)
            assert HANDLED["back"] == []  # the loop timer went off at +10 s and re-armed
            await asyncio.sleep(20)

    run_virtual(main)
    (fired,) = recorder.of(NodeScheduleFired)
    assert fired.now_us == fired.tick_us == START_US + 10 * SECOND
    assert handled_at("back") == [START_US + 10 * SECOND]


def test_clock_stepped_forward_skips_missed_ticks_and_counts_them(recorder: Recorder) -> None:
    """Stepped 55 s ahead, a 10 s interval delivers once at the next wall-clock re-check and reports 4 skipped; back on its grid after."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            scheduler = started(system)
            await scheduler.schedule(Tick("f"), system.ref(target, "fwd"), timedelta(seconds=10), reference="r")
            await asyncio.sleep(10.5)
            clock.step(timedelta(seconds=55))  # wall +65.5 s; the re-check at loop 11 s (wall +66 s) re-arms the timer for +20 s
            await asyncio.sleep(20)

    run_virtual(main)
    (caught,) = recorder.of(NodeScheduleCaughtUp)
    assert (caught.reference, caught.tick_us, caught.now_us) == ("r", START_US + 20 * SECOND, START_US + 66 * SECOND)
    assert (caught.skipped, caught.next_us) == (4, START_US + 70 * SECOND)  # 30..60 passed unseen
    assert [f.tick_us for f in recorder.of(NodeScheduleFired)] == [START_US + s * SECOND for s in (10, 20, 70, 80)]
    assert handled_at("fwd") == [START_US + s * SECOND for s in (10, 66, 70, 80)]  # one delivery for the lot


def test_clock_stepped_forward_skips_cron_occurrences_and_counts_them(recorder: Recorder) -> None:
    """A per-minute cron whose wall clock jumps 10 min (at 00:00:30) fires once for 00:01 at the next re-check (00:10:31) and skips 00:02..00:10."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            scheduler = started(system)
            await scheduler.schedule_cron(Tick("c"), system.ref(target, "cron-fwd"), "0 * * * * ?", reference="c")
            await asyncio.sleep(30)
            clock.step(timedelta(minutes=10))  # wall 00:10:30; the re-check 1 s later re-arms the timer for 00:01
            await asyncio.sleep(100)

    run_virtual(main)
    (caught,) = recorder.of(NodeScheduleCaughtUp)
    assert (caught.tick_us, caught.now_us) == (START_US + 1 * MINUTE, START_US + 10 * MINUTE + 31 * SECOND)
    assert (caught.skipped, caught.next_us) == (9, START_US + 11 * MINUTE)
    assert [to_datetime(at).strftime("%M:%S") for at in handled_at("cron-fwd")] == ["10:31", "11:00", "12:00"]


# --- delivery and the key's lifecycle --------------------------------------------------


def test_delivery_keeps_key_alive_and_reactivates_an_idled_key(recorder: Recorder) -> None:
    """Ticks more often than idle_after keep the key active; rarer ticks reactivate it after each idle-out."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            scheduler = started(system)
            await scheduler.schedule(Tick("often"), EntityRef(system, idler.name, "often"), timedelta(seconds=20))
            await scheduler.schedule(Tick("rare"), EntityRef(system, idler.name, "rare"), timedelta(seconds=60))
            await asyncio.sleep(330 + 1)  # the last "rare" tick at 300 s idles out at 330 s

    run_virtual(main)
    started_keys = [e.key for e in recorder.of(ActivationStarted)]
    idled_keys = [e.key for e in recorder.of(ActivationEnded) if e.reason == "idle"]
    assert len(HANDLED["often"]) == 16 and started_keys.count("often") == 1 and "often" not in idled_keys
    assert len(HANDLED["rare"]) == 5 and started_keys.count("rare") == 5 and idled_keys.count("rare") == 5


def test_stop_drops_every_schedule(recorder: Recorder) -> None:
    """stop() removes every schedule (reason "stopped"): nothing fires after, and start() begins empty."""

    async def main(clock: LoopClock) -> list[NodeScheduleInfo]:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            scheduler = started(system)
            await scheduler.schedule(Tick("x"), system.ref(target, "stop"), timedelta(seconds=10), reference="a")
            await scheduler.schedule_once(Tick("x"), system.ref(target, "stop"), timedelta(seconds=10), reference="b")
            await asyncio.sleep(5)
            scheduler.stop()
            scheduler.stop()  # idempotent
            await asyncio.sleep(60)
            scheduler.start()
            return scheduler.list_schedules()

    assert run_virtual(main) == []
    assert HANDLED["stop"] == []
    assert [(c.reference, c.reason) for c in recorder.of(NodeScheduleCancelled)] == [("a", "stopped"), ("b", "stopped")]


def test_cron_skip_count_is_capped_after_a_huge_step(recorder: Recorder) -> None:
    """A per-second cron stepped a day ahead counts at most MAX_COUNTED_SKIPS and lands on the next second."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            scheduler = started(system)
            await scheduler.schedule_cron(Tick("s"), system.ref(target, "cap"), "* * * * * ?", reference="s")
            await asyncio.sleep(0.5)
            clock.step(timedelta(days=1))  # the timer for 00:00:01 runs at wall 1 day + 1 s
            await asyncio.sleep(1)

    run_virtual(main)
    (caught,) = recorder.of(NodeScheduleCaughtUp)
    assert caught.skipped == MAX_COUNTED_SKIPS
    assert (caught.tick_us, caught.now_us) == (START_US + SECOND, START_US + DAY + SECOND)
    assert caught.next_us == START_US + DAY + 2 * SECOND



def test_actor_system_offers_node_schedules_and_drops_them_on_stop() -> None:
    """ActorSystem.schedule/list_schedules/cancel_schedule delegate to its node scheduler; a stopped system has none."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock) as system:
            ref = system.ref(target, "via-system")
            reference = await system.schedule(Tick("t"), ref, timedelta(seconds=10), reference="tick")
            assert reference == "tick"
            assert [info.reference for info in system.list_schedules()] == ["tick"]
            await asyncio.sleep(35)
            system.cancel_schedule("tick")
            assert system.list_schedules() == []
            await system.schedule_once(Tick("later"), ref, timedelta(seconds=100), reference="later")
        assert not system.scheduler.started
        with pytest.raises(SchedulerNotStarted):
            system.list_schedules()
        with pytest.raises(SchedulerNotStarted):
            await system.schedule_once(Tick("x"), ref, timedelta(seconds=1))

    run_virtual(main)
    assert [label for label, _ in HANDLED["via-system"]] == ["t", "t", "t"]


# --- cluster mode: a claim per cron tick ------------------------------------------------


def test_cluster_cron_claims_each_tick_and_tells_only_when_won(recorder: Recorder) -> None:
    """Cluster mode, every minute: each tick is claimed under schedule-fire::<reference>@<tick>, won, then told once."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            scheduler = started(system, cluster_mode=True)
            await scheduler.schedule_cron(Tick("c"), system.ref(target, "claimed"), "0 * * * * ?", reference="every-minute")
            await asyncio.sleep(3 * 60 + 1)

    run_virtual(main)
    ticks = [START_US + n * MINUTE for n in (1, 2, 3)]
    won = recorder.of(NodeScheduleClaimWon)
    assert [(w.tick_us, w.claim, w.ttl_us) for w in won] == [(t, claim_key("every-minute", t), MINUTE) for t in ticks]
    assert [f.tick_us for f in recorder.of(NodeScheduleFired)] == ticks
    assert [label for label, _ in HANDLED["claimed"]] == ["c", "c", "c"]
    assert recorder.of(NodeScheduleClaimLost) == [] and recorder.of(NodeScheduleClaimSkipped) == []
    kinds = [type(e) for e in recorder.events if isinstance(e, (NodeScheduleClaimWon, NodeScheduleFired))]
    assert kinds == [NodeScheduleClaimWon, NodeScheduleFired] * 3  # the claim is confirmed before the tell


def test_cluster_cron_tick_claimed_by_another_node_is_not_told(recorder: Recorder) -> None:
    """A tick whose claim key already names another node is lost here (claim_lost naming it) and not told; the next tick is won."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            first = START_US + MINUTE
            taken = await system.ref(schedule_fire, claim_key("r", first)).ask(Claim("elsewhere", first, MINUTE))
            assert taken == "elsewhere"
            scheduler = started(system, cluster_mode=True)
            await scheduler.schedule_cron(Tick("c"), system.ref(target, "contested"), "0 * * * * ?", reference="r")
            await asyncio.sleep(2 * 60 + 1)

    run_virtual(main)
    (lost,) = recorder.of(NodeScheduleClaimLost)
    assert (lost.tick_us, lost.winner, lost.claim) == (START_US + MINUTE, "elsewhere", claim_key("r", START_US + MINUTE))
    assert [w.tick_us for w in recorder.of(NodeScheduleClaimWon)] == [START_US + 2 * MINUTE]
    assert handled_at("contested") == [START_US + 2 * MINUTE]


def test_cluster_cron_tick_older_than_its_ttl_is_skipped_without_a_claim(recorder: Recorder) -> None:
    """The wall clock jumps 5 min ahead before a minute tick fires: that tick is older than its 1 min TTL, skipped with the reason, never claimed; the next tick is claimed and told."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            scheduler = started(system, cluster_mode=True)
            await scheduler.schedule_cron(Tick("c"), system.ref(target, "late"), "0 * * * * ?", reference="r")
            await asyncio.sleep(30)
            clock.step(timedelta(minutes=5))  # wall 05:30 while the 01:00 tick is still armed; the re-check fires it at 05:31
            await asyncio.sleep(31 + 60)

    run_virtual(main)
    (skipped,) = recorder.of(NodeScheduleClaimSkipped)
    assert skipped.tick_us == START_US + MINUTE
    assert skipped.now_us == START_US + 5 * MINUTE + 31 * SECOND
    assert skipped.reason == "the tick is 271 s old, older than its claim TTL of 60 s"
    assert not any(e.key == claim_key("r", START_US + MINUTE) for e in recorder.of(ActivationStarted))  # never asked
    won = recorder.of(NodeScheduleClaimWon)
    assert [w.tick_us for w in won] == [START_US + 6 * MINUTE, START_US + 7 * MINUTE]  # 02:00 .. 05:00 caught up (skipped)
    assert handled_at("late") == [START_US + 6 * MINUTE, START_US + 7 * MINUTE]


def test_cluster_cron_ttl_follows_the_period_at_each_tick(recorder: Recorder) -> None:
    """A cron at minute 0 and 10 of each hour: the 00:10 tick's TTL is 50 min (to 01:00), the 01:00 tick's 10 min."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            scheduler = started(system, cluster_mode=True)
            await scheduler.schedule_cron(Tick("c"), system.ref(target, "uneven"), "0 0,10 * * * ?", reference="r")
            await asyncio.sleep(HOUR / SECOND + 1)

    run_virtual(main)
    assert [(w.tick_us - START_US, w.ttl_us) for w in recorder.of(NodeScheduleClaimWon)] == [
        (10 * MINUTE, 50 * MINUTE),
        (HOUR, 10 * MINUTE),
    ]


def test_cluster_interval_and_once_are_node_local_and_never_claimed(recorder: Recorder) -> None:
    """In cluster mode an interval and a one-shot are told straight away: no claim event, no claim key."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            scheduler = started(system, cluster_mode=True)
            await scheduler.schedule(Tick("i"), system.ref(target, "local"), timedelta(seconds=10), reference="i")
            await scheduler.schedule_once(Tick("o"), system.ref(target, "local"), timedelta(seconds=15), reference="o")
            await asyncio.sleep(31)

    run_virtual(main)
    assert [label for label, _ in HANDLED["local"]] == ["i", "o", "i", "i"]
    claims = (NodeScheduleClaimWon, NodeScheduleClaimLost, NodeScheduleClaimSkipped)
    assert [e for e in recorder.events if isinstance(e, claims)] == []
    assert not any(e.actor == schedule_fire.name for e in recorder.of(ActivationStarted))


def test_cluster_cron_claim_that_fails_is_skipped_and_not_told(recorder: Recorder) -> None:
    """A claim ask that fails (Unavailable: no owner took it) is recorded as claim_skipped with that reason; the tick is not told, the next is claimed again."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            asked: list[str] = []

            async def unavailable(ref: EntityRef[Any], message: Any) -> Any:
                asked.append(ref.key)
                raise Unavailable("no owner took it")

            system.ask = unavailable  # type: ignore[method-assign]
            scheduler = started(system, cluster_mode=True)
            await scheduler.schedule_cron(Tick("c"), system.ref(target, "unclaimed"), "0 * * * * ?", reference="r")
            await asyncio.sleep(2 * 60 + 1)
            assert asked == [claim_key("r", START_US + MINUTE), claim_key("r", START_US + 2 * MINUTE)]

    run_virtual(main)
    skipped = recorder.of(NodeScheduleClaimSkipped)
    assert [(s.tick_us, s.reason) for s in skipped] == [
        (START_US + n * MINUTE, "claim failed: Unavailable: no owner took it") for n in (1, 2)
    ]
    assert recorder.of(NodeScheduleFired) == [] and HANDLED["unclaimed"] == []


def test_stopping_the_scheduler_drops_its_claims_in_flight(recorder: Recorder) -> None:
    """A claim still waiting for its answer when the node stops is cancelled: the stop does not wait for it, and nothing is told."""

    async def main(clock: LoopClock) -> float:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            never: asyncio.Future[str] = asyncio.get_running_loop().create_future()

            async def hanging(ref: EntityRef[Any], message: Any) -> Any:
                return await never

            system.ask = hanging  # type: ignore[method-assign]
            system.scheduler.cluster_mode = True  # the system's own scheduler, as a cluster node would have it
            await system.schedule_cron(Tick("c"), system.ref(target, "pending"), "0 * * * * ?", reference="r")
            await asyncio.sleep(61)
            assert len(system.scheduler._claims) == 1
            stopping = asyncio.get_running_loop().time()
            await system.stop()
            assert system.scheduler._claims == {}
            return asyncio.get_running_loop().time() - stopping

    assert run_virtual(main) == 0.0
    assert recorder.of(NodeScheduleFired) == [] and recorder.of(NodeScheduleClaimWon) == []


def test_cluster_cron_claim_won_after_the_clock_steps_back_waits_for_its_tick(recorder: Recorder) -> None:
    """The clock steps back 0.5 s while a tick's claim is in flight (0.1 s): the won tick is told at wall == its tick (0.4 s later), never early."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:

            async def stepping_claim(ref: EntityRef[Any], message: Any) -> Any:
                await asyncio.sleep(0.1)
                clock.step(timedelta(seconds=-0.5))  # a fast clock corrected while the claim's round trip runs
                return system.node

            system.ask = stepping_claim  # type: ignore[method-assign]
            scheduler = started(system, cluster_mode=True)
            await scheduler.schedule_cron(Tick("c"), system.ref(target, "stepped"), "0 * * * * ?", reference="r")
            await asyncio.sleep(61)

    run_virtual(main)
    tick = START_US + MINUTE
    (won,) = recorder.of(NodeScheduleClaimWon)
    assert (won.tick_us, won.now_us) == (tick, tick - 400_000)  # the answer came at wall 00:59.6
    (fired,) = recorder.of(NodeScheduleFired)
    assert (fired.tick_us, fired.now_us) == (tick, tick)
    assert handled_at("stepped") == [tick]


# --- times past the last datetime ----------------------------------------------------------

LAST = "9999-12-31T23:59:59.999999+00:00"


def test_node_schedule_past_year_9999_is_refused_and_registers_nothing(recorder: Recorder) -> None:
    """schedule_once / schedule with a due time past year 9999 raise ValueError naming the argument; nothing is registered and the node serves on."""

    async def main(clock: LoopClock) -> tuple[list[str], list[NodeScheduleInfo]]:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            scheduler = started(system)
            ref = system.ref(target, "far")
            errors = []
            for call in (
                scheduler.schedule_once(Tick("x"), ref, timedelta.max, reference="once"),
                scheduler.schedule_once(Tick("x"), ref, timedelta(days=8000 * 365), reference="once"),
                scheduler.schedule(Tick("x"), ref, timedelta.max, reference="every"),
                scheduler.schedule(Tick("x"), ref, timedelta(days=4000 * 365), reference="every"),
            ):
                with pytest.raises(ValueError) as info:
                    await call
                errors.append(str(info.value))
            await scheduler.schedule_once(Tick("ok"), ref, timedelta(seconds=5), reference="once")
            listed = scheduler.list_schedules()
            await asyncio.sleep(6)
            return errors, listed

    errors, listed = run_virtual(main)
    assert errors == [
        f"schedule_once: delay=999999999 days, 23:59:59.999999 puts a due time past {LAST}, the last datetime",
        f"schedule_once: delay=2920000 days, 0:00:00 puts a due time past {LAST}, the last datetime",
        f"schedule: interval=999999999 days, 23:59:59.999999 puts a due time past {LAST}, the last datetime",
        f"schedule: interval=1460000 days, 0:00:00 puts a due time past {LAST}, the last datetime",
    ]
    assert [(i.reference, i.next_due) for i in listed] == [("once", to_datetime(START_US + 5 * SECOND))]
    assert [r.reference for r in recorder.of(NodeScheduleRegistered)] == ["once"]
    assert HANDLED["far"] == [("ok", START_US + 5 * SECOND)]


def test_node_interval_whose_next_tick_passes_year_9999_ends_after_its_last_tick(recorder: Recorder) -> None:
    """A node interval whose next tick would pass year 9999 tells its last tick, then ends (next None, reason out-of-range)."""
    start = to_us(datetime(9999, 12, 31, 23, 59, 30, tzinfo=timezone.utc))  # 30 s before the last datetime

    async def main(_: LoopClock) -> list[NodeScheduleInfo]:
        clock = LoopClock(asyncio.get_running_loop(), start)
        async with ActorSystem(clock=clock, observer=recorder) as system:
            scheduler = started(system)
            await scheduler.schedule(Tick("t"), system.ref(target, "edge"), timedelta(seconds=10), reference="r")
            await asyncio.sleep(40)
            return scheduler.list_schedules()

    assert run_virtual(main) == []
    assert handled_at("edge") == [start + 10 * SECOND, start + 20 * SECOND]
    assert [(f.tick_us, f.next_us) for f in recorder.of(NodeScheduleFired)] == [
        (start + 10 * SECOND, start + 20 * SECOND),
        (start + 20 * SECOND, None),
    ]
    assert [c.reason for c in recorder.of(NodeScheduleCancelled)] == ["out-of-range"]


def test_resume_whose_next_tick_would_pass_year_9999_ends_the_schedule(recorder: Recorder) -> None:
    """Resumed when one interval from now would pass year 9999, a node schedule ends (out-of-range) instead of breaking list_schedules."""
    start = to_us(datetime(9999, 12, 31, 23, 59, 30, tzinfo=timezone.utc))

    async def main(_: LoopClock) -> list[NodeScheduleInfo]:
        clock = LoopClock(asyncio.get_running_loop(), start)
        async with ActorSystem(clock=clock, observer=recorder) as system:
            scheduler = started(system)
            await scheduler.schedule(Tick("t"), system.ref(target, "resume"), timedelta(seconds=10), reference="r")
            scheduler.pause_schedule("r")
            await asyncio.sleep(25)  # one interval from now is 00:00:05 of year 10000
            scheduler.resume_schedule("r")
            return scheduler.list_schedules()

    assert run_virtual(main) == []
    assert HANDLED["resume"] == []
    assert recorder.of(NodeScheduleResumed) == []
    assert [c.reason for c in recorder.of(NodeScheduleCancelled)] == ["out-of-range"]


# --- ctx.occurrence of a node schedule's tick --------------------------------------------

SEEN: list[tuple[str, Occurrence | None]] = []
"""(label, ctx.occurrence) for every Tick the ``noting`` body handles."""


@actor
async def noting(ctx: Context[None, Tick]) -> None:
    """Records every Tick with the occurrence the body reads while handling it."""
    async for msg in ctx.inbox:
        SEEN.append((msg.label, ctx.occurrence))


def _at(us: int) -> datetime:
    return to_datetime(us)


def test_once_tick_carries_its_occurrence_and_a_plain_tell_sees_none() -> None:
    """A one-shot's tick reads Occurrence(reference, due, fired_at, 0); a plain tell to the same key in the same run reads None."""
    SEEN.clear()

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock) as system:
            scheduler = started(system)
            ref = system.ref(noting, "once")
            await scheduler.schedule_once(Tick("tick"), ref, timedelta(minutes=10), reference="o")
            await asyncio.sleep(5 * 60)
            system.tell(ref, Tick("plain"))
            await asyncio.sleep(10 * 60)
            system.tell(ref, Tick("after"))
            await asyncio.sleep(1)

    run_virtual(main)
    due = START_US + 10 * MINUTE
    assert SEEN == [("plain", None), ("tick", Occurrence("o", _at(due), _at(due), 0)), ("after", None)]


def test_interval_tick_carries_its_occurrence_with_the_skipped_count() -> None:
    """A 10 s interval stepped 55 s ahead: the late tick reads due 20 s, fired_at 66 s, skipped 4; the next on-grid tick skipped 0."""
    SEEN.clear()

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock) as system:
            scheduler = started(system)
            await scheduler.schedule(Tick("i"), system.ref(noting, "interval"), timedelta(seconds=10), reference="r")
            await asyncio.sleep(10.5)
            clock.step(timedelta(seconds=55))
            await asyncio.sleep(10)

    run_virtual(main)
    s = SECOND
    assert SEEN == [
        ("i", Occurrence("r", _at(START_US + 10 * s), _at(START_US + 10 * s), 0)),
        ("i", Occurrence("r", _at(START_US + 20 * s), _at(START_US + 66 * s), 4)),
        ("i", Occurrence("r", _at(START_US + 70 * s), _at(START_US + 70 * s), 0)),
    ]


def test_cron_tick_carries_its_occurrence_with_the_skipped_count() -> None:
    """A per-minute cron stepped 10 min ahead: the late tick reads due 00:01, fired_at 00:10:31, skipped 9; 00:11 is on time."""
    SEEN.clear()

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock) as system:
            scheduler = started(system)
            await scheduler.schedule_cron(Tick("c"), system.ref(noting, "cron"), "0 * * * * ?", reference="c")
            await asyncio.sleep(30)
            clock.step(timedelta(minutes=10))
            await asyncio.sleep(40)

    run_virtual(main)
    late = START_US + 10 * MINUTE + 31 * SECOND
    assert SEEN == [
        ("c", Occurrence("c", _at(START_US + MINUTE), _at(late), 9)),
        ("c", Occurrence("c", _at(START_US + 11 * MINUTE), _at(START_US + 11 * MINUTE), 0)),
    ]


def test_fire_all_ticks_each_carry_their_own_due() -> None:
    """misfire=FireAll(3) stepped 55 s ahead: the ticks due 40, 50, 60 s are told at 66 s, each reading its due and skipped 2."""
    SEEN.clear()

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock) as system:
            scheduler = started(system)
            await scheduler.schedule(
                Tick("f"), system.ref(noting, "all"), timedelta(seconds=10), reference="a", misfire=FireAll(limit=3)
            )
            await asyncio.sleep(10.5)
            clock.step(timedelta(seconds=55))
            await asyncio.sleep(2)

    run_virtual(main)
    fired = _at(START_US + 66 * SECOND)
    assert SEEN == [
        ("f", Occurrence("a", _at(START_US + 10 * SECOND), _at(START_US + 10 * SECOND), 0)),
        *[("f", Occurrence("a", _at(START_US + t * SECOND), fired, 2)) for t in (40, 50, 60)],
    ]
