"""VirtualLoop: unmodified asyncio on simpy time, deterministic, refusing what would escape the simulation."""

from __future__ import annotations

import asyncio
import gc
import os
import random
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.errors import Deadlock, ForbiddenInSimulation, Livelock, SimulationTimeout
from sim.loop import (
    NS_PER_S,
    SimFuture,
    SimTask,
    VirtualLoop,
    describe_pending,
    loops_of,
    run_until_complete,
    skip_cancelled_timers,
)

ROOT = Path(__file__).resolve().parent.parent
S = NS_PER_S


@pytest.fixture
def env() -> simpy.Environment:
    return simpy.Environment()


@pytest.fixture
def loop(env: simpy.Environment) -> VirtualLoop:
    return VirtualLoop(env, "n1")


def run(env: simpy.Environment, loop: VirtualLoop, coro: Any, **kwargs: Any) -> Any:
    result = run_until_complete(env, loop, coro, **kwargs)
    assert asyncio.events._get_running_loop() is None
    return result


# ------------------------------------------------------------------------------------------ time


def test_sleep_a_day_lands_on_the_exact_nanosecond_at_once(env: simpy.Environment, loop: VirtualLoop) -> None:
    """asyncio.sleep(86400) ends exactly at 86400 s of virtual time, in far less than a second of real time."""

    async def main() -> float:
        await asyncio.sleep(86400)
        return loop.time()

    started = time.perf_counter()
    assert run(env, loop, main()) == 86400.0
    assert time.perf_counter() - started < 0.5
    assert env.now == 86400 * S
    assert type(env.now) is int
    assert loop.errors == []


def test_asyncio_timeout_fires_at_the_exact_instant(env: simpy.Environment, loop: VirtualLoop) -> None:
    """asyncio.timeout(2.5) interrupts a long sleep at exactly 2.5 s, and its when()/reschedule() work."""

    async def main() -> list[tuple[str, int]]:
        seen = []
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(2.5):
                await asyncio.sleep(3600)
        seen.append(("first", env.now))
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(None) as cm:
                assert cm.when() is None
                cm.reschedule(loop.time() + 0.75)
                assert cm.when() == loop.time() + 0.75
                await asyncio.sleep(3600)
        seen.append(("rescheduled", env.now))
        async with asyncio.timeout(10):
            await asyncio.sleep(1)  # finishes in time: the timeout's timer is cancelled
        seen.append(("in time", env.now))
        return seen

    assert run(env, loop, main()) == [("first", 2_500_000_000), ("rescheduled", 3_250_000_000), ("in time", 4_250_000_000)]
    assert loop.errors == []


def test_wait_for_times_out_at_the_exact_instant(env: simpy.Environment, loop: VirtualLoop) -> None:
    """asyncio.wait_for(sleep(10), 0.3) raises TimeoutError at exactly 0.3 s; a fast enough awaitable returns its value."""

    async def value() -> str:
        await asyncio.sleep(0.1)
        return "ok"

    async def main() -> tuple[int, str, int]:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.sleep(10), 0.3)
        timed_out_at = env.now
        result = await asyncio.wait_for(value(), 1)
        return timed_out_at, result, env.now

    assert run(env, loop, main()) == (300_000_000, "ok", 400_000_000)


def test_a_simulated_day_of_many_sleepers_runs_fast(env: simpy.Environment, loop: VirtualLoop) -> None:
    """100 tasks waking every 15 simulated minutes for a day (9600 wake-ups) take well under a second."""
    wakeups = []

    async def sleeper(i: int) -> None:
        for _ in range(96):
            await asyncio.sleep(900 + i / 1000)
            wakeups.append(i)

    async def main() -> None:
        await asyncio.gather(*(sleeper(i) for i in range(100)))

    started = time.perf_counter()
    run(env, loop, main())
    assert time.perf_counter() - started < 1.0
    assert len(wakeups) == 9600
    assert env.now == 96 * (900 * S + 99_000_000)  # exact: 96 x 900.099 s


