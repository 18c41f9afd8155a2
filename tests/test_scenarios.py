"""Every built-in scenario holds its checks, deterministically; the CLI's names and outputs are stable."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from typing import Any

import pytest

from sim import scenarios
from sim.__main__ import main as cli
from sim.checks import CheckFailed
from sim.world import World

NAMES = list(scenarios.registered())


@pytest.mark.parametrize("name", NAMES)
def test_scenario_checks_hold(name: str) -> None:
    """The scenario's checks (what the seeds say happens) all hold with seed 0."""
    result = scenarios.run(name, seed=0)
    assert result.failures == []
    assert len(result.trace) > 0


@pytest.mark.parametrize("name", ["pause-catch-up", "durable-restart", "daily-report"])
def test_same_seed_same_digest(name: str) -> None:
    """Two runs of a scenario with the same seed produce identical traces."""
    assert scenarios.run(name, 3).trace.digest() == scenarios.run(name, 3).trace.digest()


def test_digest_is_independent_of_hash_seed_and_process() -> None:
    """Two processes with different PYTHONHASHSEED print the same digest for the same scenario and seed."""
    digests = []
    for hash_seed in ("0", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        out = subprocess.run(
            [sys.executable, "-m", "sim", "run", "durable-restart", "--seed", "7", "--digest"],
            capture_output=True, text=True, env=env, check=True, timeout=300,
        )
        digests.append(out.stdout.strip().splitlines()[-1])
    assert digests[0] == digests[1]
    assert digests[0].startswith("digest=") and len(digests[0]) == len("digest=") + 64


def test_cli_list_prints_every_scenario_with_a_description(capsys: pytest.CaptureFixture[str]) -> None:
    """`python -m sim list` prints one line per registered scenario (built-ins first, in order), name then description."""
    assert cli(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = [line.split()[0] for line in lines]
    assert names == list(scenarios.registered())  # also a user's, e.g. one a test module registered
    assert names[: len(NAMES)] == NAMES
    assert all(len(line.split(maxsplit=1)[1]) > 20 for line in lines)


def test_cli_run_writes_exports_and_digest_last(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    """`run --jsonl --perfetto --digest --check` writes both files, passes its checks and ends with digest=<hex>."""
    from pathlib import Path

    folder = Path(str(tmp_path))
    code = cli(["run", "ticker", "--seed", "1", "--jsonl", str(folder / "t.jsonl"), "--perfetto", str(folder / "t.json"), "--digest", "--check"])
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    assert out[-1].startswith("digest=")
    assert (folder / "t.jsonl").stat().st_size > 0 and (folder / "t.json").stat().st_size > 0


def test_cli_check_failure_exits_nonzero_with_reproduce_line(capsys: pytest.CaptureFixture[str]) -> None:
    """A scenario whose check fails makes `run --check` exit 1 and print the command that reproduces it."""

    def always_fails(world: World) -> None:
        raise CheckFailed("always_fails", "this check is meant to fail")

    name = "test-only-failing"
    scenarios.SCENARIOS[name] = scenarios.Scenario(name, "a scenario whose check fails", lambda w: None, timedelta(seconds=1), (always_fails,))
    try:
        assert cli(["run", name, "--seed", "4", "--check"]) == 1
        err = capsys.readouterr().err
        assert "always_fails: this check is meant to fail" in err
        assert f"python -m sim run {name} --seed 4 --check" in err
    finally:
        del scenarios.SCENARIOS[name]


def test_cli_unknown_scenario_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown name exits 2 and lists the scenarios that exist."""
    assert cli(["run", "no-such-thing"]) == 2
    assert "ticker" in capsys.readouterr().err


def test_sweep_runs_seeds_in_processes_and_ends_with_violations_zero(capsys: pytest.CaptureFixture[str]) -> None:
    """`sweep NAME --seeds 0:6 --workers 2` runs every seed with its checks and prints violations=0 last."""
    assert cli(["sweep", "clock-step", "--seeds", "0:6", "--workers", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "violations=0"
    assert "seeds=6 ok=6" in out[-2]


def test_sweep_reports_each_violation_with_the_command_that_reproduces_it() -> None:
    """A failing seed is reported with the call that reproduces it (a scenario set up inside a function: the session call)."""
    from sim.sweep import report, sweep

    def odd_seeds_fail(world: World) -> None:
        if world.seed % 2:
            raise CheckFailed("odd", f"seed {world.seed} is odd")

    name = "test-only-odd"
    scenarios.SCENARIOS[name] = scenarios.Scenario(name, "fails on odd seeds", lambda w: None, timedelta(seconds=1), (odd_seeds_fail,))
    try:
        results = sweep(name, range(4), workers=1)
    finally:
        del scenarios.SCENARIOS[name]
    lines = report(name, results, 0.0)
    assert lines[-1] == "violations=2"
    assert f"  reproduce: sim.scenarios.run({name!r}, 1)  # in the session that defines it" in lines
    assert "seed 3: odd: seed 3 is odd" in lines


def test_a_late_acquisition_row_is_skipped_by_the_ordering_checks() -> None:
    """A paused node's epoch.acquired row recorded after a newer owner's (which found its write-back) is proven late and skipped; without the resume it is a violation."""
    from types import SimpleNamespace

    from sim.checks import _late_acquisitions, epochs_only_grow
    from sim.trace import Trace

    def world_with(resume: bool) -> Any:
        trace = Trace()
        acquired = {"actor": "m:counter", "key": "c1", "epoch_node": "", "found": 0}
        trace.add(1_000_000_000, "n1", None, "fault.pause", {})
        trace.add(2_000_000_000, "n3", None, "epoch.acquired", {**acquired, "epoch_round": 6, "epoch_node": "n3#1", "version": 4, "found": 3})
        if resume:
            trace.add(3_000_000_000, "n1", None, "fault.resume", {})
        trace.add(3_000_100_000, "n1", None, "epoch.acquired", {**acquired, "epoch_round": 5, "epoch_node": "n1#1", "version": 3, "found": 2})
        return SimpleNamespace(trace=trace)

    late_world = world_with(resume=True)
    assert [late_world.trace.rows[i].get("epoch_round") for i in _late_acquisitions(late_world)] == [5]
    epochs_only_grow(late_world)
    with pytest.raises(CheckFailed):
        epochs_only_grow(world_with(resume=False))


_CELL = '''
@scenario("test-notebook-cell", "a scenario defined in a notebook cell", until=timedelta(seconds=1))
def cell_setup(world):
    world.add_node("n1")
'''


def _run_cell() -> Any:
    """Execute _CELL as a notebook or REPL does: in a namespace named __main__; returns the setup it defined."""
    namespace: dict[str, Any] = {"__name__": "__main__", "scenario": scenarios.scenario, "timedelta": timedelta}
    exec(compile(_CELL, "<cell>", "exec"), namespace)
    return namespace["cell_setup"]


def test_a_notebook_cell_run_again_replaces_its_scenario(monkeypatch: pytest.MonkeyPatch) -> None:
    """In an interactive session (a __main__ with no file) running a cell that registers a scenario again replaces it."""
    import types

    monkeypatch.setitem(sys.modules, "__main__", types.ModuleType("__main__"))  # a notebook kernel's __main__ has no __file__
    try:
        first = _run_cell()
        second = _run_cell()
        assert first is not second
        assert scenarios.registered()["test-notebook-cell"].setup is second
        assert scenarios.run("test-notebook-cell", seed=0).ok
    finally:
        scenarios.SCENARIOS.pop("test-notebook-cell", None)


def test_a_scenario_name_used_twice_by_a_script_is_refused() -> None:
    """Outside an interactive session (here pytest's __main__, which has a file) a second definition of a name is a ValueError."""
    assert getattr(sys.modules["__main__"], "__file__", None)
    try:
        _run_cell()
        with pytest.raises(ValueError, match="scenario 'test-notebook-cell' is defined twice"):
            _run_cell()
    finally:
        scenarios.SCENARIOS.pop("test-notebook-cell", None)


def test_a_setup_that_raises_leaves_no_node_running() -> None:
    """A scenario whose setup raises after adding a node: run() re-raises and the world it built is closed (node down)."""
    built: list[Any] = []

    def setup(world: Any) -> None:
        world.add_node("n1")
        built.append(world)
        raise RuntimeError("bad setup")

    name = "test-setup-raises"
    scenarios.SCENARIOS[name] = scenarios.Scenario(name, "setup raises", setup, timedelta(seconds=1), ())
    try:
        with pytest.raises(RuntimeError, match="bad setup"):
            scenarios.run(name, 0)
    finally:
        del scenarios.SCENARIOS[name]
    assert [node.status for node in built[0].nodes.values()] == ["down"]


# ============================================================ daily-report: the effects ledger ======


def test_daily_report_records_each_built_report_as_an_effect() -> None:
    """daily-report seed 0: every built report is one `effect` row keyed report:<key>:<date>; save-first omits Jan 03, build-first builds it twice."""
    result = scenarios.run("daily-report", seed=0)
    assert result.failures == []
    built = [(row.node, row.get("effect"), row.get("details")) for row in result.trace.of("effect")]
    assert "report.built" not in result.trace.counts
    assert sorted(built, key=lambda b: (b[0], b[1])) == [
        ("build", "report:build-first:2026-01-01", {"day": 20454}),
        ("build", "report:build-first:2026-01-02", {"day": 20455}),
        ("build", "report:build-first:2026-01-03", {"day": 20456}),
        ("build", "report:build-first:2026-01-03", {"day": 20456}),
        ("build", "report:build-first:2026-01-04", {"day": 20457}),
        ("build", "report:build-first:2026-01-05", {"day": 20458}),
        ("save", "report:save-first:2026-01-01", {"day": 20454}),
        ("save", "report:save-first:2026-01-02", {"day": 20455}),
        ("save", "report:save-first:2026-01-04", {"day": 20457}),
        ("save", "report:save-first:2026-01-05", {"day": 20458}),
    ]


def _plant_wiped_restart(monkeypatch: pytest.MonkeyPatch) -> None:
    restart = World.restart
    monkeypatch.setattr(World, "restart", lambda self, name, **_: restart(self, name, wipe_disk=True))


def _plant_retried_build(monkeypatch: pytest.MonkeyPatch) -> None:
    from sim.scenarios import single

    build = single._build_report

    async def built_twice(ctx: Any, day: int) -> None:
        await build(ctx, day)
        ctx.effect(single.report_effect(ctx.key, day), day=day)  # a client retry with no idempotency key

    monkeypatch.setattr(single, "_build_report", built_twice)


def _plant_swapped(which: str) -> Any:
    def plant(monkeypatch: pytest.MonkeyPatch) -> None:
        from sim.scenarios import single

        other = {"report_save_first": "report_build_first", "report_build_first": "report_save_first"}[which]
        monkeypatch.setattr(single, which, getattr(single, other))

    return plant


@pytest.mark.parametrize(
    ("plant", "failure"),
    [
        (_plant_wiped_restart, "exactly_once: report:save-first:2026-01-04 happened 0 times (want exactly 1); "
                               "report:save-first:2026-01-05 happened 0 times (want exactly 1)"),
        (_plant_retried_build, "exactly_once: report:save-first:2026-01-01 happened 2 times (want exactly 1): save at 86430.0005 s"),
        (_plant_swapped("report_save_first"), "reports_explained: report:save-first:2026-01-03 was built although save-first crashed between its save and the build"),
        (_plant_swapped("report_build_first"), "at_least_once: report:build-first:2026-01-03 happened 0 times (want at least 1)"),
    ],
    ids=["restart-loses-the-disk", "build-retried", "save-first-builds-first", "build-first-saves-first"],
)
def test_daily_report_checks_fail_when_a_bug_is_planted(monkeypatch: pytest.MonkeyPatch, plant: Any, failure: str) -> None:
    """Each planted bug (a restart that loses the durable key, a retried build, either checkpoint order swapped) fails the effects checks of daily-report seed 0."""
    plant(monkeypatch)
    result = scenarios.run("daily-report", seed=0)
    assert len(result.failures) == 1
    assert str(result.failures[0]).startswith(failure)
