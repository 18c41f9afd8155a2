"""Network cuts read from a trace, as spells of cut links and the bands they make (no matplotlib).

A **spell** is one ``fault.partition`` row (recorded once per node of its first side: counted
once) from its instant to the moment none of its links is cut any more: the ``fault.reconnect``
rows that restore them (a flap cuts and reconnects the same sides every few hundred ms) or the
next ``fault.heal`` (every link whole). A spell that outlives the trace is *never healed*.

Why spells and not "partition until the next heal": swarm runs flap links for seconds and heal
only once, at the end of their safety phase; a band from the first cut to that heal said the
network was split for 28 s when it was split for a third of that, in 19 short spells.

A **band** is the spells that overlap in time, merged (the charts draw one pale band per band,
``sim.viz.cuts``); spells that merely touch stay apart.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.trace import Row, Trace
from sim.viz.data.timebase import end_ns

__all__ = ["Link", "Spell", "Band", "spells", "bands"]

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
