"""Network cuts read from a trace, as spells, and how a chart with one lane per node shows them.

A **spell** is one ``fault.partition`` row (recorded once per node of its first side: counted
once) from its instant to the moment none of its links is cut any more: the ``fault.reconnect``
rows that restore them (a flap cuts and reconnects the same sides every few hundred ms) or the
next ``fault.heal`` (every link whole). A spell that outlives the trace is *never healed*.

Why spells and not "partition until the next heal": swarm runs flap links for seconds and heal
only once, at the end of their safety phase; a band from the first cut to that heal said the
network was split for 28 s when it was split for a third of that, in 19 short spells.

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
from dataclasses import dataclass

from matplotlib.axes import Axes
from matplotlib.backend_bases import RendererBase
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.transforms import ScaledTranslation

from sim.trace import Row, Trace
from sim.viz.timeline import SMALL, TimeUnit, end_ns

__all__ = ["Spell", "Band", "spells", "bands", "draw_bands", "band_handle", "name_cuts", "PARTITION_YELLOW"]

PARTITION_YELLOW = "#FFF3C4"
MARK_YELLOW = "#EBCB6B"  # a spell's mark on the strip: darker than the band, so it reads on white
TEXT_OCHRE = "#7A5C00"
ROW_PT = 13.0  # one strip row, in points: a name in SMALL type and a little air
_GAP_PT = 3.0  # between the axes' top and the strip's first row
_PAD_PX = 6.0  # the least room between two cuts on one row
MAX_ROWS = 4

Link = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Spell:
    """One cut of ``sides`` (``a -> b`` only when ``oneway``) from ``start_ns`` until its last link was whole again."""

    start_ns: int
    end_ns: int
    sides: tuple[tuple[str, ...], tuple[str, ...]]
    oneway: bool
    healed: bool  # False: still cut when the trace ends

    @property
    def text(self) -> str:
        """``n1 n2 | n3``, or ``n1 n2 -/-> n3`` for a one-way cut."""
        return f"{' '.join(self.sides[0])}{' -/-> ' if self.oneway else ' | '}{' '.join(self.sides[1])}"


@dataclass(frozen=True, slots=True)
class Band:
    """Overlapping spells drawn as one band: from the first one's start to the last one's end."""

    start_ns: int
    end_ns: int
    spells: int


def _links(row: Row) -> set[Link]:
    a = [str(n) for n in row.get("from") or ()]
    b = [str(n) for n in row.get("to") or ()]
    links = {(u, v) for u in a for v in b if u != v}
    if not row.get("oneway"):
        links |= {(v, u) for u, v in links}
    return links


def spells(trace: Trace) -> list[Spell]:
    """Every spell of cut links in the trace, in the order they began (see the module docstring)."""
    out: list[tuple[int, Spell]] = []  # (the cut row's place in the trace, its spell): spells of one instant in trace order
    open_: list[tuple[Row, set[Link]]] = []  # (the cut's row, its links not yet restored)
    seen: set[tuple[str, int, str]] = set()

    def close(index: int, t_ns: int, healed: bool) -> None:
        row, _ = open_.pop(index)
        sides = (tuple(str(n) for n in row.get("from") or ()), tuple(str(n) for n in row.get("to") or ()))
        out.append((row.seq, Spell(row.t_ns, t_ns, sides, bool(row.get("oneway")), healed)))

    for row in trace.of("fault.partition", "fault.reconnect", "fault.heal"):
        ident = (row.kind, row.t_ns, repr((row.get("from"), row.get("to"), row.get("oneway"))))
        if ident in seen:  # the same fault, recorded on another node of its side
            continue
        seen.add(ident)
        if row.kind == "fault.partition":
            open_.append((row, _links(row)))
        elif row.kind == "fault.reconnect":
            restored = _links(row)
            for i in reversed(range(len(open_))):
                open_[i][1].difference_update(restored)
                if not open_[i][1]:
                    close(i, row.t_ns, True)
        else:
            while open_:
                close(len(open_) - 1, row.t_ns, True)
    last = end_ns(trace)
    while open_:
        close(len(open_) - 1, last, False)
    return [spell for _, spell in sorted(out, key=lambda e: (e[1].start_ns, e[0]))]


def bands(found: list[Spell]) -> list[Band]:
    """The spells merged where they overlap in time (one starting the instant another ends does not overlap it)."""
    out: list[Band] = []
    for spell in sorted(found, key=lambda s: (s.start_ns, s.end_ns)):
        if out and spell.start_ns < out[-1].end_ns:
            last = out[-1]
            out[-1] = Band(last.start_ns, max(last.end_ns, spell.end_ns), last.spells + 1)
        else:
            out.append(Band(spell.start_ns, spell.end_ns, 1))
    return out


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
