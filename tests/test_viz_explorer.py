"""The explorer: frames read from a trace, the widget scrubbing them, forks with one more fault, the static filmstrip."""

from __future__ import annotations

from typing import Any

import pytest

from casty.protocol.placement import Ring
from sim import scenarios
from sim.faults import ClockStep, Crash, FaultPlan, Partition, Pause
from sim.trace import Row, Trace
from sim.viz.explorer_panel import FAULT_BUTTONS, Explorer, explorer
from sim.viz.data.frames import MemberState, describe, frame_at, frame_times, keys_of

A = "app:acct"
S = 1_000_000_000


def _trace(rows: list[tuple[float, str, str, dict[str, Any]]]) -> Trace:
    return Trace(Row(i, round(t * S), node, None, kind, fields) for i, (t, node, kind, fields) in enumerate(rows))


def _story() -> Trace:
    """n1 owns k, is cut off, n2 takes k over, n3 pauses, the network heals, n2 crashes and restarts."""
    return _trace([
        (0.0, "n1", "node.started", {"incarnation": 1}),
        (0.0, "n2", "node.started", {"incarnation": 1}),
        (0.0, "n3", "node.started", {"incarnation": 1}),
        (1.0, "n1", "epoch.acquired", {"actor": A, "key": "k", "epoch_round": 1, "epoch_node": "n1#0", "version": 1, "found": 0}),
        (1.0, "n1", "activation.started", {"actor": A, "key": "k", "lease": 1, "recovered": False}),
        (2.0, "n1", "fault.partition", {"from": ["n1"], "to": ["n2", "n3"], "oneway": False}),
        (3.0, "n2", "member.changed", {"node": "n1", "incarnation": 0, "status": "dead"}),
        (3.0, "n3", "member.changed", {"node": "n1", "incarnation": 0, "status": "dead"}),
        (3.5, "n2", "epoch.acquired", {"actor": A, "key": "k", "epoch_round": 2, "epoch_node": "n2#0", "version": 5, "found": 4}),
        (3.5, "n2", "activation.started", {"actor": A, "key": "k", "lease": 1, "recovered": True}),
        (4.0, "n3", "fault.pause", {}),
        (5.0, "n1", "fault.heal", {}),
        (5.0, "n2", "fault.heal", {}),
        (5.0, "n3", "fault.heal", {}),
        (5.5, "n1", "activation.ended", {"actor": A, "key": "k", "lease": 1, "reason": "lost"}),
        (6.0, "n2", "fault.crash", {"incarnation": 1, "unsynced_lost": 0}),
        (6.0, "n3", "fault.resume", {"paused_ns": 2 * S}),
        (7.0, "n2", "node.started", {"incarnation": 2}),
        (8.0, "n3", "fault.partition", {"from": ["n3"], "to": ["n1"], "oneway": True}),
        (9.0, "n3", "fault.reconnect", {"from": ["n3"], "to": ["n1"], "oneway": True}),
    ])


def test_frame_members_cuts_and_owner_follow_the_story() -> None:
    """Status, verdicts, cut links, owner, epoch and stale holders at each step of a hand-built trace are exact."""
    trace = _story()
    cut = frame_at(trace, 2.5)
    assert cut.cuts == (("n1", "n2"), ("n1", "n3"), ("n2", "n1"), ("n3", "n1"))
    assert (cut.owner, cut.epoch, cut.stale) == ("n1", "(1, n1#1)", ())
    taken = frame_at(trace, 4.0)
    assert (taken.owner, taken.epoch, taken.stale) == ("n2", "(2, n2#1)", ("n1",))
    assert taken.member("n3") == MemberState("n3", "paused", 1, ())
    assert taken.member("n1") == MemberState("n1", "up", 1, (("n2", "dead"), ("n3", "dead")))
    assert taken.events == ("n3 PAUSED (runs nothing until resumed)",)
    healed = frame_at(trace, 5.0)
    assert healed.cuts == ()
    assert healed.events == ("network healed: every link whole",)  # recorded on three nodes, told once
    assert frame_at(trace, 5.6).stale == ()  # n1's run ended lost at 5.5 s
    down = frame_at(trace, 6.5)
    assert (down.owner, down.epoch) == (None, "(2, n2#1)")
    assert down.member("n2").status == "down"
    assert down.member("n1").verdicts == (("n3", "dead"),)  # a down node holds no verdict
    assert down.member("n3").status == "up"
    assert frame_at(trace, 7.0).member("n2") == MemberState("n2", "up", 2, ())
    assert frame_at(trace, 8.5).cuts == (("n3", "n1"),)  # one way only
    assert frame_at(trace, 9.0).cuts == ()


def test_frame_replicas_are_the_ring_walk_of_the_runs_nodes() -> None:
    """A frame's replicas are placement's ring walk over the run's nodes, cut to the replica count."""
    trace = _story()
    ring = Ring(["n1", "n2", "n3"])
    assert frame_at(trace, 1.0).replicas == ring.replicas(A, "k", 3)
    assert frame_at(trace, 1.0, replicas=2).replicas == ring.replicas(A, "k", 2)
    assert len(frame_at(trace, 1.0, replicas=2).replicas) == 2


