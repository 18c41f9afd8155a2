"""Messages between nodes: a key's tells and asks to its owner, the answers back, the failures rebuilt.

Part of ``ClusterNode`` (``casty.cluster.runtime``): a mixin on the node's attributes
(``system``, ``router``), kept apart from placement, handoff and the resume rule. A message
for a key another node owns goes out as a ``Deliver`` (``casty.cluster.routing``); the owner
decodes it with refs bound to its own system and queues it, or refuses it with the reason;
an answer comes back as a ``Reply`` or a ``Failed``, and a failure is rebuilt as the
exception a local ask would have raised (``ActorFailed`` around ``RemoteError``,
``Fenced``, ``Unavailable``, ...).

**The request rule.** A ``Reply`` (or ``Failed``) names only the asking node and the ask's
number, and a restarted node is reached at the same name: the late answer to an ask of its
previous life (the owner was slow, or answered after a retry) arrives at the new life. So a
life numbers its asks from its first incarnation up (``REQUEST_BITS``), never from 1 again:
such an answer finds no ask of this life and is dropped (swarm seed 1411: a Get of one
counter returned the count of another key, an increment asked by the previous life).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from .. import observer as ev
from .._core.activation import Envelope
from .._core.occurrence import ScheduledEnvelope
from .._core.ref import ReplyRef, reply_type
from ..protocol.replication import Entity
from ..errors import ActorFailed, CastyError, Fenced, MessageTooLarge, RemoteError, SchemaError, Unavailable, UnknownActor
from .resume import RESUME_ORIGIN
from .routing import Deliver, Failed, Reply, ScheduledDeliver, clip

if TYPE_CHECKING:
    from .._core.system import ActorSystem
    from .routing import Router

__all__ = ["REQUEST_BITS", "Delivery"]

REQUEST_BITS: Final = 10
"""A life's request ids start at its first incarnation (wall µs at its birth) shifted by this many bits (the request rule).