def test_deadline_retry_loops_never_spin_at_one_instant(env: simpy.Environment, loop: VirtualLoop) -> None:
    """'sleep(deadline - time()) until time() >= deadline' and 're-arm call_at(when) until time() >= when' end at once."""

    async def retry(delay: float) -> int:
        deadline = loop.time() + delay
        sleeps = 0
        while loop.time() < deadline:
            await asyncio.sleep(deadline - loop.time())
            sleeps += 1
        return sleeps

    def due_check(when: float, log: list[int]) -> None:  # the TimerHeap pattern: fire only what time() says is due
        log.append(env.now)
        if loop.time() < when:
            loop.call_at(when, due_check, when, log)

    for start_ns, delay in [(0, 0.1), (123_456_789, 1e-10), (86_400 * S + 1, 900.099), (10**17 + 7, 0.3), (3 * 10**16 + 1, 2.5e-9)]:
        env.run(until=start_ns) if start_ns > env.now else None
        sleeps = run(env, loop, retry(delay))
        assert sleeps <= (2 if start_ns < 10**15 else 20)  # above ~11 days a float second resolves only several ns
        log: list[int] = []
        loop.call_at(loop.time() + delay, due_check, loop.time() + delay, log)
        env.run()
        assert len(log) == 1


@settings(max_examples=300, deadline=None)
@given(now_ns=st.integers(0, 10**17), delay=st.floats(0, 10**6, allow_nan=False), at=st.floats(0, 10**8, allow_nan=False))
def test_time_conversion_properties(now_ns: int, delay: float, at: float) -> None:
    """call_later fires at now + round(delay*1e9) ns exactly (>= 1 ns if positive); call_at at the first ns reading >= when."""
    env = simpy.Environment(initial_time=now_ns)
    loop = VirtualLoop(env, "p")
    fired: dict[str, tuple[int, float]] = {}
    later = loop.call_later(delay, lambda: fired.__setitem__("later", (env.now, loop.time())))
    loop.call_at(at, lambda: fired.__setitem__("at", (env.now, loop.time())))
    env.run()
    later_ns, later_time = fired["later"]
    assert later_ns == now_ns + ((round(delay * 1e9) or 1) if delay > 0 else 0)
    assert later.when() == later_time
    at_ns, at_time = fired["at"]
    assert at_time >= at or at_ns == now_ns  # never early, unless the deadline was already past
    assert at_ns == now_ns or at_ns == round(at * 1e9) or (at_ns - 1) / 1e9 < at  # and never later than needed


def test_env_must_count_integer_nanoseconds() -> None:
    """A float-time environment is refused: integer nanoseconds avoid zero-progress float livelocks."""
    with pytest.raises(TypeError, match="integer nanoseconds"):
        VirtualLoop(simpy.Environment(initial_time=0.5), "n1")


# ------------------------------------------------------------------------------------------ order


def test_equal_deadlines_fire_in_the_order_they_were_set(env: simpy.Environment, loop: VirtualLoop) -> None:
    """1000 timers for one instant, set in a seeded shuffled order (some early, some late), fire exactly in that order."""
    order = list(range(1000))
    random.Random(42).shuffle(order)
    fired: list[int] = []
    deadline = 5.0

    for i in order[:500]:  # set at t=0, half with call_at, half with call_later
        if i % 2:
            loop.call_at(deadline, fired.append, i)
        else:
            loop.call_later(deadline, fired.append, i)

    def later() -> None:  # set at t=2 s for the same instant
        for i in order[500:]:
            loop.call_later(deadline - loop.time(), fired.append, i)

    loop.call_at(2.0, later)
    env.run()
    assert fired == order
    assert env.now == 5 * S


def test_cancelled_timers_never_run(env: simpy.Environment, loop: VirtualLoop) -> None:
    """A cancelled timer does not run, before or after it became due in the same instant; others still do."""
    fired: list[str] = []
    a = loop.call_later(1, fired.append, "a")
    loop.call_later(1, fired.append, "b")
    c = loop.call_later(2, fired.append, "c")
    loop.call_later(1, c.cancel)  # cancelled at 1 s
    a.cancel()
    assert a.cancelled()
    env.run()
    assert fired == ["b"]
    assert loop.errors == []


