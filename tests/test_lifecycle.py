"""Tests of the activation lifecycle, one mailbox reader, messaging tools, become and lease fencing.

Each test runs on virtual time (``run_virtual``): sleeps of minutes are instant and exact,
so idle intervals, backoff delays and ask timeouts are asserted to the tick. Actor types
and messages live at module scope (a type is named ``module:qualname``). Pages are kept
per ``ActorSystem``, so tests share actor types freely; module-level logs are keyed by the
test's own key and cleared at the start of the test.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from casty import (
    ActorFailed,
    ActorSystem,
    Askable,
    Backoff,
    Context,
    Fenced,
    Ref,
    ReentrancyError,
    SchemaError,
    actor,
)
from casty.observer import ActivationEnded, ActivationFailed, ActivationStarted, MessageDropped, WriteFailed
from conftest import LoopClock, Recorder, run_virtual

# ------------------------------------------------------------------------------ helpers


def now() -> float:
    """The virtual loop time, in seconds since the loop started."""
    return asyncio.get_running_loop().time()


async def settle() -> None:
    """Let every ready task run, without moving virtual time."""
    for _ in range(20):
        await asyncio.sleep(0)


async def release(system: ActorSystem, actor_type: Any, key: str) -> None:
    """system.release, failing (instead of hanging) if the key is not gone within 5 s of virtual time."""
    await asyncio.wait_for(system.release(actor_type, key), timeout=5)


LOG: defaultdict[str, list[Any]] = defaultdict(list)
"""What bodies did, by key: each test uses its own keys and clears them first."""

CAPTURED: defaultdict[str, list[Context[Any, Any]]] = defaultdict(list)
"""Every Context a body run was given, by key, in run order."""


def fresh(*keys: str) -> None:
    for key in keys:
        LOG.pop(key, None)
        CAPTURED.pop(key, None)


# ------------------------------------------------------------------------------ messages


@dataclass(frozen=True)
class Add(Askable[int]):
    amount: int


@dataclass(frozen=True)
class Get(Askable[int]):
    pass


@dataclass(frozen=True)
class Put(Askable[int]):
    value: int


@dataclass(frozen=True)
class Boom(Askable[int]):
    write_first: int | None = None


@dataclass(frozen=True)
class Peek(Askable[tuple[int, int]]):
    """Answers (state, how many messages this run of the body has read)."""


@dataclass(frozen=True)
class Hang(Askable[str]):
    value: int


@dataclass(frozen=True)
class Busy:
    seconds: float


@dataclass(frozen=True)
class Wipe(Askable[int]):
    pass


Counting = Add | Get | Put | Boom | Peek | Hang | Busy | Wipe


# ------------------------------------------------------------------------------ actors


@actor(initial=10)
async def counter(ctx: Context[int, Counting]) -> None:
    """A counter that also knows how to fail, hang, stay busy and delete its state."""
    CAPTURED[ctx.key].append(ctx)
    LOG[ctx.key].append(("run", now()))
    seen = 0  # a local of this run: reset by every restart
    async for msg in ctx.inbox:
        seen += 1
        match msg:
            case Add(amount=amount):
                msg.reply_to.tell(await ctx.state.update(lambda s: s + amount))
            case Get():
                msg.reply_to.tell(ctx.state.value)
            case Put(value=value):
                msg.reply_to.tell(await ctx.state.set(value))
            case Boom(write_first=value):
                if value is not None:
                    await ctx.state.set(value)
                LOG[ctx.key].append(("boom", now()))
                raise ValueError(f"boom at {ctx.key}")
            case Peek():
                msg.reply_to.tell((ctx.state.value, seen))
            case Hang(value=value):
                await ctx.state.set(value)
                LOG[ctx.key].append(("hang", now()))
                try:
                    await asyncio.sleep(3600)
                except asyncio.CancelledError:
                    LOG[ctx.key].append(("cancelled", now()))
                    raise
                LOG[ctx.key].append(("hang finished", now()))
                msg.reply_to.tell("finished")
            case Busy(seconds=seconds):
                LOG[ctx.key].append(("busy", now()))
                await asyncio.sleep(seconds)
            case Wipe():
                await ctx.state.delete()
                msg.reply_to.tell(ctx.state.value)
    LOG[ctx.key].append(("returned", now()))


@actor(initial=0, idle_after=timedelta(seconds=5))
async def short_lived(ctx: Context[int, Add | Get]) -> None:
    """A counter whose type idles out after 5 s instead of the system's minute."""
    async for msg in ctx.inbox:
        match msg:
            case Add(amount=amount):
                msg.reply_to.tell(await ctx.state.update(lambda s: s + amount))
            case Get():
                msg.reply_to.tell(ctx.state.value)


@actor(initial=0, backoff=Backoff(first=timedelta(milliseconds=500), factor=4.0))
async def fragile(ctx: Context[int, Boom | Get]) -> None:
    """Fails on Boom; restarts on its own backoff (500 ms, x4)."""
    async for msg in ctx.inbox:
        match msg:
            case Boom():
                raise ValueError("fragile")
            case Get():
                msg.reply_to.tell(ctx.state.value)


# ============================================================================ first activation


def test_ref_starts_key_from_type_initial(recorder: Recorder) -> None:
    """system.ref alone starts the key: the body runs before any message, from the type's initial, with @active written."""
    fresh("first")

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            system.ref(counter, "first")
            await settle()
            assert LOG["first"] == [("run", 0.0)]
            assert (counter.name, "first") in system.activations()
            pages = system.pages(counter, "first")
            assert "@active" in pages and "state" in pages
            [started] = recorder.of(ActivationStarted)
            assert (started.actor, started.key, started.behavior, started.recovered, started.restart) == (
                counter.name,
                "first",
                counter.name,
                False,
                0,
            )
            assert await system.ref(counter, "first").ask(Get()) == 10
            assert len(recorder.of(ActivationStarted)) == 1  # the second ref reached the same activation

    run_virtual(main)


def test_ref_initial_overrides_type_initial_for_new_key(recorder: Recorder) -> None:
    """ref(initial=...) gives a key that has no state that initial instead of the type's."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            ref = system.ref(counter, "seeded", initial=50)
            assert await ref.ask(Get()) == 50
            assert await ref.ask(Add(1)) == 51
            assert await system.ref(counter, "plain").ask(Get()) == 10
            assert [e.recovered for e in recorder.of(ActivationStarted)] == [False, False]

    run_virtual(main)


def test_ref_initial_ignored_when_key_has_state(recorder: Recorder) -> None:
    """A key with saved state recovers it: ref(initial=...) does not override recovered state."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            ref = system.ref(counter, "kept")
            assert await ref.ask(Put(7)) == 7
            await release(system, counter, "kept")
            assert (counter.name, "kept") not in system.activations()
            again = system.ref(counter, "kept", initial=50)
            assert await again.ask(Get()) == 7
            assert [(e.key, e.recovered) for e in recorder.of(ActivationStarted)] == [("kept", False), ("kept", True)]

    run_virtual(main)


