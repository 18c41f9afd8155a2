"""Schedule catch-up chart: the nominal due grid against the actual deliveries of one schedule.

Two lanes share one x scale (time since the start of the run):

* **true time** (top axis): where each delivery really happened (``schedule.fired`` row time);
* **node wall clock** (bottom axis): the same delivery at the wall time the node read
  (``now_us``), measured from the run's reference wall clock at true time 0.

The light vertical lines are the nominal grid ``first due + k * every`` (wall times, taken
from ``schedule.armed``), drawn at the same place in both lanes: where they would fall on a
perfect clock. A delivery on a grid line in both lanes was on time; a grey whisker shows how
far a delivery was from its own due time. With a skewed or stepped clock the two lanes
disagree, and a dotted connector joins the two positions of the same delivery.

Skipped occurrences (``schedule.caught_up``: the ``skipped`` grid times between ``due_us``
and ``next_us``) are hollow red X's on the wall-clock lane, where the grid is defined. A due
delivered more than once (a crash or ownership change) is an orange diamond, "repeat".
Crash-to-restart (grey), pauses (hatched), restarts (green) and clock steps (purple; an arrow
over the skipped wall time in the wall lane) of the nodes that ran the schedule are drawn on
their rows (labelled above the true-time lane in up to two rows; faults too close to be labelled apart
share one label, "crash, restart #4" or "2 crashes, restarts #6-#7", so no label covers another); ``report.built`` rows of the key (and ``effect`` rows with a ``day`` detail) are black stars
with their day, and a day missing between two of them a hollow red star, "omitted".

``lanes="all"`` draws instead every periodic thing of the run, one lane each (a persisted
schedule, an activation timer, a node schedule, a cron tick): ``sim.viz.catchup_lanes``.

The schedule's rows and grid come from ``sim.viz.data.catchup``; this module only draws them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, Literal

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import ConnectionPatch, Rectangle
from matplotlib.text import Annotation

from sim.trace import Row, Trace
from sim.viz.data.catchup import MAX_GRID_POINTS, grid_dues, grid_segments, schedule_rows
from sim.viz.data.keys import key_label
from sim.viz.data.nodes import node_events
from sim.viz.data.notes import note_rows
from sim.viz.data.reports import day_label, omitted_reports, report_day, report_rows
from sim.viz.data.timebase import WallMap, end_ns, fmt_duration, fmt_signed, time_unit, wall_clock_name
from sim.viz.draw import add_notes, declutter, fault_handles, label, outside_legend
from sim.viz.palette import BLUE, FONT, GREEN, GREY, GRID_GREY, INK, LIGHT_GREY, ORANGE, PURPLE, SMALL, VERMILLION

__all__ = ["catchup_chart"]

_MAX_GRID_LINES = 240  # beyond this the grid would be a grey wash: not drawn (the legend says so)
_MAX_SKIP_MARKERS = 60  # beyond this a skipped stretch is one red bar
_LATE_PURPLE = "#9E4A7E"  # PURPLE darkened for text


def _lanes(ax: Axes | Sequence[Axes] | None, n_rows: int, footer: int) -> tuple[Figure, Axes, Axes]:
    if ax is None:
        lane_in = 0.75 + 0.55 * n_rows
        fig = Figure(figsize=(11.5, 1.9 + 2 * lane_in + footer * 0.17), layout="constrained")
        if footer:
            bottom = (footer * 0.17 + 0.1) / fig.get_figheight()
            fig.get_layout_engine().set(rect=(0, bottom, 1, 1 - bottom), hspace=0.02, h_pad=0.06)  # type: ignore[union-attr, call-arg]
        else:
            fig.get_layout_engine().set(hspace=0.02, h_pad=0.06)  # type: ignore[union-attr, call-arg]
        top, bottom_ax = fig.subplots(2, 1, sharex=True)
        return fig, top, bottom_ax
    if isinstance(ax, Axes):
        fig = ax.figure  # type: ignore[assignment]
        spec = ax.get_subplotspec()
        if spec is None:
            raise ValueError("catchup_chart needs an Axes made by add_subplot/subplots (it splits it into two lanes), or a pair of Axes")
        ax.remove()
        sub = spec.subgridspec(2, 1, hspace=0.05)
        top = fig.add_subplot(sub[0])
        return fig, top, fig.add_subplot(sub[1], sharex=top)
    top, bottom_ax = ax
    return top.figure, top, bottom_ax  # type: ignore[return-value]


def catchup_chart(
    trace: Trace,
    *,
    actor: str | None = None,
    key: str | None = None,
    schedule: str | None = None,
    ax: Axes | Sequence[Axes] | None = None,
    title: str | None = None,
    lanes: Literal["one", "all"] = "one",
    internal: bool = False,
) -> Figure:
    """The catch-up chart of one schedule (default: the first one that fired), or of every periodic thing.

    ``lanes="all"``: one lane per persisted schedule, activation timer, node schedule and cron
    tick along true time, each occurrence marked by the ledger's class (``sim.viz.catchup_lanes``);
    ``actor``/``key``/``schedule`` then keep only the lanes they name, and ``internal=True`` adds
    the runtime's own keys (cron claim keys, hidden by default).
    ``ax`` may be one Axes (split into the two lanes) or a pair (true-time lane, wall-clock lane).
    Raises ``ValueError`` when the trace has no ``schedule.*`` row for the requested schedule.
    """
    if lanes == "all":
        from sim.viz.catchup_lanes import catchup_lanes

        if ax is not None and not isinstance(ax, Axes):
            raise ValueError("catchup_chart(lanes='all') draws on one Axes, not a pair")
        return catchup_lanes(trace, internal=internal, actor=actor, key=key, schedule=schedule, ax=ax, title=title)
    if lanes != "one":
        raise ValueError(f"lanes must be 'one' or 'all', got {lanes!r}")
    found = schedule_rows(trace, actor, key, schedule)
    actor, key, name = found.ident
    rows, fired, caught, armed, cancelled = found.rows, found.fired, found.caught, found.armed, found.cancelled
    nodes = list(found.nodes)
    row_of = {n: i for i, n in enumerate(nodes)}
    wall = WallMap(trace)
    origin = wall.origin_us
    if origin is None:
        origin = int(fired[0].get("now_us")) - fired[0].t_ns // 1000 if fired else int(rows[0].get("due_us", 0) or 0)

    def fired_wall(row: Row) -> int:
        now = row.get("now_us")
        if now is not None:
            return int(now)
        return row.wall_us if row.wall_us is not None else wall.wall_us(row.node, row.t_ns)

    # extent (s since start) and unit
    end = end_ns(trace)
    end_true_s = end / 1e9
    wall_points_s = [(fired_wall(r) - origin) / 1e6 for r in fired]
    wall_points_s += [(wall.wall_us(n, end) - origin) / 1e6 for n in nodes]
    lo_s = min([0.0, *wall_points_s])
    hi_s = max([end_true_s, *wall_points_s, 1e-3])
    unit = time_unit(hi_s - lo_s)
    x_max_us = origin + int(hi_s * 1e6)
    segments = grid_segments(armed, fired, caught)
    grid_end = x_max_us
    if cancelled and (not armed or cancelled[-1].seq > armed[-1].seq) and cancelled[-1].get("reason") not in ("replaced",):
        last = cancelled[-1]
        grid_end = wall.wall_us(last.node, last.t_ns, last.seq)
    grid, grid_total = grid_dues(segments, grid_end)
    every = next((e for _, e, _ in reversed(segments) if e), None)
    intervals = list(dict.fromkeys(e for _, e, _ in segments))  # each grid's period in order (None: one-shot)

    def wx(wall_us: float) -> float:
        """Wall µs -> x in chart units."""
        return (wall_us - origin) / 1e6 / unit.seconds

    def tx(t_ns: int) -> float:
        return unit.x(t_ns)

    first_rows, repeat_rows, skipped_total = found.first, found.repeats, found.skipped

    noted = len(note_rows(trace))
    footer = min(noted, 8) + (1 if noted > 8 else 0)
    own = ax is None
    fig, ax_t, ax_w = _lanes(ax, len(nodes), footer)
    labels: list[Annotation] = []
    span = (hi_s - lo_s) / unit.seconds
    visible = span * 0.004  # smaller differences than this are not drawn as whiskers/connectors
    events = node_events(trace)
    faults: dict[str, list[tuple[float, str, Any]]] = {}  # node -> (x, kind, detail) of its faults, labelled together at the end

    for lane_ax, lane in ((ax_t, "true"), (ax_w, "wall")):
        def x_at(node: str, t_ns: int, seq: int | None = None, lane: str = lane) -> float:
            return tx(t_ns) if lane == "true" else wx(wall.wall_us(node, t_ns, seq))

        # node rows and world spans
        for node, y in row_of.items():
            lane_ax.axhspan(y - 0.42, y + 0.42, color="#F5F5F5", lw=0, zorder=0)
            ev = events.get(node)
            if ev is None:
                continue
            for s in ev.down:
                x0, x1 = x_at(node, s.start_ns), x_at(node, s.end_ns)
                lane_ax.add_patch(Rectangle((x0, y - 0.42), x1 - x0, 0.84, facecolor=LIGHT_GREY, edgecolor="none", zorder=0.5, gid="down"))
            for s in ev.paused:
                x0, x1 = x_at(node, s.start_ns), x_at(node, s.end_ns)
                lane_ax.add_patch(Rectangle((x0, y - 0.42), x1 - x0, 0.84, facecolor="none", edgecolor=GREY, hatch="///", lw=0, zorder=0.5, gid="paused"))
                if lane == "true":
                    faults.setdefault(node, []).append((x0, "paused", None))
            for t in ev.crashes:
                lane_ax.vlines(x_at(node, t), y - 0.42, y + 0.42, color=VERMILLION, lw=2, zorder=2.5, gid="crash")
                if lane == "true":
                    faults.setdefault(node, []).append((x_at(node, t), "crash", None))
            if ev.restarts:
                xs = [x_at(node, t) for t, _ in ev.restarts]
                lane_ax.scatter(xs, [y - 0.42] * len(xs), marker="^", s=60, color=GREEN, edgecolors="white", linewidths=0.6, zorder=5, gid="restart")
                if lane == "true":
                    for x, (_, inc) in zip(xs, ev.restarts):
                        faults.setdefault(node, []).append((x, "restart", inc))
            for t, seq, delta in ev.steps:
                if lane == "true":
                    lane_ax.vlines(tx(t), y - 0.42, y + 0.42, color=PURPLE, lw=1.8, ls="--", zorder=4, gid="clock.step")
                    faults.setdefault(node, []).append((tx(t), "clock", fmt_signed(delta / 1e6)))
                else:
                    before = wall.wall_us(node, t, seq)
                    after = before + delta
                    lane_ax.annotate("", xy=(wx(after), y - 0.3), xytext=(wx(before), y - 0.3), xycoords="data",
                                     arrowprops={"arrowstyle": "-|>", "color": PURPLE, "lw": 1.8, "shrinkA": 0, "shrinkB": 0}, zorder=4, gid="clock.step")
                    lane_ax.vlines([wx(before), wx(after)], y - 0.42, y + 0.42, color=PURPLE, lw=1, ls="--", zorder=4)
                    labels.append(label(lane_ax, min(wx(before), wx(after)), y - 0.44, f"clock jumps {fmt_signed(delta / 1e6)}", colour=_LATE_PURPLE, weight="bold", down=False))

        # the nominal grid
        gx = [wx(g) for g in grid]
        if grid and len(grid) <= _MAX_GRID_LINES:
            lane_ax.vlines(gx, -0.6, len(nodes) - 0.4, color=GRID_GREY, lw=0.9, zorder=1, gid="grid")

        # deliveries, their lateness, repeats
        def place(row: Row, lane: str = lane) -> float:
            return tx(row.t_ns) if lane == "true" else wx(fired_wall(row))

        # lateness = now - due on the node's clock: always on the wall lane; on the true lane
        # only where the node's clock agreed with true time (else the skew connector tells it)
        whisk = [(wx(int(r.get("due_us"))), place(r), row_of[r.node]) for r in fired
                 if lane == "wall" or abs(tx(r.t_ns) - wx(fired_wall(r))) <= visible]
        whisk = [(a, b, y) for a, b, y in whisk if abs(b - a) > visible]
        if whisk:
            lane_ax.hlines([y for _, _, y in whisk], [a for a, _, _ in whisk], [b for _, b, _ in whisk], color="#777777", lw=1.3, zorder=2, gid="lateness")
        dense = len(fired) > 150  # small dots without a white rim, or they wash out into a pale band
        if first_rows:
            lane_ax.scatter([place(r) for r in first_rows], [row_of[r.node] for r in first_rows], marker="o", s=10 if dense else 42, color=BLUE,
                            edgecolors="white", linewidths=0 if dense else 0.6, zorder=3, gid="delivered")
        if repeat_rows:
            lane_ax.scatter([place(r) for r in repeat_rows], [row_of[r.node] for r in repeat_rows], marker="D", s=48, color=ORANGE, edgecolors=INK, linewidths=0.6, zorder=3.5, gid="repeat")
            if lane == "true" and len(repeat_rows) <= 12:
                for r in repeat_rows:
                    labels.append(label(lane_ax, place(r), row_of[r.node] + 0.2, "repeat", colour="#8A5A00", down=True))

        # skipped occurrences, on the wall clock where the grid lives
        if lane == "wall" and caught:
            sx: list[float] = []
            sy: list[float] = []
            for r in caught:
                n = int(r.get("skipped", 0))
                due, nxt = int(r.get("due_us")), int(r.get("next_us"))
                step = (nxt - due) // (n + 1) if n >= 0 else 0
                if n <= 0:
                    continue
                first_us, last_us = due + step, due + step * n
                if n <= _MAX_SKIP_MARKERS:
                    sx += [wx(due + step * k) for k in range(1, n + 1)]
                    sy += [row_of[r.node]] * n
                else:  # too many to mark one by one: a red bar over the skipped stretch, X at both ends
                    lane_ax.hlines(row_of[r.node], wx(first_us), wx(last_us), color=VERMILLION, lw=4, alpha=0.55, zorder=2.8, gid="skipped.range")
                    sx += [wx(first_us), wx(last_us)]
                    sy += [row_of[r.node]] * 2
                middle = (wx(first_us) + wx(last_us)) / 2
                labels.append(label(lane_ax, middle, row_of[r.node] + 0.2, f"skipped {n}", colour=VERMILLION, weight="bold", ha="center"))
            if sx:
                lane_ax.scatter(sx, sy, marker="X", s=64, facecolors="white", edgecolors=VERMILLION, linewidths=1.3, zorder=3, gid="skipped")

    # reports built for this key (true time)
    reports = [r for r in report_rows(trace) if str(r.get("key")) == key]
    omitted = omitted_reports(reports)
    if reports:
        days = Counter(report_day(r) for r in reports)
        done: Counter[Any] = Counter()
        ys = [row_of.get(r.node, 0) - 0.25 for r in reports]
        ax_t.scatter([tx(r.t_ns) for r in reports], ys, marker="*", s=90, color=INK, zorder=5, gid="report.built")
        for r, y_star in zip(reports, ys):
            done[report_day(r)] += 1
            again = days[report_day(r)] > 1 and done[report_day(r)] > 1
            labels.append(label(ax_t, tx(r.t_ns) + span * 0.004, y_star, f"report {day_label(report_day(r))}" + (" again" if again else ""), colour=VERMILLION if again else INK, va="center", weight="bold" if again else "normal"))
    for r, day in omitted:  # a missing day draws nothing unless marked: a hollow red star where its report was due
        y_star = row_of.get(r.node, 0) - 0.25
        ax_t.scatter([tx(r.t_ns)], [y_star], marker="*", s=110, facecolors="white", edgecolors=VERMILLION, linewidths=1.4, zorder=5, gid="report.omitted")
        labels.append(label(ax_t, tx(r.t_ns) + span * 0.004, y_star, f"report {day_label(day)} omitted", colour=VERMILLION, va="center", weight="bold"))

    # connectors: the same delivery in both lanes, when the clocks disagree
    skewed = [r for r in fired if abs(tx(r.t_ns) - wx(fired_wall(r))) > visible]
    for r in skewed[:120]:
        y = row_of[r.node]
        fig.add_artist(ConnectionPatch(xyA=(tx(r.t_ns), y), coordsA=ax_t.transData, xyB=(wx(fired_wall(r)), y), coordsB=ax_w.transData,
                                       color=PURPLE, lw=0.9, ls=":", alpha=0.9, zorder=0.8, gid="skew"))

    # axes, labels, legend
    pad = span * 0.02
    ax_t.set_xlim(lo_s / unit.seconds - pad, hi_s / unit.seconds + pad)
    for lane_ax, lane_name in ((ax_t, "true time"), (ax_w, "node wall clock")):
        lane_ax.set_ylim(len(nodes) - 0.4, -1.05)
        lane_ax.set_yticks(range(len(nodes)), nodes, fontsize=FONT)
        lane_ax.set_ylabel(lane_name, fontsize=FONT, fontweight="bold")
        lane_ax.tick_params(axis="y", length=0)
        lane_ax.tick_params(axis="x", labelsize=SMALL + 0.5)
        for spine in ("left", "right"):
            lane_ax.spines[spine].set_visible(False)
    ax_t.xaxis.tick_top()
    ax_t.xaxis.set_label_position("top")
    ax_t.tick_params(axis="x", labeltop=True, labelbottom=False)
    ax_t.spines["bottom"].set_visible(False)
    ax_w.spines["top"].set_visible(False)
    ax_t.set_xlabel(f"true time since start ({unit.name})", fontsize=FONT)
    ax_w.set_xlabel(f"node wall clock, {unit.name} after {wall_clock_name(origin)}", fontsize=FONT)

    kind = ", then ".join(f"every {fmt_duration(e / 1e6)}" if e else "one-shot" for e in intervals) if len(intervals) > 1 else (
        f"every {fmt_duration(every / 1e6)}" if every else "one-shot")
    summary = f"{len(fired)} deliveries, {skipped_total} skipped, {len(repeat_rows)} repeated"
    ax_t.set_title(title or f"Schedule '{name}' of {key_label(actor, key)} ({kind}): {summary}", fontsize=FONT + 2, loc="left")

    handles: list[Any] = [
        Line2D([], [], color=GRID_GREY, lw=1.5, label=f"nominal due ({kind})" + ("" if len(grid) <= _MAX_GRID_LINES and grid_total <= MAX_GRID_POINTS else "\ntoo dense to draw")),
        Line2D([], [], ls="", marker="o", ms=7, color=BLUE, mec="white", label="delivered"),
    ]
    if any(abs(wx(int(r.get("due_us"))) - wx(fired_wall(r))) > visible for r in fired):
        handles.append(Line2D([], [], color="#777777", lw=1.3, label="lateness (due to delivery)"))
    if caught:
        handles.append(Line2D([], [], ls="", marker="X", ms=8, mfc="none", mec=VERMILLION, mew=1.3, label="skipped (caught up)"))
    if repeat_rows:
        handles.append(Line2D([], [], ls="", marker="D", ms=7, color=ORANGE, mec=INK, label="repeat (due delivered again)"))
    handles += fault_handles(events[n] for n in nodes if n in events)
    if skewed:
        handles.append(Line2D([], [], color=PURPLE, lw=0.9, ls=":", label="same delivery\n(true vs wall clock)"))
    if reports:
        handles.append(Line2D([], [], ls="", marker="*", ms=10, color=INK, label="report built"))
    if omitted:
        handles.append(Line2D([], [], ls="", marker="*", ms=11, mfc="white", mec=VERMILLION, label="report omitted (a day missing)"))
    ax_t.legend(handles=handles, fontsize=SMALL, borderaxespad=0, **outside_legend(fig, own))

    for node, marks in faults.items():
        labels += _fault_labels(fig, ax_t, row_of[node] - 0.44, marks)
    labels += add_notes(fig, ax_t, trace, unit, where="bottom", footer=own)
    declutter(fig, labels)
    return fig


_FAULT_COLOURS = {"paused": "#555555", "crash": VERMILLION, "restart": GREEN, "clock": _LATE_PURPLE}
_LABEL_GAP_PX = 10  # the least room between two fault labels of a row
_LABEL_ROWS = 2  # rows of fault labels above a node's lane; beyond them, neighbours share one label


def _fault_text(group: list[tuple[float, str, Any]]) -> str:
    """One label for faults that sit too close to be labelled apart: in order when two, else counted by kind.

    "crash", "restart #3", "paused", "clock +5 s"; two: "restart #2, crash"; more: "3 crashes, restarts #5-#7"."""
    def one(kind: str, detail: Any) -> str:
        if kind == "restart":
            return "restart" if detail is None else f"restart #{detail}"
        return f"clock {detail}" if kind == "clock" else kind

    if len(group) <= 2:
        return ", ".join(one(kind, detail) for _, kind, detail in group)
    parts: list[str] = []
    for kind, plural in (("paused", "pauses"), ("crash", "crashes"), ("restart", "restarts"), ("clock", "clock steps")):
        found = [detail for _, k, detail in group if k == kind]
        if not found:
            continue
        if len(found) == 1:
            parts.append(one(kind, found[0]))
        elif kind == "restart" and None not in found:
            incs = sorted(int(i) for i in found)
            span = f"#{incs[0]}-#{incs[-1]}" if incs == list(range(incs[0], incs[-1] + 1)) else ", ".join(f"#{i}" for i in incs)
            parts.append(f"restarts {span}")
        elif kind == "clock":
            parts.append("clock " + ", ".join(str(d) for d in found))
        else:
            parts.append(f"{len(found)} {plural}")
    return ", ".join(parts)


def _fault_labels(fig: Figure, ax: Axes, y: float, marks: list[tuple[float, str, Any]]) -> list[Annotation]:
    """Labels for one node's faults above its true-time lane that never overlap: each fault its own label where there
    is room (in one of two rows), else it joins its neighbour's ("restart #2, crash", "3 crashes, restarts #5-#7").

    Measured in pixels on the laid-out figure: a label is as wide as its text at this figure's size."""
    if not marks:
        return []
    fig.draw_without_rendering()
    renderer = fig._get_renderer()  # type: ignore[attr-defined]
    to_px = ax.transData.transform
    row_height = SMALL * 1.3  # points

    def make(group: list[tuple[float, str, Any]], row: int) -> Annotation:
        kinds = {kind for _, kind, _ in group}
        colour = _FAULT_COLOURS[kinds.pop()] if len(kinds) == 1 else INK
        return label(ax, group[0][0], y, _fault_text(group), colour=colour, weight="bold", down=False, dy=5 + row * row_height)

    rows: list[list[tuple[list[tuple[float, str, Any]], Annotation]]] = [[] for _ in range(_LABEL_ROWS)]
    for mark in sorted(marks, key=lambda m: (m[0], m[1])):
        x_px = to_px((mark[0], y))[0]
        free = next((r for r in range(_LABEL_ROWS) if not rows[r] or rows[r][-1][1].get_window_extent(renderer).x1 + _LABEL_GAP_PX <= x_px), None)
        if free is not None:
            rows[free].append(([mark], make([mark], free)))
            continue
        # no room in any row: join the label of the fault just before (a group is a run of neighbours), and re-measure
        r = max(range(_LABEL_ROWS), key=lambda i: rows[i][-1][0][-1][0])
        group, ann = rows[r][-1]
        ann.remove()
        group = [*group, mark]
        rows[r][-1] = (group, make(group, r))
    out = [ann for row in rows for _, ann in row]
    for ann in out:
        ann._casty_fault = True  # type: ignore[attr-defined]
    return out
