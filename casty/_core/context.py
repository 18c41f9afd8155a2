"""``Context[S, M]``: what one run of a body sees of its key.

A context is bound to one run (one lease). When the run is replaced — by ``become``, a
restart after failure, a cancelled ask, or a later activation — the old context keeps
working for reads but its writes are refused. Local variables of the body belong to the
run as well; what must survive goes in ``ctx.state``.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Generator, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Generic, NoReturn, TypeVar

from .effects import effect_key, plain_details
from ..observer import Effect, log_effect
from .ref import Askable, EntityRef, Ref
from .catchup import CatchUp, Skip
from .schedules import Schedule
from .activation_timers import TimerHandle
from .state import State

if TYPE_CHECKING:
    from .activation import Activation
    from .actor import ActorType
    from .occurrence import Occurrence
    from .system import ActorSystem

__all__ = ["Context", "Inbox"]

S = TypeVar("S")
M = TypeVar("M")
R = TypeVar("R")
T = TypeVar("T")

_MISSING: Any = object()
_SKIP = Skip()

EMPTY: Any = object()
"""What a step of an inbox read returns when the mailbox has nothing for the body: it must wait."""


class Inbox(Generic[M]):
    """The mailbox as an async iterator: one reader, one message at a time.

    Reading the next message marks the previous one as handled. Iteration ends when the
    activation goes idle, is released or stopped, or a ``become`` takes effect.

    The inbox is its own awaitable: ``__anext__`` returns it and ``await`` runs the read.
    A message that is already queued comes back through a finished generator. Otherwise
    the inbox is both the iterator the reading task is suspended in and the future-like
    object it waits on (the asyncio protocol: ``_asyncio_future_blocking``, ``get_loop``,
    ``add_done_callback``, ``result``, ``cancel``); the activation wakes it when a
    message arrives. An idle body thus costs no object beyond the inbox itself, where a
    read coroutine, its future and the future's iterator were three more per live key for
    the garbage collector to traverse.

    It also keeps the coroutine protocol (``send``, ``throw``, ``close``), so what
    ``__anext__`` returns can still be run as a task of its own, as a read coroutine could:
    ``asyncio.create_task(anext(ctx.inbox))``.
    """

    __slots__ = (
        "_activation", "_lease", "_step", "_wakeup", "_wakeup_context", "_cancel_message", "_asyncio_future_blocking",
        "_last_wakeup",
    )

    def __init__(self, activation: Activation, lease: int) -> None:
        self._activation = activation
        self._lease = lease
        self._step = _IDLE
        self._wakeup: Callable[[Any], None] | None = None  # the waiting task's callback, and its context
        self._wakeup_context: contextvars.Context | None = None
        self._cancel_message: Any = None
        self._asyncio_future_blocking: bool | None = None  # None: not a future now (asyncio.isfuture is False)
        self._last_wakeup: Callable[[Any], None] | None = None  # the reading task's wake-up, as first handed over

    def __aiter__(self) -> AsyncIterator[M]:
        return self

    def __anext__(self) -> Awaitable[M]:
        self._step = _ASKED
        return self

    def __await__(self) -> Generator[Any, None, M]:
        self._step = _IDLE
        try:
            message = self._activation.read(self._lease, self)
        except StopAsyncIteration:
            return _ended()  # raised here, it would reach `async for` as a TypeError about __anext__
        if message is EMPTY:
            self._step = _MUST_WAIT
            return self  # type: ignore[return-value]  # the iterator protocol, without typing.cast's call
        return _ready(message)

    # --- the read, as the iterator (or coroutine) its task runs ---------------------

    def __next__(self) -> Inbox[M]:
        """One step of the read: the message (in ``StopIteration``), the end of the inbox, or itself to wait on."""
        step = self._step
        if step != _MUST_WAIT:  # woken after a wait, or run as a coroutine (the read starts here)
            activation = self._activation
            self._step = _IDLE
            self._asyncio_future_blocking = None
            try:
                message = activation.read(self._lease, self)
            except StopAsyncIteration:
                if step >= _WAITING:
                    activation.read_ended()
                raise
            if message is not EMPTY:
                raise StopIteration(message)
        self._step = _WAITING
        self._asyncio_future_blocking = True  # as Future.__await__ sets it: the task waits on what it is handed
        return self

    def send(self, value: None) -> Inbox[M]:
        return self.__next__()

    def throw(self, error: BaseException | type[BaseException], *rest: Any) -> NoReturn:
        """The waiting task was cancelled (or an exception thrown in): stop waiting and raise it at the read."""
        self._stop_waiting(restore=True)
        if isinstance(error, type):
            error = error(*rest[:1]) if rest and rest[0] is not None else error()
        raise error

    def close(self) -> None:
        """The read is abandoned (its coroutine closed): forget the wait."""
        self._stop_waiting(restore=False)

    def _stop_waiting(self, *, restore: bool) -> None:
        if self._step >= _MUST_WAIT:
            self._activation.read_interrupted(restore=restore)
        self._step = _IDLE
        self._wakeup = self._wakeup_context = None
        self._asyncio_future_blocking = None

    # --- the wait, as the future its task waits on ----------------------------------

    def wake(self) -> None:
        """Complete the wait: a message arrived, or the run is ending."""
        if self._step == _WAITING or self._step == _MUST_WAIT:
            self._step = _WOKEN
            fn = self._wakeup  # _call_wakeup, inline: once per message that finds the body waiting
            if fn is not None:
                context = self._wakeup_context
                self._wakeup = self._wakeup_context = None
                self._activation._loop.call_soon(fn, self, context=context)

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self._activation._loop

    def add_done_callback(self, fn: Callable[[Any], None], *, context: contextvars.Context | None = None) -> None:
        if self._step != _WAITING:
            self._activation._loop.call_soon(fn, self, context=context)
        elif self._wakeup is None:
            # A task hands over a new wake-up method object at every wait. Held until a message
            # comes, often seconds later, it outlives the young collections and is promoted to
            # the oldest generation, whose full collections then come more often. So the first
            # one is kept and the equal ones after it (same task, same function) are let go.
            last = self._last_wakeup
            if last is not None and last == fn:
                fn = last
            else:
                self._last_wakeup = fn
            self._wakeup = fn
            self._wakeup_context = context
        else:
            raise RuntimeError("an inbox read is waited on by one task only")

    def remove_done_callback(self, fn: Callable[[Any], None]) -> int:
        if self._wakeup is not None and self._wakeup == fn:
            self._wakeup = self._wakeup_context = None
            return 1
        return 0

    def done(self) -> bool:
        return self._step != _WAITING

    def cancelled(self) -> bool:
        return self._step == _CANCELLED

    def result(self) -> None:
        if self._step == _CANCELLED:
            raise asyncio.CancelledError(*(() if self._cancel_message is None else (self._cancel_message,)))

    def cancel(self, msg: Any = None) -> bool:
        """The waiting task is cancelled: it wakes up to a ``CancelledError`` at the read."""
        if self._step != _WAITING:
            return False
        self._step = _CANCELLED
        self._cancel_message = msg
        self._call_wakeup()
        return True

    def _call_wakeup(self) -> None:
        fn = self._wakeup
        if fn is not None:
            context = self._wakeup_context
            self._wakeup = self._wakeup_context = None
            self._activation._loop.call_soon(fn, self, context=context)


_IDLE, _ASKED, _MUST_WAIT, _WAITING, _WOKEN, _CANCELLED = range(6)
"""Where an inbox read is: none in progress; asked for by ``__anext__``; found nothing (the inbox is the
activation's waiter), so its next step hands the inbox to its task; waiting (the task waits on the inbox);
woken, so its next step reads again; cancelled while waiting."""


def _ready(message: M) -> Generator[Any, None, M]:
    """An iterator that finishes at once with ``message``: the await of a read that did not wait."""
    return message
    yield  # a generator: its first step returns the message


def _ended() -> Generator[Any, None, Any]:
    """An iterator whose first step ends the ``async for``: the await of a read after the run's end."""
    raise StopAsyncIteration
    yield


class Context(Generic[S, M]):
    """The key's identity, state, inbox and tools, for one run of its body."""

    __slots__ = ("_activation", "_lease", "key", "state", "inbox", "system")

    def __init__(self, activation: Activation, lease: int) -> None:
        self._activation = activation
        self._lease = lease
        self.key: str = activation.key
        self.state: State[S] = State(activation, lease)
        self.inbox: Inbox[M] = Inbox(activation, lease)
        self.system: ActorSystem = activation.system.actor_system

    @property
    def self(self) -> EntityRef[M]:
        """This key's own ref (the same ref for every run of the activation)."""
        return self._activation.ref

    # --- behavior --------------------------------------------------------------------

    async def become(self, behavior: ActorType[Any, M], state: Any = _MISSING) -> None:
        """Switch the key to ``behavior`` (same messages; its own state type), at the next inbox read.

        Recorded in the ``@behavior`` page with ``state`` (if given) in one write. From now
        on this context no longer owns state writes; schedules are kept.
        """
        await self._activation.become(self._lease, behavior, state, has_state=state is not _MISSING)

    # --- persisted schedules ---------------------------------------------------------

    async def schedule(
        self, name: str, delay: timedelta, interval: timedelta | None, message: M, *, catch_up: CatchUp = _SKIP
    ) -> Schedule[M]:
        """Create or replace the schedule ``name``: first due after ``delay``, then every ``interval`` (None: once).

        ``catch_up`` says what a late firing does (the key was paused or inactive, the wall
        clock jumped): ``Skip()`` (the default: deliver once, skip the missed grid times),
        ``FireAll(limit=n)``, ``DropLate(grace=...)`` or ``FixedDelay()`` (see
        ``casty._core.catchup``). It is stored with the schedule, so every later owner of
        the key applies it; InvalidCatchUp for anything else.
        """
        return await self._activation.add_schedule(self._lease, self, name, delay, interval, message, catch_up)

    @property
    def occurrence(self) -> Occurrence | None:
        """The schedule occurrence whose message the body is handling (name, due, fired_at, skipped), or None
        while it handles anything else (a tell, an ask, a ``ctx.timer`` tick) or no message at all.

        A persisted schedule (``ctx.schedule``) fires where its key runs, so its occurrence is always there.
        A node schedule's tick carries it to the key wherever it runs: told to a key another node owns, the
        tick crosses the wire with its occurrence and the body there reads the same (``casty._core.occurrence``)."""
        from .occurrence import ScheduledEnvelope  # here: occurrence -> mailbox -> context at import

        activation = self._activation
        current = activation._current
        if type(current) is not ScheduledEnvelope or self._lease != activation.lease:
            return None
        return current.occurrence()

    @property
    def schedules(self) -> Mapping[str, Schedule[M]]:
        """The key's live schedules by name, in creation order."""
        return self._activation.schedule_handles(self)

    # --- work whose results come back as messages ----------------------------------

    def to_self(
        self,
        awaitable: Awaitable[T],
        mapper: Callable[[T], M] | None = None,
        *,
        failed: Callable[[BaseException], M] | None = None,
    ) -> None:
        """Run ``awaitable`` beside the body and deliver its result (through ``mapper``) to this key's inbox.

        With ``failed``, an exception becomes a message too; without it, the failure is
        reported to the observer as a dropped message. The work belongs to this run.
        """
        self._activation.spawn_bridge(self._lease, awaitable, mapper, failed)

    def ask(
        self,
        target: Ref[Any],
        message: Askable[R],
        mapper: Callable[[R], M],
        *,
        failed: Callable[[BaseException], M] | None = None,
    ) -> None:
        """Ask ``target`` without blocking the inbox; the mapped reply arrives as a message."""
        self._activation.spawn_bridge(self._lease, target.ask(message), mapper, failed)

    # --- activation-scoped timers (volatile) -------------------------------------------

    def timer(
        self, name: str, delay: timedelta, interval: timedelta | None, message: M, *, keep_alive: bool = False
    ) -> TimerHandle[M]:
        """Deliver ``message`` after ``delay`` (then every ``interval``) while this activation lasts.

        Unlike ``schedule``: nothing is persisted, the timer ends with the activation, it never
        starts the key, a duplicate name replaces it, and its ticks do not refresh the idle
        clock unless ``keep_alive``.
        """
        return self._activation.set_timer(self._lease, name, delay, interval, message, keep_alive)

    @property
    def timers(self) -> Mapping[str, TimerHandle[M]]:
        """The activation's live timers by name, in the order they were set."""
        return self._activation.timer_handles()

    def merge(self, source: AsyncIterable[M]) -> None:
        """Deliver every item of ``source`` into this key's inbox, for as long as this run lasts."""
        self._activation.spawn_merge(self._lease, source)

    # --- external effects ------------------------------------------------------------

    def effect(self, key: str, /, **details: Any) -> None:
        """Record that this body just did something outside the actor system: ``ctx.effect("charge:o17", amount=5)``.

        ``key`` is the effect's identity, what must happen once (put in it what makes it
        unique: the order, the day); ``details`` are plain JSON values (``SchemaError``
        naming the field otherwise; nothing is recorded). Call it once the action has
        happened. The record goes to the observer as an ``Effect`` event: in the simulator
        a trace row (``sim.checks.exactly_once`` counts them), on a real node a JSON fact
        and an INFO log record, even when the system's observer is off. It is recorded
        whatever this run's lease: a replaced run that still acts is how a duplicate shows.
        """
        activation = self._activation
        system = activation.system
        name = effect_key(key)
        event = Effect(activation.type.name, self.key, name, system.node, plain_details(name, details))
        observer = system.observer
        if observer is None:
            log_effect(event)
        else:
            observer(event)

    def __repr__(self) -> str:
        return f"<Context {self._activation.type.name}[{self.key!r}] lease={self._lease}>"
