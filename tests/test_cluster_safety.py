"""Cluster safety under faults the built-in plans used to leave out (issue 10): a double restart, a forged heartbeat."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest
import simpy

from casty.cluster.config import Cluster
from casty.protocol.membership import Heartbeat
from casty.cluster.routing import CLUSTER_WIRE
from sim.checks import epochs_only_grow, no_confirmed_write_lost, single_writer_per_epoch
from sim.scenarios.cluster import cl_counter
from sim.scenarios.double_restart import DOUBLE, UNTIL, double_restart_counts, double_restart_plan, setup_double_restart
from sim.world import World

from test_cluster_replication import Inc, ask_from, rep_counter

LISTEN = 3 * 0.2  # the listen window of Cluster(heartbeat=0.2, suspect_after=1): three heartbeats


def test_two_seeds_restarted_together_lose_no_confirmed_increment() -> None:
    """n1 and n2 (both seeds of five) crash together at 3.05 s and restart 1.37 s later under majority-side increments:
    they own nothing until they have learned the view, no confirmed increment is lost, epochs only grow, one writer per epoch.

    Before the fix (seed 36 of ``cluster-double-restart``) the restarted n2 counted 2 of 2 alive, acquired c2 at
    t=4.516 s "from version 0" while version 6 had been confirmed, and counts 1-5 were confirmed twice.
    """
    world = World(36)
    crash_at, down = double_restart_plan(world)
    assert (round(crash_at, 3), round(down, 3)) == (3.046, 1.375)
    setup_double_restart(world, crash_at, down)
    world.run(until=UNTIL)
    restart = crash_at + down
    for check in (double_restart_counts, epochs_only_grow, single_writer_per_epoch, no_confirmed_write_lost):
        check(world)  # raises CheckFailed
    counts = {key: world.results.get(f"confirmed:{key}", []) for key in ("c0", "c1", "c2")}
    assert all(counts[key] for key in counts)  # every counter took increments
    assert all(world.results[f"final:{key}"] == max(counts[key]) for key in counts)  # the last confirmed count, read back
    learned = [r for r in world.trace.of("member.learned") if r.node in DOUBLE and r.t > restart]
    assert [(r.node, r.get("alive"), r.get("members")) for r in learned] == [("n1", 5, 5), ("n2", 5, 5)]
    assert all(r.t >= restart + LISTEN for r in learned)
    reborn = [r for r in world.trace.of("epoch.acquired", actor=cl_counter.name) if r.node in DOUBLE and r.t > restart]
    assert all(r.t > min(x.t for x in learned) for r in reborn)  # nothing acquired before the view was learned


def test_a_forged_heartbeat_from_a_stranger_leaves_the_quorum_in_place() -> None:
    """A stranger endpoint sends n1 one Heartbeat whose digest names two members that do not exist: none of the three
    nodes ever counts them, every node keeps its quorum for 80 s (the stranger itself is removed), and a key is served.

    Before the fix n1 took f1 and f2 into its view and gossiped them: once the stranger and its fakes were suspect,
    3 alive of 6 was no quorum, on every node, for good (dead members are only removed by a node with a quorum).
    """
    world = World(11)
    for name in ("n1", "n2", "n3"):
        world.add_node(name, cluster=Cluster(seeds=["n1"], heartbeat=0.2, suspect_after=1, dead_after=1), ask_timeout=2.0, write_timeout=1.0)
    world.run(until=2.0)
    assert ask_from(world, "n2", rep_counter, "k", Inc()) == 1
    stranger = world.network.endpoint("x")
    forged = Heartbeat("x", 1, 1, (("x", 1, "alive", 1), ("f1", 1, "alive", 1), ("f2", 1, "alive", 1)))
    stranger.send("n1", CLUSTER_WIRE.encode("m", forged))
    samples: list[tuple[float, str, bool, tuple[str, ...]]] = []

    def watch(world: World) -> Generator[simpy.Event, Any, None]:
        while True:
            yield world.timeout(0.5)
            for name in ("n1", "n2", "n3"):
                core = world.system(name).cluster_node.membership.core  # type: ignore[union-attr]
                samples.append((world.now, name, core.has_quorum(), tuple(m.node for m in core.members())))

    world.process(watch(world))
    world.run(until=80.0)
    assert [s for s in samples if not s[2]] == []  # a quorum on every node at every sample
    assert all("f1" not in s[3] and "f2" not in s[3] for s in samples)
    assert {s[3] for s in samples if s[1] == "n1" and s[0] >= 70.0} == {("n1", "n2", "n3")}  # x removed
    assert {s[3] for s in samples if s[1] != "n1"} == {("n1", "n2", "n3")}  # nobody gossiped x on n1's word
    assert ask_from(world, "n1", rep_counter, "k", Inc(), run_for=3.0) == 2


def test_a_key_whose_replicas_include_the_stranger_is_served_while_it_is_dead() -> None:
    """A forged Heartbeat from stranger x (an endpoint that never answers): x never proves a round trip, so it never goes on
    n1's ring, where it would be among key k's replicas; eight seconds later k still answers.

    Before the rule "a new member proves a round trip", x was a member (heard directly), on n1's ring, dead after 2 s and
    kept until remove_after: n1's sync round waited for x's answer, so n1 was never ready for k and could not acquire it.
    """
    world = World(11)
    for name in ("n1", "n2", "n3"):
        world.add_node(name, cluster=Cluster(seeds=["n1"], heartbeat=0.2, suspect_after=1, dead_after=1), ask_timeout=2.0, write_timeout=1.0)
    world.run(until=2.0)
    assert ask_from(world, "n2", rep_counter, "k", Inc()) == 1
    world.network.endpoint("x").send("n1", CLUSTER_WIRE.encode("m", Heartbeat("x", 1, 1, (("x", 1, "alive", 1),))))
    world.run(until=10.0)
    core = world.system("n1").cluster_node.membership.core  # type: ignore[union-attr]
    assert core.ring_nodes() == ("n1", "n2", "n3") and core.candidates() == ()  # forgotten after suspect_after + dead_after
    assert world.system("n1").placement(rep_counter, "k").replicas == ("n1", "n2", "n3")
    assert ask_from(world, "n3", rep_counter, "k", Inc(), run_for=3.0) == 2


WHOLE_RESTART_LEARNED = {
    # no disk: nobody remembers the cluster; the seeds found it together, so n2 learns once n1 (restarted at 0.9 s)
    # answers, n4 once it hears n2 or n1; the others once their 0.6 s window is over (n4 alone with n2 used to learn 2
    # of 2 at 0.6 s)
    None: [("n2", 0.902, 4, 4), ("n4", 0.907, 4, 4), ("n5", 1.2, 4, 4), ("n1", 1.5, 5, 5), ("n3", 1.8, 5, 5)],
    # a disk per node: each remembers the five ("The remembered view"), so the founders count n3, not back yet, as a
    # dead member (4 of 5, not 4 of 4); n4 learns when it heard n1 and n2 and the 0.2 ms read of its disk is done
    "memory": [("n2", 0.903, 4, 5), ("n4", 1.102, 4, 5), ("n5", 1.2, 4, 5), ("n1", 1.5, 5, 5), ("n3", 1.8, 5, 5)],
}


@pytest.mark.parametrize("store", [None, "memory"], ids=["no-disk", "disk"])
def test_a_whole_cluster_restarted_regains_quorum_and_serves(store: str | None) -> None:
    """All five nodes crash and restart 0.3 s apart, with no live member to hear: nobody learns the view before both seeds
    are back (n4, first up, waits for n1 at 0.9 s instead of taking 2 of 2 for the cluster), then each once its window
    is over; all five end with 5 members and a quorum, and a counter starts over and counts (its replicas kept no memory)."""
    world = World(2)
    names = ("n1", "n2", "n3", "n4", "n5")
    for name in names:
        world.add_node(name, cluster=Cluster(seeds=["n1", "n2"], heartbeat=0.2, suspect_after=1, dead_after=1), ask_timeout=2.0, write_timeout=1.0, store=store)
    world.run(until=2.0)
    assert [ask_from(world, "n3", rep_counter, "w", Inc()) for _ in range(2)] == [1, 2]
    for name in names:
        world.crash(name)
    world.run(until=world.now + 3.0)
    back = world.now
    for name in ("n4", "n2", "n5", "n1", "n3"):
        world.restart(name)
        world.run(until=world.now + 0.3)
    world.run(until=back + 4.0)
    learned = [r for r in world.trace.of("member.learned") if r.t > back]
    assert [(r.node, round(r.t - back, 3), r.get("alive"), r.get("members")) for r in learned] == WHOLE_RESTART_LEARNED[store]
    assert all(world.system(name).cluster_node.membership.core.has_quorum() for name in names)  # type: ignore[union-attr]
    assert all(len(world.system(name).cluster_node.membership.members()) == 5 for name in names)  # type: ignore[union-attr]
    assert ask_from(world, "n5", rep_counter, "w", Inc(), run_for=3.0) == 1


def _trace_world(rows: list[tuple[float, str, str, dict[str, Any]]]) -> Any:
    """A trace-only world of replicas n1, n2, n3 for key m:counter/c1, built from (t, node, kind, fields) rows."""
    from types import SimpleNamespace

    from sim.trace import Trace

    trace = Trace()
    entity = {"actor": "m:counter", "key": "c1"}
    for t, node, kind, fields in rows:
        keyed = kind in ("epoch.acquired", "write.confirmed")
        trace.add(int(t * 1e9), node, None, kind, {**entity, **fields} if keyed else fields)
    return SimpleNamespace(trace=trace, results={"replicas": {"m:counter/c1": ["n1", "n2", "n3"]}, "durable": []})


def _acquired(round_: int, node: str, version: int) -> dict[str, Any]:
    return {"epoch_round": round_, "epoch_node": node, "version": version, "found": version - 1}


def _seed_460_shape(*, second_writer: bool) -> Any:
    """Seed 460's sw_log[e1], reduced: n3 acquires round 5 around a pause; every replica then crashes (a new era), the
    key starts over at round 1 on n2, n2 takes round 2, n3's next life takes round 3 and writes (or, second_writer,
    confirms a version without acquiring: a real second writer)."""
    rows: list[tuple[float, str, str, dict[str, Any]]] = [
        (1.0, "n3", "epoch.acquired", _acquired(5, "n3#1", 11)),
        (1.0, "n3", "fault.pause", {}),
        (1.5, "n3", "fault.resume", {}),
        (1.6, "n3", "write.confirmed", {"version": 12}),
        (2.0, "n1", "fault.crash", {}),
        (2.1, "n2", "fault.crash", {}),
        (2.2, "n3", "fault.crash", {}),
        (3.0, "n1", "fault.restart", {}),
        (3.0, "n2", "fault.restart", {}),
        (3.0, "n3", "fault.restart", {}),
        (4.0, "n2", "epoch.acquired", _acquired(1, "n2#2", 1)),
        (4.1, "n2", "write.confirmed", {"version": 2}),
        (5.0, "n2", "epoch.acquired", _acquired(2, "n2#2", 3)),
        (5.1, "n2", "write.confirmed", {"version": 4}),
    ]
    if not second_writer:
        rows.append((6.0, "n3", "epoch.acquired", _acquired(3, "n3#2", 5)))
    rows.append((6.1, "n3", "write.confirmed", {"version": 6}))
    return _trace_world(rows)


def test_a_resume_before_every_replica_forgot_the_key_proves_no_later_acquisition_late() -> None:
    """Seed 460's shape: n3's acquisition of round 3 in the key's new era (after every replica crashed) is not taken
    for a row recorded late because n3 resumed from a pause in the old era, where round 5 found version 10 >= 5: the
    holder is n3 at round 3 and its version-6 write is its own; a version-6 write by n3 with no acquisition still fails.

    Before the fix ``_late_acquisitions`` compared versions across eras (a new era starts at version 0 again), skipped
    n3's round-3 row, and single_writer_per_epoch failed: "n3 confirmed version 6 ... while n2 held epoch (2, n2#2)"."""
    from sim.checks import CheckFailed, _late_acquisitions

    world = _seed_460_shape(second_writer=False)
    assert _late_acquisitions(world) == set()
    single_writer_per_epoch(world)
    epochs_only_grow(world)
    with pytest.raises(CheckFailed, match=r"n3 confirmed version 6 at t=6.100s while n2 held epoch \(2, n2#2\)"):
        single_writer_per_epoch(_seed_460_shape(second_writer=True))


