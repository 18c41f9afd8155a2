"""Node schedules: messages delivered to any key once, at an interval, or on a cron.

A node schedule is held by the scheduler of the node that registered it, in memory: it
is not part of the target key's state (unlike ``ctx.schedule``), survives the key's
idling out, and is lost when the node stops. Each tick tells the message to the target,
which activates the key wherever it lives and refreshes its idle clock like any tell.

Rules (seed: grain scheduling; GoAkt node schedules):

* A reference names one schedule on the node. Registering another under a live reference
  is rejected (:class:`ScheduleReferenceInUse`); without one, a reference is drawn from the
  system's random stream, so a seeded system draws the same references.
* Times are wall-clock times of the node (``system.clock``). An interval sits on the grid
  ``first + n * interval``; a cron is evaluated in the scheduler's zone (UTC in cluster
  mode). A tick that fires late delivers once and skips the occurrences that have also
  passed, reporting how many (no burst). A timer that goes off before its due time on the
  wall clock (the clock was stepped back) is re-armed instead of firing early.
* The scheduler never waits for the handler: ticks of a slow handler queue in its mailbox.
* A tick that cannot be handed over (unknown type, a full mailbox, a stopped system, any
  error out of ``tell``) is lost and reported; interval and cron keep firing, a one-shot
  is gone. Nothing is retried.
* A due time is a datetime Python can represent (up to the end of year 9999): a delay or
  interval that would pass it is a ``ValueError`` naming it, and nothing is registered; an
  interval whose next tick would pass it (or a resume one interval before it) ends, reason
  ``out-of-range``, after its last tick.
* Pausing a paused schedule or resuming an active one is an error. Resume recalculates
  from now, as go-quartz does: a one-shot fires its delay after the resume, an interval
  one interval after it (a new grid), a cron at its next fire time after now.
  Cancelling stops future ticks; a tick already told is not recalled.

Cluster mode (``ActorSystem(cluster=...)``): interval and one-shot schedules stay
node-local (registered on three nodes, each tick is told three times); a cron is read in
UTC, needs a reference, and each of its ticks is *claimed* before it is told, so that it is
delivered once across the cluster however many nodes registered it (the cluster's
``TickClaims``, see ``casty._core.plugin``; ``casty.cluster.claims`` provides them): the
tick's TTL is the cron's period at that tick clamped to [1 min, 24 h]; a tick already older than its TTL is skipped without a claim; otherwise the
node asks the tick's claim key, whose owner answers first-writer-wins once the winner is
confirmed by a quorum. The winner tells (``node_schedule.claim_won`` then ``fired``; if its
clock stepped back during the claim's round trip, the tell waits until the wall clock reaches
the tick again: never early), the others record ``claim_lost`` naming it; a claim that cannot be made (no owner reachable,
a timeout, refused as expired by the claim's owner) is ``claim_skipped`` with its reason,
and that node does not tell. The trigger does not wait for the claim: the next tick is
armed at once. A claim won before a cancel is still told (the tick was committed to); a
node that stops drops its claims in flight. Cancel is local to the node, as for any kind.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone, tzinfo
from typing import TYPE_CHECKING, Any, Final, Literal

from .. import observer as ev
from .actor import ActorType
from ..clock import to_datetime, to_us
from .catchup import CatchUp, Skip, checked, decide, decide_on_grid
from .cron import Cron, zone
from ..errors import (
    ConfigurationError,
    InvalidCronExpression,
    InvalidIdentity,
    ScheduleReferenceInUse,
    ScheduleReferenceNotFound,
    ScheduleReferenceRequired,
    SchedulerNotStarted,
    ScheduleStateError,
    UnknownActor,
)
from .occurrence import ScheduledEnvelope
from .ref import EntityRef
from .schedules import LAST_US, catch_up, checked_due, to_micros

if TYPE_CHECKING:
    from .plugin import TickClaims
    from .system import ActorSystem
    from .timer_heap import Timer

__all__ = ["NodeScheduler", "NodeScheduleInfo", "ScheduleKind", "MAX_COUNTED_SKIPS", "provide_tick_claims"]

_provided: list[TickClaims] = []
"""The claims of cron ticks in cluster mode: what ``provide_tick_claims`` was given (at most one)."""


def provide_tick_claims(claims: TickClaims) -> None:
    """Give every node scheduler in cluster mode its claims of cron ticks (``casty.cluster.claims`` does, once imported).

    The runtime names what it needs (``casty._core.plugin.TickClaims``) and the cluster layer
    provides it: this module never imports the cluster. The claims are those of the module
    that defines the claim's actor type, which every node of a cluster must know by name,
    so they are one per process, like that type. A second call replaces the first.
    """
    _provided[:] = [claims]


def _provided_claims() -> TickClaims:
    """The claims of cron ticks; ``ConfigurationError`` if the cluster layer never provided them."""
    if not _provided:
        raise ConfigurationError("cluster mode claims each cron tick, and no claims were provided: import casty.cluster.claims")
    return _provided[0]

ScheduleKind = Literal["once", "interval", "cron"]

MAX_COUNTED_SKIPS: Final = 10_000
"""A cron tick late by more occurrences than this counts only this many as skipped.

