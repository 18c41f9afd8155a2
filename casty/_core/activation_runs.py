"""The work an activation's run starts besides its body: ``ctx.timer`` ticks, ``to_self`` bridges, ``merge`` pumps.

All of it belongs to one run of one activation: a timer is cancelled when the activation
ends (``ActivationTimer``: it never starts a key), a bridge or pump task when the run ends
(``_cancel_run_tasks``). What such work produces comes back as a message to the key itself.
``RunWork`` is a mixin of ``Activation`` (no state of its own: the activation's slots hold it).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, Awaitable, Callable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from .. import observer as ev
from ..errors import CastyError, Fenced, MailboxFull, NotStarted
from .activation_timers import ActivationTimer, TimerHandle
from .mailbox import ASK_CHAIN, Envelope, MailboxWork
from .schedules import to_micros

if TYPE_CHECKING:
    from .actor import ActorType
    from .ref import EntityRef

__all__ = ["RunWork"]


class RunWork(MailboxWork):
    """The timers, bridges and merges part of ``Activation``."""

    if not TYPE_CHECKING:  # no state of its own, no __dict__ (mypy would read slots () as "assigns nothing")
        __slots__ = ()

    behavior: ActorType[Any, Any]
    _timers: dict[str, ActivationTimer] | None
    _run_tasks: dict[asyncio.Task[Any], None] | None

    if TYPE_CHECKING:  # Activation's own
        @property
        def ref(self) -> EntityRef[Any]: ...

    def spawn_bridge(
        self,
        lease: int,
        awaitable: Awaitable[Any],
        mapper: Callable[[Any], Any] | None,
        failed: Callable[[BaseException], Any] | None,
    ) -> None:
        if lease != self.lease or self.closed:
            if asyncio.iscoroutine(awaitable):
                awaitable.close()
            raise Fenced(f"{self.type.name}[{self.key!r}]: a replaced run cannot start work (lease {lease})")
        task = self._loop.create_task(self._bridge(awaitable, mapper, failed), name=f"casty:{self.type.name}[{self.key}]:to_self")
        self._track_run_task(task)

    # ================================================================== timers =======

    def set_timer(
        self, lease: int, name: str, delay: timedelta, interval: timedelta | None, message: Any, keep_alive: bool
    ) -> TimerHandle[Any]:
        """``ctx.timer``: deliver ``message`` after ``delay``, then every ``interval``, while this activation lasts."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a timer name must be a non-empty string, got {name!r}")
        delay_s = to_micros(delay, "delay") / 1_000_000
        if delay_s < 0:
            raise ValueError(f"timer {name!r}: delay must not be negative, got {delay}")
        every: float | None = None
        if interval is not None:
            every = to_micros(interval, "interval") / 1_000_000
            if every <= 0:
                raise ValueError(f"timer {name!r}: interval must be positive, got {interval}")
        self.behavior.schema.check(message)
        self.system.codec.encode_message(message, self.behavior.schema)
        if lease != self.lease or self.closed:
            raise Fenced(f"{self.type.name}[{self.key!r}]: a replaced run cannot set timers (lease {lease})")
        timers = self._timers
        if timers is None:
            timers = self._timers = {}
        old = timers.get(name)
        if old is not None:
            self.cancel_timer(old, "replaced")
        timer = ActivationTimer(name, message, every, keep_alive, self._loop.time() + delay_s)
        timers[name] = timer
        timer.timer = self.system.timers.call_at(timer.due, self._tick, timer)
        return TimerHandle(self, timer)

    def timer_handles(self) -> Mapping[str, TimerHandle[Any]]:
        return {name: TimerHandle(self, timer) for name, timer in (self._timers or {}).items()}

    def cancel_timer(self, timer: ActivationTimer, reason: str) -> None:
        if not timer.live:
            return
        timer.live = False
        if timer.timer is not None:
            timer.timer.cancel()
            timer.timer = None
        if self._timers is not None and self._timers.get(timer.name) is timer:
            del self._timers[timer.name]
        self.system.emit(ev.TimerCancelled, self.type.name, self.key, timer.name, reason)

    def _tick(self, timer: ActivationTimer) -> None:
        """A timer went off: its message goes to this activation's mailbox (never to a new activation)."""
        timer.timer = None
        if not timer.live or self.closed:
            return
        timer.fired += 1
        try:
            self.deliver(Envelope(timer.message, quiet=not timer.keep_alive, origin=f"timer:{timer.name}"))
        except MailboxFull as exc:
            self.system.emit(ev.MessageDropped, self.type.name, self.key, type(timer.message).__qualname__, str(exc))
        self.system.emit(ev.TimerFired, self.type.name, self.key, timer.name, timer.keep_alive)
        if timer.every is None:
            self.cancel_timer(timer, "done")
            return
        timer.due = timer.next_due(self._loop.time())
        timer.timer = self.system.timers.call_at(timer.due, self._tick, timer)

    def spawn_merge(self, lease: int, source: AsyncIterable[Any]) -> None:
        if lease != self.lease or self.closed:
            raise Fenced(f"{self.type.name}[{self.key!r}]: a replaced run cannot merge a stream (lease {lease})")
        task = self._loop.create_task(self._pump(source), name=f"casty:{self.type.name}[{self.key}]:merge")
        self._track_run_task(task)

    def _track_run_task(self, task: asyncio.Task[Any]) -> None:
        if self._run_tasks is None:
            self._run_tasks = {}
        self._run_tasks[task] = None
        task.add_done_callback(self._run_task_done)

    def _run_task_done(self, task: asyncio.Task[Any]) -> None:
        if self._run_tasks is not None:
            self._run_tasks.pop(task, None)

    async def _bridge(
        self,
        awaitable: Awaitable[Any],
        mapper: Callable[[Any], Any] | None,
        failed: Callable[[BaseException], Any] | None,
    ) -> None:
        ASK_CHAIN.set((None, ()))  # the body keeps reading while this waits: it is not blocked on it
        try:
            result = await awaitable
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if failed is None:
                self.system.emit(ev.MessageDropped, self.type.name, self.key, "to_self", f"work failed: {exc!r}")
                return
            message = failed(exc)
        else:
            message = mapper(result) if mapper is not None else result
        self._tell_self(message, "to_self")

    async def _pump(self, source: AsyncIterable[Any]) -> None:
        ASK_CHAIN.set((None, ()))
        async for item in source:
            self._tell_self(item, "merge")

    def _tell_self(self, message: Any, via: str) -> None:
        try:
            self.system.tell(self.ref, message)
        except (CastyError, NotStarted) as exc:
            self.system.emit(ev.MessageDropped, self.type.name, self.key, type(message).__qualname__, f"{via}: {exc}")

    def _cancel_run_tasks(self) -> None:
        if not self._run_tasks:
            return
        tasks = list(self._run_tasks)
        self._run_tasks.clear()
        for task in tasks:
            task.cancel()

