"""The pytest plugin (sim.pytest_plugin), run through pytester: seeded items, the world fixture, options, the report."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import hypothesis.strategies  # noqa: F401  (imported here, not in each inner run: see below)
import pytest

import casty.cluster.config  # noqa: F401
import sim.testing  # noqa: F401
import sim.world  # noqa: F401
from sim.faults import FaultPlan
from sim.trace import Trace

try:  # the failure report draws its chart with these (sim.viz loads a chart's module on first use: name them)
    import sim.viz.catchup  # noqa: F401
    import sim.viz.ownership  # noqa: F401
except ImportError:
    pass

pytest_plugins = ["pytester"]
# pytester's in-process runs drop every module first imported inside them: importing Hypothesis (its
# pytest plugin imports it in every run), the world, the plan spaces and the views once here keeps each
# inner run at a tenth of a second instead of seconds.

NO_CACHE = ("-p", "no:cacheprovider")


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(*args, *NO_CACHE)


def section(result: pytest.RunResult) -> dict[str, str]:
    """The lines of the "casty sim" report section, by their label."""
    out = result.stdout.str()
    return {m.group(1): m.group(2) for m in re.finditer(r"^(seed|plan|reproduce|trace|chart): (.*)$", out, re.M)}


def test_one_item_per_seed_with_readable_ids(pytester: pytest.Pytester) -> None:
    """seeds=3 makes test_a[seed=0..2]; a list of seeds makes exactly those items."""
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.sim(seeds=3, nodes=1, faults=None)
        def test_a(world):
            pass

        @pytest.mark.sim(seeds=[5, 9], nodes=1, faults=None)
        def test_b(sim_seed):
            pass
        """
    )
    result = run(pytester, "--collect-only", "-q")
    items = [line for line in result.stdout.lines if "::" in line]
    assert items == [
        "test_one_item_per_seed_with_readable_ids.py::test_a[seed=0]",
        "test_one_item_per_seed_with_readable_ids.py::test_a[seed=1]",
        "test_one_item_per_seed_with_readable_ids.py::test_a[seed=2]",
        "test_one_item_per_seed_with_readable_ids.py::test_b[seed=5]",
        "test_one_item_per_seed_with_readable_ids.py::test_b[seed=9]",
    ]