Counting a cron's missed occurrences means walking them one by one; this bounds the walk
(a per-second cron after a clock step of a year would otherwise block the loop)."""


@dataclass(frozen=True, slots=True)
class NodeScheduleInfo:
    """One live node schedule, as ``list_schedules`` reports it."""

    reference: str
    actor: str
    """The target's actor type name (``module:qualname``)."""
    key: str
    kind: ScheduleKind
    next_due: datetime | None
    """The next tick, an aware UTC datetime; None while paused."""
    paused: bool
    interval: timedelta | None
    """The period of an interval schedule; None for once and cron."""
    expression: str | None
    """The cron expression of a cron schedule; None otherwise."""

    @property
    def target(self) -> tuple[str, str]:
        """``(actor type name, key)``."""
        return (self.actor, self.key)


_SKIP: Final = Skip()


class _Entry:
    """A live node schedule: its target, message, rule, next due and timer."""

    __slots__ = ("reference", "target", "message", "kind", "period_us", "cron", "due_us", "paused", "timer", "live", "policy")

    def __init__(
        self,
        reference: str,
        target: EntityRef[Any],
        message: Any,
        kind: ScheduleKind,
        period_us: int | None,
        cron: Cron | None,
        due_us: int,
        policy: CatchUp = _SKIP,
    ) -> None:
        self.reference = reference
        self.policy = policy  # misfire=: what a late tick does (casty._core.catchup)
        self.target = target
        self.message = message
        self.kind: ScheduleKind = kind
        self.period_us = period_us  # the delay of a one-shot, the interval of an interval schedule
        self.cron = cron
        self.due_us = due_us
        self.paused = False
        self.timer: Timer | None = None
        self.live = True

    def names(self) -> tuple[str, str, str, str]:
        """The leading fields of every node schedule event."""
        return (self.reference, self.target.actor, self.target.key, self.kind)


