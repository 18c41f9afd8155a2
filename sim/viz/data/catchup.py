"""One schedule read from a trace: its rows, its nominal due grid, the re-arms that start a new grid (no matplotlib).

The catch-up chart (``sim.viz.catchup``) draws the grid against the deliveries; the grid is the
nominal ``first due + k * every`` (wall times, from ``schedule.armed``), one segment per re-arm
that leaves the old grid.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from sim.trace import Row, Trace
from sim.viz.data.keys import is_internal, key_label

__all__ = ["ScheduleRows", "schedule_rows", "select_schedule", "grid_segments", "grid_dues", "MAX_GRID_POINTS"]

MAX_GRID_POINTS = 20_000  # beyond this the grid is not even listed


def select_schedule(trace: Trace, actor: str | None, key: str | None, schedule: str | None) -> tuple[list[Row], tuple[str, str, str]]:
    """The schedule rows of one (actor, key, name): the first fired one matching the filters, else the first row."""

    def matches(row: Row) -> bool:
        return (
            (actor is None or row.get("actor") == actor)
            and (key is None or str(row.get("key")) == str(key))
            and (schedule is None or row.get("name") == schedule)
        )

    rows = [r for r in trace.of("schedule.") if matches(r)]
    if actor is None and key is None and any(not is_internal(r.get("actor")) for r in rows):
        rows = [r for r in rows if not is_internal(r.get("actor"))]  # the runtime's own keys (cron claims) only by name
    if not rows:
        wanted = ", ".join(f"{n}={v!r}" for n, v in (("actor", actor), ("key", key), ("schedule", schedule)) if v is not None)
        known = sorted({f"{key_label(r.get('actor'), r.get('key'))} {r.get('name')!r}" for r in trace.of("schedule.")})
        if not known:
            raise ValueError(f"no schedule rows in this trace ({len(trace)} rows): nothing to chart")
        raise ValueError(f"no schedule rows for {wanted}; schedules in this trace: {', '.join(known[:10])}")
    first = next((r for r in rows if r.kind == "schedule.fired"), rows[0])
    ident = (str(first.get("actor")), str(first.get("key")), str(first.get("name")))
    return [r for r in rows if (str(r.get("actor")), str(r.get("key")), str(r.get("name"))) == ident], ident


def grid_segments(armed: Sequence[Row], fired: Sequence[Row], caught: Sequence[Row]) -> list[tuple[int, int | None, int | None]]:
    """(first due µs, every µs or None, wall µs when armed or None) of each grid; a new one starts when a re-arm leaves the old grid."""
    segments: list[tuple[int, int | None, int | None]] = []
    for row in armed:
        due, every = int(row.get("due_us")), row.get("every_us")
        every = int(every) if every else None
        if segments:
            origin, step, _ = segments[-1]
            if every is not None and step == every and (due - origin) % every == 0:
                continue
            if every is None and step is None and due == origin:
                continue
        segments.append((due, every, row.wall_us))
    if not segments and fired:  # a partial trace without its armed rows: infer from the firings
        skipped = {(int(r.get("due_us")), int(r.get("now_us"))): int(r.get("skipped")) for r in caught}
        first = fired[0]
        every = None
        for row in fired:
            if row.get("next_us") is not None:
                n = skipped.get((int(row.get("due_us")), int(row.get("now_us"))), 0)
                every = (int(row.get("next_us")) - int(row.get("due_us"))) // (n + 1)
                break
        segments.append((int(first.get("due_us")), every, None))
    return segments


def grid_dues(segments: list[tuple[int, int | None, int | None]], end_us: int) -> tuple[list[int], int]:
    """Grid due times (µs) up to ``end_us``, and the count if it was too many to list.

    A grid ends where the next one begins, or where it was replaced if that came first: a due the
    replacement removed (armed at 32 s, old grid's next due 35 s, new first due 36 s) is not drawn.
    """
    out: list[int] = []
    total = 0
    for i, (origin, every, _) in enumerate(segments):
        stop = end_us
        if i + 1 < len(segments):
            following, _, replaced_at = segments[i + 1]
            stop = min(following, replaced_at if replaced_at is not None else following) - 1
        if every is None:
            if origin <= max(stop, origin):
                out.append(origin)
                total += 1
            continue
        count = max(0, (stop - origin) // every + 1)
        total += count
        if total <= MAX_GRID_POINTS:
            out.extend(origin + k * every for k in range(count))
    return (out, total) if total <= MAX_GRID_POINTS else ([], total)


@dataclass(frozen=True, slots=True)
class ScheduleRows:
    """One schedule's rows (``ident`` = actor, key, name), by kind and each in trace order, and what the chart counts of them."""

    ident: tuple[str, str, str]
    rows: tuple[Row, ...]  # every schedule.* row of the schedule
    fired: tuple[Row, ...]
    caught: tuple[Row, ...]  # schedule.caught_up: a late firing and the ``skipped`` grid times it stood for
    armed: tuple[Row, ...]
    cancelled: tuple[Row, ...]
    nodes: tuple[str, ...]  # the nodes that recorded its rows, in order of first row: the chart's rows
    first: tuple[Row, ...]  # the firings of a due time for the first time
    repeats: tuple[Row, ...]  # a due time fired again (a crash or an ownership change)

    @property
    def skipped(self) -> int:
        """The grid times the late firings skipped, in all."""
        return sum(int(r.get("skipped", 0)) for r in self.caught)


def schedule_rows(trace: Trace, actor: str | None, key: str | None, schedule: str | None) -> ScheduleRows:
    """The rows of the schedule ``select_schedule`` picks, sorted (``ValueError`` naming the schedules there are when none matches)."""
    rows, ident = select_schedule(trace, actor, key, schedule)
    fired = [r for r in rows if r.kind == "schedule.fired"]
    seen: Counter[int] = Counter()
    first: list[Row] = []
    repeats: list[Row] = []
    for row in fired:
        due = int(row.get("due_us"))
        (repeats if seen[due] else first).append(row)
        seen[due] += 1
    return ScheduleRows(
        ident=ident,
        rows=tuple(rows),
        fired=tuple(fired),
        caught=tuple(r for r in rows if r.kind == "schedule.caught_up"),
        armed=tuple(r for r in rows if r.kind == "schedule.armed"),
        cancelled=tuple(r for r in rows if r.kind == "schedule.cancelled"),
        nodes=tuple(dict.fromkeys(r.node for r in rows)),
        first=tuple(first),
        repeats=tuple(repeats),
    )
