"""Drawing helpers every chart shares: labels that keep off each other, notes, fault legend entries, lane axes.

These draw; what they draw comes from the data layer (``sim.viz.data``): a chart reads the trace
there, then places its marks and labels with these, so every view lays out text the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.text import Annotation
from matplotlib.transforms import Bbox, blended_transform_factory

from sim.trace import Trace
from sim.viz.data.nodes import NodeEvents
from sim.viz.data.notes import note_rows
from sim.viz.data.timebase import TimeUnit, fmt_duration
from sim.viz.palette import FONT, GREEN, GREY, INK, LIGHT_GREY, PURPLE, SMALL, VERMILLION

__all__ = ["label", "declutter", "add_notes", "fault_handles", "style_node_lanes", "outside_legend"]


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
    numbered = note_rows(trace)
    if not numbered:
        return []
    inline: list[Annotation] = []
    blend = blended_transform_factory(ax.transData, ax.transAxes)
    lines = []
    for i, row in enumerate(numbered, 1):
        x = unit.x(row.t_ns)
        ax.axvline(x, color=GREY, lw=0.8, ls=":", zorder=1, gid="note")
        ax.annotate(
            str(i), xy=(x, 1.0 if where == "top" else 0.0), xycoords=blend, xytext=(0, 3), textcoords="offset points",
            ha="center", va="bottom", fontsize=7.5, color="white", annotation_clip=False, zorder=7,
            bbox={"boxstyle": "circle,pad=0.2", "facecolor": GREY, "edgecolor": "none"},
        )
        text = row.text
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
