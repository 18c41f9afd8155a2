"""sim.testing: fault_plans shrinks toward fewer, shorter, later faults on fewer nodes; PlanSpace.draw per seed."""

from __future__ import annotations

import random
import subprocess
import sys
from collections.abc import Callable

import pytest
from hypothesis import Phase, find, given, settings
from hypothesis import strategies as st

from sim.faults import (
    ClockStep,
    Crash,
    FaultPlan,
    Flap,
    ForgedHeartbeat,
    Heal,
    Partition,
    Pause,
    Restart,
)
from sim.testing import DEFAULT_KINDS, DRAWABLE_KINDS, PlanSpace, fault_plans, node_names, space_of

FIND = settings(database=None, derandomize=True, max_examples=1000)
THREE = fault_plans(3, 20.0)


def shrunk(condition: Callable[[FaultPlan], bool]) -> FaultPlan:
    plan: FaultPlan = find(THREE, condition, settings=FIND, random=random.Random(0))
    return plan


def test_any_plan_shrinks_to_one_crash_of_the_first_node_at_the_last_millisecond() -> None:
    """The simplest non-empty plan is one crash (the first kind) of n1 at 19.999 s of a 20 s window, not restarted."""
    assert shrunk(lambda p: len(p) > 0) == FaultPlan.of(Crash(at=19.999, node="n1"))


def test_a_plan_that_must_be_early_shrinks_to_the_latest_time_that_still_is() -> None:
    """'Some fault before 10 s' shrinks to one crash at 9.999 s: later is simpler, and the other faults go."""
    assert shrunk(lambda p: any(f.at < 10 for f in p.faults)) == FaultPlan.of(Crash(at=9.999, node="n1"))


def test_a_plan_that_must_touch_n3_touches_n3_alone() -> None:
    """'Touches n3' shrinks to a crash of n3 only (no n1 fault kept)."""
    assert shrunk(lambda p: "n3" in p.nodes()) == FaultPlan.of(Crash(at=19.999, node="n3"))


def test_two_crashed_nodes_shrink_to_the_first_two() -> None:
    """Two nodes crashed shrinks to n1 and n2 crashed at the last millisecond, nothing else."""
    plan = shrunk(lambda p: len({f.nodes()[0] for f in p.faults if isinstance(f, Crash)}) >= 2)
    assert plan == FaultPlan.of(Crash(at=19.999, node="n1"), Crash(at=19.999, node="n2"))


def test_a_restart_shrinks_to_the_shortest_downtime_that_fits() -> None:
    """A plan with a restart shrinks to crash at 19.998 and restart 1 ms later, keeping the disk."""
    plan = shrunk(lambda p: any(isinstance(f, Restart) for f in p.faults))
    assert plan == FaultPlan.of(Crash(at=19.998, node="n1"), Restart(at=19.999, node="n1", wipe=False))


def test_a_wiped_restart_is_the_same_shape_with_the_wipe() -> None:
    """A plan with a wiped restart shrinks to the same crash and restart, with wipe=True."""
    plan = shrunk(lambda p: any(isinstance(f, Restart) and f.wipe for f in p.faults))
    assert plan == FaultPlan.of(Crash(at=19.998, node="n1"), Restart(at=19.999, node="n1", wipe=True))


def test_a_long_pause_shrinks_to_exactly_as_long_as_needed_and_as_late_as_fits() -> None:
    """'A pause of 3 s or more' shrinks to a 3.000 s pause of n1 that ends at the window's last millisecond."""
    plan = shrunk(lambda p: any(isinstance(f, Pause) and (f.duration or 0) >= 3 for f in p.faults))
    assert plan == FaultPlan.of(Pause(at=16.999, node="n1", duration=3.0))


def test_a_partition_of_three_nodes_shrinks_to_one_node_against_the_others() -> None:
    """A partition touching all three nodes shrinks to one node against two, two-way, 1 ms long, over 1 ms before the end.

    Which node is alone depends on where the search began (n1 | n2+n3 and n1+n2 | n3 are both as simple:
    the shrinker cannot turn one into the other), so both are accepted, and nothing else."""
    plan = shrunk(lambda p: any(isinstance(f, Partition) and len(f.nodes()) == 3 for f in p.faults))
    assert plan in (
        FaultPlan.of(Partition(at=19.998, a=("n1",), b=("n2", "n3"), oneway=False, duration=0.001)),
        FaultPlan.of(Partition(at=19.998, a=("n1", "n2"), b=("n3",), oneway=False, duration=0.001)),
    )


