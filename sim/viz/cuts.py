"""How a chart with one lane per node shows the network's cuts (the spells of ``sim.viz.data.cuts``).

A chart shows them twice:

* a pale **band** across every lane while some link is cut: spells that overlap in time make one
  band (the legend says how many were merged); spells that merely touch stay apart;
* a **strip** above the lanes, one row per *cut* (the same sides, the same direction), with a
  mark per spell and the cut's name once (``cut n6 | n1 n2 ×10``: ten spells). A row holds
  several cuts when their marks and names do not overlap; a cut that fits on no row is named
  in a caption under the axes instead, with its time span, so no two names are ever drawn on
  top of each other.
"""

from __future__ import annotations

import textwrap

from matplotlib.axes import Axes
from matplotlib.backend_bases import RendererBase
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.transforms import ScaledTranslation

from sim.viz.data.cuts import Spell, bands
from sim.viz.data.timebase import TimeUnit
from sim.viz.palette import SMALL

__all__ = ["draw_bands", "band_handle", "name_cuts", "PARTITION_YELLOW"]

PARTITION_YELLOW = "#FFF3C4"
MARK_YELLOW = "#EBCB6B"  # a spell's mark on the strip: darker than the band, so it reads on white
TEXT_OCHRE = "#7A5C00"
ROW_PT = 13.0  # one strip row, in points: a name in SMALL type and a little air
_GAP_PT = 3.0  # between the axes' top and the strip's first row
_PAD_PX = 6.0  # the least room between two cuts on one row
MAX_ROWS = 4


def draw_bands(ax: Axes, found: list[Spell], unit: TimeUnit) -> None:
    """A pale band across every lane per band of spells, behind everything (gid ``partition``)."""
    for band in bands(found):
        ax.axvspan(unit.x(band.start_ns), unit.x(band.end_ns), color=PARTITION_YELLOW, lw=0, zorder=0.2, gid="partition")


def band_handle(found: list[Spell]) -> Patch:
    """The bands' legend entry: how many spells of how many cuts, and how many overlapping ones each band merged."""
    if len(found) == 1:
        return Patch(facecolor=PARTITION_YELLOW, label="network partition\n(until healed)")
    merged = [b for b in bands(found) if b.spells > 1]
    cuts = len({(s.sides, s.oneway) for s in found})
    how = (f"({sum(b.spells for b in merged)} overlapping: merged into {len(merged)} band{'s' if len(merged) != 1 else ''})"
           if merged else "(one band each: none overlap)")
    return Patch(facecolor=PARTITION_YELLOW, label=f"network cut: {len(found)} spells of {cuts} cut{'s' if cuts != 1 else ''}\n{how}")


def _span_words(unit: TimeUnit, group: list[Spell]) -> str:
    return f"{unit.x(group[0].start_ns):.1f}–{unit.x(max(s.end_ns for s in group)):.1f} {unit.name}"


def name_cuts(ax: Axes, found: list[Spell], unit: TimeUnit, renderer: RendererBase, *, max_rows: int = MAX_ROWS) -> float:
    """Draw the strip above ``ax`` (see the module docstring); returns its height in points, for the title's pad.

    Call it once the figure is laid out (after ``draw_without_rendering``): the rows are packed
    from the widths the names take on the canvas.
    """
    if not found:
        return 0.0
    groups: dict[tuple[tuple[tuple[str, ...], tuple[str, ...]], bool], list[Spell]] = {}
    for spell in found:
        groups.setdefault((spell.sides, spell.oneway), []).append(spell)
    lone = len(found) == 1
    fig = ax.figure
    left, right = ax.get_window_extent(renderer).intervalx
    px_per_pt = fig.dpi / 72
    rows: list[list[tuple[float, float]]] = [[] for _ in range(max_rows)]
    unnamed: list[str] = []

    def px(t_ns: int) -> float:
        return float(ax.transData.transform((unit.x(t_ns), 0))[0])

    def free(row: int, lo: float, hi: float) -> bool:
        return left - 1 <= lo and hi <= right + 1 and all(hi + _PAD_PX <= a or b + _PAD_PX <= lo for a, b in rows[row])

    for group in groups.values():
        spell = group[0]
        name = ("partition " if lone else "cut ") + spell.text + (f" ×{len(group)}" if len(group) > 1 else "")
        name += "" if group[-1].healed else " (never healed)"
        marks = [(px(s.start_ns), max(px(s.end_ns), px(s.start_ns) + 2)) for s in group]
        lo, hi = marks[0][0], max(b for _, b in marks)
        probe = ax.text(0, 0, name, fontsize=SMALL)
        width = probe.get_window_extent(renderer).width
        probe.remove()
        first = marks[0][1] - marks[0][0]
        # where the name goes: inside the first mark when it fits, else after the last, else before the first
        choices = ([("inside", lo, hi)] if width + 8 <= first else []) + [("after", lo, hi + 3 * px_per_pt + width),
                                                                           ("before", lo - 3 * px_per_pt - width, hi)]
        placed = next(((r, where) for r in range(max_rows) for where, a, b in choices if free(r, a, b)), None)
        if placed is None:
            unnamed.append(f"{name} ({_span_words(unit, group)})")
            continue
        row, where = placed
        extent = next((a, b) for w, a, b in choices if w == where)
        rows[row].append(extent)
        lift = _GAP_PT + ROW_PT * (row + 0.5)
        at = ax.get_xaxis_transform() + ScaledTranslation(0, lift / 72, fig.dpi_scale_trans)
        for s in group:
            x0 = unit.x(s.start_ns)
            x1 = max(unit.x(s.end_ns), float(ax.transData.inverted().transform((px(s.start_ns) + 2, 0))[0]))
            ax.add_line(Line2D([x0, x1], [1.0, 1.0], transform=at, color=MARK_YELLOW, lw=ROW_PT - 2.5, solid_capstyle="butt",
                               clip_on=False, gid="cut.spell", label=name))
        x, dx, ha = {"inside": (unit.x(spell.start_ns), 3.0, "left"),
                     "after": (unit.x(max(s.end_ns for s in group)), 3.0, "left"),
                     "before": (unit.x(spell.start_ns), -3.0, "right")}[where]
        ax.annotate(name, xy=(x, 1.0), xycoords=ax.get_xaxis_transform(), xytext=(dx, lift), textcoords="offset points",
                    ha=ha, va="center", fontsize=SMALL, color=TEXT_OCHRE, annotation_clip=False, gid="cut.label")
    if unnamed:
        below = ax.xaxis.label.get_window_extent(renderer).y0 - ax.get_window_extent(renderer).y0
        caption = "not named above (overlap): " + "; ".join(unnamed)
        ax.annotate(textwrap.fill(caption, 150), xy=(0, 0), xycoords="axes fraction", xytext=(0, below / px_per_pt - 3),
                    textcoords="offset points", ha="left", va="top", fontsize=SMALL, color=TEXT_OCHRE, gid="cut.caption")
    used = max((i + 1 for i, row in enumerate(rows) if row), default=0)
    return _GAP_PT + ROW_PT * used
