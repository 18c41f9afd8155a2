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
    assert '<td style="color:#D55E00;font-weight:bold;white-space:nowrap">missed</td>' in page and '<td style="white-space:nowrap">2026-01-01T00:00:10+00:00</td>' in page
    assert "<td>skipped by the catch-up of due ...</td>" in page
    weird = ledger_table([_entry(1, "missed", why="<b>")])._repr_html_()
    assert "&lt;b&gt;" in weird and "<b>" not in weird


def test_a_slice_of_the_table_is_still_a_table_and_reads_as_text() -> None:
    """ledger_table(...)[:3] keeps the HTML view (a notebook's first rows, not a list of dicts); repr is an aligned text table."""
    rows = ledger_table(ENTRIES)
    head = rows[:3]
    assert type(head).__name__ == "LedgerTable" and head == list(rows)[:3] and isinstance(rows[0], dict)
    assert head._repr_html_().count("<tr>") == 4
    lines = repr(head).splitlines()
    assert len(lines) == 4 and lines[0].split() == ["source", "schedule", "due", "status", "late_s", "skipped", "firings", "claimed", "lost_claims", "why"]
    assert lines[2].split()[3:7] == ["late", "0.500", "0", "1"]
    assert lines[3].split()[3:6] == ["caught-up", "27.000", "2"]
    assert repr(ledger_table([])) == "LedgerTable: no occurrence"


def test_the_table_needs_no_matplotlib() -> None:
    """sim.viz.data.ledger imports nothing from matplotlib (a notebook table without the charts)."""
    import subprocess

    code = "import sys; import sim.viz.data.ledger; print(any(m.startswith('matplotlib') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _fault_trace() -> object:
    """n1 paused 35-95 s, its clock +35 s at 127 s and -60 s at 157 s; n2 crashed at 50 s, back at 80 s; n3 crashed at 200 s for good (trace ends 230 s)."""
    from sim.trace import Trace

    def row(seq: int, t_s: float, node: str, wall_s: float, kind: str, **fields: object) -> Row:
        return Row(seq, round(t_s * 1e9), node, START + round(wall_s * S), kind, fields)

    return Trace([
        row(0, 35, "n1", 35, "fault.pause"), row(1, 50, "n2", 50, "fault.crash"), row(2, 80, "n2", 80, "fault.restart"),
        row(3, 95, "n1", 95, "fault.resume", paused_ns=60 * 10**9), row(4, 127, "n1", 162, "clock.step", delta_us=35 * S),
        row(5, 157, "n1", 132, "clock.step", delta_us=-60 * S), row(6, 200, "n3", 200, "fault.crash"),
        row(7, 230, "n1", 205, "run.end"),
    ])


def test_faults_are_placed_on_their_nodes_wall_clocks() -> None:
    """Pause 35-95, down 50-80 and an open crash to the trace's end, forward step 127-162 (before..after), back step 132-192 (after..before), in kind order."""
    from sim.viz.data.ledger import ledger_faults

    faults = ledger_faults(_fault_trace())  # type: ignore[arg-type]
    assert [(f.kind, f.node, (f.start_us - START) / S, (f.end_us - START) / S, f.closed) for f in faults] == [
        ("paused", "n1", 35.0, 95.0, True), ("down", "n2", 50.0, 80.0, True), ("down", "n3", 200.0, 230.0, False),
        ("clock forward", "n1", 127.0, 162.0, True), ("clock back", "n1", 132.0, 192.0, True)]
    assert [f.text for f in faults] == ["n1 paused 60 s", "n2 down 30 s", "n3 down", "n1 clock +35 s", "n1 clock -60 s"]
    assert [f.kind for f in ledger_faults(_fault_trace(), nodes=["n2"])] == ["down"]  # type: ignore[arg-type]


def test_chart_draws_a_band_and_label_per_fault_behind_the_marks(chart: object) -> None:
    """Five faults: five bands (axvspan patches, gid fault|kind|node) under the marks' zorder, five labels; the marks unchanged."""
    fig = chart(ENTRIES, faults=_fault_trace())  # type: ignore[operator]
    (ax,) = fig.axes
    bands = [p for p in ax.patches if str(p.get_gid()).startswith("fault|")]
    assert [p.get_gid() for p in bands] == ["fault|paused|n1", "fault|down|n2", "fault|down|n3", "fault|clock forward|n1", "fault|clock back|n1"]
    assert all(p.get_zorder() < min(c.get_zorder() for c in ax.collections) for p in bands)
    xs = [round(p.get_x(), 3) for p in bands]  # the axis is in s since the run's start (the trace's wall clock at true time 0)
    assert xs == [35.0, 50.0, 200.0, 127.0, 132.0]
    assert sorted(t.get_text() for t in ax.texts if str(t.get_gid()).startswith("fault-label|")) == [
        " n1 clock +35 s", " n1 clock -60 s", " n1 paused 60 s", " n2 down 30 s", " n3 down"]
    assert sum(len(c.get_offsets()) for c in ax.collections) == 9


