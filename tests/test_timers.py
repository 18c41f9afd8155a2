"""TimerHeap and DeadlineQueue: many runtime timers on one loop timer, in order, on time (the heap: up to a microsecond early, in one wake-up)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from conftest import LoopClock, run_virtual

import pytest

from casty._core.deadlines import DeadlineQueue
from casty._core.timer_heap import WALL_RECHECK, TimerHeap


def test_timer_heap_fires_in_time_order_and_ties_in_setting_order() -> None:
    """Timers fire at their loop time; equal deadlines fire in the order they were set."""

    async def main(clock: LoopClock) -> list[tuple[str, float]]:
        loop = asyncio.get_running_loop()
        heap = TimerHeap(loop)
        fired: list[tuple[str, float]] = []
        for name, when in [("c", 3.0), ("a", 1.0), ("b1", 2.0), ("b2", 2.0), ("b3", 2.0)]:
            heap.call_at(when, lambda n: fired.append((n, loop.time())), name)
        await asyncio.sleep(5)
        return fired

    assert run_virtual(main) == [("a", 1.0), ("b1", 2.0), ("b2", 2.0), ("b3", 2.0), ("c", 3.0)]


def test_timer_heap_cancel_and_earlier_timer_set_from_a_callback() -> None:
    """A cancelled timer never fires; a timer set from a callback, earlier than the rest, fires on time."""

    async def main(clock: LoopClock) -> list[tuple[str, float]]:
        loop = asyncio.get_running_loop()
        heap = TimerHeap(loop)
        fired: list[tuple[str, float]] = []

        def chain(name: str) -> None:
            fired.append((name, loop.time()))
            heap.call_at(loop.time() + 0.5, lambda n: fired.append((n, loop.time())), "inner")

        heap.call_at(1.0, chain, "outer")
        heap.call_at(10.0, lambda n: fired.append((n, loop.time())), "late")
        heap.call_at(5.0, lambda n: fired.append((n, loop.time())), "cancelled").cancel()
        await asyncio.sleep(11)
        return fired

    assert run_virtual(main) == [("outer", 1.0), ("inner", 1.5), ("late", 10.0)]


def test_timer_heap_fires_timers_within_a_microsecond_in_one_wake_up() -> None:
    """Deadlines that share a microsecond (wall-clock dues keep the phase they were computed at) take one loop wake-up."""

    async def main(clock: LoopClock) -> list[tuple[str, float, int]]:
        loop = asyncio.get_running_loop()
        wakeups = [0]

        class Counting(TimerHeap):
            def _run(self) -> None:
                wakeups[0] += 1
                super()._run()

        heap = Counting(loop)
        fired: list[tuple[str, float, int]] = []
        for name, when in [("a", 1.0000002), ("b", 1.0000007), ("c", 1.0000009), ("d", 1.0000021)]:
            heap.call_at(when, lambda n: fired.append((n, loop.time(), wakeups[0])), name)
        await asyncio.sleep(2)
        return fired

    fired = run_virtual(main)
    assert [(name, wakeup) for name, _t, wakeup in fired] == [("a", 1), ("b", 1), ("c", 1), ("d", 2)]
    assert all(t == 1.0000002 for _n, t, w in fired if w == 1)


def test_timer_heap_timer_armed_from_a_callback_inside_the_window_waits_for_its_time() -> None:
    """A callback that re-arms itself a fraction of a microsecond ahead is not run again in the same wake-up (no spin)."""

    async def main(clock: LoopClock) -> list[float]:
        loop = asyncio.get_running_loop()
        heap = TimerHeap(loop)
        seen: list[float] = []

        def again(n: int) -> None:
            seen.append(loop.time())
            if n:
                heap.call_at(loop.time() + 0.0000004, again, n - 1)

        heap.call_at(1.0, again, 3)
        await asyncio.sleep(2)
        return seen

    seen = run_virtual(main)
    assert len(seen) == 4 and seen == sorted(set(seen)) and seen[0] == 1.0


def _wall_timer(heap: TimerHeap, loop: asyncio.AbstractEventLoop, clock: LoopClock, in_s: float, fired: list[tuple[str, float]], name: str) -> None:
    """Arm a wall-clock entry due ``in_s`` seconds from the wall clock's now, as a schedule does."""
    now_us = clock.now_us()
    heap.call_at_wall(loop.time() + in_s, now_us + round(in_s * 1_000_000), lambda n: fired.append((n, loop.time())), name)


