"""Cluster-wide claims of cron ticks: one delivery per tick, however many nodes run the trigger.

In cluster mode every node that registers a cron node schedule runs its own trigger (seed:
grain scheduling). At each tick each of them *claims* the tick before telling the target,
and only the winner tells. The claim must be decided by something all nodes agree on, and
the runtime already has exactly one such thing: a key's state, written by the key's single
owner under an owner epoch and confirmed by a quorum of its replicas. So a claim is a key
of the internal actor type :data:`schedule_fire`, named ``schedule-fire::<reference>@<tick>``
(the tick's nominal time in UTC, ISO 8601), and claiming is an ask to it:

* the owner handles claims one at a time (its mailbox serializes them); the first claim
  writes ``ClaimRecord(winner=...)`` and is answered only once that write is confirmed by
  the quorum, every later claim is answered with the recorded winner (first writer wins);
* an owner replaced while deciding is fenced: its write is refused, its asker gets
  ``Unavailable``, and the next owner reads the newest confirmed record from a quorum
  before it answers anyone, so two nodes can never both be told they won;
* a claim for a tick older than its TTL is refused (the answer names no winner) by the
  claimant before asking, and again by the owner on its own clock when the ask arrives;
* the record removes itself (``ctx.state.delete``) once the TTL has passed, through a
  persisted one-shot schedule of the claim key, so it survives a crash of the claim's
  owner like any actor schedule. After that, a late claim finds no record, but it is
  refused as expired by the same age test; only an owner whose clock is behind the
  deleting owner's by more than the remaining slack could accept it (see ``decide``).

No node registers anything for this: the type is named ``casty.cluster.claims:schedule_fire``,
every node imports this module with ``casty.Cluster`` (``casty.cluster.config``), and a node that
receives a claim for a key it owns finds the type by name like any other. Importing it also
gives the node scheduler its claims (``CLAIMS``, the ``casty._core.plugin.TickClaims`` of this
module, through ``provide_tick_claims``): the runtime names what it asks of a claim and never
imports this module.

Nothing deletes a claim on delivery or on cancel (a claim is never withdrawn); only its TTL
ends it, as an entry put with a TTL in GoAkt's cluster store expires.

The TTL is the cron's period at that tick (the gap to its next fire time) clamped to
[1 min, 24 h]: long enough that a skewed or slow node's claim still finds the record,
short enough that records do not pile up.

The rule itself (first writer wins, expiry, the TTL) is ``casty.protocol.tick_claim``, pure
functions with a property test; this module is the actor and the scheduler's claims around it.

What this does not give: the winner crashing (or its answer being lost) between the
confirmed claim and its tell loses that tick cluster-wide, as the seed says; nobody else
tells it, since they all lost. Delivery is at most once per tick.

``decide`` is the rule on the actor's types: the body of :data:`schedule_fire` only feeds
it the record, the claim and the owner's wall clock, and performs what it returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Final

from .._core.actor import actor
from ..clock import to_datetime
from .._core.context import Context
from .._core.ref import Askable
from .._core.scheduler import provide_tick_claims
from ..protocol.tick_claim import REFUSED, claim_ttl_us, first_writer_wins, is_expired

if TYPE_CHECKING:
    from .._core.system import ActorSystem

__all__ = [
    "CLAIMS",
    "Claim",
    "ClaimRecord",
    "ClusterClaims",
    "Expire",
    "claim_key",
    "decide",
    "schedule_fire",
]


def claim_key(reference: str, tick_us: int) -> str:
    """The claim key of a tick: ``schedule-fire::<reference>@<nominal tick, UTC, ISO 8601>``."""
    if not isinstance(reference, str) or not reference:
        raise ValueError(f"a claim needs a non-empty schedule reference, got {reference!r}")
    return f"schedule-fire::{reference}@{to_datetime(tick_us).isoformat()}"


@dataclass(frozen=True)
class ClaimRecord:
    """The state of a claim key: who won the tick, which tick, and when the record removes itself."""

    winner: str
    tick_us: int
    expires_us: int


@dataclass(frozen=True)
class Claim(Askable[str]):
    """Claim a tick for ``node``; the answer is the winner's node id, or ``REFUSED`` (the tick expired)."""

    node: str
    tick_us: int
    ttl_us: int


