"""Space-time (message sequence) diagram: the frames between the nodes in a short window.

One vertical line per node, time running down. Every frame sent in the window is an arrow
from (sender, send time) to (receiver, delivery time), paired from the trace alone: a
``net.sent`` row (``dst``, ``delay_ns``) and the ``net.delivered`` row of the receiver at
send time + delay. The colour says which protocol the frame belongs to (its ``frame`` tag,
which the simulated network records): membership heartbeats faint grey, epoch acquisition
(Prepare / Promise) purple, replicated writes (Write / Ack) blue, refusals (Nack) red,
handoff (SyncRequest / SyncDump) green, routing (Deliver / Reply) orange. Requests are solid,
answers dashed. A frame that never arrived ends in a red X: cut at the sender (partition,
loss), or at the receiver (the partition came while it flew, or nobody was there: the node
was down).

Every protocol frame that arrived carries its name on its own arrow (``place_along``): slid along
the arrow to a place that overlaps no other text and crosses no other arrow or node line where
one exists, else beside the arrow with a leader line; a dropped frame is named by its drop label. The notes (a node's
rows at one instant, a drop's label) are placed first by the same rule (``_Room``): around their mark, across no arrow
and over no text, joined to the mark by a leader line when moved away from it (``place_notes``).

The node's own rows in the window are marked on its line, so the messages can be read as
the cause of what the node did: ``epoch.acquired`` (star), ``write.confirmed`` /
``write.failed``, ``schedule.fired``, ``activation.*``, ``member.changed`` (what the node
believes about a peer), crashes and restarts (the line is dotted while the node is down).

Keep the window short (tens to a few hundred ms): the default is the first ownership change
of a key, from the new owner's first Prepare to its first confirmed write.

The window and the node events' labels come from ``sim.viz.data.spacetime``, the frames from
``sim.messages``; this module only draws them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal, cast

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import FancyArrowPatch, Patch
from matplotlib.text import Annotation, Text
from matplotlib.transforms import Bbox

from sim.messages import frame_arrows
from sim.trace import Trace
from sim.viz.data.nodes import node_events
from sim.viz.data.spacetime import PRIORITY, default_window, node_marks, spacetime_lanes
from sim.viz.data.timebase import fmt_duration
from sim.viz.draw import declutter, label, outside_legend
from sim.viz.palette import BLUE, FONT, GREEN, GREY, INK, ORANGE, PURPLE, SKY, SMALL, VERMILLION

__all__ = ["spacetime_diagram", "FRAME_KINDS"]

HEARTBEAT_GREY = "#B5B5B5"

# tag -> (group, colour, answer?). Groups are what the legend lists.
FRAME_KINDS: dict[str, tuple[str, str, bool]] = {
    "Heartbeat": ("membership: heartbeat", HEARTBEAT_GREY, False),
    "Leaving": ("membership: heartbeat", HEARTBEAT_GREY, False),
    "Prepare": ("epoch: Prepare / Promise", PURPLE, False),
    "Promise": ("epoch: Prepare / Promise", PURPLE, True),
    "Write": ("replication: Write / Ack", BLUE, False),
    "Ack": ("replication: Write / Ack", BLUE, True),
    "Nack": ("replication: Nack (refused)", VERMILLION, True),
    "Snapshot": ("replication: Snapshot", SKY, False),
    "SyncRequest": ("handoff: SyncRequest / SyncDump", GREEN, False),
    "SyncDump": ("handoff: SyncRequest / SyncDump", GREEN, True),
    "Deliver": ("routing: Deliver / Reply", ORANGE, False),
    "Reply": ("routing: Deliver / Reply", ORANGE, True),
    "Failed": ("routing: Failed / WrongOwner", "#8A5A00", True),
    "WrongOwner": ("routing: Failed / WrongOwner", "#8A5A00", True),
}
_OTHER = ("other frames", GREY, False)



def spacetime_diagram(
    trace: Trace,
    start: float | None = None,
    duration: float | None = None,
    *,
    nodes: Iterable[str] | None = None,
    heartbeats: bool = True,
    events: bool = True,
    internal: bool = False,
    ax: Axes | None = None,
    title: str | None = None,
) -> Figure:
    """The frames sent in ``[start, start + duration]`` (seconds of true time), one vertical line per node.

    Without ``start`` the window is ``default_window(trace)``; without ``duration`` it is 25 ms. A frame sent in the
    window is drawn to its arrival even past the window's end (a shaded band: nothing else is drawn there), so no arrow
    runs off the axes; an answer sent after the end is not drawn: choose a window that ends after the answers you show.
    ``heartbeats=False`` leaves membership heartbeats out; ``events=False`` leaves the nodes'
    own rows out; ``internal=True`` also marks the rows of the runtime's own keys (cron claims), left out by default.
    Returns the figure (a new one unless ``ax`` is given).
    """
    if start is None:
        t0, t1 = default_window(trace)
        if duration is not None:
            t1 = t0 + round(duration * 1e9)
    else:
        t0 = round(start * 1e9)
        t1 = t0 + round((duration if duration is not None else 0.025) * 1e9)
    if t1 <= t0:
        raise ValueError(f"the window must have a positive duration, got start={start!r} duration={duration!r}")
    lanes = list(nodes) if nodes is not None else spacetime_lanes(trace)
    col = {n: i for i, n in enumerate(lanes)}
    arrows = [a for a in frame_arrows(trace, t0, t1) if a.src in col and a.dst in col]
    if not heartbeats:
        arrows = [a for a in arrows if FRAME_KINDS.get(a.tag or "", _OTHER)[0] != "membership: heartbeat"]
    span_ms = (t1 - t0) / 1e6
    # a frame sent in the window is drawn whole: the picture runs on to the last arrival (shaded after the window's end),
    # so no arrow leaves the bottom of the axes with its end unseen
    view_ms = max([span_ms] + [(a.arrived_ns - t0) / 1e6 for a in arrows if a.arrived_ns is not None])

    def y(t_ns: int) -> float:
        return (t_ns - t0) / 1e6

    own = ax is None
    if ax is None:
        fig = Figure(figsize=(3.2 * max(len(lanes), 2) + 3.6, 7.5), layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.figure  # type: ignore[assignment]
    labels: list[Annotation] = []  # the nodes' rows and the drops: placed first, moved apart
    tags: list[Annotation] = []  # each arrow's frame name: kept only where it hides nothing

    # node lines: solid while up, dotted while down
    world = node_events(trace)
    for node, x in col.items():
        down = [(y(s.start_ns), y(s.end_ns)) for s in (world[node].down if node in world else ())]
        ax.vlines(x, 0, view_ms, color="#444444", lw=1.4, zorder=1, gid="node.line")
        for lo, hi in down:
            lo, hi = max(lo, 0.0), min(hi, view_ms)
            if hi > lo:
                ax.vlines(x, lo, hi, color="white", lw=2.5, zorder=1.1)
                ax.vlines(x, lo, hi, color="#999999", lw=1.2, ls=(0, (1, 2)), zorder=1.2, gid="node.down")

    # frames
    delays = sorted(a.arrived_ns - a.sent_ns for a in arrows if a.arrived_ns is not None)
    stub_ms = (delays[len(delays) // 2] / 1e6 if delays else span_ms * 0.05) * 0.35  # a dropped frame flies a third of a usual hop
    groups: dict[str, tuple[str, bool]] = {}
    drops: dict[tuple[float, float, str, bool], int] = {}  # one label per dropped frame kind and place, with a count
    segments: list[tuple[tuple[float, float], tuple[float, float], bool]] = []  # every arrow (faint?), for the names to avoid
    tag_paths: list[tuple[tuple[float, float], tuple[float, float]]] = []  # the arrow each name names
    marks: list[tuple[float, float]] = []  # the red X's off the node lines, for the notes to leave visible
    for a in arrows:
        group, colour, answer = FRAME_KINDS.get(a.tag or "", _OTHER)
        heartbeat = group == "membership: heartbeat"
        groups[group] = (colour, groups.get(group, (colour, False))[1] or answer)
        x0, x1 = col[a.src], col[a.dst]
        ya = y(a.sent_ns)
        if a.arrived_ns is None:  # dropped at the sender: a stub towards its destination
            xb, yb = x0 + (x1 - x0) * 0.35, ya + stub_ms
        else:
            xb, yb = x1, y(a.arrived_ns)
        arrow = FancyArrowPatch((x0, ya), (xb, yb), arrowstyle="-|>", mutation_scale=7 if heartbeat else 11,
                                color=colour, lw=0.7 if heartbeat else 1.5, alpha=0.55 if heartbeat else 1.0,
                                linestyle="--" if answer else "-", shrinkA=0, shrinkB=0,
                                zorder=2 if heartbeat else 3, gid=f"frame:{a.tag}")
        ax.add_patch(arrow)
        if a.dropped is not None:
            ax.scatter([xb], [yb], marker="X", s=55, color=VERMILLION, edgecolors="white", linewidths=0.6, zorder=4.5, gid="frame.dropped")
            marks.append((xb, yb))
            if not heartbeat:
                text = f"{a.tag} to {a.dst} dropped ({a.dropped})" if a.arrived_ns is None else f"{a.tag} dropped ({a.dropped})"
                place = (xb, yb, text, xb < x0)
                drops[place] = drops.get(place, 0) + 1
        segments.append(((x0, ya), (xb, yb), heartbeat))
        # every protocol frame that arrived is named on its arrow (a dropped one by its drop label); a very long window
        # stops naming after _MAX_NAMES, where names could no longer be read anyway
        if not heartbeat and a.arrived_ns is not None and len(tags) < _MAX_NAMES:
            name = label(ax, (x0 + xb) / 2, (ya + yb) / 2, a.tag or "?", colour=colour if colour != SKY else INK,
                         ha="center", va="center", dx=0, size=SMALL - 0.5)
            name.set_gid(f"name:{a.tag}")
            tags.append(name)
            tag_paths.append(((x0, ya), (xb, yb)))

    for (xb, yb, text, left), n in drops.items():
        text += f" ×{n}" if n > 1 else ""
        labels.append(label(ax, xb - 0.02 if left else xb, yb, text, colour=VERMILLION, va="center", dx=6, size=SMALL - 0.5, ha="right" if left else "left"))

    # the nodes' own rows: the rows of one node at one instant share a marker (the first) and one label
    shown_events = 0
    if events:
        for (node, t_ns), items in node_marks(trace, t0, t1, col, internal=internal).items():
            shown_events += len(items)
            first = min(items, key=lambda item: PRIORITY.index(item[3]) if item[3] in PRIORITY else len(PRIORITY))
            marker, colour, _, kind = first  # the lines stay in the order the rows happened
            ax.scatter([col[node]], [y(t_ns)], marker=marker, s=110 if marker == "*" else 40, color=colour,
                       edgecolors="white" if marker not in ("x", "|", "3", "4") else None, linewidths=0.6, zorder=5, gid=f"event:{kind}")
            counts: dict[str, int] = {}
            for item in items:
                counts[item[2]] = counts.get(item[2], 0) + 1
            text = "\n".join(line + (f" ×{n}" if n > 1 else "") for line, n in counts.items())
            strong = any(item[3] in ("epoch.acquired", "fault.crash") for item in items)
            ink = colour if colour not in (GREY, HEARTBEAT_GREY) else "#555555"
            labels.append(label(ax, col[node], y(t_ns), text, colour=ink, va="center", dx=7, size=SMALL, weight="bold" if strong else "normal"))

    # axes
    ax.set_xlim(-0.35, len(lanes) - 0.65 + 0.9)  # room right of the last line for its labels
    ax.set_ylim(view_ms + span_ms * 0.02, -span_ms * 0.02)
    if view_ms > span_ms:
        ax.axhspan(span_ms, view_ms + span_ms * 0.02, color="#F1F1F1", zorder=0.5, lw=0, gid="after.window")
    ax.set_xticks(range(len(lanes)), lanes, fontsize=FONT + 1, fontweight="bold")
    ax.xaxis.tick_top()
    ax.tick_params(axis="x", length=0, pad=6)
    ax.tick_params(axis="y", labelsize=SMALL + 0.5)
    for spine in ("right", "bottom", "top"):
        ax.spines[spine].set_visible(False)
    ax.set_ylabel(f"ms after t = {t0 / 1e9:.4f} s ({trace.time_axis})", fontsize=FONT)
    ax.grid(axis="y", color="#EEEEEE", lw=0.8, zorder=0)
    ax.set_axisbelow(True)
    counted = sum(1 for a in arrows if FRAME_KINDS.get(a.tag or "", _OTHER)[0] != "membership: heartbeat")
    beats = len(arrows) - counted
    what = f"{counted} protocol frame{'s' if counted != 1 else ''}" + (f" + {beats} heartbeat{'s' if beats != 1 else ''}" if beats else "")
    ax.set_title(title or f"Messages from {t0 / 1e9:.4f} s to {t1 / 1e9:.4f} s ({fmt_duration(span_ms / 1e3)}): {what}",
                 fontsize=FONT + 1.5, loc="left", pad=24)

    handles: list[Any] = []
    order = [g for g, *_ in FRAME_KINDS.values()] + [_OTHER[0]]
    for group in sorted(groups, key=order.index):
        colour, _ = groups[group]
        faint = group == "membership: heartbeat"
        handles.append(Line2D([], [], color=colour, lw=0.8 if faint else 1.8, alpha=0.6 if faint else 1.0, label=group))
    if any(answer for _, answer in groups.values()):
        handles.append(Line2D([], [], color=INK, lw=1.2, ls="--", label="dashed: an answer"))
    if any(a.dropped for a in arrows):
        handles.append(Line2D([], [], ls="", marker="X", ms=8, color=VERMILLION, mec="white", label="frame dropped"))
    if view_ms > span_ms:
        handles.append(Patch(color="#F1F1F1", label="after the window: the arrivals\nof frames sent in it, nothing else"))
    if with_gid_down(ax):
        handles.append(Line2D([], [], color="#999999", lw=1.2, ls=(0, (1, 2)), label="node down"))
    if handles:
        ax.legend(handles=handles, fontsize=SMALL, borderaxespad=0, **outside_legend(fig, own))
    if not arrows and not shown_events:
        ax.text(0.5, 0.5, "no frames or node events in this window", transform=ax.transAxes, ha="center", va="center", fontsize=FONT, color=GREY)
    declutter(fig, labels, max_levels=3)  # a first place for the notes, kept where no better one exists
    room = _Room(fig, ax, [], segments, [((x, 0.0), (x, view_ms)) for x in col.values()])  # nor on a node's line
    room.taken += [Bbox.from_bounds(px - 3.5, py - 3.5, 7, 7) for px, py in (room.to_px(m) for m in marks)]  # nor on a mark
    place_notes(room, labels)
    unnamed = place_along(room, tags, tag_paths)
    if unnamed and title is None:  # said where the reader looks first, not left for them to count
        ax.set_title(f"{ax.get_title(loc='left')}; {unnamed} not named (too dense here: zoom in)", fontsize=FONT + 1.5, loc="left", pad=24)
    return fig


_MAX_NAMES = 80
# where on its arrow a frame's name may sit, best first: the middle, then outwards (never on the arrowhead or the sender)
_ALONG = tuple(sorted((round(0.12 + 0.04 * i, 2) for i in range(20)), key=lambda f: (abs(f - 0.5), f)))
# where a name that finds no free place on its arrow goes instead, in points from the arrow's middle, with a leader line
_ASIDE = tuple((dx * r, dy * r) for r in (1.0, 1.8, 2.6) for dx, dy in ((0, 12), (0, -12), (34, 0), (-34, 0), (28, 14), (-28, 14), (28, -14), (-28, -14)))
_GAP = 4.0  # pixels kept free around every name, so two names never touch
_CLEAR = 5.0  # pixels a name keeps off the other lines, so it does not read as naming a line it only grazes


class _Room:
    """Where a text may go, in pixels: inside the axes, off every text already placed (with a gap), and crossing as few
    of the diagram's lines (arrows, node lines) as it can, a faint heartbeat counting less. The one placement rule of
    the diagram: frame names (``place_along``) and the nodes' notes (``place_notes``) are both judged by ``cost``."""

    def __init__(self, fig: Figure, ax: Axes, placed: list[Annotation],
                 segments: list[tuple[tuple[float, float], tuple[float, float], bool]],
                 node_lines: list[tuple[tuple[float, float], tuple[float, float]]]) -> None:
        fig.draw_without_rendering()
        self.renderer = fig._get_renderer()  # type: ignore[attr-defined]
        self.ax = ax
        self.taken = [_text_box(a, self.renderer) for a in placed]
        self.frame = ax.get_window_extent(self.renderer)
        self.to_px = ax.transData.transform
        self.lines = [(self.to_px(p), self.to_px(q), 0.2 if faint else 1.0, False) for p, q, faint in segments]
        self.lines += [(self.to_px(p), self.to_px(q), 1.0, True) for p, q in node_lines]

    def box(self, ann: Annotation) -> Bbox:
        return _text_box(ann, self.renderer)

    def take(self, ann: Annotation) -> None:
        self.taken.append(self.box(ann).padded(_GAP))

    def cost(self, box: Bbox, own: tuple[Any, Any] | None = None, leader: tuple[Any, Any] | None = None,
             node_line: float = 1.0) -> float:
        """inf if ``box`` leaves the axes or touches a placed text (or ``leader`` crosses one), else the lines it crosses
        (a heartbeat 0.2, a node's line ``node_line``)."""
        frame = self.frame
        if box.x0 < frame.x0 or box.x1 > frame.x1 or box.y0 < frame.y0 or box.y1 > frame.y1:
            return float("inf")
        padded = box.padded(_GAP)
        if any(padded.overlaps(other) for other in self.taken):
            return float("inf")
        if leader is not None and any(_crosses(other, *leader) for other in self.taken):
            return float("inf")
        hits = 0.0
        clear = box.padded(_CLEAR)
        for p, q, weight, node in self.lines:
            if own is not None and abs(p - own[0]).max() < 0.5 and abs(q - own[1]).max() < 0.5:  # the name's own arrow
                continue
            if _crosses(clear, p, q) or (leader is not None and _segments_cross(leader, (p, q))):
                hits += node_line if node else weight
        return hits


