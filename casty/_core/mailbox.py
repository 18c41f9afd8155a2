"""An activation's mailbox and inbox reading: envelopes, pending asks, delivery, reads, waits and idleness.

``MailboxWork`` is a mixin of ``Activation`` (no state of its own: the activation's slots
hold it). A mixin rather than a collaborator object because this is the hot path of every
message: ``deliver`` -> ``read`` runs once per message and reads a dozen of the
activation's attributes; through a second object each of those would be one more
attribute load (see DEVELOPERS.md, "Hot paths").
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .. import observer as ev
from ..errors import ActorFailed, MailboxFull, Unavailable
from .context import EMPTY, Inbox
from .ref import ReplyRef

if TYPE_CHECKING:
    from .actor import ActorType
    from .schedules import ArmedSchedule
    from .host import ActivationHost

__all__ = ["Envelope", "PendingAsk", "ASK_CHAIN", "Link", "AskChain", "MailboxWork"]

Entity = tuple[str, str]

Link = tuple[Entity, "PendingAsk"]
"""A key blocked in an ask, and that ask: the key waits while the ask is not settled."""

AskChain = tuple[Entity | None, tuple[Link, ...]]
"""Who is running here (the key whose body this is, or None) and the asks waiting on it, transitively."""

ASK_CHAIN: contextvars.ContextVar[AskChain] = contextvars.ContextVar("casty_ask_chain", default=(None, ()))
"""The ask chain of the code running now: an ask back into a key of it that still waits would deadlock."""


class PendingAsk:
    """The asker's side of one ask: its future and where its message is."""

    __slots__ = ("future", "message", "activation", "handling")

    def __init__(self, future: asyncio.Future[Any], message: Any) -> None:
        self.future = future
        self.message = message
        self.activation: MailboxWork | None = None
        self.handling = False

    def settled(self) -> bool:
        return self.future.done()


class Envelope:
    """A message in a mailbox, with the ask waiting on it (if any) and the links of askers waiting on it."""

    __slots__ = ("message", "ask", "chain", "quiet", "origin")

    def __init__(
        self,
        message: Any,
        ask: PendingAsk | None = None,
        chain: tuple[Link, ...] = (),
        quiet: bool = False,
        origin: str | None = None,
    ) -> None:
        self.message = message
        self.ask = ask
        self.chain = chain
        self.quiet = quiet  # a timer tick that must not refresh the idle clock
        self.origin = origin  # who delivered it on someone's behalf ("node-schedule:<ref>", "timer:<name>")


_log = logging.getLogger("casty")


