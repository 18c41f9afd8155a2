"""Clock offsets: how far each node's wall clock is from true time, over the run, with its steps and drift.

Every trace row carries the true time (``t_ns``) and the wall clock of the node that recorded
it (``wall_us``), so the offset ``wall - (start + t)`` of a node is known at each of its rows
with no model of the clock at all. One line per node, true time on x, the offset on y (ms when
every offset stays under 2 s, seconds otherwise); nodes whose lines would lie on each other over
the same span share one line named for all of them (``n2, n3``; ``(exact)`` when they all read
true time at the end), and a line that agrees with another for part of the run only is dashed:

* a flat line away from zero is a **skewed** clock (a constant offset, as ``add_node(offset=)``
  gives);
* a vertical jump is a **step** (``clock.step``, as NTP does): marked with a triangle and named
  with the node, the amount and when (``n3 stepped -90 s at 2.5 min``); a step back is the one
  schedules must survive without firing early;
* a slope is **drift** (``clock.drift`` sets ``ppm``: 1000 ppm is 1 ms gained per second), marked
  with a ring where it starts (``n1 drifts +20 000 ppm (+20 ms/s) from 5 s``); a drift given to
  ``add_node(drift_ppm=)`` writes no row, so its rate is read from the line's slope.

Every node of a shared line gets its own marks, named for it. The labels are placed last, on the
settled layout, where none overlaps another label or a marker.

Why offsets and not wall time against true time: the clocks that matter differ by
milliseconds to minutes over runs of seconds to days, and only a difference shows both.

The offsets, steps and drift rows come from ``sim.viz.data.clocks``; the two readings made here
(``_line_groups``: which nodes share a line; ``_measured_drifts``: a slope with no row) are pure
functions of those values, with no matplotlib, so they can move to the data layer unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.text import Annotation, Text
from matplotlib.transforms import Bbox, blended_transform_factory, offset_copy

from sim.trace import Trace
from sim.viz.data.clocks import ClockDrift, ClockStep, agreement, clock_drifts, clock_offsets, clock_steps, offset_at
from sim.viz.data.timebase import TimeUnit, fmt_signed, time_unit
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

    Nodes whose lines would lie on each other over the same span (the same offset, to within a
    fraction of a pixel, from about the same first row to about the same last row) are drawn as one
    line named for all of them (``n2, n3``): drawn apart, the last one hides the others. Every
    member's own steps and drift changes are marked on that line and named for that member (one
    label for members that stepped alike at one instant), so a small step of the second node of a
    shared line is not lost. A line that agrees with an earlier one for part of the run only (one
    node stepped away, or outlived the other) is dashed, so the one under it shows through; longer
    lines are drawn first. The end labels (and ``true time``) are spread apart in one column, and
    the step and drift labels are then placed, on the settled layout, where they overlap no other
    label and no marker (a thin leader when one had to move away from its mark).
    """
    offsets = clock_offsets(trace, start=start)
    names = nodes if nodes is not None else [n for n in offsets if n != "network"]
    own_figure = ax is None
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
    groups = _line_groups(drawn, offsets, tolerance, trace.end_ns)
    changes = _changes(trace, drawn)
    ax.axhline(0, color="#999999", lw=1, zorder=1)
    ends: list[tuple[float, float, str, str]] = []  # (x, y) of each line's end, its label, its colour
    marks: list[_Mark] = []
    for g, members in enumerate(groups):
        node = members[0]
        label = ", ".join(sorted(members, key=drawn.index))
        points = offsets[node]
        colour = _COLOURS[names.index(min(members, key=drawn.index)) % len(_COLOURS)]  # a node keeps its colour whatever is drawn first
        xs = [unit.x(t) for t, _ in points]
        ys = [o / scale for _, o in points]
        partly = any(agreement(offsets[groups[h][0]], points, tolerance) > 0 for h in range(g))
        ax.plot(xs, ys, color=colour, lw=2, label=label, linestyle="--" if partly else "-", zorder=3 + g * 0.01)
        exact = all(offsets[m][-1][1] == 0 for m in members)  # every member's clock reads true time at its last row
        ends.append((xs[-1], ys[-1], f"{label} (exact)" if exact else label, colour))
        marks.extend(_marks(changes, members, offsets, scale, unit, colour, tolerance))
    last_x = max((x for x, _, _, _ in ends), default=0.0)
    early = [end for end in ends if end[0] < last_x * 0.97]  # a node whose rows stop early (stopped, or crashed for good)
    ends = [end for end in ends if end not in early]
    marks.extend(_Mark(x, y, "", label, colour, below_first=False, bold=True) for x, y, label, colour in early)
    for mark in marks:
        if not mark.marker:
            continue  # the name at the end of a line that stops early: no marker
        ax.plot([mark.x], [mark.y], marker=mark.marker, color=mark.colour, mfc="white" if mark.marker == "o" else mark.colour,
                ms=_MARKER_PT, zorder=4 if mark.marker == "o" else 4.1, linestyle="none")  # a step's triangle over a ring at its instant
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
    if marks:
        _place_marks(fig, ax, marks, grow=own_figure)
    return fig  # no legend: each line is named at its right end


