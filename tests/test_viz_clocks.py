"""The clock-offsets view: each node's wall clock minus true time, read from the rows, with its steps and drift."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from casty.clock import to_us
from sim import scenarios
from sim.trace import Row, Trace
from sim.viz.clocks import clock_chart
from sim.viz.data.clocks import clock_offsets
from sim.world import DEFAULT_START

S = 1_000_000_000
E = to_us(DEFAULT_START)


_Rows = Sequence[tuple[float, str, int | None, str, dict[str, Any]]]


def _trace(rows: _Rows) -> Trace:
    return Trace(Row(i, round(t * S), node, wall, kind, fields) for i, (t, node, wall, kind, fields) in enumerate(rows))


def test_offsets_are_wall_minus_true_time_with_steps_vertical() -> None:
    """A skewed node reads its offset at every row; a step is two points at one instant; flat runs keep their ends."""
    trace = _trace([
        (0.0, "n1", E + 500_000, "node.started", {}),
        (1.0, "n1", E + 1_500_000, "note", {}),
        (2.0, "n1", E + 2_500_000, "note", {}),
        (3.0, "n1", E + 3_500_000, "note", {}),
        (4.0, "n1", E + 4_500_000 - 2_000_000, "clock.step", {"delta_us": -2_000_000}),
        (5.0, "n1", E + 5_500_000 - 2_000_000, "note", {}),
        (1.0, "network", None, "note", {}),
    ])
    assert clock_offsets(trace) == {"n1": [(0, 500_000), (3 * S, 500_000), (4 * S, 500_000), (4 * S, -1_500_000), (5 * S, -1_500_000)]}


def test_the_clock_step_scenario_steps_back_then_forward() -> None:
    """clock-step seed 0: n1's offset is 0, then -90 s from its first step, then +110 s after the +200 s step."""
    run = scenarios.run("clock-step", seed=0)
    points = clock_offsets(run.trace)["n1"]
    steps = [(r.t_ns, int(r.get("delta_us"))) for r in run.trace.of("clock.step")]
    assert [d for _, d in steps] == [-90_000_000, 200_000_000]
    assert points[0] == (0, 0)
    assert (steps[0][0], 0) in points and (steps[0][0], -90_000_000) in points
    assert (steps[1][0], -90_000_000) in points and (steps[1][0], 110_000_000) in points
    assert points[-1][1] == 110_000_000


def test_the_chart_names_each_step_and_drift() -> None:
    """The chart labels every step and drift with its node and amount, in seconds when an offset passes 2 s."""
    trace = _trace([
        (0.0, "n1", E, "node.started", {}),
        (0.0, "n2", E, "node.started", {}),
        (2.0, "n2", E + 2 * 1_000_000, "clock.drift", {"drift_ppm": 500.0}),
        (6.0, "n2", E + 6 * 1_000_000 + 2_000, "note", {}),
        (4.0, "n1", E + 4 * 1_000_000 - 3_000_000, "clock.step", {"delta_us": -3_000_000}),
        (8.0, "n1", E + 8 * 1_000_000 - 3_000_000, "note", {}),
    ])
    fig = clock_chart(trace)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "n1 stepped -3 s" in texts and "n2 drifts +500 ppm" in texts
    assert fig.axes[0].get_ylabel() == "wall clock \u2212 true time (s)"


def _lines(fig: Any) -> list[tuple[str, list[float], str]]:
    """The node lines of a clock chart: (label, y data, line style); the zero line and the markers have no label."""
    return [(ln.get_label(), [float(y) for y in ln.get_ydata()], ln.get_linestyle())
            for ln in fig.axes[0].get_lines() if not ln.get_label().startswith("_")]


def _overlapping_texts(fig: Any) -> list[tuple[str, str]]:
    """Pairs of texts of the chart's axes whose drawn boxes overlap (a label a reader cannot read)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text
    canvas = FigureCanvasAgg(fig)
    canvas.draw()  # type: ignore[no-untyped-call]
    renderer = canvas.get_renderer()  # type: ignore[no-untyped-call]
    boxes = [(t.get_text(), Text.get_window_extent(t, renderer)) for t in fig.axes[0].texts]  # the text, not its leader
    return [(a, b) for i, (a, box_a) in enumerate(boxes) for b, box_b in boxes[i + 1:] if box_a.overlaps(box_b)]


_SKEWED_TAKEOVER: _Rows = [  # the skewed-takeover shape: n1 3.25 s ahead, n2 and n3 exact, ending a few ms apart
    (0.0, "n1", E + 3_250_000, "node.started", {}),
    (0.0, "n2", E, "node.started", {}),
    (0.0, "n3", E, "node.started", {}),
    (24.8018, "n1", E + 24_801_800 + 3_250_000, "note", {}),
    (24.8014, "n2", E + 24_801_400, "note", {}),
    (24.8011, "n3", E + 24_801_100, "note", {}),
]


def test_nodes_with_the_same_offset_share_one_line_named_for_both() -> None:
    """Two exact clocks (n2, n3) draw one line labelled 'n2, n3', not n3's line hiding n2's."""
    fig = clock_chart(_trace(_SKEWED_TAKEOVER))
    assert [(label, ys) for label, ys, _ in _lines(fig)] == [("n1", [3.25, 3.25]), ("n2, n3", [0.0, 0.0])]
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert sorted(texts) == ["n1", "n2, n3", "true time"]


def test_end_labels_and_the_true_time_label_do_not_overlap() -> None:
    """The end labels and 'true time' never overlap, also for lines close together (50 ms apart on a 3 s scale)."""
    fig = clock_chart(_trace(_SKEWED_TAKEOVER))
    assert _overlapping_texts(fig) == []
    close = [(t, n, (w or 0) + (50_000 if n == "n2" else 0), k, f) for t, n, w, k, f in _SKEWED_TAKEOVER]
    fig = clock_chart(_trace(close))
    assert sorted(label for label, _, _ in _lines(fig)) == ["n1", "n2", "n3"]
    assert _overlapping_texts(fig) == []


def test_a_line_that_coincides_with_another_for_part_of_the_run_is_dashed() -> None:
    """n1 and n2 agree at 0 until n1 steps +2 s at 4 s: n2 (drawn over n1) is dashed so n1's start shows through."""
    fig = clock_chart(_trace([
        (0.0, "n1", E, "node.started", {}),
        (0.0, "n2", E, "node.started", {}),
        (4.0, "n1", E + 4_000_000 + 2_000_000, "clock.step", {"delta_us": 2_000_000}),
        (8.0, "n1", E + 8_000_000 + 2_000_000, "note", {}),
        (8.0, "n2", E + 8_000_000, "note", {}),
    ]))
    assert [(label, style) for label, _, style in _lines(fig)] == [("n1", "-"), ("n2", "--")]