def test_timer_heap_rearms_wall_clock_entries_within_a_recheck_of_a_step() -> None:
    """A wall entry due in 60 s, its clock stepped 50 s forward at loop 3.5: re-armed at the next re-check (loop 4.0) for loop 10; a loop-time entry keeps its time."""

    async def main(clock: LoopClock) -> list[tuple[str, float]]:
        loop = asyncio.get_running_loop()
        heap = TimerHeap(loop, clock)
        fired: list[tuple[str, float]] = []
        _wall_timer(heap, loop, clock, 60.0, fired, "wall")
        heap.call_at(30.0, lambda n: fired.append((n, loop.time())), "loop")
        await asyncio.sleep(3.5)
        clock.step(timedelta(seconds=50))
        await asyncio.sleep(60)
        return fired

    assert WALL_RECHECK == 1.0
    assert run_virtual(main) == [("wall", 10.0), ("loop", 30.0)]  # the wall reads loop + 50 s after the step


def test_timer_heap_wall_entry_after_a_corrected_backward_step_fires_within_a_recheck() -> None:
    """Stepped back 300 s at loop 0.5 and forward again at loop 12.5, a wall entry due at loop 20 fires at 20 (not at 320), an overdue one at the re-check."""

    async def main(clock: LoopClock) -> list[tuple[str, float]]:
        loop = asyncio.get_running_loop()
        heap = TimerHeap(loop, clock)
        fired: list[tuple[str, float]] = []
        _wall_timer(heap, loop, clock, 20.0, fired, "later")
        _wall_timer(heap, loop, clock, 5.0, fired, "hidden")
        await asyncio.sleep(0.5)
        clock.step(timedelta(seconds=-300))  # at the re-check (loop 1): both re-armed 300 s later
        await asyncio.sleep(12)
        clock.step(timedelta(seconds=300))  # at the re-check (loop 13): "hidden" is overdue, "later" back at loop 20
        await asyncio.sleep(30)
        return fired

    assert run_virtual(main) == [("hidden", 13.0), ("later", 20.0)]


def test_timer_heap_without_a_clock_or_wall_entries_never_rechecks() -> None:
    """No clock: wall entries keep their loop time through a step; with a clock but only loop entries, no re-check wakes the loop."""

    async def main(clock: LoopClock) -> tuple[list[tuple[str, float]], int]:
        loop = asyncio.get_running_loop()
        fired: list[tuple[str, float]] = []
        plain = TimerHeap(loop)
        _wall_timer(plain, loop, clock, 10.0, fired, "unwatched")
        wakeups = [0]

        class Counting(TimerHeap):
            def _run(self) -> None:
                wakeups[0] += 1
                super()._run()

        watched = Counting(loop, clock)
        watched.call_at(5.0, lambda n: fired.append((n, loop.time())), "loop")
        await asyncio.sleep(1)
        clock.step(timedelta(seconds=5))
        await asyncio.sleep(20)
        return fired, wakeups[0]

    assert run_virtual(main) == ([("loop", 5.0), ("unwatched", 10.0)], 1)


@pytest.mark.parametrize("recheck", [0.0, -1.0, float("nan"), float("inf")])
def test_timer_heap_refuses_a_recheck_that_is_not_a_positive_finite_number(recheck: float) -> None:
    """TimerHeap(recheck=) of 0, a negative, NaN or infinity raises ValueError naming recheck."""

    async def main(clock: LoopClock) -> str:
        with pytest.raises(ValueError) as raised:
            TimerHeap(asyncio.get_running_loop(), clock, recheck=recheck)
        return str(raised.value)

    assert run_virtual(main).startswith("recheck must be a positive number of seconds, got ")


class Item:
    def __init__(self, name: str) -> None:
        self.name = name
        self.done = False

    def settled(self) -> bool:
        return self.done


def test_deadline_queue_expires_only_unsettled_items_on_time() -> None:
    """Items settled before their deadline are skipped; the others expire exactly timeout after they were added."""

    async def main(clock: LoopClock) -> list[tuple[str, float]]:
        loop = asyncio.get_running_loop()
        expired: list[tuple[str, float]] = []
        queue: DeadlineQueue[Item] = DeadlineQueue(loop, 10.0, lambda item: expired.append((item.name, loop.time())))
        a, b, c = Item("a"), Item("b"), Item("c")
        queue.add(a)
        await asyncio.sleep(1)
        queue.add(b)
        await asyncio.sleep(1)
        queue.add(c)
        b.done = True
        await asyncio.sleep(20)
        return expired

    assert run_virtual(main) == [("a", 10.0), ("c", 12.0)]


def test_deadline_queue_sheds_settled_heads_as_items_arrive() -> None:
    """A stream of answered asks does not pile up: settled heads are dropped when new items are added."""

    async def main(clock: LoopClock) -> int:
        loop = asyncio.get_running_loop()
        queue: DeadlineQueue[Item] = DeadlineQueue(loop, 10.0, lambda item: None)
        for i in range(1000):
            item = Item(str(i))
            queue.add(item)
            item.done = True
        return len(queue)

    assert run_virtual(main) == 1
