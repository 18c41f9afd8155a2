"""The views' data layer (``sim.viz.data``): plain values read from a trace, importable and usable without matplotlib."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sim import scenarios
from sim.viz.data import (
    activation_bars,
    day_label,
    default_window,
    epoch_spans,
    frame_at,
    node_events,
    omitted_reports,
    report_rows,
    select_key,
    select_schedule,
    spells,
)
from sim.trace import Row, Trace
from sim.viz.data.activations import timeline_nodes
from sim.viz.data.clocks import ClockDrift, ClockStep, clock_drifts, clock_steps
from sim.viz.data.frames import change_times
from sim.viz.data.notes import Note, note_rows
from sim.viz.data.nodes import Span
from sim.viz.data.ownership import cluster_nodes, key_marks
from sim.viz.data.spacetime import node_marks, spacetime_lanes

ROOT = Path(__file__).resolve().parent.parent

# Run in a fresh interpreter where any import of matplotlib fails: every module of the data layer
# imports, and reads a scenario's trace into the same values the charts draw.
_WITHOUT_MATPLOTLIB = """
import importlib, json, pkgutil, sys

class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("matplotlib is blocked in this run")
        return None

sys.meta_path.insert(0, Block())
import sim.viz.data
modules = sorted(m.name for m in pkgutil.iter_modules(sim.viz.data.__path__))
for name in modules:
    importlib.import_module(f"sim.viz.data.{name}")
from sim import scenarios
from sim.viz.data import epoch_spans, select_key
trace = scenarios.run("stale-owner-fenced", 0).trace
actor, key = select_key(trace, None, None)
spans = [[s.name, s.ended_by] for s in epoch_spans(trace, actor, key)]
print(json.dumps({"modules": modules, "key": [actor, key], "spans": spans,
                  "matplotlib": any(m.split(".")[0] == "matplotlib" for m in sys.modules)}))
