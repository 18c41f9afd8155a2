"""Ownership read from a trace: who held one key's owner epoch, on which node, when, and the story in words (no matplotlib).

An **epoch span** opens at the node's ``epoch.acquired`` row of the key and closes at the first of:
that node's ``activation.ended`` of the key, its crash, its next ``epoch.acquired`` of the key, the
end of the trace. Once another node acquires a newer epoch of the key, the rest of the span is
*stale* (``superseded_ns``): the node still runs the key, but the replicas have promised a newer
epoch, so its writes are refused (fenced).

The ownership chart (``sim.viz.ownership``) draws these spans, the explorer's frames read them
(``sim.viz.data.frames``), and the notebooks' checks assert on them: one extraction for all three.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sim.trace import Row, Trace
from sim.viz.data.cuts import spells
from sim.viz.data.keys import is_internal, key_label
from sim.viz.data.timebase import TimeUnit, end_ns

__all__ = [
    "EpochSpan", "epoch_spans", "select_key", "handoff_rounds", "cluster_nodes", "SAID_ENDS", "end_words", "ownership_story",
    "KeyMarks", "key_marks", "STATE_PAGE",
]

STATE_PAGE = "state"
"""The page of a key's own state: a confirmed write that holds it is a state write, one without it a next-due write."""


@dataclass(frozen=True, slots=True)
class EpochSpan:
    """One node's hold of the key's owner epoch: ``superseded_ns`` is when another node took a newer one (or None)."""

    node: str
    epoch_round: int
    incarnation: int
    start_ns: int
    end_ns: int
    superseded_ns: int | None
    found: int
    ended_by: str  # the activation's end reason, "crash", "re-acquired", "end of trace"

    @property
    def name(self) -> str:
        return f"({self.epoch_round}, {self.node}#{self.incarnation})"


def _actor_matches(row_actor: Any, wanted: str | None) -> bool:
    if wanted is None:
        return True
    text = str(row_actor)
    return text == wanted or text.split(":")[-1] == wanted


def select_key(trace: Trace, actor: str | None, key: str | None) -> tuple[str, str]:
    """The (actor, key) to draw: the one asked for, else the user's key (not the runtime's own) whose ownership changed most."""
    acquired = [r for r in trace.of("epoch.acquired") if _actor_matches(r.get("actor"), actor) and (key is None or str(r.get("key")) == key)]
    if actor is None and key is None and any(not is_internal(r.get("actor")) for r in acquired):
        acquired = [r for r in acquired if not is_internal(r.get("actor"))]
    if not acquired:
        known = sorted({key_label(r.get("actor"), r.get("key")) for r in trace.of("epoch.acquired")})
        wanted = f"actor={actor!r} key={key!r}" if actor or key else "any key"
        raise ValueError(f"no epoch.acquired row for {wanted} in this trace; keys with an owner epoch: {', '.join(known) or 'none'}")
    counts: Counter[tuple[str, str]] = Counter((str(r.get("actor")), str(r.get("key"))) for r in acquired)
    fired: Counter[tuple[str, str]] = Counter((str(r.get("actor")), str(r.get("key"))) for r in trace.of("schedule.fired"))
    order = {e: i for i, e in enumerate(dict.fromkeys((str(r.get("actor")), str(r.get("key"))) for r in acquired))}
    return max(counts, key=lambda e: (counts[e], fired[e], -order[e]))


def _incarnations(trace: Trace) -> dict[str, list[tuple[int, int]]]:
    """Per node, [(t_ns, incarnation)] from ``node.started`` rows: which life of the node a row belongs to."""
    out: dict[str, list[tuple[int, int]]] = {}
    for row in trace.of("node.started"):
        out.setdefault(row.node, []).append((row.t_ns, int(row.get("incarnation", 1) or 1)))
    return out


def _life_at(lives: dict[str, list[tuple[int, int]]], node: str, t_ns: int) -> int:
    current = 1
    for t, incarnation in lives.get(node, ()):
        if t <= t_ns:
            current = incarnation
    return current