# ============================================================================ idle deactivation


def test_idle_deactivation_after_default_minute(recorder: Recorder) -> None:
    """Default idle_after is 1 min: active at 59 s, gone after 60 s; state kept, @active cleared, next message reactivates."""
    fresh("idle")

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            ref = system.ref(counter, "idle")
            assert await ref.ask(Add(3)) == 13
            await asyncio.sleep(59)
            assert (counter.name, "idle") in system.activations()
            assert "@active" in system.pages(counter, "idle")
            assert recorder.of(ActivationEnded) == []
            await asyncio.sleep(1.5)  # t = 60.5
            assert (counter.name, "idle") not in system.activations()
            pages = system.pages(counter, "idle")
            assert "@active" not in pages
            assert "state" in pages
            [started] = recorder.of(ActivationStarted)
            [ended] = recorder.of(ActivationEnded)
            assert (ended.actor, ended.key, ended.lease, ended.reason) == (counter.name, "idle", started.lease, "idle")
            assert LOG["idle"] == [("run", 0.0), ("returned", 60.0)]  # the inbox ended: the body returned

            assert await ref.ask(Add(4)) == 17  # reactivated with the saved state
            assert [e.recovered for e in recorder.of(ActivationStarted)] == [False, True]
            assert "@active" in system.pages(counter, "idle")

    run_virtual(main)


def test_idle_interval_counts_from_last_message(recorder: Recorder) -> None:
    """Each message restarts the idle interval: a message at 30 s keeps the key until 90 s."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            ref = system.ref(counter, "busy-ish")
            await ref.ask(Add(1))
            await asyncio.sleep(30)
            await ref.ask(Add(1))
            await asyncio.sleep(59.5)  # t = 89.5: 59.5 s after the last message
            assert (counter.name, "busy-ish") in system.activations()
            await asyncio.sleep(1)  # t = 90.5
            assert (counter.name, "busy-ish") not in system.activations()
            assert [e.reason for e in recorder.of(ActivationEnded)] == ["idle"]

    run_virtual(main)


def test_idle_after_of_type_and_system(recorder: Recorder) -> None:
    """The type's idle_after wins over the system's; the system's idle_after applies to other types."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder, idle_after=timedelta(seconds=20)) as system:
            short = system.ref(short_lived, "s")
            normal = system.ref(counter, "n")
            await short.ask(Add(1))
            await normal.ask(Add(1))
            await asyncio.sleep(4.9)
            assert (short_lived.name, "s") in system.activations()
            await asyncio.sleep(0.2)  # t = 5.1
            assert (short_lived.name, "s") not in system.activations()
            assert (counter.name, "n") in system.activations()
            await asyncio.sleep(14.8)  # t = 19.9
            assert (counter.name, "n") in system.activations()
            await asyncio.sleep(0.2)  # t = 20.1
            assert (counter.name, "n") not in system.activations()
            assert [(e.key, e.reason) for e in recorder.of(ActivationEnded)] == [("s", "idle"), ("n", "idle")]

    run_virtual(main)


# ============================================================================ body failure


def test_body_failure_fails_pending_ask_with_actor_failed(recorder: Recorder) -> None:
    """A body that raises fails the pending ask with ActorFailed carrying actor, key, the error and the message."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            ref = system.ref(counter, "fails")
            with pytest.raises(ActorFailed) as info:
                await ref.ask(Boom())
            failure = info.value
            assert failure.actor == counter.name
            assert failure.key == "fails"
            assert isinstance(failure.error, ValueError)
            assert str(failure.error) == "boom at fails"
            assert failure.message == Boom()
            assert "boom at fails" in str(failure) and "Boom" in str(failure)
            [failed] = recorder.of(ActivationFailed)
            assert (failed.actor, failed.key, failed.message, failed.retry_in) == (counter.name, "fails", "Boom", 0.1)
            assert "boom at fails" in failed.error
            dropped = [e for e in recorder.of(MessageDropped) if e.key == "fails"]
            assert [e.message for e in dropped] == ["Boom"]
            assert await ref.ask(Get()) == 10  # the key still serves

    run_virtual(main)


@dataclass(frozen=True)
class Forward(Askable[int]):
    pass


@actor(initial=0)
async def front(ctx: Context[int, Forward]) -> None:
    """Forwards to a counter that fails, without catching its failure."""
    async for msg in ctx.inbox:
        msg.reply_to.tell(await ctx.system.ref(counter, "behind").ask(Boom()))


def test_body_failure_caused_by_a_failed_inner_ask_names_the_failing_body(recorder: Recorder) -> None:
    """A body that raises because its own ask failed still fails its pending ask with ActorFailed naming itself."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            with pytest.raises(ActorFailed) as info:
                await system.ref(front, "f").ask(Forward())
            failure = info.value
            assert (failure.actor, failure.key, failure.message) == (front.name, "f", Forward())
            inner = failure.error
            assert isinstance(inner, ActorFailed)
            assert (inner.actor, inner.key, inner.message) == (counter.name, "behind", Boom())
            assert [e.actor for e in recorder.of(ActivationFailed)] == [counter.name, front.name]

    run_virtual(main)


def test_failed_body_restarts_from_last_saved_state(recorder: Recorder) -> None:
    """After a failure the body restarts from the last saved state: a write made before the raise is kept, locals reset."""
    fresh("restart")

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            ref = system.ref(counter, "restart")
            assert await ref.ask(Add(1)) == 11
            assert await ref.ask(Peek()) == (11, 2)
            with pytest.raises(ActorFailed):
                await ref.ask(Boom(write_first=42))
            assert await ref.ask(Peek()) == (42, 1)  # state kept; `seen` is a new local of the new run
            assert [e.restart for e in recorder.of(ActivationStarted)] == [0, 1]
            assert [e.recovered for e in recorder.of(ActivationStarted)] == [False, False]

    run_virtual(main)


