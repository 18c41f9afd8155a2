"""The ledger view's data: ``sim.ledger`` entries as a table (rows, an HTML table in a notebook) and as lanes.

No matplotlib here: a notebook shows the table (``_repr_html_``) without the charts' import,
and ``sim.viz.ledger`` draws the lanes. Everything comes from ``sim.ledger`` (its ``Entry``
values and ``table`` rows); nothing is read from the trace again, so the view cannot say
something the ledger does not.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, SupportsIndex, overload

from sim.ledger import Entry, table
from sim.trace import Trace
from sim.viz.data.timebase import end_ns
from sim.viz.palette import BLUE, GREEN, GREY, ORANGE, PURPLE, VERMILLION

__all__ = ["CLASSES", "CLASS_OF", "CLASS_COLOURS", "FAULT_KINDS", "Fault", "LedgerTable", "Lane", "Mark", "ledger_faults", "ledger_table", "ledger_lanes"]

CLASSES = ("on time", "late", "caught up", "repeated", "missed")
"""The classes a lane's marks are drawn in, in legend order."""

CLASS_OF = {"on-time": "on time", "late": "late", "caught-up": "caught up", "repeated": "repeated", "missed": "missed"}
"""The ledger's status -> the view's class (``delivered``, a timer's, has no due time and no lane)."""

CLASS_COLOURS = {"on time": GREEN, "late": ORANGE, "caught up": BLUE, "repeated": PURPLE, "missed": VERMILLION, "delivered": GREY}

_COLUMNS = ("source", "schedule", "due", "status", "late_s", "skipped", "firings", "claimed", "lost_claims", "why")


def _cell(value: Any) -> str:
    """A row's value as table text: a list joined, None empty, a float with 3 decimals."""
    return ", ".join(value) if isinstance(value, list) else "" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


class LedgerTable(list[dict[str, Any]]):
    """The ledger as plain rows (``sim.ledger.table``), one dict per occurrence; a notebook shows it as an HTML table.

    A slice (``ledger_table(entries)[:8]``) is a ``LedgerTable`` too, so the first rows still show as a table
    (a plain list's repr is a wall of dicts); ``repr`` is the same table in plain text, for a terminal.
    Equality, ``len``, indexing and iteration are the list's: the rows stay plain dicts for programs.
    """

    @overload
    def __getitem__(self, index: SupportsIndex) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> LedgerTable: ...

    def __getitem__(self, index: SupportsIndex | slice) -> dict[str, Any] | LedgerTable:
        if isinstance(index, slice):
            return LedgerTable(list.__getitem__(self, index))
        return list.__getitem__(self, index)

    def __repr__(self) -> str:
        """The rows as a plain-text table, one line each, columns aligned (``why`` last, not cut)."""
        if not self:
            return "LedgerTable: no occurrence"
        grid = [list(_COLUMNS)] + [[_cell(row.get(c)) for c in _COLUMNS] for row in self]
        widths = [max(len(line[i]) for line in grid) for i in range(len(_COLUMNS) - 1)]
        lines = ["  ".join([*(text.ljust(w) for text, w in zip(line, widths)), line[-1]]).rstrip() for line in grid]
        return "\n".join(lines)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """IPython's plain-text view (a terminal, a text-only export): the same table as ``repr``."""
        printer.text(repr(self))

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{c}</th>" for c in _COLUMNS)
        body = []
        for row in self:
            colour = CLASS_COLOURS.get(CLASS_OF.get(str(row["status"]), str(row["status"])), GREY)
            cells = []
            for c in _COLUMNS:
                text = _cell(row[c])
                # every column but ``why`` on one line: a due time or "on-time" broken in two reads as two rows
                style = f' style="color:{colour};font-weight:bold;white-space:nowrap"' if c == "status" else "" if c == "why" else ' style="white-space:nowrap"'
                cells.append(f"<td{style}>{html.escape(text)}</td>")
            body.append("<tr>" + "".join(cells) + "</tr>")
        return f'<table class="casty-ledger" style="font-size:12px;border-collapse:collapse"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def ledger_table(entries: Iterable[Entry]) -> LedgerTable:
    """The table view of ``entries``: ``sim.ledger.table``'s rows, shown as HTML in a notebook."""
    return LedgerTable(table(entries))


@dataclass(frozen=True, slots=True)
class Mark:
    """One occurrence on its lane: due (wall µs), class, how late (µs), how many later ones its firing skipped, firings."""

    due_us: int
    cls: str
    late_us: int
    skipped: int
    firings: int
    why: str

    @property
    def lost(self) -> bool:
        """A miss that fired and died before its handler finished (the ledger's "lost in flight", "its handler failed")."""
        return self.cls == "missed" and self.why.startswith(("lost in flight", "its handler failed", "lost before the mailbox"))


