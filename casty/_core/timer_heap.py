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

**Wall-clock timers.** A schedule's due is a wall-clock instant, but the loop counts its own
monotonic time: the entry is armed for the loop time the wall clock says the due is away
(``arm_wall``), which is right only while the two clocks keep their offset. A wall clock
stepped back and corrected later, stepped forward, or drifting would leave the entry armed
for a stale distance (a step back by 5 minutes, corrected 12 s later, kept the next firing 5
minutes away). So a heap with a ``Clock`` re-checks the wall clock every ``recheck`` seconds
of loop time (``WALL_RECHECK``), while it holds a wall-clock entry: when the wall clock's
offset to the loop moved by more than ``WALL_TOLERANCE_US`` since the last look, every
wall-clock entry is re-armed from its due at once (one pass over the heap: steps are rare).
A corrected clock is thus noticed within ``recheck`` (plus the tolerance); the caller still
checks the wall clock when the entry fires, and arms again if it is early ("never early").
The cost on the hot path is one dict entry per wall-clock entry, and one wake-up of the
loop per ``recheck`` per node.
"""

from __future__ import annotations

import asyncio
import contextvars
import heapq
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..ports import Clock

__all__ = ["TimerHeap", "Timer", "WALL_RECHECK", "WALL_TOLERANCE_US"]

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
WALL_RECHECK = 1.0
"""Seconds of loop time between two looks at the wall clock, while wall-clock timers are armed:
the longest a stepped (or corrected) wall clock goes unnoticed by the timers of its schedules."""
WALL_TOLERANCE_US = 10_000
"""Microseconds the wall clock's offset to the loop may move (a small step, drift, a noisy
clock) before the wall-clock timers are re-armed: a firing is at most this late for it, and
never early (the firing itself checks the wall clock)."""
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

    __slots__ = (
        "_loop", "_heap", "_callbacks", "_args", "_owners", "_seq", "_armed", "_armed_at", "_running",
        "_clock", "_recheck", "_walls", "_watch", "_offset_us",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop, clock: Clock | None = None, *, recheck: float = WALL_RECHECK) -> None:
        """``clock``: the wall clock of the ``arm_wall`` entries, re-checked every ``recheck`` s (None: never re-checked)."""
        if not (recheck > 0 and math.isfinite(recheck)):
            raise ValueError(f"recheck must be a positive number of seconds, got {recheck!r}")
        self._loop = loop
        self._heap: list[tuple[float, int]] = []
        self._callbacks: dict[int, Callable[..., None]] = {}
        self._args: dict[int, Any] = {}
        self._owners: dict[int, Any] = {}  # arm_method's owners: the callback is then callback(owner, arg)
        self._seq = 0
        self._armed: asyncio.TimerHandle | None = None
        self._armed_at = 0.0
        self._running = False  # inside _run, which arms for the head itself when it is done
        self._clock = clock
        self._recheck = float(recheck)
        self._walls: dict[int, int] = {}  # wall-clock entries: seq -> due (wall µs), to re-arm them if the clock moves
        self._watch: int | None = None  # the wall-clock re-check's number, while armed
        self._offset_us = 0  # the wall clock minus the loop's time (µs) when the wall entries were last armed right

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

    def arm_wall(self, when: float, due_us: int, callback: Callable[[Any], None], arg: Any) -> int:
        """``arm`` for a wall-clock due: ``when`` is the loop time the wall clock says ``due_us`` is at now.

        Re-armed from ``due_us`` if the wall clock moves against the loop (see the module docstring).
        """
        seq = self.arm(when, callback, arg)
        self._walls[seq] = due_us
        if self._watch is None and self._clock is not None:
            self._start_watch()
        return seq

    def arm_wall_method(self, when: float, due_us: int, function: Callable[[Any, Any], None], owner: Any, arg: Any) -> int:
        """``arm_method`` for a wall-clock due (``arm_wall``): a schedule's ``Activation._fire`` (``arm`` inline: every firing arms one)."""
        seq = self._seq = self._seq + 1
        self._callbacks[seq] = function
        self._args[seq] = arg
        self._owners[seq] = owner
        self._walls[seq] = due_us
        heapq.heappush(self._heap, (when, seq))
        if not self._running and (self._armed is None or when < self._armed_at):
            self._arm(when)
        if self._watch is None and self._clock is not None:
            self._start_watch()
        return seq

    def call_at_wall(self, when: float, due_us: int, callback: Callable[[Any], None], arg: Any) -> Timer:
        """``call_at`` for a wall-clock due (``arm_wall``): a node schedule's or a cron's tick."""
        return Timer(self, self.arm_wall(when, due_us, callback, arg))

    def cancel(self, seq: int) -> None:
        """Forget timer ``seq`` (nothing happens if it already fired or was cancelled)."""
        if self._callbacks.pop(seq, None) is not None:
            del self._args[seq]
            self._owners.pop(seq, None)
            self._walls.pop(seq, None)

    # --- the wall clock's re-check -----------------------------------------------------

    def _start_watch(self) -> None:
        clock = self._clock
        assert clock is not None
        now = self._loop.time()
        self._offset_us = clock.now_us() - int(now * 1_000_000)
        self._watch = self.arm_method(now + self._recheck, TimerHeap._look, self, None)

    def _look(self, _arg: None) -> None:
        """Every ``recheck`` s while wall entries exist: has the wall clock moved against the loop? Then re-arm them."""
        self._watch = None
        if not self._walls:
            return
        clock = self._clock
        assert clock is not None
        now = self._loop.time()
        now_us = clock.now_us()
        offset = now_us - int(now * 1_000_000)
        if abs(offset - self._offset_us) > WALL_TOLERANCE_US:
            self._offset_us = offset
            self._rearm_walls(now, now_us)
        self._watch = self.arm_method(now + self._recheck, TimerHeap._look, self, None)

    def _rearm_walls(self, now: float, now_us: int) -> None:
        """Every wall entry at the loop time its due is at on the wall clock now (due ones at once); dead entries dropped.

        The heap list is changed in place: ``_run``, which may be calling this, holds it.
        """
        walls = self._walls
        callbacks = self._callbacks
        entries: list[tuple[float, int]] = []
        for when, seq in self._heap:
            if seq not in callbacks:
                continue
            due_us = walls.get(seq)
            if due_us is not None:
                wait_us = due_us - now_us
                when = now + wait_us / 1_000_000 if wait_us > 0 else now
            entries.append((when, seq))
        heapq.heapify(entries)
        self._heap[:] = entries
        if not self._running and entries:
            self._arm(entries[0][0])

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
        walls = self._walls
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
                    if walls:
                        walls.pop(seq, None)
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
        self._walls.clear()
        self._watch = None

    def __len__(self) -> int:
        return len(self._heap)
