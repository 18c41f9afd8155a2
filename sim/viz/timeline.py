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
numbered along the top and listed under the axis.

This module also holds the helpers the other views share (palette, time unit, faults per
node, the node wall-clock map, label decluttering).
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.text import Annotation
from matplotlib.transforms import Bbox, blended_transform_factory

from sim.trace import Row, Trace
from sim.viz.keys import is_internal

__all__ = ["activation_timeline"]

# ---------------------------------------------------------------------------------------
# shared look: Okabe-Ito (colour-blind safe) for meaning, keys get the rest
# ---------------------------------------------------------------------------------------

BLUE = "#0072B2"
SKY = "#56B4E9"
ORANGE = "#E69F00"
GREEN = "#009E73"
YELLOW = "#F0E442"
VERMILLION = "#D55E00"
PURPLE = "#CC79A7"
GREY = "#8C8C8C"
LIGHT_GREY = "#D9D9D9"
GRID_GREY = "#C8C8C8"
INK = "#222222"

# Keys: Okabe-Ito without vermillion (kept for failures/crashes) and black, then Paul Tol's
# "muted" set. Beyond these, colours repeat with a hatch so two keys never look identical.
KEY_COLOURS = (
    BLUE, ORANGE, GREEN, PURPLE, SKY, YELLOW,
    "#332288", "#88CCEE", "#117733", "#DDCC77", "#882255", "#44AA99", "#999933", "#AA4499",
)
KEY_HATCHES = ("", "..", "xx", "\\\\")

FONT = 10
SMALL = 8.5


@dataclass(frozen=True, slots=True)
class TimeUnit:
    """The x-axis unit: its name and how many seconds it holds."""

    name: str
    seconds: float

    def x(self, t_ns: float) -> float:
        return t_ns / 1e9 / self.seconds


def time_unit(span_s: float) -> TimeUnit:
    """Seconds up to 2 min, minutes up to 2 h, hours up to 3 days, then days."""
    if span_s <= 120:
        return TimeUnit("s", 1.0)
    if span_s <= 2 * 3600:
        return TimeUnit("min", 60.0)
    if span_s <= 3 * 86400:
        return TimeUnit("h", 3600.0)
    return TimeUnit("d", 86400.0)


def fmt_duration(seconds: float) -> str:
    """A short human duration in the largest unit that keeps it round: '250 ms', '90 s', '1 min', '2.5 h', '1 d'."""
    sign = "-" if seconds < 0 else ""
    s = abs(seconds)
    units = (("d", 86400.0), ("h", 3600.0), ("min", 60.0), ("s", 1.0), ("ms", 1e-3))
    for name, size in units:
        value = s / size
        if 1 <= value < 1000 and abs(value * 10 - round(value * 10)) < 1e-6:
            return f"{sign}{value:g} {name}"
    for name, size in units:  # not round in any unit: the largest unit it reaches, 3 digits
        if s >= size:
            return f"{sign}{s / size:.3g} {name}"
    return f"{sign}{s * 1e6:.3g} µs"


def fmt_signed(seconds: float) -> str:
    return ("+" if seconds >= 0 else "") + fmt_duration(seconds)


