"""Fault plans as values (sim.faults): JSON and one-line forms, applying a plan to a World, the seeded generator."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from casty.cluster.config import Cluster
from sim.faults import (
    FAULT_KINDS,
    GENERATED_KINDS,
    ClockDrift,
    ClockStep,
    Crash,
    Duplicate,
    Fault,
    FaultMix,
    FaultPlan,
    Flap,
    ForgedHeartbeat,
    ForgedRef,
    Heal,
    Loss,
    OnAcquire,
    Partition,
    Pause,
    Reorder,
    Restart,
    Resume,
    generate,
    heal_all,
)
from sim.network import LinkModel
from sim.world import World

NODES = ("n1", "n2", "n3", "n4", "n5")

ONE_OF_EACH: tuple[Fault, ...] = (
    Crash(at=1.0, node="n1"),
    Restart(at=2.5, node="n1", wipe=True),
    Pause(at=3.0, node="n2", duration=4.25),
    Resume(at=3.5, node="n2"),
    Partition(at=4.0, a=("n1",), b=("n2", "n3"), oneway=True, duration=1.5),
    Flap(at=4.5, a=("n3",), b=("n1", "n2"), period=0.5, duration=2.0),
    Heal(at=5.0),
    ClockStep(at=6.0, node="n3", seconds=-300.0),
    ClockDrift(at=6.5, node="n2", ppm=-2500.0),
    Loss(at=7.0, p=0.25, duration=2.0, links_of=("n1",)),
    Duplicate(at=7.5, p=0.1, delay=0.2),
    Reorder(at=8.0, p=0.3, delay=0.05, duration=1.0),
    ForgedHeartbeat(at=9.0, node="n1", fakes=("ghost1",)),
    ForgedRef(at=9.5, node="n2", actor="m:counter", key="c0", message="m:Incr"),
    OnAcquire(at=10.0, actor="m:counter", key="c0", action="cut-crash", delay=0.01, duration=0.25, down=0.2, window=3.0),
)


@pytest.fixture
def world() -> Iterator[World]:
    made = World(7)
    for name in ("n1", "n2", "n3"):
        made.add_node(name)
    yield made
    made.close()


def test_one_of_each_kind_covers_every_fault_class() -> None:
    """The sample plan below has exactly one fault of every class sim.faults exports, in FAULT_KINDS order."""
    assert tuple(type(f) for f in ONE_OF_EACH) == FAULT_KINDS


@pytest.mark.parametrize("fault", ONE_OF_EACH, ids=lambda f: f.kind)
def test_every_fault_kind_round_trips_through_json(fault: Fault) -> None:
    """Each kind survives to_json/from_json as an equal value, and the JSON is tagged by kind."""
    plan = FaultPlan.of(fault)
    text = plan.to_json()
    assert text.startswith('{"faults":[{"kind":"' + fault.kind + '","at":')
    assert FaultPlan.from_json(text) == plan
    assert FaultPlan.from_json(text).faults[0] == fault


def test_json_is_stable_and_omits_defaults() -> None:
    """The same plan is always the same text: fields in declaration order, defaults left out."""
    plan = FaultPlan.of(Restart(at=5.0, node="n1"), Crash(at=3.2, node="n1"), Pause(at=4.0, node="n2", duration=6.0))
    assert plan.to_json() == (
        '{"faults":[{"kind":"crash","at":3.2,"node":"n1"},{"kind":"pause","at":4.0,"node":"n2","duration":6.0},'
        '{"kind":"restart","at":5.0,"node":"n1"}]}'
    )


def test_a_plan_iterates_and_indexes_its_faults_in_time_order() -> None:
    """for fault in plan, plan[i] and list(plan) see the faults sorted by time, as plan.faults holds them."""
    plan = FaultPlan.of(Restart(at=5.0, node="n1"), Crash(at=3.2, node="n1"))
    assert [f.at for f in plan] == [3.2, 5.0]
    assert plan[0] == Crash(at=3.2, node="n1") and plan[-1] == Restart(at=5.0, node="n1")
    assert list(plan) == list(plan.faults)


def test_a_plan_prints_as_one_sorted_line() -> None:
    """str(plan) is one line, faults sorted by time (ties in given order), each as kind(args)@time."""
    assert str(FaultPlan(ONE_OF_EACH)) == (
        "crash(n1)@1.00 restart(n1,wipe)@2.50 pause(n2,4.25s)@3.00 resume(n2)@3.50 partition(n1->n2+n3,1.50s)@4.00 "
        "flap(n3|n1+n2,every 0.50s,2.00s)@4.50 heal()@5.00 clock_step(n3,-300s)@6.00 clock_drift(n2,-2500ppm)@6.50 "
        "loss(0.25,n1,2.00s)@7.00 duplicate(0.1,+0.20s)@7.50 reorder(0.3,+0.05s,1.00s)@8.00 "
        "forged_heartbeat(mallory->n1,ghost1)@9.00 forged_ref(mallory->n2,counter[c0],ref=forged_nowhere)@9.50 "
        "on_acquire(counter[c0],cut-crash,+0.01s,0.25s,down 0.20s)@10.00"
    )
    assert str(FaultPlan.of(Crash(at=3.215, node="n2"), Crash(at=3.215, node="n1"))) == "crash(n2)@3.215 crash(n1)@3.215"
    assert str(FaultPlan()) == "(no faults)"


def test_bad_plans_are_refused_with_what_was_wrong() -> None:
    """A value out of range, a JSON that is not a plan, or an unknown kind is a ValueError naming it."""
    with pytest.raises(ValueError, match=r"loss.p must be within \[0, 1\], got 2"):
        Loss(at=1.0, p=2.0)
    with pytest.raises(ValueError, match="pause.duration must be > 0"):
        Pause(at=1.0, node="n1", duration=0.0)
    with pytest.raises(ValueError, match="crash.at must be finite"):
        Crash(at=float("nan"), node="n1")
    with pytest.raises(ValueError, match="not a fault plan: .*'explode'"):
        FaultPlan.from_json('{"faults":[{"kind":"explode","at":1}]}')
    with pytest.raises(ValueError, match=r"not a fault plan: Object missing required field `node`"):
        FaultPlan.from_json('{"faults":[{"kind":"crash","at":1}]}')
    with pytest.raises(TypeError, match="a FaultPlan holds faults"):
        FaultPlan(("crash",))  # type: ignore[arg-type]


def test_apply_names_unknown_nodes_before_running(world: World) -> None:
    """A plan naming a node the world lacks is refused at apply, naming it."""
    with pytest.raises(ValueError, match="the plan names node\\(s\\) n9; the world has n1, n2, n3"):
        FaultPlan.of(Crash(at=1.0, node="n9")).apply(world)


def test_apply_carries_out_each_fault_at_its_time(world: World) -> None:
    """Applied to a World, the plan leaves the trace rows of each fault at its time, in order."""
    plan = FaultPlan.of(
        Crash(at=1.0, node="n1"),
        Restart(at=2.0, node="n1", wipe=True),
        Pause(at=1.5, node="n2", duration=1.0),
        Partition(at=3.0, a=("n3",), b=("n1",), duration=0.5),
        ClockStep(at=4.0, node="n3", seconds=-5.0),
        ClockDrift(at=4.0, node="n1", ppm=100.0),
        ForgedHeartbeat(at=4.5, node="n2"),
    )
    plan.apply(world)
    world.run(until=6.0)
    rows = [(r.t, r.node, r.kind) for r in world.trace.of("fault.*", "clock.*")]
    assert rows == [
        (1.0, "n1", "fault.crash"),
        (1.5, "n2", "fault.pause"),
        (2.0, "n1", "fault.restart"),
        (2.5, "n2", "fault.resume"),
        (3.0, "n3", "fault.partition"),
        (3.5, "n3", "fault.reconnect"),
        (4.0, "n3", "clock.step"),
        (4.0, "n1", "clock.drift"),
        (4.5, "n2", "fault.forged"),
    ]
    assert world.trace.of("fault.restart")[0].get("wiped") is True
    assert world.trace.of("clock.step")[0].get("delta_us") == -5_000_000
    assert world.trace.of("fault.forged")[0].get("src") == "mallory"
    assert world.network.reachable("n3", "n1") and world.network.reachable("n1", "n3")


def test_a_fault_that_no_longer_fits_is_noted_and_skipped(world: World) -> None:
    """Pausing a crashed node, restarting a running one, resuming one not paused: each is a note row, nothing else."""
    plan = FaultPlan.of(
        Crash(at=1.0, node="n1"),
        Pause(at=2.0, node="n1", duration=1.0),
        Restart(at=2.5, node="n2"),
        Resume(at=3.0, node="n3"),
        Crash(at=3.5, node="n1"),
    )
    plan.apply(world)
    world.run(until=5.0)
    notes = [(r.t, r.node, r.get("text")) for r in world.trace.of("note")]
    assert notes == [
        (2.0, "n1", "planned pause(n1,1.00s)@2.00 skipped: the node is down"),
        (2.5, "n2", "planned restart(n2)@2.50 skipped: the node is up"),
        (3.0, "n3", "planned resume(n3)@3.00 skipped: the node is up"),
        (3.5, "n1", "planned crash(n1)@3.50 skipped: the node is down"),
    ]
    assert [r.kind for r in world.trace.of("fault.*")] == ["fault.crash"]


def test_a_timed_resume_after_a_crash_is_skipped(world: World) -> None:
    """A pause's own resume finds the node crashed meanwhile: it is noted, not raised."""
    FaultPlan.of(Pause(at=1.0, node="n2", duration=2.0), Crash(at=2.0, node="n2")).apply(world)
    world.run(until=4.0)
    assert [r.get("text") for r in world.trace.of("note")] == [
        "planned the resume of pause(n2,2.00s)@1.00 skipped: the node is down (incarnation 1)"
    ]