def place_along(room: _Room, tags: list[Annotation], paths: list[tuple[tuple[float, float], tuple[float, float]]]) -> int:
    """Slide each frame name along its arrow to a place that covers no other text and, if it can, no other line.

    In a dense window (a handoff round: every node asks every other at once) the arrows cross in the middle, so a name
    at the midpoint sits on other arrows and on the next name. Each name tries points along its own arrow, middle
    first; a place overlapping a label or an earlier name is never taken; among the others the one crossing the fewest
    protocol arrows and node lines wins (a faint heartbeat counts less). A name with no clear place on its arrow sits
    beside it with a thin leader line, where neither the name nor the leader crosses a line or a text; failing that, on
    its arrow over lines but off every text. A name with no place off every text is left out (a window too long for
    its frames); the count is returned, for the title.
    """
    inf = float("inf")
    to_px = room.to_px
    left_out = 0
    for ann, (start, end) in zip(tags, paths):
        own = (to_px(start), to_px(end))
        best: tuple[float, tuple[float, float]] = (inf, start)
        for f in _ALONG:
            ann.xy = (start[0] + (end[0] - start[0]) * f, start[1] + (end[1] - start[1]) * f)
            score = room.cost(room.box(ann), own)
            if score < best[0]:
                best = (score, ann.xy)
            if score == 0:
                break
        final: Annotation | None = ann
        if best[0] >= 1.0:  # no clear place on the arrow: beside it, else over lines, else nowhere
            beside = _aside(ann, start, end, room, own)
            if beside is not None:
                final = beside
            elif best[0] < inf:
                ann.xy = best[1]
            else:
                ann.remove()
                final = None
                left_out += 1
        else:
            ann.xy = best[1]
        if final is not None:
            room.take(final)
    return left_out