def test_cancelled_timers_do_not_move_time_for_run_until_complete(env: simpy.Environment, loop: VirtualLoop) -> None:
    """A deadlock after an early-finished asyncio.timeout(3600) is reported at once, not an hour later."""

    async def main() -> None:
        async with asyncio.timeout(3600):
            await asyncio.sleep(1)
        await asyncio.Event().wait()

    with pytest.raises(Deadlock):
        run_until_complete(env, loop, main())
    assert env.now == 1 * S


def test_many_cancelled_timers_are_compacted_off_the_heap(env: simpy.Environment, loop: VirtualLoop) -> None:
    """Cancelling 20000 far timers shrinks simpy's heap; the surviving timers still fire in order."""
    fired: list[int] = []
    handles = [loop.call_later(1000 + i % 3, fired.append, i) for i in range(20_000)]
    for i, handle in enumerate(handles):
        if i % 100:
            handle.cancel()
    assert len(env._queue) < 10_000
    skip_cancelled_timers(env)
    env.run()
    assert fired == sorted(range(0, 20_000, 100), key=lambda i: (i % 3, i))


def test_call_soon_runs_fifo_in_the_same_drain(env: simpy.Environment, loop: VirtualLoop) -> None:
    """call_soon callbacks run FIFO, those added while draining run after them at the same instant, cancelled ones never."""
    seen: list[tuple[str, int]] = []

    def note(what: str) -> None:
        seen.append((what, env.now))
        if what == "a":
            loop.call_soon(note, "d")

    def script():  # type: ignore[no-untyped-def]
        yield env.timeout(7)
        loop.call_soon(note, "a")
        loop.call_soon(note, "b")
        loop.call_soon_threadsafe(note, "c")
        loop.call_soon(note, "never").cancel()

    env.process(script())
    env.run()
    assert seen == [("a", 7), ("b", 7), ("c", 7), ("d", 7)]


def test_task_ready_order_and_default_names(env: simpy.Environment, loop: VirtualLoop) -> None:
    """Tasks are SimTasks named '<loop>:task-<n>' (explicit names kept), hashing by creation sequence; futures too."""

    async def noop() -> None:
        await asyncio.sleep(0)

    async def main() -> list[str]:
        tasks = [asyncio.create_task(noop()) for _ in range(3)] + [asyncio.create_task(noop(), name="mine")]
        fut = loop.create_future()
        fut.set_result(None)
        assert isinstance(fut, SimFuture) and hash(fut) == fut._sim_seq
        assert all(isinstance(t, SimTask) and hash(t) == t._sim_seq for t in tasks)
        assert [hash(t) for t in tasks] == sorted(hash(t) for t in tasks)
        assert tasks[0] != tasks[1] and tasks[0] == tasks[0]
        await asyncio.gather(*tasks)
        return [t.get_name() for t in tasks]

    assert run(env, loop, main()) == ["n1:task-1", "n1:task-2", "n1:task-3", "mine"]


_ORDER_SCRIPT = textwrap.dedent(
    """
    import asyncio, sys, simpy
    from sim.loop import VirtualLoop, run_until_complete
    junk, plain = sys.argv[1] == "junk", sys.argv[2] == "plain"
    env = simpy.Environment()
    loop = VirtualLoop(env, "n1")
    if plain:  # control: asyncio's own tasks hash by id()
        loop.set_task_factory(lambda loop, coro, **kw: asyncio.Task(coro, loop=loop, **kw))
    keep = []
    async def child(i):
        await asyncio.sleep(1)  # all 200 complete at the same instant
    async def main():
        tasks = []
        for i in range(200):
            if junk:  # a different address layout
                keep.append([object() for _ in range(i % 7 + 1)])
                keep.append(bytearray(i * 13 % 500 + 1))
            tasks.append(asyncio.create_task(child(i), name=f"c{i}"))
        done, pending = await asyncio.wait(tasks)
        assert not pending
        return [t.get_name() for t in done]
    print(",".join(run_until_complete(env, loop, main())))
    """
)


def _done_order(hashseed: str, junk: bool, plain: bool) -> list[str]:
    environ = dict(os.environ, PYTHONHASHSEED=hashseed, PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-c", _ORDER_SCRIPT, "junk" if junk else "clean", "plain" if plain else "sim"],
        env=environ, cwd=ROOT, capture_output=True, text=True, check=True, timeout=60,
    ).stdout
    return out.strip().split(",")