def test_entries_alone_draw_no_fault_and_a_trace_draws_its_own(chart: object) -> None:
    """Entries without faults=: no band; a trace given as source draws its own five faults (no occurrence in it)."""
    (ax,) = chart(ENTRIES).axes  # type: ignore[operator]
    assert not [p for p in ax.patches if str(p.get_gid()).startswith("fault|")]
    (ax,) = chart(_fault_trace()).axes  # type: ignore[operator]
    assert len([p for p in ax.patches if str(p.get_gid()).startswith("fault|")]) == 5


def test_a_dst_gap_day_is_a_band_of_its_own_with_its_label(chart: object) -> None:
    """A Fault('dst gap', label, start, end) a caller builds for a zone's gap day draws one band (gid fault|dst gap|label) labelled 'label: DST gap, no occurrence'."""
    from sim.viz.data.ledger import Fault

    gap = Fault("dst gap", "29 Mar", START + 30 * S, START + 50 * S)
    assert gap.text == "29 Mar: DST gap, no occurrence"
    (ax,) = chart(ENTRIES, faults=[gap]).axes  # type: ignore[operator]
    bands = [p for p in ax.patches if str(p.get_gid()).startswith("fault|")]
    assert [(p.get_gid(), round(p.get_x(), 3)) for p in bands] == [("fault|dst gap|29 Mar", 20.0)]
    assert [t.get_text() for t in ax.texts if str(t.get_gid()).startswith("fault-label|")] == [" 29 Mar: DST gap, no occurrence"]


def test_marks_and_faults_share_one_time_base_since_the_runs_start(chart: object) -> None:
    """With a trace the axis is s since the run's start: the due at 10 s is drawn at x=10 (not 0) and the pause "35 s" at x=35; the label says so."""
    (ax,) = chart(ENTRIES, faults=_fault_trace()).axes  # type: ignore[operator]
    xs = sorted(float(x) for c in ax.collections if str(c.get_gid()).endswith("|ticker[k]/tick") for x, _ in c.get_offsets())
    assert xs == [10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0]
    assert ax.get_xlabel() == "due time on the schedules' wall clocks (s since the run's start, true time 0 = 2026-01-01T00:00:00.000+00:00)"
    (alone,) = chart(ENTRIES, start_us=START - 5 * S).axes  # type: ignore[operator]
    assert min(float(x) for c in alone.collections for x, _ in c.get_offsets()) == 15.0
    (plain,) = chart(ENTRIES).axes  # type: ignore[operator]  # entries alone, no start: the first due, and the label says that
    assert plain.get_xlabel().startswith("due time (s after the first due, ")


def test_charts_of_one_figure_share_one_unit_and_label_the_axis_once() -> None:
    """until_s/unit give every lane of a figure the same scale (a 125 s lane would pick minutes alone); with sharex only the bottom lane has the axis label."""
    from matplotlib.figure import Figure

    from sim.viz.ledger import ledger_chart

    long = [_entry(10, "on-time"), _entry(135, "on-time")]
    (alone,) = ledger_chart(long, start_us=START).axes
    assert "min since the run's start" in alone.get_xlabel()
    fig = Figure(figsize=(8, 5))
    axes = fig.subplots(2, 1, sharex=True)
    ledger_chart(ENTRIES, ax=axes[0], start_us=START, until_s=140, unit="s")
    ledger_chart(long, ax=axes[1], start_us=START, until_s=140, unit="s")
    assert [ax.get_xlabel() for ax in axes] == ["", "due time on the schedules' wall clocks (s since the run's start, true time 0 = 2026-01-01T00:00:00.000+00:00)"]
    assert axes[0].get_xlim() == axes[1].get_xlim() and axes[1].get_xlim()[1] > 140
    assert sorted(float(x) for c in axes[1].collections for x, _ in c.get_offsets()) == [10.0, 135.0]
    with pytest.raises(ValueError, match="unit must be one of s, min, h, d, got 'ms'"):
        ledger_chart(long, unit="ms")
