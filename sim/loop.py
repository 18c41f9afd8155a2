"""VirtualLoop: an asyncio event loop on simulated time, driven by one shared ``simpy.Environment``.

One ``simpy.Environment`` per world counts INTEGER NANOSECONDS (``env.now`` is an int). Each simulated
node gets its own ``VirtualLoop(env, name)``; its ``time()`` is ``env.now / 1e9`` seconds. Nothing in here
ever sleeps or touches a thread, a socket or a file descriptor: the unmodified asyncio runtime (tasks,
futures, ``asyncio.sleep``, ``asyncio.timeout``, TaskGroups, locks, queues) runs on it, and a simulated
day takes as long as its events take to process.

How a wake-up maps onto simpy
-----------------------------
A timer IS its own simpy event: ``call_at``/``call_later`` build a ``_Timer``, a subclass of
``asyncio.TimerHandle`` that also speaks simpy's event protocol (``callbacks``, ``_ok``), and push it once
on simpy's heap (``(fire_ns, NORMAL, next eid, timer)``, exactly what ``env.schedule`` pushes). So a
wake-up costs one handle object (which asyncio would build anyway, here without asyncio's two-call
``__init__``), one heap tuple, and one call of the loop's ``_drain`` when simpy pops it: no
``simpy.Timeout``, no callback list (every timer of a loop shares one callbacks tuple), no closure, no
second event. ``_drain`` appends the handle to the loop's ready deque and drains the deque right there,
inside simpy's callback: the loop becomes the running loop (``asyncio.events._set_running_loop``; the
previous running loop, e.g. a Jupyter kernel's, is restored in ``finally``), the asyncgen hooks become
the loop's own, and handles run FIFO until the deque is empty, including everything they ``call_soon``
meanwhile (the task wake-up queued when the timer resolves the sleep's future runs in the same drain).
Only a ``call_soon`` from OUTSIDE a drain (a simpy process, the world, another node's loop) schedules a
drain event: a single reusable object per loop, at most one pending.

Order
-----
simpy orders equal-time events by insertion (``(time, priority, eid)``), so equal deadlines fire in the
order they were set; asyncio's own heap does not promise that. ``call_soon`` is FIFO. Tasks and futures of
a VirtualLoop hash by a per-loop creation sequence number (identity equality), so sets of them (the
``done`` set of ``asyncio.wait``, TaskGroup internals, ``asyncio.all_tasks``) iterate the same way in
every run, whatever ``PYTHONHASHSEED`` or the memory layout. Default task names are
``f"{loop.name}:task-{n}"``, never asyncio's process-wide counter.

Time conversion
---------------
``call_later(delay)`` (so ``asyncio.sleep``) fires at exactly ``env.now + round(delay * 1e9)`` ns, at
least 1 ns later for a positive delay (a positive sleep always moves time). ``call_at(when)`` (so
``asyncio.timeout`` and, from 3.12, ``wait_for``) fires at ``round(when * 1e9)``, moved up to the first
nanosecond whose ``ns / 1e9 >= when`` if float rounding would have it fire early: a deadline-driven
timer never fires while ``loop.time() < when``, so code that re-checks ``loop.time() >= deadline`` in
the callback and re-arms ``call_at(deadline)`` otherwise (casty's TimerHeap and DeadlineQueue do) cannot
spin at one instant: the float livelock. Real asyncio avoids it with its clock resolution slack.

Faults
------
``pause()``/``resume()``: a stop-the-world pause; due timers and ``call_soon`` callbacks queue while
paused and run at the resume instant in the order they became ready. ``kill()``: cancels every task of
the loop, drains so they process their cancellation, then closes the loop; later timers and callbacks
of a killed loop are silently dropped.

simpy internals used (stable across simpy 4.x, checked at import): the event protocol read by
``Environment.step`` (``event.callbacks`` iterated then set to ``None``, ``event._ok``), and
``env._now`` / ``env._queue`` / ``env._eid`` for the hot path and for skipping cancelled timers.

Where the parts live
--------------------
This module holds the loop: scheduling (``call_soon``/``call_later``/``call_at``, handles and timers built
slot by slot), the drain, faults, futures and tasks. Off the hot path, apart: ``loop_events`` (SimFuture,
SimTask, the ``_Timer`` simpy event, the per-environment registry), ``loop_describe`` (stable descriptions
of tasks and callbacks), ``loop_errors`` and ``loop_refused`` (mixins: the exception-handler protocol, the
refused I/O calls), ``loop_driver`` (``run_until_complete`` and the pending-task report). Every public name
stays importable from ``sim.loop``.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import heapq
import sys
import weakref
from asyncio import events as _events
from collections.abc import Callable, Coroutine, Generator
from typing import Any, TypeVar

import simpy
from simpy.events import NORMAL

from .errors import Deadlock, ForbiddenInSimulation, Livelock, SimulationTimeout
from .loop_describe import _task_order, describe_callback
from .loop_driver import describe_pending, pending_tasks, run_until_complete
from .loop_errors import ExceptionHandling
from .loop_events import (
    SimFuture, SimTask, _compact, _new_task, _state_of, _task_init, _Timer, _Wake, loops_of, skip_cancelled_timers,
)
from .loop_refused import RefusedCalls

__all__ = [
    "NS_PER_S",
    "Deadlock",
    "ForbiddenInSimulation",
    "Livelock",
    "SimFuture",
    "SimTask",
    "SimulationTimeout",
    "VirtualLoop",
    "describe_pending",
    "loops_of",
    "pending_tasks",
    "run_until_complete",
    "skip_cancelled_timers",
    "to_ns",
]

T = TypeVar("T")

NS_PER_S = 1_000_000_000
DEFAULT_LIVELOCK_LIMIT = 1_000_000
_LIVELOCK_SAMPLE = 1_000  # callbacks described after the limit is crossed, to name the most frequent
_KILL_ROUNDS = 16  # cancel / drain rounds in kill(): tasks spawned while cancelling get cancelled too
_COMPACT_MIN = 4_096  # cancelled timers left on simpy's heap before we consider compacting it

_get_running_loop = _events._get_running_loop
_set_running_loop = _events._set_running_loop
_get_hooks = sys.get_asyncgen_hooks
_set_hooks = sys.set_asyncgen_hooks
_Handle = asyncio.Handle
_new_handle = object.__new__
_copy_context = contextvars.copy_context
_heappush = heapq.heappush

# Handles are built without asyncio's __init__ (which costs two Python calls, one of them get_debug())
# when asyncio's Handle / TimerHandle have exactly the slots this module fills; otherwise, and in debug
# mode, through asyncio's own constructors.
_FAST_HANDLES = (
    set(asyncio.Handle.__slots__)
    == {"_callback", "_args", "_cancelled", "_loop", "_source_traceback", "_repr", "__weakref__", "_context"}
    and set(asyncio.TimerHandle.__slots__) == {"_scheduled", "_when"}
)


def _check_simpy() -> None:
    env = simpy.Environment()
    missing = [a for a in ("_now", "_queue", "_eid", "schedule", "step") if not hasattr(env, a)]
    if missing:  # pragma: no cover - guards a future simpy
        raise ImportError(f"sim.loop needs simpy 4.x internals that this simpy lacks: {missing}")


_check_simpy()


def to_ns(seconds: float) -> int:
    """Seconds (float) to integer nanoseconds, the unit of the world's ``simpy.Environment``."""
    return round(seconds * NS_PER_S)


