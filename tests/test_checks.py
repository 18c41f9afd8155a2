"""The check that every repeated or missed schedule occurrence is explained, on synthetic traces and a real one."""

from __future__ import annotations

import pytest

from sim import scenarios
from sim.checks import CheckFailed, explain_occurrences, repeats_and_misses_explained
from sim.trace import Trace
from sim.world import World

S = 1_000_000  # µs in a second
E = 1_000 * S  # the wall clock's epoch in these traces (µs)
ACTOR = "m:ticker"


class Ticking:
    """A synthetic trace of one key's 1-second schedule: rows added in true time (seconds), wall = E + t + offset."""

    def __init__(self) -> None:
        self.trace = Trace()
        self.offsets: dict[str, float] = {}

    def row(self, t: float, node: str, kind: str, **fields: object) -> None:
        wall = E + round((t + self.offsets.get(node, 0.0)) * S)
        self.trace.add(round(t * 1e9), node, wall, kind, fields)

    def armed(self, t: float, node: str, due: float) -> None:
        self.row(t, node, "schedule.armed", actor=ACTOR, key="k", name="tick", due_us=E + round(due * S), every_us=S)

    def fired(self, t: float, node: str, due: float, skipped: int = 0) -> None:
        now = E + round((t + self.offsets.get(node, 0.0)) * S)
        nxt = E + round(due * S) + S * (skipped + 1)
        self.row(t, node, "schedule.fired", actor=ACTOR, key="k", name="tick", due_us=E + round(due * S), now_us=now, next_us=nxt)
        if skipped:
            self.row(t, node, "schedule.caught_up", actor=ACTOR, key="k", name="tick", due_us=E + round(due * S), now_us=now, next_us=nxt, skipped=skipped)

    def acquired(self, t: float, node: str, round_: int) -> None:
        self.row(t, node, "epoch.acquired", actor=ACTOR, key="k", epoch_round=round_, epoch_node=node, version=round_, found=0)

    def check(self) -> None:
        world = World(0)
        world.trace = self.trace
        repeats_and_misses_explained(world)


def ticking(until: int, node: str = "n1") -> Ticking:
    """n1 acquires the key, arms at t=0 for due 1, and fires dues 1..until on time."""
    run = Ticking()
    run.acquired(0.0, node, 1)
    run.armed(0.0, node, 1.0)
    for due in range(1, until + 1):
        run.fired(float(due), node, float(due))
    return run


def test_an_unexplained_repeat_is_a_violation_naming_key_due_and_time() -> None:
    """Due 5 delivered twice by n1 and n2 with no epoch change, fault or clock step near: the check fails and says which."""
    run = ticking(5)
    run.fired(5.2, "n2", 5.0)
    with pytest.raises(CheckFailed) as failure:
        run.check()
    message = str(failure.value)
    assert "ticker[k]" in message and f"due {E + 5 * S} delivered again" in message and "t=5.200s on n2" in message
    assert [o.kind for o in explain_occurrences(run.trace)] == ["repeat"]


def test_a_repeat_after_another_node_acquired_the_key_is_explained() -> None:
    """The same repeat is explained once n2 acquired the key's epoch between the two firings (an ownership change)."""
    run = ticking(5)
    run.acquired(5.1, "n2", 2)
    run.fired(5.2, "n2", 5.0)
    run.check()
    (repeat,) = explain_occurrences(run.trace)
    assert repeat.because == ("epoch.acquired on n2 at t=5.100s",)


@pytest.mark.parametrize("kind", ["fault.crash", "fault.restart", "clock.step", "fault.pause"])
def test_a_repeat_near_a_fault_or_clock_step_of_a_firing_node_is_explained(kind: str) -> None:
    """A crash, restart, pause or clock step of a firing node within the window explains a repeat on the same node."""
    run = ticking(5)
    run.row(5.1, "n1", kind)
    run.fired(5.2, "n1", 5.0)
    run.check()