def test_backoff_doubles_for_consecutive_failures(recorder: Recorder) -> None:
    """Consecutive failures restart after 100 ms then 200 ms (virtual time); a handled message resets the backoff."""
    fresh("backoff")

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            ref = system.ref(counter, "backoff")
            await settle()
            ref.tell(Boom())
            ref.tell(Boom())
            assert await ref.ask(Get()) == 10  # queued behind both failures
            assert now() == pytest.approx(0.3)
            runs = [t for what, t in LOG["backoff"] if what == "run"]
            assert runs == pytest.approx([0.0, 0.1, 0.3])
            assert [e.retry_in for e in recorder.of(ActivationFailed)] == pytest.approx([0.1, 0.2])

            ref.tell(Boom())  # not consecutive: Get was handled in between
            assert await ref.ask(Get()) == 10
            assert now() == pytest.approx(0.4)
            assert [e.retry_in for e in recorder.of(ActivationFailed)] == pytest.approx([0.1, 0.2, 0.1])

    run_virtual(main)


def test_backoff_from_system_and_type_settings(recorder: Recorder) -> None:
    """The system's Backoff(first, factor) sets restart delays (first, first*factor); a type's backoff= wins over it."""
    fresh("custom-backoff")

    async def main(clock: LoopClock) -> None:
        backoff = Backoff(first=timedelta(seconds=1), factor=3.0)
        async with ActorSystem(clock=clock, observer=recorder, backoff=backoff) as system:
            ref = system.ref(counter, "custom-backoff")
            await settle()
            ref.tell(Boom())
            ref.tell(Boom())
            assert await ref.ask(Get()) == 10
            assert now() == pytest.approx(4.0)
            assert [e.retry_in for e in recorder.of(ActivationFailed)] == pytest.approx([1.0, 3.0])

            own = system.ref(fragile, "f")
            await settle()
            own.tell(Boom())
            own.tell(Boom())
            assert await own.ask(Get()) == 0
            assert now() == pytest.approx(4.0 + 0.5 + 2.0)
            fragile_delays = [e.retry_in for e in recorder.of(ActivationFailed) if e.actor == fragile.name]
            assert fragile_delays == pytest.approx([0.5, 2.0])

    run_virtual(main)


def test_backoff_is_capped_at_limit(recorder: Recorder) -> None:
    """Backoff grows first*factor**n until it reaches limit, then stays there: 1 s, 2 s, 3 s, 3 s."""
    fresh("capped")

    async def main(clock: LoopClock) -> None:
        backoff = Backoff(first=timedelta(seconds=1), limit=timedelta(seconds=3), factor=2.0)
        async with ActorSystem(clock=clock, observer=recorder, backoff=backoff) as system:
            ref = system.ref(counter, "capped")
            await settle()
            for _ in range(4):
                ref.tell(Boom())
            assert await ref.ask(Get()) == 10
            assert now() == pytest.approx(9.0)
            assert [e.retry_in for e in recorder.of(ActivationFailed)] == pytest.approx([1.0, 2.0, 3.0, 3.0])
            runs = [t for what, t in LOG["capped"] if what == "run"]
            assert runs == pytest.approx([0.0, 1.0, 3.0, 6.0, 9.0])

    run_virtual(main)


def test_messages_queued_behind_failure_are_handled_after_restart(recorder: Recorder) -> None:
    """The failing message is dropped; the messages queued behind it are handled, in order, after the restart."""
    fresh("queue")

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            ref = system.ref(counter, "queue")
            await settle()
            boom = asyncio.create_task(ref.ask(Boom()))
            first = asyncio.create_task(ref.ask(Add(1)))
            second = asyncio.create_task(ref.ask(Add(2)))
            with pytest.raises(ActorFailed):
                await boom
            assert now() == 0.0  # the ask fails at once, not after the backoff
            assert await first == 11
            assert await second == 13
            assert now() == pytest.approx(0.1)
            assert LOG["queue"] == [("run", 0.0), ("boom", 0.0), ("run", pytest.approx(0.1))]

    run_virtual(main)


# ============================================================================ cancelled asks


def test_cancelled_ask_in_progress_cancels_body_and_keeps_writes(recorder: Recorder) -> None:
    """Cancelling an ask being handled cancels the body at its await, restarts it at once; writes done survive."""
    fresh("cancel")

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            ref = system.ref(counter, "cancel")
            hang = asyncio.create_task(ref.ask(Hang(77)))
            await asyncio.sleep(1)
            hang.cancel()
            with pytest.raises(asyncio.CancelledError):
                await hang
            assert await ref.ask(Peek()) == (77, 1)  # the write survived; a new run read Peek first
            assert now() == 1.0  # no backoff for a cancellation
            assert LOG["cancel"] == [("run", 0.0), ("hang", 0.0), ("cancelled", 1.0), ("run", 1.0)]
            assert [e.reason for e in recorder.of(ActivationEnded)] == ["cancelled"]
            assert [e.restart for e in recorder.of(ActivationStarted)] == [0, 1]
            assert recorder.of(ActivationFailed) == []
            assert [e.message for e in recorder.of(MessageDropped) if e.key == "cancel"] == ["Hang"]
            await asyncio.sleep(3600)
            assert [what for what, _ in LOG["cancel"] if what == "hang finished"] == []

    run_virtual(main)


def test_cancelled_ask_still_queued_is_dropped(recorder: Recorder) -> None:
    """An ask cancelled while its message is queued drops the message: it is never handled."""
    fresh("queued-cancel")

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            ref = system.ref(counter, "queued-cancel")
            ref.tell(Busy(5))
            await settle()
            doomed = asyncio.create_task(ref.ask(Add(100)))
            await asyncio.sleep(1)
            doomed.cancel()
            with pytest.raises(asyncio.CancelledError):
                await doomed
            assert await ref.ask(Add(1)) == 11  # Add(100) was never applied
            assert now() == 5.0
            assert await ref.ask(Peek()) == (11, 3)  # Busy, Add(1), Peek: Add(100) never reached the body
            dropped = [e for e in recorder.of(MessageDropped) if e.key == "queued-cancel"]
            assert [(e.message, e.reason) for e in dropped] == [("Add", "ask cancelled while queued")]

    run_virtual(main)