@dataclass(frozen=True)
class Expire:
    """The claim's TTL has passed: delete the record (sent by the key's own persisted schedule)."""


def decide(record: ClaimRecord | None, claim: Claim, now_us: int) -> tuple[ClaimRecord | None, str]:
    """First writer wins (``casty.protocol.tick_claim.first_writer_wins``): ``(record to write or None, answer)`` for ``claim`` arriving at ``now_us``.

    * a record exists: nothing to write, the answer is its winner (the claimant itself
      if it asks again, e.g. after a retry);
    * no record, and the tick is older than its TTL on the owner's clock: nothing to
      write, ``REFUSED``. This is also what keeps a deleted record from being claimed
      afresh: deletion happens at ``tick + ttl`` on the owner's clock, after which every
      claim of that tick is refused, unless a later owner's clock is behind by more than
      the time the claim spent in flight past that point;
    * otherwise: write ``ClaimRecord(claim.node, tick, tick + ttl)`` and, once the write
      is confirmed, answer ``claim.node``.
    """
    expires_us, answer = first_writer_wins(
        None if record is None else record.winner, claim.node, claim.tick_us, claim.ttl_us, now_us
    )
    return (None if expires_us is None else ClaimRecord(claim.node, claim.tick_us, expires_us)), answer


@actor(initial=None)
async def schedule_fire(ctx: Context[ClaimRecord | None, Claim | Expire]) -> None:
    """A cron tick's claim key: answers claims first-writer-wins, then removes itself after the TTL.

    The answer goes out only after the record's write is confirmed (``state.set`` returns
    then): a winner is never told before the quorum holds its name. The expiry schedule is
    written after the answer, so that it does not delay the winner's tell; should that
    write fail, the record simply stays (a claim is never *wrongly* deleted, at worst kept).
    """
    async for msg in ctx.inbox:
        if isinstance(msg, Claim):
            now_us = ctx.system.clock.now_us()
            record, answer = decide(ctx.state.value, msg, now_us)
            if record is not None:
                await ctx.state.set(record)
            msg.reply_to.tell(answer)
            if record is not None:
                remaining = max(0, record.expires_us - ctx.system.clock.now_us())
                await ctx.schedule("expire", timedelta(microseconds=remaining), None, Expire())
        else:
            await ctx.state.delete()  # also cancels the expiry schedule: the key may now idle out


class ClusterClaims:
    """The node scheduler's claims of cron ticks (``casty._core.plugin.TickClaims``): asks of :data:`schedule_fire` keys."""

    def key(self, reference: str, tick_us: int) -> str:
        """The tick's claim key (``claim_key``)."""
        return claim_key(reference, tick_us)

    def ttl_us(self, period_us: int | None) -> int:
        """The tick's claim TTL (``claim_ttl_us``)."""
        return claim_ttl_us(period_us)

    def expired(self, tick_us: int, ttl_us: int, now_us: int) -> bool:
        """Whether the tick is older than its TTL (``is_expired``)."""
        return is_expired(tick_us, ttl_us, now_us)

    async def claim(self, system: ActorSystem, key: str, tick_us: int, ttl_us: int) -> str | None:
        """Ask the claim key for ``system``'s node: the winner, or None for ``REFUSED`` (expired on the owner's clock)."""
        answer = await system.ask(system.ref(schedule_fire, key), Claim(system.node, tick_us, ttl_us))
        return None if answer == REFUSED else answer


CLAIMS: Final = ClusterClaims()
"""The claims every node scheduler in cluster mode uses (given to it at import, below)."""

provide_tick_claims(CLAIMS)
