"""The one fault-range table (sim.faults.ranges): the swarm generator and the Hypothesis space both draw within it and reach its ends."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable

import pytest

from sim import testing
from sim.faults import (
    GENERATED_KINDS,
    ClockDrift,
    ClockStep,
    Crash,
    Duplicate,
    FaultMix,
    FaultPlan,
    Flap,
    Loss,
    OnAcquire,
    Partition,
    Pause,
    Reorder,
    Restart,
    generate,
)
from sim.faults.ranges import RANGES, Span
from sim.testing import PlanSpace

NODES = ("n1", "n2", "n3", "n4", "n5")
WINDOW = 600.0


def _measures(plans: Iterable[FaultPlan]) -> dict[str, list[float]]:
    """Every drawn length, size and probability of ``plans``, by what it measures."""
    out: dict[str, list[float]] = defaultdict(list)
    for plan in plans:
        _measure(plan, out)
    return out


def _measure(plan: FaultPlan, out: dict[str, list[float]]) -> None:
    crashed: dict[str, list[float]] = defaultdict(list)  # per node, the crashes since its last restart
    for fault in plan:
        if isinstance(fault, Crash):
            crashed[fault.node].append(fault.at)
        if fault.end >= WINDOW - 0.5:  # cut short by the end of the window (both drawers do): not the range's draw
            continue
        if isinstance(fault, Restart):
            since = crashed.pop(fault.node, [])
            if len(since) == 1:  # a space's incidents may crash one node twice: only an unambiguous pair is measured
                out["down"].append(fault.at - since[0])
        elif isinstance(fault, Pause):
            assert fault.duration is not None
            out["pause"].append(fault.duration)
        elif isinstance(fault, (Partition, Flap)):
            assert fault.duration is not None
            out["cut"].append(fault.duration)
            if isinstance(fault, Flap):
                out["period"].append(fault.period)
        elif isinstance(fault, ClockStep):
            out["step"].append(abs(fault.seconds))
        elif isinstance(fault, ClockDrift):
            out["ppm"].append(abs(fault.ppm))
        elif isinstance(fault, (Loss, Duplicate, Reorder)):
            assert fault.duration is not None
            out["link"].append(fault.duration)
            out["p"].append(fault.p)
            if isinstance(fault, Duplicate):
                out["duplicate_delay"].append(fault.delay)
            if isinstance(fault, Reorder):
                out["reorder_delay"].append(fault.delay)


def _spans_the_table(measures: dict[str, list[float]], table: dict[str, Span]) -> list[str]:
    """What left its span, or no longer reaches within 5 % of either end (a drawer narrowed or widened)."""
    wrong = []
    for name, span in table.items():
        values = measures[name]
        if not values:
            wrong.append(f"{name}: never drawn")
            continue
        low, high = min(values), max(values)
        slack = 0.05 * (span.most - span.least)
        if low < span.least - 0.001 or high > span.most + 0.001:
            wrong.append(f"{name}: drew {low:g}..{high:g}, outside the table's {span.least:g}..{span.most:g}")
        elif low > span.least + slack or high < span.most - slack:
            wrong.append(f"{name}: drew only {low:g}..{high:g} of the table's {span.least:g}..{span.most:g}")
    return wrong


def test_generate_draws_every_range_of_the_table_and_no_more() -> None:
    """Over 150 seeded plans, generate's downtimes, pauses, cuts, steps, drifts and link episodes fill the table's ranges, no wider."""
    kinds = tuple(k for k in GENERATED_KINDS if k not in ("forged_heartbeat", "forged_ref"))
    mix = FaultMix(kinds=kinds, rate=8.0, max_at_once=2, long=0.5, wipe=0.3)
    plans = [generate(mix, random.Random(seed), NODES, WINDOW) for seed in range(150)]
    short_step, back = RANGES.clock_step.short, RANGES.clock_step.back
    assert _spans_the_table(
        _measures(plans),
        {
            "down": RANGES.crash.down,
            "pause": RANGES.pause.envelope(),
            "cut": RANGES.cut.envelope(),
            "period": RANGES.cut.period,
            "step": Span(short_step.low, back.high),
            "ppm": RANGES.drift.long,
            "link": RANGES.link.length,
            "p": RANGES.link.p_long,
            "duplicate_delay": RANGES.link.duplicate_delay,
            "reorder_delay": RANGES.link.reorder_delay,
        },
    ) == []


def test_the_hypothesis_space_draws_the_same_ranges_from_its_mildest_values() -> None:
    """Over 3000 plans, a PlanSpace's draws fill the same table, from the mildest step, drift and probability it shrinks toward."""
    kinds = tuple(k for k in testing.DRAWABLE_KINDS if k not in ("heal", "forged_heartbeat"))
    space = PlanSpace.of(NODES, WINDOW, kinds=kinds, max_faults=8)
    rng = random.Random(0)
    plans = [space.draw(rng) for _ in range(3000)]
    assert _spans_the_table(
        _measures(plans),
        {
            "down": RANGES.crash.down,
            "pause": RANGES.pause.envelope(),
            "cut": RANGES.cut.envelope(),
            "period": RANGES.cut.period,
            "step": RANGES.clock_step.envelope(),
            "ppm": RANGES.drift.envelope(),
            "link": RANGES.link.length,
            "p": RANGES.link.p_envelope(),
            "duplicate_delay": RANGES.link.duplicate_delay,
            "reorder_delay": RANGES.link.reorder_delay,
        },
    ) == []


def test_the_aimed_faults_draw_within_the_table() -> None:
    """generate's OnAcquire faults hold a paused node 0.2-8 s, a cut one 0.05-1 s, and restart a crashed one 0.05-5 s later."""
    mix = FaultMix(kinds=("crash",), rate=0.1, long=0.5, aimed=6.0)
    aimed = [
        f for seed in range(100) for f in generate(mix, random.Random(seed), NODES, WINDOW, aims=(("a", "k"),)) if isinstance(f, OnAcquire)
    ]
    table = RANGES.aimed
    pauses = [f.duration for f in aimed if f.action == "pause"]
    cuts = [f.duration for f in aimed if f.action == "cut-crash"]
    downs = [f.down for f in aimed if f.action != "pause"]
    delays = [f.delay for f in aimed if f.delay]
    assert (min(pauses) >= table.pause.least, max(pauses) <= table.pause_long.most, max(pauses) > table.pause.most) == (True, True, True)
    assert (min(cuts) >= table.cut.least, max(cuts) <= table.cut.most) == (True, True)
    assert (min(downs) >= table.down_soon.least, max(downs) <= table.down_later.most) == (True, True)
    assert (min(delays) >= table.delay.least, max(delays) <= table.delay.most) == (True, True)


def test_the_space_constants_are_the_table_in_thousandths() -> None:
    """sim.testing's integer ranges are the table's: ms for lengths, permille for probabilities, ppm for drift."""
    assert (testing._DOWN, testing._PAUSE, testing._CUT, testing._PERIOD, testing._STEP, testing._PPM, testing._LINK, testing._P) == (
        (300, 10_000), (200, 15_000), (300, 15_000), (100, 2_000), (1, 600_000), (1, 50_000), (300, 8_000), (10, 600),
    )
    assert (testing._DUPLICATE_DELAY, testing._REORDER_DELAY) == ((0, 500), (5, 200))


def test_a_span_refuses_a_low_above_its_high() -> None:
    """Span(2, 1) is a ValueError naming both ends."""
    with pytest.raises(ValueError, match=r"a span needs low <= high, got 2\.\.1"):
        Span(2, 1)