class NodeScheduler:
    """The node's scheduler of node schedules; the system calls ``start`` and ``stop``.

    ``tz`` is the zone cron expressions are read in (default UTC); in ``cluster_mode``
    crons are read in UTC whatever ``tz`` says, and a cron schedule needs a reference.
    """

    def __init__(self, system: ActorSystem, *, tz: tzinfo = timezone.utc, cluster_mode: bool = False) -> None:
        if not isinstance(tz, tzinfo):
            raise TypeError(f"tz must be a datetime.tzinfo, not {type(tz).__qualname__}")
        self._system = system
        self.tz = tz
        self.cluster_mode = bool(cluster_mode)
        self._started = False
        self._entries: dict[str, _Entry] = {}  # registration order
        self._claims: dict[asyncio.Task[None], None] = {}  # cron claims in flight (cluster mode), in start order

    # ================================================================== lifecycle ====

    @property
    def started(self) -> bool:
        return self._started

    @property
    def cron_tz(self) -> tzinfo:
        """The zone cron expressions are evaluated in: UTC in cluster mode, else ``tz``."""
        return timezone.utc if self.cluster_mode else self.tz

    def start(self) -> None:
        """Accept schedules from now on (idempotent). Call it once the system's loop runs."""
        self._started = True

    def stop(self) -> None:
        """Drop every schedule (they live in memory only) and refuse further calls. Idempotent."""
        if not self._started:
            return
        self._started = False
        entries = list(self._entries.values())
        self._entries.clear()
        for entry in entries:
            self._drop(entry, "stopped")
        claims = list(self._claims)
        self._claims.clear()
        for task in claims:
            task.cancel()  # a stopping node tells nothing more; its pending claim asks would only delay the stop

    def _check_started(self) -> None:
        if not self._started:
            raise SchedulerNotStarted("the node scheduler is not started: the actor system is not running")
        if not self._system.running:
            raise SchedulerNotStarted("the node scheduler cannot run: the actor system is not running")

    # ================================================================== registering ==

    async def schedule_once(
        self, message: Any, ref: EntityRef[Any], delay: timedelta, *, reference: str | None = None,
        misfire: CatchUp = _SKIP,
    ) -> str:
        """Tell ``message`` to ``ref`` once, ``delay`` from now; returns the schedule's reference.

        ``misfire``: what a late tick does (``Skip()``, the default, tells it however late;
        ``DropLate(grace)`` drops it past the grace; see ``casty._core.catchup``)."""
        policy = checked("schedule_once", "misfire", misfire)
        self._check_started()
        self._check_target(ref, message)
        delay_us = to_micros(delay, "delay")
        if delay_us < 0:
            raise ValueError(f"schedule_once: delay must not be negative, got {delay}")
        self._check_reference(reference)
        now = self._system.clock.now_us()
        due = checked_due("schedule_once", "delay", delay, now + delay_us)
        return self._add(reference, ref, message, "once", delay_us, None, due, policy)

    async def schedule(
        self, message: Any, ref: EntityRef[Any], interval: timedelta, *, reference: str | None = None,
        misfire: CatchUp = _SKIP,
    ) -> str:
        """Tell ``message`` to ``ref`` every ``interval``, the first time one interval from now.

        ``misfire``: what a late tick does: ``Skip()`` (the default: one late tick, the
        missed ones skipped), ``FireAll(limit)``, ``DropLate(grace)`` or ``FixedDelay()``."""
        policy = checked("schedule", "misfire", misfire)
        self._check_started()
        self._check_target(ref, message)
        every_us = to_micros(interval, "interval")
        if every_us <= 0:
            raise ValueError(f"schedule: interval must be positive, got {interval}")
        self._check_reference(reference)
        now = self._system.clock.now_us()
        first = checked_due("schedule", "interval", interval, now + every_us)
        checked_due("schedule", "interval", interval, first + every_us)  # and the tick after it
        return self._add(reference, ref, message, "interval", every_us, None, first, policy)

    async def schedule_cron(
        self, message: Any, ref: EntityRef[Any], expression: str, *, reference: str | None = None,
        misfire: CatchUp = _SKIP, tz: str | tzinfo | None = None,
    ) -> str:
        """Tell ``message`` to ``ref`` at every fire time of the Quartz cron ``expression``.

        ``tz``: the zone the expression is read in (an IANA name or a tzinfo; the DST rule of
        ``casty._core.cron``: a time in a spring gap does not fire, one in the repeated hour
        fires once); None is the node's default (``cron_tz``: UTC in cluster mode, as the seed
        says). An explicit zone in cluster mode is an extension of the seed: every node must
        read the same zone, so give the same ``tz`` wherever the reference is registered.
        ``misfire``: ``Skip()`` (the default), ``FireAll(limit)`` or ``DropLate(grace)``;
        ``FixedDelay()`` has no period on a cron grid: InvalidCatchUp.
        """
        policy = checked(f"schedule_cron({expression!r})", "misfire", misfire, grid=True)
        zoned = zone(tz) if tz is not None else self.cron_tz
        self._check_started()
        self._check_target(ref, message)
        if not isinstance(expression, str):
            raise InvalidCronExpression(repr(expression), f"a cron expression is a string, not {type(expression).__qualname__}")
        cron = Cron(expression, zoned)
        if reference is None and self.cluster_mode:
            raise ScheduleReferenceRequired(
                f"schedule_cron({expression!r}) in cluster mode needs reference=: each tick is claimed cluster-wide by it"
            )
        if self.cluster_mode:
            _provided_claims()  # ConfigurationError now, not at every tick
        self._check_reference(reference)
        now = self._system.clock.now_us()
        first = cron.next_after(to_datetime(now))
        if first is None:
            raise InvalidCronExpression(expression, f"it has no fire time after {to_datetime(now).isoformat()}")
        return self._add(reference, ref, message, "cron", None, cron, to_us(first), policy, None if tz is None else zoned)

    def _check_target(self, ref: Any, message: Any) -> None:
        """Raise InvalidIdentity for a target that is not a valid entity; SchemaError for a message it refuses."""
        if not isinstance(ref, EntityRef):
            hint = " (get one with system.ref(actor, key))" if isinstance(ref, ActorType) else ""
            raise InvalidIdentity(f"a node schedule targets an entity ref, not {type(ref).__qualname__} {ref!r}{hint}")
        bound = ref._system
        if bound is not None and bound is not self._system:
            raise InvalidIdentity(f"{ref!r} belongs to another actor system")
        name, key = ref.actor, ref.key
        module, sep, qualname = name.partition(":") if isinstance(name, str) else ("", "", "")
        if not (sep and module and qualname):
            raise InvalidIdentity(f"{name!r} is not an actor type name (expected module:qualname)")
        try:
            actor_type = self._system.type_named(name)
        except UnknownActor as exc:
            if not self.cluster_mode:
                raise InvalidIdentity(f"unknown actor type: {exc}") from exc
            # In a cluster the type need only be known where the key is activated; until it
            # is, its ticks are lost (reported), as for any delivery failure.
            if not isinstance(key, str) or not key:
                raise InvalidIdentity(f"{name}: a key must be a non-empty string, got {key!r}") from exc
            return
        self._system.validate_identity(actor_type, key)
        actor_type.schema.check(message)
        self._system.codec.encode_message(message, actor_type.schema)

    def _check_reference(self, reference: str | None) -> None:
        if reference is None:
            return
        if not isinstance(reference, str) or not reference:
            raise ValueError(f"a schedule reference must be a non-empty string, got {reference!r}")
        if reference in self._entries:
            raise ScheduleReferenceInUse(f"a node schedule is already registered under reference {reference!r}")

    def _new_reference(self) -> str:
        rng = self._system.random
        while True:
            reference = str(uuid.UUID(int=rng.getrandbits(128), version=4))
            if reference not in self._entries:
                return reference

    def _add(
        self,
        reference: str | None,
        target: EntityRef[Any],
        message: Any,
        kind: ScheduleKind,
        period_us: int | None,
        cron: Cron | None,
        due_us: int,
        policy: CatchUp = _SKIP,
        tz: tzinfo | None = None,
    ) -> str:
        if reference is None:
            reference = self._new_reference()
        entry = _Entry(reference, target, message, kind, period_us, cron, due_us, policy)
        self._entries[reference] = entry
        fields = (
            *entry.names(),
            due_us,
            period_us if kind == "interval" else None,
            cron.expression if cron is not None else None,
        )
        if tz is None:  # the node's zone: the row of today (the ledger reads no tz as UTC)
            self._system.emit(ev.NodeScheduleRegistered, *fields)
        else:
            self._system.emit(ev.ZonedNodeScheduleRegistered, *fields, _zone_name(tz))
        self._arm(entry, self._system.clock.now_us())
        return reference

    # ================================================================== managing =====

    def pause_schedule(self, reference: str) -> None:
        """Stop ticking until resumed; ``ScheduleStateError`` if already paused."""
        entry = self._lookup(reference)
        if entry.paused:
            raise ScheduleStateError(f"node schedule {reference!r} is already paused")
        entry.paused = True
        self._disarm(entry)
        self._system.emit(ev.NodeSchedulePaused, *entry.names())

    def resume_schedule(self, reference: str) -> None:
        """Tick again, the next tick recalculated from now (no catch-up); ``ScheduleStateError`` if not paused."""
        entry = self._lookup(reference)
        if not entry.paused:
            raise ScheduleStateError(f"node schedule {reference!r} is not paused")
        now = self._system.clock.now_us()
        if entry.cron is not None:
            following = entry.cron.next_after(to_datetime(now))
            if following is None:
                self._remove(entry, "done")
                return
            entry.due_us = to_us(following)
        else:
            assert entry.period_us is not None
            if now + entry.period_us > LAST_US:
                self._remove(entry, "out-of-range")
                return
            entry.due_us = now + entry.period_us
        entry.paused = False
        self._system.emit(ev.NodeScheduleResumed, *entry.names(), entry.due_us)
        self._arm(entry, now)

    def cancel_schedule(self, reference: str) -> None:
        """Remove the schedule: no further tick; one already told is not recalled."""
        self._remove(self._lookup(reference), "cancelled")

    def list_schedules(self) -> list[NodeScheduleInfo]:
        """Every live node schedule of this node, in registration order."""
        self._check_started()
        return [
            NodeScheduleInfo(
                reference=entry.reference,
                actor=entry.target.actor,
                key=entry.target.key,
                kind=entry.kind,
                next_due=None if entry.paused else to_datetime(entry.due_us),
                paused=entry.paused,
                interval=timedelta(microseconds=entry.period_us)
                if entry.kind == "interval" and entry.period_us is not None
                else None,
                expression=entry.cron.expression if entry.cron is not None else None,
            )
            for entry in self._entries.values()
        ]

    def _lookup(self, reference: str) -> _Entry:
        self._check_started()
        entry = self._entries.get(reference) if isinstance(reference, str) else None
        if entry is None:
            raise ScheduleReferenceNotFound(
                f"no node schedule under reference {reference!r} (never registered, cancelled, or a one-shot that fired)"
            )
        return entry

    def _remove(self, entry: _Entry, reason: str) -> None:
        if self._entries.get(entry.reference) is entry:
            del self._entries[entry.reference]
        self._drop(entry, reason)

    def _drop(self, entry: _Entry, reason: str) -> None:
        entry.live = False
        self._disarm(entry)
        self._system.emit(ev.NodeScheduleCancelled, *entry.names(), reason)

    # ================================================================== timers =======

    def _arm(self, entry: _Entry, now_us: int) -> None:
        """Set the timer for ``entry.due_us`` (wall time) in loop time, as far ahead as the wall clock says."""
        delay = max(0, entry.due_us - now_us) / 1_000_000
        system = self._system
        entry.timer = system.timers.call_at_wall(system.loop.time() + delay, entry.due_us, self._fire, entry)  # re-armed if the clock steps

    @staticmethod
    def _disarm(entry: _Entry) -> None:
        if entry.timer is not None:
            entry.timer.cancel()
            entry.timer = None

    def _fire(self, entry: _Entry) -> None:
        """A timer went off: tell the message (a failure loses the tick), then arm the next tick."""
        entry.timer = None
        if not entry.live or entry.paused or not self._started:
            return
        system = self._system
        now = system.clock.now_us()
        tick = entry.due_us
        if now < tick:
            self._arm(entry, now)  # the wall clock is behind the loop (stepped back): never fire early
            return
        if type(entry.policy) is not Skip:
            self._fire_under_policy(entry, tick, now)
            return
        next_us, skipped = self._following(entry, tick, now)
        ended = "done"
        if next_us is not None and next_us > LAST_US:
            # No datetime can say when the next tick is: this one is the last (an interval
            # near year 9999). Told as a last tick, then the schedule ends, saying why.
            next_us, skipped, ended = None, 0, "out-of-range"
        if entry.cron is not None and self.cluster_mode:
            self._claim_tick(entry, tick, now, next_us, skipped)
        else:
            self._tell(entry, tick, now, next_us, skipped)
        if next_us is not None and skipped:
            system.emit(ev.NodeScheduleCaughtUp, *entry.names(), tick, now, next_us, skipped)
        if not entry.live:
            return  # removed while telling (an observer or a synchronous callee cancelled it)
        if next_us is None:
            self._remove(entry, ended)
            return
        entry.due_us = next_us
        self._arm(entry, now)

    def _fire_under_policy(self, entry: _Entry, tick: int, now: int) -> None:
        """``_fire`` for a ``misfire=`` other than Skip: ``decide`` (once, interval) or ``decide_on_grid`` (cron)
        says which ticks to tell now, in order (each claimed on its own in cluster mode) and the next tick."""
        system = self._system
        policy = entry.policy
        if entry.cron is not None:
            cron = entry.cron

            def following(t: int) -> int | None:
                nxt = cron.next_after(to_datetime(t))
                return to_us(nxt) if nxt is not None else None

            dues, next_us, skipped = decide_on_grid(policy, tick, now, following, max_steps=MAX_COUNTED_SKIPS)
        else:
            decision = decide(policy, tick, entry.period_us if entry.kind == "interval" else None, now)
            dues, next_us, skipped = decision.dues(), decision.next_us, decision.skipped
        ended = "done"
        if next_us is not None and next_us > LAST_US:
            next_us, ended = None, "out-of-range"
        for due in dues:
            if entry.cron is not None and self.cluster_mode:
                self._claim_tick(entry, due, now, next_us, skipped)
            else:
                self._tell(entry, due, now, next_us, skipped)
        if not dues:
            latest = tick if entry.kind == "once" else _latest(entry, tick, now, next_us)
            system.emit(ev.NodeScheduleDropped, *entry.names(), latest, now, next_us, skipped)
        elif next_us is not None and skipped:
            system.emit(ev.NodeScheduleCaughtUp, *entry.names(), dues[0], now, next_us, skipped)
        if not entry.live:
            return
        if next_us is None:
            self._remove(entry, ended)
            return
        entry.due_us = next_us
        self._arm(entry, now)

    def _tell(self, entry: _Entry, tick: int, now: int, next_us: int | None, skipped: int) -> None:
        """Tell the tick's message to the target; any failure before it is queued loses the tick (reported).

        Delivered locally in a ``ScheduledEnvelope`` (``ctx.occurrence``: the reference, the tick, ``now``,
        ``skipped``); to a key owned by another node it goes with it (a ``ScheduledDeliver``), queued there alike."""
        system = self._system
        envelope = ScheduledEnvelope(entry.message, entry.reference, tick, now)
        envelope.origin = f"node-schedule:{entry.reference}"
        envelope.skipped = skipped
        try:
            system.tell_envelope(entry.target, envelope)
        except Exception as exc:  # any failure before the message is queued loses this tick
            system.emit(ev.NodeScheduleTickLost, *entry.names(), tick, now, next_us, f"{type(exc).__name__}: {exc}")
        else:
            system.emit(ev.NodeScheduleFired, *entry.names(), tick, now, next_us)

    # ================================================================== cluster claims

    def _claim_tick(self, entry: _Entry, tick: int, now: int, next_us: int | None, skipped: int) -> None:
        """Cluster mode, a cron tick: skip it if older than its TTL, else claim it in the background."""
        assert entry.cron is not None
        claims = _provided_claims()
        key = claims.key(entry.reference, tick)
        nominal = entry.cron.next_after(to_datetime(tick))
        ttl = claims.ttl_us(to_us(nominal) - tick if nominal is not None else None)
        if claims.expired(tick, ttl, now):
            reason = f"the tick is {(now - tick) / 1e6:g} s old, older than its claim TTL of {ttl / 1e6:g} s"
            self._system.emit(ev.NodeScheduleClaimSkipped, *entry.names(), tick, now, key, reason)
            return
        task = self._system.loop.create_task(self._claim(claims, entry, tick, next_us, key, ttl, skipped), name=f"claim:{key}")
        self._claims[task] = None
        task.add_done_callback(self._claim_done)

    def _claim_done(self, task: asyncio.Task[None]) -> None:
        self._claims.pop(task, None)
        if not task.cancelled() and task.exception() is not None:
            self._system.emit(
                ev.MessageDropped, "node-schedule", task.get_name(), "claim", f"claim task failed: {task.exception()!r}"
            )

    async def _claim(
        self, claims: TickClaims, entry: _Entry, tick: int, next_us: int | None, key: str, ttl: int, skipped: int
    ) -> None:
        """Claim the tick; tell only if this node is the confirmed winner."""
        system = self._system
        try:
            answer = await claims.claim(system, key, tick, ttl)
        except Exception as exc:  # no owner, a timeout, a fenced owner: this node does not know it won, so it does not tell
            reason = f"claim failed: {type(exc).__name__}: {exc}"
            system.emit(ev.NodeScheduleClaimSkipped, *entry.names(), tick, system.clock.now_us(), key, reason)
            return
        now = system.clock.now_us()
        if answer is None:
            reason = "refused by the claim's owner: the tick is older than its claim TTL on the owner's clock"
            system.emit(ev.NodeScheduleClaimSkipped, *entry.names(), tick, now, key, reason)
        elif answer != system.node:
            system.emit(ev.NodeScheduleClaimLost, *entry.names(), tick, now, key, answer)
        else:
            system.emit(ev.NodeScheduleClaimWon, *entry.names(), tick, now, key, ttl)
            if now < tick:
                now = await self._wall_reaches(tick)  # the clock stepped back during the round trip: never tell early
            self._tell(entry, tick, now, next_us, skipped)

    async def _wall_reaches(self, due_us: int) -> int:
        """Wait until the node's wall clock reads ``due_us`` or later; return its reading then.

        A wall-clock timer (re-armed if the clock steps again while it waits), re-checked when it
        goes off: the timer fires on loop time, which a stepped clock no longer matches.
        """
        system = self._system
        loop = system.loop
        now = system.clock.now_us()
        while now < due_us:
            woken: asyncio.Future[None] = loop.create_future()
            timer = system.timers.call_at_wall(loop.time() + (due_us - now) / 1_000_000, due_us, _wake, woken)
            try:
                await woken
            finally:
                timer.cancel()
            now = system.clock.now_us()
        return now

    @staticmethod
    def _following(entry: _Entry, tick: int, now: int) -> tuple[int | None, int]:
        """The next tick strictly after ``now`` (None: no more), and how many ticks after ``tick`` were skipped."""
        if entry.kind == "once":
            return None, 0
        if entry.kind == "interval":
            assert entry.period_us is not None
            return catch_up(tick, entry.period_us, now)
        assert entry.cron is not None
        cron = entry.cron
        skipped = 0
        following = cron.next_after(to_datetime(tick))
        while following is not None and to_us(following) <= now:
            skipped += 1
            if skipped >= MAX_COUNTED_SKIPS:
                following = cron.next_after(to_datetime(now))
                break
            following = cron.next_after(following)
        return (to_us(following) if following is not None else None), skipped


def _latest(entry: _Entry, tick: int, now: int, next_us: int | None) -> int:
    """The last grid time at or before ``now`` (the tick a ``DropLate`` found too late)."""
    if entry.cron is None:
        assert entry.period_us is not None
        return tick + entry.period_us * ((now - tick) // entry.period_us)
    latest, nxt = tick, entry.cron.next_after(to_datetime(tick))
    steps = 0
    while nxt is not None and to_us(nxt) <= now and steps < MAX_COUNTED_SKIPS:
        latest, nxt, steps = to_us(nxt), entry.cron.next_after(nxt), steps + 1
    return latest


def _zone_name(tz: tzinfo) -> str:
    """A zone's IANA name for the trace (``ZoneInfo.key``; ``UTC`` for timezone.utc), else its ``str``."""
    key = getattr(tz, "key", None)
    if isinstance(key, str):
        return key
    return "UTC" if tz is timezone.utc else str(tz)


def _wake(woken: asyncio.Future[None]) -> None:
    """The timer of ``NodeScheduler._wall_reaches``: wake its waiter (unless it was cancelled meanwhile)."""
    if not woken.done():
        woken.set_result(None)