def test_a_flap_shorter_than_its_period_ends_whole() -> None:
    """A flap of 0.565 s with a 1.743 s period cuts once and reconnects at its end (no loop on a rounding remainder)."""
    made = World(1)
    for name in ("n1", "n2", "n3"):
        made.add_node(name)
    FaultPlan.of(Flap(at=26.489, a=("n2",), b=("n1", "n3"), period=1.743, duration=0.565, oneway=True)).apply(made)
    made.run(until=30.0)
    assert [(r.t, r.kind) for r in made.trace.of("fault.partition", "fault.reconnect")] == [(26.489, "fault.partition"), (27.054, "fault.reconnect")]
    assert made.network.reachable("n2", "n1")
    made.close()


def test_a_flap_alternates_cut_and_whole_every_period(world: World) -> None:
    """Flap(period 0.5, duration 2): cut at 1.0, whole at 1.5, cut at 2.0, whole at 2.5, and whole at its end."""
    FaultPlan.of(Flap(at=1.0, a=("n1",), b=("n2",), period=0.5, duration=2.0)).apply(world)
    world.run(until=4.0)
    rows = [(r.t, r.kind) for r in world.trace.of("fault.partition", "fault.reconnect")]
    assert rows == [(1.0, "fault.partition"), (1.5, "fault.reconnect"), (2.0, "fault.partition"), (2.5, "fault.reconnect")]


