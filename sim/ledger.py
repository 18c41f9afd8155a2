"""The occurrence ledger: every occurrence of every periodic thing in a finished trace, classified.

A periodic thing is a persisted actor schedule (``schedule.*`` rows, keyed by actor, key and
name), a node schedule (``node_schedule.*`` rows, keyed by node and reference), a cluster
cron tick (a node schedule whose ticks are claimed: keyed by reference alone, since the
cluster tells each tick once), or an activation timer (``timer.fired``). Each occurrence (a
due time on the schedule's grid) gets one :class:`Entry` whose ``status`` is

* ``on-time``: delivered once, at most ``tolerance`` after its due time;
* ``late``: delivered once, ``late_us`` after its due time, nothing skipped;
* ``caught-up``: delivered once, late, and the firing skipped ``skipped`` occurrences (each of
  those has its own ``missed`` entry): the later ones under ``Skip``, the oldest ones under
  ``FireAll`` and ``DropLate`` (they tell the newest); a ``DropLate`` firing that told nothing
  (``schedule.dropped``) misses each due it dropped, and a ``FixedDelay`` firing starts a new
  grid at its next due (next = fired + interval), so the old grid's later dues are not missed
  (node schedules' ``misfire=`` alike: ``node_schedule.caught_up`` / ``node_schedule.dropped``);
* ``repeated``: fired more than once (``why``: the ownership change, fault or clock change
  between the firings; ``attempts`` lists every firing);
* ``missed``: never reached the body (``why``): skipped by a catch-up, passed over when the
  schedule was re-armed past it, paused, its tick lost, its claim skipped, claimed by a node
  that never told it, or **lost in flight**: fired, but the message died in the mailbox of
  an activation that ended (a crash) before its handler finished (``message.dropped``);
* ``delivered``: an activation timer's firing (``timer.fired`` carries no due time, so no
  lateness can be told).

Cluster cron entries also say who ``claimed`` the tick and on which nodes the claim was
``lost`` (another node had it first).

Which firing a ``message.dropped`` row was (lost in flight, its handler failed, lost before
the mailbox) is ``sim.ledger_losses``'s: exact when the row names its occurrence, as today's
runtime's do, else inferred from the key's life (its docstring says how).

Dues past the furthest next due any firing set are not counted: the run may simply have
ended before them. A cron node schedule's grid is read in the zone its registration row
names (``tz``), else UTC (today's rows name none). A trace recorded with ``keep`` must keep
``schedule.*``, ``node_schedule.*``, ``timer.fired``, ``activation.*``, ``message.dropped``,
the faults and ``epoch.acquired``, or the ledger sees less than happened.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from casty._core.cron import Cron, zone
from casty.clock import to_datetime, to_us

from .ledger_losses import NODE_ENDS as _NODE_ENDS, Losses, at as _at, internal as _internal
from .trace import Row, Trace

__all__ = ["Attempt", "Entry", "STATUSES", "ledger", "counts", "misses", "table"]

STATUSES = ("on-time", "late", "caught-up", "repeated", "missed", "delivered")

_CAUSES = ("epoch.acquired", "fault.crash", "fault.restart", "node.stopped", "fault.pause", "fault.resume", "clock.step", "clock.drift")
_NEAR_NS = 2_000_000_000
"""How far before an occurrence's first firing a cause still explains a repeat (2 s, as sim.checks)."""


@dataclass(frozen=True, slots=True)
class Attempt:
    """One firing of an occurrence: the row, where, how late on that node's wall clock,
    ``lost``: why its message never reached the body (None: it was delivered), and
    ``lost_at``: the ``message.dropped`` row that says so (the end that explains the loss is
    at or before it)."""

    row: Row
    node: str
    late_us: int
    lost: str | None = None
    lost_at: Row | None = None


