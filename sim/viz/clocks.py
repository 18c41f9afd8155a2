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
"""

from __future__ import annotations

from datetime import datetime

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.transforms import blended_transform_factory, offset_copy

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
    groups = _coincident_groups([offsets[n] for n in drawn], tolerance)
    ax.axhline(0, color="#999999", lw=1, zorder=1)
    ends: list[tuple[float, float, str, str]] = []  # (x, y) of each line's end, its label, its colour
    for g, members in enumerate(groups):
        node = drawn[members[0]]
        label = ", ".join(drawn[m] for m in members)
        points = offsets[node]
        colour = _COLOURS[names.index(node) % len(_COLOURS)]
        xs = [unit.x(t) for t, _ in points]
        ys = [o / scale for _, o in points]
        partly = any(_agreement(offsets[drawn[groups[h][0]]], points, tolerance) > 0 for h in range(g))
        ax.plot(xs, ys, color=colour, lw=2, label=label, linestyle="--" if partly else "-", zorder=3 + g * 0.01)
        ends.append((xs[-1], ys[-1], label, colour))
        for row in trace.of("clock.step", node=node):
            delta_s = int(row.get("delta_us", 0) or 0) / 1e6
            after = _offset_at(points, row.t_ns) / scale
            ax.plot([unit.x(row.t_ns)], [after], marker="v" if delta_s < 0 else "^", color=colour, ms=9, zorder=4)
            ax.annotate(f"{label} stepped {delta_s:+g} s", (unit.x(row.t_ns), after), xytext=(7, -15 if delta_s < 0 else 6),
                        textcoords="offset points", fontsize=8.5, color=colour)
        for row in trace.of("clock.drift", node=node):
            ppm = float(row.get("drift_ppm", 0.0) or 0.0)
            here = _offset_at(points, row.t_ns) / scale
            ax.plot([unit.x(row.t_ns)], [here], marker="o", mfc="white", color=colour, ms=7, zorder=4)
            ax.annotate(f"{label} drifts {ppm:+g} ppm", (unit.x(row.t_ns), here), xytext=(6, 6), textcoords="offset points",
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


def _coincident_groups(lines: list[list[tuple[int, int]]], tolerance: int) -> list[list[int]]:
    """Indices of ``lines`` grouped so that the lines of a group agree everywhere they both exist (first one leads)."""
    groups: list[list[int]] = []
    for i, points in enumerate(lines):
        for group in groups:
            if _agreement(lines[group[0]], points, tolerance) == 1.0:
                group.append(i)
                break
        else:
            groups.append([i])
    return groups


def _agreement(a: list[tuple[int, int]], b: list[tuple[int, int]], tolerance: int) -> float:
    """The share (0 to 1) of the common time span where offset lines ``a`` and ``b`` are within ``tolerance`` µs."""
    first, last = max(a[0][0], b[0][0]), min(a[-1][0], b[-1][0])
    if last < first:
        return 0.0
    samples = sorted({first, last, *(first + (last - first) * k // 200 for k in range(201)),
                      *(t for t, _ in a if first <= t <= last), *(t for t, _ in b if first <= t <= last)})
    close = sum(1 for t in samples if abs(_offset_between(a, t) - _offset_between(b, t)) <= tolerance)
    return close / len(samples)


def _offset_between(points: list[tuple[int, int]], t_ns: int) -> float:
    """The line's offset at ``t_ns`` as drawn: straight between its points, the value after a step at that instant."""
    before = points[0]
    for point in points:
        if point[0] > t_ns:
            if point[0] == before[0]:
                return float(before[1])
            return before[1] + (point[1] - before[1]) * (t_ns - before[0]) / (point[0] - before[0])
        before = point
    return float(before[1])


def _offset_at(points: list[tuple[int, int]], t_ns: int) -> int:
    """The offset a node's clock had just after ``t_ns`` (after a step at that instant)."""
    here = points[0][1]
    for t, offset in points:
        if t > t_ns:
            break
        here = offset
    return here
