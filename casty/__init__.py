"""casty: virtual actors for Python, on asyncio.

An ``@actor`` turns an ``async def body(ctx: Context[S, M])`` into an actor type; an
``ActorSystem`` runs keys of those types on demand. See the README for a tour.

What a user imports is re-exported here (``__all__``, pinned by ``tests/test_exports.py``).
The modules behind it:

* public, importable as such: ``casty.errors`` (every error, by class), ``casty.observer``
  (the events and observers), ``casty.ports`` (the ports a system takes: ``Clock``,
  ``Store``, ``Transport``, ``Observer``), ``casty.clock``, ``casty.store`` (its adapters),
  ``casty.cluster.config`` (``Cluster``) and ``casty.cluster.client`` (``ClusterClient``);
  the rest of ``casty.cluster`` runs a node (``python -m casty node``) and is not an API;
* private: ``casty._core`` (the runtime: actor types, activations, the system, state pages,
  schedules) and ``casty._durations``; its names that are public are re-exported here;
* internal: ``casty.protocol`` (the sans-I/O protocol cores the cluster drives), for the
  simulator, the tests and the curious, not an API.

``Cluster`` and ``ClusterClient`` (``casty.cluster.config``, ``casty.cluster.client``) are
imported after everything else: the cluster modules import the runtime, the protocol cores,
the errors and the ports by module, never this package's names, so importing them from here
makes no cycle; importing ``config`` also loads ``casty.cluster.claims``, whose cron claims a
cluster needs.
"""

from ._core.actor import ActorType, Backoff, actor
from .clock import ManualClock, SystemClock
from ._core.catchup import DropLate, FireAll, FixedDelay, Skip
from ._core.context import Context, Inbox
from .errors import (
    ActorFailed,
    CastyError,
    ConfigurationError,
    Fenced,
    InvalidCatchUp,
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
from ._core.occurrence import Occurrence
from ._core.ref import NOBODY, Askable, Ref
from ._core.schedules import Schedule
from ._core.state import State
from .store import MemoryStore, SQLiteStore
from ._core.system import ActorSystem, Placement
from .cluster.config import Cluster
from .cluster.client import ClusterClient

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
    "Cluster",
    "ClusterClient",
    "ConfigurationError",
    "Context",
    "DropLate",
    "Fenced",
    "FireAll",
    "FixedDelay",
    "Inbox",
    "InvalidCatchUp",
    "InvalidCronExpression",
    "InvalidIdentity",
    "MailboxFull",
    "ManualClock",
    "MemoryStore",
    "MessageTooLarge",
    "NotStarted",
    "Occurrence",
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
    "Skip",
    "State",
    "Store",
    "SystemClock",
    "Transport",
    "Unavailable",
    "UnknownActor",
    "actor",
]
