"""Typed events out of the runtime: what happened, never when.

Each event is a small frozen dataclass. The runtime hands them to the observer port the
moment they happen; the observer stamps time itself (the simulator adds true time and the
node's wall time, the logging observer lets ``logging`` do it). Events carry the facts a
trace needs to explain a run: which activation (actor, key, lease), which write (version),
which schedule occurrence (due time, how many were skipped).
"""

from __future__ import annotations

import logging
from dataclasses import MISSING, dataclass, fields
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

__all__ = [
    "Event",
    "ActivationStarted",
    "ActivationEnded",
    "ActivationFailed",
    "WriteConfirmed",
    "WriteFailed",
    "EpochAcquired",
    "HandoffStarted",
    "HandoffEnded",
    "ScheduleArmed",
    "ScheduleFired",
    "ScheduleCaughtUp",
    "ScheduleDropped",
    "ScheduleCancelled",
    "MessageDropped",
    "ScheduledMessageDropped",
    "DeadLetter",
    "TimerFired",
    "TimerCancelled",
    "NodeScheduleRegistered",
    "ZonedNodeScheduleRegistered",
    "NodeScheduleDropped",
    "NodeScheduleFired",
    "NodeScheduleTickLost",
    "NodeScheduleCaughtUp",
    "NodeSchedulePaused",
    "NodeScheduleResumed",
    "NodeScheduleCancelled",
    "NodeScheduleClaimWon",
    "NodeScheduleClaimLost",
    "NodeScheduleClaimSkipped",
    "Effect",
    "LoggingObserver",
    "event_fields",
    "log_effect",
]


@dataclass(frozen=True, slots=True)
class Event:
    """Base of every observer event; ``kind`` is the stable name used in traces."""

    kind: ClassVar[str] = "event"


@dataclass(frozen=True, slots=True)
class ActivationStarted(Event):
    """A body run began. ``recovered`` says whether saved state existed; ``restart`` counts runs of this activation."""

    kind: ClassVar[str] = "activation.started"
    actor: str
    key: str
    lease: int
    behavior: str
    recovered: bool
    restart: int


EndReason = Literal["idle", "released", "become", "stopped", "crashed", "deleted", "cancelled"]


@dataclass(frozen=True, slots=True)
class ActivationEnded(Event):
    """A body run ended; ``reason`` says why (idle, released, become, stopped, crashed, ...)."""

    kind: ClassVar[str] = "activation.ended"
    actor: str
    key: str
    lease: int
    reason: str


@dataclass(frozen=True, slots=True)
class ActivationFailed(Event):
    """The body raised; the message it was handling is dropped and the body restarts after ``retry_in`` seconds."""

    kind: ClassVar[str] = "activation.failed"
    actor: str
    key: str
    lease: int
    error: str
    message: str | None
    retry_in: float


@dataclass(frozen=True, slots=True)
class WriteConfirmed(Event):
    """A state write was confirmed at ``version``; ``pages`` names the pages it changed."""

    kind: ClassVar[str] = "write.confirmed"
    actor: str
    key: str
    lease: int
    version: int
    pages: tuple[str, ...]


WriteFailReason = Literal["fenced", "unavailable", "too_large"]


@dataclass(frozen=True, slots=True)
class WriteFailed(Event):
    """A state write was refused: ``fenced`` (a replaced lease or epoch), ``unavailable`` or ``too_large``."""

    kind: ClassVar[str] = "write.failed"
    actor: str
    key: str
    lease: int
    operation: str
    reason: str


@dataclass(frozen=True, slots=True)
class EpochAcquired(Event):
    """Cluster: this node won owner epoch ``(epoch_round, epoch_node)`` of the key; its write-back is confirmed as ``version``.

    ``found`` is the version of the newest state the read quorum held (0: a new key). A write
    refused because a newer epoch exists is reported as ``WriteFailed(reason="fenced")``.
    """

    kind: ClassVar[str] = "epoch.acquired"
    actor: str
    key: str
    epoch_round: int
    epoch_node: str
    version: int
    found: int


@dataclass(frozen=True, slots=True)
class HandoffStarted(Event):
    """Cluster: this node began sync round ``round``: it asks ``peers`` for the replicas they hold.

    ``reason`` is ``"opened"`` (the node's replica joined the protocol) or ``"ring"`` (the
    ring changed). Until the round ends, keys this node is newly a replica of answer blank.
    """

    kind: ClassVar[str] = "handoff.started"
    round: int
    peers: tuple[str, ...]
    reason: str