def test_a_resume_of_a_previous_life_proves_no_acquisition_of_the_next_one_late() -> None:
    """n1 resumes from a pause after n3 took round 6 (found 10), then crashes alone (n2 and n3 keep the key: one era);
    its next life's acquisition of round 3 is a real step back of the epoch, not a row of the paused life recorded late:
    epochs_only_grow fails. Before the fix the resume of the previous life made the row "late" and the check passed."""
    from sim.checks import CheckFailed, _late_acquisitions

    world = _trace_world([
        (0.5, "n1", "fault.pause", {}),
        (1.0, "n3", "epoch.acquired", _acquired(6, "n3#1", 11)),
        (1.1, "n3", "write.confirmed", {"version": 12}),
        (2.0, "n1", "fault.resume", {}),
        (3.0, "n1", "fault.crash", {}),
        (4.0, "n1", "fault.restart", {}),
        (5.0, "n1", "epoch.acquired", _acquired(3, "n1#2", 4)),
    ])
    assert _late_acquisitions(world) == set()
    with pytest.raises(CheckFailed, match=r"epoch \(3, 'n1#2'\) acquired on n1 at t=5.000s is not greater than \(6, 'n3#1'\)"):
        epochs_only_grow(world)


def test_a_pause_across_a_new_era_proves_no_acquisition_late() -> None:
    """n3 is paused from 0.5 s to 5 s; meanwhile n1 and n2 crash (a new era: only paused n3 held the key) and n1 acquires
    rounds 1 and 2 of the new era (round 2 found version 2). n3's round-1 row at 5.5 s is not proven late by that found:
    it counts versions of another history, so epochs_only_grow fails on it; and a pause that ended before the greater
    row was acquired proves nothing either (n3 was running then)."""
    from sim.checks import CheckFailed, _late_acquisitions

    def world(pause: tuple[float, float]) -> Any:
        return _trace_world([
            (pause[0], "n3", "fault.pause", {}),
            (1.0, "n1", "fault.crash", {}),
            (1.1, "n2", "fault.crash", {}),
            (2.0, "n1", "fault.restart", {}),
            (2.0, "n2", "fault.restart", {}),
            (2.5, "n1", "epoch.acquired", _acquired(1, "n1#2", 1)),
            (2.6, "n1", "write.confirmed", {"version": 2}),
            (3.0, "n1", "epoch.acquired", _acquired(2, "n1#2", 3)),
            (pause[1], "n3", "fault.resume", {}),
            (5.5, "n3", "epoch.acquired", _acquired(1, "n3#1", 1)),
        ])

    for pause in ((0.5, 5.0), (3.5, 5.0)):
        assert _late_acquisitions(world(pause)) == set(), pause
        with pytest.raises(CheckFailed, match=r"epoch \(1, 'n3#1'\) acquired on n3 at t=5.500s is not greater than \(2, 'n1#2'\)"):
            epochs_only_grow(world(pause))
    assert len(_late_acquisitions(world((2.0, 5.0)))) == 1  # paused through n1's acquisitions, within the new era: late