def test_seed_options_replace_the_markers_seeds(pytester: pytest.Pytester) -> None:
    """--sim-seeds 4:6 runs seeds 4 and 5 of every marked test; --sim-seed 7 runs seed 7 alone; the test sees it."""
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.sim(seeds=100, nodes=1, faults=None)
        def test_a(world, sim_seed):
            assert world.seed == sim_seed
            print(f"ran seed {sim_seed}")
        """
    )
    many = run(pytester, "--sim-seeds", "4:6", "-s", "-q")
    many.assert_outcomes(passed=2)
    assert re.findall(r"ran seed (\d+)", many.stdout.str()) == ["4", "5"]
    one = run(pytester, "--sim-seed", "7", "-s", "-q")
    one.assert_outcomes(passed=1)
    assert re.findall(r"ran seed (\d+)", one.stdout.str()) == ["7"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--sim-seeds", "1:3", "--sim-seed", "2"), "give --sim-seeds A:B or --sim-seed N, not both"),
        (("--sim-seeds", "x:3"), "--sim-seeds: expected A:B or N (integers), got 'x:3'"),
        (("--sim-seeds", "5:5"), "--sim-seeds: '5:5' is empty: A:B runs the seeds A..B-1"),
        (("--sim-plan", '{"faults": [{"kind": "crash"}]}'), "--sim-plan: not a fault plan: Object missing required field `at`"),
    ],
)
def test_bad_options_are_usage_errors(pytester: pytest.Pytester, args: tuple[str, ...], message: str) -> None:
    """A bad option stops pytest with a usage error (exit code 4) whose message names what was wrong."""
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = run(pytester, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()


def test_world_has_the_nodes_the_cluster_and_the_seeds_plan(pytester: pytest.Pytester) -> None:
    """The world fixture: nodes n1..nK up, a cluster seeded by n1 for K > 1 (none for one node), the plan scheduled."""
    pytester.makepyfile(
        """
        import pytest
        from sim.faults import Crash, FaultPlan

        @pytest.mark.sim(seeds=2, nodes=3, faults=None)
        def test_three(world, sim_seed):
            assert world.seed == sim_seed
            assert list(world.nodes) == ["n1", "n2", "n3"]
            assert [n.status for n in world.nodes.values()] == ["up", "up", "up"]
            assert [n.spec.system["cluster"].seeds for n in world.nodes.values()] == [("n1",)] * 3
            assert world.results["plan"] == FaultPlan() and world.given_plan == FaultPlan()

        @pytest.mark.sim(seeds=1, nodes=["a"], faults=None, node_options={"store": "sqlite"})
        def test_one(world):
            assert list(world.nodes) == ["a"]
            assert "cluster" not in world.nodes["a"].spec.system
            assert world.nodes["a"].spec.store == "sqlite"

        @pytest.mark.sim(seeds=[3], nodes=1, faults=("crash",), until=10)
        def test_plan(world):
            plan = world.results["plan"]
            crashes = [f.at for f in plan.faults if isinstance(f, Crash)]
            assert crashes, str(plan)
            world.run(until=10)
            assert [round(r.t, 3) for r in world.trace.of("fault.crash")] == crashes
            assert {type(f).__name__ for f in plan.faults} <= {"Crash", "Restart"}
        """
    )
    run(pytester, "-q").assert_outcomes(passed=4)


def test_a_mix_that_spares_seed_nodes_spares_the_clusters_seed(pytester: pytest.Pytester) -> None:
    """FaultMix(seeds=False) on a three-node cluster never crashes n1, its seed, in 20 seeds; n2 and n3 are crashed."""
    pytester.makepyfile(
        """
        import pytest
        from sim.faults import Crash, FaultMix

        CRASHED = set()

        @pytest.mark.sim(seeds=20, nodes=3, faults=FaultMix(kinds=("crash",), seeds=False), until=20)
        def test_spared(world):
            CRASHED.update(f.node for f in world.results["plan"].faults if isinstance(f, Crash))

        def test_zz_after_all():
            assert CRASHED == {"n2", "n3"}
        """
    )
    run(pytester, "-q").assert_outcomes(passed=21)


def test_faults_take_kinds_a_mix_a_plan_a_strategy_or_a_callable(pytester: pytest.Pytester) -> None:
    """Each form of faults= gives the plan it says: pauses only, the FaultMix's kinds, the fixed plan, the space's draw."""
    pytester.makepyfile(
        """
        import random
        import pytest
        from sim.faults import Crash, FaultMix, FaultPlan, Pause
        from sim.testing import PlanSpace, fault_plans

        PLAN = FaultPlan.of(Crash(at=1.5, node="n2"))
        SPACE = fault_plans(2, 8.0, kinds=("flap",))

        @pytest.mark.sim(seeds=5, nodes=2, faults="pause", until=20)
        def test_kind(world):
            assert {type(f) for f in world.results["plan"].faults} <= {Pause}

        @pytest.mark.sim(seeds=5, nodes=2, faults=FaultMix(kinds=("clock_step",)), until=20)
        def test_mix(world):
            assert {f.kind for f in world.results["plan"].faults} <= {"clock_step"}

        @pytest.mark.sim(seeds=2, nodes=2, faults=PLAN)
        def test_fixed(world):
            assert world.results["plan"] is PLAN

        @pytest.mark.sim(seeds=[4], nodes=2, faults=SPACE)
        def test_space(world):
            expected = PlanSpace.of(2, 8.0, kinds=("flap",)).draw(random.Random("4:pytest:plan"))
            assert world.results["plan"] == expected

        @pytest.mark.sim(seeds=[6], nodes=2, faults=lambda rng, names: FaultPlan.of(Pause(at=rng.randint(1, 9), node=names[-1])))
        def test_callable(world):
            expected = FaultPlan.of(Pause(at=random.Random("6:pytest:plan").randint(1, 9), node="n2"))
            assert world.results["plan"] == expected
        """
    )
    run(pytester, "-q").assert_outcomes(passed=14)


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ("seedz=3", "@pytest.mark.sim: unknown argument(s) seedz; known: seeds, nodes, faults, start, until, cluster, node_options"),
        ("seeds=0", "@pytest.mark.sim: seeds must be at least 1, got 0"),
        ("faults='bogus'", "@pytest.mark.sim: faults names unknown kind(s) ['bogus']"),
        ("faults=__import__('hypothesis').strategies.integers()", "for another Hypothesis strategy use @given"),
        ("until=0", "@pytest.mark.sim: until (0) must be after start (0.0)"),
        ("nodes=0", "@pytest.mark.sim: nodes must be at least 1, got 0"),
        ("nodes=()", "@pytest.mark.sim: nodes must name at least one node, each a non-empty string, got ()"),
        ("nodes='n1'", "@pytest.mark.sim: nodes must be a count or a sequence of node names, got 'n1'"),
        ("nodes=('n1', 'n1')", "@pytest.mark.sim: nodes: node names must be distinct, got ('n1', 'n1')"),
        ("3", "@pytest.mark.sim: takes keyword arguments only (seeds, nodes, faults, start, until, cluster, node_options), got positional (3,)"),
        ("seeds=[1, 2, 1]", "@pytest.mark.sim: seeds repeat 1: each seed is one test item"),
        ("faults=()", "@pytest.mark.sim: faults=() names no fault kind; give faults=None for no faults"),
        (
            "nodes=3, faults=__import__('sim.testing', fromlist=['_']).fault_plans(5, 30)",
            "@pytest.mark.sim: faults= draws its plans on n4, n5, which the test does not have (nodes n1, n2, n3)",
        ),
        (
            "nodes=2, cluster=__import__('casty.cluster.config', fromlist=['_']).Cluster(seeds=['x'])",
            "@pytest.mark.sim: cluster seeds x are not among the test's nodes n1, n2",
        ),
        ("cluster='yes'", "@pytest.mark.sim: cluster must be True, False or a casty Cluster, got 'yes'"),
        ("node_options={'cluster': None}", "give the cluster as cluster=, not in node_options"),
    ],
)
def test_a_bad_marker_fails_collection_with_its_reason(pytester: pytest.Pytester, marker: str, message: str) -> None:
    """A bad @pytest.mark.sim argument is a collection error naming the test and what is wrong."""
    pytester.makepyfile(f"import pytest\n\n@pytest.mark.sim({marker})\ndef test_a(world):\n    pass\n")
    result = run(pytester, "-q")
    result.assert_outcomes(errors=1)
    assert message in result.stdout.str()


def test_a_marked_test_must_take_world_or_sim_seed(pytester: pytest.Pytester) -> None:
    """A marked test with neither fixture is a collection error saying which fixtures it needs."""
    pytester.makepyfile("import pytest\n\n@pytest.mark.sim(seeds=2)\ndef test_a():\n    pass\n")
    result = run(pytester, "-q")
    result.assert_outcomes(errors=1)
    assert "test_a: a @pytest.mark.sim test takes the `world` or the `sim_seed` fixture" in result.stdout.str()


def test_an_unmarked_test_gets_one_world_of_seed_zero_or_the_given_seed(pytester: pytest.Pytester) -> None:
    """Without the marker, `world` is seed 0 (or --sim-seed) with the default three nodes."""
    pytester.makepyfile(
        """
        def test_a(world, sim_seed):
            print(f"seed={world.seed} nodes={list(world.nodes)}")
        """
    )
    assert "seed=0 nodes=['n1', 'n2', 'n3']" in run(pytester, "-s", "-q").stdout.str()
    assert "seed=5 nodes=['n1', 'n2', 'n3']" in run(pytester, "-s", "-q", "--sim-seed", "5").stdout.str()


FAILING = """
import pytest