def test_a_clock_step_back_shrinks_to_just_past_the_threshold() -> None:
    """'A step back of more than 60 s' shrinks to a step of -60.001 s of n1."""
    plan = shrunk(lambda p: any(isinstance(f, ClockStep) and f.seconds < -60 for f in p.faults))
    assert plan == FaultPlan.of(ClockStep(at=19.999, node="n1", seconds=-60.001))


@settings(max_examples=150, database=None)
@given(plan=fault_plans(["a", "b", "c"], 12.0, start=3.0, max_faults=3, kinds=DRAWABLE_KINDS))
def test_every_drawn_plan_stays_in_its_window_nodes_and_size(plan: FaultPlan) -> None:
    """Every plan has at most 3 faults, each starting at or after 3 s and over by 15 s, on the given nodes only."""
    assert len(plan) <= 3
    assert set(plan.nodes()) <= {"a", "b", "c"}
    for fault in plan.faults:
        assert 3.0 <= fault.at < 15.0
        assert fault.end < 15.0
        if isinstance(fault, ForgedHeartbeat):
            assert fault.fakes == tuple(f"ghost{i}" for i in range(1, len(fault.fakes) + 1))
    assert FaultPlan.from_json(plan.to_json()) == plan


@settings(max_examples=100, database=None)
@given(plan=fault_plans(1, 10.0, kinds=("crash",), wipe=False))
def test_wipe_false_never_wipes(plan: FaultPlan) -> None:
    """With wipe=False no restart comes back with an empty disk."""
    assert all(not f.wipe for f in plan.faults if isinstance(f, Restart))


def test_kinds_limit_what_is_drawn() -> None:
    """A space of pauses and heals draws only Pause and Heal faults (seeds 0..99)."""
    space = PlanSpace.of(2, 30.0, kinds=("pause", "heal"))
    kinds = {type(f) for seed in range(100) for f in space.draw(random.Random(seed)).faults}
    assert kinds == {Pause, Heal}


def test_draw_is_a_function_of_the_random_stream() -> None:
    """The same seed draws the same plan; seeds 0..49 draw at least 30 distinct plans."""
    space = PlanSpace.of(3, 30.0, start=5.0)
    assert space.draw(random.Random(7)) == space.draw(random.Random(7))
    plans = {space.draw(random.Random(seed)).to_json() for seed in range(50)}
    assert len(plans) >= 30


def test_draw_stays_in_the_window() -> None:
    """Plans drawn for seeds 0..199 keep every fault within [5, 35) s and at most 4 faults."""
    space = PlanSpace.of(["x", "y"], 30.0, start=5.0, kinds=DRAWABLE_KINDS)
    for seed in range(200):
        plan = space.draw(random.Random(seed))
        assert len(plan) <= 4
        assert all(5.0 <= f.at and f.end < 35.0 for f in plan.faults), (seed, str(plan))


def test_default_kinds_leave_out_two_node_kinds_for_one_node() -> None:
    """One node: the default kinds are DEFAULT_KINDS without partition and flap; three nodes: all of them."""
    assert PlanSpace.of(1, 10.0).kinds == ("crash", "pause", "clock_step", "clock_drift", "loss", "duplicate", "reorder")
    assert PlanSpace.of(3, 10.0).kinds == DEFAULT_KINDS


def test_kinds_are_kept_in_the_simplicity_order() -> None:
    """Kinds given in any order are kept in DRAWABLE_KINDS' order (so shrinking does not depend on the order given)."""
    assert PlanSpace.of(2, 10.0, kinds=("flap", "crash", "heal")).kinds == ("crash", "flap", "heal")


