"""The course: the view fixes chapters 01-03 needed (what the catch-up chart and the activation timeline draw, counted),
and the claim tables (notebooks/CLAIMS.md, the README's) pointing at sections that exist and end in an assert."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

from matplotlib.collections import LineCollection  # noqa: E402
from matplotlib.text import Annotation, Text  # noqa: E402

import sim  # noqa: E402
from casty import ActorSystem, Context, actor  # noqa: E402
from sim.scenarios.single import Every, beater  # noqa: E402
from sim.trace import Trace  # noqa: E402
from sim.viz import activation_timeline, catchup_chart, ticks_chart  # noqa: E402


def _replaced_run() -> sim.World:
    """beat every 10 s from 5 s; at 32 s the same name every 3 s from 36 s; 50 s of run."""
    world = sim.World(seed=0)
    world.add_node("n1")

    async def main(system: ActorSystem) -> None:
        ref = system.ref(beater, "r")
        await ref.ask(Every("beat", timedelta(seconds=5), timedelta(seconds=10)))
        await asyncio.sleep(32 - world.now)
        await ref.ask(Every("beat", timedelta(seconds=4), timedelta(seconds=3)))

    world.spawn("n1", main)
    world.run(until=50)
    world.close()
    return world


def test_a_replaced_schedule_grid_stops_where_it_was_replaced() -> None:
    """After a replacement at 32 s the old grid's 35 s due is not drawn; the legend names both intervals."""
    world = _replaced_run()
    fig = catchup_chart(world.trace, schedule="beat")
    top = fig.axes[0]
    grid = [c for c in top.get_children() if c.get_gid() == "grid" and isinstance(c, LineCollection)]
    xs = sorted(round(float(seg[0][0])) for c in grid for seg in c.get_segments())
    assert xs == [5, 15, 25, 36, 39, 42, 45, 48]
    legend = top.get_legend()
    assert legend is not None
    assert legend.get_texts()[0].get_text() == "nominal due (every 10 s, then every 3 s)"


def _rows(trace: Trace, rows: list[tuple[float, str, dict[str, Any]]]) -> Trace:
    for t, kind, fields in rows:
        trace.add(int(t * 1e9), "n1", 1_767_225_600_000_000 + int(t * 1e6), kind, fields)
    return trace


def _texts(fig: Any) -> list[str]:
    ax = fig.axes[0]
    return [c.get_text() for c in ax.get_children() if isinstance(c, (Text, Annotation))]


def test_the_timeline_says_a_run_ended_cancelled_or_at_become_and_names_the_new_behaviour() -> None:
    """A run ended by a cancelled ask or by become is labelled so at its end; the run under become's type reads 'key as type'."""
    a = "m:door"
    trace = _rows(Trace(), [
        (0.0, "activation.started", {"actor": a, "key": "front", "lease": 1, "behavior": a, "recovered": False, "restart": 0}),
        (2.0, "activation.ended", {"actor": a, "key": "front", "lease": 1, "reason": "cancelled"}),
        (2.0, "activation.started", {"actor": a, "key": "front", "lease": 2, "behavior": a, "recovered": False, "restart": 1}),
        (5.0, "activation.ended", {"actor": a, "key": "front", "lease": 2, "reason": "become"}),
        (5.0, "activation.started", {"actor": a, "key": "front", "lease": 3, "behavior": "m:opened", "recovered": False, "restart": 2}),
        (9.0, "activation.ended", {"actor": a, "key": "front", "lease": 3, "reason": "idle"}),
    ])
    texts = _texts(activation_timeline(trace))
    assert texts.count("cancelled") == 1 and texts.count("become") == 1
    assert "idle" not in texts                       # idle ends have their own look: no label
    assert texts.count('"front" as opened') == 1 and texts.count('"front"') == 2


def test_the_timeline_legend_says_its_entries_are_keys() -> None:
    """The key legend is titled with the keys' type ('keys of door', entries "open"), or 'keys' for several types (door["k"])."""
    one = _rows(Trace(), [(0.0, "activation.started", {"actor": "m:door", "key": "open", "lease": 1, "behavior": "m:door", "recovered": False, "restart": 0})])
    legend = activation_timeline(one).axes[0].get_legend()
    assert legend is not None and legend.get_title().get_text() == "keys of door"
    assert [t.get_text() for t in legend.get_texts()] == ['"open"']  # a key named like a state, quoted: a key
    two = _rows(Trace(), [
        (0.0, "activation.started", {"actor": "m:door", "key": "k", "lease": 1, "behavior": "m:door", "recovered": False, "restart": 0}),
        (0.0, "activation.started", {"actor": "m:lock", "key": "k", "lease": 2, "behavior": "m:lock", "recovered": False, "restart": 0}),
    ])
    legend = activation_timeline(two).axes[0].get_legend()
    assert legend is not None and legend.get_title().get_text() == "keys"
    assert [t.get_text() for t in legend.get_texts()] == ['door["k"]', 'lock["k"]']