# where a node's note may go, in points from its mark: right of the line first (as drawn), then left of it, then up or
# down the line, then further out; beyond the first few it is joined to its mark by a leader line
_NOTE_DX = (7.0, 40.0, 80.0, 120.0, 160.0, 200.0)
_NOTE_ON_LINE = 0.5  # a note over another node's line (its white box hides it) is better than one across an arrow
_NOTE_DY = tuple(4.0 * i for i in range(-30, 31))
_NOTE_PLACES = tuple(sorted(((dx, dy, side) for dx in _NOTE_DX for dy in _NOTE_DY for side in (1.0, -1.0)),
                            key=lambda c: ((c[0] - _NOTE_DX[0]) ** 2 + c[1] ** 2, -c[2], abs(c[1]), c[1])))


def place_notes(room: _Room, notes: list[Annotation]) -> list[Annotation]:
    """Move each note (a node's rows at one instant, a dropped frame's label) to where it crosses no arrow and no
    node line and covers no text; returns the notes as drawn (one moved far from its mark is a copy with a leader).

    ``declutter`` stacks the notes right of their marks, where the node's own frames leave it (an epoch's note on the
    owner's line lay across its first ``Write`` and the ``Ack`` coming back). Each note tries places around its mark,
    nearest first, right then left of the line, then up or down it and further out with a leader line that itself
    crosses nothing; the first place crossing nothing wins, else the one crossing fewest lines (off every text), else
    it stays where ``declutter`` put it. Notes are placed earliest first; each one placed is avoided by the next.
    """
    inf = float("inf")
    drawn: list[Annotation] = []
    for ann in sorted(notes, key=lambda a: (-float(room.to_px(a.xy)[1]), float(a.xy[0]))):
        anchor = room.to_px(ann.xy)
        home = (ann.xyann, ann.get_horizontalalignment())
        ann.xyann = (0.0, 0.0)
        ann.set_horizontalalignment("left")
        base = room.box(ann)  # measured once: every candidate is this box moved (text layout is the slow part)
        px = room.ax.figure.dpi / 72  # pixels per point
        height = base.height / px  # points
        best: tuple[float, tuple[float, float], str, bool] = (inf, home[0], home[1], False)
        for dx, dy, side in _NOTE_PLACES:  # nearest first: the first that crosses nothing wins
            box = base.translated(side * dx * px - (base.width if side < 0 else 0.0), dy * px)
            lead = dx > _NOTE_DX[0] or abs(dy) > height / 2
            edge = (min(max(anchor[0], box.x0), box.x1), min(max(anchor[1], box.y0), box.y1))
            score = room.cost(box, None, (anchor, edge) if lead else None, node_line=_NOTE_ON_LINE)
            if score < best[0]:
                best = (score, (side * dx, dy), "left" if side > 0 else "right", lead)
            if score == 0:
                break
        score, offset, ha, lead = best
        if score == inf:
            offset, ha, lead = home[0], home[1], False
        ann.xyann = offset
        ann.set_horizontalalignment(cast(Literal["left", "center", "right"], ha))
        if lead:
            box = room.box(ann)
            edge = (min(max(anchor[0], box.x0), box.x1), min(max(anchor[1], box.y0), box.y1))
            relpos = ((edge[0] - box.x0) / max(box.width, 1e-9), (edge[1] - box.y0) / max(box.height, 1e-9))
            ann = _leader_copy(ann, offset, ha, relpos)
        ann.set_gid("note")
        patch = ann.get_bbox_patch()
        if patch is not None:  # opaque: a note may lie over another node's line, never across an arrow
            patch.set_alpha(1.0)
        room.take(ann)
        drawn.append(ann)
    return drawn