@dataclass(frozen=True, slots=True)
class Entry:
    """One occurrence of one periodic thing and its classification (see the module docstring)."""

    source: str  # "schedule", "node-schedule", "cron", "timer"
    actor: str
    key: str
    name: str  # the schedule's name, the node schedule's reference, the timer's name
    node: str | None  # the node of a node schedule (None for the others: they move with their key)
    due_us: int | None
    status: str
    why: str = ""
    late_us: int = 0
    skipped: int = 0
    attempts: tuple[Attempt, ...] = ()
    claimed: str | None = None
    lost_claims: tuple[str, ...] = field(default=())

    @property
    def schedule(self) -> str:
        """A short name of the thing this is an occurrence of."""
        where = f"{self.node}:" if self.node else ""
        return f"{where}{self.actor.split(':')[-1]}[{self.key}]/{self.name}"

    def describe(self) -> str:
        due = "-" if self.due_us is None else to_datetime(self.due_us).isoformat()
        text = f"{self.source} {self.schedule} due {due}: {self.status}"
        if self.status in ("late", "caught-up"):
            text += f" by {self.late_us / 1e6:.3f}s"
        if self.skipped:
            text += f", skipped {self.skipped}"
        return text + (f" ({self.why})" if self.why else "")


def _attempt(losses: Losses, fired: Row, due: int) -> Attempt:
    """One firing of due ``due`` as an attempt: how late, and whether (and where) its message was lost."""
    return Attempt(fired, fired.node, int(fired.get("now_us")) - due, losses.lost.get(fired.seq), losses.dropped.get(fired.seq))


# --- shared --------------------------------------------------------------------------------------------


def _classify(attempts: list[Attempt], skipped: int, tolerance_us: int, causes: list[Row], actor: str, key: str) -> tuple[str, str, int]:
    """(status, why, late_us) of an occurrence that was fired at least once."""
    if len(attempts) > 1:
        return "repeated", _repeat_why(attempts, causes, actor, key), attempts[-1].late_us
    (only,) = attempts
    if only.lost is not None:
        return "missed", only.lost, only.late_us
    if skipped:
        return "caught-up", f"late by {only.late_us / 1e6:.3f}s, skipped the next {skipped}", only.late_us
    if only.late_us > tolerance_us:
        return "late", f"late by {only.late_us / 1e6:.3f}s", only.late_us
    return "on-time", "", only.late_us


def _repeat_why(attempts: list[Attempt], causes: list[Row], actor: str, key: str) -> str:
    first, last = attempts[0].row, attempts[-1].row
    nodes = {a.node for a in attempts}
    found = []
    for row in causes:
        if not first.t_ns - _NEAR_NS <= row.t_ns <= last.t_ns or row.seq > last.seq:
            continue
        if row.kind == "epoch.acquired":
            if row.get("actor") == actor and row.get("key") == key and row.seq > first.seq:
                found.append(f"owner changed: epoch.acquired on {_at(row)}")
        elif row.node in nodes:
            found.append(f"{row.kind} of {_at(row)}")
    lost = [f"the firing on {_at(a.row)} was {a.lost}" for a in attempts if a.lost]
    return "; ".join([f"fired {len(attempts)} times ({', '.join(_at(a.row) for a in attempts)})", *found, *lost])


# --- persisted actor schedules -----------------------------------------------------------------------------


def _persisted(trace: Trace, tolerance_us: int, losses: Losses, causes: list[Row]) -> list[Entry]:
    groups: dict[tuple[str, str, str], list[Row]] = defaultdict(list)
    for row in trace.of("schedule.armed", "schedule.fired", "schedule.caught_up", "schedule.dropped", "schedule.cancelled"):
        if not _internal(row.get("actor")):
            groups[(str(row.get("actor")), str(row.get("key")), str(row.get("name")))].append(row)
    out: list[Entry] = []
    for (actor, key, name), rows in groups.items():
        attempts: dict[int, list[Attempt]] = defaultdict(list)
        skipped: dict[int, tuple[int, Row]] = {}
        for row in rows:
            if row.kind == "schedule.fired":
                due = int(row.get("due_us"))
                attempts[due].append(_attempt(losses, row, due))
            elif row.kind == "schedule.caught_up":
                skipped[int(row.get("due_us"))] = (int(row.get("skipped")), row)
        entries = {}
        for due, tries in attempts.items():
            count = skipped[due][0] if due in skipped and len(tries) == 1 else 0
            status, why, late = _classify(tries, count, tolerance_us, causes, actor, key)
            every = _rows_every(rows, skipped[due][1].seq) if status == "caught-up" else 0
            if status == "caught-up" and every and _skipped_before(due, int(skipped[due][1].get("next_us")), due + every, attempts):
                why = _before_why(late, count)
            entries[due] = Entry("schedule", actor, key, name, None, due, status, why, late, count, tuple(tries))
        for due, why in _grid_misses(rows, set(attempts), skipped):
            entries[due] = Entry("schedule", actor, key, name, None, due, "missed", why)
        out.extend(entries[due] for due in sorted(entries))
    return out


