"""Actor types hosted by the real node processes of the cluster tests (``--module tests.cluster_app``).

``tally``: a counter replicated on three nodes (write majority) that also counts the
firings of its own persisted schedule. ``Inc`` is the write a client confirms; ``Start``
arms the schedule ``tick``, whose every firing tells the key a ``Tick`` that bumps
``ticks``. Keeping the two counts apart lets a test check the confirmed increments
exactly while the schedule writes go on beside them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from casty import Askable, Context, actor


@dataclass(frozen=True)
class Tally:
    count: int = 0
    ticks: int = 0


@dataclass(frozen=True)
class Inc(Askable[int]):
    """Add one to ``count``; the reply is the new count, once the write is confirmed by a majority."""


@dataclass(frozen=True)
class Get(Askable[Tally]):
    """The key's state as it stands."""


@dataclass(frozen=True)
class Start(Askable[Tally]):
    """Arm the persisted schedule ``tick``: every ``every_ms`` milliseconds, a ``Tick``."""

    every_ms: int = 500


@dataclass(frozen=True)
class Tick:
    """Told by the schedule: add one to ``ticks``."""


@actor(initial=Tally(), replicas=3, write="majority")
async def tally(ctx: Context[Tally, Inc | Get | Start | Tick]) -> None:
    """A replicated counter with a schedule that counts its own firings."""
    async for msg in ctx.inbox:
        match msg:
            case Inc(reply_to=reply_to):
                state = await ctx.state.update(lambda t: Tally(t.count + 1, t.ticks))
                reply_to.tell(state.count)
            case Get(reply_to=reply_to):
                reply_to.tell(ctx.state.value)
            case Start(every_ms=every_ms, reply_to=reply_to):
                period = timedelta(milliseconds=every_ms)
                await ctx.schedule("tick", period, period, Tick())
                reply_to.tell(ctx.state.value)
            case Tick():
                await ctx.state.update(lambda t: Tally(t.count, t.ticks + 1))
