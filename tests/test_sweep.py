"""Sweeps anywhere: a user's scenario found by module path in spawned and Dask workers, and reproduce lines that work.

The scenario is ``test-billing`` of ``tests/sweep_app.py`` (charge before save, one seeded
crash): some seeds charge a period twice. Every executor must give exactly the results of
the in-process sweep, seed for seed (failures, digests, row counts).
"""

from __future__ import annotations

import gc
import io
import re
import shlex
import subprocess
import sys
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from datetime import timedelta
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import pytest

from sim import scenarios
from sim.__main__ import main as cli
from sim.sweep import ScenarioRef, SeedResult, load, reference, run_seed, sweep
from sim.world import World
from tests import sweep_app
from tests.sweep_app import billing

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "tests" / "sweep_app.py"
SEEDS = range(8)


@pytest.fixture(scope="module")
def here() -> list[SeedResult]:
    """The in-process sweep of seeds 0..7: what every other executor must reproduce."""
    return sweep(billing, SEEDS)


@pytest.fixture(scope="module")
def spawn_pool() -> Iterator[ProcessPoolExecutor]:
    """Two workers started with `spawn` (macOS's and Windows' default): each begins with an empty scenario registry."""
    with ProcessPoolExecutor(max_workers=2, mp_context=get_context("spawn")) as pool:
        yield pool


def test_the_in_process_sweep_has_failing_and_passing_seeds(here: list[SeedResult]) -> None:
    """A seed fails exactly when its crash falls in the half second between a charge and its save: seeds 3 and 5 of 0..7."""
    crash_at = {seed: World(seed).rng("n1", "faults").uniform(1.0, 6.0) for seed in SEEDS}  # as the scenario draws it
    assert [r.seed for r in here if not r.ok] == [s for s in SEEDS if crash_at[s] % 1 < sweep_app.BANK_SECONDS] == [3, 5]
    assert here[3].failures == (
        "exactly_once: charge:acme:2 happened 2 times (want exactly 1): n1 at 2.0009 s by biller[acme], n1 at 3.344061 s by biller[acme]",
    )
    assert all(r.error is None and r.rows > 0 for r in here)


def test_a_user_scenario_is_referenced_by_its_module_and_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """From the repo root the reference is `tests.sweep_app:test-billing`; from elsewhere the file's absolute path; the same for every form."""
    monkeypatch.chdir(ROOT)
    expected = ScenarioRef("test-billing", "tests.sweep_app", str(APP), "tests.sweep_app:test-billing")
    forms: list[str | scenarios.Scenario | Callable[[World], None]] = [billing, scenarios.get("test-billing"), "test-billing", "tests.sweep_app:test-billing", "tests.sweep_app:billing", "tests/sweep_app.py:billing"]
    assert [reference(form) for form in forms] == [expected] * len(forms)
    monkeypatch.chdir(tmp_path)
    assert reference(billing).spec == f"{APP}:test-billing"
    assert reference("ticker") == ScenarioRef("ticker", spec="ticker")


def test_bad_references_are_clear_errors() -> None:
    """An unknown name in a module, a missing file, a function that no scenario uses and a non-executor each say what was wrong."""
    with pytest.raises(KeyError) as caught:
        load("tests.sweep_app:nothing")
    assert caught.value.args[0] == "module 'tests.sweep_app' registers no scenario 'nothing'; it registers: test-billing"
    with pytest.raises(KeyError) as caught:
        load("tests/no_such_file.py:x")
    assert caught.value.args[0] == "no file 'tests/no_such_file.py'"
    with pytest.raises(ModuleNotFoundError):
        load("tests.no_such_module:x")
    with pytest.raises(ValueError) as error:
        reference(sweep_app._charged_once)  # a function, but not a scenario's setup
    assert str(error.value) == "'_charged_once' is not a registered scenario's setup: decorate it with @sim.scenario"
    with pytest.raises(TypeError) as wrong:
        sweep(billing, SEEDS, executor=object())
    assert str(wrong.value) == "executor must be a concurrent.futures.Executor or a distributed.Client, not object"


def test_a_spawn_pool_finds_the_user_scenario_by_module_path(here: list[SeedResult], spawn_pool: ProcessPoolExecutor) -> None:
    """ProcessPoolExecutor(mp_context=spawn): every seed's result equals the in-process one (workers import tests.sweep_app)."""
    assert sweep(billing, SEEDS, executor=spawn_pool) == here