def _skipped_before(told: int, next_us: int, following: int | None, fired: Iterable[int]) -> bool:
    """Whether the ticks a catch-up skipped precede the one it told (``FireAll``, ``DropLate``: the oldest skipped,
    the newest told) rather than follow it (``Skip``): a later tick was told before its next (a burst), or its next
    is the grid tick right after it (one told, the newest). Under ``Skip`` every grid tick between the told one
    and its next was skipped."""
    return next_us == following or any(told < t < next_us for t in fired)


def _before_why(late_us: int, skipped: int) -> str:
    return f"late by {late_us / 1e6:.3f}s, skipped the {skipped} before it"


def _rows_every(rows: list[Row], before: int) -> int:
    """The period of the schedule's last interval arming before row ``before`` (its seq; 0: none): the period of a
    catch-up is the one armed when it fired, not that of a later replacement under the same name."""
    return next((int(r.get("every_us")) for r in reversed(rows) if r.kind == "schedule.armed" and r.get("every_us") and r.seq < before), 0)


def _skipped_by(told: int, skipped: int, every: int, due: int, fired: set[int]) -> bool:
    """Whether ``due`` is among the ``skipped`` dues of the catch-up that told ``told``: after it (``Skip``) when none
    of those was fired, else before it (``FireAll``, ``DropLate``: the oldest skipped, the newest told)."""
    after = range(told + every, told + (skipped + 1) * every, every)
    if not any(d in fired for d in after):
        return due in after
    return told - skipped * every <= due < told


def _grid_misses(rows: list[Row], fired: set[int], skipped: Mapping[int, tuple[int, Row]]) -> list[tuple[int, str]]:
    """The interval grid's dues that no firing delivered, each with why: a grid restarts where the
    schedule is cancelled or armed off it (another phase or period), or where a firing set its next
    due off it (``FixedDelay``: next = fired + interval).

    A catch-up's skipped dues follow its due under ``Skip`` (the oldest is told, the later ones
    skipped) and precede it under ``FireAll`` and ``DropLate`` (the newest are told, the oldest
    skipped): they are the ones after it unless one of those was fired. A ``schedule.dropped``
    row (``DropLate`` told nothing) covers its ``skipped`` dues up to its due."""
    out: list[tuple[int, str]] = []
    segment: list[Row] = []
    anchor = every = 0
    segments: list[tuple[int, int, list[Row]]] = []
    for row in rows:
        if row.kind == "schedule.cancelled":
            anchor = every = 0
            continue
        if row.kind == "schedule.armed":
            period = row.get("every_us")
            if not period:
                anchor = every = 0
                continue
            due, period = int(row.get("due_us")), int(period)
            if not every or every != period or (due - anchor) % every:
                anchor, every, segment = due, period, []
                segments.append((anchor, every, segment))
        if every:
            segment.append(row)
            following = row.get("next_us") if row.kind in ("schedule.fired", "schedule.dropped") else None
            if following is not None and (int(following) - anchor) % every:
                anchor, segment = int(following), []  # off the grid (FixedDelay): a new grid from its next due
                segments.append((anchor, every, segment))
    for anchor, every, seg in segments:
        firings = [r for r in seg if r.kind == "schedule.fired" and (int(r.get("due_us")) - anchor) % every == 0]
        if not firings:
            continue
        first = min(int(r.get("due_us")) for r in firings)
        onward = [r for r in seg if r.kind in ("schedule.fired", "schedule.dropped") and r.get("next_us") is not None]
        furthest = max((int(r.get("next_us")) for r in onward if (int(r.get("next_us")) - anchor) % every == 0), default=first)
        catchups = [(d, n, r) for d, (n, r) in skipped.items() if n]
        drops = [r for r in seg if r.kind == "schedule.dropped"]
        for due in range(first, furthest, every):
            if due in fired:
                continue
            drop = next((r for r in drops if int(r.get("due_us")) - (int(r.get("skipped")) - 1) * every <= due <= int(r.get("due_us"))), None)
            if drop is not None:
                out.append((due, f"dropped late by its DropLate policy on {_at(drop)} (its newest due {to_datetime(int(drop.get('due_us'))).isoformat()})"))
                continue
            by = next((r for d, n, r in catchups if _skipped_by(d, n, every, due, fired)), None)
            if by is not None:
                out.append((due, f"skipped by the catch-up of due {to_datetime(int(by.get('due_us'))).isoformat()} on {_at(by)}"))
                continue
            passed = next((r for r in seg if r.kind == "schedule.fired" and r.get("next_us") is not None and int(r.get("next_us")) > due), None)
            rearmed = next((r for r in seg if r.kind == "schedule.armed" and int(r.get("due_us")) > due and (passed is None or r.seq < passed.seq)), None)
            if rearmed is not None:
                out.append((due, f"passed over: the schedule was armed for {to_datetime(int(rearmed.get('due_us'))).isoformat()} on {_at(rearmed)}"))
            else:
                out.append((due, "never fired"))
    return out