@dataclass(frozen=True, slots=True)
class HandoffEnded(Event):
    """Cluster: every peer of sync round ``round`` answered in full; ``keys`` is how many keys this replica holds now."""

    kind: ClassVar[str] = "handoff.ended"
    round: int
    peers: tuple[str, ...]
    synced: tuple[str, ...]
    keys: int


@dataclass(frozen=True, slots=True)
class ScheduleArmed(Event):
    """A timer was set for a persisted schedule; ``due_us`` is wall time, ``every_us`` None for a one-shot."""

    kind: ClassVar[str] = "schedule.armed"
    actor: str
    key: str
    name: str
    due_us: int
    every_us: int | None


@dataclass(frozen=True, slots=True)
class ScheduleFired(Event):
    """A schedule occurrence was told to its actor: nominal ``due_us``, wall ``now_us`` at firing, ``next_us`` or None."""

    kind: ClassVar[str] = "schedule.fired"
    actor: str
    key: str
    name: str
    due_us: int
    now_us: int
    next_us: int | None


@dataclass(frozen=True, slots=True)
class ScheduleCaughtUp(Event):
    """Firing late skipped ``skipped`` occurrences of the grid (no burst): the next due is ``next_us``."""

    kind: ClassVar[str] = "schedule.caught_up"
    actor: str
    key: str
    name: str
    due_us: int
    now_us: int
    next_us: int
    skipped: int


@dataclass(frozen=True, slots=True)
class ScheduleDropped(Event):
    """A firing delivered nothing: its latest occurrence ``due_us`` was later than the ``DropLate`` grace at
    ``now_us``; ``skipped`` occurrences (that one included) are never delivered, the next due is ``next_us``
    (None: a one-shot, now gone). The one firing without a ``ScheduleFired``, so a ledger can tell it from a loss."""

    kind: ClassVar[str] = "schedule.dropped"
    actor: str
    key: str
    name: str
    due_us: int
    now_us: int
    next_us: int | None
    skipped: int


@dataclass(frozen=True, slots=True)
class ScheduleCancelled(Event):
    """A schedule was removed: ``cancelled``, ``replaced``, ``deleted`` (state delete), ``done`` (one-shot fired, or dropped late) or
    ``out-of-range`` (its next due would pass year 9999, the last datetime: the firing before was its last)."""

    kind: ClassVar[str] = "schedule.cancelled"
    actor: str
    key: str
    name: str
    reason: str


@dataclass(frozen=True, slots=True)
class DeadLetter(Event):
    """A delivery made on someone's behalf (``origin``: a node schedule) failed in the handler; it is not retried."""

    kind: ClassVar[str] = "dead_letter"
    actor: str
    key: str
    message: str
    error: str
    origin: str


@dataclass(frozen=True, slots=True)
class TimerFired(Event):
    """An activation-scoped timer (``ctx.timer``) delivered its message to its own activation."""

    kind: ClassVar[str] = "timer.fired"
    actor: str
    key: str
    name: str
    keep_alive: bool


@dataclass(frozen=True, slots=True)
class TimerCancelled(Event):
    """An activation-scoped timer ended: ``cancelled``, ``replaced``, ``done`` (one-shot) or ``ended`` (its activation ended)."""

    kind: ClassVar[str] = "timer.cancelled"
    actor: str
    key: str
    name: str
    reason: str


@dataclass(frozen=True, slots=True)
class MessageDropped(Event):
    """A message did not reach a body: ``reason`` says why (failed, cancelled, mailbox full, stopped, ...)."""

    kind: ClassVar[str] = "message.dropped"
    actor: str
    key: str
    message: str
    reason: str


@dataclass(frozen=True, slots=True)
class ScheduledMessageDropped(MessageDropped):
    """``MessageDropped`` of a schedule's firing (its ``ScheduledEnvelope``): the same kind, two more fields,
    ``schedule`` (a persisted schedule's name, a node schedule's reference) and ``due_us`` (the occurrence's due
    time, a node schedule's tick), so a trace tells which occurrence of a ``FireAll`` burst was lost or failed
    (the mailbox order cannot). Every other message's drop emits the plain event: its row (and digest) is unchanged."""

    schedule: str
    due_us: int


