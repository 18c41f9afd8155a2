"""Every periodic thing of a run as one lane, its occurrences classified by the occurrence ledger (no matplotlib).

A lane is one periodic thing as ``sim.ledger`` groups them: a persisted schedule of a key, an
activation timer of a key, a node schedule of a node, or a cluster cron tick (a node schedule
whose ticks are claimed, told once by the cluster). Its occurrences are the ledger's entries,
placed on **true time** so the four kinds share one axis: a delivered occurrence at its first
firing, a missed one at its due time read back through the clock of the node that ran the lane
(a timer's firing has no due time: it sits where it fired). Nothing is classified here: the
class is the ledger's status (``sim.viz.data.ledger.CLASS_OF``), so this view cannot disagree
with ``ledger_chart`` or ``ledger_table``.

The lane's label names its kind first and a key as a key: ``schedule  beater["dormant"] / beat``
reads as the schedule ``beat`` of the key ``dormant``, where ``beater[dormant]`` or a bare
``dormant`` read as a state; a node schedule names its node, its reference and the key it tells
(``node schedule  n1 / report → reporter["ana"]``), a cron tick its reference and key. The runtime's own keys (the cron claim keys and their expiry
schedules, ``sim.viz.data.keys.is_internal``) are left out unless ``internal=True``; the ledger
never classifies them, so for that option the trace is read once more with their type renamed
(``_UNHIDE``) and the lanes say ``(internal)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sim.ledger import Entry, ledger
from sim.trace import Row, Trace
from sim.viz.data.keys import is_internal, key_label
from sim.viz.data.ledger import CLASS_OF, Mark
from sim.viz.data.timebase import WallMap

__all__ = ["KINDS", "Occurrence", "PeriodicLane", "lane_label", "periodic_lanes"]

Kind = Literal["schedule", "timer", "node schedule", "cron"]
KINDS: tuple[Kind, ...] = ("schedule", "timer", "node schedule", "cron")
"""The lanes' kinds in drawing order (the ledger's order: persisted, node, cron, timers; timers moved beside their key's schedules)."""

_KIND_OF: dict[str, Kind] = {"schedule": "schedule", "timer": "timer", "node-schedule": "node schedule", "cron": "cron"}
_UNHIDE = "internal~"
"""Prefixed to an internal type's name so the ledger classifies its rows (it leaves ``casty.`` types out)."""


@dataclass(frozen=True, slots=True)
class Occurrence:
    """One mark on a lane: where (true ns), its class (a ``CLASS_OF`` value, or ``"timer"``), and what the ledger said.

    ``due_ns``: the due time on true time (None for a timer), so ``at_ns - due_ns`` is how late it
    was as the lane's node read it; ``firings_ns``: every firing (more than one: repeated).
    """

    at_ns: int
    due_ns: int | None
    cls: str
    skipped: int
    firings_ns: tuple[int, ...]
    lost_claims: tuple[str, ...]
    lost: bool
    entry: Entry


@dataclass(frozen=True, slots=True)
class PeriodicLane:
    """One periodic thing: its kind, label, the nodes that ran it, whether it is the runtime's own, its occurrences by time."""

    kind: Kind
    label: str
    nodes: tuple[str, ...]
    internal: bool
    occurrences: tuple[Occurrence, ...]


def _short(text: str, width: int = 18) -> str:
    """``text`` cut to ``width`` in its middle: two keys that differ at the end (a claim key's tick) stay apart."""
    if len(text) <= width:
        return text
    head = (width - 1) // 2
    return f"{text[:head]}…{text[len(text) - (width - 1 - head):]}"


