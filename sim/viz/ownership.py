"""Ownership chart: who held one key's owner epoch, on which node, when, and what it wrote.

One lane per node, true time on x. Read from the trace only:

* an **epoch span** opens at the node's ``epoch.acquired`` row of the key and closes at the
  first of: that node's ``activation.ended`` of the key, its crash, its next
  ``epoch.acquired`` of the key, the end of the trace. Once another node acquires a newer
  epoch of the key, the rest of the span is hatched and labelled *stale*: the node still runs
  the key, but the replicas have promised a newer epoch, so its writes are refused (fenced).
  The label is the epoch ``(round, node#incarnation)``, the incarnation counted per node (1
  for its first life, 2 after a restart), and what the owner found on the replicas (``found
  v4``: the newest confirmed version a read quorum held; ``new``: nothing);
* above the span, a row of writes: a black tick per ``write.confirmed`` (a quorum of replicas
  accepted it), a red X per ``write.failed`` with ``reason="fenced"`` (refused: a newer epoch
  exists), a hollow red circle per other ``write.failed`` (no quorum answered in time);
* on the span, a dot per ``schedule.fired`` of the key; a due time fired again (a repeat,
  usually on the next owner) is an orange diamond; grey x's are messages to the key dropped
  unhandled (``message.dropped``, e.g. a Tick queued when the node crashed);
* under the span, a thin blue band per handoff round of the node (``handoff.started`` ..
  ``handoff.ended``: the node pulls the replicas it should hold from its peers);
* where a run ended for a reason no other mark shows (``lost``: the node stepped down or was
  fenced; ``handoff``: it handed the key to the ring's owner; ``idle``...), "run ended: <reason>"
  along the top of the lane, and the same in the title, so a stretch with no owner is explained;
* writes of one instant share one mark, with their count beside it (``×5``);
* the node's faults: crash (red line), down until its restart (grey), restart (green
  triangle), pause (hatched), clock step (purple dashed);
* the network's cuts (``sim.viz.cuts``): a pale band across every lane per spell of cut links,
  from its ``fault.partition`` to the ``fault.reconnect`` or ``fault.heal`` that made its links
  whole (overlapping spells share one band, and the legend says how many), and above the lanes a
  strip naming each cut once, with a mark per spell, packed in rows so that no name overlaps another.

The title says which key and what happened to its ownership, in one line.

The spans, handoff rounds and the title's story come from ``sim.viz.data.ownership``, the cuts from
``sim.viz.data.cuts``; this module only draws them.
"""

from __future__ import annotations

import textwrap
from collections import Counter
from collections.abc import Iterable
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.text import Annotation, Text

from sim.trace import Row, Trace
from sim.viz.cuts import band_handle, draw_bands, name_cuts
from sim.viz.data.cuts import spells
from sim.viz.data.keys import key_label
from sim.viz.data.nodes import node_events
from sim.viz.data.ownership import (
    SAID_ENDS,
    cluster_nodes,
    end_words,
    epoch_spans,
    handoff_rounds,
    key_marks,
    ownership_story,
    select_key,
)
from sim.viz.data.timebase import end_ns, fmt_signed, time_unit
from sim.viz.draw import declutter, fault_handles, label, outside_legend, style_node_lanes
from sim.viz.palette import BLUE, FONT, GREEN, GREY, INK, LIGHT_GREY, ORANGE, PURPLE, SKY, SMALL, VERMILLION, key_style, text_colour_on
from sim.viz.spacetime import keep_free

__all__ = ["ownership_chart"]

_DROP_GREY = "#6E6E6E"

# lane geometry (y grows downwards, one lane per node, centred on its index)
_LANE = 0.47
_MARKS = -0.41  # crash / restart / clock labels, along the top of the lane
_WRITES = (-0.34, -0.20)  # the writes row, above the span: state writes on top, next-due writes under them
_BAR = (-0.16, 0.14)  # the epoch span
_FIRED = 0.22  # the firings row, under the span
_DROPPED = 0.32  # dropped messages
_HANDOFF = (0.38, 0.45)  # the handoff band, at the bottom of the lane
_SCHEDULES_PAGE = "@schedules"