@dataclass(frozen=True, slots=True)
class Effect(Event):
    """Actor code did something outside the actor system (``ctx.effect``): a report built, an email sent, a charge.

    ``effect`` is the effect's own key (its identity: what must happen once, e.g.
    ``"charge:order-17"``); ``details`` are plain JSON values (checked by ``ctx.effect``).
    The runtime cannot make an external action happen exactly once; this event lets a
    trace or a log count how often it did. The checks ``sim.checks.exactly_once`` and its
    siblings read these rows.
    """

    kind: ClassVar[str] = "effect"
    actor: str
    key: str
    effect: str
    node: str
    details: Mapping[str, Any]


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def event_fields(event: Event) -> dict[str, Any]:
    """The event's fields as a plain dict, in declaration order (for traces and logs).

    The field names of each event class are looked up once: a simulated run turns
    millions of events into trace rows, and ``dataclasses.fields`` is slow.
    """
    cls = type(event)
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(event))
    return {name: getattr(event, name) for name in names}


class LoggingObserver:
    """The default observer: each event becomes a DEBUG record on the ``casty`` logger, an ``Effect`` an INFO record.

    Effects are rare and are facts about the outside world (a charge made), so they are
    logged at INFO: a node run with default logging still shows them.
    """

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self._logger = logger or logging.getLogger("casty")

    @property
    def enabled(self) -> bool:
        """False when nothing would be logged, so the runtime can skip building events."""
        return self._logger.isEnabledFor(logging.DEBUG)

    def __call__(self, event: Event) -> None:
        if isinstance(event, Effect):
            log_effect(event, self._logger)
        elif self._logger.isEnabledFor(logging.DEBUG):
            self._logger.debug("%s %s", event.kind, event_fields(event))


def log_effect(event: Effect, logger: logging.Logger | None = None) -> None:
    """An effect as one INFO record (``effect charge:o1 by bank/acme on n1 {'amount': 5}``).

    A system whose default observer is off (logging below DEBUG) still logs its effects
    here, so the real world keeps the record the simulator keeps as a trace row.
    """
    (logger or logging.getLogger("casty")).info(
        "effect %s by %s/%s on %s %s", event.effect, event.actor, event.key, event.node, dict(event.details)
    )


# --- node schedules (seed: grain scheduling) ---------------------------------------------
# Held by the node's scheduler, not by the target key: ``reference`` names the schedule on
# the node, ``actor``/``key`` its target, ``schedule_kind`` is "once", "interval" or "cron"
# (not ``kind``: that is the event's trace name). Times are wall-clock microseconds since
# the epoch (UTC), as read from the node's clock.


@dataclass(frozen=True, slots=True)
class NodeScheduleRegistered(Event):
    """A node schedule was registered: first tick ``due_us``; ``every_us`` (interval) or ``expression`` (cron)."""

    kind: ClassVar[str] = "node_schedule.registered"
    reference: str
    actor: str
    key: str
    schedule_kind: str
    due_us: int
    every_us: int | None
    expression: str | None


@dataclass(frozen=True, slots=True)
class ZonedNodeScheduleRegistered(NodeScheduleRegistered):
    """``NodeScheduleRegistered`` of a cron given an explicit zone (``schedule_cron(tz=...)``): the same kind,
    one more field, ``tz`` (an IANA name). A schedule in the node's zone emits the plain event, so traces
    without zones keep their rows (and digests); a reader takes a row without ``tz`` as UTC."""

    tz: str


@dataclass(frozen=True, slots=True)
class NodeScheduleDropped(Event):
    """A late tick told nothing (``misfire=DropLate(grace)``): its latest grid time ``tick_us`` was later than the
    grace at ``now_us``; ``skipped`` ticks (that one included) are never told; the next is ``next_us`` (None: gone)."""

    kind: ClassVar[str] = "node_schedule.dropped"
    reference: str
    actor: str
    key: str
    schedule_kind: str
    tick_us: int
    now_us: int
    next_us: int | None
    skipped: int


@dataclass(frozen=True, slots=True)
class NodeScheduleFired(Event):
    """A tick was told to its target: nominal ``tick_us``, wall ``now_us`` at firing, ``next_us`` or None (gone)."""

    kind: ClassVar[str] = "node_schedule.fired"
    reference: str
    actor: str
    key: str
    schedule_kind: str
    tick_us: int
    now_us: int
    next_us: int | None


@dataclass(frozen=True, slots=True)
class NodeScheduleTickLost(Event):
    """A tick could not be handed to its target (``reason``): it is lost, not retried; ``next_us`` as in Fired."""

    kind: ClassVar[str] = "node_schedule.tick_lost"
    reference: str
    actor: str
    key: str
    schedule_kind: str
    tick_us: int
    now_us: int
    next_us: int | None
    reason: str


