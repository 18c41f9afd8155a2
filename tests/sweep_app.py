"""A user's own scenario, in a module of its own: what ``tests/test_sweep.py`` sweeps in spawned and Dask workers.

``test-billing``: a durable key bills one period per second from a persisted schedule. It
charges first (the effect ``charge:acme:<period>``), waits half a second for the bank, then
saves the period: the node crashes once at a time drawn from the seed and restarts a
second later, so a crash inside that half second charges the period twice. The check
``exactly_once(world, "charge")`` fails on those seeds and holds on the others.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import simpy

from casty import ActorSystem, Askable, Context, actor
from sim.checks import exactly_once
from sim.scenarios import scenario
from sim.world import World

BANK_SECONDS = 0.5


@dataclass(frozen=True)
class Begin(Askable[None]):
    """Arm the ``bill`` schedule: every second from one second on."""


@dataclass(frozen=True)
class Bill:
    """Told by the schedule: bill the next period."""


@actor(initial=0, durable="write")
async def biller(ctx: Context[int, Begin | Bill]) -> None:
    """Charges before it saves (the planted bug): a crash in between charges the period again after the restart."""
    async for msg in ctx.inbox:
        match msg:
            case Begin():
                await ctx.schedule("bill", timedelta(seconds=1), timedelta(seconds=1), Bill())
                msg.reply_to.tell(None)
            case Bill():
                period = ctx.state.value + 1
                ctx.effect(f"charge:{ctx.key}:{period}", amount=100)
                await asyncio.sleep(BANK_SECONDS)
                await ctx.state.set(period)


def _charged_once(world: World) -> None:
    exactly_once(world, "charge")


@scenario("test-billing", "charge before save, one crash at a seeded time", until=timedelta(seconds=10), checks=(_charged_once,))
def billing(world: World) -> None:
    world.add_node("n1", store="sqlite")

    async def begin(system: ActorSystem) -> None:
        await system.ref(biller, "acme").ask(Begin())

    world.spawn("n1", begin)
    crash_at = world.rng("n1", "faults").uniform(1.0, 6.0)
    world.results["crash_at"] = crash_at

    def faults(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(crash_at)
        world.crash("n1")
        yield world.timeout(1.0)
        world.restart("n1")

    world.process(faults(world))