# --- node schedules and cluster cron ----------------------------------------------------------------------------


def _node_schedules(trace: Trace, tolerance_us: int, losses: Losses, causes: list[Row]) -> list[Entry]:
    rows = [r for r in trace.of("node_schedule.*") if not _internal(r.get("actor"))]
    claimed = {str(r.get("reference")) for r in rows if r.kind.startswith("node_schedule.claim_")}
    groups: dict[tuple[str, str | None], list[Row]] = defaultdict(list)
    for row in rows:
        reference = str(row.get("reference"))
        groups[(reference, None if reference in claimed else row.node)].append(row)
    out: list[Entry] = []
    ends = trace.of(*_NODE_ENDS)
    for (reference, node), group in groups.items():
        for life in [group] if node is None else _lives(group):
            out.extend(_node_group(reference, node, life, tolerance_us, losses, causes, ends))
    return out


def _lives(rows: list[Row]) -> list[list[Row]]:
    """A node schedule's rows split at each registration: a node restart loses its node schedules,
    and one registered again is a new schedule with a grid of its own."""
    lives: list[list[Row]] = []
    for row in rows:
        if row.kind == "node_schedule.registered" or not lives:
            lives.append([])
        lives[-1].append(row)
    return lives


def _node_group(
    reference: str, node: str | None, rows: list[Row], tolerance_us: int, losses: Losses, causes: list[Row], ends: list[Row]
) -> list[Entry]:
    source = "node-schedule" if node is not None else "cron"
    first = rows[0]
    actor, key = str(first.get("actor")), str(first.get("key"))
    attempts: dict[int, list[Attempt]] = defaultdict(list)
    skipped: dict[int, int] = {}
    caught_next: dict[int, int] = {}  # tick -> the next tick its catch-up armed
    other: dict[int, list[Row]] = defaultdict(list)  # tick -> claim rows and lost ticks
    for row in rows:
        tick = row.get("tick_us")
        if row.kind == "node_schedule.fired":
            attempts[int(tick)].append(_attempt(losses, row, int(tick)))
        elif row.kind == "node_schedule.caught_up":
            skipped[int(tick)] = int(row.get("skipped"))
            caught_next[int(tick)] = int(row.get("next_us"))
        elif tick is not None:
            other[int(tick)].append(row)
    entries: dict[int, Entry] = {}
    for tick in sorted(set(attempts) | set(other)):
        claims = other.get(tick, [])
        won = [r for r in claims if r.kind == "node_schedule.claim_won"]
        lost = tuple(sorted({r.node for r in claims if r.kind == "node_schedule.claim_lost"}))
        winners = sorted({str(r.get("winner")) for r in claims if r.kind == "node_schedule.claim_lost"} | {r.node for r in won})
        holder = ",".join(winners) or None
        tries = attempts.get(tick, [])
        if tries:
            count = skipped.get(tick, 0) if len(tries) == 1 else 0
            status, why, late = _classify(tries, count, tolerance_us, causes, actor, key)
            if status == "caught-up" and _skipped_before(tick, caught_next[tick], _node_following(rows, tick), attempts):
                why = _before_why(late, count)
            entries[tick] = Entry(source, actor, key, reference, node, tick, status, why, late, count, tuple(tries), holder, lost)
        else:
            entries[tick] = Entry(source, actor, key, reference, node, tick, "missed", _unfired_why(claims, winners, ends), claimed=holder, lost_claims=lost)
    for tick, why in _node_grid_misses(rows, set(entries), skipped):
        entries[tick] = Entry(source, actor, key, reference, node, tick, "missed", why)
    return [entries[tick] for tick in sorted(entries)]


