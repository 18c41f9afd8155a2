"""Clock offsets: how far each node's wall clock is from true time, over the run, with its steps and drift.

Every trace row carries the true time (``t_ns``) and the wall clock of the node that recorded
it (``wall_us``), so the offset ``wall - (start + t)`` of a node is known at each of its rows
with no model of the clock at all. One line per node, true time on x, the offset on y (ms when
every offset stays under 2 s, seconds otherwise); nodes whose lines would lie on each other share
one line named for all of them (``n2, n3``), and a line that agrees with another for part of the
run only is dashed:

* a flat line away from zero is a **skewed** clock (a constant offset, as ``add_node(offset=)``
  gives);
* a vertical jump is a **step** (``clock.step``, as NTP does): marked with a triangle and the
  amount (``n3 -90 s``); a step back is the one schedules must survive without firing early;
* a slope is **drift** (``clock.drift`` sets ``ppm``: 1000 ppm is 1 ms gained per second), noted
  where it starts.

Why offsets and not wall time against true time: the clocks that matter differ by
milliseconds to minutes over runs of seconds to days, and only a difference shows both.

The offsets come from ``sim.viz.data.clocks``; this module only draws them.
"""

from __future__ import annotations

from datetime import datetime

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.transforms import blended_transform_factory, offset_copy

from sim.trace import Trace
from sim.viz.data.clocks import agreement, clock_drifts, clock_offsets, clock_steps, coincident_groups, offset_at
from sim.viz.data.timebase import time_unit
from sim.viz.palette import BLUE, GREEN, INK, ORANGE, PURPLE, SKY, VERMILLION
from sim.world import DEFAULT_START

__all__ = ["clock_chart"]

_COLOURS = (BLUE, ORANGE, GREEN, PURPLE, SKY, VERMILLION, INK)