"""


def test_the_data_layer_imports_and_reads_a_trace_with_matplotlib_blocked() -> None:
    """Every sim.viz.data module imports in an interpreter that cannot import matplotlib, and reads a run's epoch spans."""
    done = subprocess.run([sys.executable, "-c", _WITHOUT_MATPLOTLIB], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out == {
        "modules": ["activations", "catchup", "clocks", "cuts", "frames", "keys", "ledger", "nodes", "notes", "ownership", "periodic", "reports",
                    "spacetime", "ticks", "timebase"],
        "key": ["sim.scenarios.cluster:cl_ticker", "stale12"],
        "spans": [["(1, n3#1)", "lost"], ["(2, n1#1)", "handoff"], ["(2, n3#1)", "end of trace"]],
        "matplotlib": False,
    }


def test_blocking_matplotlib_in_the_probe_does_fail_a_chart_import() -> None:
    """The probe's blocker is real: with it, importing a chart module (sim.viz.timeline) fails with ImportError."""
    probe = _WITHOUT_MATPLOTLIB.split("import sim.viz.data")[0] + "import sim.viz.timeline\n"
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "ImportError: matplotlib is blocked in this run" in done.stderr


def test_stale_owner_fenced_epoch_spans_and_cut() -> None:
    """stale-owner-fenced seed 0: n3 holds (1, n3#1) until it steps down, n1 (2, n1#1) until it hands off, one cut n3 | n1 n2."""
    trace = scenarios.run("stale-owner-fenced", 0).trace
    actor, key = select_key(trace, None, None)
    assert (actor, key) == ("sim.scenarios.cluster:cl_ticker", "stale12")
    assert [(s.name, s.start_ns, s.end_ns, s.superseded_ns, s.ended_by) for s in epoch_spans(trace, actor, key)] == [
        ("(1, n3#1)", 2006534500, 3801685202, None, "lost"),
        ("(2, n1#1)", 4807455589, 7203067850, None, "handoff"),
        ("(2, n3#1)", 7208372129, 14809205820, None, "end of trace"),
    ]
    assert [(s.text, s.start_ns, s.end_ns, s.healed) for s in spells(trace)] == [("n3 | n1 n2", 3_000_000_000, 7_200_000_000, True)]
    frame = frame_at(trace, 5.0)
    assert (frame.owner, frame.epoch, frame.stale, [m.status for m in frame.members]) == ("n1", "(2, n1#1)", (), ["up", "up", "up"])


def test_pause_catch_up_schedule_bar_and_pause() -> None:
    """pause-catch-up seed 0: schedule 'beat' of beater[paused] has 11 rows, one bar to the end, n1 paused 35 s to 97 s."""
    trace = scenarios.run("pause-catch-up", 0).trace
    rows, ident = select_schedule(trace, None, None, None)
    assert (ident, len(rows)) == (("sim.scenarios.single:beater", "paused", "beat"), 11)
    assert {n: (e.paused, e.crashes) for n, e in node_events(trace).items()} == {"n1": ([Span(35_000_000_000, 97_000_000_000, True)], [])}
    bars, failures = activation_bars(trace, None)
    assert [(b.node, b.entity, b.start_ns, b.end_ns, b.how) for b in bars] == [
        ("n1", ("sim.scenarios.single:beater", "paused"), 200_000, 140_000_200_000, "end of trace"),
    ]
    assert failures == []


def test_daily_report_omits_one_day() -> None:
    """daily-report seed 0: one day is missing between the reports, day 20456 (Jan 03) of key 'save-first'."""
    omitted = omitted_reports(report_rows(scenarios.run("daily-report", 0).trace))
    assert [(day, row.get("key")) for row, day in omitted] == [(20456, "save-first")]
    assert day_label(omitted[0][1]) == "Jan 03"


def test_sim_viz_names_load_from_their_homes() -> None:
    """Each name sim.viz exports loads, on first use, the object of the module _HOMES names; an unknown name is an AttributeError."""
    import importlib

    import sim.viz

    assert sorted(sim.viz.__all__) == sorted(sim.viz._HOMES)
    for name, home in sim.viz._HOMES.items():
        assert getattr(sim.viz, name) is getattr(importlib.import_module(home), name)
    with pytest.raises(AttributeError, match="'sim.viz' has no attribute 'no_such_chart'"):
        sim.viz.no_such_chart  # noqa: B018


def test_no_view_module_is_over_600_lines() -> None:
    """Modules small with one job: every module under sim/viz holds at most 600 lines."""
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in sorted((ROOT / "sim" / "viz").rglob("*.py"))}
    assert {p: n for p, n in sizes.items() if n > 600} == {}


def test_ownership_repeat_marks_one_repeated_firing_on_the_next_owner() -> None:
    """ownership-repeat seed 0: the key's marks hold 5 firings, one of them a repeat on n2 of a due first fired on n3; 2 writes failed, none fenced."""
    trace = scenarios.run("ownership-repeat", 0).trace
    actor, key = select_key(trace, None, None)
    marks = key_marks(trace, actor, key, cluster_nodes(trace))
    assert (actor, key) == ("sim.scenarios.cluster:cl_ticker", "repeat2")
    counts = [len(rows) for rows in (marks.state_writes, marks.due_writes, marks.fenced, marks.other_failed,
                                     marks.first_fired, marks.repeated, marks.caught, marks.dropped)]
    assert counts == [4, 5, 0, 2, 4, 1, 0, 1] and marks.fired == 5
    repeat = marks.repeated[0]
    assert (repeat.node, repeat.get("due_us")) == ("n2", 1767225612006534)
    assert [r.node for r in marks.first_fired if r.get("due_us") == repeat.get("due_us")] == ["n3"]


def test_lanes_of_the_timeline_and_the_space_time_diagram() -> None:
    """The timeline gives a row to the nodes with activation, fault or schedule rows (ownership-repeat: n2, n3); the diagram a lane to every node that started."""
    trace = scenarios.run("ownership-repeat", 0).trace
    assert timeline_nodes(trace) == ["n2", "n3"]
    assert timeline_nodes(scenarios.run("ticker", 0).trace) == ["n1"]
    assert spacetime_lanes(trace) == ["n1", "n2", "n3"]