@pytest.mark.sim(seeds=10, nodes=1, faults=("crash",), until=20)
def test_crash_free(world):
    world.run(until=20)
    assert not world.trace.of("fault.crash"), "a crash happened"
"""


def test_a_failure_reports_seed_plan_reproduce_and_trace(pytester: pytest.Pytester) -> None:
    """A failing seed's report has its seed, plan, reproduce command and trace files; the pasted command fails the same way."""
    pytester.makepyfile(test_fail=FAILING)
    found = run(pytester, "-x")
    found.assert_outcomes(failed=1, passed=found.parseoutcomes().get("passed", 0))
    facts = section(found)
    seed = int(facts["seed"])
    assert re.search(r"^-+ casty sim -+$", found.stdout.str(), re.M)
    assert facts["plan"].startswith("crash(n1)@")
    command = shlex.split(facts["reproduce"])
    assert command[:4] == ["pytest", "test_fail.py::test_crash_free", "--sim-seed", str(seed)]
    assert command[4] == "--sim-plan" and str(FaultPlan.from_json(command[5])) == facts["plan"]
    jsonl = Path(facts["trace"].split(" ")[0])
    assert jsonl.name == f"trace-seed{seed}.jsonl"
    assert jsonl.parent.name == f"test_crash_free_seed_{seed}_0"  # the item's tmp_path
    rows = Trace.from_jsonl(jsonl)
    assert [round(r.t, 3) for r in rows.of("fault.crash")][:1] == [FaultPlan.from_json(command[5]).faults[0].at]
    perfetto = jsonl.with_name(f"trace-seed{seed}.perfetto.json")
    assert json.loads(perfetto.read_text())["traceEvents"]
    assert facts["chart"] == "none (the trace has no owner epochs and no schedule firings)"
    again = run(pytester, *command[1:])
    again.assert_outcomes(failed=1)
    assert section(again)["seed"] == str(seed) and section(again)["plan"] == facts["plan"]
    assert "AssertionError: a crash happened" in again.stdout.str()