def epoch_spans(trace: Trace, actor: str, key: str) -> list[EpochSpan]:
    """Every hold of the key's owner epoch, in the order they were acquired (see the module docstring)."""
    rows = [r for r in trace.rows if str(r.get("key")) == key and str(r.get("actor")) == actor
            and r.kind in ("epoch.acquired", "activation.ended")]
    crashes = trace.of("fault.crash")
    lives = _incarnations(trace)
    last = end_ns(trace)
    acquired = [r for r in rows if r.kind == "epoch.acquired"]
    spans: list[EpochSpan] = []
    for row in acquired:
        ends: list[tuple[int, str]] = [(last, "end of trace")]
        ended = next((r for r in rows if r.kind == "activation.ended" and r.node == row.node and r.seq > row.seq), None)
        if ended is not None:
            ends.append((ended.t_ns, str(ended.get("reason", "ended"))))
        crash = next((r for r in crashes if r.node == row.node and r.seq > row.seq), None)
        if crash is not None:
            ends.append((crash.t_ns, "crash"))
        again = next((r for r in acquired if r.node == row.node and r.seq > row.seq), None)
        if again is not None:
            ends.append((again.t_ns, "re-acquired"))
        end, how = min(ends, key=lambda e: e[0])
        newer = next((r for r in acquired if r.node != row.node and r.seq > row.seq), None)
        superseded = newer.t_ns if newer is not None and newer.t_ns < end else None
        spans.append(EpochSpan(row.node, int(row.get("epoch_round", 0) or 0), _life_at(lives, row.node, row.t_ns),
                               row.t_ns, end, superseded, int(row.get("found", 0) or 0), how))
    return spans


def handoff_rounds(trace: Trace) -> dict[str, list[tuple[int, int]]]:
    """Per node, (start, end) of each handoff round: ended by its ``handoff.ended``, the node's next round, a crash, or the end."""
    out: dict[str, list[tuple[int, int]]] = {}
    open_: dict[str, dict[Any, int]] = {}
    last = end_ns(trace)
    for row in trace.rows:
        if row.kind == "handoff.started":
            rounds = open_.setdefault(row.node, {})
            for started in rounds.values():  # a new round replaces the ones still open
                out.setdefault(row.node, []).append((started, row.t_ns))
            rounds.clear()
            rounds[row.get("round")] = row.t_ns
        elif row.kind == "handoff.ended":
            started_at = open_.get(row.node, {}).pop(row.get("round"), None)
            if started_at is not None:
                out.setdefault(row.node, []).append((started_at, row.t_ns))
        elif row.kind == "fault.crash":
            for started in open_.pop(row.node, {}).values():
                out.setdefault(row.node, []).append((started, row.t_ns))
    for node, rounds in open_.items():
        for started in rounds.values():
            out.setdefault(node, []).append((started, last))
    return out


def cluster_nodes(trace: Trace) -> list[str]:
    """The nodes (not the world's own rows such as notes): those that started, else every node with a non-note row."""
    started = list(dict.fromkeys(r.node for r in trace.of("node.started")))
    if started:
        return started
    return list(dict.fromkeys(r.node for r in trace.rows if r.kind != "note"))


def _at(unit: TimeUnit, t_ns: int) -> str:
    value = unit.x(t_ns)
    return f"{value:.1f} {unit.name}" if value < 100 else f"{value:.0f} {unit.name}"


# an epoch span's end that no other mark shows (a crash has its line): written where the run ended, and in the title
SAID_ENDS = {"lost": "lost: stepped down", "handoff": "handed off", "idle": "idle", "released": "released",
             "stopped": "node stopped", "failed": "failed"}


def end_words(span: EpochSpan, fenced: Sequence[Row]) -> str:
    """Why the span's run ended, in words: a run lost right after one of its writes was fenced was fenced, else it stepped down."""
    if span.ended_by == "lost" and any(r.node == span.node and span.start_ns <= r.t_ns <= span.end_ns for r in fenced):
        return "lost: fenced"
    return SAID_ENDS[span.ended_by]


