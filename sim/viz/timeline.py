"""Activation timeline: one row per node, one bar per activation of a key.

Read from the trace only: ``activation.started`` opens a bar on the node's row, the same
node/actor/key's ``activation.ended`` (or ``activation.failed``: the run is over and the body
restarts after a backoff) closes it; a bar still open at the node's crash ends there, and one
still open at the end of the trace runs to the end. Concurrent activations of a node stack in
sub-rows; a key keeps its sub-row when it can, and its colour everywhere.

World rows drawn on the node's row: ``fault.crash`` (red line, "crash"), ``fault.restart``
(green triangle), the node down between the two (grey), ``fault.pause`` .. ``fault.resume``
(hatched), ``clock.step`` (purple tick), ``report.built`` (black star; so is an ``effect`` row whose
details carry a ``day``: a daily report in the effects ledger). A day missing between two reports of a
key is a hollow red star, "omitted" (an omission is a gap, and a gap draws nothing unless marked). ``note`` rows are
numbered along the top and listed under the axis. A bar and its legend entry name the key as a key,
``"dormant"`` under a legend titled "keys of beater" (``beater["dormant"]`` when the trace has several
types): bare, a key named like a state (``dormant``, ``both``) reads as the actor's state.

The bars, faults and reports come from the data layer (``sim.viz.data.activations``, ``.nodes``,
``.reports``); this module only draws them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.text import Annotation
from matplotlib.transforms import Bbox

from sim.trace import Row, Trace
from sim.viz.data.activations import Bar, activation_bars, assign_slots, entity_names, timeline_nodes
from sim.viz.data.keys import key_label, short_type
from sim.viz.data.nodes import node_events
from sim.viz.data.notes import note_rows
from sim.viz.data.reports import day_label, omitted_reports, report_day, report_rows
from sim.viz.data.timebase import end_ns, fmt_signed, time_unit
from sim.viz.draw import add_notes, declutter, fault_handles, label, outside_legend, style_node_lanes
from sim.viz.palette import FONT, GREEN, GREY, INK, LIGHT_GREY, PURPLE, SMALL, VERMILLION, key_style, text_colour_on

__all__ = ["activation_timeline"]

_SAID_ENDS = ("cancelled", "become")  # run ends written at the bar's end (idle, failed, crash have their own look)

_HEADER = 1.0  # rows of label space above each node's bars
_GAP = 0.35


def activation_timeline(
    trace: Trace,
    *,
    ax: Axes | None = None,
    title: str | None = None,
    keys: Iterable[str] | None = None,
) -> Figure:
    """One row per node, one bar per activation run of a key, with failures, crashes, restarts and pauses.

    ``keys`` restricts the bars to those keys (faults are always drawn); without it the runtime's own keys (cron
    claims) are left out. Returns the figure (a new one unless ``ax`` is given). An empty trace gives an empty, labelled chart.
    """
    key_filter = {str(k) for k in keys} if keys is not None else None
    bars, failures = activation_bars(trace, key_filter)
    events = node_events(trace)
    nodes = timeline_nodes(trace)  # not the world's own rows (notes, ...)
    slots = assign_slots(bars)
    end = end_ns(trace)
    unit = time_unit(end / 1e9)
    noted = len(note_rows(trace))

    # geometry: y grows downwards; node i occupies [top_i, top_i + _HEADER + slots_i]
    tops: dict[str, float] = {}
    y = 0.0
    for node in nodes:
        tops[node] = y
        y += _HEADER + max(slots.get(node, 1), 1) + _GAP
    total = max(y - _GAP, 1.0)

    footer_lines = min(noted, 8) + (1 if noted > 8 else 0)
    own = ax is None
    if ax is None:
        height = 1.5 + total * 0.3 + footer_lines * 0.17
        fig = Figure(figsize=(11, max(height, 2.6)), layout="constrained")
        ax = fig.add_subplot()
        if footer_lines:
            fig.get_layout_engine().set(rect=(0, (footer_lines * 0.17 + 0.1) / fig.get_figheight(), 1, 1 - (footer_lines * 0.17 + 0.1) / fig.get_figheight()))  # type: ignore[union-attr, call-arg]
    else:
        fig = ax.figure  # type: ignore[assignment]

    entities = list(dict.fromkeys(bar.entity for bar in bars))
    names = entity_names(entities)
    styles = {e: key_style(i) for i, e in enumerate(entities)}
    end_x = unit.x(end)
    labels: list[Annotation] = []

    def slot_y(node: str, slot: int) -> float:
        return tops[node] + _HEADER + slot + 0.5

    def lane(node: str) -> tuple[float, float]:
        """(top of the bars, bottom of the bars) of a node."""
        return tops[node] + _HEADER, tops[node] + _HEADER + max(slots.get(node, 1), 1)

    # lanes: a faint band behind each node's bars
    for i, node in enumerate(nodes):
        y0, y1 = lane(node)
        ax.axhspan(y0, y1, color="#F4F4F4" if i % 2 == 0 else "#FAFAFA", zorder=0, lw=0)

    # world spans under the bars
    for node in nodes:
        ev = events.get(node)
        if ev is None:
            continue
        y0, y1 = lane(node)
        for span in ev.down:
            ax.add_patch(Rectangle((unit.x(span.start_ns), y0), unit.x(span.end_ns - span.start_ns), y1 - y0, facecolor=LIGHT_GREY, edgecolor="none", zorder=1, gid="down"))
        for span in ev.paused:
            # over the bars: what was running is dimmed and hatched while the node is frozen
            ax.add_patch(Rectangle((unit.x(span.start_ns), y0), unit.x(span.end_ns - span.start_ns), y1 - y0, facecolor=(1, 1, 1, 0.45), edgecolor="#555555", hatch="///", lw=0, zorder=3.5, gid="paused"))
            labels.append(label(ax, unit.x(span.start_ns), tops[node] + 0.08, "paused", colour="#555555"))

    # bars
    bar_texts: list[tuple[Any, Rectangle, float]] = []  # (label, bar, x where the next bar of its sub-row starts)
    next_start: dict[int, float] = {}
    by_row: dict[tuple[str, int], list[Bar]] = {}
    for bar in bars:
        by_row.setdefault((bar.node, bar.slot), []).append(bar)
    for row_bars in by_row.values():
        row_bars.sort(key=lambda b: b.start_ns)
        for a, b in zip(row_bars, row_bars[1:] + [None]):
            next_start[id(a)] = unit.x(b.start_ns) if b is not None else end_x * 1.01
    for bar in bars:
        colour, hatch = styles[bar.entity]
        x0, x1 = unit.x(bar.start_ns), unit.x(bar.end_ns)
        width = max(x1 - x0, end_x * 0.002)
        yc = slot_y(bar.node, bar.slot)
        rect = Rectangle((x0, yc - 0.4), width, 0.8, facecolor=colour, edgecolor="white", lw=0.6, hatch=hatch or None, zorder=2, gid=f"activation:{names[bar.entity]}")
        ax.add_patch(rect)
        box = {"boxstyle": "round,pad=0.12", "facecolor": colour, "edgecolor": "none"} if hatch else None
        name = names[bar.entity] if bar.behavior is None else f"{names[bar.entity]} as {bar.behavior}"
        if bar.how in _SAID_ENDS:  # a run that ended for a reason the bar alone does not show: say it at its end
            labels.append(label(ax, x1, yc - 0.4, bar.how, colour=INK, va="bottom"))
        text = ax.text(x0 + width / 2, yc, name, ha="center", va="center", fontsize=SMALL, color=text_colour_on(colour), zorder=3, clip_on=True, bbox=box)
        text.set_in_layout(False)
        bar_texts.append((text, rect, next_start[id(bar)]))

    # failures: red X at the end of the run that failed
    fail_x, fail_y = [], []
    for row, ended in failures:
        if row.node not in tops:
            continue
        fail_x.append(unit.x(row.t_ns))
        fail_y.append(slot_y(row.node, ended.slot if ended is not None else 0))
    if fail_x:
        ax.scatter(fail_x, fail_y, marker="X", s=70, color=VERMILLION, edgecolors="white", linewidths=0.7, zorder=5, gid="failed", label="_failed")

    # crashes, restarts, clock steps, reports
    for node in nodes:
        ev = events.get(node)
        if ev is None:
            continue
        y0, y1 = lane(node)
        for t in ev.crashes:
            ax.vlines(unit.x(t), tops[node] + 0.05, y1, color=VERMILLION, lw=2, zorder=4, gid="crash")
            labels.append(label(ax, unit.x(t), tops[node] + 0.08, "crash", colour=VERMILLION, weight="bold"))
        if ev.restarts:
            rx = [unit.x(t) for t, _ in ev.restarts]
            ax.scatter(rx, [y0] * len(rx), marker="^", s=70, color=GREEN, edgecolors="white", linewidths=0.7, zorder=5, gid="restart", clip_on=False)
            for t, incarnation in ev.restarts:
                labels.append(label(ax, unit.x(t), tops[node] + 0.08, "restart" if incarnation is None else f"restart #{incarnation}", colour=GREEN, weight="bold"))
        for t, _seq, delta in ev.steps:
            ax.vlines(unit.x(t), tops[node] + 0.05, y1, color=PURPLE, lw=1.5, ls="--", zorder=4, gid="clock.step")
            labels.append(label(ax, unit.x(t), tops[node] + 0.08, f"clock {fmt_signed(delta / 1e6)}", colour="#9E4A7E"))
    reports = [r for r in report_rows(trace) if r.node in tops and (key_filter is None or str(r.get("key")) in key_filter)]
    omitted = [(r, day) for r, day in omitted_reports(reports) if r.node in tops]
    report_labels: list[Annotation] = []  # kept so a bar's own name can step aside from them (below)
    keys_on = {node: {b.entity for b in bars if b.node == node} for node in tops}

    def report_y(r: Row) -> float:
        """A report's star sits on its key's bar on its node (the run at its time, else the last one before it).

        Several keys report from one node: on the node's header row their stars would say nothing of
        which key built what. Only a report with no bar of its key on that node stays on the header.
        """
        actor = r.get("actor")
        mine = [b for b in bars if b.node == r.node and b.entity[1] == str(r.get("key")) and (actor is None or b.entity[0] == str(actor))]
        at = [b for b in mine if b.start_ns <= r.t_ns <= b.end_ns] or [b for b in mine if b.start_ns <= r.t_ns] or mine
        return slot_y(r.node, at[-1].slot) if at else lane(r.node)[0] - 0.3

    def whose(r: Row) -> str:
        """The key, when the report's node runs several: there a star alone would not say whose report it is."""
        return f"{key_label(r.get('actor'), r.get('key'), with_type=False)}: " if len(keys_on.get(r.node, ())) > 1 else ""

    if reports:
        ax.scatter([unit.x(r.t_ns) for r in reports], [report_y(r) for r in reports], marker="*", s=110, color=INK, edgecolors="white",
                   linewidths=0.7, zorder=5, gid="report.built", clip_on=False)
        built: dict[Any, int] = {}
        for r in reports:
            which = (r.get("key"), report_day(r))
            built[which] = built.get(which, 0) + 1
            again = built[which] > 1
            report_labels.append(label(ax, unit.x(r.t_ns), report_y(r), f"{whose(r)}report {day_label(report_day(r))}" + (" again" if again else ""),
                                       colour=VERMILLION if again else INK, weight="bold" if again else "normal", va="center", dx=6))
    for r, day in omitted:  # drawn where the missing day's report was due: one period after the report before it
        ax.scatter([unit.x(r.t_ns)], [report_y(r)], marker="*", s=120, facecolors="white", edgecolors=VERMILLION, linewidths=1.4,
                   zorder=5, gid="report.omitted", clip_on=False)
        report_labels.append(label(ax, unit.x(r.t_ns), report_y(r), f"{whose(r)}report {day_label(day)} omitted", colour=VERMILLION, weight="bold", va="center", dx=6))
    labels += report_labels

    # axes
    ax.set_xlim(0, end_x * 1.01 if end_x > 0 else 1)
    ax.set_ylim(total + 0.1, -0.1)
    ax.set_yticks([(lane(n)[0] + lane(n)[1]) / 2 for n in nodes], nodes, fontsize=FONT)
    style_node_lanes(ax, unit, trace.time_axis)
    ax.set_title(title or f"Activations per node ({len(bars)} runs of {len(entities)} key{'s' if len(entities) != 1 else ''})", fontsize=FONT + 2, loc="left",
                 pad=16 if noted else 6)  # room for the numbered note markers along the top
    if not nodes:
        ax.set_yticks([])
        ax.text(0.5, 0.5, "no activations or node events in this trace", transform=ax.transAxes, ha="center", va="center", fontsize=FONT, color=GREY)

    # legend: keys (when few) then the symbols that appear
    handles: list[Any] = []
    if 0 < len(entities) <= 12:
        for e in entities:
            colour, hatch = styles[e]
            handles.append(Patch(facecolor=colour, edgecolor="white", hatch=hatch or None, label=names[e]))
    if failures:
        handles.append(Line2D([], [], ls="", marker="X", ms=9, color=VERMILLION, mec="white", label="activation failed"))
    handles += fault_handles(ev for n, ev in events.items() if n in tops)
    if reports:
        handles.append(Line2D([], [], ls="", marker="*", ms=10, color=INK, label="report built"))
    if omitted:
        handles.append(Line2D([], [], ls="", marker="*", ms=11, mfc="white", mec=VERMILLION, label="report omitted (a day missing)"))
    if handles:
        place = outside_legend(fig, own)
        # a title says the coloured entries are keys (of which type), so a key named like a state does not read as one
        actors = {a for a, _ in entities}
        keys_title = None
        if 0 < len(entities) <= 12:
            keys_title = f"keys of {short_type(next(iter(actors)))}" if len(actors) == 1 else "keys"
        ax.legend(handles=handles, fontsize=SMALL, borderaxespad=0, title=keys_title, title_fontsize=SMALL,
                  alignment="left", **place)

    # notes, then keep labels apart and drop bar labels that do not fit their bar
    labels += add_notes(fig, ax, trace, unit, footer=own)
    declutter(fig, labels, max_levels=2)
    renderer = fig._get_renderer()  # type: ignore[attr-defined]
    to_px = ax.transData.transform
    report_boxes = [a.get_window_extent(renderer) for a in report_labels]
    for text, rect, free_until in bar_texts:
        width = text.get_window_extent(renderer).width
        if width + 4 <= rect.get_window_extent(renderer).width:
            _name_beside_reports(text, rect, report_boxes, renderer, ax)
            continue
        # too short for its name: write it just after the bar when the sub-row is free there
        bar_end = rect.get_x() + rect.get_width()
        room = to_px((free_until, 0))[0] - to_px((bar_end, 0))[0]
        if room >= width + 8:
            text.set_position((bar_end, rect.get_y() + rect.get_height() / 2))
            text.set_ha("left")
            text.set_text(" " + text.get_text())
            text.set_color(INK)
            text.set_bbox(None)
            text.set_gid("outside")
        else:
            text.remove()
    return fig


