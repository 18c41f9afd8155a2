"""Ticks chart: every periodic delivery of a run, one row per source on each node, along true time.

The catch-up chart follows one persisted schedule's grid; this view puts the three kinds of
periodic work side by side, so a crash shows which kind survives it:

* ``schedule.fired``: a persisted actor schedule (``ctx.schedule``), row 'type["key"] · actor schedule 'name'';
* ``timer.fired``: an activation timer (``ctx.timer``), row 'type["key"] · timer 'name'' (a name is
  only unique within its key, so two keys' timers of one name get a row each);
* ``node_schedule.*``: a node schedule (``system.schedule*``), row "node schedule 'reference'",
  with its cron claims: a tick told is a filled dot, a claim lost to another node a hollow
  circle (that node did not tell it), a claim won but never told by anyone (the winner died
  between the claim and the tell: drawn on the winner's row, at its crash when the losers name
  it and it died before recording its win) an orange diamond, a tick that could not be handed over (``tick_lost``)
  and a claim that could not be made (``claim_skipped``) a filled vermillion (red-orange) X in the lane, labelled,
  a late tick that skipped later ones "skipped N", a tick whose handler failed (a ``dead_letter``
  whose origin names the schedule) a small black square under its dot (another shape and colour than
  the lost tick's X: the two failures read apart in grey scale and to a colour-blind reader), a
  paused node schedule hatched from pause to resume, a cancelled one a black bar labelled "cancelled".

The x axis ends at the last thing drawn when the run goes on well past it (a scenario that waits
for its claim keys to expire after cancelling its cron): the axis label says where the run ended,
so the empty stretch is neither drawn nor hidden without a word.

The rows of a node carry its faults (crash, down, pause) as the activation timeline draws
them. The claim keys' own schedules (the internal type ``casty.cluster.claims:schedule_fire``
arms one to expire each claim) are runtime bookkeeping and are left out unless ``internal=True``.

The rows come from ``sim.viz.data.ticks``; this module only draws them.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

from sim.trace import Row, Trace
from sim.viz.data.keys import key_label
from sim.viz.data.nodes import node_events
from sim.viz.data.ticks import source_name, tick_rows
from sim.viz.data.timebase import end_ns, time_unit
from sim.viz.draw import declutter, fault_handles, label, outside_legend, style_node_lanes
from sim.viz.palette import BLUE, FONT, GREEN, GREY, INK, LIGHT_GREY, ORANGE, SMALL, VERMILLION

__all__ = ["ticks_chart"]

_FIT_SLACK = 0.25
"""The axis stops at the last mark when more than this share of the run comes after it with nothing to draw."""


def _row_label(node: str, source: str, rows: list[Row]) -> str:
    """The row's label: a key's timer or schedule names the key as a key, ``counted["k"] · timer 'volatile'``.

    ``source`` (``sim.viz.data.ticks.source_name``, the rows' dict key, which notebooks read) writes
    ``counted[k]``, where a key like ``dormant`` or ``both`` reads as a state of the actor.
    """
    first = next((r for r in rows if r.kind.startswith(("timer.", "schedule."))), None)
    if first is None:
        return f"{node}  {source}"
    kind = "timer" if first.kind.startswith("timer.") else "actor schedule"
    return f"{node}  {key_label(first.get('actor'), first.get('key'))} \u00b7 {kind} '{first.get('name')}'"


def ticks_chart(trace: Trace, *, ax: Axes | None = None, title: str | None = None, internal: bool = False) -> Figure:
    """The ticks chart (see the module docstring); returns the figure it drew on."""
    rows = tick_rows(trace, internal=internal)
    nodes = sorted(dict.fromkeys(node for node, _ in rows))
    order = sorted(rows, key=lambda r: (nodes.index(r[0]), r[1]))
    y_of = {r: i for i, r in enumerate(order)}
    own = ax is None
    if ax is None:
        fig = Figure(figsize=(11, 1.0 + 0.55 * max(len(order), 1)), layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.get_figure()  # type: ignore[assignment]
    end = end_ns(trace)
    unit = time_unit(end / 1e9)
    events = node_events(trace)
    labels = []
    counts: Counter[str] = Counter()
    failed_kinds: set[str] = set()
    last_ns = 0  # the latest instant anything is drawn at: a row's event, a node's fault
    told_anywhere = {(r.get("reference"), r.get("tick_us")) for found in rows.values() for r in found if r.kind == "node_schedule.fired"}
    untold: dict[tuple[str, str], list[int]] = {}  # (node, source) -> times of ticks it won and never told
    for found in rows.values():
        for r in found:
            tick = (r.get("reference"), r.get("tick_us"))
            if tick in told_anywhere:
                continue
            if r.kind == "node_schedule.claim_won":
                winner, at = r.node, r.t_ns
            elif r.kind == "node_schedule.claim_lost" and r.get("winner"):
                # the winner may have died before it could even record its win: the losers name it
                winner = str(r.get("winner"))
                crashes = [t for t in (events[winner].crashes if winner in events else []) if t <= r.t_ns]
                at = crashes[-1] if crashes else r.t_ns
            else:
                continue
            told_anywhere.add(tick)  # one mark per tick
            untold.setdefault((winner, source_name(r)), []).append(at)
    for (node, source), found in rows.items():
        y = y_of[(node, source)]
        ax.add_patch(Rectangle((0, y - 0.4), unit.x(end), 0.8, facecolor="#F4F4F4", edgecolor="none", zorder=0))
        ev = events.get(node)
        if found:
            last_ns = max(last_ns, max(r.t_ns for r in found))
        if ev is not None:
            last_ns = max([last_ns, *(s.end_ns for s in ev.down), *(s.end_ns for s in ev.paused), *ev.crashes, *(t for t, _ in ev.restarts)])
            for span in ev.down:
                ax.add_patch(Rectangle((unit.x(span.start_ns), y - 0.4), unit.x(span.end_ns - span.start_ns), 0.8,
                                       facecolor=LIGHT_GREY, edgecolor="none", zorder=1, gid="down"))
            for span in ev.paused:
                ax.add_patch(Rectangle((unit.x(span.start_ns), y - 0.4), unit.x(span.end_ns - span.start_ns), 0.8,
                                       facecolor="white", edgecolor=GREY, hatch="///", lw=0, zorder=1, gid="paused"))
            for t in ev.crashes:
                ax.vlines(unit.x(t), y - 0.45, y + 0.45, color=VERMILLION, lw=2, zorder=4, gid="crash")
            if ev.restarts:
                ax.scatter([unit.x(t) for t, _ in ev.restarts], [y - 0.4] * len(ev.restarts), marker="^", s=60, color=GREEN,
                           edgecolors="white", linewidths=0.7, zorder=5, gid="restart", clip_on=False)
        marks: dict[str, list[float]] = {}
        paused_at: int | None = None
        for r in found:
            x = unit.x(r.t_ns)
            if r.kind == "node_schedule.paused":
                paused_at = r.t_ns
            elif r.kind in ("node_schedule.resumed", "node_schedule.cancelled") and paused_at is not None:
                ax.add_patch(Rectangle((unit.x(paused_at), y - 0.4), x - unit.x(paused_at), 0.8, facecolor="white", edgecolor=GREY,
                                       hatch="\\\\", lw=0, zorder=1, gid="schedule.paused"))
                counts["paused"] += 1
                paused_at = None
            if r.kind == "dead_letter":
                marks.setdefault("dead", []).append(x)
                counts["dead"] += 1
            if r.kind in ("schedule.fired", "timer.fired", "node_schedule.fired"):
                marks.setdefault("told", []).append(x)
                counts["told"] += 1
            elif r.kind == "node_schedule.claim_lost":
                marks.setdefault("lost", []).append(x)
            elif r.kind in ("node_schedule.tick_lost", "node_schedule.claim_skipped"):
                marks.setdefault("failed", []).append(x)
                counts["failed"] += 1
                failed_kinds.add(r.kind)
                # beside its X, inside its own lane: above the lane it read as the lane above's (course 06, section 3)
                labels.append(label(ax, x, y, "tick lost" if r.kind.endswith("tick_lost") else "claim skipped",
                                    colour=VERMILLION, weight="bold", va="center", dx=7))
            elif r.kind == "node_schedule.cancelled" and r.get("reason", "cancelled") == "cancelled":
                ax.vlines(x, y - 0.32, y + 0.32, color=INK, lw=2.2, zorder=4, gid="cancelled")
                counts["cancelled"] += 1
                labels.append(label(ax, x, y - 0.42, "cancelled", colour=INK, ha="right", va="bottom", down=False, dx=-1))  # above its lane: the last tick is often right before it
            elif r.kind in ("schedule.caught_up", "node_schedule.caught_up") and int(r.get("skipped", 0) or 0):
                labels.append(label(ax, x, y - 0.42, f"skipped {r.get('skipped')}", colour=VERMILLION, weight="bold", down=False, va="bottom"))
        for t in untold.get((node, source), []):
            marks.setdefault("untold", []).append(unit.x(t))
            counts["untold"] += 1
            labels.append(label(ax, unit.x(t), y - 0.42, "won a claim, never told", colour=ORANGE, weight="bold", down=False, va="bottom"))
        style = {
            "told": {"marker": "o", "s": 42, "color": BLUE, "zorder": 3},
            "lost": {"marker": "o", "s": 42, "facecolors": "white", "edgecolors": GREY, "linewidths": 1.2, "zorder": 3},
            "untold": {"marker": "D", "s": 60, "color": ORANGE, "edgecolors": "#222222", "zorder": 4},
            "failed": {"marker": "X", "s": 70, "color": VERMILLION, "edgecolors": "white", "zorder": 4},
            "dead": {"marker": "s", "s": 30, "color": INK, "edgecolors": "white", "linewidths": 0.6, "zorder": 4},
        }
        for what, xs in marks.items():
            dy = 0.25 if what == "dead" else 0.0  # a dead letter sits under the dot of the tick that caused it
            ax.scatter(xs, [y + dy] * len(xs), gid=what, **style[what])  # type: ignore[arg-type]
    fitted = bool(order) and last_ns > 0 and end - last_ns > _FIT_SLACK * end
    right = unit.x(last_ns) * 1.06 if fitted else unit.x(end) * 1.01
    ax.set_xlim(0, right if end else 1)
    ax.set_ylim(len(order) - 0.5, -0.95)  # room above the first row for its labels
    ax.set_yticks(range(len(order)), [_row_label(node, source, rows[(node, source)]) for node, source in order], fontsize=SMALL + 0.5)
    style_node_lanes(ax, unit, trace.time_axis)
    if fitted:
        ax.set_xlabel(f"{ax.get_xlabel()}: the run ends at {unit.x(end):.4g} {unit.name}, nothing on these rows after {unit.x(last_ns):.4g} {unit.name}",
                      fontsize=ax.xaxis.label.get_fontsize())
    ax.set_ylabel("")
    if not order:
        ax.text(0.5, 0.5, "no schedule, timer or node-schedule deliveries in this trace", transform=ax.transAxes,
                ha="center", va="center", fontsize=FONT, color=GREY)
    if title is None:
        title = f"Periodic deliveries: {counts['told']} told" + (f", {counts['failed']} lost" if counts["failed"] else "") + (
            f", {counts['dead']} dead letters" if counts["dead"] else "") + (
            f", {counts['untold']} claimed and never told" if counts["untold"] else "")
    ax.set_title(title, loc="left", fontsize=FONT + 1)
    handles: list[Any] = [Line2D([], [], ls="", marker="o", ms=7, color=BLUE, label="told (delivered to the key)")]
    if any(r.kind == "node_schedule.claim_lost" for found in rows.values() for r in found):
        handles.append(Line2D([], [], ls="", marker="o", ms=7, mfc="white", mec=GREY, label="claim lost (another node tells)"))
    if counts["untold"]:
        handles.append(Line2D([], [], ls="", marker="D", ms=7, color=ORANGE, mec="#222222", label="claim won, never told"))
    if counts["failed"]:
        named = [n for k, n in (("node_schedule.tick_lost", "tick lost (not handed over)"), ("node_schedule.claim_skipped", "claim skipped")) if k in failed_kinds]
        handles.append(Line2D([], [], ls="", marker="X", ms=9, color=VERMILLION, mec="white", label=" / ".join(named)))
    if counts["dead"]:
        handles.append(Line2D([], [], ls="", marker="s", ms=6, color=INK, mec="white", label="told, handler failed: dead letter"))
    if counts["cancelled"]:
        handles.append(Line2D([], [], ls="", marker="|", ms=11, mew=2.2, color=INK, label="schedule cancelled"))
    if counts["paused"]:
        handles.append(Rectangle((0, 0), 1, 1, facecolor="white", edgecolor=GREY, hatch="\\\\", label="schedule paused"))
    handles += fault_handles(events[n] for n in nodes if n in events)
    ax.legend(handles=handles, fontsize=SMALL, borderaxespad=0, **outside_legend(fig, own))
    declutter(fig, labels)
    return fig
