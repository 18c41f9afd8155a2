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
from typing import Any

from sim.ledger import Entry, table
from sim.viz.palette import BLUE, GREEN, GREY, ORANGE, PURPLE, VERMILLION

__all__ = ["CLASSES", "CLASS_OF", "CLASS_COLOURS", "LedgerTable", "Lane", "Mark", "ledger_table", "ledger_lanes"]

CLASSES = ("on time", "late", "caught up", "repeated", "missed")
"""The classes a lane's marks are drawn in, in legend order."""

CLASS_OF = {"on-time": "on time", "late": "late", "caught-up": "caught up", "repeated": "repeated", "missed": "missed"}
"""The ledger's status -> the view's class (``delivered``, a timer's, has no due time and no lane)."""

CLASS_COLOURS = {"on time": GREEN, "late": ORANGE, "caught up": BLUE, "repeated": PURPLE, "missed": VERMILLION, "delivered": GREY}

_COLUMNS = ("source", "schedule", "due", "status", "late_s", "skipped", "firings", "claimed", "lost_claims", "why")


class LedgerTable(list[dict[str, Any]]):
    """The ledger as plain rows (``sim.ledger.table``), one dict per occurrence; a notebook shows it as an HTML table."""

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{c}</th>" for c in _COLUMNS)
        body = []
        for row in self:
            colour = CLASS_COLOURS.get(CLASS_OF.get(str(row["status"]), str(row["status"])), GREY)
            cells = []
            for c in _COLUMNS:
                value = row[c]
                text = ", ".join(value) if isinstance(value, list) else "" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)
                style = f' style="color:{colour};font-weight:bold"' if c == "status" else ""
                cells.append(f"<td{style}>{html.escape(text)}</td>")
            body.append("<tr>" + "".join(cells) + "</tr>")
        return f'<table class="casty-ledger"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


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
