"""The world's ``note`` rows as plain values (no matplotlib): what the charts number along their time axis.

A scenario writes a note (``world.note(text)``) where something worth a word happens; the activation
timeline and the catch-up chart number them along the top or the bottom of their axes and list them
under the figure (``sim.viz.draw.add_notes``), and size their footer by how many there are.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.trace import Trace

__all__ = ["Note", "note_rows"]


@dataclass(frozen=True, slots=True)
class Note:
    """One note: when it was written (true time) and its text (empty when the row has none)."""

    t_ns: int
    text: str


def note_rows(trace: Trace) -> tuple[Note, ...]:
    """Every ``note`` row of ``trace``, in trace order."""
    return tuple(Note(row.t_ns, str(row.get("text", ""))) for row in trace.of("note"))
