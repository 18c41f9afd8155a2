"""The catch-up chart of every periodic thing: one lane per schedule, timer, node schedule and cron tick, along true time.

``catchup_chart(trace, lanes="all")`` draws this; ``catchup_chart(trace, schedule=...)`` keeps the
one-schedule view (true time against the node's wall clock). Here the four kinds sit side by
side, so a fault reads across them at a glance: which kind fired through a pause, which caught
up, which vanished with its activation or its node.

Each lane is labelled by its kind, then the key as ``type["key"]`` (or the node), then its name:
``schedule  counted["k"] / persisted``, ``timer  counted["k"] / volatile``,
``node schedule  n1 / node-beat``, ``cron  report  (cluster: ...)``. Each occurrence is a mark
of the occurrence ledger's class (``sim.ledger``, drawn with ``sim.viz.ledger``'s shapes and
colours, so this chart and ``ledger_chart`` agree): on time a green dot, late an orange ringed
dot with a grey whisker back to its due, caught up a blue diamond "skipped N", repeated a purple
square "×n" with a tick at each later firing, missed a red X (at its due), "lost in flight" when
it fired and its message died. A timer's firing has no due time: a blue-grey dot where it
fired. A cron tick's lost claims (another node won it) are small hollow rings under the mark.

Behind the marks, on the lanes of the nodes that ran them: down spans (grey), pauses (hatched),
crashes (red line), restarts (green triangle), clock steps (purple dashes), as every node-lane view
draws them. A lane run by more nodes than one is not stopped by one of them (a cron tick is the
cluster's, a key moves to another node), so it gets only a node's crash, labelled with the node; a
key's lane says "on n1" where its firings move to another node, and a cron tick won by a node that
never told it says so. The runtime's own keys (cron claim keys) are hidden unless ``internal=True``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.text import Annotation

from sim.ledger import Entry
from sim.trace import Trace
from sim.viz.data.ledger import CLASS_COLOURS, CLASSES
from sim.viz.data.nodes import node_events
from sim.viz.data.periodic import KINDS, PeriodicLane, periodic_lanes
from sim.viz.data.timebase import end_ns, fmt_signed, time_unit
from sim.viz.draw import declutter, fault_handles, label, outside_legend, style_node_lanes
from sim.viz.ledger import MARKERS
from sim.viz.palette import FONT, GREEN, GREY, INK, LIGHT_GREY, PURPLE, SMALL, VERMILLION

__all__ = ["catchup_lanes"]

TIMER_COLOUR = "#5A7D9A"
TIMER_MARKER: dict[str, Any] = {"marker": "o", "s": 40, "edgecolors": "white", "linewidths": 0.6}
_HALF = 0.36  # half a lane's height
_MAX_MOVES = 8  # beyond this many node changes on one lane, "on nX" labels would be a wall of text
_TOUCH = 0.011  # marks closer than this share of the x span would hide each other: they are stacked


def _stacked(xs: list[float], touch: float) -> list[float]:
    """A vertical offset per mark: marks that would cover each other (a catch-up firing the oldest dues at once) stand one above the other."""
    out = [0.0] * len(xs)
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    group: list[int] = []
    for i in [*order, -1]:
        if i >= 0 and group and xs[i] - xs[group[0]] <= touch:
            group.append(i)
            continue
        step = min(0.17, 0.56 / max(len(group) - 1, 1))
        for k, j in enumerate(group):
            out[j] = (k - (len(group) - 1) / 2) * step
        group = [i]
    return out


def _keep(lane: PeriodicLane, actor: str | None, key: str | None, schedule: str | None) -> bool:
    e = lane.occurrences[0].entry if lane.occurrences else None
    if e is None:
        return False
    return (actor is None or e.actor.endswith(actor)) and (key is None or e.key == key) and (schedule is None or e.name == schedule)


def catchup_lanes(
    trace: Trace,
    *,
    internal: bool = False,
    actor: str | None = None,
    key: str | None = None,
    schedule: str | None = None,
    entries: list[Entry] | None = None,
    ax: Axes | None = None,
    title: str | None = None,
) -> Figure:
    """The lanes chart (see the module docstring); ``actor``/``key``/``schedule`` keep only the lanes they name.

    ``internal``: also the runtime's own keys' lanes (cron claim keys); ``entries``: the ledger of ``trace`` if at hand.
    """
    lanes = [lane for lane in periodic_lanes(trace, internal=internal, entries=entries) if _keep(lane, actor, key, schedule)]
    own = ax is None
    if ax is None:
        fig = Figure(figsize=(11.5, 1.5 + 0.62 * max(len(lanes), 1)), layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.get_figure()  # type: ignore[assignment]
    end = end_ns(trace)
    unit = time_unit(end / 1e9)
    x_of = unit.x
    span = x_of(end) or 1.0
    visible = span * 0.004
    events = node_events(trace)
    labels: list[Annotation] = []
    counts: Counter[str] = Counter()
    lost_claims = 0
    for y, lane in enumerate(lanes):
        ax.axhspan(y - _HALF, y + _HALF, color="#F5F5F5", lw=0, zorder=0)
        for node in lane.nodes:  # the faults of the nodes that ran this lane, behind its marks
            ev = events.get(node)
            if ev is None:
                continue
            first = y == min(i for i, other in enumerate(lanes) if node in other.nodes)  # its labels once, on its first lane
            # a lane run by more nodes than one (a cron tick, a key that moved) goes on while one of them is down:
            # its bands would paint the whole lane, so such a lane gets the node's crash as a labelled instant only
            cluster = lane.kind == "cron" or len(lane.nodes) > 1
            for s in [] if cluster else ev.down:
                ax.add_patch(Rectangle((x_of(s.start_ns), y - _HALF), x_of(s.end_ns - s.start_ns), 2 * _HALF, facecolor=LIGHT_GREY,
                                       edgecolor="none", zorder=0.5, gid="down"))
            for s in [] if cluster else ev.paused:
                ax.add_patch(Rectangle((x_of(s.start_ns), y - _HALF), x_of(s.end_ns - s.start_ns), 2 * _HALF, facecolor="none",
                                       edgecolor=GREY, hatch="///", lw=0, zorder=0.5, gid="paused"))
                if first:
                    labels.append(label(ax, x_of(s.start_ns), y - _HALF, f"{node} paused", colour="#555555", down=False, dy=1))
            for t in ev.crashes:
                ax.vlines(x_of(t), y - _HALF, y + _HALF, color=VERMILLION, lw=2, zorder=2.5, gid="crash")
                if first and (cluster or len(lane.nodes) > 1):
                    labels.append(label(ax, x_of(t), y - _HALF, f"{node} crash", colour=VERMILLION, weight="bold", down=False, dy=1))
            if ev.restarts:
                ax.scatter([x_of(t) for t, _ in ev.restarts], [y + _HALF] * len(ev.restarts), marker="^", s=50, color=GREEN,
                           edgecolors="white", linewidths=0.6, zorder=5, gid="restart")
            for t, _, delta in ev.steps:
                ax.vlines(x_of(t), y - _HALF, y + _HALF, color=PURPLE, lw=1.6, ls="--", zorder=4, gid="clock.step")
                if first:
                    labels.append(label(ax, x_of(t), y - _HALF, f"{node} clock {fmt_signed(delta / 1e6)}", colour="#9E4A7E", down=False, dy=1))
        by_class: dict[str, list[tuple[float, float]]] = {}
        whiskers: list[tuple[float, float, float]] = []
        again: list[float] = []
        rings: list[float] = []
        lost_run = False
        ran_on: str | None = None
        moves = 0
        for o, dy in zip(lane.occurrences, _stacked([x_of(o.at_ns) for o in lane.occurrences], span * _TOUCH)):
            x = x_of(o.at_ns)
            by_class.setdefault(o.cls, []).append((x, y + dy))
            counts[o.cls] += 1
            if o.due_ns is not None and o.firings_ns and abs(x - x_of(o.due_ns)) > visible:
                whiskers.append((x_of(o.due_ns), x, y + dy))
            if o.cls == "caught up":
                labels.append(label(ax, x, min(y - 0.2, y + dy - 0.15), f"skipped {o.skipped}", colour=CLASS_COLOURS["caught up"], weight="bold", down=False, va="bottom"))
            elif o.cls == "repeated":
                again += [x_of(t) for t in o.firings_ns[1:]]
                for a in o.entry.attempts[1:4]:  # where each later firing happened: the repeat's story (a crash, a new owner)
                    labels.append(label(ax, x_of(a.row.t_ns), y + 0.2, f"again on {a.node}", colour="#A0527E", dx=-3))
                labels.append(label(ax, x, min(y - 0.2, y + dy - 0.15), f"×{len(o.firings_ns)}", colour="#A0527E", weight="bold", down=False, va="bottom"))
            if o.cls == "missed" and o.entry.claimed and not o.firings_ns:  # a cron tick whose winner never told it
                labels.append(label(ax, x, y + 0.2, f"won by {o.entry.claimed}, never told", colour=VERMILLION, weight="bold", dx=-3))
            here = o.entry.attempts[0].node if o.entry.attempts else None
            if here is not None and lane.kind != "cron" and len(lane.nodes) > 1 and here != ran_on and moves < _MAX_MOVES:
                labels.append(label(ax, x, y + 0.2, f"on {here}", colour=INK, dx=-3))  # where the key (and its schedules) ran from here on
                moves += 1
            ran_on = o.entry.attempts[-1].node if o.entry.attempts else ran_on
            if o.lost and not lost_run:  # once per run of neighbouring lost occurrences
                labels.append(label(ax, x, y + 0.2, "lost in flight", colour=VERMILLION, weight="bold", dx=-3))
            lost_run = o.lost
            n = len(o.lost_claims)
            rings += [x + (j - (n - 1) / 2) * span * 0.006 for j in range(n)]  # one ring per node that lost the claim, side by side
            lost_claims += n
        if whiskers:
            ax.hlines([h for _, _, h in whiskers], [a for a, _, _ in whiskers], [b for _, b, _ in whiskers], color="#777777", lw=1.3, zorder=2, gid="lateness")
        if again:
            ax.scatter(again, [y] * len(again), marker="|", s=120, color=CLASS_COLOURS["repeated"], linewidths=2, zorder=3, gid=f"repeated.again|{lane.label}")
        if rings:
            ax.scatter(rings, [y + 0.24] * len(rings), marker="o", s=16, facecolors="white", edgecolors=GREY, linewidths=1.0, zorder=3,
                       gid=f"lost claim|{lane.label}")
        for cls in (*CLASSES, "timer"):  # a fixed order, so the same trace draws the same artists
            if cls in by_class:
                style = TIMER_MARKER if cls == "timer" else MARKERS[cls]
                colour = TIMER_COLOUR if cls == "timer" else CLASS_COLOURS[cls]
                ax.scatter([p for p, _ in by_class[cls]], [q for _, q in by_class[cls]], color=colour, zorder=3.2, gid=f"{cls}|{lane.label}", **style)
    ax.set_xlim(-0.01 * span, span * 1.02)
    ax.set_ylim(len(lanes) - 0.5, -0.85)
    ax.set_yticks(range(len(lanes)), [lane.label for lane in lanes], fontsize=SMALL + 0.5)
    for tick, lane in zip(ax.get_yticklabels(), lanes):
        tick.set_color(GREY if lane.internal else INK)
    style_node_lanes(ax, unit, trace.time_axis)
    ax.set_ylabel("")
    if not lanes:
        ax.text(0.5, 0.5, "no schedule, timer, node schedule or cron tick in this trace", transform=ax.transAxes,
                ha="center", va="center", fontsize=FONT, color=GREY)
    kinds = Counter(lane.kind for lane in lanes if not lane.internal)
    hidden = sum(lane.internal for lane in lanes)
    if title is None:
        what = ", ".join(f"{kinds[k]} {k}{'s' if kinds[k] != 1 else ''}" for k in KINDS if kinds[k])
        what += f" + {hidden} of the runtime's own keys (grey)" if hidden else ""
        parts = ", ".join(f"{counts[c]} {c}" for c in CLASSES if counts[c])
        title = f"Every periodic thing: {what or 'none'}" + (f"\n{parts}" if parts else "") + (
            f", {counts['timer']} timer firing{'s' if counts['timer'] != 1 else ''}" if counts["timer"] else "")
    ax.set_title(title, loc="left", fontsize=FONT + 1)
    handles: list[Any] = [
        Line2D([], [], ls="", color=CLASS_COLOURS[c], label=f"{c} ({counts[c]})", marker=MARKERS[c]["marker"], ms=8,
               mec=MARKERS[c].get("edgecolors", CLASS_COLOURS[c]), mew=MARKERS[c].get("linewidths", 1.0))
        for c in CLASSES if counts[c]
    ]
    if counts["timer"]:
        handles.append(Line2D([], [], ls="", marker="o", ms=7, color=TIMER_COLOUR, mec="white", label=f"timer fired ({counts['timer']})\nno due time: never late"))
    if any(lane.occurrences and any(o.due_ns is not None and o.firings_ns and abs(x_of(o.at_ns) - x_of(o.due_ns)) > visible
                                    for o in lane.occurrences) for lane in lanes):
        handles.append(Line2D([], [], color="#777777", lw=1.3, label="lateness (due to firing)"))
    if lost_claims:
        handles.append(Line2D([], [], ls="", marker="o", ms=5, mfc="white", mec=GREY, label=f"lost claim ({lost_claims})\nanother node told it"))
    drawn = {p.get_gid() for p in ax.patches}  # a cron lane draws no down or paused band: no legend entry for one
    handles += [h for h in fault_handles(events[n] for n in dict.fromkeys(n for lane in lanes for n in lane.nodes) if n in events)
                if h.get_label() not in ("down (crash to restart)", "paused") or {"down (crash to restart)": "down", "paused": "paused"}[h.get_label()] in drawn]
    ax.legend(handles=handles, fontsize=SMALL, borderaxespad=0, title="occurrence (count)", title_fontsize=SMALL, **outside_legend(fig, own))
    declutter(fig, labels)
    return fig
