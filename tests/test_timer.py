"""Activation-scoped timers (ctx.timer) against node schedules: one test per row of the seed's comparison table."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import timedelta

import pytest
from conftest import LoopClock, Recorder, run_virtual

from casty import ActorSystem, Askable, Context, Fenced, ScheduleReferenceInUse, SchemaError, actor
from casty.observer import ActivationEnded, ActivationStarted, DeadLetter, TimerCancelled, TimerFired


@dataclass(frozen=True)
class Ping:
    label: str


@dataclass(frozen=True)
class Start(Askable[None]):
    name: str
    delay: timedelta
    interval: timedelta | None
    keep_alive: bool = False


@dataclass(frozen=True)
class Seen(Askable[list[str]]):
    pass


@dataclass(frozen=True)
class Timers(Askable[list[str]]):
    pass


@dataclass(frozen=True)
class Stop(Askable[bool]):
    name: str


@dataclass(frozen=True)
class Bad(Askable[str]):
    pass


@dataclass(frozen=True)
class Boom:
    pass


Msg = Ping | Start | Seen | Timers | Stop | Bad | Boom
SEEN: dict[str, list[str]] = {}


@pytest.fixture(autouse=True)
def _clear() -> None:
    SEEN.clear()


@actor(initial=None)
async def clocked(ctx: Context[None, Msg]) -> None:
    """Sets timers on request; records every Ping (in a module list: it must survive deactivation)."""
    async for msg in ctx.inbox:
        match msg:
            case Start(name=name, delay=delay, interval=interval, keep_alive=keep_alive, reply_to=reply_to):
                ctx.timer(name, delay, interval, Ping(name), keep_alive=keep_alive)
                reply_to.tell(None)
            case Ping(label=label):
                SEEN.setdefault(ctx.key, []).append(label)
            case Seen(reply_to=reply_to):
                reply_to.tell(SEEN.get(ctx.key, []))
            case Timers(reply_to=reply_to):
                reply_to.tell(list(ctx.timers))
            case Stop(name=name, reply_to=reply_to):
                handle = ctx.timers.get(name)
                if handle is not None:
                    handle.cancel()
                reply_to.tell(handle is not None)
            case Boom():
                raise RuntimeError("boom")
            case Bad(reply_to=reply_to):
                errors = []
                for args in ((timedelta(seconds=-1), None, Ping("x")), (timedelta(0), timedelta(0), Ping("x")), (timedelta(0), None, "not a message")):
                    try:
                        ctx.timer("bad", *args)  # type: ignore[arg-type]
                    except (ValueError, SchemaError) as exc:
                        errors.append(type(exc).__name__)
                reply_to.tell(",".join(errors))


def test_a_timer_is_set_by_the_key_itself_and_targets_it() -> None:
    """Who and target: a body sets a timer with ctx.timer and its ticks come back to that same key, on the loop's time."""

    async def main(clock: LoopClock) -> list[str]:
        async with ActorSystem(clock=clock) as system:
            ref = system.ref(clocked, "self")
            await ref.ask(Start("t", timedelta(seconds=5), timedelta(seconds=10)))
            await asyncio.sleep(30)
            return await ref.ask(Seen())

    assert run_virtual(main) == ["t", "t", "t"]  # at 5, 15, 25 s


def test_node_schedule_is_set_from_outside_and_targets_any_key(recorder: Recorder) -> None:
    """A node schedule is set by any code holding the system, for any key; a timer cannot target another key."""

    async def main(clock: LoopClock) -> list[str]:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            other = system.ref(clocked, "other")
            await system.schedule(Ping("node"), other, timedelta(seconds=10), reference="r")
            await asyncio.sleep(25)
            return await other.ask(Seen())

    assert run_virtual(main) == ["node", "node"]


def test_timer_is_held_by_the_activation_and_ends_with_it(recorder: Recorder) -> None:
    """Held by the activation: idling out cancels the timer (reason 'ended'); the next activation has no timers."""

    async def main(clock: LoopClock) -> tuple[list[str], list[str]]:
        async with ActorSystem(clock=clock, observer=recorder, idle_after=timedelta(seconds=60)) as system:
            ref = system.ref(clocked, "held")
            await ref.ask(Start("slow", timedelta(minutes=5), None))
            await asyncio.sleep(61)  # idled out: no messages for 60 s, the timer does not keep it alive
            inactive = [key for _, key in system.activations()]
            timers_after = await ref.ask(Timers())
            return inactive, timers_after

    inactive, timers_after = run_virtual(main)
    assert inactive == [] and timers_after == []
    assert [(c.name, c.reason) for c in recorder.of(TimerCancelled)] == [("slow", "ended")]
    assert recorder.of(TimerFired) == []


def test_timer_never_reactivates_but_a_node_schedule_does(recorder: Recorder) -> None:
    """Passivation: after idling out, a timer never starts the key again; a node schedule's delivery does."""

    async def main(clock: LoopClock) -> tuple[int, int]:
        async with ActorSystem(clock=clock, observer=recorder, idle_after=timedelta(seconds=30)) as system:
            timed = system.ref(clocked, "timed")
            await timed.ask(Start("t", timedelta(seconds=50), timedelta(seconds=50)))
            scheduled = system.ref(clocked, "scheduled")
            await system.schedule(Ping("s"), scheduled, timedelta(seconds=50), reference="s")
            await asyncio.sleep(120)
        starts = recorder.of(ActivationStarted)
        return sum(1 for s in starts if s.key == "timed"), sum(1 for s in starts if s.key == "scheduled")

    timed_starts, scheduled_starts = run_virtual(main)
    assert timed_starts == 1  # idled out at 30 s; its 50 s timer died with it
    assert scheduled_starts == 3  # ref, then reactivated by the deliveries at 50 s and 100 s
    assert SEEN.get("timed") is None and SEEN["scheduled"] == ["s", "s"]


