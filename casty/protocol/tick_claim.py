"""The claim rule of a cron tick in a cluster: the first claim wins, a tick older than its TTL is refused.

Every node that runs a cron trigger claims each tick before it tells the target, and only the
winner tells (``casty.cluster.claims`` carries the claims: one internal key per tick, whose
single owner applies this rule to the claims it receives, one at a time, and writes the
winner under its owner epoch before it answers). This module is the rule alone, as pure
functions of the record held, the claim and the owner's wall clock, with no actor, no loop
and no clock of its own, so that it can be read and property-tested apart:

1. **First writer wins.** Once a winner is recorded for the tick, every claim is answered
   with that winner (the winner itself too, if it asks again), and nothing more is written.
2. **Expiry.** With no winner recorded, a claim for a tick older than its TTL on the
   owner's clock (``now - tick > ttl``) is refused: nothing is written, the answer names no
   winner (``REFUSED``). The claimant applies the same test before it asks. This is also
   what keeps a record deleted at ``tick + ttl`` from being won afresh by a late claim.
3. **Otherwise** the claimant wins: the record to write expires at ``tick + ttl``, and the
   answer (the claimant) goes out only once that write is confirmed.
4. **TTL.** A tick's TTL is the cron's period at that tick, clamped to [1 min, 24 h]; a
   cron's last tick (no period) gets 24 h.
"""

from __future__ import annotations

from typing import Final

__all__ = ["CLAIM_TTL_MAX_US", "CLAIM_TTL_MIN_US", "REFUSED", "claim_ttl_us", "first_writer_wins", "is_expired"]

CLAIM_TTL_MIN_US: Final = 60 * 1_000_000
"""The shortest claim TTL (1 min), whatever the cron's period."""

CLAIM_TTL_MAX_US: Final = 24 * 3600 * 1_000_000
"""The longest claim TTL (24 h); also the TTL of a cron's last tick, which has no period."""

REFUSED: Final = ""
"""The answer to a claim for a tick that is already older than its TTL: no winner (node ids are never empty)."""


def claim_ttl_us(period_us: int | None) -> int:
    """The claim TTL of a tick whose cron period is ``period_us``: clamped to [1 min, 24 h]; None (no next tick) is 24 h (rule 4)."""
    if period_us is None:
        return CLAIM_TTL_MAX_US
    if isinstance(period_us, bool) or not isinstance(period_us, int):
        raise TypeError(f"a cron period is an int of microseconds, got {period_us!r}")
    return min(max(period_us, CLAIM_TTL_MIN_US), CLAIM_TTL_MAX_US)


def is_expired(tick_us: int, ttl_us: int, now_us: int) -> bool:
    """Whether a tick is older than its TTL at ``now_us``: such a tick is skipped, never claimed (rule 2)."""
    return now_us - tick_us > ttl_us


def first_writer_wins(winner: str | None, claimant: str, tick_us: int, ttl_us: int, now_us: int) -> tuple[int | None, str]:
    """``(expiry of the record to write, or None; answer)`` for ``claimant``'s claim of ``tick_us`` arriving at ``now_us``.

    ``winner`` is the winner already recorded for the tick (None: no record). Rules 1-3 of the
    module docstring: the recorded winner, unchanged; else ``REFUSED`` for an expired tick; else
    the claimant, with a record that expires at ``tick_us + ttl_us``.
    """
    if winner is not None:
        return None, winner
    if is_expired(tick_us, ttl_us, now_us):
        return None, REFUSED
    return tick_us + ttl_us, claimant