def test_the_reproduce_path_is_relative_to_where_pytest_was_started(pytester: pytest.Pytester) -> None:
    """Run from a subdirectory, the reproduce command names the file from there, and works pasted there."""
    sub = pytester.mkpydir("suite")
    (sub / "test_fail.py").write_text(FAILING)
    pytester.makeini("[pytest]\n")  # the rootdir stays above the subdirectory
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(sub)
        found = run(pytester, "test_fail.py", "-x")
        command = shlex.split(section(found)["reproduce"])
        assert command[1] == "test_fail.py::test_crash_free"
        run(pytester, *command[1:]).assert_outcomes(failed=1)
    from_top = run(pytester, "suite/test_fail.py", "-x")
    assert shlex.split(section(from_top)["reproduce"])[1] == "suite/test_fail.py::test_crash_free"


def test_a_test_parametrized_beyond_the_seed_keeps_its_full_id(pytester: pytest.Pytester) -> None:
    """With another parameter, the reproduce command names the whole item id (quoted), which selects only it."""
    pytester.makepyfile(
        test_param="""
        import pytest

        @pytest.mark.parametrize("n", [1, 2])
        @pytest.mark.sim(seeds=1, nodes=1, faults=None)
        def test_p(world, n):
            assert n == 1
        """
    )
    found = run(pytester)
    found.assert_outcomes(passed=1, failed=1)
    line = section(found)["reproduce"]
    assert line == "pytest 'test_param.py::test_p[seed=0-2]' --sim-seed 0"
    run(pytester, *shlex.split(line)[1:]).assert_outcomes(failed=1)