@dataclass(frozen=True, slots=True)
class NodeScheduleCaughtUp(Event):
    """A late tick skipped ``skipped`` later occurrences that had also passed (no burst): the next is ``next_us``."""

    kind: ClassVar[str] = "node_schedule.caught_up"
    reference: str
    actor: str
    key: str
    schedule_kind: str
    tick_us: int
    now_us: int
    next_us: int
    skipped: int


@dataclass(frozen=True, slots=True)
class NodeSchedulePaused(Event):
    """A node schedule was paused: no tick fires until it is resumed."""

    kind: ClassVar[str] = "node_schedule.paused"
    reference: str
    actor: str
    key: str
    schedule_kind: str


@dataclass(frozen=True, slots=True)
class NodeScheduleResumed(Event):
    """A paused node schedule was resumed; its next tick ``due_us`` is recalculated from now (no catch-up)."""

    kind: ClassVar[str] = "node_schedule.resumed"
    reference: str
    actor: str
    key: str
    schedule_kind: str
    due_us: int


@dataclass(frozen=True, slots=True)
class NodeScheduleCancelled(Event):
    """A node schedule was removed: ``cancelled``, ``done`` (a one-shot fired, a cron ran out), ``stopped`` (node) or
    ``out-of-range`` (its next tick would pass year 9999, the last datetime: the tick before was its last)."""

    kind: ClassVar[str] = "node_schedule.cancelled"
    reference: str
    actor: str
    key: str
    schedule_kind: str
    reason: str


@dataclass(frozen=True, slots=True)
class NodeScheduleClaimWon(Event):
    """This node won the cluster-wide claim ``claim`` of a cron tick (confirmed by a quorum): it alone tells it."""

    kind: ClassVar[str] = "node_schedule.claim_won"
    reference: str
    actor: str
    key: str
    schedule_kind: str
    tick_us: int
    now_us: int
    claim: str
    ttl_us: int


@dataclass(frozen=True, slots=True)
class NodeScheduleClaimLost(Event):
    """Another node (``winner``) had claimed this cron tick first: this node does not tell it."""

    kind: ClassVar[str] = "node_schedule.claim_lost"
    reference: str
    actor: str
    key: str
    schedule_kind: str
    tick_us: int
    now_us: int
    claim: str
    winner: str


@dataclass(frozen=True, slots=True)
class NodeScheduleClaimSkipped(Event):
    """This node did not claim (or could not claim) a cron tick, so does not tell it: ``reason`` says why."""

    kind: ClassVar[str] = "node_schedule.claim_skipped"
    reference: str
    actor: str
    key: str
    schedule_kind: str
    tick_us: int
    now_us: int
    claim: str
    reason: str


# --------------------------------------------------------------------------------------------------
# Cheaper construction. A frozen dataclass's __init__ sets each field through
# ``object.__setattr__(self, name, value)``: a global lookup, an attribute lookup and a
# call that searches the type for the slot, per field. The events of this module are
# built by the million in a simulated run, so their __init__ is replaced by one that
# calls each slot's own setter (the same slots, the same values, the same signature);
# the instances stay frozen, as ``__setattr__`` is untouched.


def _fast_init(cls: type[Event]) -> None:
    specs = fields(cls)
    if not specs or any(not f.init or f.default is not MISSING or f.default_factory is not MISSING for f in specs):
        return  # defaults or init=False fields: keep the generated __init__
    if getattr(cls, "__post_init__", None) is not None:
        return
    names = [f.name for f in specs]
    setters = {f"_set_{name}": cls.__dict__[name].__set__ for name in names}
    args = ", ".join(names)
    body = "".join(f"    _set_{name}(self, {name})\n" for name in names)
    namespace: dict[str, Any] = dict(setters)
    exec(f"def __init__(self, {args}):\n{body}", namespace)  # noqa: S102 - fixed field names of our own classes
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__annotations__ = dict(cls.__init__.__annotations__)
    init.__doc__ = cls.__init__.__doc__
    setattr(cls, "__init__", init)


for _cls in (
    ActivationStarted, ActivationEnded, ActivationFailed, WriteConfirmed, WriteFailed, ScheduleArmed, ScheduleFired,
    ScheduleCaughtUp, ScheduleDropped, ScheduleCancelled, MessageDropped, DeadLetter, TimerFired, TimerCancelled,
    NodeScheduleRegistered, NodeScheduleFired, NodeScheduleTickLost, NodeScheduleCaughtUp, NodeSchedulePaused,
    NodeScheduleResumed, NodeScheduleCancelled, NodeScheduleClaimWon, NodeScheduleClaimLost, NodeScheduleClaimSkipped,
):
    _fast_init(_cls)
del _cls
