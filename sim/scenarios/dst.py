"""A daily 02:30 cron in Europe/Berlin across both DST transitions: skipped in the gap, once in the repeated hour.

The rule is ``casty._core.cron``'s (its module docstring, "Time zones and daylight saving
time"): a wall time that does not exist does not fire, the next matching one after the gap
does; a wall time that happens twice fires once, at its first pass (``fold=0``). In 2026
Berlin springs forward on 29 March (02:00 CET -> 03:00 CEST: 02:30 does not exist) and falls
back on 25 October (03:00 CEST -> 02:00 CET: 02:30 happens at 00:30 and again at 01:30 UTC).

One node (no cluster: a cluster reads crons in UTC unless told a zone) registers
``schedule_cron(..., "0 30 2 * * ?", tz="Europe/Berlin")`` (its own scheduler's zone stays UTC)
and runs four days around the transition. Its wall clock is set ahead
(``add_node(offset=...)``) so the days around the transition come after a few simulated days
instead of months. The checks read what the body received, the trace's firings and the
ledger (``sim.ledger``):

* spring: three firings, on the 28th (02:30 CET, 01:30 UTC), the 30th and the 31st (02:30 CEST,
  00:30 UTC); none on the 29th. The ledger has no entry for the 29th at all, neither fired nor
  missed: by the rule the job has **no occurrence** that day (the cron's grid, read in the
  zone, skips it), so nothing was missed and nothing needs explaining;
* fall: one firing on the 25th, at its first pass (00:30 UTC, 02:30 CEST), none at 01:30 UTC
  (the second 02:30), and the ledger classifies that day's single occurrence on time.

The ledger reads a cron's grid in the zone its registration row names (``tz``): a zoned
registration's row names it. (``zoned`` gives a zone to rows that name none, for a trace of a
node whose own zone was set with ``ActorSystem(timezone=...)``, which its rows do not record.)
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from casty import ActorSystem, Askable, Context, actor
from casty._core.cron import zone

from ..checks import CheckFailed
from ..ledger import Entry, ledger
from ..trace import Trace
from ..world import World
from . import scenario

__all__ = ["ZONE", "EXPRESSION", "SPRING", "FALL", "zoned", "dst_ledger"]

ZONE = "Europe/Berlin"
EXPRESSION = "0 30 2 * * ?"
"""Every day at 02:30:00 wall time (Quartz: sec min hour day-of-month month day-of-week)."""

SPRING = datetime(2026, 3, 27, 12, 0, tzinfo=zone(ZONE))
"""The node's wall clock when the world starts for ``cron-dst-spring``: noon two days before the gap."""
FALL = datetime(2026, 10, 23, 12, 0, tzinfo=zone(ZONE))
"""The same for ``cron-dst-fall``: noon two days before the repeated hour."""

DAYS = timedelta(days=4)


@dataclass(frozen=True)
class Report:
    """The daily job's message."""


@dataclass(frozen=True)
class Runs(Askable[int]):
    """How many times the job ran."""


@actor(initial=0)
async def daily_job(ctx: Context[int, Report | Runs]) -> None:
    """Counts its runs; answers ``Runs`` with the count."""
    async for msg in ctx.inbox:
        match msg:
            case Report():
                await ctx.state.update(lambda runs: runs + 1)
            case Runs(reply_to=reply_to):
                reply_to.tell(ctx.state.value)


def _setup(world: World, start: datetime) -> None:
    offset = start.astimezone(timezone.utc) - datetime.fromtimestamp(world.epoch_us / 1e6, tz=timezone.utc)
    world.add_node("n1", offset=offset)
    world.results["zone"] = ZONE

    async def client(system: ActorSystem) -> None:
        job = system.ref(daily_job, "report")
        world.results["reference"] = await system.schedule_cron(Report(), job, EXPRESSION, tz=ZONE)
        await asyncio.sleep((DAYS - timedelta(minutes=1)).total_seconds())
        world.results["runs"] = await job.ask(Runs())

    world.spawn("n1", client)


