"""One loop timer for many runtime timers: a heap of plain tuples.

An activation arms an idle check and a timer per schedule. Handing each to the loop costs
a ``TimerHandle`` (a Python object whose ordering is a Python method) and a heap push
with a dozen Python-level comparisons. Here entries are tuples ordered in C, and the
loop holds a single timer, for the earliest entry. Ties fire in the order they were set
(a sequence number breaks them), which the simulator relies on for determinism.
"""

from __future__ import annotations

import asyncio
import contextvars
import heapq
from collections.abc import Callable
from typing import Any

__all__ = ["TimerHeap", "Timer"]

_EMPTY_CONTEXT = contextvars.Context()


class Timer:
    """A cancellable entry of a TimerHeap."""

    __slots__ = ("when", "callback", "arg")

    def __init__(self, when: float, callback: Callable[[Any], None], arg: Any) -> None:
        self.when = when
        self.callback: Callable[[Any], None] | None = callback
        self.arg = arg

    def cancel(self) -> None:
        self.callback = None
        self.arg = None

    @property
    def cancelled(self) -> bool:
        return self.callback is None


class TimerHeap:
    """Runs ``callback(arg)`` at loop time ``when``, for many timers, with one loop timer."""

    __slots__ = ("_loop", "_heap", "_seq", "_armed", "_armed_at", "_running")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._heap: list[tuple[float, int, Timer]] = []
        self._seq = 0
        self._armed: asyncio.TimerHandle | None = None
        self._armed_at = 0.0
        self._running = False  # inside _run, which arms for the head itself when it is done

    def call_at(self, when: float, callback: Callable[[Any], None], arg: Any) -> Timer:
        timer = Timer(when, callback, arg)
        self._seq += 1
        heapq.heappush(self._heap, (when, self._seq, timer))
        if not self._running and (self._armed is None or when < self._armed_at):
            self._arm(when)
        return timer

    def _arm(self, when: float) -> None:
        if self._armed is not None:
            self._armed.cancel()
        self._armed_at = when
        self._armed = self._loop.call_at(when, self._run, context=_EMPTY_CONTEXT)

    def _run(self) -> None:
        self._armed = None
        self._running = True
        heap = self._heap
        now = self._loop.time()
        try:
            while heap and heap[0][0] <= now:
                timer = heapq.heappop(heap)[2]
                callback = timer.callback
                if callback is not None:
                    arg = timer.arg
                    timer.callback = None
                    timer.arg = None
                    callback(arg)
        finally:
            self._running = False
            while heap and heap[0][2].callback is None:
                heapq.heappop(heap)
            if heap:
                self._arm(heap[0][0])

    def close(self) -> None:
        if self._armed is not None:
            self._armed.cancel()
            self._armed = None
        self._heap.clear()

    def __len__(self) -> int:
        return len(self._heap)
