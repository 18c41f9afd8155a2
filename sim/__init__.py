"""sim: a deterministic world (simpy) that drives the real casty runtime through its ports.

The public names, for a user's own tests::

    import sim
    from sim.faults import Crash, Restart, Pause, Partition, ClockStep

    world = sim.World(seed=7)                 # nodes, faults, spawn, run(until=...)
    plan = sim.FaultPlan.of(Crash(at=3.0, node="n1"), Restart(at=5.0, node="n1"))
    sim.checks.never_early(world)             # checks read the finished trace

    @sim.scenario("my-scenario", "what it shows", until=timedelta(seconds=30), checks=(...,))
    def my_scenario(world: sim.World) -> None: ...

    sim.scenarios.registered()                # every scenario by name, built-ins first
    sim.sweep("my-scenario", range(100), executor=pool)   # every seed with its checks, on any Executor

``sim.testing.fault_plans`` (Hypothesis strategies of plans) and the pytest plugin
(``sim.pytest_plugin``: ``@pytest.mark.sim``, the ``world`` fixture) are loaded on use,
so ``import sim`` stays cheap: no matplotlib, no Hypothesis, no pytest.
"""

from __future__ import annotations

from . import checks, faults, scenarios
from .checks import CheckFailed
from .faults import FaultMix, FaultPlan
from .scenarios import scenario
from .sweep import sweep as sweep  # sim.sweep(scenario, seeds, *, executor=None); `from sim.sweep import report` still reaches the module
from .trace import Trace
from .world import World

__all__ = ["World", "FaultPlan", "FaultMix", "Trace", "CheckFailed", "scenario", "sweep", "checks", "faults", "scenarios"]
