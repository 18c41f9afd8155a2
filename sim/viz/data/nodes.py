"""Faults per node, read from a trace: crashes, down spans, restarts, pauses and clock steps (no matplotlib).

Every view that draws node lanes (the activation timeline, the ownership chart, the ticks chart,
the space-time diagram) draws these, so a crash is the same instant everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sim.trace import Trace
from sim.viz.data.timebase import end_ns

__all__ = ["Span", "NodeEvents", "node_events"]


@dataclass(frozen=True, slots=True)
class Span:
    start_ns: int
    end_ns: int
    closed: bool  # False: still open at the end of the trace


@dataclass(slots=True)
class NodeEvents:
    """World rows of one node, as spans and instants (true time, ns)."""

    down: list[Span] = field(default_factory=list)  # fault.crash .. fault.restart
    paused: list[Span] = field(default_factory=list)  # fault.pause .. fault.resume (or crash)
    crashes: list[int] = field(default_factory=list)
    restarts: list[tuple[int, Any]] = field(default_factory=list)  # (t_ns, incarnation)
    steps: list[tuple[int, int, int]] = field(default_factory=list)  # (t_ns, seq, delta_us)


def node_events(trace: Trace) -> dict[str, NodeEvents]:
    """Crashes, restarts, pauses and clock steps per node; spans left open close at the end of the trace."""
    out: dict[str, NodeEvents] = {}
    crashed_at: dict[str, int] = {}
    paused_at: dict[str, int] = {}
    for row in trace.rows:
        if not (row.kind.startswith("fault.") or row.kind == "clock.step"):
            continue
        ev = out.setdefault(row.node, NodeEvents())
        if row.kind == "fault.crash":
            ev.crashes.append(row.t_ns)
            crashed_at.setdefault(row.node, row.t_ns)
            if row.node in paused_at:  # a crash ends a pause
                ev.paused.append(Span(paused_at.pop(row.node), row.t_ns, True))
        elif row.kind == "fault.restart":
            ev.restarts.append((row.t_ns, row.get("incarnation")))
            if row.node in crashed_at:
                ev.down.append(Span(crashed_at.pop(row.node), row.t_ns, True))
        elif row.kind == "fault.pause":
            paused_at.setdefault(row.node, row.t_ns)
        elif row.kind == "fault.resume":
            if row.node in paused_at:
                ev.paused.append(Span(paused_at.pop(row.node), row.t_ns, True))
        elif row.kind == "clock.step":
            ev.steps.append((row.t_ns, row.seq, int(row.get("delta_us", 0) or 0)))
    end = end_ns(trace)
    for node, start in crashed_at.items():
        out[node].down.append(Span(start, end, False))
    for node, start in paused_at.items():
        out[node].paused.append(Span(start, end, False))
    return out