def ownership_story(trace: Trace, spans: list[EpochSpan], unit: TimeUnit, fenced_rows: Sequence[Row], repeats: int) -> str:
    """What happened to the key's ownership, in a few clauses."""
    if not spans:
        return "no owner epoch"
    first = spans[0]
    clauses = [f"{first.node} took epoch {first.name} at {_at(unit, first.start_ns)}"]
    crashes = trace.of("fault.crash")
    parts = spells(trace)
    shown = 1
    for before, span in zip(spans, spans[1:]):
        if shown >= 3:
            clauses.append(f"... {len(spans) - shown} more epoch(s)")
            break
        why = ""
        crash = next((c for c in crashes if c.node == before.node and before.start_ns <= c.t_ns <= span.start_ns), None)
        cut = next((p for p in parts if before.start_ns <= p.start_ns <= span.start_ns and before.node in (*p.sides[0], *p.sides[1])), None)
        everyone = {c.node for c in crashes if before.start_ns <= c.t_ns <= span.start_ns}
        if crash is not None and len(everyone) > 1 and len(everyone) >= len(cluster_nodes(trace)):
            why = f"every node crashed at {_at(unit, crash.t_ns)}; "
        elif crash is not None:
            why = f"owner {before.node} crashed at {_at(unit, crash.t_ns)}; "
        elif cut is not None and span.node != before.node:
            why = f"owner {before.node} cut off at {_at(unit, cut.start_ns)}; "
        if crash is None and before.ended_by in SAID_ENDS and before.end_ns <= span.start_ns:  # the gap between the two, said
            why += f"{before.node}'s run ended ({end_words(before, fenced_rows)}) at {_at(unit, before.end_ns)}; "
        found = "" if span.found else " from nothing"
        clauses.append(f"{why}{span.node} took {span.name} at {_at(unit, span.start_ns)}{found}")
        shown += 1
    story = "; ".join(clauses)
    extras = []
    fenced = len(fenced_rows)
    if fenced:
        extras.append(f"{fenced} write{'s' if fenced != 1 else ''} fenced")
    if repeats:
        extras.append(f"{repeats} firing{'s' if repeats != 1 else ''} repeated")
    return story + (f"\n{', '.join(extras)}" if extras else "")

# the chart


@dataclass(frozen=True, slots=True)
class KeyMarks:
    """The rows of one key the ownership chart marks on its lanes, sorted by what each mark says (each in trace order)."""

    state_writes: tuple[Row, ...]  # write.confirmed holding the state page (a black tick)
    due_writes: tuple[Row, ...]  # write.confirmed of the other pages only: the next-due write (a blue tick)
    fenced: tuple[Row, ...]  # write.failed with reason "fenced": refused, a newer epoch exists
    other_failed: tuple[Row, ...]  # any other write.failed: no quorum answered in time
    first_fired: tuple[Row, ...]  # schedule.fired, the first firing of its due time
    repeated: tuple[Row, ...]  # schedule.fired of a due time fired before: a repeat (usually on the next owner)
    caught: tuple[Row, ...]  # schedule.caught_up: a late firing and the occurrences it skipped
    dropped: tuple[Row, ...]  # message.dropped: messages to the key never handled

    @property
    def fired(self) -> int:
        """Every firing, first or repeated."""
        return len(self.first_fired) + len(self.repeated)


def key_marks(trace: Trace, actor: str, key: str, nodes: Iterable[str]) -> KeyMarks:
    """The rows of ``actor``/``key`` recorded on ``nodes`` (the chart's lanes), sorted into ``KeyMarks``."""
    lanes = set(nodes)
    mine = [r for r in trace.rows if str(r.get("key")) == key and str(r.get("actor")) == actor and r.node in lanes]
    confirmed = [r for r in mine if r.kind == "write.confirmed"]
    failed = [r for r in mine if r.kind == "write.failed"]
    seen: Counter[Any] = Counter()
    first_fired: list[Row] = []
    repeated: list[Row] = []
    for r in mine:
        if r.kind == "schedule.fired":
            (repeated if seen[r.get("due_us")] else first_fired).append(r)
            seen[r.get("due_us")] += 1
    return KeyMarks(
        state_writes=tuple(r for r in confirmed if STATE_PAGE in (r.get("pages") or ())),
        due_writes=tuple(r for r in confirmed if STATE_PAGE not in (r.get("pages") or ())),
        fenced=tuple(r for r in failed if r.get("reason") == "fenced"),
        other_failed=tuple(r for r in failed if r.get("reason") != "fenced"),
        first_fired=tuple(first_fired),
        repeated=tuple(repeated),
        caught=tuple(r for r in mine if r.kind == "schedule.caught_up"),
        dropped=tuple(r for r in mine if r.kind == "message.dropped"),
    )