def test_release_deactivates_as_if_idle(recorder: Recorder) -> None:
    """release() handles what is queued, then ends the activation like idle: @active cleared, state kept."""
    fresh("release")

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            ref = system.ref(counter, "release")
            assert await ref.ask(Add(2)) == 12
            ref.tell(Add(3))
            await release(system, counter, "release")
            assert now() == 0.0  # no idle wait
            assert (counter.name, "release") not in system.activations()
            pages = system.pages(counter, "release")
            assert "@active" not in pages and "state" in pages
            [ended] = recorder.of(ActivationEnded)
            assert (ended.key, ended.reason) == ("release", "released")
            assert LOG["release"][-1] == ("returned", 0.0)
            assert await ref.ask(Get()) == 15  # the queued Add(3) was handled before release
            assert [e.recovered for e in recorder.of(ActivationStarted)] == [False, True]
            await release(system, counter, "never-started")  # releasing a key that is not running is a no-op

    run_virtual(main)


def test_a_release_whose_run_is_stopped_while_it_waits_returns_and_is_not_cancelled() -> None:
    """A release waiting for a busy run that the system stops meanwhile returns None when the run ends: no CancelledError for a caller nobody cancelled."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock) as system:
            ref = system.ref(worker, "stopped-release")
            ref.tell(Work(1, 10))
            await settle()
            releasing = asyncio.get_running_loop().create_task(system.release(worker, "stopped-release"))
            await asyncio.sleep(1)
            assert not releasing.done()  # the run is still in Work(1)
            await system.stop()
            outcome = await asyncio.gather(releasing, return_exceptions=True)
            assert (outcome, releasing.cancelled(), now()) == ([None], False, 1.0)

    run_virtual(main)


# ============================================================================ one mailbox reader


@dataclass(frozen=True)
class Work:
    n: int
    seconds: float


@dataclass(frozen=True)
class Report(Askable[tuple[tuple[str, int, float], ...]]):
    pass


@actor(initial=0)
async def worker(ctx: Context[int, Work | Report]) -> None:
    """Handles Work one at a time, awaiting inside the handler."""
    log: list[tuple[str, int, float]] = []
    async for msg in ctx.inbox:
        match msg:
            case Work(n=n, seconds=seconds):
                log.append(("begin", n, now()))
                await asyncio.sleep(seconds)
                log.append(("end", n, now()))
            case Report():
                msg.reply_to.tell(tuple(log))


def test_one_reader_in_order_and_await_delays_next() -> None:
    """Messages are handled one at a time, in order; an await in a handler delays the next message."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock) as system:
            ref = system.ref(worker, "w")
            ref.tell(Work(1, 2))
            ref.tell(Work(2, 1))
            ref.tell(Work(3, 0))
            log = await ref.ask(Report())
            assert log == (
                ("begin", 1, 0.0),
                ("end", 1, 2.0),
                ("begin", 2, 2.0),
                ("end", 2, 3.0),
                ("begin", 3, 3.0),
                ("end", 3, 3.0),
            )
            assert now() == 3.0

    run_virtual(main)


def test_other_keys_run_while_one_key_awaits() -> None:
    """While one key awaits inside a handler, other keys keep handling their messages."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock) as system:
            slow = system.ref(worker, "slow")
            other = system.ref(worker, "other")
            slow.tell(Work(1, 8))
            other.tell(Work(9, 0))
            assert await other.ask(Report()) == (("begin", 9, 0.0), ("end", 9, 0.0))
            assert now() == 0.0
            assert await slow.ask(Report()) == (("begin", 1, 0.0), ("end", 1, 8.0))
            assert now() == 8.0

    run_virtual(main)


@dataclass(frozen=True)
class Note:
    n: int


@dataclass(frozen=True)
class Notes(Askable[tuple[int, ...]]):
    pass


@actor(initial=())
async def one_at_a_time(ctx: Context[tuple[int, ...], Note | Notes]) -> None:
    """Reads a single message per run, then returns."""
    async for msg in ctx.inbox:
        match msg:
            case Note(n=n):
                await ctx.state.update(lambda s: s + (n,))
            case Notes():
                msg.reply_to.tell(ctx.state.value)
        return


def test_body_returning_with_unread_messages_reruns(recorder: Recorder) -> None:
    """A body that returns while messages are queued runs again; with nothing queued the key deactivates."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            ref = system.ref(one_at_a_time, "o")
            await settle()
            # the first run is waiting on its inbox; queue three messages behind each other
            ref.tell(Note(1))
            ref.tell(Note(2))
            ref.tell(Note(3))
            assert await ref.ask(Notes()) == (1, 2, 3)
            await settle()
            assert [e.restart for e in recorder.of(ActivationStarted)] == [0, 1, 2, 3]
            assert (one_at_a_time.name, "o") not in system.activations()
            assert "@active" not in system.pages(one_at_a_time, "o")
            assert now() == 0.0
            ref.tell(Note(4))
            assert await ref.ask(Notes()) == (1, 2, 3, 4)

    run_virtual(main)


# ============================================================================ work whose results come back as messages


@dataclass(frozen=True)
class Compute(Askable[int]):
    x: int


@dataclass(frozen=True)
class Computed:
    value: int
    to: Ref[int]


@dataclass(frozen=True)
class Ping(Askable[str]):
    pass


async def slow_square(x: int) -> int:
    await asyncio.sleep(5)
    if x < 0:
        raise ArithmeticError(f"negative {x}")
    return x * x


@actor(initial=0)
async def offloader(ctx: Context[int, Compute | Computed | Ping]) -> None:
    """Offloads Compute with ctx.to_self and keeps reading its inbox."""
    async for msg in ctx.inbox:
        match msg:
            case Compute(x=x, reply_to=reply_to):
                ctx.to_self(
                    slow_square(x),
                    lambda value, to=reply_to: Computed(value, to),
                    failed=lambda error, to=reply_to: Computed(-1, to),
                )
            case Computed(value=value, to=to):
                await ctx.state.set(value)
                to.tell(value)
            case Ping():
                msg.reply_to.tell("pong")