def test_three_restarted_nodes_with_their_disks_do_not_found_a_cluster_while_the_members_that_remember_it_are_paused() -> None:
    """Both seeds and n4 crash and restart with their disks while n3 and n5 are paused: each disk remembers the five
    ("The remembered view"), so the three learn 3 of 5 (n3 and n5 dead, still on the ring) and x, on n1, n5 and n3,
    has one live replica: an increment asked of n4 is Unavailable, not a count from 0; once n3 and n5 resume it goes
    on from 3 to 4.

    Before the fix (swarm seed 848) the three founded a cluster of themselves (3 of 3 at 0.6 s), whose ring put x on
    n1, n2 and n4, acquired it at round 1 from version 0 and answered 1 while 3 was confirmed."""
    world = World(5)
    for name in ("n1", "n2", "n3", "n4", "n5"):
        world.add_node(name, cluster=Cluster(seeds=["n1", "n2"], heartbeat=0.2, suspect_after=1, dead_after=1), ask_timeout=2.0, write_timeout=1.0)
    world.run(until=2.0)
    assert world.system("n1").placement(rep_counter, "x").replicas == ("n1", "n5", "n3")
    assert [ask_from(world, "n3", rep_counter, "x", Inc()) for _ in range(3)] == [1, 2, 3]
    assert world.node("n1").store is not None
    assert world.node("n1").store._records[("@cluster", "n1")].state != b""  # type: ignore[union-attr]
    for name in ("n3", "n5"):
        world.pause(name)
    for name in ("n1", "n2", "n4"):
        world.crash(name)
    world.run(until=world.now + 0.3)
    back = world.now
    for name in ("n1", "n2", "n4"):
        world.restart(name)
    world.run(until=world.now + 2.0)
    answer = ask_from(world, "n4", rep_counter, "x", Inc(), run_for=2.5)
    assert type(answer).__name__ == "Unavailable"
    learned = [(r.node, r.get("alive"), r.get("members")) for r in world.trace.of("member.learned") if r.t > back]
    assert learned == [("n1", 3, 5), ("n2", 3, 5), ("n4", 3, 5)]
    assert world.system("n4").placement(rep_counter, "x").replicas == ("n1", "n5", "n3")
    for name in ("n3", "n5"):
        world.resume(name)
    world.run(until=world.now + 3.0)
    assert ask_from(world, "n4", rep_counter, "x", Inc(), run_for=3.0) == 4
    assert [r.get("found") for r in world.trace.of("epoch.acquired") if r.t > back and r.get("key") == "x"] == [4]