def test_link_faults_change_the_model_and_turn_off_after_their_duration(world: World) -> None:
    """Loss on n1's links for 1 s, duplication with delay on every link: set, then back to 0 when they end."""
    FaultPlan.of(Loss(at=1.0, p=0.5, duration=1.0, links_of=("n1",)), Duplicate(at=1.0, p=0.2, delay=0.3, duration=2.0)).apply(world)
    world.run(until=1.5)
    assert world.network.model("n2", "n1").loss == 0.5 and world.network.model("n2", "n3").loss == 0.0
    assert (world.network.model("n2", "n3").duplicate, world.network.model("n2", "n3").duplicate_delay) == (0.2, 0.3)
    world.run(until=3.5)
    assert world.network.model("n2", "n1") == LinkModel()


def test_heal_all_ends_every_fault(world: World) -> None:
    """heal_all: links whole and default, drift off, clocks back to true time, paused resumed, crashed restarted."""
    FaultPlan.of(
        Crash(at=1.0, node="n1"),
        Pause(at=1.0, node="n2"),
        Partition(at=1.0, a=("n3",), b=("n1", "n2")),
        Loss(at=1.0, p=0.4),
        ClockStep(at=1.0, node="n3", seconds=-120.0),
        ClockDrift(at=1.0, node="n2", ppm=1000.0),
    ).apply(world)
    world.run(until=2.0)
    heal_all(world)
    world.run(until=3.0)
    assert [world.node(n).status for n in ("n1", "n2", "n3")] == ["up", "up", "up"]
    assert world.network.reachable("n3", "n1") and world.network.model("n1", "n2") == LinkModel()
    assert [abs(world.node(n).clock.offset_us()) <= 1_000 for n in ("n1", "n2", "n3")] == [True, True, True]
    assert world.node("n2").clock._drift_ppm == 0.0