def test_to_self_maps_result_into_a_message_without_blocking() -> None:
    """ctx.to_self runs work beside the body; the inbox keeps being read and the result arrives as a message."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock) as system:
            ref = system.ref(offloader, "o")
            compute = asyncio.create_task(ref.ask(Compute(7)))
            assert await ref.ask(Ping()) == "pong"
            assert now() == 0.0
            assert await compute == 49
            assert now() == 5.0
            failing = asyncio.create_task(ref.ask(Compute(-3)))
            assert await failing == -1  # failed= maps the exception into a message
            assert now() == 10.0

    run_virtual(main)


@dataclass(frozen=True)
class Double(Askable[int]):
    x: int


@actor(initial=0)
async def doubler(ctx: Context[int, Double]) -> None:
    """Answers Double after 3 s."""
    async for msg in ctx.inbox:
        await asyncio.sleep(3)
        msg.reply_to.tell(msg.x * 2)


@dataclass(frozen=True)
class Request(Askable[int]):
    x: int


@dataclass(frozen=True)
class Doubled:
    value: int
    to: Ref[int]


@actor(initial=0)
async def requester(ctx: Context[int, Request | Doubled | Ping]) -> None:
    """Asks the doubler with ctx.ask and answers when the mapped reply arrives."""
    target = ctx.system.ref(doubler, "d")
    async for msg in ctx.inbox:
        match msg:
            case Request(x=x, reply_to=reply_to):
                ctx.ask(target, Double(x), lambda value, to=reply_to: Doubled(value, to))
            case Doubled(value=value, to=to):
                to.tell(value + 1)
            case Ping():
                msg.reply_to.tell("pong")


def test_ctx_ask_maps_reply_into_a_message_without_blocking() -> None:
    """ctx.ask does not block the inbox: other messages are handled, then the mapped reply arrives as a message."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock) as system:
            ref = system.ref(requester, "r")
            request = asyncio.create_task(ref.ask(Request(4)))
            await settle()
            assert await ref.ask(Ping()) == "pong"
            assert now() == 0.0
            assert await request == 9
            assert now() == 3.0

    run_virtual(main)


@dataclass(frozen=True)
class Tick:
    n: int


@dataclass(frozen=True)
class Listen(Askable[str]):
    count: int


@dataclass(frozen=True)
class Heard(Askable[tuple[tuple[int, float], ...]]):
    pass


async def ticks(count: int) -> Any:
    for n in range(count):
        await asyncio.sleep(1)
        yield Tick(n)


@actor(initial=())
async def listener(ctx: Context[tuple[tuple[int, float], ...], Tick | Listen | Heard]) -> None:
    """Merges an async generator of Ticks into its inbox."""
    async for msg in ctx.inbox:
        match msg:
            case Listen(count=count):
                ctx.merge(ticks(count))
                msg.reply_to.tell("listening")
            case Tick(n=n):
                await ctx.state.update(lambda s: s + ((n, now()),))
            case Heard():
                msg.reply_to.tell(ctx.state.value)


def test_merge_delivers_async_generator_items_as_messages() -> None:
    """ctx.merge delivers each item of an async generator into the inbox, in order, as it is produced."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock) as system:
            ref = system.ref(listener, "l")
            assert await ref.ask(Listen(3)) == "listening"
            assert await ref.ask(Heard()) == ()
            await asyncio.sleep(3.5)
            assert await ref.ask(Heard()) == ((0, 1.0), (1, 2.0), (2, 3.0))

    run_virtual(main)


@dataclass(frozen=True)
class Spawn:
    seconds: int


@dataclass(frozen=True)
class Finished:
    seconds: int
    at: float


@dataclass(frozen=True)
class Results(Askable[tuple[tuple[int, float], ...]]):
    pass


@actor(initial=())
async def grouped(ctx: Context[tuple[tuple[int, float], ...], Spawn | Finished | Results]) -> None:
    """Runs its inbox loop inside an asyncio.TaskGroup; spawned tasks report back as messages."""

    async def work(seconds: int) -> None:
        await asyncio.sleep(seconds)
        ctx.self.tell(Finished(seconds, now()))

    async with asyncio.TaskGroup() as group:
        async for msg in ctx.inbox:
            match msg:
                case Spawn(seconds=seconds):
                    group.create_task(work(seconds))
                case Finished(seconds=seconds, at=at):
                    await ctx.state.update(lambda s: s + ((seconds, at),))
                case Results():
                    msg.reply_to.tell(ctx.state.value)


def test_taskgroup_inside_body_runs_tasks_concurrently() -> None:
    """A body can run an asyncio.TaskGroup: its tasks run concurrently with the inbox loop."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock) as system:
            ref = system.ref(grouped, "g")
            ref.tell(Spawn(3))
            ref.tell(Spawn(1))
            assert await ref.ask(Results()) == ()
            await asyncio.sleep(3.5)
            assert await ref.ask(Results()) == ((1, 1.0), (3, 3.0))

    run_virtual(main)


# ============================================================================ reentrancy


CAUGHT: list[BaseException] = []


@dataclass(frozen=True)
class Relay(Askable[str]):
    pass


@dataclass(frozen=True)
class Bounce(Askable[str]):
    back: Ref[Relay]


@actor(initial=0)
async def relay_a(ctx: Context[int, Relay]) -> None:
    """Asks relay_b (blocking) and passes its answer on."""
    async for msg in ctx.inbox:
        answer = await ctx.system.ref(relay_b, "b").ask(Bounce(ctx.self))
        msg.reply_to.tell(answer)


@actor(initial=0)
async def relay_b(ctx: Context[int, Bounce]) -> None:
    """Asks back the key that asked it."""
    async for msg in ctx.inbox:
        try:
            answer = await msg.back.ask(Relay())
        except ReentrancyError as exc:
            CAUGHT.append(exc)
            answer = "refused"
        msg.reply_to.tell(answer)


@actor(initial=0)
async def narcissist(ctx: Context[int, Relay]) -> None:
    """Asks itself."""
    async for msg in ctx.inbox:
        try:
            answer = await ctx.self.ask(Relay())
        except ReentrancyError as exc:
            CAUGHT.append(exc)
            answer = "refused"
        msg.reply_to.tell(answer)


def test_reentrancy_a_asks_b_asks_a() -> None:
    """A asks B and B asks A back: B's ask raises ReentrancyError at once naming the chain (no deadlock, no timeout)."""
    CAUGHT.clear()

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock) as system:
            assert await system.ref(relay_a, "a").ask(Relay()) == "refused"
            assert now() == 0.0
            [error] = CAUGHT
            assert type(error) is ReentrancyError
            text = str(error)
            assert f"{relay_a.name}['a']" in text and f"{relay_b.name}['b']" in text
            assert await system.ref(relay_a, "a2").ask(Relay()) == "refused"  # the node keeps serving

    run_virtual(main)


def test_reentrancy_key_asks_itself() -> None:
    """A key asking itself raises ReentrancyError at the ask."""
    CAUGHT.clear()

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock) as system:
            assert await system.ref(narcissist, "n").ask(Relay()) == "refused"
            assert now() == 0.0
            [error] = CAUGHT
            assert type(error) is ReentrancyError
            assert f"{narcissist.name}['n']" in str(error)

    run_virtual(main)


@dataclass(frozen=True)
class Visit(Askable[str]):
    back: Ref[Relay | Visit] | None = None