def test_two_restarted_nodes_own_nothing_while_the_members_that_remember_the_cluster_are_paused() -> None:
    """Seed n1 and n4 crash and restart while n2, n3 and n5 (the other seed among them) are paused: hearing only each
    other, neither learns the view, so an increment asked of n4 is Unavailable instead of a count from 0; once the
    three resume, both learn 3 of 5 and the counter goes on from 3 to 4.

    Before the fix (swarm seeds 970, 1186, 1563) the pair learned 2 of 2 at 0.6 s, acquired w at round 1 from version 0
    and answered 1 while 3 was confirmed."""
    world = World(5)
    for name in ("n1", "n2", "n3", "n4", "n5"):
        world.add_node(name, cluster=Cluster(seeds=["n1", "n2"], heartbeat=0.2, suspect_after=1, dead_after=1), ask_timeout=2.0, write_timeout=1.0)
    world.run(until=2.0)
    assert [ask_from(world, "n3", rep_counter, "w", Inc()) for _ in range(3)] == [1, 2, 3]
    for name in ("n2", "n3", "n5"):
        world.pause(name)
    world.crash("n1")
    world.crash("n4")
    world.run(until=world.now + 0.3)
    back = world.now
    world.restart("n1")
    world.restart("n4")
    world.run(until=world.now + 2.0)
    answer = ask_from(world, "n4", rep_counter, "w", Inc(), run_for=2.5)
    assert type(answer).__name__ == "Unavailable" and "no quorum" in str(answer)
    assert [r for r in world.trace.of("member.learned") if r.t > back] == []
    for name in ("n2", "n3", "n5"):
        world.resume(name)
    world.run(until=world.now + 3.0)
    assert ask_from(world, "n4", rep_counter, "w", Inc(), run_for=3.0) == 4
    learned = [(r.node, round(r.t - back, 3), r.get("alive"), r.get("members")) for r in world.trace.of("member.learned") if r.t > back]
    assert learned == [("n1", 4.501, 3, 5), ("n4", 4.501, 3, 5)]
    assert [(r.node, r.get("epoch_round"), r.get("found")) for r in world.trace.of("epoch.acquired") if r.t > back] == [("n1", 2, 4)]
