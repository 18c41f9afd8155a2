"""Every error the runtime raises on purpose, each its own class.

Callers catch what they can handle by type, so each failure mode gets a class whose
message names what was wrong (the type, the key, the field, the token). Several
subclass a builtin (``TypeError``, ``ValueError``, ``TimeoutError``) so that code
written against plain Python exceptions keeps working.
"""

from __future__ import annotations

from typing import Any


class CastyError(Exception):
    """Base class of the errors raised by the casty runtime."""


class SchemaError(CastyError, TypeError):
    """A message or state value does not fit the types an actor declared, or cannot be encoded."""


class NotStarted(CastyError, RuntimeError):
    """The actor system is not running: not entered yet, or already exited."""


class UnknownActor(CastyError, LookupError):
    """An actor type name that no module defines (or that cannot be imported)."""


class InvalidIdentity(CastyError, ValueError):
    """An actor identity that fails validation: an empty or non-string key, or not an actor type."""


class MailboxFull(CastyError):
    """A bounded mailbox refused a message."""


class Unavailable(CastyError):
    """A write or a delivery could not be completed: no quorum, no owner, or time ran out."""


class Fenced(Unavailable):
    """A state write came from an activation (lease) or an owner (epoch) that has been replaced.

    The one exception of the kind. The replication core reports a write a replica refused
    for a newer epoch as ``casty.protocol.replication.WriteFenced`` (a report, not raised);
    the activation turns that report into this.
    """


class Refused(CastyError):
    """The peer or the runtime declined the request (for example a frame from another cluster).

    Not the TCP handshake's answer frame, which is ``casty.protocol.framing.HandshakeRefused``
    (the transport reports a refused handshake as a failed connection, not as this).
    """


class MessageTooLarge(CastyError, ValueError):
    """An encoded message or page exceeds the configured frame size."""


class ReentrancyError(CastyError, RuntimeError):
    """An ask would wait on a key that is itself already waiting in this chain of asks (a deadlock)."""


class ActorFailed(CastyError):
    """The body raised while handling the message an ask was waiting for.

    The message is dropped, the body restarts after backoff from the last saved state,
    and the asker gets this error carrying what happened. ``message`` is the message the
    ask sent; ``failed_on`` names the class of the one the body failed on when that is
    another (an ask forwarded, ``reply_to`` passed on, to a key on another node).
    """

    def __init__(self, actor: str, key: str, error: BaseException, message: Any, *, failed_on: str | None = None) -> None:
        super().__init__(f"{actor}[{key!r}] failed on {failed_on or type(message).__name__}: {error!r}")
        self.actor = actor
        self.key = key
        self.error = error
        self.message = message


class RemoteError(CastyError):
    """An exception raised elsewhere, known here only by its type name and its text.

    The exception object itself cannot travel (its class may not even exist here, and
    nothing is ever unpickled), so what saw it sends names and text instead, and this one
    class carries them wherever they arrive:

    * a node whose body failed an ask of another node sends ``type(error).__name__``,
      ``str(error)`` and ``repr(error)``; the asker's ``ActorFailed`` wraps this error, and
      since its ``repr`` is the original one, words the failure exactly as on one node;
    * a gateway answers a ``ClusterClient`` with the class name and text of the error, and
      the client raises this for a class it has none of (``ActorFailed`` among them).

    ``type_name`` and ``text`` are also ``error`` and ``reason`` (the client's names for them);
    ``str`` is the text, as it is of the original exception.
    """

    def __init__(self, type_name: str, text: str, shown: str | None = None) -> None:
        super().__init__(text)
        self.type_name = type_name
        self.text = text
        self.shown = shown if shown else f"{type_name}({text!r})"

    @property
    def error(self) -> str:
        """The class name of the original exception (``type_name``)."""
        return self.type_name

    @property
    def reason(self) -> str:
        """The original exception's text (``text``)."""
        return self.text

    def __repr__(self) -> str:
        return self.shown


# --- node schedules (seed: grain scheduling) ---------------------------------------------


class SchedulerNotStarted(NotStarted):
    """A node schedule call on a system whose scheduler is not running."""


class ScheduleReferenceRequired(CastyError, ValueError):
    """A cron schedule in cluster mode needs an explicit reference: the claim per tick is keyed on it."""


class ScheduleReferenceNotFound(CastyError, LookupError):
    """No live node schedule under that reference (unknown, cancelled, or a one-shot that already fired)."""


class ScheduleReferenceInUse(CastyError, ValueError):
    """A node schedule is already registered under that reference on this node."""


class ScheduleStateError(CastyError, RuntimeError):
    """Pausing a paused schedule or resuming an active one."""


class InvalidCronExpression(CastyError, ValueError):
    """A Quartz cron expression that does not parse; names the field and the token at fault."""

    def __init__(self, expression: str, reason: str, *, field: str | None = None, token: str | None = None) -> None:
        where = ""
        if field is not None:
            where = f" in the {field} field"
            if token is not None:
                where += f" at {token!r}"
        super().__init__(f"invalid cron expression {expression!r}{where}: {reason}")
        self.expression = expression
        self.reason = reason
        self.field = field
        self.token = token


class ConfigurationError(CastyError, ValueError):
    """The system is not set up for what was asked (for example a durable actor without a store)."""


class InvalidCatchUp(CastyError, ValueError):
    """A catch-up policy that cannot be built, decoded or used where it was given (FixedDelay on a cron grid);
    the message names the field and the value."""
