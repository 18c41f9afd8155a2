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

The x axis is one time base with the course's other charts: seconds since the run's start (the
wall clock's reading at true time 0), so a due at 40 s sits at 40 and a fault "at 35 s" at 35.
Charts stacked in one figure pass the same ``until_s`` and ``unit`` and share the axis, labelled once.

The table is ``ledger_table`` (``sim.viz.data.ledger``, no matplotlib): ``sim.ledger.table``'s
rows, an HTML table in a notebook. Both read ``sim.ledger`` values only.

The faults of the run (``sim.viz.data.ledger.ledger_faults``: pauses, crashes, clock steps) are
bands behind the marks, on the same axis: each at the wall times its node's clock read, not at
true time. The question a student asks of a ledger is "which dues did this fault hit?", and a band
on the due axis answers it at a glance: the pause band covers the dues that passed while nothing
ran, a forward step's band the dues its clock jumped over, a backward step's band the dues its
clock reads twice (none of which may fire twice). A true-time strip would make the reader convert
between two clocks that disagree exactly where it matters. Grey hatched: paused; red: down (crash
to restart); yellow: clock forward; sky blue: clock back; each labelled with its node and size.
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
from sim.viz.data.ledger import CLASS_COLOURS, CLASSES, Fault, Mark, ledger_faults, ledger_lanes, ledger_table
from sim.viz.data.timebase import TimeUnit, WallMap, time_unit
from sim.viz.draw import declutter, label, outside_legend
from sim.viz.palette import FONT, GREY, INK, LIGHT_GREY, PURPLE, SKY, SMALL, VERMILLION, YELLOW

__all__ = ["ledger_chart", "ledger_table", "MARKERS"]

MARKERS: dict[str, dict[str, Any]] = {
    "on time": {"marker": "o", "s": 46},
    "late": {"marker": "o", "s": 60, "edgecolors": INK, "linewidths": 1.2},
    "caught up": {"marker": "D", "s": 62, "edgecolors": INK, "linewidths": 0.8},
    "repeated": {"marker": "s", "s": 62, "edgecolors": INK, "linewidths": 0.8},
    "missed": {"marker": "X", "s": 80, "edgecolors": "white", "linewidths": 0.6},
}
"""Each class's marker (with its colour from ``CLASS_COLOURS``): shape and colour both differ."""

FAULT_STYLES: dict[str, dict[str, Any]] = {
    "paused": {"facecolor": LIGHT_GREY, "alpha": 0.55, "hatch": "//", "edgecolor": GREY, "linewidth": 0},
    "down": {"facecolor": VERMILLION, "alpha": 0.14, "edgecolor": VERMILLION, "linewidth": 0},
    "clock forward": {"facecolor": YELLOW, "alpha": 0.35, "edgecolor": INK, "linewidth": 0},
    "clock back": {"facecolor": SKY, "alpha": 0.25, "edgecolor": INK, "linewidth": 0},
    "dst gap": {"facecolor": PURPLE, "alpha": 0.18, "edgecolor": INK, "linewidth": 0},  # a zone's missing hour's day (the caller builds it)
}
"""Each fault kind's band (drawn behind the lanes and marks)."""


def _draw_faults(ax: Axes, faults: Iterable[Fault], origin: int, x_of: Any) -> int:
    """A band per fault from its start to its end on the due axis, labelled at the top; returns how many label rows it used."""
    label_ends: list[float] = []  # per label row, where its last label ends (x): overlapping bands' labels stack
    for fault in faults:
        x0, x1 = x_of(fault.start_us - origin), x_of(fault.end_us - origin)
        ax.axvspan(x0, x1, zorder=0.5, gid=f"fault|{fault.kind}|{fault.node}", **FAULT_STYLES[fault.kind])
        row = next((i for i, end in enumerate(label_ends) if end <= x0), len(label_ends))
        if row == len(label_ends):
            label_ends.append(x0)
        label_ends[row] = max(x1, x0)
        ax.text(x0, -0.72 - 0.34 * row, " " + fault.text, fontsize=SMALL - 0.5, color=INK, ha="left", va="top", zorder=4, clip_on=True, gid=f"fault-label|{fault.kind}|{fault.node}")
    return len(label_ends)


_UNITS = {"s": TimeUnit("s", 1.0), "min": TimeUnit("min", 60.0), "h": TimeUnit("h", 3600.0), "d": TimeUnit("d", 86400.0)}


def _shared_above(ax: Axes) -> bool:
    """True for an Axes that shares its x axis with one in a lower row (``subplots(sharex=True)``): the bottom one labels it."""
    spec = ax.get_subplotspec()
    siblings = ax.get_shared_x_axes().get_siblings(ax)
    return spec is not None and len(siblings) > 1 and any(
        (other.get_subplotspec() is not None and other.get_subplotspec().rowspan.start > spec.rowspan.start) for other in siblings
    )


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


def ledger_chart(
    source: Trace | Iterable[Entry],
    *,
    ax: Axes | None = None,
    title: str | None = None,
    faults: Trace | Iterable[Fault] | None = None,
    start_us: int | None = None,
    until_s: float | None = None,
    unit: str | None = None,
) -> Figure:
    """The ledger chart (see the module docstring) of a trace (its ``sim.ledger.ledger``) or of entries; returns its figure.

    ``faults``: the bands drawn behind the marks, a trace (its ``ledger_faults``) or ``Fault`` values;
    by default those of ``source`` when it is a trace, none for entries (they carry no fault rows).

    The x axis is the due time in seconds (or ``unit``) since the run's start, the wall clock's reading
    at true time 0: ``start_us`` (e.g. ``world.epoch_us``), else that of the trace given as ``source`` or
    ``faults`` (``WallMap``'s reference clock, as the other charts), else the first due. So a due at
    40 s of the run is drawn at 40, where a fault "at 35 s" is drawn at 35. ``until_s`` (the axis's right
    end) and ``unit`` (``"s"``, ``"min"``, ``"h"``, ``"d"``) let the charts of one figure share one scale;
    on an Axes sharing its x axis with one below it, the axis label is left to the bottom one.
    """
    entries = ledger(source) if isinstance(source, Trace) else list(source)
    if faults is None and isinstance(source, Trace):
        faults = source
    if start_us is None:
        given = source if isinstance(source, Trace) else faults if isinstance(faults, Trace) else None
        start_us = WallMap(given).origin_us if given is not None else None
    if unit is not None and unit not in _UNITS:
        raise ValueError(f"unit must be one of {', '.join(_UNITS)}, got {unit!r}")
    fault_list = ledger_faults(faults) if isinstance(faults, Trace) else tuple(faults or ())
    lanes, timers = ledger_lanes(entries)
    own = ax is None
    if ax is None:
        fig = Figure(figsize=(11, 1.3 + 0.6 * max(len(lanes), 1) + (0.5 if fault_list else 0.0)), layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.get_figure()  # type: ignore[assignment]
    dues = [m.due_us for lane in lanes for m in lane.marks]
    since_start = start_us is not None
    origin = start_us if start_us is not None else min(dues, default=0)
    low_s = min(0.0, (min(dues, default=origin) - origin) / 1e6)
    span_s = until_s if until_s is not None else (max(dues, default=origin) - origin) / 1e6
    scale = _UNITS[unit] if unit is not None else time_unit(span_s - low_s)
    label_rows = _draw_faults(ax, fault_list, origin, lambda us: scale.x(us * 1000))
    counts: Counter[str] = Counter()
    labels = []
    for y, lane in enumerate(lanes):
        ax.axhline(y, color="#E4E4E4", lw=6, zorder=0, solid_capstyle="butt")
        by_class: dict[str, list[float]] = {}
        for mark in lane.marks:
            x = scale.x((mark.due_us - origin) * 1000)
            by_class.setdefault(mark.cls, []).append(x)
            counts[mark.cls] += 1
            if mark.cls == "caught up":
                labels.append(label(ax, x, y - 0.22, f"skipped {mark.skipped}", colour=CLASS_COLOURS["caught up"], weight="bold", down=False, va="bottom"))
            elif mark.cls == "repeated":
                labels.append(label(ax, x, y - 0.22, f"×{mark.firings}", colour=CLASS_COLOURS["repeated"], weight="bold", down=False, va="bottom"))
        for run in _runs_of_lost(lane.marks):  # one label per run of neighbouring lost occurrences
            x = scale.x((run[0].due_us - origin) * 1000)
            text = "lost in flight" + (f" ({len(run)})" if len(run) > 1 else "")
            labels.append(label(ax, x, y + 0.2, text, colour=CLASS_COLOURS["missed"], weight="bold", dx=-3))
        for cls in CLASSES:  # a fixed order, so the artists are the same for the same ledger
            if cls in by_class:
                xs = by_class[cls]
                ax.scatter(xs, [y] * len(xs), color=CLASS_COLOURS[cls], zorder=3, gid=f"{cls}|{lane.schedule}", **MARKERS[cls])
    ax.set_yticks(range(len(lanes)), [lane.title for lane in lanes], fontsize=SMALL + 0.5)
    ax.set_ylim(len(lanes) - 0.5, -0.8 - 0.34 * label_rows)
    left, width = scale.x(low_s * 1e9), scale.x(span_s * 1e9)
    pad = 0.03 * (width - left)
    ax.set_xlim(left - pad - 1e-9, width + 1.33 * pad + 1e-9)
    start = datetime.fromtimestamp(origin / 1e6, tz=timezone.utc).isoformat(timespec="milliseconds") if dues or since_start else "-"
    if since_start:
        xlabel = f"due time on the schedules' wall clocks ({scale.name} since the run's start, true time 0 = {start})"
    else:
        xlabel = f"due time ({scale.name} after the first due, {start} on the schedules' wall clocks)"
    if not _shared_above(ax):
        ax.set_xlabel(xlabel, fontsize=SMALL + 0.5)
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