def test_restart_with_a_wiped_disk_starts_empty() -> None:
    """World.restart(wipe_disk=True) gives the node a new empty store; a shared Store object cannot be wiped."""
    from casty import MemoryStore

    made = World(3)
    node = made.add_node("n1")
    before = node.store
    made.crash("n1")
    made.restart("n1", wipe_disk=True)
    assert node.store is not before and isinstance(node.store, MemoryStore)
    made.add_node("n2", store=MemoryStore())
    made.crash("n2")
    with pytest.raises(ValueError, match="node n2's disk is .* cannot be wiped alone"):
        made.restart("n2", wipe_disk=True)
    made.close()


def test_a_forged_heartbeat_reaches_a_cluster_node_from_a_stranger() -> None:
    """A ForgedHeartbeat is a fault.forged row and a membership frame the node receives (its member view grows or refuses it)."""
    made = World(5)
    cluster = Cluster(seeds=["n1"], heartbeat=0.2, suspect_after=1, dead_after=1)
    for name in ("n1", "n2", "n3"):
        made.add_node(name, cluster=cluster)
    FaultPlan.of(ForgedHeartbeat(at=2.0, node="n1", fakes=("ghost1", "ghost2"))).apply(made)
    made.run(until=2.5)
    forged = made.trace.of("fault.forged")
    assert [(r.t, r.node, r.get("src")) for r in forged] == [(2.0, "n1", "mallory")]
    assert made.network.delivered > 0
    made.close()


# ========================================================================== generator ======


def _plan(seed: int, nodes: tuple[str, ...] = NODES) -> tuple[FaultMix, FaultPlan]:
    rng = random.Random(seed)
    mix = FaultMix.draw(rng, len(nodes))
    return mix, generate(mix, rng, nodes, 30.0, start=3.0, seed_nodes=("n1", "n2"), refs=[("m:counter", "c0", "m:Incr")])


def _most_down_at_once(plan: FaultPlan) -> int:
    down: set[str] = set()
    most = 0
    for fault in plan.faults:
        if isinstance(fault, Crash):
            down.add(fault.node)
        elif isinstance(fault, Restart):
            down.discard(fault.node)
        most = max(most, len(down))
    return most


def test_the_generator_is_deterministic_per_seed() -> None:
    """The same seed draws the same mix and plan (equal values, equal JSON); another seed another plan."""
    assert _plan(11) == _plan(11)
    assert _plan(11)[1].to_json() == _plan(11)[1].to_json()
    assert _plan(11)[1] != _plan(12)[1]


def test_every_generated_plan_is_over_within_its_window() -> None:
    """Over 200 seeds every fault starts at or after start and is over (durations included) by start + duration."""
    for seed in range(200):
        plan = _plan(seed)[1]
        assert all(f.at >= 3.0 for f in plan.faults), seed
        assert plan.end <= 33.0, (seed, plan.end)


def test_the_generator_covers_every_kind_majority_crashes_wipes_and_long_faults() -> None:
    """Over 300 seeds: every generated kind appears, restarts with and without a wipe, a majority and all five nodes
    down at once, a pause past the failure detector (>= 3 s), a clock stepped back by more than a minute, seed nodes hit."""
    kinds: set[str] = set()
    wipes: set[bool] = set()
    most = 0
    long_pause = long_step = seed_hit = False
    for seed in range(300):
        plan = _plan(seed)[1]
        kinds |= {f.kind for f in plan.faults}
        wipes |= {f.wipe for f in plan.faults if isinstance(f, Restart)}
        most = max(most, _most_down_at_once(plan))
        long_pause |= any(isinstance(f, Pause) and (f.duration or 0) >= 3.0 for f in plan.faults)
        long_step |= any(isinstance(f, ClockStep) and f.seconds <= -60.0 for f in plan.faults)
        seed_hit |= any(isinstance(f, Crash) and f.node in ("n1", "n2") for f in plan.faults)
    assert kinds >= set(GENERATED_KINDS) | {"restart"}
    assert wipes == {True, False}
    assert most == 5
    assert (long_pause, long_step, seed_hit) == (True, True, True)