def test_sim_plan_replays_the_given_plan(pytester: pytest.Pytester) -> None:
    """--sim-plan JSON replaces every seed's drawn plan with exactly that one."""
    plan = FaultPlan.from_json('{"faults":[{"kind":"pause","at":2.0,"node":"n1","duration":1.5}]}')
    pytester.makepyfile(
        f"""
        import pytest
        from sim.faults import FaultPlan

        @pytest.mark.sim(seeds=3, nodes=1, faults=("crash",))
        def test_a(world):
            assert world.results["plan"] == FaultPlan.from_json({plan.to_json()!r})
            world.run(until=4)
            assert [(round(r.t, 3), r.kind) for r in world.trace.of("fault.")] == [(2.0, "fault.pause"), (3.5, "fault.resume")]
        """
    )
    run(pytester, "-q", "--sim-plan", plan.to_json()).assert_outcomes(passed=3)


def test_a_failure_with_a_schedule_draws_the_catch_up_chart(pytester: pytest.Pytester) -> None:
    """With schedule firings and matplotlib, the report names a catch-up chart PNG: one per test (its first failing seed), a lone seed draws its own."""
    pytest.importorskip("matplotlib")
    pytester.makepyfile(
        test_chart="""
        from dataclasses import dataclass
        from datetime import timedelta
        import pytest
        from casty import Askable, Context, actor

        @dataclass(frozen=True)
        class Start(Askable[None]):
            pass

        @dataclass(frozen=True)
        class Tick:
            pass

        @actor(initial=0)
        async def ticker(ctx: Context[int, Start | Tick]) -> None:
            async for msg in ctx.inbox:
                if isinstance(msg, Start):
                    await ctx.schedule("t", timedelta(seconds=1), timedelta(seconds=1), Tick())
                    msg.reply_to.tell(None)

        @pytest.mark.sim(seeds=1, nodes=1, faults=None)
        def test_ticks(world):
            async def start(system):
                await system.ref(ticker, "k").ask(Start())
            world.spawn("n1", start)
            world.run(until=5)
            assert False, "look at the chart"
        """
    )
    found = run(pytester)
    found.assert_outcomes(failed=1)
    chart = Path(section(found)["chart"])
    assert chart.name == "catchup-seed0.png"
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    many = run(pytester, "--sim-seeds", "0:3")  # the same test failing on three seeds: one chart (a second each), for seed 0
    many.assert_outcomes(failed=3)
    charts = re.findall(r"^chart: (.*)$", many.stdout.str(), re.M)
    assert len(charts) == 3 and charts[0].endswith("catchup-seed0.png")
    assert charts[1:] == ["not drawn (one per test, drawn for seed 0; this seed's reproduce line draws its own)"] * 2
    again = run(pytester, "--sim-seed", "2")  # a reproduce line: that seed alone draws its chart
    assert Path(section(again)["chart"]).name == "catchup-seed2.png"


# ============================================================ a new user's bad input (issue 11) ======


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ("nodes=1, faults='partition'", "@pytest.mark.sim: faults partition need(s) at least two nodes; the test has n1"),
        ("nodes=1, faults=('crash', 'flap')", "@pytest.mark.sim: faults flap need(s) at least two nodes; the test has n1"),
        ("faults='forged_ref'", "@pytest.mark.sim: faults forged_ref need(s) an actor, key and message"),
    ],
)
def test_a_fault_kind_the_marker_cannot_draw_is_refused(pytester: pytest.Pytester, marker: str, message: str) -> None:
    """A kind that can never be drawn for the marker's nodes is a collection error, not a run with no faults."""
    pytester.makepyfile(f"import pytest\n\n@pytest.mark.sim({marker})\ndef test_a(world):\n    pass\n")
    result = run(pytester, "-q")
    result.assert_outcomes(errors=1)
    assert message in result.stdout.str()


def test_a_bad_marker_error_shows_its_reason_once(pytester: pytest.Pytester) -> None:
    """A bad marker's collection error is its one message, not a chained 'During handling of the above exception'."""
    pytester.makepyfile("import pytest\n\n@pytest.mark.sim(nodez=3)\ndef test_a(world):\n    pass\n")
    result = run(pytester, "-q")
    result.assert_outcomes(errors=1)
    out = result.stdout.str()
    assert "During handling of the above exception" not in out
    errors = out.split("short test summary info")[0]  # the summary line repeats it, cut or not by the terminal's width
    assert errors.count("unknown argument(s) nodez") == 1


