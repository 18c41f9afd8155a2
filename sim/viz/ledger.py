"""The ledger view: per schedule, every occurrence the ledger classified, a mark coloured by its class.

One lane per periodic thing with due times (persisted schedule, node schedule, cluster cron;
an activation timer's firing has no due time, so timers are counted in the title, not drawn),
a mark at each occurrence's due time (the wall clock of its grid, so a schedule's marks are
evenly spaced unless a grid restarted). The class is told by colour *and* shape, so it reads in
grey too: on time a green dot, late an orange dot ringed, caught up a blue diamond labelled
"skipped N" (the N later occurrences it skipped are the red X's after it), repeated a purple
square labelled "×n" (fired n times), missed a red X, labelled "lost in flight" below (once per run of
neighbours, with their number) when it fired and its message died before its handler finished (a
crash, a fenced run, a failed handler). The legend counts each class.

The table is ``ledger_table`` (``sim.viz.data.ledger``, no matplotlib): ``sim.ledger.table``'s
rows, an HTML table in a notebook. Both read ``sim.ledger`` values only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from sim.ledger import Entry, ledger
from sim.trace import Trace
from sim.viz.data.ledger import CLASS_COLOURS, CLASSES, Mark, ledger_lanes, ledger_table
from sim.viz.data.timebase import time_unit
from sim.viz.draw import declutter, label, outside_legend
from sim.viz.palette import FONT, GREY, INK, SMALL

__all__ = ["ledger_chart", "ledger_table", "MARKERS"]

MARKERS: dict[str, dict[str, Any]] = {
    "on time": {"marker": "o", "s": 46},
    "late": {"marker": "o", "s": 60, "edgecolors": INK, "linewidths": 1.2},
    "caught up": {"marker": "D", "s": 62, "edgecolors": INK, "linewidths": 0.8},
    "repeated": {"marker": "s", "s": 62, "edgecolors": INK, "linewidths": 0.8},
    "missed": {"marker": "X", "s": 80, "edgecolors": "white", "linewidths": 0.6},
}
"""Each class's marker (with its colour from ``CLASS_COLOURS``): shape and colour both differ."""


def _runs_of_lost(marks: tuple[Mark, ...]) -> list[list[Mark]]:
    """The lane's lost occurrences grouped in runs of neighbours (no other mark between them)."""
    runs: list[list[Mark]] = []
    previous_lost = False
    for mark in marks:
        if mark.lost:
            if previous_lost:
                runs[-1].append(mark)
            else:
                runs.append([mark])
        previous_lost = mark.lost
    return runs


def ledger_chart(source: Trace | Iterable[Entry], *, ax: Axes | None = None, title: str | None = None) -> Figure:
    """The ledger chart (see the module docstring) of a trace (its ``sim.ledger.ledger``) or of entries; returns its figure."""
    entries = ledger(source) if isinstance(source, Trace) else list(source)
    lanes, timers = ledger_lanes(entries)
    own = ax is None
    if ax is None:
        fig = Figure(figsize=(11, 1.3 + 0.6 * max(len(lanes), 1)), layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.get_figure()  # type: ignore[assignment]
    dues = [m.due_us for lane in lanes for m in lane.marks]
    origin = min(dues, default=0)
    span_s = (max(dues, default=0) - origin) / 1e6
    unit = time_unit(span_s)
    counts: Counter[str] = Counter()
    labels = []
    for y, lane in enumerate(lanes):
        ax.axhline(y, color="#E4E4E4", lw=6, zorder=0, solid_capstyle="butt")
        by_class: dict[str, list[float]] = {}
        for mark in lane.marks:
            x = unit.x((mark.due_us - origin) * 1000)
            by_class.setdefault(mark.cls, []).append(x)
            counts[mark.cls] += 1
            if mark.cls == "caught up":
                labels.append(label(ax, x, y - 0.22, f"skipped {mark.skipped}", colour=CLASS_COLOURS["caught up"], weight="bold", down=False, va="bottom"))
            elif mark.cls == "repeated":
                labels.append(label(ax, x, y - 0.22, f"×{mark.firings}", colour=CLASS_COLOURS["repeated"], weight="bold", down=False, va="bottom"))
        for run in _runs_of_lost(lane.marks):  # one label per run of neighbouring lost occurrences
            x = unit.x((run[0].due_us - origin) * 1000)
            text = "lost in flight" + (f" ({len(run)})" if len(run) > 1 else "")
            labels.append(label(ax, x, y + 0.2, text, colour=CLASS_COLOURS["missed"], weight="bold", dx=-3))
        for cls in CLASSES:  # a fixed order, so the artists are the same for the same ledger
            if cls in by_class:
                xs = by_class[cls]
                ax.scatter(xs, [y] * len(xs), color=CLASS_COLOURS[cls], zorder=3, gid=f"{cls}|{lane.schedule}", **MARKERS[cls])
    ax.set_yticks(range(len(lanes)), [lane.title for lane in lanes], fontsize=SMALL + 0.5)
    ax.set_ylim(len(lanes) - 0.5, -0.8)
    width = unit.x(span_s * 1e9)
    ax.set_xlim(-0.03 * width - 1e-9, width * 1.04 + 1e-9)
    start = datetime.fromtimestamp(origin / 1e6, tz=timezone.utc).isoformat(timespec="milliseconds") if dues else "-"
    ax.set_xlabel(f"due time ({unit.name} after the first due, {start} on the schedules' wall clocks)", fontsize=SMALL + 0.5)
    ax.grid(axis="x", color="#EEEEEE", zorder=0)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    if not lanes:
        ax.text(0.5, 0.5, "no occurrence with a due time in this ledger", transform=ax.transAxes, ha="center", va="center", fontsize=FONT, color=GREY)
    if title is None:
        total = sum(counts.values())
        parts = ", ".join(f"{counts[c]} {c}" for c in CLASSES if counts[c])
        title = f"Occurrence ledger: {total} occurrences of {len(lanes)} schedule{'s' if len(lanes) != 1 else ''}" + (f": {parts}" if parts else "")
        if timers:
            title += f"\n{timers} activation timer firing{'s' if timers != 1 else ''} not drawn (a timer's firing has no due time)"
    ax.set_title(title, loc="left", fontsize=FONT + 1)
    handles = [
        Line2D([], [], ls="", color=CLASS_COLOURS[c], label=f"{c} ({counts[c]})", marker=MARKERS[c]["marker"], ms=8,
               mec=MARKERS[c].get("edgecolors", CLASS_COLOURS[c]), mew=MARKERS[c].get("linewidths", 1.0))
        for c in CLASSES
    ]
    ax.legend(handles=handles, fontsize=SMALL, borderaxespad=0, title="class (count)", title_fontsize=SMALL, **outside_legend(fig, own))
    declutter(fig, labels)
    return fig
