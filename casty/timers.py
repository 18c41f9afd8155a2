"""One loop timer for many runtime timers: a heap of plain tuples.

An activation arms an idle check and a timer per schedule. Handing each to the loop costs
a ``TimerHandle`` (a Python object whose ordering is a Python method) and a heap push
with a dozen Python-level comparisons. Here entries are tuples ordered in C, and the
loop holds a single timer, for the earliest entry. Ties fire in the order they were set
(a sequence number breaks them), which the simulator relies on for determinism.

A heap entry is only ``(when, seq)``: the callback and its argument wait in two dicts
keyed by ``seq``. A tuple of a float and an int holds no reference the garbage collector
must follow, so CPython stops tracking it at its first collection, and an idle activation's
check costs the collector nothing (a ``(when, seq, Timer)`` entry and its ``Timer`` were
two more objects to traverse per live key, on every full collection). Cancelling drops
the dict entries; the dead tuple leaves the heap when its time comes.
"""

from __future__ import annotations

import asyncio
import contextvars
import heapq
from collections.abc import Callable
from typing import Any

__all__ = ["TimerHeap", "Timer"]

_EMPTY_CONTEXT = contextvars.Context()
COALESCE = 1e-6
"""Seconds: timers due within this much after the one that woke the loop fire in the same wake-up.

Wall-clock dues are microseconds (the Clock port's unit); converted to loop time they keep the
sub-microsecond phase of the instant they were computed at. Without this, keys whose schedules
share one wall-clock microsecond would each wake the loop on its own (on the simulator's exact
clock, one loop turn per key), and what they do in that turn (replication frames) would leave one
key at a time instead of in one batch. Firing at most a microsecond early is below the wall
clock's resolution: a schedule sees the same wall time either way. asyncio's own loop does the
same with its clock resolution."""
_NO_OWNER: Any = object()


class Timer:
    """A cancellable entry of a TimerHeap, for callers that want a handle object (``TimerHeap.call_at``)."""

    __slots__ = ("_heap", "_seq")

    def __init__(self, heap: TimerHeap, seq: int) -> None:
        self._heap = heap
        self._seq = seq

    def cancel(self) -> None:
        self._heap.cancel(self._seq)

    @property
    def cancelled(self) -> bool:
        """True once cancelled or fired."""
        return not self._heap.pending(self._seq)


class TimerHeap:
    """Runs ``callback(arg)`` at loop time ``when``, for many timers, with one loop timer."""

    __slots__ = ("_loop", "_heap", "_callbacks", "_args", "_owners", "_seq", "_armed", "_armed_at", "_running")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._heap: list[tuple[float, int]] = []
        self._callbacks: dict[int, Callable[..., None]] = {}
        self._args: dict[int, Any] = {}
        self._owners: dict[int, Any] = {}  # arm_method's owners: the callback is then callback(owner, arg)
        self._seq = 0
        self._armed: asyncio.TimerHandle | None = None
        self._armed_at = 0.0
        self._running = False  # inside _run, which arms for the head itself when it is done

    def call_at(self, when: float, callback: Callable[[Any], None], arg: Any) -> Timer:
        """Arm a timer and return a handle object that can cancel it."""
        return Timer(self, self.arm(when, callback, arg))

    def arm(self, when: float, callback: Callable[..., None], arg: Any) -> int:
        """Arm a timer and return its number, for ``cancel``: no handle object, for timers every key holds."""
        seq = self._seq = self._seq + 1
        self._callbacks[seq] = callback
        self._args[seq] = arg
        heapq.heappush(self._heap, (when, seq))
        if not self._running and (self._armed is None or when < self._armed_at):
            self._arm(when)
        return seq

    def arm_method(self, when: float, function: Callable[[Any, Any], None], owner: Any, arg: Any) -> int:
        """``arm`` for ``function(owner, arg)``, e.g. ``Activation._fire`` of a schedule: no bound method per timer.

        A bound method held until its time comes outlives the young collections and is promoted to the
        oldest generation, whose collections then come more often; the owner waits in a dict instead.
        """
        seq = self.arm(when, function, arg)
        self._owners[seq] = owner
        return seq

    def cancel(self, seq: int) -> None:
        """Forget timer ``seq`` (nothing happens if it already fired or was cancelled)."""
        if self._callbacks.pop(seq, None) is not None:
            del self._args[seq]
            self._owners.pop(seq, None)

    def pending(self, seq: int) -> bool:
        return seq in self._callbacks

    def _arm(self, when: float) -> None:
        if self._armed is not None:
            self._armed.cancel()
        self._armed_at = when
        self._armed = self._loop.call_at(when, self._run, context=_EMPTY_CONTEXT)

    def _run(self) -> None:
        self._armed = None
        self._running = True
        heap = self._heap
        callbacks = self._callbacks
        owners = self._owners
        now = self._loop.time()
        try:
            early = now + COALESCE
            armed_before = self._seq  # a timer armed by a callback here fires early only in a later wake-up: no spinning
            while heap:
                when, seq = heap[0]
                if when > now and (when > early or seq > armed_before):
                    break
                heapq.heappop(heap)
                callback = callbacks.pop(seq, None)
                if callback is not None:
                    owner = owners.pop(seq, _NO_OWNER)
                    if owner is _NO_OWNER:
                        callback(self._args.pop(seq))
                    else:
                        callback(owner, self._args.pop(seq))
        finally:
            self._running = False
            while heap and heap[0][1] not in callbacks:
                heapq.heappop(heap)
            if heap:
                self._arm(heap[0][0])

    def close(self) -> None:
        if self._armed is not None:
            self._armed.cancel()
            self._armed = None
        self._heap.clear()
        self._callbacks.clear()
        self._args.clear()
        self._owners.clear()

    def __len__(self) -> int:
        return len(self._heap)
