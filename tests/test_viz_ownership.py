"""The ownership chart's network cuts: one band per spell of cut links, named in a strip above the lanes without overlap.

Swarm seed 0 is the case that was unreadable: four link flaps (a cut every few hundred ms) and two partitions, 19
spells of 5 cuts, drawn as one yellow band from 5.4 s to 33 s with 19 labels piled up at the top. The small
scenarios of course chapter 04 must stay as they were: one partition, one band, one label.

Set ``CASTY_VIZ_OUT=/some/dir`` to also keep every figure's PNG there for a look.
"""

from __future__ import annotations

import os
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.text import Text  # noqa: E402
from matplotlib.transforms import Bbox  # noqa: E402

from sim import scenarios  # noqa: E402
from sim.scenarios import Run  # noqa: E402
from sim.trace import Row, Trace  # noqa: E402
from sim.viz import ownership_chart  # noqa: E402

S = 1_000_000_000


@pytest.fixture(scope="module")
def swarm() -> Run:
    run = scenarios.run("swarm", 0)
    assert run.ok, run.failures
    return run


# --- figure inspection ---------------------------------------------------------------------


def only_axes(fig: Figure) -> Axes:
    (ax,) = fig.axes
    return ax


def with_gid(ax: Axes, gid: str) -> list[Any]:
    return [a for a in ax.get_children() if a.get_gid() == gid]


def x_extent(ax: Axes, artist: Any) -> tuple[Any, Any]:
    """An artist's left and right edge in data x (seconds here); Any, to compare with ``pytest.approx``."""
    x0, x1 = artist.get_window_extent().transformed(ax.transData.inverted()).intervalx
    return float(x0), float(x1)


def legend(ax: Axes) -> list[str]:
    found = ax.get_legend()
    assert found is not None
    return [t.get_text() for t in found.get_texts()]


def boxes_above(fig: Figure, ax: Axes) -> list[tuple[str, Bbox]]:
    """Every text drawn above the axes (the cut strip, and the title), with its box on the canvas."""
    fig.draw_without_rendering()
    renderer = fig._get_renderer()  # type: ignore[attr-defined]
    top = ax.get_window_extent(renderer).y1
    found = []
    for artist in ax.get_children():
        if isinstance(artist, Text) and artist.get_visible() and artist.get_text():
            box = artist.get_window_extent(renderer)
            if box.y0 >= top - 1:
                found.append((artist.get_text(), box))
    return found


