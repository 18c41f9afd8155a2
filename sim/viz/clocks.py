"""Clock offsets: how far each node's wall clock is from true time, over the run, with its steps and drift.

Every trace row carries the true time (``t_ns``) and the wall clock of the node that recorded
it (``wall_us``), so the offset ``wall - (start + t)`` of a node is known at each of its rows
with no model of the clock at all. One line per node, true time on x, the offset on y (ms when
every offset stays under 2 s, seconds otherwise):

* a flat line away from zero is a **skewed** clock (a constant offset, as ``add_node(offset=)``
  gives);
* a vertical jump is a **step** (``clock.step``, as NTP does): marked with a triangle and the
  amount (``n3 -90 s``); a step back is the one schedules must survive without firing early;
* a slope is **drift** (``clock.drift`` sets ``ppm``: 1000 ppm is 1 ms gained per second), noted
  where it starts.

Why offsets and not wall time against true time: the clocks that matter differ by
milliseconds to minutes over runs of seconds to days, and only a difference shows both.
"""

from __future__ import annotations

from datetime import datetime

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from casty.clock import to_us

from sim.trace import Trace
from sim.viz.timeline import BLUE, GREEN, INK, ORANGE, PURPLE, SKY, VERMILLION, time_unit
from sim.world import DEFAULT_START

__all__ = ["clock_offsets", "clock_chart"]

_COLOURS = (BLUE, ORANGE, GREEN, PURPLE, SKY, VERMILLION, INK)
_MAX_POINTS = 4000  # per node: a day of heartbeats would otherwise draw millions of points on a few hundred pixels


def clock_offsets(trace: Trace, *, start: datetime = DEFAULT_START) -> dict[str, list[tuple[int, int]]]:
    """Per node, ``[(t_ns, offset_us)]`` at its rows (consecutive equal offsets kept at their ends only).

    ``start`` is the world's start (``World(start=)``): a node whose clock is exact reads
    ``start + t``. Rows without a wall clock (the world's own notes) are skipped.
    """
    epoch_us = to_us(start)
    out: dict[str, list[tuple[int, int]]] = {}
    for row in trace.rows:
        if row.wall_us is None:
            continue
        offset = row.wall_us - epoch_us - row.t_ns // 1000
        points = out.setdefault(row.node, [])
        if row.kind == "clock.step":  # the row is stamped after the jump: the clock read the old offset up to this instant
            points.append((row.t_ns, offset - int(row.get("delta_us", 0) or 0)))
            points.append((row.t_ns, offset))
            continue
        if len(points) >= 2 and points[-1][1] == offset and points[-2][1] == offset:
            points[-1] = (row.t_ns, offset)  # a flat run: move its end, keep its start
        else:
            points.append((row.t_ns, offset))
    for node, points in out.items():
        if len(points) > _MAX_POINTS:
            every = len(points) // _MAX_POINTS + 1
            steps = {i for i in range(1, len(points)) if abs(points[i][1] - points[i - 1][1]) > 1000}
            keep = sorted(set(range(0, len(points), every)) | steps | {i - 1 for i in steps} | {len(points) - 1})
            out[node] = [points[i] for i in keep]
    return out


def clock_chart(
    trace: Trace,
    *,
    ax: Axes | None = None,
    title: str | None = None,
    start: datetime = DEFAULT_START,
    nodes: list[str] | None = None,
) -> Figure:
    """The clock-offsets chart (see the module docstring); returns the figure it drew on."""
    offsets = clock_offsets(trace, start=start)
    names = nodes if nodes is not None else [n for n in offsets if n != "network"]
    if ax is None:
        fig = Figure(figsize=(11, 3.6), layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.get_figure()  # type: ignore[assignment]
    unit = time_unit(trace.end_ns / 1e9)
    biggest = max((abs(o) for n in names for _, o in offsets.get(n, ())), default=0)
    in_ms = biggest < 2_000_000
    scale, y_name = (1000.0, "ms") if in_ms else (1e6, "s")
    ax.axhline(0, color="#999999", lw=1, zorder=1)
    ax.text(0.995, 0.0, "true time", transform=ax.get_yaxis_transform(), ha="right", va="bottom", fontsize=8.5, color="#777777")
    for i, node in enumerate(names):
        points = offsets.get(node, [])
        if not points:
            continue
        colour = _COLOURS[i % len(_COLOURS)]
        xs = [unit.x(t) for t, _ in points]
        ys = [o / scale for _, o in points]
        ax.plot(xs, ys, color=colour, lw=2, label=node, drawstyle="default", zorder=3)
        ax.annotate(node, (xs[-1], ys[-1]), xytext=(4, 0), textcoords="offset points", va="center", fontsize=9,
                    color=colour, fontweight="bold")
        for row in trace.of("clock.step", node=node):
            delta_s = int(row.get("delta_us", 0) or 0) / 1e6
            after = _offset_at(points, row.t_ns) / scale
            ax.plot([unit.x(row.t_ns)], [after], marker="v" if delta_s < 0 else "^", color=colour, ms=9, zorder=4)
            ax.annotate(f"{node} stepped {delta_s:+g} s", (unit.x(row.t_ns), after), xytext=(7, -15 if delta_s < 0 else 6),
                        textcoords="offset points", fontsize=8.5, color=colour)
        for row in trace.of("clock.drift", node=node):
            ppm = float(row.get("drift_ppm", 0.0) or 0.0)
            here = _offset_at(points, row.t_ns) / scale
            ax.plot([unit.x(row.t_ns)], [here], marker="o", mfc="white", color=colour, ms=7, zorder=4)
            ax.annotate(f"{node} drifts {ppm:+g} ppm", (unit.x(row.t_ns), here), xytext=(6, 6), textcoords="offset points",
                        fontsize=8.5, color=colour)
    ax.margins(y=0.2)  # room for the step labels under a step back and over a step forward
    ax.set_xlim(0, unit.x(trace.end_ns) * 1.06 if trace.end_ns else 1)
    ax.set_xlabel(f"true time since start ({unit.name})")
    ax.set_ylabel(f"wall clock \u2212 true time ({y_name})")
    ax.grid(True, color="#E3E3E3", lw=0.8)
    ax.spines[["top", "right"]].set_visible(False)
    if title is None:
        title = "Each node's wall clock against true time (0: exact; a jump is a step, a slope is drift)"
    ax.set_title(title, loc="left", fontsize=11)
    return fig  # no legend: each line is named at its right end


def _offset_at(points: list[tuple[int, int]], t_ns: int) -> int:
    """The offset a node's clock had just after ``t_ns`` (after a step at that instant)."""
    here = points[0][1]
    for t, offset in points:
        if t > t_ns:
            break
        here = offset
    return here
