"""Node schedules (seed: grain scheduling) in the world: what a node holds, and what it loses.

Single-node scenarios of the node-schedules issue; the cluster ones (cron claimed once per
tick, interval per node) need the cluster and come with it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import simpy

from casty import ActorSystem, Askable, Context, actor

from ..checks import CheckFailed
from ..world import World
from . import scenario

# =========================================================================== actors ======


@dataclass(frozen=True)
class Beat:
    source: str


@dataclass(frozen=True)
class Arm(Askable[None]):
    """Start a persisted actor schedule and an activation timer, both every 10 s."""


@dataclass(frozen=True)
class Counts(Askable[dict[str, int]]):
    pass


@actor(initial={}, durable="write", idle_after=timedelta(seconds=45))
async def counted(ctx: Context[dict[str, int], Beat | Arm | Counts]) -> None:
    """Counts Beats per source: 'schedule' (persisted), 'timer' (ctx.timer), 'node' (a node schedule)."""
    async for msg in ctx.inbox:
        match msg:
            case Arm(reply_to=reply_to):
                await ctx.schedule("persisted", timedelta(seconds=10), timedelta(seconds=10), Beat("schedule"))
                ctx.timer("volatile", timedelta(seconds=10), timedelta(seconds=10), Beat("timer"))
                reply_to.tell(None)
            case Beat(source=source):
                await ctx.state.update(lambda c: {**c, source: c.get(source, 0) + 1})
            case Counts(reply_to=reply_to):
                reply_to.tell(dict(ctx.state.value))


def _expect(check: str, condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(check, message)


async def _arm_all_three(system: ActorSystem) -> None:
    """Key 'k' gets a persisted schedule and an activation timer (Arm), and a node schedule from outside."""
    ref = system.ref(counted, "k")
    await ref.ask(Arm())
    await system.schedule(Beat("node"), ref, timedelta(seconds=10), reference="node-beat")


def _read(world: World, node: str, key: str, result: str) -> None:
    async def read(system: ActorSystem) -> dict[str, int]:
        return await system.ref(counted, key).ask(Counts())

    task = world.spawn(node, read)
    task.add_done_callback(lambda t: world.results.__setitem__(result, t.result() if t.exception() is None else {}))


# ===================================================================== scenarios =======


def _timers_vs_schedules_explained(world: World) -> None:
    """Before the restart all three sources tick; after it only the persisted actor schedule does."""
    before, after = world.results.get("before"), world.results.get("after")
    _expect("timers_vs_schedules", before is not None and after is not None, "the counts were not read")
    assert before is not None and after is not None
    for source in ("schedule", "timer", "node"):
        _expect("timers_vs_schedules", before.get(source, 0) > 0, f"{source} did not tick before the crash: {before}")
    _expect("timers_vs_schedules", after.get("timer") == before.get("timer"), f"the activation timer ticked after the restart: {before} -> {after}")
    _expect("timers_vs_schedules", after.get("node") == before.get("node"), f"the node schedule ticked after the restart: {before} -> {after}")
    _expect("timers_vs_schedules", after["schedule"] > before["schedule"], "the persisted schedule did not go on after the restart")
    lost = world.trace.of("node_schedule.cancelled", reason="stopped")
    _expect("timers_vs_schedules", len(lost) == 1, "the node schedule was not dropped by the crash")


@scenario(
    "timers-vs-schedules",
    "an activation timer, a node schedule and a persisted actor schedule on one key: a node restart keeps only the last",
    until=timedelta(seconds=200),
    checks=(_timers_vs_schedules_explained,),
)
def timers_vs_schedules(world: World) -> None:
    world.add_node("n1", store="sqlite")
    world.spawn("n1", _arm_all_three)

    def script(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(64)
        _read(world, "n1", "k", "before")
        yield world.timeout(1)
        world.crash("n1")
        yield world.timeout(15)
        world.restart("n1")
        yield world.timeout(100)
        _read(world, "n1", "k", "after")

    world.process(script(world))


def _node_schedule_lost_actor_schedule_kept(world: World) -> None:
    """After the restart the node has no node schedules; the actor schedule resumed from the disk with no message."""
    restart = world.trace.of("fault.restart")[0]
    node_fired_after = [r for r in world.trace.of("node_schedule.fired") if r.t_ns > restart.t_ns]
    _expect("node_restart", not node_fired_after, f"{len(node_fired_after)} node-schedule ticks after the restart")
    actor_fired_after = [r for r in world.trace.of("schedule.fired") if r.t_ns > restart.t_ns]
    _expect("node_restart", len(actor_fired_after) >= 5, f"only {len(actor_fired_after)} actor-schedule firings after the restart")
    listed = world.results.get("listed_after")
    _expect("node_restart", listed == [], f"list_schedules() after the restart: {listed}")


@scenario(
    "node-restart-loses-node-schedules",
    "node schedules live in the node's memory: a restart loses them, while an actor's persisted schedule resumes",
    until=timedelta(seconds=200),
    checks=(_node_schedule_lost_actor_schedule_kept,),
)
def node_restart_loses_node_schedules(world: World) -> None:
    world.add_node("n1", store="sqlite")
    world.spawn("n1", _arm_all_three)

    async def listed(system: ActorSystem) -> list[str]:
        await asyncio.sleep(1)
        return [info.reference for info in system.list_schedules()]

    def script(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(55)
        world.crash("n1")
        yield world.timeout(10)
        world.restart("n1")
        task = world.spawn("n1", listed)
        task.add_done_callback(lambda t: world.results.__setitem__("listed_after", t.result()))

    world.process(script(world))
