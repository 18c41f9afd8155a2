"""casty: virtual actors for Python, on asyncio.

An ``@actor`` turns an ``async def body(ctx: Context[S, M])`` into an actor type; an
``ActorSystem`` runs keys of those types on demand. See the README for a tour.
"""

from ._core.actor import ActorType, Backoff, actor
from .clock import ManualClock, SystemClock
from ._core.context import Context, Inbox
from .errors import (
    ActorFailed,
    CastyError,
    ConfigurationError,
    Fenced,
    InvalidCronExpression,
    InvalidIdentity,
    MailboxFull,
    MessageTooLarge,
    NotStarted,
    ReentrancyError,
    Refused,
    RemoteError,
    SchemaError,
    ScheduleReferenceInUse,
    ScheduleReferenceNotFound,
    ScheduleReferenceRequired,
    SchedulerNotStarted,
    ScheduleStateError,
    Unavailable,
    UnknownActor,
)
from .ports import Clock, Observer, Store, Transport
from ._core.ref import NOBODY, Askable, Ref
from ._core.schedules import Schedule
from ._core.state import State
from .store import MemoryStore, SQLiteStore
from ._core.system import ActorSystem, Placement

__version__ = "0.1.0"

__all__ = [
    "NOBODY",
    "ActorFailed",
    "ActorSystem",
    "ActorType",
    "Askable",
    "Backoff",
    "CastyError",
    "Clock",
    "ConfigurationError",
    "Context",
    "Fenced",
    "Inbox",
    "InvalidCronExpression",
    "InvalidIdentity",
    "MailboxFull",
    "ManualClock",
    "MemoryStore",
    "MessageTooLarge",
    "NotStarted",
    "Observer",
    "Placement",
    "ReentrancyError",
    "Ref",
    "Refused",
    "RemoteError",
    "SQLiteStore",
    "Schedule",
    "ScheduleReferenceInUse",
    "ScheduleReferenceNotFound",
    "ScheduleReferenceRequired",
    "ScheduleStateError",
    "SchedulerNotStarted",
    "SchemaError",
    "State",
    "Store",
    "SystemClock",
    "Transport",
    "Unavailable",
    "UnknownActor",
    "actor",
]
