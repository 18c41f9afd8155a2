"""Built-in scenarios: named, seeded runs of a world with the checks that say what must hold.

A scenario is a function that sets up a ``World`` (nodes, client code, a fault script)
and returns how long to run it, plus checks that read the finished trace. The names are
stable: the CLI, the notebooks and the tests use them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from ..checks import Check, CheckFailed, run_checks
from ..faults import FaultPlan
from ..trace import Trace
from ..world import World

__all__ = ["Scenario", "Run", "scenario", "SCENARIOS", "get", "registered", "run"]


@dataclass(frozen=True)
class Scenario:
    """A named setup with a default duration and its checks."""

    name: str
    description: str
    setup: Callable[[World], None]
    until: timedelta
    checks: tuple[Check, ...] = ()
    tags: tuple[str, ...] = field(default=())
    keep: Callable[[str], bool] | None = None  # which event kinds become trace rows (World(keep=)); None: all


@dataclass
class Run:
    """A finished run: the world (for its results), its trace and the check failures (empty when all hold)."""

    scenario: Scenario
    seed: int
    world: World
    failures: list[CheckFailed]

    @property
    def trace(self) -> Trace:
        return self.world.trace

    @property
    def ok(self) -> bool:
        return not self.failures


SCENARIOS: dict[str, Scenario] = {}


def scenario(
    name: str,
    description: str,
    *,
    until: timedelta,
    checks: tuple[Check, ...] = (),
    tags: tuple[str, ...] = (),
    keep: Callable[[str], bool] | None = None,
) -> Callable[[Callable[[World], None]], Callable[[World], None]]:
    """Register a setup function as the scenario ``name``; ``keep`` as ``World(keep=)`` (rows of other kinds only counted)."""

    def register(setup: Callable[[World], None]) -> Callable[[World], None]:
        if name in SCENARIOS and not _cell_run_again(SCENARIOS[name].setup, setup):
            raise ValueError(f"scenario {name!r} is defined twice")
        SCENARIOS[name] = Scenario(name, description, setup, until, checks, tags, keep)
        return setup

    return register


def _cell_run_again(old: Callable[..., object], new: Callable[..., object]) -> bool:
    """Whether ``new`` is ``old`` defined again by an interactive session (a notebook cell or a REPL line run twice).

    There ``__main__`` has no file, and a student re-running the cell that registers a scenario means to replace it;
    in a script or a module two definitions of one name stay an error."""
    import sys

    if getattr(sys.modules.get("__main__"), "__file__", None) is not None:
        return False
    same = ("__module__", "__qualname__")
    return all(getattr(old, a, None) == getattr(new, a, None) for a in same) and getattr(new, "__module__", None) == "__main__"


def registered() -> dict[str, Scenario]:
    """Every scenario by name, the built-in ones loaded first, in the order ``python -m sim list`` shows them."""
    _load()
    return dict(SCENARIOS)


def get(name: str) -> Scenario:
    _load()
    try:
        return SCENARIOS[name]
    except KeyError:
        raise KeyError(f"no scenario {name!r}; try one of: {', '.join(SCENARIOS)}") from None


def run(
    name: str,
    seed: int = 0,
    *,
    until: timedelta | None = None,
    check: bool = True,
    plan: FaultPlan | None = None,
    on_world: Callable[[World], None] | None = None,
) -> Run:
    """Build the scenario's world with ``seed``, run it, and (by default) run its checks.

    ``plan``: replay this fault plan instead of the one the seed draws; only scenarios tagged
    ``"fault-plan"`` take one (``ValueError`` for the others). ``on_world`` is called with the
    world once it is set up (a sweep keeps it to report the plan of a run that raised).
    """
    chosen = get(name)
    if plan is not None and "fault-plan" not in chosen.tags:
        raise ValueError(f"scenario {name!r} draws no fault plan: --plan is for {', '.join(n for n, s in SCENARIOS.items() if 'fault-plan' in s.tags)}")
    world = World(seed, keep=chosen.keep)
    world.given_plan = plan
    try:
        chosen.setup(world)
        if on_world is not None:
            on_world(world)
        world.run(until=until if until is not None else chosen.until)
    except BaseException:
        world.close()  # a setup or a run that raised leaves no task pending ("Task was destroyed" at exit)
        raise
    failures = run_checks(chosen.checks, world) if check else []
    world.close()
    return Run(chosen, seed, world, failures)


def _load() -> None:
    # Importing a module registers its scenarios; the order here is the order `list` shows.
    from . import single  # noqa: F401
    from . import node_schedules  # noqa: F401
    from . import cluster  # noqa: F401
    from . import replicas_lost  # noqa: F401
    from . import takeover  # noqa: F401
    from . import rolling  # noqa: F401
    from . import probes  # noqa: F401  (sim.mutants: one rule per script)
    from . import swarm_checks  # noqa: F401  (registers swarm, the setup in sim.scenarios.swarm)
    from . import double_restart  # noqa: F401
    from . import dst  # noqa: F401  (after the others: `list` keeps its first 43 lines)
    from . import catch_up  # noqa: F401  (the policy mutants hunt with it)
