"""TimerHeap and DeadlineQueue: many runtime timers on one loop timer, in order, exactly on time."""

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