def zoned(trace: Trace, tz: str = ZONE) -> Trace:
    """``trace`` with each cron registration row that names no zone given ``tz`` (the node's), for the ledger."""
    rows = [
        dataclasses.replace(r, fields={**r.fields, "tz": tz})
        if r.kind == "node_schedule.registered" and r.get("schedule_kind") == "cron" and not r.get("tz")
        else r
        for r in trace.rows
    ]
    out = Trace()
    out.rows = rows
    return out


def dst_ledger(trace: Trace) -> list[Entry]:
    """The daily job's node-schedule entries of the ledger (the cron's grid read in the zone its registration names)."""
    return [e for e in ledger(trace) if e.source == "node-schedule" and e.actor.endswith(":daily_job")]


def _utc(us: int) -> str:
    return datetime.fromtimestamp(us / 1e6, tz=timezone.utc).strftime("%m-%d %H:%M")


def _expect(check: str, ok: bool, message: str) -> None:
    if not ok:
        raise CheckFailed(check, message)


def _firings(world: World) -> list[str]:
    return [_utc(int(r.get("tick_us"))) for r in world.trace.of("node_schedule.fired") if str(r.get("actor")).endswith(":daily_job")]


def _check(world: World, name: str, expected: list[str]) -> None:
    """The job's firings, its body's runs and the ledger are exactly ``expected`` (UTC month-day hour:minute), each on time."""
    fired = _firings(world)
    _expect(name, fired == expected, f"the 02:30 {ZONE} job fired at {fired} (UTC), the rule says {expected}")
    runs = world.results.get("runs")
    _expect(name, runs == len(expected), f"the job's body ran {runs} times, expected {len(expected)}")
    entries = dst_ledger(world.trace)
    got = [(_utc(e.due_us or 0), e.status) for e in entries]
    _expect(name, got == [(t, "on-time") for t in expected], f"the ledger says {got}, expected each of {expected} once, on time")


SPRING_EXPECTED = ["03-28 01:30", "03-30 00:30", "03-31 00:30"]
"""02:30 CET on the 28th; nothing on the 29th (02:30 does not exist); 02:30 CEST on the 30th and 31st."""
FALL_EXPECTED = ["10-24 00:30", "10-25 00:30", "10-26 01:30", "10-27 01:30"]
"""02:30 CEST on the 24th and on the 25th at its first pass (not 01:30 UTC, the second 02:30); 02:30 CET after."""


def _spring(world: World) -> None:
    """Skipped in the gap: fired on the 28th, 30th and 31st, never on the 29th, and the ledger has no occurrence on the 29th."""
    _check(world, "cron_dst_spring", SPRING_EXPECTED)
    days = {e.due_us and datetime.fromtimestamp(e.due_us / 1e6, tz=zone(ZONE)).day for e in dst_ledger(world.trace)}
    _expect("cron_dst_spring", 29 not in days, f"the ledger has an entry on the gap day 29 March: {sorted(d for d in days if d)}")


def _fall(world: World) -> None:
    """Once in the repeated hour: the 25th fired at 00:30 UTC (02:30 CEST, first pass) and not at 01:30 UTC (02:30 CET)."""
    _check(world, "cron_dst_fall", FALL_EXPECTED)
    second_pass = "10-25 01:30"
    _expect("cron_dst_fall", second_pass not in _firings(world), f"the job fired again at the second 02:30 ({second_pass} UTC)")


@scenario(
    "cron-dst-spring",
    f"a daily 02:30 node cron in {ZONE} across spring-forward (29 March 2026): no run on the gap day, the ledger has no occurrence there",
    until=DAYS,
    checks=(_spring,),
)
def cron_dst_spring(world: World) -> None:
    _setup(world, SPRING)


@scenario(
    "cron-dst-fall",
    f"a daily 02:30 node cron in {ZONE} across fall-back (25 October 2026): one run in the repeated hour, at its first pass",
    until=DAYS,
    checks=(_fall,),
)
def cron_dst_fall(world: World) -> None:
    _setup(world, FALL)
