"""The cluster graph: a one-way cut has its own colour and legend entry, and the arrow's head shows outside its target's disc.

Set ``CASTY_VIZ_OUT=/some/dir`` to also keep every figure's PNG there for a look.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

from matplotlib.axes import Axes  # noqa: E402
from matplotlib.collections import LineCollection, PathCollection  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import FancyArrowPatch  # noqa: E402

from sim.viz.data.frames import Frame, MemberState  # noqa: E402
from sim.viz.graph import STATUS_COLOURS, cluster_graph  # noqa: E402

S = 1_000_000_000


def _frame(n: int, cuts: tuple[tuple[str, str], ...], owner: str = "n1") -> Frame:
    """n nodes: n1 up and owning the key, n2 paused, n3 down (life 2), the rest up; the given directed links cut."""
    status = {"n2": "paused", "n3": "down"}
    members = tuple(MemberState(f"n{i}", status.get(f"n{i}", "up"), 2 if i == 3 else 1) for i in range(1, n + 1))
    return Frame(3 * S, members, cuts, "app:acct", "k", owner, "(2, n1#1)", (), ("n1", "n2", "n3"), ())


def save(fig: Figure, name: str, tmp_path: Path) -> None:
    """Render the figure (catches drawing errors); keep it in $CASTY_VIZ_OUT when set."""
    fig.savefig(tmp_path / f"{name}.png", dpi=100)
    out = os.environ.get("CASTY_VIZ_OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        fig.savefig(Path(out) / f"{name}.png", dpi=100)


def only_axes(fig: Figure) -> Axes:
    (ax,) = fig.axes
    return ax


def legend_colours(ax: Axes) -> dict[str, str]:
    """Each legend entry's label and the colour its handle shows (a line's colour, a patch's fill)."""
    legend = ax.get_legend()
    assert legend is not None
    out = {}
    for text, handle in zip(legend.get_texts(), legend.legend_handles):
        assert handle is not None
        colour: Any = handle.get_color() if isinstance(handle, Line2D) else handle.get_facecolor()  # type: ignore[attr-defined]
        out[text.get_text()] = to_hex(colour)
    return out


def arrows(ax: Axes) -> list[FancyArrowPatch]:
    return [p for p in ax.patches if isinstance(p, FancyArrowPatch)]


def discs(ax: Axes) -> list[PathCollection]:
    """The node discs, one collection per member, in the frame's order."""
    return [c for c in ax.collections if isinstance(c, PathCollection)]


def ring_width(disc: PathCollection) -> float:
    return float(np.asarray(disc.get_linewidth()).ravel()[0])


def centre_px(ax: Axes, disc: PathCollection) -> tuple[float, float]:
    x, y = ax.transData.transform(np.asarray(disc.get_offsets())[0])
    return float(x), float(y)


def outer_radius_px(fig: Figure, disc: PathCollection) -> float:
    """The disc's radius with its ring's outer half, on the canvas (sizes are marker areas in points²)."""
    return (math.sqrt(float(np.asarray(disc.get_sizes())[0])) / 2 + ring_width(disc) / 2) * fig.dpi / 72


@pytest.mark.parametrize("n", [3, 5])
def test_a_one_way_cut_has_its_own_colour_and_legend_entry(n: int, tmp_path: Path) -> None:
    """n1->n2 cut both ways, n3->n1 one way: the arrow's colour is the legend's 'cut one way', used by no node status and not the two-way cut's red."""
    fig = cluster_graph(_frame(n, (("n1", "n2"), ("n2", "n1"), ("n3", "n1"))))
    save(fig, f"graph_oneway_{n}", tmp_path)
    ax = only_axes(fig)
    entries = legend_colours(ax)
    assert sorted(entries) == ["cut both ways", "cut one way (arrow)", "down", "owner", "paused", "up"]
    (arrow,) = arrows(ax)
    oneway = to_hex(arrow.get_edgecolor())
    assert entries["cut one way (arrow)"] == oneway
    assert oneway not in {to_hex(c) for c in STATUS_COLOURS.values()}
    assert oneway != entries["cut both ways"]
    dashed = [c for c in ax.collections if isinstance(c, LineCollection) and np.asarray(c.get_linestyle(), dtype=object)[0][1] is not None]
    assert [to_hex(tuple(np.asarray(c.get_edgecolor())[0])) for c in dashed] == [entries["cut both ways"]]  # the n1-n2 line, in the legend's red


@pytest.mark.parametrize("n", [3, 5])
def test_the_legend_fits_inside_the_figure(n: int) -> None:
    """With six entries the legend stays inside the figure's width (small and big graphs)."""
    fig = cluster_graph(_frame(n, (("n3", "n1"),)))
    fig.draw_without_rendering()
    renderer = fig._get_renderer()  # type: ignore[attr-defined]
    legend = only_axes(fig).get_legend()
    assert legend is not None
    box, page = legend.get_window_extent(renderer), fig.bbox
    assert page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0


