"""rolling-restart: what the roll shows beyond its checks, and that its checks can fail."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from sim import scenarios
from sim.checks import CheckFailed
from sim.scenarios.rolling import GAP_BOUND, GRACE, TICKER_KEY, _confirmed_increments_kept, _restarted_nodes_handed_off, _schedule_kept_firing
from sim.trace import Trace


@pytest.fixture(scope="module")
def roll() -> scenarios.Run:
    return scenarios.run("rolling-restart", 0)


def _world_like(run: scenarios.Run, rows: Any = None, **results: Any) -> Any:
    """The run's world as the checks read it, with some trace rows or results replaced."""
    world = run.world
    return SimpleNamespace(trace=Trace(world.trace.rows if rows is None else rows), results={**world.results, **results}, nodes=world.nodes)


def test_seed_0_rolls_every_node_alternating_crash_and_stop_under_load(roll: scenarios.Run) -> None:
    """Seed 0 takes the 5 nodes one at a time, crash and orderly stop alternating, each down 1-4 s, and its checks hold."""
    assert roll.ok, roll.failures
    entries = roll.world.results["roll"]
    assert sorted(e["node"] for e in entries) == ["n1", "n2", "n3", "n4", "n5"]
    kinds = [e["kind"] for e in entries]
    assert all(a != b for a, b in zip(kinds, kinds[1:], strict=False))
    assert all(1.0 <= e["up"] - e["down"] <= 4.0 for e in entries)


def test_the_schedule_moved_with_its_owner_and_kept_its_count(roll: scenarios.Run) -> None:
    """The scheduled key changed owners during the roll, each new owner started from the last confirmed count, and it kept firing."""
    acquired = roll.trace.of("epoch.acquired", key=TICKER_KEY)
    assert len({r.node for r in acquired}) >= 2
    assert all(int(r.get("found")) > 0 for r in acquired[1:])
    assert roll.world.results["longest_gap"] <= GAP_BOUND


def test_counts_check_fails_when_a_confirmed_increment_is_missing(roll: scenarios.Run) -> None:
    """A final count below the number of confirmed increments is a violation."""
    confirmed = [v for v in roll.world.results["confirmed:c0"] if isinstance(v, int)]
    with pytest.raises(CheckFailed, match="c0: final count"):
        _confirmed_increments_kept(_world_like(roll, **{"final:c0": len(confirmed) - 1}))


def test_gap_check_fails_when_the_schedule_stops_firing(roll: scenarios.Run) -> None:
    """Firings removed from a window longer than the bound make the schedule check fail, naming the gap."""
    fired = [r for r in roll.trace.of("schedule.fired") if r.get("key") == TICKER_KEY]
    start = fired[5].t
    rows = [r for r in roll.trace.rows if not (r.kind == "schedule.fired" and start < r.t < start + GAP_BOUND + 1.0)]
    with pytest.raises(CheckFailed, match="no firing for"):
        _schedule_kept_firing(_world_like(roll, rows))


def test_every_restart_waited_the_rejoin_grace_and_the_check_sees_an_early_opening(roll: scenarios.Run) -> None:
    """Each restarted node (crashed or stopped) opened its replica at least the grace after its restart; a replica opened earlier fails the check."""
    delays = roll.world.results["open_delays"]
    assert sorted(delays) == ["n1", "n2", "n3", "n4", "n5"] and min(delays.values()) >= GRACE - 1e-6
    early = []
    for row in roll.trace.rows:
        if row.kind == "handoff.started" and row.get("reason") == "opened" and row.node == "n1" and row.t > 3.0:
            row = replace(row, t_ns=row.t_ns - int(GRACE * 1e9) + 10_000_000)  # opened 10 ms after the restart
        early.append(row)
    with pytest.raises(CheckFailed, match="n1: its replica opened"):
        _restarted_nodes_handed_off(_world_like(roll, early))


def _ring_rounds_after_returns(run: scenarios.Run) -> list[tuple[str, str, float]]:
    """For each orderly-stopped node's return: (returning node, peer, seconds from the return to the end of the peer's ring round it started)."""
    out = []
    rows = run.trace.rows
    for entry in run.world.results["roll"]:
        if entry["kind"] != "stop":
            continue
        up = entry["up"]
        for started in run.trace.of("handoff.started", reason="ring"):
            if started.node == entry["node"] or not up <= started.t <= up + 0.3:
                continue
            ended = [r for r in rows if r.kind == "handoff.ended" and r.node == started.node and r.get("round") == started.get("round")]
            out.append((entry["node"], started.node, (ended[0].t if ended else float("inf")) - up))
    return out


def test_peers_ring_rounds_end_before_a_returning_node_opens(roll: scenarios.Run) -> None:
    """When an orderly-stopped node comes back, its peers' ring rounds end well inside its rejoin grace (its dumps count before it opens)."""
    rounds = _ring_rounds_after_returns(roll)
    assert rounds
    slow = [(node, peer, round(took, 3)) for node, peer, took in rounds if took >= GRACE - 0.5]
    assert not slow, slow
