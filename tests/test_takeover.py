"""skewed-takeover: the heir's clock offset moves the schedule in true time, and every shift is explained."""

from __future__ import annotations

import dataclasses

import pytest

from sim import scenarios
from sim.checks import CheckFailed, explain_occurrences
from sim.scenarios.takeover import HEIR, OWNER, SKEW, _skewed_takeover, timing
from sim.trace import Trace


def test_ahead_heir_catches_up_then_fires_every_occurrence_early_by_its_offset() -> None:
    """Ahead: the heir's first firing is late and skips dues (explained by the crash, the epoch and the skew), then each comes SKEW early."""
    run = scenarios.run("skewed-takeover", 1)
    assert run.ok, run.failures
    key = run.world.results["key"]
    heir = [r for r in run.trace.of("schedule.fired", node=HEIR) if r.get("key") == key]
    assert timing(run.world, heir[0]) == "late"
    for row in heir[1:]:
        shift_ns = row.t_ns - (int(row.get("due_us")) - run.world.epoch_us) * 1000
        assert shift_ns == pytest.approx(-SKEW * 1e9, abs=1e6)
    skipped = [o for o in explain_occurrences(run.trace) if o.kind == "miss" and o.at is heir[0]]
    assert skipped and all(any(why.startswith(f"fault.crash of {OWNER}") for why in o.because) for o in skipped)


def test_behind_heir_fires_late_and_the_returning_owner_skips() -> None:
    """Behind: the heir never skips and fires late; it hands the key back, and the returning owner skips the dues left in its past."""
    run = scenarios.run("skewed-takeover-behind", 1)
    assert run.ok, run.failures
    key = run.world.results["key"]
    heir = [r for r in run.trace.of("schedule.fired", node=HEIR) if r.get("key") == key]
    assert heir and all(timing(run.world, r) == "late" for r in heir)
    assert [r.get("reason") for r in run.trace.of("activation.ended", node=HEIR, key=key)] == ["handoff"]
    misses = [o for o in explain_occurrences(run.trace) if o.kind == "miss"]
    assert misses and all(o.at.node == OWNER and any(why.startswith(f"epoch.acquired on {OWNER}") for why in o.because) for o in misses)


def test_the_timing_check_fails_when_the_heirs_offset_is_not_in_the_trace() -> None:
    """With the heir's wall times rewritten to true time (no visible offset), its early firings are unexplained and the check fails."""
    run = scenarios.run("skewed-takeover", 1)
    epoch = run.world.epoch_us
    run.world.trace = Trace(
        dataclasses.replace(r, wall_us=epoch + r.t_ns // 1000) if r.node == HEIR and r.wall_us is not None else r for r in run.trace.rows
    )
    with pytest.raises(CheckFailed, match="fired early on n1"):
        _skewed_takeover(run.world)
