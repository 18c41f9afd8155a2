"""The simpy side of the virtual loop: deterministic futures and tasks, the timer that is its own simpy event.

Apart from ``sim.loop`` (which re-exports ``SimFuture``, ``SimTask``, ``loops_of`` and ``skip_cancelled_timers``)
so the loop module holds the loop itself. Here: futures and tasks hashing by their loop's creation sequence
number, ``_Timer`` (an ``asyncio.TimerHandle`` that speaks simpy's event protocol), the loop's reusable wake
event, and what the loops of one environment share (the registry, the count of dead timers on simpy's heap,
the heap's compaction). ``sim.loop``'s module docstring says how a wake-up maps onto simpy.
"""

from __future__ import annotations

import asyncio
import heapq
from typing import TYPE_CHECKING

import simpy

if TYPE_CHECKING:
    from .loop import VirtualLoop

_heappop = heapq.heappop


# --------------------------------------------------------------------------------------------------
# Deterministic futures and tasks


class SimFuture(asyncio.Future):
    """A Future that hashes by its loop's creation sequence number, so sets of futures iterate the same in every run."""

    __slots__ = ("_sim_seq",)

    def __hash__(self) -> int:
        return self._sim_seq


class SimTask(asyncio.Task):
    """A Task that hashes by its loop's creation sequence number (equality stays identity)."""

    __slots__ = ("_sim_seq",)

    def __hash__(self) -> int:
        return self._sim_seq


_new_task = SimTask.__new__
_task_init = SimTask.__init__


# --------------------------------------------------------------------------------------------------
# simpy-side objects


class _Timer(asyncio.TimerHandle):
    """A TimerHandle that is also the simpy event firing it (simpy reads ``callbacks`` and ``_ok``)."""

    __slots__ = ("callbacks",)
    _ok = True  # simpy: the event succeeded (class attribute: nothing to store per timer)

    def cancel(self) -> None:
        # asyncio's TimerHandle.cancel + Handle.cancel in one call (asyncio.sleep cancels every fired timer)
        if not self._cancelled:
            if self._scheduled:
                self._loop._timer_handle_cancelled(self)
            self._cancelled = True
            if self._loop._debug:
                self._repr = repr(self)
            self._callback = None
            self._args = None


class _Wake:
    """The loop's reusable 'drain now' simpy event, for call_soon made outside a drain."""

    __slots__ = ("callbacks",)
    _ok = True

    def __repr__(self) -> str:
        return "<VirtualLoop wake>"


class _EnvState:
    """What the loops of one environment share: the registry, and the count of dead timers on the heap."""

    __slots__ = ("loops", "cancelled", "__weakref__")

    def __init__(self) -> None:
        self.loops: list[VirtualLoop] = []
        self.cancelled = 0


_STATE_ATTR = "_sim_virtual_loops"


def _state_of(env: simpy.Environment) -> _EnvState:
    state = env.__dict__.get(_STATE_ATTR)
    if state is None:
        state = _EnvState()
        setattr(env, _STATE_ATTR, state)
    return state


def loops_of(env: simpy.Environment) -> list[VirtualLoop]:
    """Every VirtualLoop created on ``env``, in creation order (killed and closed ones included)."""
    state = env.__dict__.get(_STATE_ATTR)
    return list(state.loops) if state is not None else []


def skip_cancelled_timers(env: simpy.Environment) -> None:
    """Pop cancelled timers off the top of simpy's heap, so ``env.peek()`` is the next event that does something.

    Cancelled timers stay on the heap (simpy cannot remove an event) and would otherwise make time jump to
    deadlines nobody waits for anymore, e.g. the timeout of an ``asyncio.timeout`` block that finished early.
    """
    queue = env._queue
    state = env.__dict__.get(_STATE_ATTR)
    while queue:
        event = queue[0][3]
        if type(event) is not _Timer or not event._cancelled:
            return
        _heappop(queue)
        if event._scheduled:
            event._scheduled = False
            if state is not None:
                state.cancelled -= 1


def _compact(env: simpy.Environment, state: _EnvState, also: asyncio.TimerHandle) -> None:
    """Drop cancelled timers from simpy's heap (order of the rest is kept: entries are unique tuples)."""
    queue = env._queue
    keep = []
    for entry in queue:
        event = entry[3]
        if type(event) is _Timer and (event._cancelled or event is also):
            event._scheduled = False
        else:
            keep.append(entry)
    queue[:] = keep
    heapq.heapify(queue)
    state.cancelled = 0