def test_timer_ticks_do_not_refresh_the_idle_clock_unless_keep_alive(recorder: Recorder) -> None:
    """Passivation clock: 20 s ticks do not keep a key alive past idle_after = 60 s; with keep_alive they do."""

    async def main(clock: LoopClock) -> list[str]:
        async with ActorSystem(clock=clock, observer=recorder, idle_after=timedelta(seconds=60)) as system:
            await system.ref(clocked, "plain").ask(Start("t", timedelta(seconds=20), timedelta(seconds=20)))
            await system.ref(clocked, "kept").ask(Start("t", timedelta(seconds=20), timedelta(seconds=20), keep_alive=True))
            await asyncio.sleep(300)
            return [key for _, key in system.activations()]

    assert run_virtual(main) == ["kept"]
    idle = [e.key for e in recorder.of(ActivationEnded) if e.reason == "idle"]
    assert idle == ["plain"]
    # 20, 40 and 60 s: the idle check (armed first) ends the inbox at 60 s, and the tick of the same
    # instant, already in the mailbox, is read before the body returns; then the timer ends with it.
    assert SEEN["plain"] == ["t", "t", "t"]


def test_timer_names_are_per_key_and_replace_node_references_are_rejected() -> None:
    """References: a duplicate timer name replaces the timer; a duplicate node-schedule reference is rejected."""

    async def main(clock: LoopClock) -> tuple[list[str], list[str]]:
        async with ActorSystem(clock=clock) as system:
            ref = system.ref(clocked, "names")
            await ref.ask(Start("t", timedelta(seconds=10), None))
            await ref.ask(Start("t", timedelta(seconds=30), None))  # replaces: only the 30 s one fires
            await asyncio.sleep(40)
            await system.schedule(Ping("n"), ref, timedelta(seconds=100), reference="dup")
            with pytest.raises(ScheduleReferenceInUse):
                await system.schedule(Ping("n"), ref, timedelta(seconds=100), reference="dup")
            return await ref.ask(Seen()), await ref.ask(Timers())

    seen, timers = run_virtual(main)
    assert seen == ["t"] and timers == []


def test_timer_is_managed_through_its_handle_in_the_body() -> None:
    """Management: a body cancels its timer through ctx.timers; no tick after that."""

    async def main(clock: LoopClock) -> tuple[bool, list[str]]:
        async with ActorSystem(clock=clock) as system:
            ref = system.ref(clocked, "managed")
            await ref.ask(Start("t", timedelta(seconds=10), timedelta(seconds=10)))
            await asyncio.sleep(25)
            stopped = await ref.ask(Stop("t"))
            await asyncio.sleep(50)
            return stopped, await ref.ask(Seen())

    assert run_virtual(main) == (True, ["t", "t"])


def test_invalid_timers_raise() -> None:
    """Negative delay and non-positive interval raise ValueError; a message the type does not take, SchemaError."""

    async def main(clock: LoopClock) -> str:
        async with ActorSystem(clock=clock) as system:
            return await system.ref(clocked, "bad").ask(Bad())

    assert run_virtual(main) == "ValueError,ValueError,SchemaError"


def test_a_replaced_run_cannot_set_timers() -> None:
    """A context kept past its run's end (the key idled out) gets Fenced from ctx.timer."""
    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, idle_after=timedelta(seconds=1)) as system:
            await system.ref(keeper, "k").ask(Hold())
            await asyncio.sleep(5)  # idled out
            with pytest.raises(Fenced):
                HELD[0].timer("late", timedelta(seconds=1), None, Hold())

    run_virtual(main)


@dataclass(frozen=True)
class Hold(Askable[None]):
    pass


HELD: list[Context[None, Hold]] = []


@actor(initial=None)
async def keeper(ctx: Context[None, Hold]) -> None:
    """Keeps its context around for the fencing test."""
    async for msg in ctx.inbox:
        HELD.append(ctx)
        msg.reply_to.tell(None)


def test_handler_failure_of_a_node_schedule_is_a_dead_letter_of_a_timer_a_warning(
    recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    """Handler failure: a node schedule's delivery that makes the body raise is a dead letter naming the target; a timer's, a warning."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            await system.schedule(Boom(), system.ref(clocked, "dl"), timedelta(seconds=10), reference="dl")
            await system.ref(timer_boom, "tb").ask(Hold())
            await asyncio.sleep(15)

    with caplog.at_level("WARNING", logger="casty"):
        run_virtual(main)
    letters = recorder.of(DeadLetter)
    assert [(d.actor, d.key, d.message, d.origin) for d in letters] == [(clocked.name, "dl", "Boom", "node-schedule:dl")]
    assert "RuntimeError('boom')" in letters[0].error
    assert any("timer t: handler failed" in r.getMessage() for r in caplog.records)


@actor(initial=None)
async def timer_boom(ctx: Context[None, Hold | Boom]) -> None:
    """Sets a timer whose tick makes it fail."""
    async for msg in ctx.inbox:
        match msg:
            case Hold(reply_to=reply_to):
                ctx.timer("t", timedelta(seconds=1), None, Boom())
                reply_to.tell(None)
            case Boom():
                raise RuntimeError("boom")