def test_a_mix_without_seed_nodes_never_crashes_or_pauses_them() -> None:
    """FaultMix(seeds=False): over 50 seeds no crash or pause names n1 or n2, and the other three are hit."""
    mix = FaultMix(kinds=("crash", "pause"), rate=8.0, max_at_once=5, majority=True, seeds=False)
    hit: set[str] = set()
    for seed in range(50):
        plan = generate(mix, random.Random(seed), NODES, 30.0, seed_nodes=("n1", "n2"))
        hit |= {f.node for f in plan.faults if isinstance(f, Crash | Pause)}
    assert hit == {"n3", "n4", "n5"}


def test_a_bad_mix_is_refused() -> None:
    """An unknown kind or an out-of-range rate in a FaultMix is a ValueError naming it."""
    with pytest.raises(ValueError, match=r"unknown kind\(s\) \['meteor'\]"):
        FaultMix(kinds=("meteor",))
    with pytest.raises(ValueError, match="FaultMix.rate must be > 0"):
        FaultMix(kinds=("crash",), rate=0.0)


# ======================================================================= OnAcquire ======


def _acquiring_world(plan: FaultPlan, first_touch: float = 2.5) -> World:
    """3 cluster nodes, ``plan`` applied, one increment of cl_counter[k] from n1 at ``first_touch`` s, run to 6 s."""
    from sim.scenarios.cluster import Incr, cl_counter

    made = World(5)
    cluster = Cluster(seeds=["n1"], heartbeat=0.2, suspect_after=1, dead_after=1)
    for name in ("n1", "n2", "n3"):
        made.add_node(name, cluster=cluster, ask_timeout=2.0, write_timeout=1.0)
    plan.apply(made)

    def touch(world: World) -> Iterator[object]:
        yield world.timeout(first_touch)

        async def client(system: object) -> None:
            try:
                await system.ref(cl_counter, "k").ask(Incr())  # type: ignore[attr-defined]
            except Exception:  # noqa: BLE001 - the hit may cut the answer off: only the faults' rows matter here
                pass

        world.spawn("n1", client)

    made.process(touch(made))  # type: ignore[arg-type]
    made.run(until=6.0)
    return made


@pytest.mark.parametrize(
    ("action", "kinds"),
    [
        ("pause", [("fault.pause", 0.01), ("fault.resume", 0.51)]),
        ("crash", [("fault.crash", 0.01), ("fault.restart", 0.31)]),
        ("cut-crash", [("fault.partition", 0.01), ("fault.reconnect", 0.51), ("fault.crash", 0.51), ("fault.restart", 0.81)]),
    ],
)
def test_on_acquire_hits_the_node_that_acquired_the_key(action: str, kinds: list[tuple[str, float]]) -> None:
    """OnAcquire watches the trace: delay s after the key's first epoch.acquired, its node is paused, crashed or cut then crashed."""
    from sim.scenarios.cluster import cl_counter

    fault = OnAcquire(at=1.0, actor=cl_counter.name, key="k", action=action, delay=0.01, duration=0.5, down=0.3)
    made = _acquiring_world(FaultPlan.of(fault))
    acquired = made.trace.of("epoch.acquired", key="k")[0]
    hits = [(r.kind, round((r.t_ns - acquired.t_ns) / 1e9, 6)) for r in made.trace.of("fault.*") if r.node == acquired.node]
    assert hits == kinds
    assert [r.get("text") for r in made.trace.of("note") if "hits" in str(r.get("text"))] == [f"{fault} hits {acquired.node}"]
    made.close()


def test_on_acquire_with_no_acquisition_in_its_window_is_noted_and_skipped() -> None:
    """An OnAcquire whose key is not acquired within its window is a note row and nothing else."""
    made = _acquiring_world(FaultPlan.of(OnAcquire(at=0.5, actor="m:counter", key="never", window=1.0)))
    assert made.trace.of("fault.*") == []
    assert [r.get("text") for r in made.trace.of("note") if "skipped" in str(r.get("text"))] == [
        "planned on_acquire(counter[never],pause,1.00s)@0.50 skipped: no acquisition of never within 1.00s"
    ]
    made.close()