def _node_following(rows: list[Row], tick: int) -> int | None:
    """The grid tick right after ``tick`` of the node schedule registered in ``rows`` (None: a one-shot, or none)."""
    registered = next((r for r in rows if r.kind == "node_schedule.registered"), None)
    if registered is None:
        return None
    if registered.get("schedule_kind") == "interval":
        return tick + int(registered.get("every_us"))
    if registered.get("schedule_kind") == "cron":
        cron = Cron(str(registered.get("expression")), zone(str(registered.get("tz") or "UTC")))
        following = cron.next_after(to_datetime(tick))
        return to_us(following) if following is not None else None
    return None


def _dropped_why(drop: Row) -> str:
    return f"dropped late by its DropLate policy on {_at(drop)} (its newest tick {to_datetime(int(drop.get('tick_us'))).isoformat()})"


def _unfired_why(claims: list[Row], winners: list[str], ends: list[Row]) -> str:
    """Why a tick with claim, dropped or tick-lost rows but no firing never reached its target."""
    drop = next((r for r in claims if r.kind == "node_schedule.dropped"), None)
    if drop is not None:
        return _dropped_why(drop)
    lost_tick = next((r for r in claims if r.kind == "node_schedule.tick_lost"), None)
    if lost_tick is not None:
        return f"tick lost on {_at(lost_tick)}: {lost_tick.get('reason')}"
    skips = [r for r in claims if r.kind == "node_schedule.claim_skipped"]
    if winners:
        first_claim = min(r.t_ns for r in claims)
        crash = next((e for e in ends if e.node in winners and e.t_ns >= first_claim - _NEAR_NS), None)
        died = f": {crash.kind} of {_at(crash)}" if crash is not None else ""
        return f"claimed by {', '.join(winners)}, which never told it{died}"
    if skips:
        return "claim skipped: " + "; ".join(f"on {_at(r)}: {r.get('reason')}" for r in skips)
    return "never fired"


def _node_grid_misses(rows: list[Row], seen: set[int], skipped: Mapping[int, int]) -> list[tuple[int, str]]:
    """Grid ticks (interval or cron) with no row at all: skipped by a catch-up, paused, or never fired."""
    registrations = [r for r in rows if r.kind == "node_schedule.registered"]
    registered = min(registrations, key=lambda r: int(r.get("due_us")), default=None)  # a cluster cron: the earliest
    fired = [r for r in rows if r.kind == "node_schedule.fired"]
    if registered is None or not fired:
        return []
    kind = registered.get("schedule_kind")
    furthest = max((int(r.get("next_us")) for r in fired if r.get("next_us") is not None), default=0)
    grid = _grid(registered, furthest, rows)
    if kind == "once" or grid is None:
        return []
    out = []
    first = min(int(r.get("tick_us")) for r in fired)
    pauses = [(p, next((r for r in rows if r.kind == "node_schedule.resumed" and r.node == p.node and r.seq > p.seq), None)) for p in rows if p.kind == "node_schedule.paused"]
    told = {int(r.get("tick_us")) for r in fired}
    drops = [r for r in rows if r.kind == "node_schedule.dropped"]
    for tick in grid:
        if tick < first or tick in seen:
            continue
        drop = next((r for r in drops if tick <= int(r.get("tick_us")) and sum(1 for g in grid if tick <= g <= int(r.get("tick_us"))) <= int(r.get("skipped"))), None)
        if drop is not None:
            out.append((tick, _dropped_why(drop)))
            continue
        by = next((t for t, n in skipped.items() if n and _node_skipped_by(grid, t, n, tick, told)), None)
        if by is not None:
            out.append((tick, f"skipped by the catch-up of tick {to_datetime(by).isoformat()}"))
            continue
        paused = next((p for p, r in pauses if (p.wall_us or 0) <= tick and (r is None or tick < int(r.get("due_us")))), None)
        out.append((tick, f"paused on {_at(paused)}" if paused is not None else "never fired"))
    return out


def _node_skipped_by(grid: list[int], told_tick: int, skipped: int, tick: int, told: set[int]) -> bool:
    """Whether ``tick`` is among the ``skipped`` grid ticks of the catch-up that told ``told_tick``: the ones after it
    (``Skip``) when none of those was told, else the ones before it (``FireAll``, ``DropLate``: the newest told)."""
    index = bisect_left(grid, told_tick)
    after = grid[index + 1 : index + 1 + skipped]
    if not any(g in told for g in after):
        return tick in after
    return tick in grid[max(0, index - skipped) : index]


