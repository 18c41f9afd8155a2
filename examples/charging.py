"""A subscription that charges its customer once per period (a day in production): a user's actor to test.

The key is the customer. ``Subscribe`` stores the amount and the period and starts a
persisted schedule; at the end of every period the schedule tells ``Bill``, and the body
charges every period not charged yet (after a long outage it catches up on them all). The
charge goes to a payment service outside the actor system: the service takes the money when
the request arrives, and its answer comes back ``PAYMENT_REPLY`` seconds later. The body
records the charge with ``ctx.effect("charge:<customer>:<the period's start>", amount=...)``,
the effects ledger that ``sim.checks.exactly_once`` / ``at_most_once`` count.

Two versions of one body:

- ``subscription`` **charges, then saves** the period it charged: the planted bug. A crash
  after the charge and before the save leaves the period unsaved, and after the restart the
  next ``Bill`` charges it again: the customer pays twice.
- ``fixed_subscription`` **saves, then charges**: a crash in between omits that period's
  charge (the seed's "save the day before building the report"), and a period is never
  charged twice. For money the omission is the outcome a business can handle (bill it later,
  by hand); with a payment service that takes idempotency keys, send the effect key as one
  and the repeat becomes harmless too.

``subscription_type(fixed)`` picks one, so a test can switch.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone

from casty import Askable, Context, actor

__all__ = ["Account", "Subscribe", "Bill", "subscription", "fixed_subscription", "subscription_type", "period_of", "charge_key", "PAYMENT_REPLY"]

PAYMENT_REPLY = 1.0
"""Seconds from the charge request (the money is taken) to the payment service's answer."""


@dataclass(frozen=True)
class Account:
    """What the key keeps: the amount (cents), the period (µs), and the last period charged (-1: none yet)."""

    amount: int = 0
    every_us: int = 0
    charged: int = -1


@dataclass(frozen=True)
class Subscribe(Askable[None]):
    """Charge ``amount`` cents at the end of every period of length ``every``, from the current period on."""

    amount: int
    every: timedelta = timedelta(days=1)


@dataclass(frozen=True)
class Bill:
    """Told by the ``bill`` schedule at the end of each period."""


def period_of(now_us: int, every_us: int) -> int:
    """The number of the period ``now_us`` falls in (periods count from the clock's epoch)."""
    return now_us // every_us


def charge_key(customer: str, period: int, every_us: int) -> str:
    """The effect key of one period's charge: ``charge:<customer>:<the period's start, UTC>``."""
    begins = datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=period * every_us)
    return f"charge:{customer}:{begins:%Y-%m-%dT%H:%M:%SZ}"


async def _pay(ctx: Context[Account, Subscribe | Bill], period: int, account: Account) -> None:
    """The charge at the payment service: taken as the request arrives, answered ``PAYMENT_REPLY`` s later."""
    ctx.effect(charge_key(ctx.key, period, account.every_us), amount=account.amount)
    await asyncio.sleep(PAYMENT_REPLY)


async def _subscription(ctx: Context[Account, Subscribe | Bill], *, save_first: bool) -> None:
    async for msg in ctx.inbox:
        match msg:
            case Subscribe(amount=amount, every=every, reply_to=reply_to):
                every_us = every // timedelta(microseconds=1)
                now = ctx.system.clock.now_us()
                await ctx.state.set(Account(amount, every_us, period_of(now, every_us) - 1))
                first = timedelta(microseconds=every_us - now % every_us)  # the end of this period
                await ctx.schedule("bill", first, every, Bill())
                reply_to.tell(None)
            case Bill():
                account = ctx.state.value
                ended = period_of(ctx.system.clock.now_us(), account.every_us) - 1  # the period that just ended
                for period in range(account.charged + 1, ended + 1):
                    account = replace(account, charged=period)
                    if save_first:
                        await ctx.state.set(account)
                        await _pay(ctx, period, account)
                    else:
                        await _pay(ctx, period, account)
                        await ctx.state.set(account)


@actor(initial=Account(), durable="write")
async def subscription(ctx: Context[Account, Subscribe | Bill]) -> None:
    """Charges, then saves the period charged: a crash in between charges that period twice (the planted bug)."""
    await _subscription(ctx, save_first=False)


@actor(initial=Account(), durable="write")
async def fixed_subscription(ctx: Context[Account, Subscribe | Bill]) -> None:
    """Saves the period, then charges it: a crash in between omits that charge, and none is ever repeated."""
    await _subscription(ctx, save_first=True)


def subscription_type(fixed: bool) -> object:
    """The fixed actor type or the one with the planted bug."""
    return fixed_subscription if fixed else subscription
