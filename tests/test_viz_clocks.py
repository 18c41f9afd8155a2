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
    """The chart labels every step and drift with its node, amount and true time, in seconds when an offset passes 2 s."""
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
    assert "n1 stepped -3 s at 4 s" in texts and "n2 drifts +500 ppm (+500 µs/s) from 2 s" in texts
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
    assert [(label, ys) for label, ys, _ in _lines(fig)] == [("n2, n3", [0.0, 0.0]), ("n1", [3.25, 3.25])]  # the line of most nodes first
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert sorted(texts) == ["n1", "n2, n3 (exact)"]  # the zero line lies under n2, n3: their label says so, no 'true time' beside it


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


def _texts(fig: Any) -> list[str]:
    return [t.get_text() for t in fig.axes[0].texts]


def _exact(node: str, t0: float, t1: float, *, skew_us: int = 0) -> _Rows:
    """A node's rows every 0.5 s from t0 to t1 (true time), its clock ``skew_us`` off."""
    return [(t0 + i * 0.5, node, E + round((t0 + i * 0.5) * 1e6) + skew_us, "note", {}) for i in range(int((t1 - t0) * 2) + 1)]


def _shared_line_rows() -> _Rows:
    """n1, n2, n3 on one line at 0 (n2 steps +10 ms at 8 s, n3 drifts +50 ppm from 4 s: both under half a pixel
    next to n4's +30 s), n4 steps -40 s at 12 s."""
    rows: list[tuple[float, str, int | None, str, dict[str, Any]]] = [*_exact("n1", 0, 20)]
    for t, _, wall, _, _ in _exact("n2", 0, 20):
        assert wall is not None
        rows.append((t, "n2", E + round(t * 1e6) + 10_000, "clock.step", {"delta_us": 10_000}) if t == 8
                    else (t, "n2", wall + (10_000 if t > 8 else 0), "note", {}))
    for t, _, wall, _, _ in _exact("n3", 0, 20):
        assert wall is not None
        rows.append((t, "n3", wall, "clock.drift", {"drift_ppm": 50.0}) if t == 4
                    else (t, "n3", wall + round(max(0.0, t - 4) * 50), "note", {}))
    for t, _, wall, _, _ in _exact("n4", 0, 20, skew_us=30_000_000):
        assert wall is not None
        rows.append((t, "n4", wall - 40_000_000, "clock.step", {"delta_us": -40_000_000}) if t == 12
                    else (t, "n4", wall - (40_000_000 if t > 12 else 0), "note", {}))
    return sorted(rows, key=lambda r: r[0])


def test_a_step_or_drift_of_any_node_on_a_shared_line_is_marked_with_its_own_name() -> None:
    """n1, n2, n3 share one line; n2's +10 ms step and n3's +50 ppm drift are marked naming n2 and n3 (not the line's first node)."""
    fig = clock_chart(_trace(_shared_line_rows()))
    assert [label for label, _, _ in _lines(fig)] == ["n1, n2, n3", "n4"]
    marks = sorted(t for t in _texts(fig) if " stepped " in t or " drift" in t)
    assert marks == ["n2 stepped +10 ms at 8 s", "n3 drifts +50 ppm (+50 µs/s) from 4 s", "n4 stepped -40 s at 12 s"]
    ends = sorted(t for t in _texts(fig) if t not in marks)
    assert ends == ["n1, n2, n3", "n4"]  # not '(exact)': n2 ends 10 ms off, n3 800 µs; on 0, so no 'true time' beside it


def test_a_node_that_outlives_the_node_it_agreed_with_draws_its_own_line_and_step() -> None:
    """n1 (exact) ends at 10 s, n2 agrees with it until then and steps -2 s at 15 s: n2 has its own line down to -2 s and its step mark."""
    rows: list[tuple[float, str, int | None, str, dict[str, Any]]] = [*_exact("n1", 0, 10), *_exact("n3", 0, 20, skew_us=1_000_000)]
    for t, _, wall, _, _ in _exact("n2", 0, 20):
        assert wall is not None
        rows.append((t, "n2", wall - 2_000_000, "clock.step", {"delta_us": -2_000_000}) if t == 15
                    else (t, "n2", wall - (2_000_000 if t > 15 else 0), "note", {}))
    fig = clock_chart(_trace(sorted(rows, key=lambda r: r[0])))
    lines = {label: ys for label, ys, _ in _lines(fig)}
    assert sorted(lines) == ["n1", "n2", "n3"]
    assert lines["n1"][-1] == 0.0 and lines["n2"][-1] == -2.0
    assert sorted(_texts(fig)) == ["n1 (exact)", "n2", "n2 stepped -2 s at 15 s", "n3", "true time"]  # n1 named where its line ends