@actor(initial=0)
async def host(ctx: Context[int, Relay | Visit]) -> None:
    """Asks guest (blocking) on Visit; answers Relay."""
    async for msg in ctx.inbox:
        match msg:
            case Visit():
                msg.reply_to.tell(await ctx.system.ref(guest, "g").ask(Visit(ctx.self)))
            case Relay():
                msg.reply_to.tell("host answers")


@actor(initial=0)
async def guest(ctx: Context[int, Relay | Visit]) -> None:
    """Replies to the host first, then asks the host back once the host is no longer waiting."""
    async for msg in ctx.inbox:
        match msg:
            case Visit(back=back):
                msg.reply_to.tell("guest replied")
                await asyncio.sleep(1)
                assert back is not None
                try:
                    LOG["guest"].append(await back.ask(Relay()))
                except ReentrancyError as exc:
                    CAUGHT.append(exc)
            case Relay():
                msg.reply_to.tell("guest answers")


def test_ask_back_after_replying_is_not_reentrancy() -> None:
    """Once B has answered A, A is no longer waiting: B asking A later is served, not refused as reentrant."""
    CAUGHT.clear()
    fresh("guest")

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock) as system:
            assert await system.ref(host, "h").ask(Visit()) == "guest replied"
            await asyncio.sleep(2)
            assert CAUGHT == []
            assert LOG["guest"] == ["host answers"]

    run_virtual(main)


@dataclass(frozen=True)
class Hop(Askable[str]):
    onward: tuple[str, ...]


@actor(initial=0)
async def hopper(ctx: Context[int, Hop]) -> None:
    """Asks the next key of the path (blocking) and passes the answer back."""
    async for msg in ctx.inbox:
        if not msg.onward:
            msg.reply_to.tell(f"end at {ctx.key}")
            continue
        try:
            answer = await ctx.system.ref(hopper, msg.onward[0]).ask(Hop(msg.onward[1:]))
        except ReentrancyError as exc:
            CAUGHT.append(exc)
            answer = f"refused at {ctx.key}"
        msg.reply_to.tell(answer)


def test_reentrancy_through_a_longer_chain() -> None:
    """a asks b, b asks c, c asks a: c's ask raises ReentrancyError naming the whole chain; a chain without a loop works."""
    CAUGHT.clear()

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock) as system:
            assert await system.ref(hopper, "a").ask(Hop(("b", "c", "d"))) == "end at d"
            assert CAUGHT == []
            assert await system.ref(hopper, "a").ask(Hop(("b", "c", "a"))) == "refused at c"
            assert now() == 0.0
            [error] = CAUGHT
            text = str(error)
            names = [f"{hopper.name}[{key!r}]" for key in ("a", "b", "c")]
            positions = [text.index(name) for name in names]
            assert positions == sorted(positions)

    run_virtual(main)


@dataclass(frozen=True)
class Start(Askable[int]):
    pass


@dataclass(frozen=True)
class Back(Askable[int]):
    pass


@dataclass(frozen=True)
class Answered:
    value: int
    to: Ref[int]


@actor(initial=0)
async def caller_nonblocking(ctx: Context[int, Start | Back | Answered]) -> None:
    """Asks callee with ctx.ask, so the callee may ask it back while the reply is pending."""
    async for msg in ctx.inbox:
        match msg:
            case Start(reply_to=reply_to):
                ctx.ask(ctx.system.ref(callee, "c"), Start(), lambda v, to=reply_to: Answered(v, to))
            case Back():
                msg.reply_to.tell(5)
            case Answered(value=value, to=to):
                to.tell(value)


@actor(initial=0)
async def callee(ctx: Context[int, Start]) -> None:
    async for msg in ctx.inbox:
        back = await ctx.system.ref(caller_nonblocking, "x").ask(Back())
        msg.reply_to.tell(back * 10)


def test_ctx_ask_allows_ask_back() -> None:
    """With ctx.ask the asker keeps reading, so the target asking it back is no reentrancy: it is answered."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock) as system:
            assert await system.ref(caller_nonblocking, "x").ask(Start()) == 50
            assert now() == 0.0

    run_virtual(main)


# ============================================================================ ask timeout


@dataclass(frozen=True)
class Silence(Askable[int]):
    pass


@actor(initial=0)
async def mute(ctx: Context[int, Silence | Get]) -> None:
    """Reads Silence and never answers."""
    async for msg in ctx.inbox:
        if isinstance(msg, Get):
            msg.reply_to.tell(ctx.state.value)


@actor(initial=0, ask_timeout=timedelta(seconds=2))
async def impatient_mute(ctx: Context[int, Silence | Get]) -> None:
    """Like mute, with a 2 s ask timeout of its own."""
    async for msg in ctx.inbox:
        if isinstance(msg, Get):
            msg.reply_to.tell(ctx.state.value)


def test_ask_timeout_default_ten_seconds() -> None:
    """An unanswered ask raises TimeoutError after the system default of exactly 10 s."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock) as system:
            ref = system.ref(mute, "m")
            with pytest.raises(TimeoutError) as info:
                await ref.ask(Silence())
            assert now() == pytest.approx(10.0)
            assert "Silence" in str(info.value) and "10" in str(info.value)
            assert await ref.ask(Get()) == 0

    run_virtual(main)


def test_ask_timed_out_while_queued_is_never_handled(recorder: Recorder) -> None:
    """An ask that times out while its message waits in the mailbox drops that message: it is never handled."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            ref = system.ref(counter, "late")
            ref.tell(Busy(15))
            await settle()
            with pytest.raises(TimeoutError):
                await ref.ask(Add(100))
            assert now() == pytest.approx(10.0)
            assert await ref.ask(Get()) == 10
            assert now() == pytest.approx(15.0)
            dropped = [(e.message, e.reason) for e in recorder.of(MessageDropped) if e.key == "late"]
            assert dropped == [("Add", "ask cancelled while queued")]

    run_virtual(main)


def test_ask_timeout_of_system_and_type() -> None:
    """The system's ask_timeout applies unless the type sets its own ask_timeout."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, ask_timeout=timedelta(seconds=4)) as system:
            with pytest.raises(TimeoutError):
                await system.ref(mute, "m").ask(Silence())
            assert now() == pytest.approx(4.0)
            with pytest.raises(TimeoutError) as info:
                await system.ref(impatient_mute, "i").ask(Silence())
            assert now() == pytest.approx(6.0)
            assert "2 s" in str(info.value)
            assert await system.ref(impatient_mute, "i").ask(Get()) == 0

    run_virtual(main)


