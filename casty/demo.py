"""``python -m casty.demo``: a two-second tour of the local runtime, narrated by its own events.

It runs on the real clock and a real SQLite file, and prints what the runtime reports
through its observer port: activations starting and ending, schedule firings, a failure
and its restart, a behavior change, and a second system recovering a durable key.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from . import observer as ev
from ._core.actor import actor
from ._core.context import Context
from .errors import ActorFailed
from ._core.ref import Askable
from .store import SQLiteStore
from ._core.system import ActorSystem


@dataclass(frozen=True)
class Deposit(Askable[int]):
    amount: int


@dataclass(frozen=True)
class Balance(Askable[int]):
    pass


@dataclass(frozen=True)
class Interest:
    """Told by the account's own schedule."""


@dataclass(frozen=True)
class Freeze(Askable[None]):
    pass


Message = Deposit | Balance | Interest | Freeze


@actor(initial=100, durable="write")
async def account(ctx: Context[int, Message]) -> None:
    """A durable bank account that earns 1 of interest on every schedule tick."""
    async for msg in ctx.inbox:
        match msg:
            case Deposit(amount=amount, reply_to=reply_to):
                if amount < 0:
                    raise ValueError(f"negative deposit {amount}")
                reply_to.tell(await ctx.state.update(lambda v: v + amount))
                if "interest" not in ctx.schedules:
                    await ctx.schedule("interest", timedelta(milliseconds=300), timedelta(milliseconds=300), Interest())
            case Balance(reply_to=reply_to):
                reply_to.tell(ctx.state.value)
            case Interest():
                await ctx.state.update(lambda v: v + 1)
            case Freeze(reply_to=reply_to):
                await ctx.become(frozen_account)
                reply_to.tell(None)


@actor(initial=0, durable="write")
async def frozen_account(ctx: Context[int, Message]) -> None:
    """The same account after ``become``: it refuses deposits but still earns interest."""
    async for msg in ctx.inbox:
        match msg:
            case Deposit(reply_to=reply_to):
                reply_to.tell(-1)
            case Balance(reply_to=reply_to):
                reply_to.tell(ctx.state.value)
            case Interest():
                await ctx.state.update(lambda v: v + 1)
            case Freeze(reply_to=reply_to):
                reply_to.tell(None)


class Narrator:
    """An observer that prints the events a reader cares about, with the elapsed time."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()

    def say(self, text: str) -> None:
        print(f"  {time.perf_counter() - self.t0:6.3f}s  {text}")

    def __call__(self, event: ev.Event) -> None:
        match event:
            case ev.ActivationStarted(key=key, behavior=behavior, recovered=recovered, restart=restart):
                name = behavior.split(":")[1]
                if restart:
                    self.say(f"[{key}] body started again as {name} (run #{restart + 1}, from the last saved state)")
                else:
                    how = "recovered its saved state" if recovered else "no saved state: initial"
                    self.say(f"[{key}] activation started as {name} ({how})")
            case ev.ActivationEnded(key=key, reason=reason):
                self.say(f"[{key}] activation ended: {reason}")
            case ev.ActivationFailed(key=key, error=error, retry_in=retry_in):
                self.say(f"[{key}] body failed with {error}; restart in {retry_in * 1000:.0f} ms")
            case ev.ScheduleFired(key=key, name=name):
                self.say(f"[{key}] schedule {name!r} fired")
            case ev.ScheduleCaughtUp(key=key, name=name, skipped=skipped):
                self.say(f"[{key}] schedule {name!r} caught up: {skipped} occurrences skipped, no burst")
            case _:
                pass


async def main() -> None:
    narrator = Narrator()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "accounts.sqlite3"
        print(f"casty demo: one node, a durable account on {path.name}\n")
        store = SQLiteStore(path)
        async with ActorSystem(observer=narrator, store=store, idle_after=timedelta(seconds=5)) as system:
            ana = system.ref(account, "ana")
            balance = await ana.ask(Deposit(50))
            narrator.say(f"ask Deposit(50) -> {balance}")
            await asyncio.sleep(0.7)
            balance = await ana.ask(Balance())
            narrator.say(f"ask Balance() -> {balance}  (100 + 50 + two interest ticks)")
            try:
                await ana.ask(Deposit(-5))
            except ActorFailed as failure:
                narrator.say(f"ask Deposit(-5) -> ActorFailed({failure.error!r})")
            await asyncio.sleep(0.2)
            balance = await ana.ask(Balance())
            narrator.say(f"ask Balance() -> {balance}  (one more tick; the failed deposit changed nothing)")
            await ana.ask(Freeze())
            balance = await ana.ask(Deposit(10))
            narrator.say(f"ask Deposit(10) after Freeze -> {balance}  (new behavior, same key)")
            narrator.say("the node stops; the account is still marked @active on disk")
        store.close()

        print()
        store = SQLiteStore(path)
        narrator.say("one second with no node running ...")
        await asyncio.sleep(1.0)
        async with ActorSystem(observer=narrator, store=store) as system:
            narrator.say("a new system opens the same file; nobody sends a message:")
            await asyncio.sleep(0.4)
            balance = await system.ref(account, "ana").ask(Balance())
            narrator.say(f"ask Balance() -> {balance}  (state, behavior and schedule came back from SQLite)")
        store.close()


if __name__ == "__main__":
    asyncio.run(main())