def test_task_sets_iterate_identically_across_processes() -> None:
    """asyncio.wait's done set of 200 simultaneous tasks iterates identically under other PYTHONHASHSEEDs and address layouts."""
    first = _done_order("1", junk=False, plain=False)
    second = _done_order("2", junk=True, plain=False)
    assert len(first) == 200 and sorted(first) == sorted(f"c{i}" for i in range(200))
    assert first == second
    # the control shows the test has teeth: asyncio's id()-hashed tasks do not keep their order
    assert _done_order("1", junk=False, plain=True) != _done_order("2", junk=True, plain=True)


# ------------------------------------------------------------------------------------------ deadlock, livelock, timeout


def test_deadlock_names_every_waiting_task(env: simpy.Environment, loop: VirtualLoop) -> None:
    """No event left while the task waits on an Event: Deadlock names it, where it waits, and other loops' waiters."""
    other = VirtualLoop(env, "n2")

    async def consumer() -> None:
        await asyncio.sleep(3)
        await asyncio.Queue().get()

    async def waiter() -> None:
        await asyncio.Event().wait()

    other.create_task(consumer(), name="consumer")
    with pytest.raises(Deadlock) as caught:
        run_until_complete(env, loop, waiter())
    message = str(caught.value)
    assert "'n1:task-0'" in message and "waiter()" in message and "Event.wait()" in message
    assert "[n2] 'consumer'" in message and "Queue.get()" in message
    assert "t=3000000000 ns" in message
    assert [(row[0], row[1]) for row in caught.value.pending] == [("n1", "n1:task-0"), ("n2", "consumer")]
    assert caught.value.task.get_name() == "n1:task-0"
    assert "consumer" in describe_pending(env)


def test_deadlock_on_a_task_waiting_for_another_task(env: simpy.Environment, loop: VirtualLoop) -> None:
    """A task awaiting a stuck task is reported as awaiting that task by name."""

    async def stuck() -> None:
        await loop.create_future()

    async def main() -> None:
        await asyncio.create_task(stuck(), name="stuck")

    with pytest.raises(Deadlock, match=r"awaits task 'stuck'"):
        run_until_complete(env, loop, main())


def test_livelock_on_a_callback_rescheduling_itself(env: simpy.Environment) -> None:
    """A callback that call_soon's itself forever raises Livelock naming the loop and that callback."""
    loop = VirtualLoop(env, "spinner", livelock_limit=20_000)

    def spin() -> None:
        loop.call_soon(spin)

    loop.call_soon(spin)
    with pytest.raises(Livelock) as caught:
        env.run()
    assert "'spinner'" in str(caught.value) and "spin()" in str(caught.value)
    assert caught.value.top[0][0].startswith("test_livelock_on_a_callback_rescheduling_itself.<locals>.spin()")
    assert asyncio.events._get_running_loop() is None


def test_livelock_on_a_task_spinning_on_sleep_zero(env: simpy.Environment) -> None:
    """A task looping on asyncio.sleep(0) (or zero-delay timers) raises Livelock naming the task."""
    loop = VirtualLoop(env, "n1", livelock_limit=20_000)

    async def spinner() -> None:
        while True:
            await asyncio.sleep(0)

    async def timer_spinner() -> None:
        while True:
            await asyncio.sleep(-1)  # a timer at the current instant, through call_later

    loop.create_task(spinner(), name="busy")
    with pytest.raises(Livelock, match=r"task 'busy'"):
        env.run()
    env2 = simpy.Environment()
    loop2 = VirtualLoop(env2, "n2", livelock_limit=20_000)
    loop2.call_later(0, lambda: loop2.call_later(0, lambda: None))
    zero_timers = []

    def rearm() -> None:
        zero_timers.append(1)
        loop2.call_later(0, rearm)

    loop2.call_soon(rearm)
    with pytest.raises(Livelock, match="rearm"):
        env2.run()
    assert len(zero_timers) > 20_000


def test_busy_instants_below_the_limit_are_fine(env: simpy.Environment) -> None:
    """Many callbacks at one instant then time advancing is not a livelock: the count resets per instant."""
    loop = VirtualLoop(env, "n1", livelock_limit=1_000)

    async def main() -> None:
        for _ in range(5):
            for _ in range(900):
                await asyncio.sleep(0)
            await asyncio.sleep(1)

    run(env, loop, main())
    assert env.now == 5 * S


def test_until_ns_raises_simulation_timeout(env: simpy.Environment, loop: VirtualLoop) -> None:
    """run_until_complete(until_ns=...) stops at exactly until_ns with SimulationTimeout if the task is still pending."""

    async def slow() -> None:
        await asyncio.sleep(10)

    with pytest.raises(SimulationTimeout) as caught:
        run_until_complete(env, loop, slow(), until_ns=4 * S)
    assert isinstance(caught.value, TimeoutError)
    assert env.now == 4 * S

    async def quick() -> int:
        await asyncio.sleep(1)
        return 42

    assert run_until_complete(env, loop, quick(), until_ns=5 * S) == 42  # an event exactly at until_ns still runs


def test_run_until_complete_returns_results_and_raises_failures(env: simpy.Environment, loop: VirtualLoop) -> None:
    """The helper returns the coroutine's result, re-raises its exception, and accepts a future of the loop."""

    async def fails() -> None:
        await asyncio.sleep(1)
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        run_until_complete(env, loop, fails())
    fut = loop.create_future()
    loop.call_later(2, fut.set_result, "done")
    assert run_until_complete(env, loop, fut) == "done"
    assert env.now == 3 * S
    other = VirtualLoop(simpy.Environment(), "elsewhere")
    with pytest.raises(ValueError, match="does not belong"):
        run_until_complete(env, other, fut)


# ------------------------------------------------------------------------------------------ refusals


async def _to_thread() -> None:
    await asyncio.to_thread(print, "never")


async def _open_connection() -> None:
    await asyncio.open_connection("127.0.0.1", 9)


async def _getaddrinfo() -> None:
    await asyncio.get_running_loop().getaddrinfo("example.com", 80)


async def _subprocess() -> None:
    await asyncio.create_subprocess_exec("true")


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (_to_thread, ["asyncio.to_thread / loop.run_in_executor()", "real threads outside virtual time"]),
        (_open_connection, ["asyncio.open_connection", "real sockets", "transport port"]),
        (_getaddrinfo, ["getaddrinfo", "DNS"]),
        (_subprocess, ["asyncio.create_subprocess_exec", "real time"]),
    ],
)
def test_forbidden_calls_raise_a_clear_error(env: simpy.Environment, loop: VirtualLoop, call: Any, words: list[str]) -> None:
    """Threads, sockets, DNS and subprocesses raise ForbiddenInSimulation naming the call and why."""
    with pytest.raises(ForbiddenInSimulation) as caught:
        run_until_complete(env, loop, call())
    assert isinstance(caught.value, RuntimeError)
    for word in words:
        assert word in str(caught.value)
    assert "'n1'" in str(caught.value)


def test_the_world_drives_the_loop_not_run_forever(loop: VirtualLoop) -> None:
    """loop.run_forever / run_until_complete / stop are refused, pointing at the helper."""
    for method in (loop.run_forever, loop.stop):
        with pytest.raises(ForbiddenInSimulation, match="run_until_complete"):
            method()
    coro = asyncio.sleep(1)
    with pytest.raises(ForbiddenInSimulation, match="simpy"):
        loop.run_until_complete(coro)
    coro.close()


# ------------------------------------------------------------------------------------------ several loops


def test_two_loops_interleave_by_virtual_time(env: simpy.Environment) -> None:
    """Node A ticking every 1 s and node B every 0.5 s interleave by time, each running as its own loop."""
    a, b = VirtualLoop(env, "A"), VirtualLoop(env, "B")
    log: list[tuple[float, str]] = []

    async def ticker(period: float, count: int) -> None:
        me = asyncio.get_running_loop()
        for _ in range(count):
            await asyncio.sleep(period)
            assert asyncio.get_running_loop() is me
            log.append((me.time(), me.name))

    b_task = b.create_task(ticker(0.5, 6))
    run(env, a, ticker(1.0, 3))
    assert log[-1] == (3.0, "A") and not b_task.done()  # the helper stops as soon as its task is done
    env.run()
    assert log == [
        (0.5, "B"), (1.0, "A"), (1.0, "B"), (1.5, "B"), (2.0, "A"), (2.0, "B"), (2.5, "B"), (3.0, "A"), (3.0, "B"),
    ]
    assert [loop.name for loop in loops_of(env)] == ["A", "B"]
    with pytest.raises(ValueError, match="already runs"):
        VirtualLoop(env, "A")


def test_a_future_of_one_loop_cannot_be_awaited_on_another(env: simpy.Environment) -> None:
    """Awaiting node A's Future from a task of node B fails loudly (asyncio's own loop check)."""
    a, b = VirtualLoop(env, "A"), VirtualLoop(env, "B")
    foreign = a.create_future()

    async def main() -> None:
        await foreign

    with pytest.raises(RuntimeError, match="attached to a different loop"):
        run_until_complete(env, b, main())


def test_runs_inside_an_already_running_asyncio_loop() -> None:
    """As in a Jupyter kernel: called synchronously from a running loop, it runs, and the outer loop is restored after."""
    env = simpy.Environment()
    vloop = VirtualLoop(env, "n1")

    async def simulated() -> tuple[bool, int]:
        await asyncio.sleep(60)
        inner = asyncio.get_running_loop()
        async with asyncio.TaskGroup() as tg:
            tg.create_task(asyncio.sleep(1))
        return inner is vloop, env.now

    async def outer() -> tuple[bool, int]:
        me = asyncio.get_running_loop()
        task = asyncio.current_task()
        result = run_until_complete(env, vloop, simulated())
        assert asyncio.get_running_loop() is me
        assert asyncio.current_task() is task
        await asyncio.sleep(0)  # the outer loop still works
        return result

    assert asyncio.run(outer()) == (True, 61 * S)
    assert vloop.errors == []


def test_async_generators_are_finalized_on_their_own_loop(env: simpy.Environment, loop: VirtualLoop) -> None:
    """An abandoned async generator started on a VirtualLoop is closed on that loop; shutdown_asyncgens closes the rest."""
    closed_on: list[tuple[str, Any]] = []

    async def numbers(tag: str):  # type: ignore[no-untyped-def]
        try:
            for i in range(10):
                yield i
        finally:
            closed_on.append((tag, asyncio.get_running_loop()))

    async def main() -> None:
        gen = numbers("abandoned")
        async for i in gen:
            if i == 2:
                break
        del gen
        gc.collect()
        await asyncio.sleep(0.001)
        kept = numbers("kept")
        await kept.__anext__()
        main.kept = kept  # type: ignore[attr-defined]
        await loop.shutdown_asyncgens()

    async def outer() -> None:
        run_until_complete(env, loop, main())

    asyncio.run(outer())
    assert closed_on == [("abandoned", loop), ("kept", loop)]


# ------------------------------------------------------------------------------------------ faults


def test_pause_holds_everything_and_resume_runs_it_in_ready_order(env: simpy.Environment, loop: VirtualLoop) -> None:
    """While paused nothing runs; at resume, due timers and callbacks run at the resume instant in the order they became ready."""
    seen: list[tuple[str, int]] = []

    def note(what: str) -> None:
        seen.append((what, env.now))

    async def ticker() -> None:
        while True:
            await asyncio.sleep(1)
            note("tick")

    loop.create_task(ticker())

    def script():  # type: ignore[no-untyped-def]
        yield env.timeout(1_500_000_000)
        loop.pause()
        assert loop.paused
        loop.call_later(0.25, note, "timer at 1.75")
        yield env.timeout(1_000_000_000)  # the 2 s tick and the 1.75 timer become due meanwhile
        loop.call_soon(note, "soon at 2.5")
        yield env.timeout(1_000_000_000)
        loop.resume()
        loop.resume()  # idempotent

    env.process(script())
    env.run(until=5 * S + 1)
    assert seen == [
        ("tick", 1 * S),
        ("timer at 1.75", 3_500_000_000),
        ("soon at 2.5", 3_500_000_000),  # queued before the task's wake-up, which the 2 s timer queues when it runs
        ("tick", 3_500_000_000),  # the tick due at 2 s
        ("tick", 4_500_000_000),  # the next sleep(1) started at the resume instant
    ]
    assert loop.errors == []