def test_frame_rejects_bad_arguments_by_name() -> None:
    """A key without an owner epoch, a negative time and a zero window are refused with what was wrong."""
    trace = _story()
    with pytest.raises(ValueError, match=r"no owner epoch for actor=None key='nope'.*acct\[\"k\"\]"):
        frame_at(trace, 1.0, key="nope")
    with pytest.raises(ValueError, match="t must be >= 0"):
        frame_at(trace, -1.0)
    with pytest.raises(ValueError, match="window must be > 0"):
        frame_at(trace, 1.0, window=0)
    with pytest.raises(ValueError, match="step must be > 0"):
        frame_times(trace, 0)


def test_internal_keys_are_hidden_unless_asked() -> None:
    """A cron claim key (a casty.* type) is never the default key, and is listed only with internal=True."""
    trace = _trace([
        (0.0, "n1", "node.started", {"incarnation": 1}),
        (1.0, "n1", "epoch.acquired", {"actor": "casty.cluster.claims:schedule_fire", "key": "c", "epoch_round": 1, "found": 0}),
        (1.0, "n1", "epoch.acquired", {"actor": "casty.cluster.claims:schedule_fire", "key": "c", "epoch_round": 2, "found": 1}),
        (2.0, "n1", "epoch.acquired", {"actor": A, "key": "k", "epoch_round": 1, "found": 0}),
    ])
    assert keys_of(trace) == [(A, "k")]
    assert keys_of(trace, internal=True) == [("casty.cluster.claims:schedule_fire", "c"), (A, "k")]
    assert frame_at(trace, 2.0).key == "k"
    assert frame_at(trace, 2.0, key="c").actor == "casty.cluster.claims:schedule_fire"


