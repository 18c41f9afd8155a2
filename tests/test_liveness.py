"""Liveness after faults: a scheduled key resumes on its owner after a long pause; timers notice a corrected wall clock."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from casty import ActorSystem
from casty.cluster.runtime import RESUME_EVERY
from casty._core.timer_heap import WALL_RECHECK
from sim.checks import never_early
from sim.scenarios.cluster import CLUSTER, NODES, Arm, Get, Tick, cl_ticker
from sim.world import World

PAUSE_AT = 4.0
RESUMED_WITHIN = 2.0 + RESUME_EVERY + 1.0
"""The bound of finding 6 for this cluster: the failure detector hears the resumed node again
(heartbeat 0.2 s, well under 2 s), the next resume retry (``RESUME_EVERY``), then one
acquisition within ``write_timeout`` (1 s)."""


@pytest.fixture
def cluster() -> Iterator[World]:
    w = World(0)
    for name in NODES:
        w.add_node(name, cluster=CLUSTER, ask_timeout=2.0, write_timeout=1.0)
    w.run(until=2.0)
    yield w
    w.close()


def _owned_by(world: World, node: str, prefix: str) -> str:
    system = world.system("n1")
    return next(k for k in (f"{prefix}{i}" for i in range(500)) if system.placement(cl_ticker, k).owner == node)


def _arm(world: World, node: str, key: str, every: float) -> None:
    async def client(system: ActorSystem) -> Any:
        return await system.ref(cl_ticker, key).ask(Arm(every))

    world.spawn(node, client)
    world.run(until=world.now + 0.5)


def _fired(world: World, key: str, after: float) -> list[Any]:
    return [r for r in world.trace.of("schedule.fired") if r.get("key") == key and r.t > after]


@pytest.mark.parametrize("pause", [4.0, 8.0, 12.0])
def test_a_scheduled_key_fires_again_on_its_owner_after_a_pause_longer_than_the_failure_detector(cluster: World, pause: float) -> None:
    """n3 owns a 0.5 s schedule and is paused 4-12 s (the detector needs ~2 s): within the bound after it resumes the key fires again on n3 and goes on firing."""
    key = _owned_by(cluster, "n3", "p")
    _arm(cluster, "n1", key, 0.5)
    cluster.run(until=PAUSE_AT)
    cluster.pause("n3")
    cluster.run(until=PAUSE_AT + pause)
    resumed_at = cluster.now
    cluster.resume("n3")
    cluster.run(until=resumed_at + 30.0)
    later = _fired(cluster, key, resumed_at + RESUMED_WITHIN)
    assert later, f"no firing from {RESUMED_WITHIN} s after the resume to the end of the run"
    assert {r.node for r in later} == {"n3"}
    assert later[0].t <= resumed_at + RESUMED_WITHIN + 0.5
    assert cluster.now - later[-1].t <= 0.5  # still firing at the end
    never_early(cluster)


@pytest.mark.parametrize("pause", [4.0, 6.0, 8.0])
def test_a_paused_owner_steps_down_as_it_resumes_and_the_key_runs_again_on_the_ring_owner(cluster: World, pause: float) -> None:
    """n3 owns a 10 s schedule and is paused 4-8 s between two firings: n2 takes the key over; as n3 resumes it knows it was frozen and ends its stale run (lost, the step-down rule: no stale write is fenced); n2 does not doubt itself for n3's stale verdicts and hands the key back to its ring owner (handoff); the key runs again on n3 within RESUME_EVERY + write_timeout and goes on firing there."""
    key = _owned_by(cluster, "n3", "s")
    _arm(cluster, "n1", key, 10.0)
    cluster.run(until=PAUSE_AT)
    cluster.pause("n3")
    cluster.run(until=PAUSE_AT + pause)
    resumed_at = cluster.now
    cluster.resume("n3")
    cluster.run(until=resumed_at + 30.0)
    ended = [(r.node, r.get("reason")) for r in cluster.trace.of("activation.ended", key=key)]
    assert ended == [("n3", "lost"), ("n2", "handoff")]
    assert cluster.trace.of("write.failed", key=key, reason="fenced") == []
    lost = cluster.trace.of("activation.ended", key=key, reason="lost")[0]
    assert lost.t == resumed_at
    started = [r for r in cluster.trace.of("activation.started", key=key) if r.t > lost.t]
    assert [r.node for r in started] == ["n3"]
    assert started[0].t - lost.t <= RESUME_EVERY + 1.0  # write_timeout = 1 s
    later = _fired(cluster, key, lost.t + RESUME_EVERY + 1.0)
    assert len(later) >= 2 and {r.node for r in later} == {"n3"}  # the dues 10 s apart that followed, to the end
    assert [b.get("due_us") - a.get("due_us") for a, b in zip(later, later[1:])] == [10_000_000] * (len(later) - 1)
    assert cluster.now - later[-1].t <= 10.0
    never_early(cluster)