def test_a_scenario_defined_inside_a_function_runs_here_and_is_a_clear_error_in_a_spawned_worker(spawn_pool: ProcessPoolExecutor) -> None:
    """A setup defined in a test runs in process and in threads; a spawned worker reports that no import can register it."""
    name = "test-only-local"

    def setup(world: World) -> None:
        world.add_node("n1")

    scenarios.SCENARIOS[name] = scenarios.Scenario(name, "local", setup, timedelta(seconds=1))
    try:
        here = sweep(name, range(2))
        with ThreadPoolExecutor(2) as threads:
            assert sweep(name, range(2), executor=threads) == here
        (far,) = sweep(name, range(1), executor=spawn_pool)
    finally:
        del scenarios.SCENARIOS[name]
    assert [r.ok for r in here] == [True, True]
    assert far.error == (
        "KeyError: \"scenario 'test-only-local' is not known in this worker: its setup is defined inside a function (or it was "
        'registered by hand), so no import registers it; define the setup at module level with @sim.scenario"'
    )


def test_the_printed_reproduce_line_works_when_pasted(here: list[SeedResult]) -> None:
    """`python -m sim run tests.sweep_app:test-billing --seed 3 --check`, run as printed from the repo root: exit 1 with the same failure."""
    failing = here[3]
    assert failing.reproduce == "python -m sim run tests.sweep_app:test-billing --seed 3 --check"
    for line in (failing.reproduce, f"python -m sim run {shlex.quote(str(APP))}:test-billing --seed 3 --check"):
        argv = shlex.split(line)
        done = subprocess.run([sys.executable, *argv[1:]], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert done.returncode == 1, done.stderr
        assert done.stderr.splitlines()[:2] == [f"CHECK FAILED {failing.failures[0]}", f"reproduce: {line}"]


def test_cli_sweep_of_a_user_scenario_prints_each_violation_with_its_reproduce_line(capsys: pytest.CaptureFixture[str]) -> None:
    """`python -m sim sweep tests.sweep_app:test-billing --seeds 2:6 --workers 1`: seeds 3 and 5 with their lines, then violations=2."""
    assert cli(["sweep", "tests.sweep_app:test-billing", "--seeds", "2:6", "--workers", "1"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert [line for line in out if line.startswith("  reproduce:")] == [
        "  reproduce: python -m sim run tests.sweep_app:test-billing --seed 3 --check",
        "  reproduce: python -m sim run tests.sweep_app:test-billing --seed 5 --check",
    ]
    assert out[-1] == "violations=2" and out[-2].startswith("scenario=tests.sweep_app:test-billing seeds=4 ok=2 in ")


def test_cli_refuses_a_module_that_cannot_be_imported(capsys: pytest.CaptureFixture[str]) -> None:
    """`run`/`sweep` with a module nobody can import exit 2 naming it."""
    assert cli(["run", "no_such_pkg.mod:x"]) == 2
    assert capsys.readouterr().err == "cannot import the scenario's module: No module named 'no_such_pkg'\n"
    assert cli(["sweep", "tests.sweep_app:nothing", "--seeds", "0:2"]) == 2
    assert capsys.readouterr().err == "module 'tests.sweep_app' registers no scenario 'nothing'; it registers: test-billing\n"


def test_a_dask_local_cluster_gives_the_in_process_results(here: list[SeedResult], capsys: pytest.CaptureFixture[str]) -> None:
    """LocalCluster(n_workers=2, processes=True): a Client, its executor and `--dask ADDRESS` each give the in-process results."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            assert sweep(billing, SEEDS, executor=client) == here
            assert sweep(billing, range(2), executor=client.get_executor()) == here[:2]
        assert cli(["sweep", "tests.sweep_app:test-billing", "--seeds", "0:8", "--dask", cluster.scheduler_address]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "violations=2" and "  reproduce: python -m sim run tests.sweep_app:test-billing --seed 5 --check" in out


class _Terminal(io.StringIO):
    """A stream that says it is a terminal: where a progress bar is drawn."""

    def isatty(self) -> bool:
        return True


def test_a_sweep_draws_a_bar_on_a_terminal_only_and_not_when_asked(monkeypatch: pytest.MonkeyPatch, here: list[SeedResult]) -> None:
    """On a TTY the bar ends showing the scenario, 8/8 and violations=2; off a TTY or with progress=False nothing is written."""
    pytest.importorskip("tqdm")
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert sweep(billing, SEEDS) == here
    last = terminal.getvalue().split("\r")[-1]  # the state the bar is left in
    assert last.startswith("tests.sweep_app:test-billing: 100%|") and " 8/8 " in last and last.endswith(", violations=2]\n")
    quiet = _Terminal()
    monkeypatch.setattr(sys, "stderr", quiet)
    assert sweep(billing, range(2), progress=False) == here[:2]
    piped = io.StringIO()
    monkeypatch.setattr(sys, "stderr", piped)
    assert sweep(billing, range(2)) == here[:2]
    assert (quiet.getvalue(), piped.getvalue()) == ("", "")


def test_a_run_with_a_bar_has_the_same_trace_as_one_without(monkeypatch: pytest.MonkeyPatch) -> None:
    """world.run(until=10, progress=True) draws a bar of simulated seconds on a TTY and gives the digest of a run without it."""
    pytest.importorskip("tqdm")
    digests = []
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    for progress in (False, True):
        world = World(3)
        billing(world)
        world.run(until=10, progress=progress)
        world.close()
        digests.append(world.trace.digest())
    assert digests[0] == digests[1] == run_seed("test-billing", 3).digest
    drawn = terminal.getvalue()  # tqdm redraws at most every 0.1 s: a run this short shows its start, then clears the line
    assert drawn.startswith("\rsimulating:   0%|") and "0.0/10.0 simulated s" in drawn


SCRIPT = '''
from concurrent.futures import ProcessPoolExecutor
from datetime import timedelta
from multiprocessing import get_context

from sim.checks import CheckFailed
from sim.scenarios import scenario
from sim.sweep import report, sweep


def odd_fails(world):
    if world.seed % 2:
        raise CheckFailed("odd", f"seed {world.seed} is odd")


@scenario("script-odd", "fails on odd seeds", until=timedelta(seconds=1), checks=(odd_fails,))
def script_odd(world):
    world.add_node("n1")


if __name__ == "__main__":
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:  # one spawned worker re-runs this file as __mp_main__
        results = sweep(script_odd, range(4), executor=pool)
    print("\\n".join(report("script-odd", results, 1.0)))
'''


def test_a_script_sweeping_its_own_scenario_in_spawn_workers_prints_reproduce_lines_that_work(tmp_path: Path) -> None:
    """A user's script (its scenario in __main__) sweeps on a spawn pool; the printed `python -m sim run myscript.py:...` line works from its folder."""
    (tmp_path / "myscript.py").write_text(SCRIPT)
    done = subprocess.run([sys.executable, "myscript.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "seed 1: odd: seed 1 is odd",
        "  reproduce: python -m sim run myscript.py:script-odd --seed 1 --check",
        "seed 3: odd: seed 3 is odd",
        "  reproduce: python -m sim run myscript.py:script-odd --seed 3 --check",
        "scenario=script-odd seeds=4 ok=2 in 1.0 s (4.00 seeds/s)",
        "violations=2",
    ]
    again = subprocess.run([sys.executable, *shlex.split(done.stdout.splitlines()[1].split(": ", 1)[1])[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert again.returncode == 1
    assert again.stderr.splitlines() == ["CHECK FAILED odd: seed 1 is odd", "reproduce: python -m sim run myscript.py:script-odd --seed 1 --check"]


def test_a_notebook_scenarios_reproduce_line_is_a_call_that_works_in_its_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """A scenario defined in a notebook (__main__ without a file) prints a sim.scenarios.run call, not `python -m sim run __main__:...`."""
    import sim
    from sim.checks import CheckFailed
    from sim.faults import Crash, FaultPlan

    monkeypatch.delattr(sys.modules["__main__"], "__file__", raising=False)
    name = "test-notebook-odd"

    def odd(world: World) -> None:
        if world.seed % 2:
            raise CheckFailed("odd", f"seed {world.seed} is odd")

    def setup(world: World) -> None:
        world.add_node("n1")
        world.results["plan"] = plan = world.given_plan or FaultPlan.of(Crash(at=0.5, node="n1"))
        plan.apply(world)

    setup.__module__, setup.__qualname__ = "__main__", "setup"  # as a notebook cell defines it
    monkeypatch.setitem(scenarios.SCENARIOS, name, scenarios.Scenario(name, "a cell", setup, timedelta(seconds=1), (odd,), ("fault-plan",)))
    ref = reference(name)
    assert (ref.local, str(ref)) == (True, name)
    (failing,) = sweep(name, [1], progress=False)
    assert failing.reproduce == "sim.scenarios.run('test-notebook-odd', 1)  # in the session that defines it"
    assert failing.replay == (
        "sim.scenarios.run('test-notebook-odd', 1, plan=sim.FaultPlan.from_json("
        "'{\"faults\":[{\"kind\":\"crash\",\"at\":0.5,\"node\":\"n1\"}]}'))  # in the session that defines it"
    )
    for line in (failing.reproduce, failing.replay):
        again = eval(line.partition("  #")[0], {"sim": sim})  # what a user pastes into the next cell
        assert [str(f) for f in again.failures] == ["odd: seed 1 is odd"]


def test_a_scenario_that_takes_no_plan_prints_no_replay_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A user scenario that records its plan but is not tagged "fault-plan" gets no --plan replay line (run --plan refuses it)."""
    from sim.checks import CheckFailed

    name = "test-untagged-plan"

    def always(world: World) -> None:
        raise CheckFailed("always", "fails")

    monkeypatch.setitem(scenarios.SCENARIOS, name, scenarios.Scenario(name, "records a plan", _records_a_plan, timedelta(seconds=1), (always,)))
    (failing,) = sweep(name, [0], progress=False)
    assert (failing.plan, failing.replay) == ("crash(n1)@0.50", None)
    assert cli(["run", name, "--seed", "0", "--check"]) == 1
    assert capsys.readouterr().err.splitlines() == ["CHECK FAILED always: fails", f"reproduce: python -m sim run {name} --seed 0 --check"]


def _records_a_plan(world: World) -> None:
    from sim.faults import Crash, FaultPlan

    world.add_node("n1")
    world.results["plan"] = plan = FaultPlan.of(Crash(at=0.5, node="n1"))
    plan.apply(world)


def _watched(monkeypatch: pytest.MonkeyPatch) -> list[weakref.ref[World]]:
    """Weak references to every world ``scenarios.run`` builds from now on (the run a sweep's ``run_seed`` calls)."""
    watched: list[weakref.ref[World]] = []
    real = scenarios.run

    def run(name: str, seed: int = 0, **options: Any) -> scenarios.Run:
        given = options.pop("on_world", None)

        def seen(world: World) -> None:
            watched.append(weakref.ref(world))
            if given is not None:
                given(world)

        return real(name, seed, on_world=seen, **options)

    monkeypatch.setattr(scenarios, "run", run)
    return watched


def test_an_in_process_sweep_leaves_no_finished_world_alive(monkeypatch: pytest.MonkeyPatch) -> None:
    """After a 5-seed in-process sweep of a 3-node cluster and gc.collect(), no world is alive; one the caller holds stays."""
    watched = _watched(monkeypatch)
    results = sweep("ownership-repeat", range(5), progress=False)
    held = scenarios.run("ownership-repeat", 5)
    gc.collect()
    assert [r.ok for r in results] == [True] * 5
    assert [ref() is None for ref in watched] == [True] * 5 + [False]
    assert watched[5]() is held.world


def test_an_in_process_sweep_keeps_no_memory_per_seed() -> None:
    """20 more seeds of a 3-node cluster leave under 500 allocated blocks a seed (a kept world is about 13 000)."""
    for seed in range(3):  # first runs fill caches (codecs, lru caches) once
        run_seed("ownership-repeat", seed)
    gc.collect()
    before = sys.getallocatedblocks()
    for seed in range(3, 23):
        assert run_seed("ownership-repeat", seed).ok
    gc.collect()
    assert (sys.getallocatedblocks() - before) / 20 < 500


@pytest.mark.parametrize(
    ("elapsed", "figure"),
    [
        (0.0123, "in 12.3 ms (325.20 seeds/s)"),
        (0.0004, "in 0.4 ms (10000.00 seeds/s)"),
        (0.5, "in 500 ms (8.00 seeds/s)"),
        (0.99996, "in 1000 ms (4.00 seeds/s)"),
        (1.0, "in 1.0 s (4.00 seeds/s)"),
        (83.25, "in 83.2 s (0.05 seeds/s)"),
        (0.0, "in 0 ms (too fast to time)"),
    ],
)
def test_the_sweep_line_gives_a_short_sweep_its_time_in_ms(elapsed: float, figure: str) -> None:
    """A sweep under 1 s prints its wall time in ms (not '0.0 s'); a rate is printed only when there was time to divide by."""
    from sim.sweep import report

    results = [SeedResult("single", seed, (), "d", 1) for seed in range(4)]
    assert report("single", results, elapsed)[-2] == f"scenario=single seeds=4 ok=4 {figure}"


def test_the_sweep_cli_prints_a_fast_sweeps_time_in_ms(capsys: pytest.CaptureFixture[str]) -> None:
    """`python -m sim sweep` of two quick seeds prints 'in N ms' (it printed 'in 0.0 s')."""
    assert cli(["sweep", "ticker", "--seeds", "0:2", "--workers", "1", "--no-progress"]) == 0
    line = capsys.readouterr().out.splitlines()[-2]
    assert re.fullmatch(r"scenario=\S+ seeds=2 ok=2 in \d+(\.\d+)? (ms|s) \(\d+\.\d\d seeds/s\)", line), line
    assert " in 0.0 s " not in line