def test_the_space_time_window_marks_the_new_owners_epoch_with_its_firing() -> None:
    """ownership-repeat seed 0, default window: n2 and n1 see n3 dead, then n2's instant of epoch (2, n2#1), recovered activation and firing share one place."""
    trace = scenarios.run("ownership-repeat", 0).trace
    window = default_window(trace)
    assert window == (13_799_999_965, 13_812_156_304)
    marks = list(node_marks(trace, *window, spacetime_lanes(trace), internal=False).items())
    assert marks[:3] == [
        (("n2", 13_801_012_993), [("d", "#666666", "sees n3 dead", "member.changed")]),
        (("n1", 13_801_058_560), [("d", "#666666", "sees n3 dead", "member.changed")]),
        (("n2", 13_808_585_490), [("*", "#CC79A7", "epoch (2, n2#1) of cl_ticker[\"repeat2\"], found v3", "epoch.acquired"),
                                  (">", "#009E73", "activated (recovered)", "activation.started"),
                                  ("o", "#222222", "fires schedule 'tick'", "schedule.fired")]),
    ]


def test_notes_are_the_note_rows_in_order() -> None:
    """ticker seed 0 has one note, 'ask answered 1' at 10.2 ms; a trace without note rows has none."""
    assert note_rows(scenarios.run("ticker", 0).trace) == (Note(10_200_000, "ask answered 1"),)
    assert note_rows(scenarios.run("pause-catch-up", 0).trace) == ()


def test_clock_steps_of_clock_step() -> None:
    """clock-step seed 0: n1's clock steps back 90 s at 150 s and forward 200 s at 360 s, and never drifts."""
    trace = scenarios.run("clock-step", 0).trace
    assert clock_steps(trace, "n1") == (ClockStep(150_000_000_000, -90.0), ClockStep(360_000_000_000, 200.0))
    assert clock_drifts(trace, "n1") == ()
    assert clock_steps(trace, "n2") == ()


def test_clock_drifts_read_each_drift_row_of_the_node() -> None:
    """clock.drift rows of one node, in order, their rate in ppm (a row without one reads 0); another node's are not its own."""
    trace = Trace([
        Row(0, 5_000_000_000, "n2", 1, "clock.drift", {"drift_ppm": 2500.0}),
        Row(1, 6_000_000_000, "n1", 2, "clock.drift", {"drift_ppm": 10.0}),
        Row(2, 9_000_000_000, "n2", 3, "clock.step", {"delta_us": -4_000_000}),
        Row(3, 12_000_000_000, "n2", 4, "clock.drift", {"drift_ppm": None}),
    ])
    assert clock_drifts(trace, "n2") == (ClockDrift(5_000_000_000, 2500.0), ClockDrift(12_000_000_000, 0.0))
    assert clock_steps(trace, "n2") == (ClockStep(9_000_000_000, -4.0),)


def test_change_times_of_stale_owner_fenced() -> None:
    """stale-owner-fenced seed 0: the cut and its heal (three rows at 7.2 s) and the key's three acquisitions and two run ends; with no key, the faults only; clock-step's two steps."""
    trace = scenarios.run("stale-owner-fenced", 0).trace
    actor, key = select_key(trace, None, None)
    assert change_times(trace, actor, key) == (
        2_006_534_500, 3_000_000_000, 3_801_685_202, 4_807_455_589, 7_200_000_000, 7_200_000_000, 7_200_000_000, 7_203_067_850, 7_208_372_129,
    )
    assert change_times(trace, None, None) == (3_000_000_000, 7_200_000_000, 7_200_000_000, 7_200_000_000)
    assert change_times(scenarios.run("clock-step", 0).trace, None, None) == (150_000_000_000, 360_000_000_000)  # its two clock steps