def test_a_key_orphaned_on_a_node_that_does_not_own_it_is_resumed_by_its_owner_on_request(cluster: World) -> None:
    """n1 holds an orphan (an @active key with no run) that n3 owns: its resume request makes n3 run the key again, which fires on n3."""
    key = _owned_by(cluster, "n3", "o")
    _arm(cluster, "n1", key, 0.5)
    n3 = cluster.system("n3")
    entity = (cl_ticker.name, key)
    activation = n3._activations[entity]
    activation.stop("handoff", "stopped by the test")  # no write: @active stays on the replicas
    n3.forget(activation)
    stopped_at = cluster.now
    n1 = cluster.system("n1").cluster_node
    assert n1 is not None
    n1.orphaned(entity)
    cluster.run(until=stopped_at + RESUME_EVERY + 1.0)
    started = [r for r in cluster.trace.of("activation.started", key=key) if r.t > stopped_at]
    assert [r.node for r in started] == ["n3"]
    assert entity in n3._activations and n1._orphans == {} and n1._nudges == {}
    assert {r.node for r in _fired(cluster, key, started[0].t)} == {"n3"}


def test_an_orphan_whose_first_resume_finds_no_quorum_is_tried_again_after_the_heal(cluster: World) -> None:
    """n3's orphan (its @active key, run ended) is resumed while n3 is cut off: that acquisition times out; after the heal the next attempt acquires it on n3 within RESUME_EVERY + write_timeout."""
    key = _owned_by(cluster, "n3", "r")
    _arm(cluster, "n1", key, 0.5)
    n3 = cluster.system("n3")
    entity = (cl_ticker.name, key)
    activation = n3._activations[entity]
    activation.stop("handoff", "stopped by the test")
    n3.forget(activation)
    cut_at = cluster.now
    cluster.partition(["n3"], ["n1", "n2"])
    assert n3.cluster_node is not None
    n3.cluster_node.orphaned(entity)
    cluster.run(until=cut_at + 1.6)  # n3 still counts the others (suspect): its first attempt goes out, unanswered
    healed_at = cluster.now
    cluster.heal()
    cluster.run(until=healed_at + 10.0)
    failed = [r for r in cluster.trace.of("activation.failed", key=key) if r.t > cut_at]
    acquired = [r for r in cluster.trace.of("epoch.acquired", key=key) if r.t > cut_at]
    assert [r.node for r in failed] == ["n3"] and "no quorum of replicas answered in time" in str(failed[0].get("error"))
    assert [r.node for r in acquired] == ["n3"]
    assert failed[0].t < acquired[0].t <= healed_at + RESUME_EVERY + 1.0
    assert {r.node for r in _fired(cluster, key, acquired[0].t)} == {"n3"}
    assert n3.cluster_node._orphans == {}


def _step_back_and_forward(world: World, node: str, at: float) -> None:
    world.run(until=at)
    world.step_clock(node, timedelta(minutes=-5))
    world.run(until=at + 12.0)
    world.step_clock(node, timedelta(minutes=5))