def test_a_bad_on_acquire_is_refused_naming_what_was_wrong() -> None:
    """An unknown action, an empty key or a non-positive window is a ValueError naming the field."""
    with pytest.raises(ValueError, match="on_acquire.action must be one of pause, crash, cut-crash, got 'explode'"):
        OnAcquire(at=1.0, actor="m:a", key="k", action="explode")
    with pytest.raises(ValueError, match="on_acquire.actor and on_acquire.key must not be empty"):
        OnAcquire(at=1.0, actor="m:a", key="")
    with pytest.raises(ValueError, match="on_acquire.window must be > 0"):
        OnAcquire(at=1.0, actor="m:a", key="k", window=0.0)


def test_on_acquire_prints_and_ends_as_its_action_holds_the_node() -> None:
    """str shows the key, action, delay and times; end is at + window + delay + what the action holds."""
    cut = OnAcquire(at=2.0, actor="m:counter", key="c0", action="cut-crash", delay=0.01, duration=0.25, down=0.5, window=3.0)
    crash = OnAcquire(at=2.0, actor="m:counter", key="c0", action="crash", down=0.5, window=3.0)
    assert str(cut) == "on_acquire(counter[c0],cut-crash,+0.01s,0.25s,down 0.50s)@2.00"
    assert str(crash) == "on_acquire(counter[c0],crash,down 0.50s)@2.00"
    assert (cut.end, crash.end) == (2.0 + 3.0 + 0.01 + 0.25 + 0.5, 5.5)
    assert FaultPlan.of(crash).to_json() == '{"faults":[{"kind":"on_acquire","at":2.0,"actor":"m:counter","key":"c0","action":"crash","down":0.5,"window":3.0}]}'


def test_aimed_faults_come_on_their_own_stream_after_the_rest() -> None:
    """With aims and an aim stream, the mix and plan are the ones drawn without them plus OnAcquire faults on the aimed keys,
    each over by the end of the window; over 100 seeds every action is drawn and a quarter-ish of the mixes aim at nothing."""
    aims = [("m:counter", "c0"), ("m:log", "e0")]
    actions: set[str] = set()
    unaimed = 0
    for seed in range(100):
        plain_rng = random.Random(seed)
        plain_mix = FaultMix.draw(plain_rng, len(NODES))
        plain = generate(plain_mix, plain_rng, NODES, 30.0, start=3.0, seed_nodes=("n1", "n2"))
        rng, aim = random.Random(seed), random.Random(1000 + seed)
        mix = FaultMix.draw(rng, len(NODES), aim_rng=aim)
        plan = generate(mix, rng, NODES, 30.0, start=3.0, seed_nodes=("n1", "n2"), aims=aims, aim_rng=aim)
        assert mix.kinds == plain_mix.kinds and mix.rate == plain_mix.rate
        hit = [f for f in plan.faults if isinstance(f, OnAcquire)]
        assert tuple(f for f in plan.faults if not isinstance(f, OnAcquire)) == plain.faults
        assert all((f.actor, f.key) in aims and f.at >= 3.0 and f.end <= 33.0 for f in hit), seed
        assert FaultPlan.from_json(plan.to_json()) == plan
        actions |= {f.action for f in hit}
        unaimed += mix.aimed == 0.0
    assert actions == {"pause", "crash", "cut-crash"}
    assert 10 <= unaimed <= 40


def test_generated_aimed_faults_leave_their_defaults_out_of_the_json() -> None:
    """A generated aimed crash writes no duration and an immediate hit no delay: a plan's text does not depend on the module that drew it."""
    import json

    mix = FaultMix(kinds=("crash",), rate=0.1, aimed=6.0)
    plan = generate(mix, random.Random(0), NODES, 120.0, aims=(("m:counter", "c0"),))
    entries = [e for e in json.loads(plan.to_json())["faults"] if e["kind"] == "on_acquire"]
    crashes = [e for e in entries if e.get("action", "pause") == "crash"]
    immediate = [f for f in plan.faults if isinstance(f, OnAcquire) and f.delay == 0.0]
    assert (len(crashes) > 0, len(immediate) > 0) == (True, True)
    assert [e for e in crashes if "duration" in e] == []
    assert [e for e in entries if e.get("delay") == 0.0] == []