The lives of a node are born at distinct microseconds, so their ids never meet unless one
life made more than 1024 asks per microsecond it lived; and a birth time below 2**53 µs
(the year 2255) keeps every id inside the 64-bit integers a frame carries.
"""


class Delivery:
    """A node's messages to other nodes' keys and the answers both ways; part of ``ClusterNode``."""

    _nudges: dict[int, Entity]  # the resume rule's requests in flight (their answers end them, not an ask's)

    if TYPE_CHECKING:  # the node's, used here
        @property
        def system(self) -> ActorSystem: ...
        @property
        def router(self) -> Router: ...

        def _resume_asked(self, frame: Deliver) -> None: ...
        def _resume_answered(self, request: int, failed: Failed | None) -> None: ...
        def _request_ended(self, request: int, *, taken: bool) -> None: ...

    # --- sending -------------------------------------------------------------------------

    def send(self, request: int, actor: str, key: str, message: bytes, reply_request: int | None, origin: str | None) -> None:
        """Route an encoded message to its owner (an ask names its ``reply_request``)."""
        reply_node = self.system.node if reply_request is not None else None
        self.router.route(Deliver(request, actor, key, message, reply_node, reply_request, origin))

    def send_scheduled(self, request: int, actor: str, key: str, message: bytes, envelope: ScheduledEnvelope) -> None:
        """Route a node schedule's tick with its occurrence (a ``ScheduledDeliver``); a tell, never an ask."""
        self.router.route(
            ScheduledDeliver(
                request, actor, key, message, None, None, envelope.origin,
                schedule=envelope.schedule, due_us=envelope.due_us, fired_us=envelope.fired_us, skipped=envelope.skipped,
            )
        )

    def forget(self, request: int) -> None:
        self.router.forget(request)

    def reply(self, ref: ReplyRef[Any], value: Any) -> None:
        """Answer an ask of another node with a ``Reply`` frame (``Failed(kind="schema")`` if the value cannot travel)."""
        try:
            data = self.system.codec.encode_value(value, "reply")
        except SchemaError as exc:
            self.system.emit(ev.MessageDropped, "reply", f"{ref.node}#{ref.request}", type(value).__qualname__, str(exc))
            self.router.reply(ref.node, Failed(ref.request, "schema", clip(f"{self.system.node}: {exc}")))
            return
        self.router.reply(ref.node, Reply(ref.request, data))

    def fail(self, ref: ReplyRef[Any], error: BaseException, actor: str, key: str, message: Any) -> None:
        """Fail an ask of another node as the same ask would fail on one node.

        ``Unavailable`` and ``Fenced`` (the key could not confirm a write, or lost its epoch:
        not the body's fault) arrive as those classes; anything else the body of ``actor[key]``
        raised on ``message`` arrives as ``ActorFailed`` around a ``RemoteError`` with the
        exception's type name, text and repr (the exception object cannot travel).
        """
        if isinstance(error, Unavailable):
            text = clip(str(error) or type(error).__name__)
            self.router.reply(ref.node, Failed(ref.request, "fenced" if isinstance(error, Fenced) else "unavailable", text))
            return
        self.router.reply(
            ref.node,
            Failed(
                ref.request, "failed", clip(str(error)), actor, key,
                type(error).__name__, clip(repr(error)), type(message).__name__,
            ),
        )

    def _refuse(self, frame: Deliver, error: BaseException) -> None:
        """Fail the ask behind ``frame`` (if any) because this node could not take its message at all."""
        if frame.reply_node is None or frame.reply_request is None:
            return
        text = clip(f"{self.system.node} could not take the message for {frame.actor}[{frame.key!r}]: {error}")
        if isinstance(error, SchemaError):
            refusal = Failed(frame.reply_request, "schema", text)
        elif isinstance(error, UnknownActor):
            refusal = Failed(frame.reply_request, "unknown", text)
        elif isinstance(error, Fenced):
            refusal = Failed(frame.reply_request, "fenced", text)
        else:
            refusal = Failed(frame.reply_request, "unavailable", text)
        self.router.reply(frame.reply_node, refusal)

    # --- receiving -----------------------------------------------------------------------

    def _deliver_here(self, frame: Deliver) -> None:
        """A message for a key this node owns: decode it (refs bound to this system) and queue it."""
        system = self.system
        if not system.running:
            return
        if frame.origin == RESUME_ORIGIN:
            self._resume_asked(frame)
            return
        try:
            actor = system.type_named(frame.actor)
            message = system.codec.decode_message(frame.message, actor.schema)
            activation = system.activation_table.get((actor.name, frame.key)) or system.activate(actor, frame.key, actor.initial)
            activation.deliver(_envelope(frame, message))
        except Exception as exc:
            _dropped(system, frame, f"routed message not delivered: {exc!r}")
            self._refuse(frame, exc)

    def _refused(self, src: str, frame: Deliver, error: CastyError) -> None:
        """The router could not place a ``Deliver`` (no such actor type here): drop it, fail its ask at the asker."""
        _dropped(self.system, frame, f"routed message from {src} refused: {error}")
        self._refuse(frame, error)

    def _reply_arrived(self, src: str, frame: Reply | Failed) -> None:
        """The answer to one of this node's asks: its value decoded into the ask's ``R``, or the error it failed with."""
        if frame.request in self._nudges:
            self._resume_answered(frame.request, frame if isinstance(frame, Failed) else None)
            return
        pending = self.system.pending_ask(frame.request)
        if pending is None or pending.future.done():
            return
        message = pending.message
        if isinstance(frame, Failed):
            pending.future.set_exception(_error_of(frame, message))
            return
        annotation = reply_type(type(message))
        try:
            value = self.system.codec.decode_value(frame.value, annotation, f"the reply to {type(message).__qualname__} from {src}")
        except SchemaError as exc:
            pending.future.set_exception(exc)
            return
        pending.future.set_result(value)

    def _failed(self, frame: Deliver, reason: str) -> None:
        if frame.origin == RESUME_ORIGIN:
            if frame.reply_request is not None:
                self._request_ended(frame.reply_request, taken=False)  # no owner took it: the key stays an orphan
            return
        where = f"{frame.actor}[{frame.key!r}]"
        if frame.reply_request is not None:
            pending = self.system.pending_ask(frame.reply_request)
            if pending is not None and not pending.future.done():
                pending.future.set_exception(Unavailable(f"ask to {where}: no owner took it: {reason}"))
            return
        _dropped(self.system, frame, f"unavailable: {reason}")


def _envelope(frame: Deliver, message: Any) -> Envelope:
    """The envelope the owner queues: a ``ScheduledDeliver``'s is the ``ScheduledEnvelope`` the firing node would have queued."""
    if type(frame) is ScheduledDeliver:
        envelope = ScheduledEnvelope(message, frame.schedule, frame.due_us, frame.fired_us)
        envelope.origin = frame.origin
        envelope.skipped = frame.skipped
        return envelope
    return Envelope(message, origin=frame.origin) if frame.origin is not None else Envelope(message)


def _dropped(system: ActorSystem, frame: Deliver, reason: str) -> None:
    """The ``message.dropped`` of a routed message that never reached a mailbox; a tick's names its occurrence."""
    if type(frame) is ScheduledDeliver:
        system.emit(ev.ScheduledMessageDropped, frame.actor, frame.key, "message", reason, frame.schedule, frame.due_us)
    else:
        system.emit(ev.MessageDropped, frame.actor, frame.key, "message", reason)


def _error_of(frame: Failed, message: Any) -> BaseException:
    """The exception a local ask of ``message`` would have raised, rebuilt from a ``Failed`` frame."""
    kind = frame.kind
    if kind == "failed":
        error = RemoteError(frame.error_type, frame.text, frame.error_repr)
        failed_on = frame.message_type if frame.message_type not in ("", type(message).__name__) else None
        return ActorFailed(frame.actor, frame.key, error, message, failed_on=failed_on)
    if kind == "fenced":
        return Fenced(frame.text)
    if kind == "schema":
        return SchemaError(frame.text)
    if kind == "unknown":
        return UnknownActor(frame.text)
    if kind == "too_large":
        return MessageTooLarge(frame.text)
    return Unavailable(frame.text)