class MailboxWork:
    """The mailbox half of ``Activation``: what a delivery, an inbox read and an ask's cancellation do."""

    if not TYPE_CHECKING:  # no state of its own, no __dict__ (mypy would read slots () as "assigns nothing")
        __slots__ = ()

    # the activation's attributes this part reads and writes (its slots, set by Activation.__init__)
    system: ActivationHost
    type: ActorType[Any, Any]
    key: str
    entity: Entity
    lease: int
    _loop: asyncio.AbstractEventLoop
    _mailbox: deque[Envelope] | None
    _mailbox_limit: int | None
    _room: deque[asyncio.Future[None]] | None
    _waiter: Inbox[Any] | None
    _current: Envelope | None
    _reads: int
    _failures: int
    _ending: str | None
    closed: bool
    _cancelled_ask: bool
    _in_body: bool
    _life: asyncio.Task[None] | None
    _chain_token: contextvars.Token[AskChain] | None
    _held_links: tuple[Link, ...] | None
    _schedules: Mapping[str, ArmedSchedule]
    _idle_after: float | None
    _idle_handle: int | None
    _last_activity: float

    def deliver(self, envelope: Envelope) -> None:
        """Queue a message; ``MailboxFull`` if a bounded mailbox has no room."""
        mailbox = self._mailbox
        if mailbox is None:
            mailbox = self._mailbox = deque()
        limit = self._mailbox_limit
        if limit is not None and len(mailbox) >= limit:
            raise MailboxFull(f"{self.type.name}[{self.key!r}]: mailbox full ({limit} messages)")
        if envelope.ask is not None:
            envelope.ask.activation = self
        mailbox.append(envelope)
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            waiter.wake()

    def has_room(self) -> bool:
        return self._mailbox_limit is None or self._mailbox is None or len(self._mailbox) < self._mailbox_limit

    async def wait_room(self) -> None:
        room: asyncio.Future[None] = self._loop.create_future()
        if self._room is None:
            self._room = deque()
        self._room.append(room)
        await room

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            waiter.wake()

    # An inbox read is made of steps (``read``) so that ``Inbox`` can run it without a
    # coroutine of its own and be what its task waits on: a read coroutine and a waiter
    # future suspended in every idle body (with the future's iterator) were three more
    # objects per live key for the garbage collector to traverse. A delivery wakes the
    # waiting inbox, once.

    def read(self, lease: int, inbox: Inbox[Any]) -> Any:
        """One step of an inbox read: the next message, the end (``StopAsyncIteration``), or ``EMPTY``.

        ``EMPTY`` means the body must wait, with ``inbox`` as the waiter (``_wait``). A read
        that starts ends the previous message; after a wait there is none left to end.
        """
        if lease != self.lease or self.closed:
            raise StopAsyncIteration
        if self._current is not None:
            self._current = None
            self._failures = 0
        mailbox = self._mailbox
        while mailbox:
            env = mailbox.popleft()
            ask = env.ask
            if ask is not None:
                if ask.future.done():
                    continue  # its asker gave up while it was queued
                ask.handling = True
            if self._room:
                self._release_room()
            self._current = env
            self._reads += 1
            if not env.quiet:
                self._last_activity = self._loop.time()
            links = self._held_links = env.chain
            running, held = ASK_CHAIN.get()
            if held is not links or running is not self.entity:
                token = ASK_CHAIN.set((self.entity, links))  # _hold_chain, inline: once per message
                if self._chain_token is None:
                    self._chain_token = token
            return env.message
        if self._ending is not None or lease != self.lease:
            raise StopAsyncIteration
        self._wait(inbox)
        return EMPTY

    def _wait(self, inbox: Inbox[Any]) -> None:
        """The body waits: ``inbox`` is what the next delivery (or the end of the run) wakes.

        The idle check is armed, and the ask chain of the last message is taken off the
        task's context (see ``_hold_chain``). The empty mailbox is dropped too: an idle key
        holds no deque for the garbage collector to traverse, and the next delivery makes
        a new one. A key with schedules keeps it: its next firing is due anyway, and a deque
        made per firing lives from the firing to the body's wake-up, long enough to be
        promoted by the young collections in between.
        """
        self._waiter = inbox
        if not self._schedules:  # with schedules: no idle check either, the key stays active (_arm_idle)
            self._mailbox = None
            if self._idle_handle is None:
                self._arm_idle()
        undo = self._chain_token
        if undo is not None:
            self._chain_token = None
            try:
                ASK_CHAIN.reset(undo)
            except ValueError:
                pass  # the inbox is read from another task than the one the chain was set in: leave both

    def read_ended(self) -> None:
        """A read that had waited found the end of the run: the body goes on with its last message's chain."""
        self._waiter = None
        self._restore_chain()

    def read_interrupted(self, *, restore: bool) -> None:
        """The wait was interrupted (the task cancelled, the coroutine closed): stop waiting.

        With ``restore``, the body goes on (it may catch the error) with the chain of its last
        message, unless the activation is closed: then it only unwinds, and nothing it asks
        can be sent any more.
        """
        self._waiter = None
        if restore and not self.closed:
            self._restore_chain()

    # The ask chain of the message being handled lives in the ASK_CHAIN context variable of
    # the reading task, so that asks from the body and from tasks it spawns (which copy the
    # context) can tell a deadlock. Setting it builds a HAMT in the task's context; kept
    # while the key idles, that was two more objects per live key for the collector. So the
    # first set of a handling stretch keeps its token, and the wait resets the variable
    # with it: the task's context falls back to what it held before (for most tasks, the
    # shared empty HAMT). If the read ends instead of delivering a message, the last chain
    # is set again, so the body's code after its inbox loop sees what it saw before.

    def _hold_chain(self, chain: AskChain) -> None:
        """Set the reading task's chain; the first set since the last wait keeps the token that undoes them all."""
        token = ASK_CHAIN.set(chain)
        if self._chain_token is None:
            self._chain_token = token

    def _restore_chain(self) -> None:
        links = self._held_links
        if links is not None:
            running, held = ASK_CHAIN.get()
            if held is not links or running is not self.entity:
                self._hold_chain((self.entity, links))

    def _release_room(self) -> None:
        assert self._room is not None
        while self._room:
            room = self._room.popleft()
            if not room.done():
                room.set_result(None)
                return

    def _arm_idle(self) -> None:
        if self._idle_handle is not None or self._idle_after is None or self._schedules:
            return
        self._idle_handle = self.system.timers.arm(self._last_activity + self._idle_after, MailboxWork._idle_check, self)

    def _idle_check(self) -> None:
        self._idle_handle = None
        if self._waiter is None or self._waiter.done() or self._schedules or self._idle_after is None:
            return  # busy, or kept alive: the next wait arms the check again
        deadline = self._last_activity + self._idle_after
        if self._loop.time() >= deadline:
            self._ending = "idle"
            self._wake()
        else:
            self._idle_handle = self.system.timers.arm(deadline, MailboxWork._idle_check, self)

    def cancel_ask(self, ask: PendingAsk) -> None:
        """The asker gave up: drop the message if queued, else cancel the body at its await."""
        if ask.handling:
            current = self._current
            if current is not None and current.ask is ask and self._in_body and self._life is not None:
                self._cancelled_ask = True
                self._life.cancel()
            return
        self.system.emit(
            ev.MessageDropped, self.type.name, self.key, type(ask.message).__qualname__, "ask cancelled while queued"
        )

    def _drop_current(self, reason: str) -> None:
        env = self._current
        self._current = None
        if env is not None:
            self._emit_dropped(env, reason)

    def _emit_dropped(self, env: Envelope, reason: str) -> None:
        """The ``message.dropped`` row of ``env``; a schedule's firing's names its occurrence (schedule, due).

        A ``FireAll`` burst queues several firings of one message type: only the occurrence
        tells a reader of the trace which of them died (the mailbox order is not in the trace).
        """
        from .occurrence import ScheduledEnvelope  # here: occurrence imports this module

        message = type(env.message).__qualname__
        if type(env) is ScheduledEnvelope:
            self.system.emit(ev.ScheduledMessageDropped, self.type.name, self.key, message, reason, env.schedule, env.due_us)
        else:
            self.system.emit(ev.MessageDropped, self.type.name, self.key, message, reason)

    def _report_failed_delivery(self, env: Envelope, error: BaseException) -> None:
        """A scheduled delivery made the body fail: a dead letter naming the target (timers: a warning). Never retried."""
        origin = env.origin or ""
        if origin.startswith("timer:"):
            _log.warning("%s[%r]: timer %s: handler failed: %r", self.type.name, self.key, origin[6:], error)
            return
        self.system.emit(
            ev.DeadLetter, self.type.name, self.key, type(env.message).__qualname__, repr(error), origin
        )

    def _fail_ask(self, env: Envelope, error: BaseException) -> None:
        ask = env.ask
        self._emit_dropped(env, f"failed: {error!r}")
        if ask is None:
            reply_to = getattr(env.message, "reply_to", None)
            if isinstance(reply_to, ReplyRef):
                self._fail_reply_slot(reply_to, env.message, error)
            return
        if not ask.future.done():
            if isinstance(error, Unavailable):
                ask.future.set_exception(error)  # the key could not confirm a write: not the body's fault
            else:
                ask.future.set_exception(ActorFailed(self.type.name, self.key, error, env.message))

    def _fail_reply_slot(self, reply_to: ReplyRef[Any], message: Any, error: BaseException) -> None:
        """Fail the ask behind the ``reply_to`` of a message that came without its pending ask.

        Such a message is an ask of another node (routed here), an ask routed back to this
        node after the owner moved under the router, or an ask forwarded by another key with
        its ``reply_to`` passed on. Its asker fails as a direct ask would (``Unavailable`` as
        such, anything else as ``ActorFailed`` naming this key), not after ``ask_timeout``.
        """
        system = self.system
        if reply_to.node != system.node:
            if system.cluster_node is not None:
                system.cluster_node.fail(reply_to, error, self.type.name, self.key, message)
            return
        home = reply_to._system if reply_to._system is not None else system
        pending = home.pending_ask(reply_to.request)
        if pending is None or pending.future.done():
            return
        if isinstance(error, Unavailable):
            pending.future.set_exception(error)
        else:
            asked = pending.message
            failed_on = type(message).__name__ if type(message) is not type(asked) else None
            pending.future.set_exception(ActorFailed(self.type.name, self.key, error, asked, failed_on=failed_on))