@pytest.mark.parametrize("n", [3, 5])
def test_a_one_way_arrow_ends_outside_its_targets_ring(n: int) -> None:
    """The arrow n3->n1 stops outside n1's disc and its thick owner ring, so its head is seen (it was under the ring)."""
    fig = cluster_graph(_frame(n, (("n3", "n1"),)))
    fig.draw_without_rendering()
    ax = only_axes(fig)
    (arrow,) = arrows(ax)
    tip = ax.transData.transform(arrow.get_path().vertices)  # the arrow's outline, head included, on the canvas
    (disc,) = [c for c in discs(ax) if ring_width(c) == pytest.approx(4.5)]  # the owner's thick ring
    centre = centre_px(ax, disc)
    closest = min(math.dist((float(x), float(y)), centre) for x, y in tip)
    assert closest > outer_radius_px(fig, disc) + 1


def _boxes(fig: Figure, ax: Axes) -> list[tuple[str, Any]]:
    """Each text of the graph with the box it covers on the canvas (its white background box when it has one)."""
    fig.draw_without_rendering()
    renderer = fig._get_renderer()  # type: ignore[attr-defined]
    out = []
    for text in ax.texts:
        patch = text.get_bbox_patch()
        out.append((text.get_text(), (patch if patch is not None else text).get_window_extent(renderer)))
    return out


@pytest.mark.parametrize(("n", "source", "target"), [(3, "n3", "n1"), (3, "n2", "n1"), (4, "n3", "n1"), (5, "n3", "n1"), (6, "n2", "n4")])
def test_no_text_hides_a_one_way_arrows_head(n: int, source: str, target: str) -> None:
    """The head of a one-way arrow lies under no text (the owner's 'OWNER · replica 1' under the top disc hid the n3->n1 head)."""
    fig = cluster_graph(_frame(n, ((source, target),)))
    ax = only_axes(fig)
    boxes = _boxes(fig, ax)
    (arrow,) = arrows(ax)
    outline = ax.transData.transform(arrow.get_path().vertices)
    end = centre_px(ax, discs(ax)[int(target.removeprefix("n")) - 1])
    tip = min(((float(x), float(y)) for x, y in outline), key=lambda v: math.dist(v, end))
    assert [name for name, box in boxes if box.contains(*tip)] == []


def test_the_legend_covers_no_label_of_the_bottom_node() -> None:
    """Six nodes, n4 at the bottom with a role and two lines of verdicts, in chapter 09's two-panel layout: the legend overlaps no text."""
    members = tuple(MemberState(f"n{i}", "down" if i == 4 else "up", 1,
                                (("n1", "dead"), ("n2", "dead"), ("n3", "suspect")) if i == 4 else ()) for i in range(1, 7))
    frame = Frame(12 * S, members, (("n2", "n4"),), "app:acct", "k", None, "(2, n3#1)", (), ("n3", "n4", "n5"), ())
    fig = Figure(figsize=(12, 4.8))
    for i in range(2):
        cluster_graph(frame, ax=fig.add_axes((0.01 + 0.5 * i, 0.03, 0.48, 0.82)), title="swarm")
    for ax in fig.axes:
        legend = ax.get_legend()
        assert legend is not None
        boxes = _boxes(fig, ax)
        box = legend.get_window_extent(fig._get_renderer())  # type: ignore[attr-defined]
        assert [name for name, b in boxes if b.overlaps(box)] == []
        assert fig.bbox.y0 <= box.y0


@pytest.mark.parametrize("n", [3, 4, 5, 6])
def test_no_role_or_verdict_label_covers_a_disc(n: int) -> None:
    """Every node's role and verdict label (the texts on a white box) is on the page and off every disc and its ring."""
    members = tuple(MemberState(f"n{i}", "up", 1, (("n2", "dead"),) if i == 1 else ()) for i in range(1, n + 1))
    frame = Frame(3 * S, members, (), "app:acct", "k", "n1", "(1, n1#1)", (), tuple(f"n{i}" for i in range(1, n + 1)), ())
    fig = cluster_graph(frame)
    ax = only_axes(fig)
    labels = [(name, box) for name, box in _boxes(fig, ax) if "replica" in name]
    assert len(labels) == n
    page = fig.bbox
    assert [name for name, box in labels if not (page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0 and box.y1 <= page.y1)] == []
    for disc in discs(ax):
        cx, cy = centre_px(ax, disc)
        radius = outer_radius_px(fig, disc)
        for name, box in labels:
            nearest = (min(max(cx, box.x0), box.x1), min(max(cy, box.y0), box.y1))
            assert math.dist(nearest, (cx, cy)) > radius, name
