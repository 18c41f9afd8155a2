"""Persisted actor schedules: the seed's rules, each on virtual time with a controllable wall clock."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from conftest import START_US, LoopClock, Recorder, run_virtual
from hypothesis import given
from hypothesis import strategies as st

from casty import ActorSystem, Askable, Context, Fenced, Ref, SchemaError, actor
from casty.observer import (
    ActivationEnded,
    ActivationStarted,
    MessageDropped,
    ScheduleCancelled,
    ScheduleCaughtUp,
    ScheduleFired,
)
from casty.clock import to_us
from casty._core.schedules import ScheduleEntry, catch_up, decode_schedules, encode_schedules

SECOND = 1_000_000


# --- messages and actors used below -------------------------------------------------


@dataclass(frozen=True)
class Every(Askable[None]):
    name: str
    delay: timedelta
    interval: timedelta | None


@dataclass(frozen=True)
class Ping:
    label: str


@dataclass(frozen=True)
class Cancel(Askable[bool]):
    name: str


@dataclass(frozen=True)
class Names(Askable[list[str]]):
    pass


@dataclass(frozen=True)
class Seen(Askable[list[str]]):
    pass


@dataclass(frozen=True)
class Handle(Askable[tuple[str, str, object, object]]):
    name: str


@dataclass(frozen=True)
class Become(Askable[None]):
    pass


@dataclass(frozen=True)
class Delete(Askable[None]):
    pass


@dataclass(frozen=True)
class Bad(Askable[str]):
    pass


@dataclass(frozen=True)
class Stash(Askable[None]):
    pass


@dataclass(frozen=True)
class Foreign:
    pass


@dataclass(frozen=True)
class Try(Askable[str]):
    name: str
    delay: timedelta
    interval: timedelta | None


@dataclass(frozen=True)
class Shown(Askable[str]):
    name: str


Msg = Every | Ping | Cancel | Names | Seen | Handle | Become | Delete | Bad | Stash | Try | Shown
STASHED: list[Context[tuple[str, ...], Msg]] = []


@actor(initial=())
async def pinger(ctx: Context[tuple[str, ...], Msg]) -> None:
    """Schedules Pings on request and records every Ping it receives, in its state."""
    async for msg in ctx.inbox:
        match msg:
            case Every(name=name, delay=delay, interval=interval, reply_to=reply_to):
                await ctx.schedule(name, delay, interval, Ping(name))
                reply_to.tell(None)
            case Ping(label=label):
                await ctx.state.update(lambda seen: (*seen, label))
            case Cancel(name=name, reply_to=reply_to):
                handle = ctx.schedules.get(name)
                if handle is not None:
                    await handle.cancel()
                reply_to.tell(handle is not None)
            case Names(reply_to=reply_to):
                reply_to.tell(list(ctx.schedules))
            case Seen(reply_to=reply_to):
                reply_to.tell(list(ctx.state.value))
            case Handle(name=name, reply_to=reply_to):
                h = ctx.schedules[name]
                reply_to.tell((h.name, repr(h.message), h.interval, h.due))
            case Stash(reply_to=reply_to):
                STASHED.append(ctx)
                reply_to.tell(None)
            case Try(name=name, delay=delay, interval=interval, reply_to=reply_to):
                try:
                    await ctx.schedule(name, delay, interval, Ping(name))
                except Exception as exc:  # reported to the asker: the body goes on serving
                    reply_to.tell(f"{type(exc).__name__}: {exc}")
                else:
                    reply_to.tell("ok")
            case Shown(name=name, reply_to=reply_to):
                reply_to.tell(repr(ctx.schedules[name]))
            case Become(reply_to=reply_to):
                await ctx.become(pinger_b)
                reply_to.tell(None)
            case Delete(reply_to=reply_to):
                await ctx.state.delete()
                reply_to.tell(None)
            case Bad(reply_to=reply_to):
                errors: list[str] = []
                for args in (
                    (timedelta(seconds=-1), None, Ping("x")),
                    (timedelta(0), timedelta(0), Ping("x")),
                    (timedelta(0), timedelta(seconds=-5), Ping("x")),
                    (timedelta(0), None, Foreign()),
                ):
                    try:
                        await ctx.schedule("bad", *args)  # type: ignore[arg-type]
                    except (ValueError, SchemaError) as exc:
                        errors.append(type(exc).__name__)
                reply_to.tell(",".join(errors))


@actor(initial=())
async def pinger_b(ctx: Context[tuple[str, ...], Msg]) -> None:
    """The replacement behavior: records Pings with a 'b:' prefix."""
    async for msg in ctx.inbox:
        match msg:
            case Ping(label=label):
                await ctx.state.update(lambda seen: (*seen, "b:" + label))
            case Seen(reply_to=reply_to):
                reply_to.tell(list(ctx.state.value))
            case Names(reply_to=reply_to):
                reply_to.tell(list(ctx.schedules))
            case _:
                pass


def system_for(clock: LoopClock, recorder: Recorder | None = None, **kw: object) -> ActorSystem:
    return ActorSystem(clock=clock, observer=recorder, **kw)  # type: ignore[arg-type]


# --- the pure rule ----------------------------------------------------------------


def test_catch_up_on_time_moves_one_period() -> None:
    """A firing exactly at its due time moves the due by one period and skips nothing."""
    assert catch_up(10 * SECOND, 5 * SECOND, 10 * SECOND) == (15 * SECOND, 0)


def test_catch_up_late_skips_to_first_grid_time_after_now() -> None:
    """A firing 12.5 periods late skips 12 occurrences and lands on the grid after now."""
    assert catch_up(0, 10, 125) == (130, 12)


@given(
    due=st.integers(min_value=0, max_value=10**15),
    every=st.integers(min_value=1, max_value=10**12),
    late=st.integers(min_value=0, max_value=10**14),
)
def test_catch_up_lands_on_grid_strictly_after_now(due: int, every: int, late: int) -> None:
    """next = due + every*(max(0, now-due)//every + 1): on the grid, after now, within one period."""
    now = due + late
    nxt, skipped = catch_up(due, every, now)
    assert (nxt - due) % every == 0
    assert now < nxt <= now + every
    assert skipped == (nxt - due) // every - 1


def test_schedules_page_round_trips_exact_fields() -> None:
    """The @schedules page stores name, message bytes, due µs and period µs (or None), in order."""
    entries = [ScheduleEntry("a", b"\x01", 5, None), ScheduleEntry("b", b"\x02\x03", 7, 1_000_000)]
    assert decode_schedules(encode_schedules(entries)) == entries


# --- the seed program --------------------------------------------------------------

SEED_PROGRAM = textwrap.dedent(
    """
    import asyncio
    from dataclasses import dataclass
    from datetime import timedelta
    from casty import ActorSystem, Askable, Context, Ref, actor

    @dataclass(frozen=True)
    class Start(Askable[int]):
        pass

    @dataclass(frozen=True)
    class Tick:
        reply_to: Ref[int]

    @actor(initial=0)
    async def ticker(ctx: Context[int, Start | Tick]) -> None:
        async for msg in ctx.inbox:
            match msg:
                case Start(reply_to=reply_to):
                    await ctx.schedule("tick", timedelta(milliseconds=10), None, Tick(reply_to))
                case Tick(reply_to):
                    total = await ctx.state.update(lambda value: value + 1)
                    reply_to.tell(total)

    async def main() -> None:
        async with ActorSystem() as system:
            ticks = system.ref(ticker, "ticks")
            print(await ticks.ask(Start()))

    asyncio.run(main())
    """
)


def test_seed_program_prints_one(tmp_path: Path) -> None:
    """The program of casty-schedules.txt, run unchanged as a script on the real clock, prints 1."""
    script = tmp_path / "ticker.py"
    script.write_text(SEED_PROGRAM)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout == "1\n"


# --- firing, grid, catch-up --------------------------------------------------------


def test_interval_fires_on_the_grid_over_a_day(recorder: Recorder) -> None:
    """An hourly schedule over a simulated day fires 24 times, each exactly on its due time."""

    async def main(clock: LoopClock) -> list[str]:
        async with system_for(clock, recorder) as system:
            ref = system.ref(pinger, "day")
            await ref.ask(Every("hourly", timedelta(hours=1), timedelta(hours=1)))
            await asyncio.sleep(24 * 3600 + 1)
            return await ref.ask(Seen())

    seen = run_virtual(main)
    assert seen == ["hourly"] * 24
    fired = recorder.of(ScheduleFired)
    assert [f.due_us for f in fired] == [START_US + h * 3600 * SECOND for h in range(1, 25)]
    assert all(f.now_us == f.due_us for f in fired)
    assert recorder.of(ScheduleCaughtUp) == []


def test_clock_step_forward_skips_without_burst(recorder: Recorder) -> None:
    """A wall clock stepped 5.5 periods ahead is noticed at the next wall-clock re-check: one delivery then, reporting 4 skipped occurrences, and the grid goes on."""

    async def main(clock: LoopClock) -> list[str]:
        async with system_for(clock, recorder) as system:
            ref = system.ref(pinger, "step")
            await ref.ask(Every("tick", timedelta(seconds=10), timedelta(seconds=10)))
            await asyncio.sleep(10.5)  # first firing at +10 s
            clock.step(timedelta(seconds=55))  # wall now +65.5; the re-check at loop +11 (wall +66) re-arms the timer for +20
            await asyncio.sleep(10)
            return await ref.ask(Seen())

    seen = run_virtual(main)
    assert seen == ["tick", "tick", "tick"]  # +10, then +20 caught up at wall +66, then +70 at wall +70
    (caught,) = recorder.of(ScheduleCaughtUp)
    assert caught.due_us == START_US + 20 * SECOND
    assert caught.now_us == START_US + 66 * SECOND
    assert caught.skipped == 4  # 20..66 s: 30, 40, 50, 60 passed while the step hid them
    assert caught.next_us == START_US + 70 * SECOND


def test_clock_step_backward_never_fires_early(recorder: Recorder) -> None:
    """A wall clock stepped back does not fire before the due time on that clock: the timer re-arms."""

    async def main(clock: LoopClock) -> tuple[list[str], float]:
        loop = asyncio.get_running_loop()
        async with system_for(clock, recorder) as system:
            ref = system.ref(pinger, "back")
            await ref.ask(Every("once", timedelta(seconds=10), None))
            await asyncio.sleep(5)
            clock.step(timedelta(seconds=-30))  # due is now 35 s away on the wall clock
            await asyncio.sleep(20)
            early = await ref.ask(Seen())
            assert early == []
            await asyncio.sleep(20)
            return await ref.ask(Seen()), loop.time()

    seen, _ = run_virtual(main)
    assert seen == ["once"]
    (fired,) = recorder.of(ScheduleFired)
    assert fired.now_us >= fired.due_us


def test_one_shot_fires_once_and_is_gone(recorder: Recorder) -> None:
    """A one-shot (interval None) fires once, then leaves ctx.schedules and the page."""

    async def main(clock: LoopClock) -> tuple[list[str], list[str], dict[str, bytes]]:
        async with system_for(clock, recorder) as system:
            ref = system.ref(pinger, "once")
            await ref.ask(Every("once", timedelta(seconds=3), None))
            await asyncio.sleep(100)
            return await ref.ask(Seen()), await ref.ask(Names()), system.pages(pinger, "once")

    seen, names, pages = run_virtual(main)
    assert seen == ["once"]
    assert names == []
    assert "@schedules" not in pages
    assert [c.reason for c in recorder.of(ScheduleCancelled)] == ["done"]


def test_replace_by_name_keeps_one_schedule_and_creation_order() -> None:
    """Scheduling under an existing name replaces it; ctx.schedules lists names in creation order."""

    async def main(clock: LoopClock) -> tuple[list[str], list[str]]:
        async with system_for(clock) as system:
            ref = system.ref(pinger, "replace")
            await ref.ask(Every("a", timedelta(seconds=10), timedelta(seconds=10)))
            await ref.ask(Every("b", timedelta(seconds=10), timedelta(seconds=10)))
            await ref.ask(Every("a", timedelta(seconds=25), None))  # replaces a: now a one-shot at +25
            names = await ref.ask(Names())
            await asyncio.sleep(28)
            return names, await ref.ask(Seen())

    names, seen = run_virtual(main)
    assert names == ["b", "a"]  # a replacement counts as a new creation
    assert seen == ["b", "b", "a"]  # b at +10, +20; the replaced a only at +25


def test_handle_exposes_name_message_interval_due() -> None:
    """A handle gives name, message, interval and the next due as a UTC datetime."""

    async def main(clock: LoopClock) -> tuple[str, str, object, object]:
        async with system_for(clock) as system:
            ref = system.ref(pinger, "handle")
            await ref.ask(Every("h", timedelta(seconds=90), timedelta(minutes=5)))
            return await ref.ask(Handle("h"))

    name, message, interval, due = run_virtual(main)
    assert (name, message, interval) == ("h", "Ping(label='h')", timedelta(minutes=5))
    assert due is not None and due.isoformat() == "2026-01-01T00:01:30+00:00"


def test_cancel_stops_future_firings(recorder: Recorder) -> None:
    """handle.cancel() stops the schedule: no firing after it, and it leaves the page."""

    async def main(clock: LoopClock) -> tuple[list[str], bool, dict[str, bytes]]:
        async with system_for(clock, recorder) as system:
            ref = system.ref(pinger, "cancel")
            await ref.ask(Every("t", timedelta(seconds=1), timedelta(seconds=1)))
            await asyncio.sleep(3.5)
            existed = await ref.ask(Cancel("t"))
            await asyncio.sleep(10)
            return await ref.ask(Seen()), existed, system.pages(pinger, "cancel")

    seen, existed, pages = run_virtual(main)
    assert existed and seen == ["t", "t", "t"]
    assert "@schedules" not in pages
    assert [c.reason for c in recorder.of(ScheduleCancelled)] == ["cancelled"]


def test_key_with_schedule_does_not_idle_out(recorder: Recorder) -> None:
    """A key whose only schedule is due in an hour stays active past idle_after (1 minute)."""

    async def main(clock: LoopClock) -> list[tuple[str, str]]:
        async with system_for(clock, recorder) as system:
            ref = system.ref(pinger, "stay")
            await ref.ask(Every("late", timedelta(hours=1), None))
            await asyncio.sleep(30 * 60)
            return system.activations()

    assert run_virtual(main) == [(pinger.name, "stay")]
    assert not [e for e in recorder.of(ActivationEnded) if e.reason == "idle"]


def test_key_idles_out_after_its_last_schedule_is_gone(recorder: Recorder) -> None:
    """Once its one-shot fired, the key idles out idle_after after its last message."""

    async def main(clock: LoopClock) -> list[tuple[str, str]]:
        async with system_for(clock, recorder) as system:
            ref = system.ref(pinger, "then-idle")
            await ref.ask(Every("soon", timedelta(seconds=5), None))
            await asyncio.sleep(5 + 61)
            return system.activations()

    assert run_virtual(main) == []
    assert [e.reason for e in recorder.of(ActivationEnded)] == ["idle"]


def test_clock_alone_never_starts_an_inactive_key(recorder: Recorder) -> None:
    """A released key with an overdue schedule stays inactive until a message comes; then fires once."""

    async def main(clock: LoopClock) -> tuple[list[tuple[str, str]], list[str]]:
        async with system_for(clock, recorder) as system:
            ref = system.ref(pinger, "dormant")
            await ref.ask(Every("tick", timedelta(seconds=10), timedelta(seconds=10)))
            await system.release(pinger, "dormant")
            await asyncio.sleep(95)  # nine due times pass with nobody running the key
            inactive = system.activations()
            seen = await ref.ask(Seen())  # the message reactivates it; the overdue time fires once, now
            await asyncio.sleep(0)
            return inactive, seen + await ref.ask(Seen())

    inactive, seen = run_virtual(main)
    assert inactive == []
    assert seen == ["tick"]  # the Seen raced the catch-up Ping; the second Seen shows exactly one
    fired = recorder.of(ScheduleFired)
    assert len(fired) == 1 and fired[0].due_us == START_US + 10 * SECOND
    (caught,) = recorder.of(ScheduleCaughtUp)
    assert caught.skipped == 8 and caught.next_us == START_US + 100 * SECOND
    started = recorder.of(ActivationStarted)
    assert [s.recovered for s in started] == [False, True]


def test_become_keeps_schedules() -> None:
    """After become, the schedule is still there and its firings reach the replacement body."""

    async def main(clock: LoopClock) -> tuple[list[str], list[str]]:
        async with system_for(clock) as system:
            ref = system.ref(pinger, "become")
            await ref.ask(Every("t", timedelta(seconds=10), timedelta(seconds=10)))
            await asyncio.sleep(15)
            await ref.ask(Become())
            await asyncio.sleep(10)
            return await ref.ask(Names()), await ref.ask(Seen())

    names, seen = run_virtual(main)
    assert names == ["t"]
    assert seen == ["t", "b:t"]


def test_delete_cancels_schedules(recorder: Recorder) -> None:
    """state.delete() cancels every schedule and resets the state to initial."""

    async def main(clock: LoopClock) -> tuple[list[str], list[str]]:
        async with system_for(clock, recorder) as system:
            ref = system.ref(pinger, "delete")
            await ref.ask(Every("a", timedelta(seconds=1), timedelta(seconds=1)))
            await ref.ask(Every("b", timedelta(seconds=2), None))
            await asyncio.sleep(1.5)
            await ref.ask(Delete())
            await asyncio.sleep(10)
            return await ref.ask(Names()), await ref.ask(Seen())

    names, seen = run_virtual(main)
    assert names == [] and seen == []
    assert sorted(c.reason for c in recorder.of(ScheduleCancelled)) == ["deleted", "deleted"]


def test_invalid_schedules_raise_value_and_schema_errors() -> None:
    """Negative delay and non-positive intervals raise ValueError; a message the type does not take, SchemaError."""

    async def main(clock: LoopClock) -> str:
        async with system_for(clock) as system:
            return await system.ref(pinger, "bad").ask(Bad())

    assert run_virtual(main) == "ValueError,ValueError,ValueError,SchemaError"


def test_replaced_run_cannot_schedule() -> None:
    """A context kept from a run that become replaced gets Fenced when it schedules."""

    async def main(clock: LoopClock) -> None:
        async with system_for(clock) as system:
            ref = system.ref(pinger, "fenced-schedule")
            await ref.ask(Stash())
            await ref.ask(Become())
            with pytest.raises(Fenced):
                await STASHED[-1].schedule("y", timedelta(seconds=1), None, Ping("y"))
            assert await ref.ask(Names()) == []

    run_virtual(main)


# --- times past the last datetime --------------------------------------------------

LAST = "9999-12-31T23:59:59.999999+00:00"


def test_schedule_past_year_9999_is_refused_and_changes_nothing(recorder: Recorder) -> None:
    """A delay or interval whose due time would pass year 9999 raises ValueError naming it; the old schedule of that name stays and fires."""

    async def main(clock: LoopClock) -> tuple[list[str], list[str], str, list[str], list[str]]:
        async with system_for(clock, recorder) as system:
            ref = system.ref(pinger, "far")
            await ref.ask(Every("keep", timedelta(seconds=10), timedelta(seconds=10)))
            answers = [
                await ref.ask(Try("keep", timedelta.max, None)),
                await ref.ask(Try("new", timedelta(days=8000 * 365), None)),
                await ref.ask(Try("keep", timedelta(seconds=1), timedelta.max)),
            ]
            names = await ref.ask(Names())
            shown = await ref.ask(Shown("keep"))
            answers.append(await ref.ask(Try("later", timedelta(seconds=5), None)))
            await asyncio.sleep(20.5)
            return answers, names, shown, await ref.ask(Seen()), await ref.ask(Names())

    answers, names, shown, seen, names_after = run_virtual(main)
    assert answers == [
        f"ValueError: schedule 'keep': delay=999999999 days, 23:59:59.999999 puts a due time past {LAST}, the last datetime",
        f"ValueError: schedule 'new': delay=2920000 days, 0:00:00 puts a due time past {LAST}, the last datetime",
        f"ValueError: schedule 'keep': interval=999999999 days, 23:59:59.999999 puts a due time past {LAST}, the last datetime",
        "ok",
    ]
    assert names == ["keep"]
    assert shown == "Schedule('keep', interval=0:00:10, due=2026-01-01T00:00:10+00:00, message=Ping(label='keep'))"
    assert seen == ["later", "keep", "keep"]
    assert names_after == ["keep"]
    assert [c.reason for c in recorder.of(ScheduleCancelled)] == ["done"]  # only "later", after it fired


def test_interval_whose_next_due_passes_year_9999_ends_after_its_last_firing(recorder: Recorder) -> None:
    """An interval whose next due would pass year 9999 fires its last due time, then ends (next None, reason out-of-range)."""
    start = to_us(datetime(9999, 12, 31, 23, 59, 30, tzinfo=timezone.utc))  # 30 s before the last datetime

    async def main(_: LoopClock) -> tuple[list[str], list[str], dict[str, bytes]]:
        clock = LoopClock(asyncio.get_running_loop(), start)
        async with system_for(clock, recorder) as system:
            ref = system.ref(pinger, "edge")
            await ref.ask(Every("edge", timedelta(seconds=10), timedelta(seconds=10)))  # due :40, next :50
            await asyncio.sleep(40)
            return await ref.ask(Seen()), await ref.ask(Names()), system.pages(pinger, "edge")

    seen, names, pages = run_virtual(main)
    assert seen == ["edge", "edge"]
    assert names == []
    assert "@schedules" not in pages
    fired = recorder.of(ScheduleFired)
    assert [(f.due_us, f.next_us) for f in fired] == [(start + 10 * SECOND, start + 20 * SECOND), (start + 20 * SECOND, None)]
    assert [c.reason for c in recorder.of(ScheduleCancelled)] == ["out-of-range"]


def test_recovered_page_rows_out_of_range_are_dropped_and_reported(recorder: Recorder) -> None:
    """A page row due past year 9999 or with a non-positive period (an older node's, a peer's) is dropped with a reason; the other rows run."""
    day = 86_400 * SECOND
    last = to_us(datetime.max.replace(tzinfo=timezone.utc))

    async def main(clock: LoopClock) -> tuple[list[str], str, list[str]]:
        async with system_for(clock, recorder) as system:
            ref = system.ref(pinger, "legacy")
            await ref.ask(Every("ok", timedelta(seconds=10), None))
            (row,) = decode_schedules(system.pages(pinger, "legacy")["@schedules"])
            await system.release(pinger, "legacy")
            system.records.pages[(pinger.name, "legacy")]["@schedules"] = encode_schedules([
                ScheduleEntry("late", row.message, last + 1, None),
                ScheduleEntry("still", row.message, START_US + day, 0),
                row,
            ])
            names = await ref.ask(Names())
            shown = await ref.ask(Shown("ok"))
            await asyncio.sleep(11)
            return names, shown, await ref.ask(Seen())

    names, shown, seen = run_virtual(main)
    assert names == ["ok"]
    assert shown == "Schedule('ok', interval=None, due=2026-01-01T00:00:10+00:00, message=Ping(label='ok'))"
    assert seen == ["ok"]
    assert [(d.message, d.reason) for d in recorder.of(MessageDropped)] == [
        ("late", "unusable schedule: due 253402300800000000 µs is past the last datetime"),
        ("still", "unusable schedule: period 0 µs is not positive"),
    ]
