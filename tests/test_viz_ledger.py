"""The ledger view (sim.viz.ledger, sim.viz.data.ledger): exact lanes, marks, labels, legend and table from sim.ledger entries."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from sim import scenarios
from sim.ledger import Attempt, Entry, ledger
from sim.trace import Row
from sim.viz.data.ledger import CLASSES, ledger_lanes, ledger_table

S = 1_000_000
START = 1_767_225_600_000_000
A = "app:ticker"
ROW = Row(0, 0, "n1", START, "schedule.fired", {})


def _entry(due_s: float, status: str, *, name: str = "tick", source: str = "schedule", skipped: int = 0, firings: int = 1, why: str = "", late_s: float = 0) -> Entry:
    attempts = tuple(Attempt(ROW, "n1", 0) for _ in range(firings if status != "missed" or why.startswith("lost") else 0))
    node = "n1" if source == "node-schedule" else None
    return Entry(source, A, "k", name, node, START + round(due_s * S), status, why, round(late_s * S), skipped, attempts)


ENTRIES = [
    _entry(10, "on-time"),
    _entry(20, "late", late_s=0.5),
    _entry(30, "caught-up", skipped=2, late_s=27),
    _entry(40, "missed", why="skipped by the catch-up of due ..."),
    _entry(50, "missed", why="skipped by the catch-up of due ..."),
    _entry(60, "repeated", firings=3),
    _entry(70, "missed", why="lost in flight: fired on n1 ..."),
    _entry(80, "missed", why="lost in flight: fired on n1 ..."),
    _entry(10, "on-time", name="0123456789abcdef0123", source="node-schedule"),
    Entry("timer", A, "k", "t", None, None, "delivered"),
]


@pytest.fixture
def chart() -> Iterator[object]:
    from sim.viz.ledger import ledger_chart

    yield ledger_chart


def test_lanes_one_per_schedule_marks_in_due_order_timers_counted() -> None:
    """Two lanes (the schedule's eight marks, the node schedule's one); the timer entry has no due time and is counted apart."""
    lanes, timers = ledger_lanes(ENTRIES)
    assert timers == 1
    assert [lane.title for lane in lanes] == ["ticker[k]/tick  (schedule)", "n1:ticker[k]/01234567…  (node-schedule)"]
    assert [m.cls for m in lanes[0].marks] == ["on time", "late", "caught up", "missed", "missed", "repeated", "missed", "missed"]
    assert [m.lost for m in lanes[0].marks] == [False] * 6 + [True, True]
    assert (lanes[0].marks[2].skipped, lanes[0].marks[5].firings) == (2, 3)


def test_chart_draws_one_collection_per_class_and_lane_with_exact_labels(chart: object) -> None:
    """Scatter collections per (class, lane) with their mark counts; 'skipped 2', '×3', one 'lost in flight (2)'; legend counts and title exact."""
    fig = chart(ENTRIES)  # type: ignore[operator]
    (ax,) = fig.axes
    marks = {c.get_gid(): len(c.get_offsets()) for c in ax.collections}
    assert marks == {
        "on time|ticker[k]/tick": 1,
        "late|ticker[k]/tick": 1,
        "caught up|ticker[k]/tick": 1,
        "repeated|ticker[k]/tick": 1,
        "missed|ticker[k]/tick": 4,
        "on time|n1:ticker[k]/0123456789abcdef0123": 1,
    }
    assert sorted(t.get_text() for t in ax.texts) == ["lost in flight (2)", "skipped 2", "×3"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["on time (2)", "late (1)", "caught up (1)", "repeated (1)", "missed (4)"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["ticker[k]/tick  (schedule)", "n1:ticker[k]/01234567…  (node-schedule)"]
    assert ax.get_title(loc="left") == (
        "Occurrence ledger: 9 occurrences of 2 schedules: 2 on time, 1 late, 1 caught up, 1 repeated, 4 missed\n"
        "1 activation timer firing not drawn (a timer's firing has no due time)"
    )
    assert ax.get_xlabel() == "due time (s after the first due, 2026-01-01T00:00:10.000+00:00 on the schedules' wall clocks)"
    assert tuple(CLASSES) == ("on time", "late", "caught up", "repeated", "missed")


def test_chart_of_a_scenario_trace_is_the_ledgers(chart: object) -> None:
    """stale-owner-fenced seed 0: one lane; 54 on time, 1 repeated (×2), 9 missed of which 3 lost in flight in one run."""
    run = scenarios.run("stale-owner-fenced", 0)
    fig = chart(run.trace)  # type: ignore[operator]
    (ax,) = fig.axes
    assert {c.get_gid(): len(c.get_offsets()) for c in ax.collections} == {
        "on time|cl_ticker[stale12]/tick": 54, "repeated|cl_ticker[stale12]/tick": 1, "missed|cl_ticker[stale12]/tick": 9}
    assert sorted(t.get_text() for t in ax.texts) == ["lost in flight (3)", "×2"]
    assert len(ledger_table(ledger(run.trace))) == 64


def test_an_empty_ledger_says_so(chart: object) -> None:
    """No entries: no marks, a note in the axes, the title counts zero."""
    fig = chart([])  # type: ignore[operator]
    (ax,) = fig.axes
    assert len(ax.collections) == 0
    assert [t.get_text() for t in ax.texts] == ["no occurrence with a due time in this ledger"]
    assert ax.get_title(loc="left") == "Occurrence ledger: 0 occurrences of 0 schedules"


def test_table_rows_and_html() -> None:
    """The table is sim.ledger.table's rows; its HTML has the ten columns, one row per entry, the status coloured and the text escaped."""
    rows = ledger_table(ENTRIES)
    assert len(rows) == 10 and rows[1]["status"] == "late" and rows[1]["late_s"] == 0.5
    page = rows._repr_html_()
    assert page.count("<tr>") == 11 and page.count("<th>") == 10
    assert '<td style="color:#D55E00;font-weight:bold">missed</td>' in page
    assert "<td>skipped by the catch-up of due ...</td>" in page
    weird = ledger_table([_entry(1, "missed", why="<b>")])._repr_html_()
    assert "&lt;b&gt;" in weird and "<b>" not in weird


def test_the_table_needs_no_matplotlib() -> None:
    """sim.viz.data.ledger imports nothing from matplotlib (a notebook table without the charts)."""
    import subprocess

    code = "import sys; import sim.viz.data.ledger; print(any(m.startswith('matplotlib') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