def test_frame_times_cover_the_run() -> None:
    """Frame times start at 0, go by the step and end at or after the last row."""
    trace = _trace([(0.0, "n1", "node.started", {}), (0.25, "n1", "note", {"text": "x"})])
    assert frame_times(trace, 0.1) == [0, S // 10, 2 * S // 10, 3 * S // 10]
    assert describe(trace[1]) == "n1: x"


@pytest.fixture(scope="module")
def stale() -> scenarios.Run:
    return scenarios.run("stale-owner-fenced", seed=0)


@pytest.fixture(scope="module")
def shared(stale: scenarios.Run) -> Explorer:
    """One explorer for the tests that only read it or move its slider (building one draws the lanes chart)."""
    return explorer(stale, stills=4)


def test_frames_of_the_stale_owner_scenario(stale: scenarios.Run) -> None:
    """stale-owner-fenced seed 0: n3 owns, is cut off at 3 s, n1 owns round 2 at 5 s, the heal is told at 7.2 s."""
    before = frame_at(stale.trace, 2.1)
    assert (before.key, before.owner, before.epoch, before.cuts) == ("stale12", "n3", "(1, n3#1)", ())
    split = frame_at(stale.trace, 5.0)
    assert (split.owner, split.epoch) == ("n1", "(2, n1#1)")
    assert split.cuts == (("n1", "n3"), ("n2", "n3"), ("n3", "n1"), ("n3", "n2"))
    assert split.member("n3").verdicts == (("n1", "dead"), ("n2", "dead"))
    healed = frame_at(stale.trace, 7.21)
    assert healed.cuts == ()
    assert healed.events.count("network healed: every link whole") == 1


def test_widget_builds_and_the_slider_moves_the_frame(shared: Explorer) -> None:
    """The panel has Play linked to the slider (no continuous update); moving the slider redraws the graph and the words."""
    ex = shared
    ex.slider.value = 0
    assert ex.slider.continuous_update is False
    assert ex._link.source == (ex.play, "value") and ex._link.target == (ex.slider, "value")
    assert sorted(ex.buttons) == sorted(FAULT_BUTTONS)
    assert ex.t_ns == 0
    first = ex.images["original"].value
    ex.slider.value = ex.times.index(5 * S)
    assert ex.t_ns == 5 * S
    assert ex.frame().owner == "n1"
    assert ex.images["original"].value != first
    assert ex.clock.value.startswith("t = 5.00 s of ")
    for sentence in ex.frame().events:
        assert sentence.replace("'", "&#x27;") in ex.events["original"].value


def test_fault_buttons_make_exactly_these_faults(shared: Explorer) -> None:
    """Each button's fault names the selected node and time, with the explorer's pause, cut and step amounts."""
    ex = shared
    assert (ex.pause_for, ex.cut_for, ex.step_by) == (2.0, 3.0, -5.0)
    assert ex.fault_for("crash", "n2", 5.0) == Crash(at=5.0, node="n2")
    assert ex.fault_for("pause", "n2", 5.0) == Pause(at=5.0, node="n2", duration=2.0)
    assert ex.fault_for("partition", "n2", 5.0) == Partition(at=5.0, a=("n2",), b=("n1", "n3"), duration=3.0)
    assert ex.fault_for("clock step", "n2", 5.0) == ClockStep(at=5.0, node="n2", seconds=-5.0)
    with pytest.raises(ValueError, match="no fault button 'melt'"):
        ex.fault_for("melt", "n2", 5.0)
    with pytest.raises(ValueError, match="no node 'n9' in this run; its nodes: n1, n2, n3"):
        ex.fault_for("crash", "n9", 5.0)
    with pytest.raises(ValueError, match=r"crash\(n9\)@5.00 names node\(s\) n9; the run has n1, n2, n3"):
        ex.fork(Crash(at=5.0, node="n9"))
    assert ex.fork_run is None


def test_a_fork_adds_exactly_one_fault_and_differs(stale: scenarios.Run) -> None:
    """The fork is the same seed with one more fault: identical rows before it, one more fault row, another digest."""
    ex = explorer(stale)
    ex.slider.value = ex.times.index(25 * S // 10)
    ex.node_box.value = "n3"
    ex.buttons["pause"].click()
    fork = ex.fork_run
    assert fork is not None and ex.fork_fault == Pause(at=2.5, node="n3", duration=2.0)
    assert fork.seed == stale.seed and fork.scenario.name == stale.scenario.name
    assert len(stale.trace.of("fault.pause")) == 0
    assert [(r.t, r.node) for r in fork.trace.of("fault.pause")] == [(2.5, "n3")]
    assert len(fork.trace.of("fault.")) == len(stale.trace.of("fault.")) + 2  # the pause and its resume
    cut = 25 * S // 10
    assert [r.as_dict() for r in fork.trace if r.t_ns < cut] == [r.as_dict() for r in stale.trace if r.t_ns < cut]
    assert fork.trace.digest() != stale.trace.digest()
    assert ex.frame(fork=True).member("n3").status == "paused"
    assert ex.images["fork"].value != b""
    assert "the same seed + pause(n3,2.00s)@2.50" in ex.headers["fork"].value


def test_a_fork_whose_script_dies_shows_why(stale: scenarios.Run) -> None:
    """Crashing n1 breaks the scenario's client on n1: the fork keeps the trace up to there and says why it stopped."""
    ex = explorer(stale)
    fork = ex.fork(Crash(at=5.0, node="n1"))
    assert ex.fork_error is not None and ex.fork_error.startswith("the run stopped at ")
    assert ex.fork_error.endswith("RuntimeError: node n1 is down")
    assert [(r.t, r.node) for r in fork.trace.of("fault.crash")] == [(5.0, "n1")]
    assert ex.fork_error in ex.headers["fork"].value


def test_the_static_fallback_holds_n_frames(shared: Explorer) -> None:
    """The filmstrip has one image per still (spread over the run, ends included) and the lanes; the bundle carries it."""
    ex = shared
    # first, last, and an even pick of the moments things changed: n3's epoch (2.0065 s) and the heal's hand-back (7.2 s)
    assert ex.still_times() == [0, 21 * S // 10, 73 * S // 10, 149 * S // 10]
    assert 3 * S in ex.still_times(8)  # the partition, at 3.0 s, once there is room
    assert len(ex.still_times(12)) == 12
    page = ex.filmstrip_html()
    assert page.count('<figure class="casty-still"') == 4
    assert page.count("data:image/png;base64,") == 5
    data, meta = ex._repr_mimebundle_()
    assert data["text/html"] == page
    assert data["application/vnd.jupyter.widget-view+json"]["model_id"] == ex.widget.model_id
    assert meta == {"casty": {"static_fallback": "text/html"}}


def test_a_bare_trace_scrubs_but_cannot_fork(stale: scenarios.Run) -> None:
    """Given a trace (no scenario), the buttons and the seed are disabled and fork() says what it needs."""
    ex = explorer(stale.trace)
    assert all(b.disabled for b in ex.buttons.values()) and ex.seed_box.disabled
    with pytest.raises(RuntimeError, match="a fork needs a scenario run"):
        ex.fork(Crash(at=1.0, node="n1"))
    with pytest.raises(TypeError, match="takes a scenario Run or a Trace"):
        explorer("stale-owner-fenced")  # type: ignore[arg-type]


def test_reseed_runs_the_scenario_again_and_drops_the_fork(stale: scenarios.Run) -> None:
    """The seed control reruns the original under the new seed; a fork of the old seed is dropped."""
    ex = explorer(stale)
    ex.fork(Pause(at=2.5, node="n3", duration=1.0))
    ex.seed_box.value = 1
    assert ex.run is not None and ex.run.seed == 1
    assert ex.fork_run is None
    assert ex.trace.digest() == scenarios.run("stale-owner-fenced", seed=1).trace.digest()
    assert FaultPlan.of(Pause(at=2.5, node="n3", duration=1.0)).nodes() == ("n3",)