@dataclass(frozen=True, slots=True)
class Lane:
    """One schedule (``Entry.schedule``, with its source) and its occurrences in due order."""

    source: str
    schedule: str
    marks: tuple[Mark, ...]

    @property
    def title(self) -> str:
        """The lane's label: the schedule and its source, a long reference (a generated uuid) cut to 8 characters."""
        where, slash, name = self.schedule.rpartition("/")
        short = f"{name[:8]}…" if len(name) > 16 else name
        return f"{where}{slash}{short}  ({self.source})"


def ledger_lanes(entries: Iterable[Entry]) -> tuple[list[Lane], int]:
    """One lane per schedule with a due time, in first-seen order, and how many timer firings (no due time) were left out."""
    lanes: dict[tuple[str, str], list[Mark]] = {}
    timers = 0
    for e in entries:
        if e.due_us is None or e.status not in CLASS_OF:
            timers += 1
            continue
        lanes.setdefault((e.source, e.schedule), []).append(Mark(e.due_us, CLASS_OF[e.status], e.late_us, e.skipped, len(e.attempts), e.why))
    return [Lane(source, schedule, tuple(sorted(marks, key=lambda m: m.due_us))) for (source, schedule), marks in lanes.items()], timers


FAULT_KINDS = ("paused", "down", "clock forward", "clock back")
"""The faults drawn behind a ledger's marks, in drawing order."""


@dataclass(frozen=True, slots=True)
class Fault:
    """One fault of a node on the schedules' wall-clock axis: ``start_us`` .. ``end_us`` as that node's clock read them.

    ``paused`` and ``down`` span the node's clock at the pause (crash) and at the resume (restart), or
    the end of the trace if none; a clock step spans the wall times it jumped over (``clock forward``:
    before .. after, dues there come due at once) or that its clock reads twice (``clock back``:
    after .. before). ``closed`` is False for a span the trace ends inside.
    """

    kind: str
    node: str
    start_us: int
    end_us: int
    closed: bool = True

    @property
    def text(self) -> str:
        """The fault's label: node, kind and length (a step's signed size)."""
        seconds = (self.end_us - self.start_us) / 1e6
        if self.kind == "clock forward":
            return f"{self.node} clock +{seconds:g} s"
        if self.kind == "clock back":
            return f"{self.node} clock -{seconds:g} s"
        if self.kind == "dst gap":  # not a fault of a node: a day whose local time skips the job's wall time
            return f"{self.node}: DST gap, no occurrence"
        return f"{self.node} {self.kind}" + (f" {seconds:g} s" if self.closed else "")


def ledger_faults(trace: Trace, nodes: Iterable[str] | None = None) -> tuple[Fault, ...]:
    """The pauses, crashes (down spans) and clock steps of ``nodes`` (all if None), mapped to their node's wall clock.

    The ledger's x axis is due time on the schedules' wall clocks, so a fault is placed where its
    node's clock stood (each fault row carries it, ``wall_us``; a ``clock.step`` row is stamped after
    the jump, so the clock read ``wall_us - delta_us`` before it). A band then covers exactly the dues
    the fault reached: a student reads "these dues fell in the pause" without converting true time.
    """
    wanted = None if nodes is None else set(nodes)
    out: list[Fault] = []
    opened: dict[tuple[str, str], int] = {}
    opened_ns: dict[tuple[str, str], int] = {}
    for row in trace.rows:
        if wanted is not None and row.node not in wanted or row.wall_us is None:
            continue
        wall = row.wall_us
        if row.kind == "fault.pause":
            opened.setdefault((row.node, "paused"), wall)
            opened_ns.setdefault((row.node, "paused"), row.t_ns)
        elif row.kind == "fault.resume" and (row.node, "paused") in opened:
            out.append(Fault("paused", row.node, opened.pop((row.node, "paused")), wall))
        elif row.kind == "fault.crash":
            if (row.node, "paused") in opened:  # a crash ends a pause
                out.append(Fault("paused", row.node, opened.pop((row.node, "paused")), wall))
            opened.setdefault((row.node, "down"), wall)
            opened_ns.setdefault((row.node, "down"), row.t_ns)
        elif row.kind == "fault.restart" and (row.node, "down") in opened:
            out.append(Fault("down", row.node, opened.pop((row.node, "down")), wall))
        elif row.kind == "clock.step":
            before = wall - int(row.get("delta_us", 0) or 0)
            if wall > before:
                out.append(Fault("clock forward", row.node, before, wall))
            elif wall < before:
                out.append(Fault("clock back", row.node, wall, before))
    end = end_ns(trace)
    for (node, kind), start in opened.items():  # still open at the end: the clock ran on with true time
        out.append(Fault(kind, node, start, start + max(end - opened_ns[(node, kind)], 0) // 1000, False))
    return tuple(sorted(out, key=lambda f: (FAULT_KINDS.index(f.kind), f.start_us, f.node)))