def _line_groups(drawn: list[str], offsets: dict[str, list[tuple[int, int]]], tolerance: int, end_ns: int) -> list[list[str]]:
    """The nodes drawn as one line, in drawing order: the lines that last the whole run first (the most nodes first, then
    node order: the first is drawn solid, the reference the others are dashed against), then the shorter ones, longest first.

    A node joins a line that it agrees with everywhere *and* that spans what it spans.

    Agreeing only where both exist is not enough: a node that outlives the other (or starts later)
    would be drawn with the other's points, so its own rows (and a step in them) would vanish. The
    span is the same when both ends are within 2 % of the run of each other.
    """
    slack = max(1, end_ns // 50)
    span = {n: offsets[n][-1][0] - offsets[n][0][0] for n in drawn}
    longest = max(span.values(), default=0)
    full = [n for n in drawn if span[n] >= longest - slack]
    order = full + sorted((n for n in drawn if n not in full), key=lambda n: (-span[n], drawn.index(n)))
    groups: list[list[str]] = []
    for node in order:
        points = offsets[node]
        for group in groups:
            lead = offsets[group[0]]
            if (abs(lead[0][0] - points[0][0]) <= slack and abs(lead[-1][0] - points[-1][0]) <= slack
                    and agreement(lead, points, tolerance) == 1.0):
                group.append(node)
                break
        else:
            groups.append([node])
    whole = [g for g in groups if g[0] in full]
    return sorted(whole, key=len, reverse=True) + [g for g in groups if g[0] not in full]  # sorted() is stable: node order on ties


@dataclass
class _Mark:
    """A step or drift change to mark: where (data coordinates), its marker, its words, and which side of it to try first."""

    x: float
    y: float
    marker: str
    text: str
    colour: str
    below_first: bool
    bold: bool = False


_Changes = dict[str, tuple[tuple[ClockStep, ...], tuple[ClockDrift, ...]]]


def _changes(trace: Trace, nodes: list[str]) -> _Changes:
    """Each node's steps and drift changes; read per node only for the nodes that have any (each read is a pass over the trace)."""
    stepped = {row.node for row in trace.of("clock.step")}
    drifted = {row.node for row in trace.of("clock.drift")}
    return {n: (clock_steps(trace, n) if n in stepped else (), clock_drifts(trace, n) if n in drifted else ()) for n in nodes}


def _marks(changes: _Changes, members: list[str], offsets: dict[str, list[tuple[int, int]]], scale: float, unit: TimeUnit,
           colour: str, tolerance: int) -> list[_Mark]:
    """Every member's own steps and drift changes, named for it; members that changed alike at one instant share one mark."""
    alike: dict[tuple[str, int, float], list[str]] = {}
    for node in members:
        steps, drifts = changes[node]
        for step in steps:
            alike.setdefault(("step", step.t_ns, step.delta_s), []).append(node)
        for drift in drifts:
            alike.setdefault(("drift", drift.t_ns, drift.ppm), []).append(node)
        for t_ns, ppm in _measured_drifts(steps, drifts, offsets[node], tolerance):
            alike.setdefault(("drift", t_ns, ppm), []).append(node)
    out: list[_Mark] = []
    for (kind, t_ns, amount), who in sorted(alike.items(), key=lambda item: (item[0][1], item[0][0], item[1])):
        names = ", ".join(who)
        y = offset_at(offsets[who[0]], t_ns) / scale
        at = f"{unit.x(t_ns):.3g} {unit.name}"
        if kind == "step":
            out.append(_Mark(unit.x(t_ns), y, "v" if amount < 0 else "^", f"{names} stepped {_fmt_step(amount)} at {at}", colour,
                             below_first=amount < 0))
        elif amount == 0:
            out.append(_Mark(unit.x(t_ns), y, "o", f"{names} stops drifting at {at}", colour, below_first=False))
        else:
            rate = fmt_signed(amount * 1e-6)
            out.append(_Mark(unit.x(t_ns), y, "o", f"{names} drifts {amount:+,g} ppm ({rate}/s) from {at}".replace(",", "\u2009"),
                             colour, below_first=amount < 0))
    return out


def _measured_drifts(steps: tuple[ClockStep, ...], drifts: tuple[ClockDrift, ...], points: list[tuple[int, int]],
                     tolerance: int) -> list[tuple[int, float]]:
    """``(t_ns, ppm)`` where a node's line slopes before any ``clock.drift`` row says so, measured from the line (3 digits).

    A clock made drifting by ``add_node(drift_ppm=)`` writes no row: without this its slope
    would go unnamed. The line is cut at its steps; a piece counts when it is straight (every point
    within ``tolerance`` of the chord) and its ends differ by more than ``tolerance``; a piece with
    the rate of the piece before it (a step on a drifting clock) is not marked again.
    """
    until = drifts[0].t_ns if drifts else points[-1][0]
    cuts = {step.t_ns for step in steps}
    bounds = [points[0][0], *sorted(t for t in cuts if points[0][0] < t < until), until]
    out: list[tuple[int, float]] = []
    previous: float | None = None
    for a, b in zip(bounds, bounds[1:]):
        piece = [p for p in points if a < p[0] < b]
        at_a = [p for p in points if p[0] == a]
        at_b = [p for p in points if p[0] == b]
        piece = at_a[-1:] + piece + at_b[:1]  # after a step at a, before a step at b
        if len(piece) < 2 or piece[-1][0] == piece[0][0]:
            continue
        (t0, o0), (t1, o1) = piece[0], piece[-1]
        chord = [o0 + (o1 - o0) * (t - t0) / (t1 - t0) for t, _ in piece]
        if abs(o1 - o0) <= tolerance or any(abs(o - c) > tolerance + 2 for (_, o), c in zip(piece, chord)):
            previous = None
            continue
        ppm = float(f"{(o1 - o0) / ((t1 - t0) / 1000) * 1e6:.3g}")
        if previous is None or abs(ppm - previous) > 0.01 * abs(previous):
            out.append((t0, ppm))
        previous = ppm
    return out


def _fmt_step(delta_s: float) -> str:
    """A step's amount as a student reads it: '-90 s', '-2.64 s', '-699 ms' (seconds under 1000 s, 3 digits)."""
    if 1 <= abs(delta_s) < 1000:
        return f"{delta_s:+.3g} s"
    return fmt_signed(delta_s)


_MARKER_PT = 8.0
_HALO = {"boxstyle": "square,pad=0.1", "facecolor": "white", "edgecolor": "none", "alpha": 0.85}  # a line under a label stays faint


def _candidates() -> list[tuple[float, float, str, str]]:
    """Offsets (points) and alignments to try for a mark's label, nearest first: beside the mark, then stacked further up or down."""
    out: list[tuple[float, float, str, str]] = []
    for row in range(7):
        dy = 5.0 + 11.0 * row
        for dx, ha in ((7.0, "left"), (-7.0, "right")):
            out.append((dx, dy, ha, "bottom"))
            out.append((dx, -dy, ha, "top"))
    return out


def _place_marks(fig: Figure, ax: Axes, marks: list[_Mark], *, grow: bool) -> None:
    """Label the marks beside them; when some label finds no clear spot, number the marks and list them under the chart.

    The first try writes each mark's words beside it (see ``_place``). Too many changes close
    together leave no clear spot for some: then every step and drift is numbered at its marker
    (``1``, ``2``, ... in time order) and the numbered sentences are listed in columns under the
    x label, in the line's colour; ``grow`` (the chart made its own figure) makes the figure taller
    by the list's height so the plot keeps its size.
    """
    placed, clear = _place(fig, ax, marks, [m.text for m in marks])
    if clear:
        return
    for ann in placed:
        ann.remove()
    numbered = sorted((m for m in marks if m.marker), key=lambda m: (m.x, m.text))  # numbered in true-time order
    _key(fig, ax, numbered, grow=grow)
    number = {id(m): str(i + 1) for i, m in enumerate(numbered)}
    _place(fig, ax, marks, [number.get(id(m), m.text) for m in marks])


def _key(fig: Figure, ax: Axes, marks: list[_Mark], *, grow: bool) -> None:
    """The numbered list of ``marks`` under the x label: columns as wide as the longest sentence, filled top to bottom."""
    fig.draw_without_rendering()
    box = ax.get_window_extent()
    label_box = ax.xaxis.label.get_window_extent()
    below_pt = (box.y0 - label_box.y0) / fig.dpi * 72 + 4  # from the axes' bottom to under the x label
    entries = [f"{i + 1}  {m.text}" for i, m in enumerate(marks)]
    width_pt = max(len(e) for e in entries) * 8.5 * 0.56 + 14
    columns = max(1, min(len(entries), int(box.width / fig.dpi * 72 // width_pt)))
    rows = -(-len(entries) // columns)
    if grow:
        fig.set_figheight(fig.get_figheight() + rows * 11.5 / 72 + 0.1)
    for i, (entry, mark) in enumerate(zip(entries, marks)):
        column, row = divmod(i, rows)
        ax.annotate(entry, (column / columns, 0), xycoords="axes fraction", xytext=(0, -below_pt - 11.5 * row),
                    textcoords="offset points", va="top", ha="left", fontsize=8.5, color=mark.colour, annotation_clip=False)


def _place(fig: Figure, ax: Axes, marks: list[_Mark], texts: list[str]) -> tuple[list[Annotation], bool]:
    """Write ``texts[i]`` by ``marks[i]`` where it overlaps no label placed before it (the end labels first) and no marker, inside the axes.

    Placed on the settled layout (``draw_without_rendering``), with real text extents; the labels
    take no part in the layout, so placing them moves nothing. Of the candidates (see
    ``_candidates``, the side the step went to first), the first clear one wins; a clear one that
    crosses no line beats one nearer that does, and with none clear, the least crowded. A label
    more than one row from its mark gets a thin leader. Returns the labels and whether all were clear.
    """
    fig.draw_without_rendering()
    box = ax.get_window_extent()
    taken = [Text.get_window_extent(t) for t in ax.texts]
    pad = _MARKER_PT / 72 * fig.dpi * 0.6
    for mark in marks:
        if not mark.marker:
            continue
        px, py = ax.transData.transform((mark.x, mark.y))
        taken.append(Bbox.from_extents(px - pad, py - pad, px + pad, py + pad))
    paths = [ln.get_transform().transform_path(ln.get_path()) for ln in ax.get_lines()
             if len(ln.get_path()) > 1 and not str(ln.get_label()).startswith("_")]
    candidates = _candidates()
    out: list[Annotation] = []
    clear = True
    for mark, text in zip(marks, texts):
        strong = mark.bold or len(text) <= 2  # a node's name or a mark's number
        size, weight = (_LABEL_PT, "bold") if strong else (8.5, "normal")
        order = sorted(range(len(candidates)), key=lambda i: (i // 4, (candidates[i][1] < 0) != mark.below_first, i))
        best: tuple[tuple[int, int, int], tuple[float, float, str, str], Bbox] | None = None
        for rank, i in enumerate(order):
            dx, dy, ha, va = candidates[i]
            trial = ax.annotate(text, (mark.x, mark.y), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va, fontsize=size,
                                fontweight=weight)
            trial.get_window_extent()  # lays the text out where it would be drawn
            extent = Text.get_window_extent(trial)
            trial.remove()
            inside = box.x0 <= extent.x0 and extent.x1 <= box.x1 and box.y0 <= extent.y0 and extent.y1 <= box.y1
            crowded = sum(1 for other in taken if extent.overlaps(other)) + (0 if inside else 10)
            crossing = sum(1 for path in paths if path.intersects_bbox(extent, filled=False))
            score = (crowded, 2 * crossing + i // 4, rank)  # one row further beats crossing a line, two rows do not
            if best is None or score < best[0]:
                best = (score, candidates[i], extent)
            if crowded == 0 and crossing == 0:
                break  # nothing further can score better
        assert best is not None
        (crowded, _, _), (dx, dy, ha, va), extent = best
        clear = clear and crowded == 0
        far = abs(dy) > 10
        ann = ax.annotate(text, (mark.x, mark.y), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va, fontsize=size, fontweight=weight,
                          color=mark.colour, annotation_clip=False, bbox=_HALO,
                          arrowprops={"arrowstyle": "-", "color": mark.colour, "lw": 0.6, "shrinkA": 1, "shrinkB": _MARKER_PT * 0.6 if mark.marker else 1,
                                      "relpos": (0.0 if ha == "left" else 1.0, 0.0 if va == "bottom" else 1.0)} if far else None)
        ann.set_in_layout(False)
        out.append(ann)
        taken.append(extent)
    return out, clear


_LABEL_PT = 9.0


def _end_labels(fig: Figure, ax: Axes, ends: list[tuple[float, float, str, str]]) -> None:
    """Name each line at its right end, and the zero line 'true time', in one column with no two labels overlapping.

    When a line ends within a label's height of 0 (an ``(exact)`` one, say) the zero line is not
    named: it lies under that line there, and its label beside the line's would need a leader across it.

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
    near_zero = any(abs(y) / (hi - lo) < gap for _, y, _, _ in ends)  # a line ends within a label's height of 0
    if not near_zero and lo <= 0 <= hi:
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
        ax.annotate(label, (x, y), xytext=(column_x, at), textcoords=column, va="center", fontsize=_LABEL_PT, color=colour, bbox=_HALO,
                    fontweight="normal" if label == "true time" else "bold",
                    arrowprops={"arrowstyle": "-", "color": colour, "lw": 0.6, "shrinkA": 0, "shrinkB": 0} if moved else None)