# --------------------------------------------------------------------------------------------------
# The loop


class VirtualLoop(RefusedCalls, ExceptionHandling, asyncio.AbstractEventLoop):
    """An asyncio event loop whose clock is ``env.now`` (integer ns) and whose timers are simpy events.

    ``errors`` holds every context passed to the default exception handler (tests assert it is empty);
    ``killed_tasks`` the names of the tasks ``kill()`` cancelled.
    """

    __slots__ = (
        "_env", "name", "_state", "_ready", "_draining", "_paused", "_closed", "_killed", "_wake_pending",
        "_queue", "_eid", "_wake_event", "_event_callbacks", "_seq", "_task_count", "_task_factory",
        "_exception_handler", "_debug", "_agen_hooks", "_asyncgens", "_asyncgens_shutdown", "livelock_limit",
        "_tick_now", "_tick_count", "_sample", "_sample_left", "errors", "killed_tasks", "slow_callback_duration",
    )

    def __init__(self, env: simpy.Environment, name: str, *, livelock_limit: int = DEFAULT_LIVELOCK_LIMIT) -> None:
        if not isinstance(env.now, int):
            raise TypeError(f"the world's simpy.Environment must count integer nanoseconds; env.now is {env.now!r}")
        state = _state_of(env)
        for other in state.loops:
            if other.name == name and not other._closed:
                raise ValueError(f"a live VirtualLoop named {name!r} already runs on this environment")
        self._env = env
        self.name = name
        self._state = state
        self._ready: collections.deque[asyncio.Handle] = collections.deque()
        self._draining = False
        self._paused = False
        self._closed = False
        self._killed = False
        self._wake_pending = False
        self._queue = env._queue  # simpy's heap: (time, priority, event id, event)
        self._eid = env._eid  # simpy's event id counter (insertion order breaks ties)
        self._wake_event = _Wake()
        self._event_callbacks = (self._drain,)  # shared by every timer and the wake event of this loop
        self._seq = 0  # hash of the next SimFuture / SimTask
        self._task_count = 0  # number in the next default task name
        self._task_factory: Any = None
        self._exception_handler: Any = None
        self._debug = False
        self._agen_hooks = (self._asyncgen_firstiter_hook, self._asyncgen_finalizer_hook)
        self._asyncgens: weakref.WeakKeyDictionary[Any, None] = weakref.WeakKeyDictionary()  # insertion-ordered
        self._asyncgens_shutdown = False
        self.livelock_limit = livelock_limit
        self._tick_now = -1
        self._tick_count = 0
        self._sample: collections.Counter[str] | None = None
        self._sample_left = 0
        self.errors: list[dict[str, Any]] = []
        self.killed_tasks: list[str] = []
        self.slow_callback_duration = 0.1
        state.loops.append(self)

    def __repr__(self) -> str:
        status = "killed" if self._killed else "closed" if self._closed else "paused" if self._paused else "live"
        return f"<VirtualLoop {self.name!r} {status} t={self._env._now}ns ready={len(self._ready)}>"

    # ---------------------------------------------------------------- identity and state

    @property
    def env(self) -> simpy.Environment:
        return self._env

    @property
    def paused(self) -> bool:
        return self._paused

    @property
    def killed(self) -> bool:
        return self._killed

    def time(self) -> float:
        """Seconds of virtual time: ``env.now / 1e9``."""
        return self._env._now / 1e9

    def time_ns(self) -> int:
        """Virtual time in integer nanoseconds (``env.now``)."""
        return self._env._now

    def is_running(self) -> bool:
        """True while the loop runs its callbacks (it is then ``asyncio.get_running_loop()``), as in asyncio."""
        return self._draining

    def is_closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Close the loop: queued callbacks are dropped, timers still on simpy's heap will do nothing."""
        if self._draining:
            raise RuntimeError("Cannot close a running event loop")
        self._closed = True
        self._ready.clear()

    def get_debug(self) -> bool:
        return self._debug

    def set_debug(self, enabled: bool) -> None:
        self._debug = bool(enabled)

    # ---------------------------------------------------------------- scheduling

    def call_soon(self, callback: Callable[..., Any], *args: Any, context: Any = None) -> asyncio.Handle:
        """Run ``callback(*args)`` in this loop's current drain, or in a drain at the current instant."""
        if self._closed:
            return self._call_on_closed(callback, args, context)
        if self._debug:
            self._check_callback(callback, "call_soon")
            handle = _Handle(callback, args, self, context)
        elif _FAST_HANDLES:
            handle = _new_handle(_Handle)
            handle._callback = callback
            handle._args = args
            handle._cancelled = False
            handle._loop = self
            handle._source_traceback = None
            handle._repr = None
            handle._context = context if context is not None else _copy_context()
        else:  # pragma: no cover - a future asyncio with other Handle slots
            handle = _Handle(callback, args, self, context)
        self._ready.append(handle)
        if not (self._draining or self._wake_pending or self._paused):
            self._schedule_wake()
        return handle

    call_soon_threadsafe = call_soon  # no threads exist in the simulation

    def call_later(self, delay: float, callback: Callable[..., Any], *args: Any, context: Any = None) -> asyncio.TimerHandle:
        """Run ``callback(*args)`` after ``delay`` seconds: at ``env.now + round(delay * 1e9)`` ns, exactly.

        A positive delay waits at least 1 ns (zero-progress wake-ups would spin). ``when()`` of the
        handle is the firing time as this loop's clock will read it.
        """
        if delay is None:
            raise TypeError("delay must not be None")
        now = self._env._now
        if delay > 0:
            try:
                fire = now + (round(delay * 1e9) or 1)
            except (OverflowError, ValueError):
                return self._never(now / 1e9 + delay, callback, args, context)
        elif delay != delay:
            raise ValueError("timer delay is NaN")
        else:
            fire = now
        when = fire / 1e9
        if self._closed or self._debug or not _FAST_HANDLES:
            return self._slow_timer(when, fire, now, callback, args, context)
        return self._push_timer(when, fire, callback, args, context)

    def call_at(self, when: float, callback: Callable[..., Any], *args: Any, context: Any = None) -> asyncio.TimerHandle:
        """Run ``callback(*args)`` at loop time ``when``: at the first nanosecond where ``time() >= when``."""
        if when is None:
            raise TypeError("when cannot be None")
        now = self._env._now
        try:
            fire = round(when * 1e9)
        except (OverflowError, ValueError):
            return self._never(when, callback, args, context)
        if fire / 1e9 < when:
            fire = self._first_ns_at(when, fire)
        if fire < now:
            fire = now
        if self._closed or self._debug or not _FAST_HANDLES:
            return self._slow_timer(when, fire, now, callback, args, context)
        return self._push_timer(when, fire, callback, args, context)

    def _push_timer(self, when: float, fire: int, callback: Callable[..., Any], args: tuple[Any, ...], context: Any) -> asyncio.TimerHandle:
        """Build a timer slot by slot and put it on simpy's heap as its own event (what ``env.schedule`` would push)."""
        timer = _new_handle(_Timer)
        timer._callback = callback
        timer._args = args
        timer._cancelled = False
        timer._loop = self
        timer._source_traceback = None
        timer._repr = None
        timer._context = context if context is not None else _copy_context()
        timer._when = when
        timer._scheduled = True
        timer.callbacks = self._event_callbacks
        _heappush(self._queue, (fire, NORMAL, next(self._eid), timer))
        return timer

    def _slow_timer(self, when: float, fire: int, now: int, callback: Any, args: tuple[Any, ...], context: Any) -> asyncio.TimerHandle:
        # closed loop, debug mode (source tracebacks, callback checks), or an asyncio with other Handle slots
        if self._closed:
            return self._call_on_closed(callback, args, context, when)
        if self._debug:
            self._check_callback(callback, "call_at")
        timer = _Timer(when, callback, args, self, context)
        timer._scheduled = True
        timer.callbacks = self._event_callbacks
        self._env.schedule(timer, NORMAL, fire - now)
        return timer

    @staticmethod
    def _first_ns_at(when: float, fire: int) -> int:
        # float seconds lose nanosecond resolution at large times: step to the first ns that reads >= when
        while fire / 1e9 < when:
            fire += 1
        return fire

    def _never(self, when: float, callback: Any, args: tuple[Any, ...], context: Any) -> asyncio.TimerHandle:
        if when != when:  # NaN
            raise ValueError("timer deadline is NaN")
        if self._closed:
            return self._call_on_closed(callback, args, context, when)
        return asyncio.TimerHandle(when, callback, args, self, context)  # an infinite deadline never fires

    def _call_on_closed(self, callback: Any, args: tuple[Any, ...], context: Any, when: float | None = None) -> asyncio.Handle:
        if not self._killed:
            raise RuntimeError("Event loop is closed")
        # a dead node does nothing: accept the call, never run it
        handle = _Handle(callback, args, self, context) if when is None else asyncio.TimerHandle(when, callback, args, self, context)
        handle.cancel()
        return handle

    def _timer_handle_cancelled(self, handle: asyncio.TimerHandle) -> None:
        if handle._scheduled:  # still on simpy's heap: count it, compact the heap when dead timers dominate
            state = self._state
            state.cancelled += 1
            if state.cancelled > _COMPACT_MIN and state.cancelled * 2 > len(self._queue):
                _compact(self._env, state, handle)

    def _check_callback(self, callback: Any, method: str) -> None:
        if asyncio.iscoroutine(callback) or asyncio.iscoroutinefunction(callback):
            raise TypeError(f"coroutines cannot be used with {method}()")
        if not callable(callback):
            raise TypeError(f"a callable object was expected by {method}(), got {callback!r}")

    # ---------------------------------------------------------------- running (simpy callbacks)

    def _schedule_wake(self) -> None:
        self._wake_pending = True
        wake = self._wake_event
        wake.callbacks = self._event_callbacks
        _heappush(self._queue, (self._env._now, NORMAL, next(self._eid), wake))

    def _drain(self, event: Any = None) -> None:
        """simpy callback of this loop's timers and wake event (and the kill path, with no event).

        A due timer joins the ready deque; then, unless the loop is paused or already draining, the
        loop becomes the running loop (with its own asyncgen hooks) and runs ready handles FIFO until
        none is left, including those they add.
        """
        if event is not None:
            if event is self._wake_event:
                self._wake_pending = False
            elif event._cancelled:
                if event._scheduled:
                    event._scheduled = False
                    self._state.cancelled -= 1
                return
            else:
                event._scheduled = False
                if self._closed:
                    return
                self._ready.append(event)
        if self._draining or self._paused or self._closed:
            return
        now = self._env._now
        if now != self._tick_now:
            self._tick_now = now
            self._tick_count = 0
            self._sample = None
        budget = self.livelock_limit - self._tick_count
        ready = self._ready
        popleft = ready.popleft
        saved_loop = _get_running_loop()
        _set_running_loop(self)
        saved_hooks = _get_hooks()
        _set_hooks(*self._agen_hooks)
        self._draining = True
        n = 0
        try:
            while ready:
                if self._paused:
                    break
                handle = popleft()
                if handle._cancelled:
                    continue
                n += 1
                if n > budget:
                    self._over_budget(handle)
                try:  # asyncio's Handle._run, inlined
                    handle._context.run(handle._callback, *handle._args)
                except (SystemExit, KeyboardInterrupt):
                    raise
                except BaseException as exc:
                    self._callback_failed(handle, exc)
        finally:
            self._draining = False
            self._tick_count += n
            _set_hooks(*saved_hooks)
            _set_running_loop(saved_loop)

    def _callback_failed(self, handle: asyncio.Handle, exc: BaseException) -> None:
        context: dict[str, Any] = {
            "message": f"Exception in callback {describe_callback(handle._callback)}",
            "exception": exc,
            "handle": handle,
        }
        if handle._source_traceback:
            context["source_traceback"] = handle._source_traceback
        self.call_exception_handler(context)

    def _over_budget(self, handle: asyncio.Handle) -> None:
        # Slow path, only after ``livelock_limit`` callbacks ran at one instant: describe the next
        # ``_LIVELOCK_SAMPLE`` callbacks (across drains at this instant), then raise naming the most frequent.
        if self._sample is None:
            self._sample = collections.Counter()
            self._sample_left = _LIVELOCK_SAMPLE
        self._sample[describe_callback(handle._callback)] += 1
        self._sample_left -= 1
        if self._sample_left > 0:
            return
        self._ready.appendleft(handle)
        top = self._sample.most_common(5)
        lines = "\n".join(f"  {count:>5} x {what}" for what, count in top)
        raise Livelock(
            f"Livelock on loop {self.name!r} at t={self._tick_now} ns: more than {self.livelock_limit} callbacks ran "
            f"without virtual time advancing. Most frequent of the next {_LIVELOCK_SAMPLE}:\n{lines}",
            loop=self.name,
            now_ns=self._tick_now,
            top=top,
        )

    # ---------------------------------------------------------------- faults

    def pause(self) -> None:
        """Stop the world for this node: due timers and callbacks queue, nothing runs, time goes on."""
        self._paused = True

    def resume(self) -> None:
        """End a pause: everything queued runs at this instant, in the order it became ready."""
        if not self._paused:
            return
        self._paused = False
        if self._ready and not (self._closed or self._draining or self._wake_pending):
            self._schedule_wake()

    def kill(self) -> list[str]:
        """Crash the node: cancel every task, let them process it (drain at this instant), then close for good.

        Later timers and ``call_soon`` on the loop are silently dropped. Returns (and appends to
        ``killed_tasks``) the names of the cancelled tasks, in creation order.
        """
        if self._draining:
            raise RuntimeError(f"VirtualLoop {self.name!r} cannot kill itself from its own callbacks; kill it from the world")
        if self._closed:
            self._killed = True
            return []
        self._paused = False
        cancelled: dict[asyncio.Task[Any], None] = {}
        for _ in range(_KILL_ROUNDS):
            fresh = [task for task in self.tasks() if task not in cancelled]
            if not fresh and not self._ready:
                break
            for task in fresh:
                cancelled[task] = None
                task.cancel(f"loop {self.name!r} killed")
            self._drain()
        self._killed = True
        self._closed = True
        self._ready.clear()
        names = [task.get_name() for task in cancelled]
        self.killed_tasks.extend(names)
        return names

    def tasks(self) -> list[asyncio.Task[Any]]:
        """The pending tasks of this loop, in creation order."""
        return sorted(asyncio.all_tasks(self), key=_task_order)

    # ---------------------------------------------------------------- futures and tasks

    def create_future(self) -> asyncio.Future[Any]:
        future = SimFuture(loop=self)
        seq = self._seq
        self._seq = seq + 1
        future._sim_seq = seq
        return future

    def create_task(self, coro: Coroutine[Any, Any, T] | Generator[Any, None, T], *, name: str | None = None,
                    context: Any = None, **kwargs: Any) -> asyncio.Task[T]:
        """A SimTask named ``f"{loop.name}:task-{n}"`` unless named, hashing by creation order."""
        if self._closed:
            close = getattr(coro, "close", None)
            if close is not None:
                close()  # never started: do not let it warn "was never awaited"
            raise RuntimeError(f"VirtualLoop {self.name!r} is {'killed' if self._killed else 'closed'}: cannot create a task")
        factory = self._task_factory
        if factory is not None:
            if context is not None:
                kwargs["context"] = context
            task = factory(self, coro, **kwargs)
            if name is not None:
                task.set_name(name)
            return task
        if name is None:
            number = self._task_count
            self._task_count = number + 1
            name = f"{self.name}:task-{number}"
        task = _new_task(SimTask)
        seq = self._seq
        self._seq = seq + 1
        task._sim_seq = seq  # before __init__: Task.__init__ puts the task in a WeakSet, which hashes it
        _task_init(task, coro, loop=self, name=name, context=context, **kwargs)
        return task

    def set_task_factory(self, factory: Any) -> None:
        if factory is not None and not callable(factory):
            raise TypeError("task factory must be a callable or None")
        self._task_factory = factory

    def get_task_factory(self) -> Any:
        return self._task_factory

    # ---------------------------------------------------------------- async generators

    def _asyncgen_firstiter_hook(self, agen: Any) -> None:
        if not self._asyncgens_shutdown:
            self._asyncgens[agen] = None

    def _asyncgen_finalizer_hook(self, agen: Any) -> None:
        self._asyncgens.pop(agen, None)
        if not self._closed:  # a dead node runs nothing, not even finally blocks of its generators
            self.call_soon(self.create_task, agen.aclose())

    async def shutdown_asyncgens(self) -> None:
        """Close the async generators first iterated on this loop (oldest first)."""
        self._asyncgens_shutdown = True
        agens = list(self._asyncgens)
        self._asyncgens.clear()
        if not agens:
            return
        results = await asyncio.gather(*[agen.aclose() for agen in agens], return_exceptions=True)
        for result, agen in zip(results, agens):
            if isinstance(result, Exception):
                self.call_exception_handler(
                    {"message": f"an error occurred during closing of asynchronous generator {agen!r}",
                     "exception": result, "asyncgen": agen}
                )