def lane_label(entry: Entry, internal: bool = False) -> str:
    """The lane's label: its kind, then the key as ``type["key"]`` (or the node), then the schedule's name."""
    kind = _KIND_OF[entry.source]
    actor = entry.actor.removeprefix(_UNHIDE).split(":")[-1]
    name = entry.name if len(entry.name) <= 24 else f"{entry.name[:8]}…"  # a generated reference (a uuid): its head tells them apart
    target = key_label(actor, _short(entry.key))
    if kind == "node schedule":  # held by a node, telling a key: both named, so a generated reference still says what it ticks
        text = f"node schedule  {entry.node} / {name} → {target}"
    elif kind == "cron":
        text = f"cron  {name} → {target}  (one node of the cluster tells each tick)"
    else:
        text = f"{kind}  {target} / {name}"
    return text + ("  (internal)" if internal else "")


def _unhidden(trace: Trace) -> Trace:
    """The trace with the runtime's types renamed, so the ledger classifies their occurrences too."""
    rows = [
        Row(r.seq, r.t_ns, r.node, r.wall_us, r.kind, {**r.fields, "actor": _UNHIDE + str(r.get("actor"))}) if is_internal(r.get("actor")) else r
        for r in trace.rows
    ]
    out = Trace(rows)
    out.time_axis = trace.time_axis
    return out


def periodic_lanes(trace: Trace, *, internal: bool = False, entries: list[Entry] | None = None) -> list[PeriodicLane]:
    """One lane per periodic thing of ``trace`` (schedules and timers by key, then node schedules, then cron), occurrences in time order.

    ``entries``: the ledger of ``trace`` if already computed (``sim.ledger.ledger(trace)``); ignored with ``internal=True``.
    """
    if internal or entries is None:
        entries = ledger(_unhidden(trace) if internal else trace)
    wall = WallMap(trace)
    origin = wall.origin_us or 0
    groups: dict[tuple[str, str, str, str, str | None], list[Entry]] = {}
    for e in entries:
        groups.setdefault((e.source, e.actor, e.key, e.name, e.node), []).append(e)

    def order(item: tuple[tuple[str, str, str, str, str | None], list[Entry]]) -> tuple[int, str, int, str, int, str, str]:
        """The program's lanes first (a key's schedules and timers together, then node schedules, then cron), the runtime's own last."""
        (source, actor, key, name, node), _ = item
        kind = _KIND_OF[source]
        keyed = kind in ("schedule", "timer")  # a key's schedules and timers side by side
        return (2 * actor.startswith(_UNHIDE) + (0 if keyed else 1), actor if keyed else "", 0 if keyed else KINDS.index(kind),
                key if keyed else str(node), KINDS.index(kind), name, str(node))

    lanes: list[PeriodicLane] = []
    for (source, actor, _key, _name, node), group in sorted(groups.items(), key=order):
        hidden = actor.startswith(_UNHIDE)
        nodes = tuple(dict.fromkeys(a.node for e in group for a in e.attempts)) or ((node,) if node else ())
        occurrences: list[Occurrence] = []
        last_node = node or (nodes[0] if nodes else None)
        for e in sorted(group, key=lambda e: e.due_us if e.due_us is not None else 0):
            firings = tuple(a.row.t_ns for a in e.attempts)
            if e.attempts:
                last_node = e.attempts[0].node if node is None else node
            due_ns = None
            if e.due_us is not None:  # the due as true time, through the clock of the node that ran it
                if e.attempts:
                    first = e.attempts[0]
                    due_ns = first.row.t_ns - first.late_us * 1000
                else:
                    guess = (e.due_us - origin) * 1000
                    offset = wall.offset_at(last_node, guess) if last_node else origin
                    due_ns = (e.due_us - offset) * 1000
            cls = "timer" if e.status == "delivered" else CLASS_OF[e.status]
            at_ns = firings[0] if firings else (due_ns or 0)
            mark = Mark(e.due_us or 0, cls, e.late_us, e.skipped, len(e.attempts), e.why)
            occurrences.append(Occurrence(at_ns, due_ns, cls, e.skipped, firings, e.lost_claims, mark.lost, e))
        occurrences.sort(key=lambda o: o.at_ns)
        lanes.append(PeriodicLane(_KIND_OF[source], lane_label(group[0], hidden), nodes, hidden, tuple(occurrences)))
    return lanes