def test_an_unknown_node_option_is_named_at_collection(pytester: pytest.Pytester) -> None:
    """node_options with a keyword World.add_node does not take is a collection error naming it, not a TypeError per seed."""
    pytester.makepyfile("import pytest\n\n@pytest.mark.sim(seeds=2, node_options={'stor': 'sqlite'})\ndef test_a(world):\n    pass\n")
    result = run(pytester, "-q")
    result.assert_outcomes(errors=1)
    out = result.stdout.str()
    assert "@pytest.mark.sim: node_options: unknown keyword(s) stor for World.add_node" in out
    assert "ActorSystem.__init__() got an unexpected keyword" not in out
    assert "it takes ask_timeout, backoff, clock_noise_us, drift_ppm, fsync, idle_after, leave_timeout, offset, start, store, timezone, write_timeout" in out


def test_a_node_option_the_world_sets_itself_is_refused(pytester: pytest.Pytester) -> None:
    """node_options={'rng': ...} (the world gives each node its own clock, rng, observer, name, transport) is a collection error."""
    pytester.makepyfile("import pytest\n\n@pytest.mark.sim(seeds=2, node_options={'rng': None})\ndef test_a(world):\n    pass\n")
    result = run(pytester, "-q")
    result.assert_outcomes(errors=1)
    assert "@pytest.mark.sim: node_options: unknown keyword(s) rng for World.add_node" in result.stdout.str()


def test_a_sim_plan_naming_a_missing_node_fails_with_a_short_reason(pytester: pytest.Pytester) -> None:
    """--sim-plan naming a node the test does not have fails the test's setup with that reason, not a traceback through the plugin."""
    pytester.makepyfile("import pytest\n\n@pytest.mark.sim(seeds=1, nodes=1)\ndef test_a(world):\n    pass\n")
    plan = '{"faults":[{"kind":"crash","at":1,"node":"n7"}]}'
    result = run(pytester, "-q", "--sim-plan", plan)
    result.assert_outcomes(errors=1)
    out = result.stdout.str()
    assert "--sim-plan: the plan names node(s) n7; the world has n1" in out
    assert "spec.build(" not in out


@pytest.mark.parametrize(
    ("seeds", "message"),
    [
        ("5:2", "--sim-seeds: '5:2' is empty: A:B runs the seeds A..B-1, so B must be greater than A"),
        ("-3:2", "--sim-seeds: seeds are >= 0, got '-3:2'"),
    ],
)
def test_an_empty_or_negative_seed_range_says_which(pytester: pytest.Pytester, seeds: str, message: str) -> None:
    """--sim-seeds 5:2 is called empty (not 'names no seed >= 0'), a negative range is called negative."""
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = run(pytester, f"--sim-seeds={seeds}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()


def test_the_world_fixture_keeps_no_finished_world_alive(pytester: pytest.Pytester) -> None:
    """After three seeded tests of a 3-node world ran and gc.collect(), none of their worlds is alive (a pass and a fail alike)."""
    pytester.makepyfile(
        """
        import gc
        import sys
        import weakref
        import pytest

        SEEN = []

        @pytest.mark.sim(seeds=3, nodes=3, faults=None, until=5)
        def test_runs(world, sim_seed):
            world.run(until=5)
            SEEN.append(weakref.ref(world))
            assert sim_seed != 1

        def test_zz_after():
            for name in ("last_type", "last_value", "last_traceback", "last_exc"):
                sys.__dict__.pop(name, None)  # pytest's own post-mortem copy of the last failure's frames: not ours
            gc.collect()
            assert [ref() is None for ref in SEEN] == [True, True, True]
        """
    )
    # in a subprocess: an in-process pytester run records every hook call, the failing call's traceback (and world) too
    pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider").assert_outcomes(passed=3, failed=1)