def key_style(index: int) -> tuple[str, str]:
    """Colour and hatch of the index-th key (colours cycle first, then hatches)."""
    colour = KEY_COLOURS[index % len(KEY_COLOURS)]
    hatch = KEY_HATCHES[(index // len(KEY_COLOURS)) % len(KEY_HATCHES)]
    return colour, hatch


def text_colour_on(colour: str) -> str:
    """Black or white, whichever reads better on ``colour``."""
    r, g, b = (int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5))
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"


# ---------------------------------------------------------------------------------------
# faults per node, and each node's wall clock
# ---------------------------------------------------------------------------------------


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


def end_ns(trace: Trace) -> int:
    """The latest true time in the trace (rows are normally in time order; this does not rely on it)."""
    return max((row.t_ns for row in trace.rows), default=0)


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


class WallMap:
    """Each node's wall clock as an offset from true time, piecewise constant between rows.

    The offset of a node is ``wall_us - t_ns/1000`` of its rows; a ``clock.step`` adds its
    ``delta_us`` to the offset just before it (whatever wall time the step row itself carries).
    ``origin_us`` is the wall time at true time 0 of the reference clock: the median of every
    node's first offset, so a single skewed node does not move everyone's axis.
    """

    def __init__(self, trace: Trace) -> None:
        self._points: dict[str, list[tuple[int, int, int]]] = {}  # node -> [(t_ns, seq, offset_us)]
        firsts: list[int] = []
        for row in trace.rows:
            points = self._points.setdefault(row.node, [])
            if row.kind == "clock.step":
                before = points[-1][2] if points else None
                if before is not None:
                    points.append((row.t_ns, row.seq, before + int(row.get("delta_us", 0) or 0)))
                continue
            if row.wall_us is None:
                continue
            offset = row.wall_us - row.t_ns // 1000
            if not points:
                firsts.append(offset)
            points.append((row.t_ns, row.seq, offset))
        self.origin_us: int | None = int(statistics.median_low(firsts)) if firsts else None

    def offset_at(self, node: str, t_ns: int, seq: int | None = None) -> int:
        """The node's wall-minus-true offset (µs) at ``t_ns`` (just before row ``seq`` if given)."""
        points = self._points.get(node) or []
        if not points:
            return self.origin_us or 0
        probe = (t_ns, seq if seq is not None else 1 << 62)
        i = bisect.bisect_left(points, probe, key=lambda p: (p[0], p[1])) if seq is not None else bisect.bisect_right(points, probe, key=lambda p: (p[0], p[1]))
        return points[max(i - 1, 0)][2]

    def wall_us(self, node: str, t_ns: int, seq: int | None = None) -> int:
        return t_ns // 1000 + self.offset_at(node, t_ns, seq)


# ---------------------------------------------------------------------------------------
# labels that do not overlap
# ---------------------------------------------------------------------------------------


def label(
    ax: Axes,
    x: float,
    y: float,
    text: str,
    *,
    colour: str = INK,
    y_axes: bool = False,
    size: float = SMALL,
    down: bool = True,
    weight: str = "normal",
    ha: str = "left",
    va: str | None = None,
    dy: float = 0,
    dx: float = 2.5,
) -> Annotation:
    """A small label just right of ``x`` (or centred on it); ``declutter`` later moves it off its neighbours.

    ``down`` says where it goes if it collides: further down (True) or up (False); its
    vertical anchor is then its top or its bottom unless ``va`` says otherwise.
    """
    transform = blended_transform_factory(ax.transData, ax.transAxes) if y_axes else ax.transData
    ann = ax.annotate(
        text,
        xy=(x, y),
        xycoords=transform,
        xytext=(dx if ha == "left" else 0, dy),
        textcoords="offset points",
        ha=ha,
        va=va or ("top" if down else "bottom"),
        fontsize=size,
        color=colour,
        fontweight=weight,
        zorder=6,
        annotation_clip=False,
        bbox={"boxstyle": "square,pad=0.08", "facecolor": "white", "edgecolor": "none", "alpha": 0.8},
    )
    ann.set_in_layout(False)
    ann._casty_down = down  # type: ignore[attr-defined]
    return ann


def declutter(fig: Figure, labels: Sequence[Annotation], max_levels: int = 4) -> None:
    """Keep labels inside their axes and off each other: flip left at the right edge, then stack in levels."""
    if not labels:
        return
    fig.draw_without_rendering()
    renderer = fig._get_renderer()  # type: ignore[attr-defined]
    placed: list[Bbox] = []
    for ann in sorted(labels, key=lambda a: a.get_window_extent(renderer).x0):
        ax_box = ann.axes.get_window_extent(renderer) if ann.axes is not None else None
        box = ann.get_window_extent(renderer)
        gap = max(abs(ann.xyann[0]), 2.5)
        if ax_box is not None and box.x1 > ax_box.x1:
            ann.set_horizontalalignment("right")
            ann.xyann = (-gap, ann.xyann[1])
            box = ann.get_window_extent(renderer)
        elif ax_box is not None and box.x0 < ax_box.x0:
            ann.set_horizontalalignment("left")
            ann.xyann = (gap, ann.xyann[1])
            box = ann.get_window_extent(renderer)
        step_px = box.height + 1.5
        sign = -1 if getattr(ann, "_casty_down", True) else 1
        level = 0
        while level < max_levels and any(box.translated(0, sign * level * step_px).overlaps(p) for p in placed):
            level += 1
        if level:
            ann.xyann = (ann.xyann[0], ann.xyann[1] + sign * level * step_px * 72 / fig.dpi)
        placed.append(box.translated(0, sign * level * step_px))


def add_notes(fig: Figure, ax: Axes, trace: Trace, unit: TimeUnit, where: str = "top", footer: bool = True) -> list[Annotation]:
    """Number the ``note`` rows along the top (or inside the bottom) of ``ax`` and list them under the figure.

    Without ``footer`` (the figure is someone else's) the text goes next to its number instead,
    shortened; those labels are returned for ``declutter``.
    """
    notes = trace.of("note")
    if not notes:
        return []
    inline: list[Annotation] = []
    blend = blended_transform_factory(ax.transData, ax.transAxes)
    lines = []
    for i, row in enumerate(notes, 1):
        x = unit.x(row.t_ns)
        ax.axvline(x, color=GREY, lw=0.8, ls=":", zorder=1, gid="note")
        ax.annotate(
            str(i), xy=(x, 1.0 if where == "top" else 0.0), xycoords=blend, xytext=(0, 3), textcoords="offset points",
            ha="center", va="bottom", fontsize=7.5, color="white", annotation_clip=False, zorder=7,
            bbox={"boxstyle": "circle,pad=0.2", "facecolor": GREY, "edgecolor": "none"},
        )
        text = str(row.get("text", ""))
        if not footer:
            short = text if len(text) <= 40 else text[:37] + "..."
            inline.append(label(ax, x, 1.0 if where == "top" else 0.0, short, colour="#444444", y_axes=True, size=7.5,
                                down=False, va="bottom", dy=3 if where == "top" else 4, dx=8))
            continue
        text = text if len(text) <= 100 else text[:97] + "..."
        lines.append(f"({i}) at t = {fmt_duration(row.t_ns / 1e9) if row.t_ns else '0 s'}: {text}")
    if footer:
        shown = lines[:8] + ([f"... and {len(lines) - 8} more notes"] if len(lines) > 8 else [])
        fig.text(0.01, 0.008, "\n".join(shown), ha="left", va="bottom", fontsize=SMALL, color="#444444", linespacing=1.35)
    return inline


def fault_handles(shown: Iterable[NodeEvents], restart_label: str = "restart") -> list[Any]:
    """Legend entries for the faults drawn on the lanes of ``shown`` nodes (crash, down, restart, pause, clock step), only those present.

    One set of marks for every view that draws node lanes, so a crash looks the same everywhere.
    """
    present = list(shown)
    handles: list[Any] = []
    if any(ev.crashes for ev in present):
        handles.append(Line2D([], [], color=VERMILLION, lw=2, label="crash"))
    if any(ev.down for ev in present):
        handles.append(Patch(facecolor=LIGHT_GREY, label="down (crash to restart)"))
    if any(ev.restarts for ev in present):
        handles.append(Line2D([], [], ls="", marker="^", ms=8, color=GREEN, mec="white", label=restart_label))
    if any(ev.paused for ev in present):
        handles.append(Patch(facecolor="white", edgecolor=GREY, hatch="///", label="paused"))
    if any(ev.steps for ev in present):
        handles.append(Line2D([], [], color=PURPLE, lw=1.6, ls="--", label="clock step"))
    return handles


def style_node_lanes(ax: Axes, unit: TimeUnit, time_axis: str = "true time") -> None:
    """The axes of a chart with one lane per node along true time: quiet spines, a light vertical grid, named axes.

    ``time_axis`` names the x axis: ``Trace.time_axis`` ("true time" in a simulated run, the
    wall clocks' time in a real cluster's merged files, which has no true time).
    """
    ax.tick_params(axis="y", length=0)
    ax.tick_params(axis="x", labelsize=SMALL + 0.5)
    for spine in ("left", "right", "top"):
        ax.spines[spine].set_visible(False)
    ax.set_xlabel(f"{time_axis} since start ({unit.name})", fontsize=FONT)
    ax.set_ylabel("node", fontsize=FONT)
    ax.grid(axis="x", color="#E6E6E6", lw=0.8, zorder=0)
    ax.set_axisbelow(True)


def outside_legend(fig: Figure, own: bool) -> dict[str, Any]:
    """Legend placement: right of the axes when the layout makes room for it, else inside where it hides least."""
    from matplotlib.layout_engine import ConstrainedLayoutEngine

    if own or isinstance(fig.get_layout_engine(), ConstrainedLayoutEngine):
        return {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "frameon": False}
    return {"loc": "best", "framealpha": 0.9}


def wall_clock_name(origin_us: int | None) -> str:
    if origin_us is None:
        return "start"
    return datetime.fromtimestamp(origin_us / 1e6, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def entity_names(entities: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """Labels of (actor, key): the key alone when one actor type, else 'actor/key'."""
    entities = list(dict.fromkeys(entities))
    actors = {a for a, _ in entities}
    return {e: (e[1] if len(actors) <= 1 else f"{e[0].split(':')[-1]}/{e[1]}") for e in entities}


# ---------------------------------------------------------------------------------------
# the activation timeline
# ---------------------------------------------------------------------------------------

_SAID_ENDS = ("cancelled", "become")  # run ends written at the bar's end (idle, failed, crash have their own look)
_NODE_KINDS = ("activation.", "fault.", "clock.step", "schedule.", "write.", "message.dropped")


@dataclass(slots=True)
class _Bar:
    node: str
    entity: tuple[str, str]
    lease: Any
    start_ns: int
    end_ns: int = -1
    how: str = "open"  # ended reason, "failed", "crash", "superseded", "end of trace"
    slot: int = 0
    behavior: str | None = None  # the run's behaviour when ``become`` made it another type than the key's own


def _activation_bars(trace: Trace, keys: set[str] | None) -> tuple[list[_Bar], list[tuple[Row, _Bar | None]]]:
    """Bars (one per activation run) and the failures, each with the bar it ended (if any)."""
    bars: list[_Bar] = []
    failures: list[tuple[Row, _Bar | None]] = []
    open_: dict[tuple[str, str, str], _Bar] = {}

    def close(ident: tuple[str, str, str], t_ns: int, how: str) -> _Bar | None:
        bar = open_.pop(ident, None)
        if bar is not None:
            bar.end_ns, bar.how = t_ns, how
        return bar

    for row in trace.rows:
        kind = row.kind
        if kind == "fault.crash":
            for ident in [i for i in open_ if i[0] == row.node]:
                close(ident, row.t_ns, "crash")
            continue
        if not kind.startswith("activation."):
            continue
        entity = (str(row.get("actor")), str(row.get("key")))
        if keys is not None and entity[1] not in keys:
            continue
        if keys is None and is_internal(entity[0]):  # the runtime's own keys (cron claims): drawn only when named
            continue
        ident = (row.node, *entity)
        if kind == "activation.started":
            close(ident, row.t_ns, "superseded")
            bar = _Bar(row.node, entity, row.get("lease"), row.t_ns)
            behavior = row.get("behavior")
            if behavior is not None and str(behavior) != entity[0]:
                bar.behavior = str(behavior).split(":")[-1]
            open_[ident] = bar
            bars.append(bar)
        elif kind == "activation.ended":
            close(ident, row.t_ns, str(row.get("reason", "ended")))
        elif kind == "activation.failed":
            running = open_.get(ident)
            if running is not None and (row.get("lease") is None or running.lease is None or row.get("lease") == running.lease):
                failures.append((row, close(ident, row.t_ns, "failed")))
            else:  # not this run's failure (lease 0: the activation could not even start): a marker only
                failures.append((row, running))
    last = end_ns(trace)
    for ident in list(open_):
        close(ident, last, "end of trace")
    return bars, failures


def _assign_slots(bars: list[_Bar]) -> dict[str, int]:
    """Stack overlapping bars of a node in sub-rows; a key goes back to its previous sub-row when free."""
    slots_per_node: dict[str, int] = {}
    by_node: dict[str, list[_Bar]] = {}
    for bar in bars:
        by_node.setdefault(bar.node, []).append(bar)
    for node, node_bars in by_node.items():
        free_at: list[int] = []  # slot -> end of its last bar
        last_slot: dict[tuple[str, str], int] = {}
        for bar in sorted(node_bars, key=lambda b: (b.start_ns, b.end_ns)):
            preferred = last_slot.get(bar.entity)
            slot: int
            if preferred is not None and free_at[preferred] <= bar.start_ns:
                slot = preferred
            else:
                unclaimed = next((i for i, end in enumerate(free_at) if end <= bar.start_ns and i not in last_slot.values()), None)
                slot = unclaimed if unclaimed is not None else next((i for i, end in enumerate(free_at) if end <= bar.start_ns), len(free_at))
            if slot == len(free_at):
                free_at.append(0)
            free_at[slot] = max(bar.end_ns, bar.start_ns + 1)
            last_slot[bar.entity] = slot
            bar.slot = slot
        slots_per_node[node] = len(free_at)
    return slots_per_node


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
    bars, failures = _activation_bars(trace, key_filter)
    events = node_events(trace)
    with_events = {r.node for r in trace.rows if r.kind.startswith(_NODE_KINDS)}
    nodes = [n for n in trace.nodes() if n in with_events]  # not the world's own rows (notes, ...)
    slots = _assign_slots(bars)
    end = end_ns(trace)
    unit = time_unit(end / 1e9)
    notes = trace.of("note")

    # geometry: y grows downwards; node i occupies [top_i, top_i + _HEADER + slots_i]
    tops: dict[str, float] = {}
    y = 0.0
    for node in nodes:
        tops[node] = y
        y += _HEADER + max(slots.get(node, 1), 1) + _GAP
    total = max(y - _GAP, 1.0)

    footer_lines = min(len(notes), 8) + (1 if len(notes) > 8 else 0)
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
    by_row: dict[tuple[str, int], list[_Bar]] = {}
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
        return f"{r.get('key')}: " if len(keys_on.get(r.node, ())) > 1 else ""

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
                 pad=16 if notes else 6)  # room for the numbered note markers along the top
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
            keys_title = f"keys of {next(iter(actors)).split(':')[-1]}" if len(actors) == 1 else "actor/key"
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


def day_label(day: Any) -> str:
    """A report's day (whole days since the epoch, or an ISO date) as a short date, e.g. 'Jan 03'; anything else as is."""
    number = day_number(day)
    if number is not None:
        return (datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(days=number)).strftime("%b %d")
    return str(day)


def day_number(day: Any) -> int | None:
    """Whole days since the epoch of a report's day: an int as is, an ISO date ('2026-01-03') converted; else None."""
    if isinstance(day, int) and not isinstance(day, bool):
        return day
    if isinstance(day, str):
        try:
            return (datetime.fromisoformat(day).replace(tzinfo=timezone.utc).date() - datetime(1970, 1, 1).date()).days
        except ValueError:
            return None
    return None


def report_day(row: Row) -> Any:
    """The day a report row is about: ``day`` of a ``report.built`` row, ``details.day`` of an ``effect`` row."""
    if row.kind == "effect":
        details = row.get("details")
        return details.get("day") if isinstance(details, dict) else None
    return row.get("day")


def report_rows(trace: Trace) -> list[Row]:
    """The daily reports of a run: ``report.built`` rows, and ``effect`` rows (the effects ledger) whose details carry a day."""
    return [r for r in trace.rows if r.kind == "report.built" or (r.kind == "effect" and report_day(r) is not None)]


def omitted_reports(reports: Sequence[Row]) -> list[tuple[Row, Any]]:
    """Days missing between the first and the last report of each key, with the report row before the gap.

    Each comes back as ``(row, day)``: ``row`` a copy of the last report before the gap, moved to where
    the missing day's report was due (one period, the distance between two reported days, after it),
    so a chart can draw it on that node's row; ``day`` the missing day, as the reports spell days.
    """
    by_key: dict[Any, dict[int, Row]] = {}
    spelled_as_date: dict[Any, bool] = {}
    for r in reports:
        number = day_number(report_day(r))
        if number is None:
            continue
        by_key.setdefault(r.get("key"), {}).setdefault(number, r)
        spelled_as_date[r.get("key")] = isinstance(report_day(r), str)
    out: list[tuple[Row, Any]] = []
    for key, days in by_key.items():
        ordered = sorted(days)
        for before, after in zip(ordered, ordered[1:]):
            per_day = (days[after].t_ns - days[before].t_ns) / (after - before)
            for missing in range(before + 1, after):
                due = days[before].t_ns + int(per_day * (missing - before))
                spelled = (datetime(1970, 1, 1) + timedelta(days=missing)).date().isoformat() if spelled_as_date[key] else missing
                out.append((Row(days[before].seq, due, days[before].node, None, "report.omitted", {"key": key, "day": spelled}), spelled))
    return out