def _name_beside_reports(text: Any, rect: Rectangle, boxes: Sequence[Bbox], renderer: Any, ax: Axes) -> None:
    """Move a bar's name off the report labels drawn on its bar: into the bar's widest free stretch, or drop it.

    Report stars sit on their key's bar, and so do their labels; the name is in the legend too, so a
    bar with no stretch wide enough loses its name rather than show two texts on top of each other.
    """
    box, bar = text.get_window_extent(renderer), rect.get_window_extent(renderer)
    on_bar = [b for b in boxes if b.y1 > bar.y0 and b.y0 < bar.y1]
    if not any(Bbox.from_extents(box.x0 - 4, box.y0, box.x1 + 4, box.y1).overlaps(b) for b in on_bar):  # a little air too
        return
    taken = sorted((b.x0 - 10, b.x1 + 4) for b in on_bar)  # a label, and its star just left of it
    free: list[tuple[float, float]] = []
    at = bar.x0
    for x0, x1 in taken:
        if x0 > at:
            free.append((at, min(x0, bar.x1)))
        at = max(at, x1)
    if at < bar.x1:
        free.append((at, bar.x1))
    widest = max(free, key=lambda f: f[1] - f[0], default=None)
    if widest is None or widest[1] - widest[0] < box.width + 8:
        text.remove()
        return
    x, _ = ax.transData.inverted().transform(((widest[0] + widest[1]) / 2, 0))
    text.set_x(x)