def _marker_boxes(fig: Any) -> tuple[list[Any], Any]:
    """The drawn boxes of the chart's step and drift markers (one-point lines), and the renderer that drew them."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    canvas = FigureCanvasAgg(fig)
    canvas.draw()  # type: ignore[no-untyped-call]
    renderer = canvas.get_renderer()  # type: ignore[no-untyped-call]
    return [ln.get_window_extent(renderer) for ln in fig.axes[0].get_lines() if len(ln.get_xdata()) == 1], renderer


def _crowded_rows() -> _Rows:
    """n1 and n2 step about -1 s 0.2 s apart, n3 starts drifting where n1 lands, n4 steps +1 s at the same instant."""
    rows: list[tuple[float, str, int | None, str, dict[str, Any]]] = []
    for node, at, delta in (("n1", 4.0, -1_000_000), ("n2", 4.2, -1_050_000), ("n4", 4.0, 1_000_000)):
        for t, _, wall, _, _ in _exact(node, 0, 10):
            assert wall is not None
            rows.append((t, node, wall + delta, "clock.step", {"delta_us": delta}) if abs(t - at) < 1e-9
                        else (t, node, wall + (delta if t > at else 0), "note", {}))
        if at == 4.2:
            rows.append((4.2, node, E + 4_200_000 + delta, "clock.step", {"delta_us": delta}))
    for t, _, wall, _, _ in _exact("n3", 0, 10, skew_us=-1_000_000):
        assert wall is not None
        rows.append((t, "n3", wall, "clock.drift", {"drift_ppm": 20_000.0}) if t == 4
                    else (t, "n3", wall + round(max(0.0, t - 4) * 20_000), "note", {}))
    return sorted(rows, key=lambda r: r[0])


def test_no_two_labels_overlap_and_no_label_covers_a_marker() -> None:
    """Steps and drifts close together (and the shared-line case): every label's box is clear of every other label and of every marker."""
    for rows in (_crowded_rows(), _shared_line_rows()):
        fig = clock_chart(_trace(rows))
        assert _overlapping_texts(fig) == []
        from matplotlib.text import Text
        markers, renderer = _marker_boxes(fig)
        covering = [t.get_text() for t in fig.axes[0].texts for m in markers if Text.get_window_extent(t, renderer).overlaps(m)]
        assert covering == []


def test_the_cluster_random_steps_are_labelled_apart() -> None:
    """cluster-random seed 3 (n1, n2, n4 step back 0.7-2.6 s): each step is named with a rounded amount, and no labels overlap."""
    fig = clock_chart(scenarios.run("cluster-random", seed=3).trace)
    marks = sorted(t.split(" at ")[0] for t in _texts(fig) if " stepped " in t)
    assert marks == ["n1 stepped -2.64 s", "n2 stepped -2.46 s", "n4 stepped -699 ms"]
    assert _overlapping_texts(fig) == []


def _dense_rows() -> _Rows:
    """Six nodes stepping five times each (random amounts up to 3 s, seed 1) in 30 s: too many changes to write beside them."""
    import random
    rng = random.Random(1)
    rows: list[tuple[float, str, int | None, str, dict[str, Any]]] = []
    for k in range(6):
        node, off = f"n{k + 1}", 0
        steps = sorted(rng.uniform(1, 29) for _ in range(5))
        for i in range(61):
            t = i * 0.5
            for at in [s for s in steps if t - 0.5 < s <= t]:
                delta = rng.randint(-3_000_000, 3_000_000)
                off += delta
                rows.append((at, node, E + round(at * 1e6) + off, "clock.step", {"delta_us": delta}))
            rows.append((t, node, E + round(t * 1e6) + off, "note", {}))
    return sorted(rows, key=lambda r: r[0])


def test_too_many_changes_to_write_beside_them_are_numbered_and_listed_under_the_chart() -> None:
    """30 steps in 30 s: each marker gets a number, the list under the chart names every step once, in true-time order; nothing overlaps."""
    trace = _trace(_dense_rows())
    fig = clock_chart(trace)
    texts = _texts(fig)
    listed = [t for t in texts if " stepped " in t]
    assert len(listed) == 30 and sorted(texts).count("1") == 1
    numbers = sorted(int(t) for t in texts if t.isdigit())
    assert numbers == list(range(1, 31))
    steps = sorted((r.t_ns, r.node) for r in trace.of("clock.step"))
    assert [t.split("  ", 1)[1].split(" ")[0] for t in listed] == [node for _, node in steps]
    assert [t.split("  ", 1)[0] for t in listed] == [str(i) for i in range(1, 31)]
    assert _overlapping_texts(fig) == []
    assert fig.get_figheight() > 3.6  # the list made the figure taller, not the plot smaller