def test_a_fault_of_an_unrelated_node_or_long_before_explains_nothing() -> None:
    """A crash of a node that fired neither occurrence, or a clock step 3 s before, does not explain a repeat."""
    run = ticking(8)
    run.row(4.0, "n1", "clock.step", delta_us=S)
    run.row(8.1, "n3", "fault.crash")
    run.fired(8.2, "n1", 8.0)
    with pytest.raises(CheckFailed, match="delivered again"):
        run.check()


def test_an_unexplained_catch_up_skip_is_a_missed_occurrence() -> None:
    """Dues 4 and 5 skipped by a late catch-up on the same node with nothing near: two misses, the check fails on the first."""
    run = ticking(3)
    run.fired(6.5, "n1", 4.0, skipped=2)  # due 4 fired at 6.5 s: 5 and 6 skipped, next due 7
    run.fired(7.0, "n1", 7.0)
    misses = [o for o in explain_occurrences(run.trace) if o.kind == "miss"]
    assert [(m.due_us - E) // S for m in misses] == [5, 6]
    with pytest.raises(CheckFailed, match=f"due {E + 5 * S} never delivered"):
        run.check()


def test_a_miss_at_a_takeover_by_a_node_with_a_skewed_clock_is_explained() -> None:
    """n2, 3 s ahead, takes the key after n1 stops firing and catches up: the skipped dues are explained by the epoch and the skew."""
    run = ticking(3)
    run.offsets["n2"] = 3.0
    run.acquired(4.5, "n2", 2)
    run.fired(4.5, "n2", 4.0, skipped=3)  # n2's wall reads 7.5: dues 5, 6, 7 are past
    run.check()
    misses = [o for o in explain_occurrences(run.trace) if o.kind == "miss"]
    assert len(misses) == 3
    assert all("clock of n2 is +3.000s off n1's" in m.because for m in misses)


def test_the_check_fails_on_a_real_trace_once_the_explaining_rows_are_removed() -> None:
    """ownership-repeat passes; the same trace without its epoch.acquired and fault rows has an unexplained repeat."""
    run = scenarios.run("ownership-repeat", 0)
    assert run.ok, run.failures
    (repeat,) = [o for o in explain_occurrences(run.trace) if o.kind == "repeat"]
    assert any(why.startswith("fault.crash of n3") for why in repeat.because)
    world = World(0)
    world.trace = Trace(r for r in run.trace.rows if r.kind != "epoch.acquired" and not r.kind.startswith("fault."))
    with pytest.raises(CheckFailed, match=f"due {repeat.due_us} delivered again"):
        repeats_and_misses_explained(world)


def test_ownership_miss_names_the_crash_that_lost_the_firing_in_flight() -> None:
    """ownership-miss seed 0: the one miss is n3's firing of due 12.006534 s lost when n3 crashed 0.2 s later, explained by that crash."""
    run = scenarios.run("ownership-miss", 0)
    assert run.ok, run.failures
    (miss,) = explain_occurrences(run.trace)
    assert (miss.kind, miss.key, miss.name, miss.due_us) == ("miss", "miss1", "tick", 1_767_225_612_006_534)
    assert miss.before is not None
    assert (miss.before.kind, miss.before.node, f"{miss.before.t:.3f}") == ("schedule.fired", "n3", "12.007")
    assert (miss.at.kind, miss.at.node, f"{miss.at.t:.3f}") == ("message.dropped", "n3", "12.207")
    assert miss.because == ("fault.crash of n3 at t=12.207s",)
    assert miss.describe() == "slow_ticker[miss1] schedule 'tick': due 1767225612006534 never delivered (at t=12.207s on n3)"
    assert miss.why.startswith("lost in flight: fired on n3 at t=12.007s, dropped (fault.crash of n3 at t=12.207s): ")


def _lost_at_end(run: Ticking, t: float) -> None:
    """n1's activation of the key ends at ``t`` (its run lost; the drop names no quorum) and the Tick its mailbox held is dropped."""
    run.row(t, "n1", "activation.ended", actor=ACTOR, key="k", lease=1, reason="lost")
    run.row(t, "n1", "message.dropped", actor=ACTOR, key="k", message="Tick", reason="failed: Unavailable('the run ended')")


def test_a_firing_lost_when_its_run_ended_with_nothing_near_is_an_unexplained_miss() -> None:
    """Due 4 fired at 4.0 and dropped when the run ended at 4.1, no fault of n1: the check fails on that miss, bounded by the drop."""
    run = ticking(4)
    _lost_at_end(run, 4.1)
    (miss,) = explain_occurrences(run.trace)
    assert (miss.kind, (miss.due_us - E) // S, miss.at.kind, miss.because) == ("miss", 4, "message.dropped", ())
    with pytest.raises(CheckFailed, match=f"due {E + 4 * S} never delivered \\(at t=4.100s on n1\\) \\(previous row at t=4.000s on n1\\)"):
        run.check()


def test_the_firing_node_doubting_its_view_explains_a_firing_lost_in_flight() -> None:
    """The same loss with n1 doubting its view at 4.1 s (the step-down rule ends its runs): explained by that doubt (swarm seed 186)."""
    run = ticking(4)
    run.row(4.1, "n1", "member.doubted", reason="n3, heard fine until now, held it suspect")
    _lost_at_end(run, 4.1)
    run.check()
    assert explain_occurrences(run.trace)[0].because == ("member.doubted on n1 at t=4.100s: n3, heard fine until now, held it suspect",)


def test_a_handoff_of_the_key_explains_a_firing_lost_in_flight_and_a_lost_run_does_not() -> None:
    """A run of the key on n1 ended 'handoff' at 4.1 s (a member came back, the key moved) explains the loss (swarm seed 119); 'lost' alone does not."""
    run = ticking(4)
    run.row(4.1, "n1", "activation.ended", actor=ACTOR, key="k", lease=1, reason="handoff")
    run.row(4.1, "n1", "message.dropped", actor=ACTOR, key="k", message="Tick", reason="failed: Unavailable('the key moved to n2')")
    run.check()
    assert explain_occurrences(run.trace)[0].because == ("activation.ended (handoff) of ticker[k] on n1 at t=4.100s",)
    other = ticking(4)
    other.row(4.1, "n1", "activation.ended", actor=ACTOR, key="other", lease=2, reason="handoff")  # another key's handoff
    _lost_at_end(other, 4.1)
    with pytest.raises(CheckFailed):
        other.check()


def test_a_partition_of_the_firing_node_in_effect_explains_a_firing_lost_in_flight() -> None:
    """The same loss with n1 cut from n2 and n3 at 3.5 s: explained by the partition; one healed at 1.0 s (before the window) explains nothing."""
    run = ticking(4)
    run.row(3.5, "n1", "fault.partition", **{"from": ["n1"], "to": ["n2", "n3"], "oneway": False})
    _lost_at_end(run, 4.1)
    run.check()
    assert explain_occurrences(run.trace)[0].because == ("fault.partition of n1 from n2, n3 at t=3.500s",)
    healed = Ticking()
    healed.acquired(0.0, "n1", 1)
    healed.armed(0.0, "n1", 1.0)
    healed.row(0.5, "n1", "fault.partition", **{"from": ["n1"], "to": ["n2"], "oneway": False})
    healed.row(1.0, "n1", "fault.heal")
    for due in range(1, 5):
        healed.fired(float(due), "n1", float(due))
    _lost_at_end(healed, 4.1)
    with pytest.raises(CheckFailed, match="never delivered"):
        healed.check()


def test_a_run_that_lost_its_quorum_is_explained_by_members_down_in_its_window() -> None:
    """A loss whose drop says the quorum was lost: n2 crashed at 3.0 s (not back) explains it, n3's crash at 0.5 s with a restart at 1.0 s does not."""
    run = ticking(4)
    run.row(0.5, "n3", "fault.crash")
    run.row(1.0, "n3", "fault.restart")
    run.row(3.0, "n2", "fault.crash")
    run.row(4.1, "n1", "activation.ended", actor=ACTOR, key="k", lease=1, reason="lost")
    run.row(4.1, "n1", "message.dropped", actor=ACTOR, key="k", message="Tick", reason="failed: Unavailable('n1 lost its quorum (1 of 3 members alive)')")
    run.check()
    assert explain_occurrences(run.trace)[0].because == ("fault.crash of n2 at t=3.000s",)
    alone = ticking(4)
    alone.row(3.0, "n2", "fault.crash")
    _lost_at_end(alone, 4.1)  # a drop that names no quorum: another node's crash explains nothing
    with pytest.raises(CheckFailed, match="never delivered"):
        alone.check()


def test_a_firing_whose_handler_failed_is_explained_by_that_failure() -> None:
    """Due 4's handler raises on n1 (activation.failed, its Tick dropped): the miss names the failure; without that row the drop is not taken for a loss."""
    run = ticking(4)
    run.row(4.0, "n1", "activation.failed", actor=ACTOR, key="k", lease=1, error="ValueError('boom')", message="Tick", retry_in=0.1)
    run.row(4.0, "n1", "message.dropped", actor=ACTOR, key="k", message="Tick", reason="failed: ValueError('boom')")
    run.fired(5.0, "n1", 5.0)
    run.check()
    (miss,) = explain_occurrences(run.trace)
    assert ((miss.due_us - E) // S, miss.because) == (4, ("activation.failed of ticker[k] on n1 at t=4.000s: ValueError('boom')",))
    assert miss.why.startswith("its handler failed: fired on n1 at t=4.000s")


# ============================================================ owed writes, a paused owner (swarm seed 227) =====

from sim.checks import owed_writes_found  # noqa: E402


def _paused_owner(n1_crashes: bool) -> World:
    """n3 acquires a/k at 1 s and freezes; n2 crashes at 2 s (back at 5 s), n1 at 6 s (back at 9 s) if asked;
    n3 resumes at 8 s and confirms version 2 then (its acks waited for it); n3 acquires again at 10 s finding 0."""
    trace = Trace()

    def row(t: float, node: str, kind: str, **fields: object) -> None:
        trace.add(round(t * 1e9), node, None, kind, fields)

    row(1.0, "n3", "epoch.acquired", actor="a", key="k", epoch_round=1, epoch_node="n3", version=1, found=0)
    row(1.0, "n3", "fault.pause")
    row(2.0, "n2", "fault.crash", unsynced_lost=0)
    row(5.0, "n2", "fault.restart")
    if n1_crashes:
        row(6.0, "n1", "fault.crash", unsynced_lost=0)
    row(8.0, "n3", "fault.resume", paused_ns=7_000_000_000)
    row(8.0, "n3", "write.confirmed", actor="a", key="k", lease=1, version=2, pages=("state",))
    if n1_crashes:
        row(9.0, "n1", "fault.restart")
    row(10.0, "n3", "epoch.acquired", actor="a", key="k", epoch_round=2, epoch_node="n3", version=1, found=0)
    world = World(0)
    world.trace = trace
    world.results["replicas"] = {"a/k": ["n1", "n2", "n3"]}
    return world


def test_a_write_a_paused_owner_confirms_at_its_resume_is_owed_from_its_acquisition_on() -> None:
    """Seed 227: the acks of version 2 came before n2's and n1's crashes, the row only at n3's resume: nothing is owed."""
    owed_writes_found(_paused_owner(n1_crashes=True))


def test_a_paused_owners_write_is_still_owed_while_a_majority_kept_it() -> None:
    """The same run with n1 never crashing: n1 and n3 hold version 2 since the acquisition, so finding 0 fails."""
    with pytest.raises(CheckFailed, match=r"\[k\]: n3 acquired the key at t=10.000s from version 0, but version 2 confirmed on n3 at t=8.000s is owed"):
        owed_writes_found(_paused_owner(n1_crashes=False))


def _fenced_at(run: Ticking, t: float, reason: str) -> None:
    """n1's run of the key ends 'lost' at ``t`` and the Tick it was handling is dropped with ``reason``."""
    run.row(t, "n1", "activation.ended", actor=ACTOR, key="k", lease=1, reason="lost")
    run.row(t, "n1", "message.dropped", actor=ACTOR, key="k", message="Tick", reason=reason)


NEWER = "failed: Unavailable(\"m:ticker['k']: owner epoch lost to (2, 'n2#7')\")"


def test_the_newer_owner_a_drop_names_explains_it_even_when_its_acquisition_is_recorded_after_the_drop() -> None:
    """Due 4's run fenced at 4.1 s by epoch (2, 'n2#7'), which n2 acquires for the key at 4.105 s (swarm seed 1074): explained by it."""
    run = ticking(4)
    _fenced_at(run, 4.1, NEWER)
    run.row(4.105, "n2", "epoch.acquired", actor=ACTOR, key="k", epoch_round=2, epoch_node="n2#7", version=3, found=2)
    run.check()
    assert explain_occurrences(run.trace)[0].because == ("epoch.acquired (2, n2#7) of ticker[k] on n2 at t=4.105s: the newer owner the drop names",)


@pytest.mark.parametrize(
    ("key", "node", "round_", "epoch_node", "at"),
    [
        ("other", "n2", 2, "n2#7", 4.105),  # the named epoch, but of another key
        ("k", "n3", 2, "n3#7", 4.105),  # the key, but another node's epoch
        ("k", "n2", 3, "n2#7", 4.105),  # the key and node, another round
        ("k", "n2", 2, "n2#7", 6.2),  # the named epoch, acquired more than NEAR_NS after the drop
    ],
)
def test_an_acquisition_that_is_not_the_epoch_the_drop_names_explains_nothing(key: str, node: str, round_: int, epoch_node: str, at: float) -> None:
    """The same fenced loss with an acquisition of another key, node or round, or too late: the miss stays unexplained."""
    run = ticking(4)
    _fenced_at(run, 4.1, NEWER)
    run.row(at, node, "epoch.acquired", actor=ACTOR, key=key, epoch_round=round_, epoch_node=epoch_node, version=3, found=2)
    with pytest.raises(CheckFailed, match=f"due {E + 4 * S} never delivered"):
        run.check()


NOT_ACQUIRED = "Unavailable(\"m:ticker['k']: not acquired: no quorum of replicas answered in time\")"


def _retrying(run: Ticking, node: str, key: str, at: tuple[float, ...]) -> None:
    """``node``'s acquisitions of ``key`` fail (no quorum) at each time in ``at``."""
    for t in at:
        run.row(t, node, "activation.failed", actor=ACTOR, key=key, lease=9, error=NOT_ACQUIRED, message=None, retry_in=0.0)


def test_the_named_epochs_node_acquiring_a_later_round_after_the_named_one_failed_explains_the_drop() -> None:
    """Swarm seed 723: due 4 fenced at 4.1 s by (2, 'n2#7'), n2's acquisition fails at 5.1 and 6.1 s, round 4 acquired at 6.2 s."""
    run = ticking(4)
    _fenced_at(run, 4.1, NEWER)
    _retrying(run, "n2", "k", (5.1, 6.1))
    run.row(6.2, "n2", "epoch.acquired", actor=ACTOR, key="k", epoch_round=4, epoch_node="n2#7", version=3, found=2)
    run.check()
    assert explain_occurrences(run.trace)[0].because == (
        "epoch.acquired (4, n2#7) of ticker[k] on n2 at t=6.200s after its failed acquisitions (t=5.100s, t=6.100s): "
        "the node of the newer epoch (2, n2#7) the drop names",
    )


@pytest.mark.parametrize(
    ("fails_on", "fails_key", "fails_at", "epoch_node", "at"),
    [
        ("n3", "k", (5.1, 6.1), "n2#7", 6.2),  # the failed acquisitions are another node's
        ("n2", "other", (5.1, 6.1), "n2#7", 6.2),  # of another key
        ("n2", "k", (5.1,), "n2#7", 7.2),  # the later round acquired more than NEAR_NS after the last failure
        ("n2", "k", (6.2,), "n2#7", 6.3),  # the first failure more than NEAR_NS after the drop: not the named round's
        ("n2", "k", (5.1, 6.1), "n2#8", 6.2),  # the later round is another incarnation's epoch
    ],
)
def test_a_later_round_without_the_named_ones_failed_acquisition_just_before_explains_nothing(
    fails_on: str, fails_key: str, fails_at: tuple[float, ...], epoch_node: str, at: float
) -> None:
    """The same fence with failures of another node or key, a gap over NEAR_NS, or another incarnation's round: unexplained."""
    run = ticking(4)
    _fenced_at(run, 4.1, NEWER)
    _retrying(run, fails_on, fails_key, fails_at)
    run.row(at, "n2", "epoch.acquired", actor=ACTOR, key="k", epoch_round=4, epoch_node=epoch_node, version=3, found=2)
    with pytest.raises(CheckFailed, match=f"due {E + 4 * S} never delivered"):
        run.check()


MOVED = "failed: Unavailable(\"m:ticker['k']: the key moved to n2\")"


def test_the_node_a_drop_says_the_key_moved_to_acquiring_it_explains_the_drop() -> None:
    """Swarm seeds 524, 1108, 1210: due 4's handler fails at 4.1 s as 'the key moved to n2', n2 acquires it at 5.9 s: explained."""
    run = ticking(4)
    run.row(4.1, "n1", "message.dropped", actor=ACTOR, key="k", message="Tick", reason=MOVED, schedule="tick", due_us=E + 4 * S)
    run.row(5.9, "n2", "epoch.acquired", actor=ACTOR, key="k", epoch_round=2, epoch_node="n2#7", version=3, found=2)
    run.row(6.5, "n2", "epoch.acquired", actor=ACTOR, key="k", epoch_round=3, epoch_node="n2#8", version=4, found=3)
    run.check()
    assert explain_occurrences(run.trace)[0].because == ("the key moved to n2: epoch.acquired (2, n2#7) of ticker[k] on n2 at t=5.900s",)


@pytest.mark.parametrize(
    ("key", "node", "at"),
    [
        ("other", "n2", 5.9),  # n2 acquires another key
        ("k", "n3", 5.9),  # another node acquires the key
        ("k", "n2", 6.2),  # n2 acquires the key more than NEAR_NS after the drop
    ],
)
def test_a_move_to_a_node_that_does_not_acquire_the_key_in_time_explains_nothing(key: str, node: str, at: float) -> None:
    """The same 'moved to n2' drop with an acquisition of another key, by another node, or too late: the miss stays unexplained."""
    run = ticking(4)
    run.row(4.1, "n1", "message.dropped", actor=ACTOR, key="k", message="Tick", reason=MOVED, schedule="tick", due_us=E + 4 * S)
    run.row(at, node, "epoch.acquired", actor=ACTOR, key=key, epoch_round=2, epoch_node=f"{node}#7", version=3, found=2)
    with pytest.raises(CheckFailed, match=f"due {E + 4 * S} never delivered"):
        run.check()


NO_QUORUM = "failed: Unavailable(\"m:ticker['k']: the run may be superseded: n1 lost its quorum (1 of 3 members alive)\")"


def test_frames_of_the_firing_node_lost_to_a_loss_fault_explain_a_quorum_loss() -> None:
    """Due 4 dropped at 4.1 s as n1 lost its quorum, two heartbeats to n1 lost at 3.6 and 3.8 s (swarm seed 1685): explained by them."""
    run = ticking(4)
    run.row(3.6, "n2", "net.dropped", dst="n1", size=168, reason="loss", frame="Heartbeat")
    run.row(3.8, "n3", "net.dropped", dst="n1", size=168, reason="loss", frame="Heartbeat")
    _fenced_at(run, 4.1, NO_QUORUM)
    run.check()
    assert explain_occurrences(run.trace)[0].because == ("2 frames to or from n1 lost (net.dropped loss) from t=3.600s to t=3.800s",)


@pytest.mark.parametrize(
    ("src", "dst", "why", "reason"),
    [
        ("n2", "n3", "loss", NO_QUORUM),  # lost between two other nodes
        ("n2", "n1", "partition", NO_QUORUM),  # dropped to n1 for another reason than a loss fault
        ("n2", "n1", "loss", NEWER.replace("(2, 'n2#7')", "(9, 'n9#9')")),  # lost to n1, but the drop names no quorum
    ],
)
def test_lost_frames_of_other_nodes_or_for_a_drop_that_names_no_quorum_explain_nothing(src: str, dst: str, why: str, reason: str) -> None:
    """A frame lost between n2 and n3, one dropped for a partition, or a loss under a drop that names no quorum: unexplained."""
    run = ticking(4)
    run.row(3.6, src, "net.dropped", dst=dst, size=168, reason=why, frame="Heartbeat")
    _fenced_at(run, 4.1, reason)
    with pytest.raises(CheckFailed, match=f"due {E + 4 * S} never delivered"):
        run.check()


# Re-pinned after rule 9 (55d90b2) moved the swarm histories: a scan of swarm 1488, 1982 and 0:1735 found the newer-owner
# cause alone at 1488, 325, 382, 607, 939, 995, and lost frames named on 757 misses of 327 seeds (158 of them a run that
# lost its quorum), never as the only cause; the hand-built tests above show each cause alone explains a loss.
@pytest.mark.parametrize(
    ("seed", "key", "due", "node", "because"),
    [
        (1488, "s1", 1_767_225_612_006_145, "n4", ("epoch.acquired (3, n6#1767225600000000) of sw_ticker[s1] on n6 at t=12.072s: the newer owner the drop names",)),
        (
            9,
            "s0",
            1_767_225_606_005_792,
            "n3",
            (
                "activation.failed of sw_ticker[s0] on n3 at t=7.006s: Unavailable(\"sim.scenarios.swarm:sw_ticker['s0']: write 6 got no write quorum within write_timeout = 1 s\")",
                "42 frames to or from n3 lost (net.dropped loss) from t=5.372s to t=7.004s",
            ),
        ),
        (66, "s1", 1_767_225_612_005_703, "n4", ("fault.crash of n2 at t=8.007s", "26 frames to or from n4 lost (net.dropped loss) from t=11.366s to t=12.166s")),
    ],
)
def test_swarm_losses_are_explained_by_the_newer_owner_the_drop_names_or_by_lost_frames(seed: int, key: str, due: int, node: str, because: tuple[str, ...]) -> None:
    """After rule 9, swarm 1488: n4's run of s1 fenced by n6's round 3, acquired 5 ms after the drop (that cause alone); 9 and 66: a write with no quorum, a run that lost it, each naming the lost frames of the firing node beside its other cause."""
    run = scenarios.run("swarm", seed)
    assert run.ok, run.failures
    (miss,) = [o for o in explain_occurrences(run.trace) if o.key == key and o.due_us == due]
    assert (miss.kind, miss.at.kind, miss.at.node, miss.because) == ("miss", "message.dropped", node, because)