def ownership_chart(
    trace: Trace,
    actor: str | None = None,
    key: str | None = None,
    ax: Axes | None = None,
    *,
    title: str | None = None,
    nodes: Iterable[str] | None = None,
) -> Figure:
    """The ownership chart of one key (default: the key whose owner epoch changed most, among the program's keys:
    the runtime's own, such as cron claim keys, are drawn only when asked for by ``actor``/``key``).

    ``actor`` may be the type's full name (``module:qualname``) or its short name. Raises
    ``ValueError`` naming the keys that have an owner epoch when the requested one has none.
    """
    actor_name, key_name = select_key(trace, actor, key)
    spans = epoch_spans(trace, actor_name, key_name)
    lanes = list(nodes) if nodes is not None else cluster_nodes(trace)
    for span in spans:
        if span.node not in lanes:
            lanes.append(span.node)
    row_of = {n: i for i, n in enumerate(lanes)}
    marks = key_marks(trace, actor_name, key_name, row_of)
    end = end_ns(trace)
    unit = time_unit(end / 1e9)
    end_x = unit.x(end)
    events = node_events(trace)
    parts = spells(trace)

    own = ax is None
    if ax is None:
        fig = Figure(figsize=(12.5, 1.8 + 1.4 * len(lanes)), layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.figure  # type: ignore[assignment]
    labels: list[Annotation] = []

    # lanes and partitions behind everything
    for node, y in row_of.items():
        ax.axhspan(y - _LANE, y + _LANE, color="#F5F5F5", lw=0, zorder=0)
    draw_bands(ax, parts, unit)  # a band across every lane; the cuts are named above the axes once laid out

    # node faults
    for node, y in row_of.items():
        ev = events.get(node)
        if ev is None:
            continue
        for s in ev.down:
            ax.add_patch(Rectangle((unit.x(s.start_ns), y - _LANE), unit.x(s.end_ns - s.start_ns), 2 * _LANE, facecolor=LIGHT_GREY, edgecolor="none", zorder=0.5, gid="down"))
        for s in ev.paused:
            ax.add_patch(Rectangle((unit.x(s.start_ns), y - _LANE), unit.x(s.end_ns - s.start_ns), 2 * _LANE, facecolor="none", edgecolor=GREY, hatch="///", lw=0, zorder=0.5, gid="paused"))
            labels.append(label(ax, unit.x(s.start_ns), y + _MARKS, "paused", colour="#555555", va="center"))
        for t in ev.crashes:
            ax.vlines(unit.x(t), y - _LANE, y + _LANE, color=VERMILLION, lw=2.2, zorder=4, gid="crash")
            labels.append(label(ax, unit.x(t), y + _MARKS, "crash", colour=VERMILLION, weight="bold", va="center"))
        if ev.restarts:
            xs = [unit.x(t) for t, _ in ev.restarts]
            ax.scatter(xs, [y + _MARKS] * len(xs), marker="^", s=70, color=GREEN, edgecolors="white", linewidths=0.7, zorder=5, gid="restart")
            for x, (_, inc) in zip(xs, ev.restarts):
                labels.append(label(ax, x, y + _MARKS, "restart" if inc is None else f"restart #{inc}", colour=GREEN, weight="bold", va="center", dx=6))
        for t, _seq, delta in ev.steps:
            ax.vlines(unit.x(t), y - _LANE, y + _LANE, color=PURPLE, lw=1.6, ls="--", zorder=4, gid="clock.step")
            labels.append(label(ax, unit.x(t), y + _MARKS, f"clock {fmt_signed(delta / 1e6)}", colour="#9E4A7E", weight="bold", va="center"))

    # handoff rounds
    rounds = handoff_rounds(trace)
    for node, spans_of_node in rounds.items():
        if node not in row_of:
            continue
        y = row_of[node]
        for start, stop in spans_of_node:
            width = max(unit.x(stop) - unit.x(start), end_x * 0.003)
            ax.add_patch(Rectangle((unit.x(start), y + _HANDOFF[0]), width, _HANDOFF[1] - _HANDOFF[0], facecolor=SKY, edgecolor="none", zorder=2, gid="handoff"))

    # epoch spans
    bar_texts: list[tuple[Rectangle, str, str | None]] = []  # (bar, text, colour: None = readable on the bar)
    for i, span in enumerate(spans):
        colour, _ = key_style(i)
        y = row_of[span.node]
        x0 = unit.x(span.start_ns)
        x_stale = unit.x(span.superseded_ns) if span.superseded_ns is not None else None
        x1 = unit.x(span.end_ns)
        held_to = x_stale if x_stale is not None else x1
        width = max(held_to - x0, end_x * 0.003)
        rect = Rectangle((x0, y + _BAR[0]), width, _BAR[1] - _BAR[0], facecolor=colour, edgecolor="white", lw=0.6, zorder=2.2, gid="epoch")
        ax.add_patch(rect)
        if x_stale is not None:
            stale = Rectangle((x_stale, y + _BAR[0]), max(x1 - x_stale, end_x * 0.003), _BAR[1] - _BAR[0], facecolor="white", edgecolor=colour,
                              hatch="////", lw=1.2, zorder=2.2, gid="stale")
            ax.add_patch(stale)
            bar_texts.append((stale, "stale: fenced", VERMILLION))
        found = f"found v{span.found}" if span.found else "found nothing"
        bar_texts.append((rect, f"epoch {span.name}\n{found}", None))

    # writes (above the span), firings (on it), dropped messages
    fenced, other_failed, state_writes, due_writes = marks.fenced, marks.other_failed, marks.state_writes, marks.due_writes
    half = (_WRITES[0] + _WRITES[1]) / 2
    for rows, colour, gid, (lo, hi) in ((state_writes, INK, "write.state", (_WRITES[0], half - 0.005)),
                                        (due_writes, BLUE, "write.schedules", (half + 0.005, _WRITES[1]))):
        if rows:
            ax.vlines([unit.x(r.t_ns) for r in rows], [row_of[r.node] + lo for r in rows],
                      [row_of[r.node] + hi for r in rows], color=colour, lw=1.5, zorder=3, gid=gid)
    ymid = (_WRITES[0] + _WRITES[1]) / 2
    if fenced:
        ax.scatter([unit.x(r.t_ns) for r in fenced], [row_of[r.node] + ymid for r in fenced], marker="X", s=52, color=VERMILLION,
                   edgecolors="white", linewidths=0.5, zorder=3.5, gid="write.fenced")
    if other_failed:
        ax.scatter([unit.x(r.t_ns) for r in other_failed], [row_of[r.node] + ymid for r in other_failed], marker="o", s=30, facecolors="white",
                   edgecolors=VERMILLION, linewidths=1.2, zorder=3.4, gid="write.failed")
    for span in spans:
        if span.ended_by in SAID_ENDS:
            words = end_words(span, fenced).replace(": ", " (", 1) + (")" if ": " in end_words(span, fenced) else "")
            labels.append(label(ax, unit.x(span.end_ns), row_of[span.node] + _MARKS, f"run ended: {words}", colour="#555555", va="center", dx=3))
    for rows, colour in ((fenced, VERMILLION), (other_failed, VERMILLION)):  # writes of one instant share one mark: count them
        for (node, t), n in Counter((r.node, r.t_ns) for r in rows).items():
            if n > 1:
                labels.append(label(ax, unit.x(t), row_of[node] + ymid, f"×{n}", colour=colour, weight="bold", va="center", dx=5))
    first_fired, repeated = marks.first_fired, marks.repeated
    dense = marks.fired > 60
    if first_fired:
        ax.scatter([unit.x(r.t_ns) for r in first_fired], [row_of[r.node] + _FIRED for r in first_fired], marker="o", s=14 if dense else 30,
                   color=INK, edgecolors="white", linewidths=0 if dense else 0.6, zorder=4.3, gid="schedule.fired")
    if repeated:
        ax.scatter([unit.x(r.t_ns) for r in repeated], [row_of[r.node] + _FIRED for r in repeated], marker="D", s=60, color=ORANGE,
                   edgecolors=INK, linewidths=0.7, zorder=4.4, gid="schedule.repeat")
        runs: dict[str, list[Row]] = {}
        for r in repeated:  # one label per node: where its repeats begin, with their number
            runs.setdefault(r.node, []).append(r)
        for node, rs in runs.items():
            text = "repeat" if len(rs) == 1 else f"{len(rs)} repeats"
            labels.append(label(ax, unit.x(rs[0].t_ns) - end_x * 0.006, row_of[node] + _FIRED, text, colour="#8A5A00", weight="bold", va="center", ha="right"))
        if len(repeated) <= 8:  # few: join each repeat to the first firing of its due
            first_of = {r.get("due_us"): r for r in reversed(first_fired)}
            for r in repeated:
                origin = first_of.get(r.get("due_us"))
                if origin is not None:
                    ax.annotate("", xy=(unit.x(r.t_ns), row_of[r.node] + _FIRED), xytext=(unit.x(origin.t_ns), row_of[origin.node] + _FIRED),
                                arrowprops={"arrowstyle": "-|>", "color": ORANGE, "lw": 1.3, "ls": "--", "shrinkA": 4, "shrinkB": 6},
                                zorder=3.65, gid="repeat.link")
    caught = marks.caught
    optional: list[Annotation] = []  # late firings, then drops: kept only where they hide no other label
    for r in caught[:6]:  # a late firing: the occurrences it skipped (one delivery, no burst)
        optional.append(label(ax, unit.x(r.t_ns), row_of[r.node] + _DROPPED, f"late: {r.get('skipped')} skipped", colour="#555555", va="center", dx=6))
    dropped = marks.dropped
    if dropped:
        by_place: Counter[tuple[str, int]] = Counter((r.node, r.t_ns) for r in dropped)
        xs = [unit.x(t) for _, t in by_place]
        ys = [row_of[n] + _DROPPED for n, _ in by_place]
        ax.scatter(xs, ys, marker="x", s=34, color=_DROP_GREY, linewidths=1.4, zorder=4.5, gid="message.dropped")
        for (node, t), n in by_place.most_common(1):  # the largest group only, or the labels pile up
            what = {str(r.get("message")) for r in dropped if r.node == node and r.t_ns == t}
            text = f"{n} {'/'.join(sorted(what))} dropped" if n > 1 else f"{'/'.join(sorted(what))} dropped"
            optional.append(label(ax, unit.x(t), row_of[node] + _DROPPED, text, colour=_DROP_GREY, va="center", dx=6))

    # axes
    pad = end_x * 0.01
    ax.set_xlim(-pad, end_x + pad if end_x > 0 else 1)
    ax.set_ylim(len(lanes) - 0.5, -0.5)
    ax.set_yticks(range(len(lanes)), lanes, fontsize=FONT)
    style_node_lanes(ax, unit, trace.time_axis)
    short = key_label(actor_name, key_name)
    story = ownership_story(trace, spans, unit, fenced, len(repeated))
    # long node ids (a real cluster's HOST:PORT) would run the story off the figure: wrap each of its lines
    heading = title or "\n".join(textwrap.fill(part, 115) for part in f"{short}: {story}".split("\n"))
    heading_text = ax.set_title(heading, fontsize=FONT + 1.5, loc="left", pad=8)

    handles: list[Any] = [Patch(facecolor=key_style(0)[0], edgecolor="white", label="holds the owner epoch\n(one colour per epoch)")]
    if any(s.superseded_ns is not None for s in spans):
        handles.append(Patch(facecolor="white", edgecolor=key_style(0)[0], hatch="////", label="stale: a newer epoch exists,\nits writes are fenced"))
    if state_writes:
        handles.append(Line2D([], [], color=INK, marker="|", ms=9, mew=1.4, ls="", label="state write confirmed (quorum)"))
    if due_writes:
        handles.append(Line2D([], [], color=BLUE, marker="|", ms=9, mew=1.4, ls="", label="next-due write confirmed\n(@schedules page)"))
    if fenced:
        handles.append(Line2D([], [], ls="", marker="X", ms=8, color=VERMILLION, mec="white", label="write fenced"))
    if other_failed:
        handles.append(Line2D([], [], ls="", marker="o", ms=6, mfc="white", mec=VERMILLION, mew=1.2, label="write failed (no quorum)"))
    if first_fired:
        handles.append(Line2D([], [], ls="", marker="o", ms=6, color=INK, mec="white", label="schedule fired"))
    if repeated:
        handles.append(Line2D([], [], ls="", marker="D", ms=7, color=ORANGE, mec=INK, label="due fired again (repeat)"))
    if dropped:
        handles.append(Line2D([], [], ls="", marker="x", ms=7, color=_DROP_GREY, mew=1.4, label="message dropped\n(never handled)"))
    if any(node in row_of for node in rounds):
        handles.append(Patch(facecolor=SKY, label="handoff round\n(pulls replicas from peers)"))
    handles += fault_handles((events[n] for n in lanes if n in events), "restart (empty memory)")
    if parts:
        handles.append(band_handle(parts))
    ax.legend(handles=handles, fontsize=SMALL, borderaxespad=0, **outside_legend(fig, own))

    # span labels: inside the span when they fit; else after it, in full or as the bare epoch, when the lane is free there
    fig.draw_without_rendering()
    renderer = fig._get_renderer()  # type: ignore[attr-defined]
    if title is None:
        heading = _fit_heading(fig, ax, heading_text, renderer, f"{short}: {story}")
    bars = [rect for rect, _, _ in bar_texts]
    for rect, text, text_colour in bar_texts:
        x0, y0, h = rect.get_x(), rect.get_y(), rect.get_height()
        fill = _hex(rect.get_facecolor())
        inside = ax.text(x0 + rect.get_width() / 2, y0 + h / 2, text, ha="center", va="center", fontsize=SMALL, zorder=3.9,
                         color=text_colour or text_colour_on(fill), fontweight="bold" if text_colour else "normal", clip_on=True, gid="span.label",
                         linespacing=1.1, bbox={"boxstyle": "square,pad=0.1", "facecolor": "white", "edgecolor": "none", "alpha": 0.85} if text_colour else None)
        inside.set_in_layout(False)
        box = inside.get_window_extent(renderer)
        if box.width + 6 <= rect.get_window_extent(renderer).width:
            continue
        inside.remove()
        x_end = x0 + rect.get_width()
        after = [b.get_x() for b in bars if b is not rect and abs(b.get_y() - y0) < 1e-9 and b.get_x() >= x_end]
        room = (ax.transData.transform((min(after), 0))[0] if after else ax.get_window_extent(renderer).x1) - ax.transData.transform((x_end, 0))[0]
        for candidate in (text.replace("\n", ", "), text.split("\n")[0].removeprefix("epoch ")):
            ann = label(ax, x_end, y0 + h / 2, candidate, colour=text_colour or INK, va="center", dx=4)
            if not after or ann.get_window_extent(renderer).width + 8 <= room:
                ann.set_gid("span.label")
                labels.append(ann)
                break
            ann.remove()
    declutter(fig, labels, max_levels=3)
    keep_free(fig, labels, optional)
    strip = name_cuts(ax, parts, unit, renderer)  # after the layout: the names are packed by their width on the canvas
    if strip:
        ax.set_title(heading, fontsize=FONT + 1.5, loc="left", pad=8 + strip)
    return fig


def _fit_heading(fig: Figure, ax: Axes, heading: Text, renderer: Any, text: str) -> str:
    """The story wrapped narrower, 5 characters at a time, until the title is no wider than the axes (the legend is beside them).

    115 characters fit the axes of most stories, but characters differ in width: a line of wide ones ran
    past the axes into the legend column (swarm seed 0). A title that fits is left as it was.
    """
    width = 115
    while heading.get_window_extent(renderer).x1 > ax.get_window_extent(renderer).x1 + 1 and width > 40:
        width -= 5
        heading.set_text("\n".join(textwrap.fill(part, width) for part in text.split("\n")))
        fig.draw_without_rendering()
    return heading.get_text()


def _hex(rgba: Any) -> str:
    r, g, b = (int(round(c * 255)) for c in tuple(rgba)[:3])
    return f"#{r:02X}{g:02X}{b:02X}"