def clock_chart(
    trace: Trace,
    *,
    ax: Axes | None = None,
    title: str | None = None,
    start: datetime = DEFAULT_START,
    nodes: list[str] | None = None,
) -> Figure:
    """The clock-offsets chart (see the module docstring); returns the figure it drew on.

    Nodes whose lines would lie on each other (the same offset, to within a fraction of a pixel)
    are drawn as one line named for all of them (``n2, n3``): drawn apart, the last one hides the
    others. A line that agrees with an earlier one for part of the run only is dashed, so the one
    under it shows through. The end labels (and ``true time``) are spread apart so none overlaps.
    """
    offsets = clock_offsets(trace, start=start)
    names = nodes if nodes is not None else [n for n in offsets if n != "network"]
    if ax is None:
        fig = Figure(figsize=(11, 3.6), layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.get_figure()  # type: ignore[assignment]
    unit = time_unit(trace.end_ns / 1e9)
    drawn = [n for n in names if offsets.get(n)]
    values = [o for n in drawn for _, o in offsets[n]] + [0]
    biggest = max(abs(v) for v in values)
    in_ms = biggest < 2_000_000
    scale, y_name = (1000.0, "ms") if in_ms else (1e6, "s")
    tolerance = max(1, (max(values) - min(values)) // 500)  # under half a pixel of a chart a few hundred pixels high
    groups = coincident_groups([offsets[n] for n in drawn], tolerance)
    ax.axhline(0, color="#999999", lw=1, zorder=1)
    ends: list[tuple[float, float, str, str]] = []  # (x, y) of each line's end, its label, its colour
    for g, members in enumerate(groups):
        node = drawn[members[0]]
        label = ", ".join(drawn[m] for m in members)
        points = offsets[node]
        colour = _COLOURS[names.index(node) % len(_COLOURS)]
        xs = [unit.x(t) for t, _ in points]
        ys = [o / scale for _, o in points]
        partly = any(agreement(offsets[drawn[groups[h][0]]], points, tolerance) > 0 for h in range(g))
        ax.plot(xs, ys, color=colour, lw=2, label=label, linestyle="--" if partly else "-", zorder=3 + g * 0.01)
        ends.append((xs[-1], ys[-1], label, colour))
        for step in clock_steps(trace, node):
            delta_s = step.delta_s
            after = offset_at(points, step.t_ns) / scale
            ax.plot([unit.x(step.t_ns)], [after], marker="v" if delta_s < 0 else "^", color=colour, ms=9, zorder=4)
            ax.annotate(f"{label} stepped {delta_s:+g} s", (unit.x(step.t_ns), after), xytext=(7, -15 if delta_s < 0 else 6),
                        textcoords="offset points", fontsize=8.5, color=colour)
        for drift in clock_drifts(trace, node):
            ppm = drift.ppm
            here = offset_at(points, drift.t_ns) / scale
            ax.plot([unit.x(drift.t_ns)], [here], marker="o", mfc="white", color=colour, ms=7, zorder=4)
            ax.annotate(f"{label} drifts {ppm:+g} ppm", (unit.x(drift.t_ns), here), xytext=(6, 6), textcoords="offset points",
                        fontsize=8.5, color=colour)
    ax.margins(y=0.2)  # room for the step labels under a step back and over a step forward
    ax.set_xlim(0, unit.x(trace.end_ns) * 1.06 if trace.end_ns else 1)
    ax.autoscale_view()
    _end_labels(fig, ax, ends)
    ax.set_xlabel(f"true time since start ({unit.name})")
    ax.set_ylabel(f"wall clock \u2212 true time ({y_name})")
    ax.grid(True, color="#E3E3E3", lw=0.8)
    ax.spines[["top", "right"]].set_visible(False)
    if title is None:
        title = "Each node's wall clock against true time (0: exact; a jump is a step, a slope is drift)"
    ax.set_title(title, loc="left", fontsize=11)
    return fig  # no legend: each line is named at its right end


_LABEL_PT = 9.0


def _end_labels(fig: Figure, ax: Axes, ends: list[tuple[float, float, str, str]]) -> None:
    """Name each line at its right end, and the zero line 'true time', in one column with no two labels overlapping.

    Each label wants the height of its line's end; sorted by that height, a label too close to the
    one under it is pushed up (then the column is pulled back under the top if it overflows), and a
    pushed label gets a thin leader to its line. Heights are in axes fractions of the final y limits,
    the gap from the font size over a conservative estimate of the axes' height (constrained layout
    shrinks it when the figure is drawn).
    """
    lo, hi = ax.get_ylim()
    if hi <= lo:
        return
    height_in = fig.get_size_inches()[1] * ax.get_position().height * 0.85
    gap = 1.2 * _LABEL_PT / 72 / max(height_in, 0.5)
    column_x = max((x for x, _, _, _ in ends), default=ax.get_xlim()[1] / 1.06)
    wanted = [((y - lo) / (hi - lo), x, y, label, colour) for x, y, label, colour in ends]
    if lo <= 0 <= hi:
        wanted.append(((0 - lo) / (hi - lo), column_x, 0.0, "true time", "#777777"))
    wanted.sort(key=lambda w: w[0])
    placed = [w[0] for w in wanted]
    for i in range(1, len(placed)):
        placed[i] = max(placed[i], placed[i - 1] + gap)
    overflow = placed[-1] - 0.98 if placed else 0.0
    if overflow > 0:
        placed = [p - overflow for p in placed]
        for i in range(len(placed) - 2, -1, -1):
            placed[i] = min(placed[i], placed[i + 1] - gap)
    column = offset_copy(blended_transform_factory(ax.transData, ax.transAxes), fig=fig, x=4, units="points")
    for (want, x, y, label, colour), at in zip(wanted, placed):
        moved = abs(at - want) > gap / 4
        ax.annotate(label, (x, y), xytext=(column_x, at), textcoords=column, va="center", fontsize=_LABEL_PT, color=colour,
                    fontweight="normal" if label == "true time" else "bold",
                    arrowprops={"arrowstyle": "-", "color": colour, "lw": 0.6, "shrinkA": 0, "shrinkB": 0} if moved else None)