def test_kill_cancels_tasks_and_drops_everything_after(env: simpy.Environment, loop: VirtualLoop) -> None:
    """kill() cancels every task (their finally blocks run at the kill instant), records them, then drops later callbacks."""
    seen: list[tuple[str, int]] = []

    async def worker(tag: str) -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            seen.append((f"{tag} cancelled", env.now))
            loop.create_task(cleanup(tag), name=f"{tag}-cleanup")  # spawned while dying: cancelled too
            raise

    async def cleanup(tag: str) -> None:
        try:
            await asyncio.sleep(1)
            seen.append((f"{tag} cleanup finished", env.now))
        except asyncio.CancelledError:
            seen.append((f"{tag} cleanup cancelled", env.now))
            raise

    tasks = [loop.create_task(worker("w1"), name="w1"), loop.create_task(worker("w2"), name="w2")]
    loop.call_later(5, seen.append, ("timer", 5))

    def script():  # type: ignore[no-untyped-def]
        yield env.timeout(2 * S)
        assert loop.kill() == ["w1", "w2", "w1-cleanup", "w2-cleanup"]
        loop.call_soon(seen.append, ("after kill", env.now))  # silently dropped
        loop.call_later(1, seen.append, ("after kill", env.now))
        assert loop.kill() == []

    env.process(script())
    env.run()
    assert seen == [("w1 cancelled", 2 * S), ("w2 cancelled", 2 * S), ("w1 cleanup cancelled", 2 * S), ("w2 cleanup cancelled", 2 * S)]
    assert all(task.cancelled() for task in tasks)
    assert loop.killed and loop.is_closed()
    assert loop.killed_tasks == ["w1", "w2", "w1-cleanup", "w2-cleanup"]
    coro = asyncio.sleep(1)
    with pytest.raises(RuntimeError, match="killed"):
        loop.create_task(coro)
    assert loop.errors == []
    VirtualLoop(env, "n1")  # a restarted node may take the dead one's name


def test_kill_while_paused_still_cancels(env: simpy.Environment, loop: VirtualLoop) -> None:
    """A node crashed during a pause processes the cancellation of its tasks at the kill instant."""
    task = loop.create_task(asyncio.sleep(10))

    def script():  # type: ignore[no-untyped-def]
        yield env.timeout(1)
        loop.pause()
        yield env.timeout(1)
        loop.kill()

    env.process(script())
    env.run()
    assert task.cancelled()
    assert env.now == 10 * S  # the dead sleep timer still pops (and does nothing)


def test_close_refuses_new_work(env: simpy.Environment, loop: VirtualLoop) -> None:
    """A closed (not killed) loop refuses call_soon as asyncio does; its pending timers are dropped."""
    fired: list[int] = []
    loop.call_later(1, fired.append, 1)
    loop.close()
    loop.close()
    with pytest.raises(RuntimeError, match="closed"):
        loop.call_soon(fired.append, 2)
    env.run()
    assert fired == []


# ------------------------------------------------------------------------------------------ asyncio semantics


def test_taskgroup_failure_cancels_siblings_as_in_asyncio(env: simpy.Environment, loop: VirtualLoop) -> None:
    """In a TaskGroup, one child's exception cancels its siblings at that instant and surfaces as an ExceptionGroup."""
    seen: list[tuple[str, int]] = []

    async def child(i: int) -> None:
        try:
            await asyncio.sleep(5 + i)
            seen.append((f"child {i} done", env.now))
        except asyncio.CancelledError:
            seen.append((f"child {i} cancelled", env.now))
            raise

    async def failing() -> None:
        await asyncio.sleep(1)
        raise ValueError("child failed")

    async def main() -> None:
        async with asyncio.TaskGroup() as tg:
            for i in range(3):
                tg.create_task(child(i))
            tg.create_task(failing())

    with pytest.raises(ExceptionGroup) as caught:
        run_until_complete(env, loop, main())
    assert [type(e) for e in caught.value.exceptions] == [ValueError]
    assert seen == [("child 0 cancelled", S), ("child 1 cancelled", S), ("child 2 cancelled", S)]
    assert env.now == S
    assert loop.errors == []