def _leader_copy(ann: Annotation, offset: tuple[float, float], ha: str, relpos: tuple[float, float] = (0.5, 0.5)) -> Annotation:
    """The same text at ``offset`` points from its anchor, joined to it by a thin leader line (the original removed)."""
    ax = cast(Axes, ann.axes)
    ann.remove()
    moved: Annotation = ax.annotate(ann.get_text(), xy=ann.xy, xytext=offset, textcoords="offset points", ha=ha,
                                    va=ann.get_verticalalignment(), fontsize=ann.get_fontsize(), color=ann.get_color(),
                                    fontweight=ann.get_fontweight(), zorder=6, annotation_clip=False,
                                    bbox={"boxstyle": "square,pad=0.08", "facecolor": "white", "edgecolor": "none", "alpha": 0.8},
                                    arrowprops={"arrowstyle": "-", "color": ann.get_color(), "lw": 0.6, "shrinkA": 0,
                                                "shrinkB": 0, "relpos": relpos})
    moved.set_in_layout(False)
    moved.set_gid(ann.get_gid())
    return moved


def _aside(ann: Annotation, start: tuple[float, float], end: tuple[float, float], room: _Room,
           own: tuple[Any, Any]) -> Annotation | None:
    """The name beside the middle of its arrow with a leader line, at the first place where neither crosses anything; None if none."""
    mid = ((start[0] + end[0]) / 2, (start[1] + end[1]) / 2)
    anchor = room.to_px(mid)
    ann.xy = mid
    chosen: tuple[float, float] | None = None
    for offset in _ASIDE:
        ann.xyann = offset
        box = room.box(ann)
        centre = ((box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2)
        if room.cost(box, own, (anchor, centre)) == 0:
            chosen = offset
            break
    ann.xyann = (0, 0)
    if chosen is None:
        return None
    return _leader_copy(ann, chosen, "center")


def _text_box(ann: Annotation, renderer: Any) -> Bbox:
    """The box of an annotation's text alone (without its leader line), where its anchor is now."""
    ann.update_positions(renderer)
    return Text.get_window_extent(ann, renderer)


def _segments_cross(a: tuple[Any, Any], b: tuple[Any, Any]) -> bool:
    """Whether two segments (pixels) cross strictly (touching at an end does not count: a leader starts on its arrow)."""
    (p, q), (r, t) = a, b

    def side(u: Any, v: Any, w: Any) -> float:
        return float((v[0] - u[0]) * (w[1] - u[1]) - (v[1] - u[1]) * (w[0] - u[0]))

    return side(p, q, r) * side(p, q, t) < 0 and side(r, t, p) * side(r, t, q) < 0


def _crosses(box: Bbox, p: Any, q: Any) -> bool:
    """Whether the segment p-q (pixels) passes through ``box``: Liang-Barsky clipping, exact (no sampling)."""
    lo, hi = 0.0, 1.0
    dx, dy = q[0] - p[0], q[1] - p[1]
    for d, near, far in ((dx, box.x0 - p[0], box.x1 - p[0]), (dy, box.y0 - p[1], box.y1 - p[1])):
        if abs(d) < 1e-12:
            if near > 0 or far < 0:
                return False
            continue
        a, b = near / d, far / d
        if a > b:
            a, b = b, a
        lo, hi = max(lo, a), min(hi, b)
        if lo > hi:
            return False
    return True


def with_gid_down(ax: Axes) -> bool:
    """Whether a node's line is drawn down somewhere in the window."""
    return any(child.get_gid() == "node.down" for child in ax.get_children())


def keep_free(fig: Figure, placed: list[Annotation], optional: list[Annotation]) -> None:
    """Remove each optional label that would overlap a placed one or an optional one already kept."""
    if not optional:
        return
    renderer = fig._get_renderer()  # type: ignore[attr-defined]
    boxes = [a.get_window_extent(renderer) for a in placed]
    for ann in optional:
        box = ann.get_window_extent(renderer)
        if any(box.overlaps(other) for other in boxes):
            ann.remove()
        else:
            boxes.append(box)