def test_node_names() -> None:
    """A count names n1..nK; names are kept; bad values are refused with the value in the message."""
    assert node_names(3) == ("n1", "n2", "n3")
    assert node_names(["a", "b"]) == ("a", "b")
    with pytest.raises(ValueError, match="at least 1, got 0"):
        node_names(0)
    with pytest.raises(TypeError, match="got 'n1'"):
        node_names("n1")
    with pytest.raises(ValueError, match="distinct"):
        node_names(["a", "a"])


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"kinds": ("crash", "bogus")}, ValueError, r"unknown or undrawable fault kind\(s\) \['bogus'\]"),
        ({"kinds": ("forged_ref",)}, ValueError, r"\['forged_ref'\]"),
        ({"kinds": ()}, ValueError, "at least one fault kind"),
        ({"duration": 0.5}, ValueError, "at least 1 s, got duration=0.5"),
        ({"duration": float("nan")}, TypeError, "duration must be a finite number"),
        ({"start": -1.0}, ValueError, "start must be >= 0"),
        ({"max_faults": -1}, ValueError, "max_faults must be an int >= 0, got -1"),
        ({"wipe": "no"}, TypeError, "wipe must be a bool"),
    ],
)
def test_bad_arguments_are_refused_by_name(kwargs: dict[str, object], error: type[Exception], message: str) -> None:
    """Each bad argument raises the named error type with a message naming the argument and value."""
    args: dict[str, object] = {"nodes": 2, "duration": 10.0} | kwargs
    with pytest.raises(error, match=message):
        fault_plans(**args)  # type: ignore[arg-type]


def test_partition_kinds_need_two_nodes() -> None:
    """Asking for partitions on one node is a ValueError naming the kinds and the nodes."""
    with pytest.raises(ValueError, match="partition, flap need\\(s\\) at least two nodes; the space has n1"):
        fault_plans(1, 10.0, kinds=("partition", "flap"))


def test_space_of_finds_the_space_of_a_strategy() -> None:
    """space_of gives the PlanSpace a fault_plans strategy was made from, and None for other objects."""
    strategy = fault_plans(2, 10.0, kinds=("flap",), max_faults=2)
    space = space_of(strategy)
    assert space == PlanSpace(("n1", "n2"), 0, 10_000, ("flap",), 2, True)
    assert space_of(st.integers()) is None
    assert space_of(3) is None
    assert all(type(f) is Flap for seed in range(20) for f in space.draw(random.Random(seed)).faults)


def test_sim_testing_imports_without_hypothesis() -> None:
    """With Hypothesis unimportable, sim.testing imports and draws; only building a strategy needs it."""
    code = (
        "import sys, random\n"
        "sys.modules['hypothesis'] = None\n"
        "from sim.testing import PlanSpace, fault_plans\n"
        "print(PlanSpace.of(2, 10.0, kinds=('crash',)).draw(random.Random(1)))\n"
        "try:\n"
        "    fault_plans(2, 10.0)\n"
        "except ImportError as exc:\n"
        "    print(type(exc).__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    expected = str(PlanSpace.of(2, 10.0, kinds=("crash",)).draw(random.Random(1)))
    assert out == [expected, "ModuleNotFoundError"]


@pytest.mark.xfail(
    strict=True,
    reason="fault_plans draws each time and length as one Hypothesis integer, which Hypothesis draws evenly only within about "
    "256 of the end it shrinks toward: 80-92 % of the crashes fall in the window's last third, 10 % of the pauses reach 3 s. "
    "Base-256 digits spread them but the shrinker then stops at local minima (a crash 'before 10 s' shrank to 9.759, "
    "not 9.999); a spread that keeps exact shrinking is open",
)
def test_hypothesis_spreads_fault_times_and_lengths_over_their_ranges() -> None:
    """Generated crashes fall in every third of the window and pauses reach long lengths (Hypothesis' integers crowd near 0)."""
    ats: list[float] = []
    pauses: list[float] = []

    @settings(max_examples=300, database=None, derandomize=True, phases=(Phase.generate,))
    @given(plan=fault_plans(1, duration=30.0, start=0.0, kinds=("crash", "pause")))
    def collect(plan: FaultPlan) -> None:
        ats.extend(f.at for f in plan if isinstance(f, Crash))
        pauses.extend(f.duration for f in plan if isinstance(f, Pause))

    collect()
    thirds = [sum(1 for t in ats if k * 10 <= t < (k + 1) * 10) / len(ats) for k in range(3)]
    assert min(thirds) >= 0.2, thirds  # even: a third each; measured: 0.03-0.1 in each of the first two thirds
    assert sum(1 for d in pauses if d >= 3.0) / len(pauses) >= 0.3  # past a failure detector; measured: 0.1