def test_gather_shield_locks_and_queues_work(env: simpy.Environment, loop: VirtualLoop) -> None:
    """gather, shield, Lock, Condition and Queue behave normally on virtual time."""

    async def producer(q: asyncio.Queue[int]) -> None:
        for i in range(3):
            await asyncio.sleep(1)
            await q.put(i)

    async def main() -> tuple[list[int], list[int], int]:
        q: asyncio.Queue[int] = asyncio.Queue()
        lock = asyncio.Lock()
        got: list[int] = []

        async def consumer() -> None:
            for _ in range(3):
                item = await q.get()
                async with lock:
                    got.append(item)

        results = await asyncio.gather(producer(q), consumer(), asyncio.shield(asyncio.sleep(0.5, result=7)))
        return got, [r for r in results if r is not None], env.now

    assert run(env, loop, main()) == ([0, 1, 2], [7], 3 * S)


def test_callback_exceptions_go_to_the_handler_not_to_simpy(env: simpy.Environment, loop: VirtualLoop) -> None:
    """An exception escaping a callback is recorded in loop.errors (or given to a custom handler); simpy goes on."""

    def broken() -> None:
        raise KeyError("oops")

    ticks: list[int] = []

    def ticker():  # type: ignore[no-untyped-def]
        for _ in range(3):
            yield env.timeout(S)
            ticks.append(env.now)

    env.process(ticker())
    loop.call_later(1.5, broken)
    env.run()
    assert ticks == [S, 2 * S, 3 * S]
    assert len(loop.errors) == 1
    assert isinstance(loop.errors[0]["exception"], KeyError)
    assert "broken()" in loop.errors[0]["message"]

    caught: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda lp, ctx: caught.append(ctx))
    assert loop.get_exception_handler() is not None
    loop.call_soon(broken)
    env.run()
    assert len(caught) == 1 and len(loop.errors) == 1

    def bad_handler(lp: Any, ctx: dict[str, Any]) -> None:
        raise RuntimeError("handler broke")

    loop.set_exception_handler(bad_handler)
    loop.call_soon(broken)
    env.run()
    assert loop.errors[-1]["message"] == "Unhandled error in exception handler"


def test_unretrieved_task_exception_is_recorded(env: simpy.Environment, loop: VirtualLoop) -> None:
    """A task whose exception nobody retrieves is reported to loop.errors when collected, as asyncio does."""

    async def fails() -> None:
        raise ValueError("lost")

    loop.create_task(fails())
    env.run()
    gc.collect()
    assert any(isinstance(e.get("exception"), ValueError) for e in loop.errors)


def test_loop_protocol_odds_and_ends(env: simpy.Environment, loop: VirtualLoop) -> None:
    """time/is_running/debug/task factory/call_at with an infinite deadline behave like asyncio's."""
    assert loop.time() == 0.0 and loop.time_ns() == 0
    assert not loop.is_running() and not loop.is_closed()
    running: list[bool] = []
    loop.call_soon(lambda: running.append(loop.is_running()))
    env.run()
    assert running == [True]
    loop.set_debug(True)
    assert loop.get_debug()
    coro = asyncio.sleep(0)
    with pytest.raises(TypeError):
        loop.call_soon(coro)  # type: ignore[arg-type]
    coro.close()
    handle = loop.call_later(1, running.append, False)
    assert handle._source_traceback
    loop.set_debug(False)
    never = loop.call_at(float("inf"), running.append, "never")
    env.run()
    assert running == [True, False] and not never.cancelled()
    made: list[str] = []

    def factory(lp: Any, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        made.append("x")
        return asyncio.Task(coro, loop=lp, **kwargs)

    loop.set_task_factory(factory)
    assert loop.get_task_factory() is factory
    task = loop.create_task(asyncio.sleep(0), name="via-factory")
    assert made == ["x"] and task.get_name() == "via-factory"
    env.run()
    with pytest.raises(TypeError):
        loop.call_at(None, print)  # type: ignore[arg-type]