# --- the claim tables point at real sections ------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"


def _sections(chapter: str) -> dict[str, list[dict[str, Any]]]:
    """A built notebook's markdown headings (## and ###, as printed) -> the cells after it up to the next ## heading."""
    cells = json.loads((NOTEBOOKS / f"{chapter}.ipynb").read_text(encoding="utf-8"))["cells"]
    out: dict[str, list[dict[str, Any]]] = {}
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "markdown":
            continue
        for line in "".join(cell["source"]).splitlines():
            found = re.match(r"^#{2,3} (.+)$", line)
            if found:
                rest = []
                for later in cells[i + 1:]:
                    if later["cell_type"] == "markdown" and re.search(r"^## ", "".join(later["source"]), re.M):
                        break
                    rest.append(later)
                out[found.group(1).strip()] = rest
    return out


def _claim_rows() -> list[tuple[str, str, str, str]]:
    """The rows of notebooks/CLAIMS.md's table: (seed, claim, chapter, cell heading)."""
    rows = []
    for line in (NOTEBOOKS / "CLAIMS.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("| ") and not line.startswith("| seed file"):
            seed, claim, chapter, heading = (c.strip() for c in line.strip().strip("|").split("|"))
            rows.append((seed, claim, chapter, heading))
    return rows


def test_every_claims_md_row_names_a_section_of_its_notebook_that_checks_it_with_an_assert() -> None:
    """Each CLAIMS.md row's heading is a heading of that built notebook, and a code cell of its section asserts."""
    rows = _claim_rows()
    assert len(rows) >= 61
    assert {seed for seed, *_ in rows} == {"actor-model", "schedules", "grain-scheduling", "issue-14"}
    for seed, claim, chapter, heading in rows:
        sections = _sections(chapter)
        assert heading in sections, (chapter, heading)
        code = ["".join(c["source"]) for c in sections[heading] if c["cell_type"] == "code"]
        assert any(re.search(r"^\s*assert ", src, re.M) for src in code), (chapter, heading)


def test_the_readme_claim_table_points_at_numbered_sections_that_exist() -> None:
    """Each 'NN §k' of the README's seed-claim table is a '## k.' section of notebook NN, and every chapter is listed."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    chapters = {p.name[:2]: p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")}
    cited = []
    for line in readme.splitlines():
        row = re.match(r"^\| (actor-model|schedules|grain-scheduling|issue-14) \| .+ \| ([0-9 §,]+) \|$", line)
        if not row:
            continue
        for part in re.findall(r"(\d\d) ((?:§\d+(?:, )?)+)", row.group(2)):
            for number in re.findall(r"§(\d+)", part[1]):
                cited.append((part[0], number))
    assert len(cited) >= 40
    for chapter, number in cited:
        numbered = [h for h in _sections(chapters[chapter]) if h.startswith(f"{number}. ")]
        assert numbered, (chapter, number)
    for chapter in chapters:  # the course table lists every notebook
        assert f"| `{chapters[chapter]}.ipynb` |" in readme, chapter


# --- course 06, section 3: a lost tick's label is on its own lane ------------------------------------------------------


@dataclass(frozen=True)
class _Tick:
    what: str


@actor(initial=0)
async def _fragile(ctx: Context[int, _Tick]) -> None:
    """Fails on every tick (its row comes first)."""
    async for msg in ctx.inbox:
        raise RuntimeError(msg)


@actor(initial=0, mailbox=1)
async def _slow(ctx: Context[int, _Tick]) -> None:
    """25 s per tick, one message may wait: the 30 s and 50 s ticks of a 10 s interval find the mailbox full."""
    async for _ in ctx.inbox:
        await asyncio.sleep(25)


def test_a_lost_ticks_label_sits_beside_its_mark_in_its_own_lane() -> None:
    """Two rows, ticks lost on the second: each 'tick lost' label is anchored at the second row's y, right of its X.

    (Anchored at the lane's top edge, the label read as the first row's, under its dead letters.)
    """
    world = sim.World(seed=0)
    world.add_node("n1")

    async def register(system: ActorSystem) -> None:
        await system.schedule(_Tick("t"), system.ref(_fragile, "f"), timedelta(seconds=10), reference="to-fragile")
        await system.schedule(_Tick("t"), system.ref(_slow, "s"), timedelta(seconds=10), reference="to-slow")

    world.spawn("n1", register)
    world.run(until=65)
    world.close()
    ax = ticks_chart(world.trace).axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["n1  node schedule 'to-fragile'", "n1  node schedule 'to-slow'"]
    lost = [a for a in ax.texts if isinstance(a, Annotation) and a.get_text() == "tick lost"]
    assert [(round(a.xy[0]), a.xy[1]) for a in lost] == [(30, 1), (50, 1)]
    assert all(a.get_verticalalignment() == "center" and a.get_horizontalalignment() == "left" for a in lost)
