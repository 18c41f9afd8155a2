"""The cluster graph of one frame: members as discs, links as lines, the key's owner and replicas marked.

Drawn with networkx on a fixed circle (nodes in the run's order, the first at the top), so the
same node sits at the same place in every frame and a student's eye can follow it while the
slider moves:

* a disc per node, filled by its own status: green **up**, orange **paused**, light grey **down**;
* a line per pair of nodes: thin grey when whole, red dashed and labelled ``cut`` when the
  partition drops frames both ways, purple dashed with an arrow (in the direction that drops
  frames) when only one direction is cut. Each has its own legend entry, and neither colour is a
  node status's: a one-way cut drawn in the paused orange, with no entry, read as "paused";
* the key's **owner** has a thick black ring and ``OWNER`` under its name, a node still running
  the key under a superseded epoch a dashed red ring and ``stale``; the key's replicas are named
  ``replica``, the first of them ``replica 1`` (the owner when it is alive);
* under a node, the verdicts the others hold about it (``n1, n2 say dead``): failure detection's
  view, which differs from the node's own status during a cut or a pause.

The title names the time, the key and the newest epoch; nothing here reads the trace (see
``sim.viz.data.frames``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import networkx as nx  # type: ignore[import-untyped]
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from sim.viz.data.frames import Frame
from sim.viz.data.keys import key_label
from sim.viz.palette import GREEN, GREY, INK, LIGHT_GREY, ORANGE, VERMILLION

__all__ = ["cluster_graph", "STATUS_COLOURS"]

STATUS_COLOURS = {"up": GREEN, "paused": ORANGE, "down": LIGHT_GREY}
CUT_RED = "#B2182B"  # darker than the palette's vermillion, so a cut never reads as the paused orange
ONEWAY_PURPLE = "#762A83"  # a one-way cut: no status uses it, and it stays apart from the red for red-green colour blindness
_ARROW_MARGIN_PT = 3.0  # the arrow's head stops this far outside the target's ring (the owner's thick ring hid it)
_TEXT_ON = {"up": "white", "paused": INK, "down": INK}


def _positions(nodes: list[str]) -> dict[str, tuple[float, float]]:
    """On a circle, the first node at the top, the others clockwise (fixed: a node never moves between frames)."""
    if len(nodes) == 1:
        return {nodes[0]: (0.0, 0.0)}
    return {node: (math.cos(math.pi / 2 - 2 * math.pi * i / len(nodes)), math.sin(math.pi / 2 - 2 * math.pi * i / len(nodes)))
            for i, node in enumerate(nodes)}


def _points_per_unit(fig: Figure, ax: Axes, xlim: tuple[float, float], ylim: tuple[float, float]) -> float:
    """Typographic points per data unit once the equal aspect fits the limits into the axes' box (sizes are in points, places in data)."""
    box = ax.get_position()
    width_in, height_in = fig.get_size_inches()
    return float(72 * min(box.width * width_in / (xlim[1] - xlim[0]), box.height * height_in / (ylim[1] - ylim[0])))


def _verdict_text(verdicts: Iterable[tuple[str, str]]) -> str:
    """``n1, n2 say dead``: who holds which verdict about a node (one line per verdict)."""
    by_status: dict[str, list[str]] = {}
    for observer, seen in verdicts:
        by_status.setdefault(seen, []).append(observer)
    return "\n".join(f"{', '.join(who)} say{'s' if len(who) == 1 else ''} {seen}" for seen, who in sorted(by_status.items()))