def save(fig: Figure, name: str, tmp_path: Path) -> None:
    """Render the figure (catches drawing errors); keep it in $CASTY_VIZ_OUT when set."""
    fig.savefig(tmp_path / f"{name}.png", dpi=100)
    out = os.environ.get("CASTY_VIZ_OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        fig.savefig(Path(out) / f"{name}.png", dpi=100)


def _trace(rows: list[tuple[float, str, str, dict[str, Any]]]) -> Trace:
    return Trace(Row(i, round(t * S), node, None, kind, fields) for i, (t, node, kind, fields) in enumerate(rows))


def _cut(t: float, a: list[str], b: list[str], kind: str = "fault.partition", oneway: bool = False) -> tuple[float, str, str, dict[str, Any]]:
    return (t, a[0], kind, {"from": a, "to": b, "oneway": oneway})


def _owned(*faults: tuple[float, str, str, dict[str, Any]], end: float = 20.0) -> Trace:
    """Three nodes, n1 owning app:acct[k] from 1 s, the given fault rows, a last row at ``end``."""
    rows: list[tuple[float, str, str, dict[str, Any]]] = [(0.0, n, "node.started", {"incarnation": 1}) for n in ("n1", "n2", "n3")]
    rows.append((1.0, "n1", "epoch.acquired", {"actor": "app:acct", "key": "k", "epoch_round": 1, "found": 0}))
    rows += sorted(faults, key=lambda r: r[0])
    rows.append((end, "n1", "note", {"text": "end"}))
    return _trace(rows)


# --- the spells of a trace ------------------------------------------------------------------


def test_a_spell_ends_at_the_reconnect_that_restores_its_links() -> None:
    """A cut ends at its own fault.reconnect, not at the next heal; recorded on two nodes it is one spell; unhealed it runs to the end."""
    from sim.viz.data.cuts import spells
    trace = _owned(
        _cut(2.0, ["n1", "n2"], ["n3"]), (2.0, "n2", "fault.partition", {"from": ["n1", "n2"], "to": ["n3"], "oneway": False}),
        _cut(3.0, ["n1", "n2"], ["n3"], "fault.reconnect"), (3.0, "n2", "fault.reconnect", {"from": ["n1", "n2"], "to": ["n3"], "oneway": False}),
        _cut(4.0, ["n1", "n2"], ["n3"]), _cut(5.0, ["n1", "n2"], ["n3"], "fault.reconnect"),
        _cut(6.0, ["n3"], ["n1"], oneway=True), (9.0, "n1", "fault.heal", {}),
        _cut(12.0, ["n2"], ["n1", "n3"]),
    )
    found = [(s.start_ns / S, s.end_ns / S, s.text, s.healed) for s in spells(trace)]
    assert found == [(2.0, 3.0, "n1 n2 | n3", True), (4.0, 5.0, "n1 n2 | n3", True), (6.0, 9.0, "n3 -/-> n1", True),
                     (12.0, 20.0, "n2 | n1 n3", False)]


def test_a_spell_lasts_while_any_of_its_links_is_still_cut() -> None:
    """A reconnect of other sides that restores part of a cut's links leaves the spell open until its last link is whole."""
    from sim.viz.data.cuts import spells
    trace = _owned(
        _cut(2.0, ["n1", "n2"], ["n3"], oneway=True),  # n1->n3 and n2->n3
        _cut(2.5, ["n1"], ["n2", "n3"], "fault.reconnect"),  # restores n1->n3 (and others): n2->n3 still cut
        _cut(4.0, ["n1", "n2"], ["n3"], "fault.reconnect", oneway=True),
    )
    assert [(s.start_ns / S, s.end_ns / S) for s in spells(trace)] == [(2.0, 4.0)]


def test_bands_merge_only_spells_that_overlap() -> None:
    """Overlapping spells make one band (with their count); a spell that starts as another ends stays a band of its own."""
    from sim.viz.data.cuts import bands, spells
    trace = _owned(
        _cut(2.0, ["n1"], ["n2", "n3"]), _cut(3.0, ["n1"], ["n2", "n3"], "fault.reconnect"),
        _cut(3.0, ["n2"], ["n1", "n3"]), _cut(4.0, ["n3"], ["n1", "n2"]),
        _cut(5.0, ["n2"], ["n1", "n3"], "fault.reconnect"), _cut(6.0, ["n3"], ["n1", "n2"], "fault.reconnect"),
    )
    assert [(b.start_ns / S, b.end_ns / S, b.spells) for b in bands(spells(trace))] == [(2.0, 3.0, 1), (3.0, 6.0, 2)]


# --- swarm seed 0: the chart that was unreadable --------------------------------------------


def _expected_spells(trace: Trace) -> list[tuple[float, float]]:
    """Each distinct cut row, to the first later reconnect of the same sides or heal: the flaps' own rhythm, read from the rows."""
    def ident(r: Row) -> tuple[int, str]:
        return r.t_ns, repr((r.get("from"), r.get("to"), r.get("oneway")))

    cuts = list({ident(r): r for r in trace.of("fault.partition")}.values())
    ends = list({ident(r): r for r in trace.of("fault.reconnect", "fault.heal")}.values())
    out = []
    for cut in cuts:
        end = next(r for r in ends if r.t_ns > cut.t_ns and (r.kind == "fault.heal" or ident(r)[1] == ident(cut)[1]))
        out.append((cut.t, end.t))
    return out


def test_swarm_seed_0_draws_each_spell_of_cut_links_as_its_own_band(swarm: Run, tmp_path: Path) -> None:
    """Swarm seed 0: 19 spells of 5 cuts (the flaps' cut-reconnect rhythm), drawn as 13 bands: only overlapping spells merged, and the legend says so."""
    trace = swarm.trace
    fig = ownership_chart(trace)
    save(fig, "ownership_swarm0", tmp_path)
    ax = only_axes(fig)
    expected = _expected_spells(trace)
    assert len(expected) == 19 and expected[0] == pytest.approx((5.411, 6.487))
    merged: list[list[float]] = []
    for start, end in sorted(expected):
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    drawn: list[Any] = sorted(x_extent(ax, band) for band in with_gid(ax, "partition"))
    assert len(drawn) == len(merged) == 13
    assert drawn == [(pytest.approx(a), pytest.approx(b)) for a, b in merged]
    assert drawn[0] == (pytest.approx(5.411), pytest.approx(6.487))  # the first flap's first cut, not 5.4 to 33 s
    assert "network cut: 19 spells of 5 cuts\n(11 overlapping: merged into 5 bands)" in legend(ax)


def test_swarm_seed_0_names_each_cut_once_above_the_lanes_without_overlap(swarm: Run) -> None:
    """Swarm seed 0: each of the 5 cuts is named once, with its spell count, on a strip row with one mark per spell; no text above the axes overlaps another or the title."""
    fig = ownership_chart(swarm.trace)
    ax = only_axes(fig)
    above = boxes_above(fig, ax)
    overlapping = [(a, b) for (a, box_a), (b, box_b) in combinations(above, 2) if box_a.overlaps(box_b)]
    assert overlapping == []
    assert len(above) == 6  # five names and the title
    names = sorted(a.get_text() for a in with_gid(ax, "cut.label"))
    assert names == ["cut n1 n2 n3 n5 n6 -/-> n4", "cut n1 n2 n3 n5 n6 | n4 ×3", "cut n1 n2 n4 n6 | n3 n5 ×2",
                     "cut n2 n4 | n1 n3 n5 n6 ×3", "cut n6 | n1 n2 n3 n4 n5 ×10"]
    assert len(with_gid(ax, "cut.spell")) == 19 and with_gid(ax, "cut.caption") == []
    renderer = fig._get_renderer()  # type: ignore[attr-defined]
    left, right = ax.get_window_extent(renderer).intervalx
    assert all(left - 1 <= box.x0 and box.x1 <= right + 1 for _, box in above)  # none runs into the legend


def test_a_strip_row_never_holds_two_overlapping_cuts(swarm: Run) -> None:
    """Every spell mark sits on its cut's row, and on one row no two cuts' marks and names overlap."""
    fig = ownership_chart(swarm.trace)
    ax = only_axes(fig)
    fig.draw_without_rendering()
    renderer = fig._get_renderer()  # type: ignore[attr-defined]
    by_row: dict[float, list[Bbox]] = {}
    for name in with_gid(ax, "cut.label"):
        marks = [m for m in with_gid(ax, "cut.spell") if m.get_label() == name.get_text()]
        assert marks, name.get_text()
        boxes = [name.get_window_extent(renderer)] + [m.get_window_extent(renderer) for m in marks]
        rows = {round(b.y0 + b.height / 2) for b in boxes}
        assert len(rows) == 1, (name.get_text(), rows)  # the name and its marks share one row
        by_row.setdefault(rows.pop(), []).append(Bbox.union(boxes))
    assert len(by_row) == 3
    assert all(not a.overlaps(b) for row in by_row.values() for a, b in combinations(row, 2))


# --- the small scenarios of chapter 04 stay as they were ------------------------------------


def test_one_partition_is_one_band_and_one_name() -> None:
    """stale-owner-fenced: the split is one band from the cut to the heal, named 'partition n3 | n1 n2', and the legend as before."""
    run = scenarios.run("stale-owner-fenced", 0)
    fig = ownership_chart(run.trace, key=str(run.world.results["key"]))
    ax = only_axes(fig)
    (band,) = with_gid(ax, "partition")
    assert x_extent(ax, band) == (pytest.approx(run.trace.of("fault.partition")[0].t), pytest.approx(run.trace.of("fault.heal")[0].t))
    assert [a.get_text() for a in with_gid(ax, "cut.label")] == ["partition n3 | n1 n2"]
    assert len(with_gid(ax, "cut.spell")) == 1
    assert "network partition\n(until healed)" in legend(ax)
    above = boxes_above(fig, ax)
    assert [a for a, _ in above if a.startswith("partition")] == ["partition n3 | n1 n2"]
    assert all(not a.overlaps(b) for (_, a), (_, b) in combinations(above, 2))


def test_cluster_random_names_its_two_cuts_once_each(tmp_path: Path) -> None:
    """cluster-random seed 0: three partitions (each to its heal) of two cuts: three bands, three marks, two names on two rows (n2's row spans 4.8-35 s), none overlapping."""
    run = scenarios.run("cluster-random", 0)
    fig = ownership_chart(run.trace)
    save(fig, "ownership_cluster_random", tmp_path)
    ax = only_axes(fig)
    expected = _expected_spells(run.trace)
    assert len(expected) == 3
    drawn: list[Any] = sorted(x_extent(ax, b) for b in with_gid(ax, "partition"))
    assert drawn == [(pytest.approx(a), pytest.approx(b)) for a, b in expected]
    assert len(with_gid(ax, "cut.spell")) == 3
    fig.draw_without_rendering()
    renderer = fig._get_renderer()  # type: ignore[attr-defined]
    names = sorted(with_gid(ax, "cut.label"), key=lambda a: a.get_window_extent(renderer).y0)
    assert [a.get_text() for a in names] == ["cut n2 | n1 n3 n4 n5 ×2", "cut n1 | n2 n3 n4 n5"]
    assert names[0].get_window_extent(renderer).y1 <= names[1].get_window_extent(renderer).y0
    above = boxes_above(fig, ax)
    assert all(not a.overlaps(b) for (_, a), (_, b) in combinations(above, 2))


def test_cuts_that_cannot_be_named_without_overlap_are_listed_in_a_caption() -> None:
    """Eight cuts starting in the same instant: the first four fill the strip's four rows, the other four are named in a caption under the axes with their time span, not drawn on top of each other."""
    nodes = [f"n{i}" for i in range(1, 10)]
    faults = [(2.0, a, "fault.partition", {"from": [a], "to": [b for b in nodes if b != a], "oneway": False}) for a in nodes[:8]]
    rows: list[tuple[float, str, str, dict[str, Any]]] = [(0.0, n, "node.started", {"incarnation": 1}) for n in nodes]
    rows.append((1.0, "n1", "epoch.acquired", {"actor": "app:acct", "key": "k", "epoch_round": 1, "found": 0}))
    rows += faults + [(5.0, "n1", "fault.heal", {}), (60.0, "n1", "note", {"text": "end"})]
    fig = ownership_chart(_trace(rows))
    ax = only_axes(fig)
    named = with_gid(ax, "cut.label")
    (caption,) = with_gid(ax, "cut.caption")
    def cut(i: int) -> str:
        return f"cut n{i} | " + " ".join(n for n in nodes if n != f"n{i}")

    assert [a.get_text() for a in named] == [cut(1), cut(2), cut(3), cut(4)]  # the first four, in the trace's order
    listed = " ".join(caption.get_text().split())  # wrapped: compare it unwrapped
    assert listed == "not named above (overlap): " + "; ".join(f"{cut(i)} (2.0–5.0 s)" for i in (5, 6, 7, 8))
    assert len(with_gid(ax, "cut.spell")) == 4
    above = boxes_above(fig, ax)
    assert all(not a.overlaps(b) for (_, a), (_, b) in combinations(above, 2))
    (band,) = with_gid(ax, "partition")
    assert x_extent(ax, band) == (pytest.approx(2.0), pytest.approx(5.0))