def _grid(registered: Row, furthest: int, rows: list[Row]) -> list[int] | None:
    """The ticks from the first due up to (not including) ``furthest``, anchored again at each resume."""
    kind = registered.get("schedule_kind")
    start = int(registered.get("due_us"))
    if kind == "interval":
        every = int(registered.get("every_us"))
        # a resume starts a new grid at its due; the old one ends when the resume is made (its wall time);
        # a firing whose next tick is off the grid (FixedDelay: next = fired + interval) starts one at that tick
        breaks: list[tuple[int, int]] = []  # (where the old grid stops, where the new one starts)
        anchor = start
        for r in rows:
            if r.kind == "node_schedule.resumed":
                anchor = int(r.get("due_us"))
                breaks.append((r.wall_us if r.wall_us is not None else anchor, anchor))
            elif r.kind == "node_schedule.fired" and r.get("next_us") is not None and (int(r.get("next_us")) - anchor) % every:
                anchor = int(r.get("next_us"))
                breaks.append((int(r.get("tick_us")) + 1, anchor))
        anchors = [start, *(b for _, b in breaks)]
        stops = [*(a for a, _ in breaks), furthest]
        ticks: set[int] = set()
        for anchor, stop in zip(anchors, stops, strict=True):
            ticks.update(range(anchor, min(stop, furthest), every))
        return sorted(ticks)
    if kind == "cron":
        cron = Cron(str(registered.get("expression")), zone(str(registered.get("tz") or "UTC")))
        out, moment = [start], to_datetime(start)
        while (moment_next := cron.next_after(moment)) is not None and to_us(moment_next) < furthest:
            out.append(to_us(moment_next))
            moment = moment_next
        return out if start < furthest else []
    return None


# --- activation timers ----------------------------------------------------------------------------------------


def _timers(trace: Trace) -> list[Entry]:
    return [
        Entry("timer", str(r.get("actor")), str(r.get("key")), str(r.get("name")), None, None, "delivered", attempts=(Attempt(r, r.node, 0),))
        for r in trace.of("timer.fired")
        if not _internal(r.get("actor"))
    ]


# --- public ------------------------------------------------------------------------------------------------------


def ledger(trace: Trace, *, tolerance: timedelta = timedelta(milliseconds=100), messages: Mapping[str, str] | None = None) -> list[Entry]:
    """Every occurrence in ``trace``, classified: persisted schedules, node schedules, cluster cron, timers (in that order).

    ``tolerance``: how late a delivery may be and still be ``on-time`` (a cluster cron tick
    waits for its claim's quorum). ``messages``: schedule name (or node schedule reference)
    to the type name of the message it tells, to attribute drops exactly.
    """
    if not isinstance(tolerance, timedelta) or tolerance < timedelta(0):
        raise ValueError(f"tolerance must be a non-negative timedelta, got {tolerance!r}")
    tolerance_us = (tolerance.days * 86_400 + tolerance.seconds) * 1_000_000 + tolerance.microseconds
    losses = Losses(trace, messages)
    causes = trace.of(*_CAUSES)
    return [*_persisted(trace, tolerance_us, losses, causes), *_node_schedules(trace, tolerance_us, losses, causes), *_timers(trace)]


def counts(entries: Iterable[Entry]) -> dict[str, int]:
    """How many entries have each status, in ``STATUSES`` order (zeros included)."""
    out = dict.fromkeys(STATUSES, 0)
    for entry in entries:
        out[entry.status] += 1
    return out


def misses(entries: Iterable[Entry]) -> list[Entry]:
    """The missed and repeated entries: what ``sim.checks.explain_occurrences`` must explain."""
    return [e for e in entries if e.status in ("missed", "repeated")]


def table(entries: Iterable[Entry]) -> list[dict[str, Any]]:
    """The ledger as plain rows (for a table view or JSON): one dict per entry."""
    return [
        {
            "source": e.source,
            "schedule": e.schedule,
            "due": None if e.due_us is None else to_datetime(e.due_us).isoformat(),
            "status": e.status,
            "late_s": e.late_us / 1e6,
            "skipped": e.skipped,
            "firings": len(e.attempts),
            "claimed": e.claimed,
            "lost_claims": list(e.lost_claims),
            "why": e.why,
        }
        for e in entries
    ]
