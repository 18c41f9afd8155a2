"""TimerHeap and DeadlineQueue: many runtime timers on one loop timer, in order, on time (the heap: up to a microsecond early, in one wake-up)."""

from __future__ import annotations

import asyncio

from conftest import LoopClock, run_virtual

from casty.deadlines import DeadlineQueue
from casty.timers import TimerHeap


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