def test_each_ask_times_out_after_its_own_start() -> None:
    """Each ask gets its full timeout from the moment it was made: asks at 0 s and 3 s time out at 10 s and 13 s."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock) as system:
            ref = system.ref(mute, "staggered")
            timed_out: list[float] = []

            async def ask_once() -> None:
                with pytest.raises(TimeoutError):
                    await ref.ask(Silence())
                timed_out.append(now())

            first = asyncio.create_task(ask_once())
            await asyncio.sleep(3)
            second = asyncio.create_task(ask_once())
            quick = asyncio.create_task(system.ref(impatient_mute, "q").ask(Silence()))
            await asyncio.gather(first, second)
            with pytest.raises(TimeoutError):
                await quick
            assert timed_out == pytest.approx([10.0, 13.0])

    run_virtual(main)


# ============================================================================ refs in messages and state


@dataclass(frozen=True)
class Remember(Askable[str]):
    target: Ref[Add | Get]


@dataclass(frozen=True)
class CallRemembered(Askable[int]):
    amount: int


@actor(initial=None)
async def keeper(ctx: Context[Ref[Counting] | None, Remember | CallRemembered]) -> None:
    """Keeps a ref it received in a message in its state, and uses it later."""
    async for msg in ctx.inbox:
        match msg:
            case Remember(target=target):
                await ctx.state.set(target)
                msg.reply_to.tell(repr(target))
            case CallRemembered(amount=amount):
                target = ctx.state.value
                assert target is not None
                msg.reply_to.tell(await target.ask(Add(amount)))


def test_ref_travels_in_message_and_state_across_deactivation(recorder: Recorder) -> None:
    """A ref sent in a message and kept in state still reaches its entity after the keeper was deactivated and reactivated."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            target = system.ref(counter, "target")
            kept = system.ref(keeper, "k")
            await kept.ask(Remember(target))
            assert await kept.ask(CallRemembered(1)) == 11
            await release(system, keeper, "k")
            await release(system, counter, "target")
            assert system.activations() == []
            assert await kept.ask(CallRemembered(2)) == 13
            keeper_starts = [e.recovered for e in recorder.of(ActivationStarted) if e.actor == keeper.name]
            assert keeper_starts == [False, True]
            await asyncio.sleep(61)  # both idle out; the ref in state still works
            assert await kept.ask(CallRemembered(3)) == 16

    run_virtual(main)


# ============================================================================ become


@dataclass(frozen=True)
class Flip(Askable[str]):
    pass


@dataclass(frozen=True)
class Show(Askable[str]):
    pass


@actor(initial=0)
async def light_off(ctx: Context[int, Flip | Show]) -> None:
    """Off: counts Shows in an int; Flip becomes light_on with a str state."""
    CAPTURED[ctx.key].append(ctx)
    async for msg in ctx.inbox:
        match msg:
            case Flip():
                await ctx.become(light_on, f"on after {ctx.state.value} shows")
                msg.reply_to.tell("flipped")  # code after become still runs
                LOG[ctx.key].append("after become")
            case Show():
                shows = await ctx.state.update(lambda s: s + 1)
                msg.reply_to.tell(f"off:{shows}")
    LOG[ctx.key].append("off returned")


@actor(initial="")
async def light_on(ctx: Context[str, Flip | Show]) -> None:
    """On: a str state; Flip goes back to light_off with 0."""
    CAPTURED[ctx.key].append(ctx)
    async for msg in ctx.inbox:
        match msg:
            case Flip():
                await ctx.become(light_off, 0)
                msg.reply_to.tell("flipped back")
            case Show():
                msg.reply_to.tell(f"on:{ctx.state.value}")


@dataclass(frozen=True)
class Other(Askable[str]):
    pass


@actor(initial=0)
async def takes_other(ctx: Context[int, Other]) -> None:
    async for msg in ctx.inbox:
        msg.reply_to.tell("other")


@actor(initial=0)
async def bad_becomer(ctx: Context[int, Flip | Show]) -> None:
    """Tries to become a type that takes different messages, then writes its own state."""
    async for msg in ctx.inbox:
        match msg:
            case Flip():
                try:
                    await ctx.become(takes_other, 0)
                except SchemaError as exc:
                    CAUGHT.append(exc)
                await ctx.state.set(ctx.state.value + 1)
                msg.reply_to.tell("stayed")
            case Show():
                msg.reply_to.tell(f"bad:{ctx.state.value}")


def test_become_takes_effect_at_next_inbox_read(recorder: Recorder) -> None:
    """become switches behavior at the next inbox read: code after it runs, queued messages go to the replacement."""
    fresh("lamp")

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            ref = system.ref(light_off, "lamp")
            assert await ref.ask(Show()) == "off:1"
            flip = asyncio.create_task(ref.ask(Flip()))
            show = asyncio.create_task(ref.ask(Show()))  # queued behind Flip
            assert await flip == "flipped"
            assert await show == "on:on after 1 shows"  # the replacement, with its own (str) state
            assert LOG["lamp"] == ["after become", "off returned"]
            page = system.pages(light_off, "lamp")["@behavior"]
            assert light_on.name.encode() in page
            assert [e.behavior for e in recorder.of(ActivationStarted)] == [light_off.name, light_on.name]
            assert [e.reason for e in recorder.of(ActivationEnded)] == ["become"]
            assert system.activations() == [(light_off.name, "lamp")]  # identity unchanged

            assert await ref.ask(Flip()) == "flipped back"
            assert await ref.ask(Show()) == "off:1"
            assert "@behavior" not in system.pages(light_off, "lamp")

    run_virtual(main)


def test_become_to_type_with_other_messages_is_schema_error() -> None:
    """become to a type that takes different messages raises SchemaError, and the current run keeps its state writes."""
    CAUGHT.clear()

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock) as system:
            ref = system.ref(bad_becomer, "b")
            assert await ref.ask(Flip()) == "stayed"
            [error] = CAUGHT
            assert type(error) is SchemaError
            assert takes_other.name in str(error) and bad_becomer.name in str(error)
            assert await ref.ask(Show()) == "bad:1"
            assert "@behavior" not in system.pages(bad_becomer, "b")

    run_virtual(main)


def test_become_survives_idle_deactivation(recorder: Recorder) -> None:
    """After idle deactivation the key comes back with the replacement behavior and its state."""
    fresh("lamp2")

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            ref = system.ref(light_off, "lamp2")
            assert await ref.ask(Flip()) == "flipped"
            await asyncio.sleep(61)
            assert system.activations() == []
            assert await ref.ask(Show()) == "on:on after 0 shows"
            last = recorder.of(ActivationStarted)[-1]
            assert (last.behavior, last.recovered, last.restart) == (light_on.name, True, 0)

    run_virtual(main)


