"""The clock-offsets view: each node's wall clock minus true time, read from the rows, with its steps and drift."""

from __future__ import annotations

from typing import Any

from casty.clock import to_us
from sim import scenarios
from sim.trace import Row, Trace
from sim.viz.clocks import clock_chart, clock_offsets
from sim.world import DEFAULT_START

S = 1_000_000_000
E = to_us(DEFAULT_START)


def _trace(rows: list[tuple[float, str, int | None, str, dict[str, Any]]]) -> Trace:
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