def cluster_graph(frame: Frame, ax: Axes | None = None, *, title: str | None = None, size: tuple[float, float] | None = None) -> Figure:
    """Draw one frame's cluster graph (see the module docstring); returns the figure it drew on."""
    if ax is None:
        if size is None:
            size = (6.4, 4.6) if len(frame.members) > 4 else (4.8, 4.4)
        fig = Figure(figsize=size)  # a fixed layout: one frame per slider step, constrained layout cost most of it
        ax = fig.add_axes((0.02, 0.04, 0.96, 0.84))
    else:
        fig = ax.get_figure()  # type: ignore[assignment]
    nodes = [m.node for m in frame.members]
    pos = _positions(nodes)
    big = len(nodes) > 4  # five nodes and more: smaller discs, labels pushed outwards, no word on every cut
    disc = 1500 if big else 2600
    xlim, ylim = ((-2.5, 2.5), (-2.2, 1.6)) if big else ((-1.75, 1.75), (-1.6, 1.3))  # room at the bottom for verdicts and the legend
    # a label's near edge sits this far from its disc's centre: past the disc, its thickest ring (the owner's) and the label's box
    label_off = (math.sqrt(disc) / 2 + 4.5 / 2 + 4.0) / _points_per_unit(fig, ax, xlim, ylim)
    cuts = set(frame.cuts)
    graph = nx.Graph()
    graph.add_nodes_from(nodes)
    whole, both, oneway = [], [], []
    for i, u in enumerate(nodes):
        for v in nodes[i + 1:]:
            graph.add_edge(u, v)
            there, back = (u, v) in cuts, (v, u) in cuts
            if there and back:
                both.append((u, v))
            elif there:
                oneway.append((u, v))
            elif back:
                oneway.append((v, u))
            else:
                whole.append((u, v))
    nx.draw_networkx_edges(graph, pos, edgelist=whole, ax=ax, edge_color=GREY, width=1.2)
    nx.draw_networkx_edges(graph, pos, edgelist=both, ax=ax, edge_color=CUT_RED, width=2.2, style="dashed")
    for u, v in ([] if big else both):
        (x1, y1), (x2, y2) = pos[u], pos[v]
        ax.text((x1 + x2) / 2, (y1 + y2) / 2, "cut", color=CUT_RED, ha="center", va="center", fontsize=11,
                fontweight="bold", bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none"}, zorder=4)
    if oneway:
        directed = nx.DiGraph(oneway)
        # networkx stops an arrow at the disc's edge, under the ring: stop it outside the thickest ring (the owner's)
        past_ring = (math.sqrt(disc) + 4.5 + 2 * _ARROW_MARGIN_PT) ** 2
        nx.draw_networkx_edges(directed, pos, edgelist=oneway, ax=ax, edge_color=ONEWAY_PURPLE, width=2.2, style="dashed",
                               arrows=True, arrowstyle="-|>", arrowsize=16, node_size=past_ring)
        for u, v in ([] if big else oneway):
            (x1, y1), (x2, y2) = pos[u], pos[v]
            ax.text((x1 + x2) / 2, (y1 + y2) / 2, f"{u}\u2192{v} cut", color=ONEWAY_PURPLE, ha="center", va="center", fontsize=9,
                    fontweight="bold", bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none"}, zorder=4)
    for member in frame.members:
        ring, width, style = "#555555", 1.0, "solid"
        if member.node == frame.owner:
            ring, width = INK, 4.5
        elif member.node in frame.stale:
            ring, width, style = VERMILLION, 3.5, "dashed"
        collection = nx.draw_networkx_nodes(graph, pos, nodelist=[member.node], ax=ax, node_size=disc,
                                            node_color=STATUS_COLOURS[member.status], edgecolors=ring, linewidths=width)
        collection.set_linestyle(style)
        x, y = pos[member.node]
        inside = 0.04 if big else 0.05
        ax.text(x, y + inside, member.node, ha="center", va="center", fontsize=12 if big else 13, fontweight="bold",
                color=_TEXT_ON[member.status], zorder=5)
        ax.text(x, y - 2 * inside - 0.01, member.status if member.life == 1 else f"{member.status} \u00b7 life {member.life}",
                ha="center", va="center", fontsize=8 if big else 9.5, color=_TEXT_ON[member.status], zorder=5)
        role = []
        if member.node == frame.owner:
            role.append("OWNER")
        elif member.node in frame.stale:
            role.append("stale owner")
        if member.node in frame.replicas:
            index = frame.replicas.index(member.node) + 1
            role.append(f"replica {index}")
        lines = [" \u00b7 ".join(role)] if role else []
        verdicts = _verdict_text(member.verdicts)
        if verdicts:
            lines.append(verdicts)
        if lines:
            # outwards from the circle's centre, so that labels sit away from the links between the discs
            r = math.hypot(x, y) or 1.0
            lx, ly = x + label_off * x / r, y + label_off * y / r
            ha = "center" if abs(x) < 0.3 else ("left" if x > 0 else "right")
            va = "bottom" if y > 0.3 else ("top" if y < -0.3 or not big else "center")
            if not big and y > 0.3:  # three or four nodes: the top node's links leave under it, so right of its disc
                lx, ly, ha, va = x + label_off, y, "left", "center"
            elif not big:  # the others: under the disc reads best
                lx, ly, ha, va = x, y - label_off, "center", "top"
            ax.text(lx, ly, "\n".join(lines), ha=ha, va=va, fontsize=9.5 if big else 10.5, color=INK, zorder=5,
                    linespacing=1.15, bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.9})
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_aspect("equal")
    ax.axis("off")
    if title is None:
        what = key_label(frame.actor, frame.key) if frame.actor and frame.key else "no key with an owner"
        epoch = frame.epoch or "none yet"
        owner = frame.owner or "nobody"
        title = f"t = {frame.t:.2f} s \u00b7 key {what}\nepoch {epoch} \u00b7 owner {owner}"
    ax.set_title(title, fontsize=12, loc="left")
    up, paused, down = (Patch(facecolor=STATUS_COLOURS[s], edgecolor="#555555", label=s) for s in ("up", "paused", "down"))
    owner_mark = Line2D([], [], marker="o", ls="", ms=11, mfc="white", mec=INK, mew=3, label="owner")
    both_ways = Line2D([], [], color=CUT_RED, ls="--", lw=2, label="cut both ways")
    one_way = Line2D([], [], color=ONEWAY_PURPLE, ls="--", lw=2, marker=">", ms=7, label="cut one way (arrow)")
    # two rows (the legend fills columns first): the statuses on top, the owner and the links under them
    handles: list[Artist] = [up, owner_mark, paused, both_ways, down, one_way]
    ax.legend(handles=handles, loc="lower center", ncol=3, fontsize=9, frameon=False, bbox_to_anchor=(0.5, -0.02),
              handlelength=2.0, columnspacing=1.2, labelspacing=0.3)
    return fig