@dataclass(frozen=True)
class OpenThenFail(Askable[str]):
    pass


@dataclass(frozen=True)
class OpenThenHang(Askable[str]):
    pass


Gate = OpenThenFail | OpenThenHang | Show


@actor(initial=0)
async def gate_closed(ctx: Context[int, Gate]) -> None:
    """Becomes gate_open, then fails or hangs in the same step."""
    async for msg in ctx.inbox:
        match msg:
            case OpenThenFail():
                await ctx.become(gate_open, "opened")
                raise RuntimeError("failed after become")
            case OpenThenHang():
                await ctx.become(gate_open, "opened")
                await asyncio.sleep(3600)
            case Show():
                msg.reply_to.tell(f"closed:{ctx.state.value}")


@actor(initial="")
async def gate_open(ctx: Context[str, Gate]) -> None:
    async for msg in ctx.inbox:
        match msg:
            case Show():
                msg.reply_to.tell(f"open:{ctx.state.value}")
            case _:
                msg.reply_to.tell("already open")


def test_become_then_failure_restarts_as_replacement(recorder: Recorder) -> None:
    """A run that becomes and then raises is restarted, after backoff, as the recorded replacement (not the old behavior)."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            ref = system.ref(gate_closed, "g")
            with pytest.raises(ActorFailed):
                await ref.ask(OpenThenFail())
            assert gate_open.name.encode() in system.pages(gate_closed, "g")["@behavior"]
            assert await ref.ask(Show()) == "open:opened"
            assert recorder.of(ActivationStarted)[-1].behavior == gate_open.name

    run_virtual(main)


def test_become_then_cancelled_ask_restarts_as_replacement(recorder: Recorder) -> None:
    """A run that becomes and is then cancelled by its asker restarts as the recorded replacement."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            ref = system.ref(gate_closed, "h")
            hang = asyncio.create_task(ref.ask(OpenThenHang()))
            await asyncio.sleep(1)
            hang.cancel()
            with pytest.raises(asyncio.CancelledError):
                await hang
            assert await ref.ask(Show()) == "open:opened"
            assert recorder.of(ActivationStarted)[-1].behavior == gate_open.name

    run_virtual(main)


# ============================================================================ lease fencing


def test_context_of_run_replaced_by_become_is_fenced(recorder: Recorder) -> None:
    """After become, the previous run's Context gets Fenced on state.set (WriteFailed fenced); the current run writes."""
    fresh("fence-become")

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            ref = system.ref(light_off, "fence-become")
            assert await ref.ask(Flip()) == "flipped"
            assert await ref.ask(Show()) == "on:on after 0 shows"
            old, current = CAPTURED["fence-become"]
            with pytest.raises(Fenced) as info:
                await old.state.set(99)
            assert "fence-become" in str(info.value)
            [failed] = recorder.of(WriteFailed)
            started = recorder.of(ActivationStarted)
            assert (failed.actor, failed.key, failed.lease, failed.operation, failed.reason) == (
                light_off.name,
                "fence-become",
                started[0].lease,
                "state.set",
                "fenced",
            )
            assert await current.state.set("written by the current run") == "written by the current run"
            assert await ref.ask(Show()) == "on:written by the current run"

    run_virtual(main)


def test_context_of_run_replaced_by_restart_is_fenced(recorder: Recorder) -> None:
    """After a failure restart, the failed run's Context gets Fenced; the restarted run writes."""
    fresh("fence-restart")

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            ref = system.ref(counter, "fence-restart")
            with pytest.raises(ActorFailed):
                await ref.ask(Boom())
            assert await ref.ask(Get()) == 10  # after the restart
            old, current = CAPTURED["fence-restart"]
            with pytest.raises(Fenced):
                await old.state.set(1)
            with pytest.raises(Fenced):
                await old.state.update(lambda s: s + 1)
            failed = recorder.of(WriteFailed)
            first_lease = recorder.of(ActivationStarted)[0].lease
            assert [(e.lease, e.reason) for e in failed] == [(first_lease, "fenced"), (first_lease, "fenced")]
            assert await ref.ask(Put(5)) == 5
            assert await current.state.set(6) == 6
            assert await ref.ask(Get()) == 6

    run_virtual(main)


def test_context_of_deactivated_run_is_fenced(recorder: Recorder) -> None:
    """After deactivation (and after reactivation) the old run's Context gets Fenced; the new run writes."""
    fresh("fence-idle")

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            ref = system.ref(counter, "fence-idle")
            assert await ref.ask(Put(1)) == 1
            await asyncio.sleep(61)
            assert system.activations() == []
            [old] = CAPTURED["fence-idle"]
            with pytest.raises(Fenced):
                await old.state.set(2)
            assert await ref.ask(Put(3)) == 3  # reactivates
            with pytest.raises(Fenced):
                await old.state.set(4)
            assert await ref.ask(Get()) == 3
            assert [e.reason for e in recorder.of(WriteFailed)] == ["fenced", "fenced"]
            assert {e.lease for e in recorder.of(WriteFailed)} == {recorder.of(ActivationStarted)[0].lease}

    run_virtual(main)


def test_cancelled_run_context_is_fenced(recorder: Recorder) -> None:
    """After a cancelled ask restarted the body, the cancelled run's Context gets Fenced."""
    fresh("fence-cancel")

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            ref = system.ref(counter, "fence-cancel")
            hang = asyncio.create_task(ref.ask(Hang(8)))
            await asyncio.sleep(1)
            hang.cancel()
            with pytest.raises(asyncio.CancelledError):
                await hang
            assert await ref.ask(Get()) == 8
            old, _current = CAPTURED["fence-cancel"]
            with pytest.raises(Fenced):
                await old.state.set(0)
            assert await ref.ask(Get()) == 8

    run_virtual(main)


# ============================================================================ state delete


def test_state_delete_returns_to_initial(recorder: Recorder) -> None:
    """ctx.state.delete() puts the key back to the type's initial, also after deactivation."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            ref = system.ref(counter, "del")
            assert await ref.ask(Add(5)) == 15
            assert await ref.ask(Wipe()) == 10
            assert await ref.ask(Get()) == 10
            assert await ref.ask(Add(1)) == 11
            assert await ref.ask(Wipe()) == 10
            await release(system, counter, "del")
            assert await ref.ask(Get()) == 10

    run_virtual(main)
