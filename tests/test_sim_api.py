"""The public API of ``sim``: every name a user's tests need, importable without private calls, and cheap."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import sim

ROOT = Path(__file__).resolve().parent.parent


def test_all_names_the_public_api() -> None:
    """sim.__all__ is exactly the public names, in this order, and each is an attribute of sim."""
    assert sim.__all__ == ["World", "FaultPlan", "FaultMix", "Trace", "CheckFailed", "scenario", "sweep", "checks", "faults", "scenarios"]
    for name in sim.__all__:
        assert hasattr(sim, name), name


def test_public_names_are_the_objects_of_their_modules() -> None:
    """sim.World, FaultPlan, FaultMix, Trace, CheckFailed, scenario and sweep are the very objects their modules define."""
    from sim import checks, faults, scenarios, trace, world

    assert sim.World is world.World
    assert sim.FaultPlan is faults.FaultPlan
    assert sim.FaultMix is faults.FaultMix
    assert sim.Trace is trace.Trace
    assert sim.CheckFailed is checks.CheckFailed
    assert sim.scenario is scenarios.scenario
    assert sim.sweep is sys.modules["sim.sweep"].sweep  # the function; `from sim.sweep import ...` reaches the module
    assert (sim.checks, sim.faults, sim.scenarios) == (checks, faults, scenarios)


def test_faults_and_checks_export_what_they_list() -> None:
    """Every name in sim.faults.__all__ and sim.checks.__all__ exists, including the effects ledger's checks."""
    for module in (sim.faults, sim.checks):
        missing = [name for name in module.__all__ if not hasattr(module, name)]
        assert missing == []
    assert {"Crash", "Restart", "Pause", "Partition", "ClockStep", "FaultPlan", "generate", "heal_all"} <= set(sim.faults.__all__)
    assert callable(sim.checks.exactly_once) and callable(sim.checks.at_most_once)


def test_registered_loads_the_built_in_scenarios() -> None:
    """sim.scenarios.registered() lists the built-ins (daily-report, swarm among them) and returns a copy."""
    names = sim.scenarios.registered()
    assert {"daily-report", "swarm", "durable-restart"} <= set(names)
    names.clear()
    assert "swarm" in sim.scenarios.registered()


def test_a_users_scenario_registers_with_sim_scenario() -> None:
    """@sim.scenario registers a user's setup by name; run() runs it and its checks see the world."""
    seen: list[int] = []

    @sim.scenario("test-api-user-scenario", "a user's own scenario", until=timedelta(seconds=2), checks=(lambda w: seen.append(w.seed),))
    def mine(world: sim.World) -> None:
        world.add_node("n1")

    try:
        assert sim.scenarios.registered()["test-api-user-scenario"].setup is mine
        run = sim.scenarios.run("test-api-user-scenario", seed=4)
        assert run.ok and seen == [4] and run.world.now == 2.0
    finally:
        del sim.scenarios.SCENARIOS["test-api-user-scenario"]


def test_import_sim_is_cheap() -> None:
    """`import sim` (and sim.testing, sim.pytest_plugin) loads neither matplotlib nor hypothesis; sim alone not pytest."""
    code = (
        "import sys, sim\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'matplotlib', 'hypothesis', 'pytest', '_pytest'}))\n"
        "import sim.testing\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'matplotlib', 'hypothesis'}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out == ["[]", "[]"]


def test_the_pytest_plugin_is_registered_by_an_entry_point() -> None:
    """The installed distribution declares the pytest11 entry point casty_sim = sim.pytest_plugin."""
    points = [e for e in importlib.metadata.entry_points(group="pytest11") if e.name == "casty_sim"]
    assert [e.value for e in points] == ["sim.pytest_plugin"]


def test_no_private_scenario_loading_outside_the_scenarios_package() -> None:
    """No module, test, example, notebook or notebook builder calls scenarios._load(): registered() is the way."""
    offenders = []
    for folder in ("sim", "tests", "examples", "notebooks", "bench"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix not in (".py", ".ipynb") or path == ROOT / "sim" / "scenarios" / "__init__.py" or path == Path(__file__).resolve():
                continue
            if "_load()" in path.read_text(encoding="utf-8"):
                offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []
