"""cron-dst-spring and cron-dst-fall (sim/scenarios/dst.py): a daily 02:30 Berlin cron skipped in the gap, once in the repeated hour."""

from __future__ import annotations

import dataclasses

import pytest

from sim import scenarios
from sim.checks import CheckFailed
from sim.ledger import ledger
from sim.scenarios.dst import FALL_EXPECTED, SPRING_EXPECTED, _fall, _firings, _spring, dst_ledger, zoned
from sim.trace import Row, Trace

US = 1_000_000


def _with_extra_firing(trace: Trace, like: Row, tick_us: int) -> Trace:
    """``trace`` plus one more firing of the daily job at ``tick_us``, a copy of ``like`` (as a scheduler with another DST rule would fire)."""
    out = Trace()
    out.rows = [*trace.rows, dataclasses.replace(like, seq=len(trace.rows), fields={**like.fields, "tick_us": tick_us, "now_us": tick_us})]
    return out


@pytest.mark.parametrize("seed", [0, 1])
def test_spring_forward_day_has_no_run_and_no_ledger_occurrence(seed: int) -> None:
    """Spring: fired 28 Mar 01:30, 30 Mar 00:30, 31 Mar 00:30 UTC, never on the 29th; the ledger's three entries are on time, none on the 29th."""
    run = scenarios.run("cron-dst-spring", seed)
    assert run.ok, run.failures
    assert _firings(run.world) == SPRING_EXPECTED == ["03-28 01:30", "03-30 00:30", "03-31 00:30"]
    assert run.world.results["runs"] == 3
    assert [(e.due_us, e.status) for e in dst_ledger(run.trace)] == [
        (1_774_661_400 * US, "on-time"),
        (1_774_830_600 * US, "on-time"),
        (1_774_917_000 * US, "on-time"),
    ]


def test_fall_back_day_runs_once_at_the_first_pass() -> None:
    """Fall: the 25th fires at 00:30 UTC (02:30 CEST) only, not at 01:30 UTC (02:30 CET); the ledger has that occurrence once, on time."""
    run = scenarios.run("cron-dst-fall", 0)
    assert run.ok, run.failures
    assert _firings(run.world) == FALL_EXPECTED == ["10-24 00:30", "10-25 00:30", "10-26 01:30", "10-27 01:30"]
    assert run.world.results["runs"] == 4
    entries = dst_ledger(run.trace)
    assert [e.status for e in entries] == ["on-time"] * 4
    assert [e.due_us for e in entries if e.due_us is not None and 1_792_886_400 * US <= e.due_us < 1_792_976_400 * US] == [1_792_888_200 * US]


def test_the_checks_fail_on_the_other_dst_rules() -> None:
    """croniter's choices, planted in the traces: a gap run moved to 03:00 CEST fails the spring check, a second 02:30 (CET) fails the fall check."""
    spring = scenarios.run("cron-dst-spring", 0)
    first = spring.trace.of("node_schedule.fired")[0]
    spring.world.trace = _with_extra_firing(spring.trace, first, 1_774_746_000 * US)  # 29 Mar 01:00 UTC = 03:00 CEST
    with pytest.raises(CheckFailed, match="the rule says"):
        _spring(spring.world)
    fall = scenarios.run("cron-dst-fall", 0)
    first = fall.trace.of("node_schedule.fired")[0]
    fall.world.trace = _with_extra_firing(fall.trace, first, 1_792_891_800 * US)  # 25 Oct 01:30 UTC = 02:30 CET
    with pytest.raises(CheckFailed, match="the rule says"):
        _fall(fall.world)


def test_the_registration_row_names_the_zone_and_the_ledger_reads_the_grid_in_it() -> None:
    """The zoned registration row says tz=Europe/Berlin; without it (the row read as UTC) the ledger would see 4 false misses of a 02:30 UTC grid."""
    run = scenarios.run("cron-dst-spring", 0)
    (registered,) = run.trace.of("node_schedule.registered")
    assert (registered.get("expression"), registered.get("tz")) == ("0 30 2 * * ?", "Europe/Berlin")
    assert [e.status for e in ledger(run.trace)] == ["on-time"] * 3
    unzoned = Trace()
    unzoned.rows = [dataclasses.replace(r, fields={k: v for k, v in r.fields.items() if k != "tz"}) for r in run.trace.rows]
    assert [e.status for e in ledger(unzoned)].count("missed") == 4
    assert [r.get("tz") for r in zoned(unzoned).of("node_schedule.registered")] == ["Europe/Berlin"]
