"""The four catch-up policies under one pause, each checked against its written rule: the scenario the policy mutants hunt with.

``casty._core.catchup`` states each rule as a pure function; ``tests/test_catchup_faults.py``
runs each under five faults. This scenario puts all of them in one run a mutation sweep can
afford (one node, no network: every seed gives the same times): five persisted schedules
(``ctx.schedule``, every 10 s from 10 s) under ``Skip()``, ``FireAll(limit=3)``,
``DropLate(grace=1 s)``, ``DropLate(grace=5 s)`` and ``FixedDelay()``, and two node schedules
(``misfire=``): an interval every 10 s under ``FireAll(limit=2)`` and a cron every 10 s
(``*/10 * * * * ?``) under ``FireAll(limit=2)``. The node is paused from 25 s to 62 s, so the
dues 30, 40, 50 and 60 are all past at the resume (60 is 2 s late). Each key's body records the
due of every occurrence it handles, in the order handled; the check compares them with the rule:

* Skip: 30 (skipped 3), then 70, 80, 90;
* FireAll(3): 40, 50, 60 in this order (the three newest; 30 skipped), then 70, 80, 90;
* DropLate(1 s): nothing at the resume (60 is 2 s late: a ``schedule.dropped`` skipping 4), then 70, 80, 90;
* DropLate(5 s): 60 (2 s late, within the grace), then 70, 80, 90;
* FixedDelay: 30 at the resume, then 72, 82, 92 (one interval after each firing, off the grid);
* the node interval and the node cron under FireAll(2): the two newest missed ticks, in order.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from casty import ActorSystem, Askable, Context, DropLate, FireAll, FixedDelay, Skip, actor

from ..checks import CheckFailed
from ..world import World
from . import scenario

__all__ = ["PERSISTED", "NODE", "EXPECTED"]

EVERY = timedelta(seconds=10)
PAUSE = (25.0, 62.0)
PERSISTED: dict[str, Any] = {
    "skip": Skip(),
    "fire-all-3": FireAll(limit=3),
    "drop-late-1": DropLate(grace=timedelta(seconds=1)),
    "drop-late-5": DropLate(grace=timedelta(seconds=5)),
    "fixed-delay": FixedDelay(),
}
"""Each persisted schedule's key and its ``catch_up=``."""
NODE = ("node-interval", "node-cron")
"""The keys ticked by the node schedules (``misfire=FireAll(limit=2)``)."""
EXPECTED: dict[str, list[float]] = {
    "skip": [10, 20, 30, 70, 80, 90],
    "fire-all-3": [10, 20, 40, 50, 60, 70, 80, 90],
    "drop-late-1": [10, 20, 70, 80, 90],
    "drop-late-5": [10, 20, 60, 70, 80, 90],
    "fixed-delay": [10, 20, 30, 72, 82, 92],
    "node-interval": [10, 20, 50, 60, 70, 80, 90],
    "node-cron": [10, 20, 50, 60, 70, 80, 90],
}
"""The dues (s after the schedule was made, to 0.1 s) each key's body handles, in order, by the written rules."""


@dataclass(frozen=True)
class Arm(Askable[int]):
    """Schedule ``Tick`` every 10 s under the persisted policy named ``policy``; answers the wall time (µs)."""

    policy: str


@dataclass(frozen=True)
class Tick:
    pass


@dataclass(frozen=True)
class Handled(Askable["tuple[int, ...]"]):
    """The due (µs) of each occurrence handled, in order."""


@actor(initial=())
async def policy_key(ctx: Context[tuple[int, ...], Arm | Tick | Handled]) -> None:
    """Arms a schedule under a policy (or is ticked by a node schedule) and records each occurrence's due in order."""
    async for msg in ctx.inbox:
        match msg:
            case Arm(policy=policy, reply_to=reply_to):
                await ctx.schedule("tick", EVERY, EVERY, Tick(), catch_up=PERSISTED[policy])
                reply_to.tell(ctx.system.clock.now_us())
            case Tick():
                occurrence = ctx.occurrence
                due = -1 if occurrence is None else int(occurrence.due.timestamp() * 1_000_000)
                await ctx.state.update(lambda dues: (*dues, due))
            case Handled(reply_to=reply_to):
                reply_to.tell(ctx.state.value)


def _setup(world: World) -> None:
    world.add_node("n1")
    made: dict[str, int] = {}
    world.results["made_us"] = made

    async def client(system: ActorSystem) -> None:
        for name in PERSISTED:
            made[name] = await system.ref(policy_key, name).ask(Arm(name))
        now = system.clock.now_us()
        made["node-interval"] = now
        await system.schedule(Tick(), system.ref(policy_key, "node-interval"), EVERY, misfire=FireAll(limit=2))
        # the cron's grid is the wall clock's 10 s marks: its first due is the first mark after now
        made["node-cron"] = now - now % 10_000_000
        await system.schedule_cron(Tick(), system.ref(policy_key, "node-cron"), "*/10 * * * * ?", misfire=FireAll(limit=2))

    async def collect(system: ActorSystem) -> None:
        world.results["handled"] = {name: await system.ref(policy_key, name).ask(Handled()) for name in (*PERSISTED, *NODE)}

    def faults(world: World) -> Any:
        yield world.timeout(PAUSE[0])
        world.pause("n1")
        yield world.timeout(PAUSE[1] - PAUSE[0])
        world.resume("n1")
        yield world.timeout(99.0 - PAUSE[1])
        world.spawn("n1", collect)

    world.spawn("n1", client)
    world.process(faults(world))


def _each_policy_follows_its_rule(world: World) -> None:
    """Every key handled exactly the dues its policy's rule delivers, in order (FireAll's newest, DropLate's grace, FixedDelay's next)."""
    handled = world.results.get("handled")
    made = world.results["made_us"]
    if not isinstance(handled, dict):
        raise CheckFailed("catch_up_rules", "the keys were never asked what they handled")
    for name, expected in EXPECTED.items():
        got = [round((due - made[name]) / 1e6, 1) for due in handled[name]]
        if got != [float(e) for e in expected]:
            raise CheckFailed("catch_up_rules", f"{name} handled the dues {got} (s after it was made), its rule says {expected}")


@scenario(
    "catch-up-policies",
    "five persisted schedules (Skip, FireAll(3), DropLate(1 s), DropLate(5 s), FixedDelay) and two node schedules"
    " (misfire=FireAll(2), interval and cron) across one pause: each delivers exactly its rule's dues, in order",
    until=timedelta(seconds=100),
    checks=(_each_policy_follows_its_rule,),
)
def catch_up_policies(world: World) -> None:
    _setup(world)
