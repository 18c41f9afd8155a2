"""Actors that record external effects (``ctx.effect``), for ``tests/test_effects.py`` and real node processes.

``payer``: charges an order once per ``Pay`` and records it. The daily report of the
schedules seed, in its two checkpoint orders: ``report_save_first`` saves the day before
the 30 s build (a crash mid-build omits that day), ``report_build_first`` saves after it
(a crash after the build and before the save repeats it). Each built report is the effect
``report:<key>:<date>``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from casty import Askable, Context, actor

DAY_US = 86_400 * 1_000_000
REPORT_BUILD_SECONDS = 30.0


@dataclass(frozen=True)
class Pay(Askable[str]):
    """Charge ``order`` ``amount`` cents; the reply is the effect key recorded."""

    order: str
    amount: int


@actor(initial=0)
async def payer(ctx: Context[int, Pay]) -> None:
    """A charge at an outside service, recorded as the effect ``charge:<order>``."""
    async for msg in ctx.inbox:
        effect = f"charge:{msg.order}"
        ctx.effect(effect, amount=msg.amount, currency="EUR")
        msg.reply_to.tell(effect)


@dataclass(frozen=True)
class ReportTick:
    """Told by the ``daily`` schedule at every midnight."""


@dataclass(frozen=True)
class Arm(Askable[None]):
    """Schedule the report for every midnight (UTC, on the node's wall clock)."""


ReportMessage = ReportTick | Arm


def date_of(day: int) -> str:
    """A day number (whole days since the epoch) as its ISO date."""
    return datetime.fromtimestamp(day * 86_400, tz=timezone.utc).date().isoformat()


async def _arm(ctx: Context[int, ReportMessage], msg: Arm) -> None:
    until_midnight = timedelta(microseconds=DAY_US - ctx.system.clock.now_us() % DAY_US)
    await ctx.schedule("daily", until_midnight, timedelta(days=1), ReportTick())
    msg.reply_to.tell(None)


async def _build(ctx: Context[int, ReportMessage], day: int) -> None:
    """30 s of work at a service outside the actor system; once it is done the report exists: the effect."""
    await asyncio.sleep(REPORT_BUILD_SECONDS)
    ctx.effect(f"report:{ctx.key}:{date_of(day)}", day=date_of(day))


def _due(ctx: Context[int, ReportMessage]) -> range:
    """The days still to report: after the checkpoint (today for a new key) up to the day that just ended."""
    today = ctx.system.clock.now_us() // DAY_US - 1
    return range(today if ctx.state.value < 0 else ctx.state.value + 1, today + 1)


@actor(initial=-1, durable="write")
async def report_save_first(ctx: Context[int, ReportMessage]) -> None:
    """Daily report, checkpoint saved BEFORE building: a crash in between omits that day."""
    async for msg in ctx.inbox:
        match msg:
            case Arm():
                await _arm(ctx, msg)
            case ReportTick():
                for day in _due(ctx):
                    await ctx.state.set(day)
                    await _build(ctx, day)


@actor(initial=-1, durable="write")
async def report_build_first(ctx: Context[int, ReportMessage]) -> None:
    """Daily report, checkpoint saved AFTER building: a crash in between repeats that day."""
    async for msg in ctx.inbox:
        match msg:
            case Arm():
                await _arm(ctx, msg)
            case ReportTick():
                for day in _due(ctx):
                    await _build(ctx, day)
                    await ctx.state.set(day)