def test_a_schedule_fires_within_a_second_of_a_corrected_backward_step_on_one_node() -> None:
    """One node, a 1 s schedule: the wall clock steps back 5 min and forward again 12 s later; nothing fires early, and the next firing comes within WALL_RECHECK of the correction, not 5 min later."""
    with World(0) as world:
        world.add_node("n1")
        _arm(world, "n1", "solo", 1.0)
        _step_back_and_forward(world, "n1", 5.25)
        corrected = world.now
        world.run(until=corrected + 20.0)
        between = [r for r in _fired(world, "solo", 5.25) if r.t < corrected]
        after = _fired(world, "solo", corrected)
        assert between == []
        assert after and after[0].t - corrected <= WALL_RECHECK
        assert len(after) == 20  # one firing per second from then on (the hidden dues caught up in one)
        never_early(world)


def test_a_node_schedule_fires_within_a_second_of_a_corrected_backward_step() -> None:
    """A node schedule (ActorSystem.schedule, every 1 s) on a clock stepped back 5 min and forward 12 s later ticks again within WALL_RECHECK of the correction."""
    with World(0) as world:
        world.add_node("n1")

        async def client(system: ActorSystem) -> str:
            return await system.schedule(Tick(), system.ref(cl_ticker, "node"), timedelta(seconds=1))

        world.spawn("n1", client)
        _step_back_and_forward(world, "n1", 5.25)
        corrected = world.now
        world.run(until=corrected + 10.0)
        ticks = world.trace.of("node_schedule.fired")
        between = [r for r in ticks if 5.25 < r.t < corrected]
        after = [r for r in ticks if r.t > corrected]
        assert between == []
        assert after and after[0].t - corrected <= WALL_RECHECK
        assert all(int(r.get("now_us")) >= int(r.get("tick_us")) for r in ticks)  # never early


def test_a_scheduled_key_fires_within_a_second_of_its_owners_corrected_backward_step_in_a_cluster(cluster: World) -> None:
    """The owner (n3) of a 1 s schedule steps its clock back 5 min and forward 12 s later: the key fires again on n3 within WALL_RECHECK of the correction, never early."""
    key = _owned_by(cluster, "n3", "c")
    _arm(cluster, "n1", key, 1.0)
    _step_back_and_forward(cluster, "n3", 5.25)
    corrected = cluster.now
    cluster.run(until=corrected + 10.0)
    between = [r for r in _fired(cluster, key, 5.25) if r.t < corrected]
    after = _fired(cluster, key, corrected)
    assert between == []
    assert after and after[0].t - corrected <= WALL_RECHECK
    assert {r.node for r in after} == {"n3"}
    never_early(cluster)


def test_an_orphan_that_was_acquired_here_and_then_released_is_not_resumed(cluster: World) -> None:
    """n3's orphan (a run of its key ended with @active left) is acquired again here by a message before the next look at
    the orphans, and that run is released (@active cleared): the look resumes nothing (a stale entry once re-activated
    the key with no message a few ms after its release); the key runs again only when a message comes."""
    key = _owned_by(cluster, "n3", "q")
    _ask_get(cluster, "n1", key)
    n3 = cluster.system("n3")
    entity = (cl_ticker.name, key)
    activation = n3._activations[entity]
    activation.stop("handoff", "stopped by the test")  # no write: @active stays on the replicas
    n3.forget(activation)
    assert n3.cluster_node is not None
    n3.cluster_node.orphaned(entity)
    orphaned_at = cluster.now
    _ask_get(cluster, "n1", key)  # a message: the key runs on n3 again (acquired), before the look at orphaned_at + 1 s

    async def release(system: ActorSystem) -> None:
        await system._activations[entity].release()

    cluster.spawn("n3", release)
    cluster.run(until=orphaned_at + RESUME_EVERY - 0.2)
    ended = [(r.node, r.get("reason")) for r in cluster.trace.of("activation.ended", key=key) if r.t > orphaned_at]
    assert ended == [("n3", "released")] and entity not in n3._activations
    released_at = cluster.trace.of("activation.ended", key=key, reason="released")[-1].t
    cluster.run(until=orphaned_at + 3 * RESUME_EVERY)
    assert [r for r in cluster.trace.of("activation.started", key=key) if r.t > released_at] == []
    assert entity not in n3._activations and n3.cluster_node._orphans == {}


def _ask_get(world: World, node: str, key: str) -> None:
    async def client(system: ActorSystem) -> Any:
        return await system.ref(cl_ticker, key).ask(Get())

    world.spawn(node, client)
    world.run(until=world.now + 0.3)
