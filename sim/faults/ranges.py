"""The fault ranges: how long, how far, how likely each kind of fault may be, in one table.

Two drawers read it: the swarm's seeded generator (``sim.faults.generate``: realistic plans, each seed
its own) and the shrinkable Hypothesis space of ``sim.testing.fault_plans`` (and its ``PlanSpace.draw``).
A user's space must be as wide as the project's regression net (past the failure detector, minutes back
in time), so both read the same numbers here and cannot drift apart; ``tests/test_fault_ranges.py``
draws from both and fails if either leaves the table or no longer reaches its ends.

The generator draws the ``short`` span, or the ``long`` one when its mix says a fault is long; the
Hypothesis space draws one integer over the whole envelope (``short.low`` to ``long.high``, in ms),
from the ``mildest`` value where it shrinks toward something gentler than the generator ever draws
(a clock step of 1 ms, a drift of 1 ppm, a loss of 1 %).

Changing a number here moves the draws of ``generate``: every swarm and cluster-random digest after it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Final

__all__ = [
    "Span",
    "CrashRanges",
    "PauseRanges",
    "CutRanges",
    "ClockStepRanges",
    "DriftRanges",
    "LinkRanges",
    "AimedRanges",
    "FaultRanges",
    "RANGES",
]


@dataclass(frozen=True)
class Span:
    """A closed range drawn uniformly, kept in integer thousandths (``scale`` 1000: ms of a length, permille of a
    probability) or units (``scale`` 1: ppm). Integers because the Hypothesis space draws integers, and because a
    quotient ``low / scale`` is the very float a literal (``0.3``) is, so the generator's draws are unchanged."""

    low: int
    high: int
    scale: int = 1000

    def __post_init__(self) -> None:
        if not self.low <= self.high:
            raise ValueError(f"a span needs low <= high, got {self.low!r}..{self.high!r}")

    @property
    def least(self) -> float:
        """The low end in seconds (or as a probability, or in ppm)."""
        return self.low / self.scale

    @property
    def most(self) -> float:
        """The high end in seconds (or as a probability, or in ppm)."""
        return self.high / self.scale

    def draw(self, rng: random.Random) -> float:
        """One value, as ``rng.uniform(least, most)`` (the very call the generator made before the table)."""
        return rng.uniform(self.low / self.scale, self.high / self.scale)

    def ints(self) -> tuple[int, int]:
        """``(low, high)``: the range the Hypothesis space draws its integer from."""
        return self.low, self.high


@dataclass(frozen=True)
class CrashRanges:
    """A crash: the node is down for ``down`` s, unless (``stays_down``) it is restarted only when the run heals."""

    down: Span = Span(300, 10_000)
    stays_down: float = 0.1
    spread: Span = Span(0, 300)  # the generator's crash or pause group: each node within this of the first


@dataclass(frozen=True)
class PauseRanges:
    """A pause (a long GC, a frozen VM); a long one outlasts the failure detector."""

    short: Span = Span(200, 3_000)
    long: Span = Span(3_000, 15_000)

    def envelope(self) -> Span:
        """What the Hypothesis space draws: from the shortest short pause to the longest long one."""
        return Span(self.short.low, self.long.high)


@dataclass(frozen=True)
class CutRanges:
    """A partition or a flap (a partition that comes and goes every ``period`` s)."""

    short: Span = Span(300, 3_000)
    long: Span = Span(3_000, 15_000)
    period: Span = Span(100, 2_000)

    def envelope(self) -> Span:
        return Span(self.short.low, self.long.high)


@dataclass(frozen=True)
class ClockStepRanges:
    """A clock step either way by ``short`` s, or (long) ``back`` s back, stepped forward again ``fix_after`` s later."""

    short: Span = Span(50, 3_000)
    back: Span = Span(30_000, 600_000)
    fix_after: Span = Span(1_000, 15_000)
    mildest: int = 1  # ms: the Hypothesis space shrinks a step toward +1 ms

    def envelope(self) -> Span:
        """What the Hypothesis space draws either way: from the mildest step to the longest step back."""
        return Span(self.mildest, self.back.high)


@dataclass(frozen=True)
class DriftRanges:
    """A clock drift either way, in ppm."""

    short: Span = Span(50, 2_000, scale=1)
    long: Span = Span(50, 50_000, scale=1)
    mildest: int = 1  # the Hypothesis space shrinks a drift toward +1 ppm

    def envelope(self) -> Span:
        return Span(self.mildest, self.long.high, scale=1)


@dataclass(frozen=True)
class LinkRanges:
    """A loss, duplicate or reorder episode: its length, its probability and the copy's (or the frame's) extra delay."""

    length: Span = Span(300, 8_000)
    p: Span = Span(50, 300)
    p_long: Span = Span(50, 600)
    mildest_p: int = 10  # permille: the Hypothesis space shrinks a probability toward 1 %
    duplicate_delay: Span = Span(0, 500)
    reorder_delay: Span = Span(5, 200)

    def p_envelope(self) -> Span:
        return Span(self.mildest_p, self.p_long.high)


@dataclass(frozen=True)
class AimedRanges:
    """The generator's ``OnAcquire`` faults (the Hypothesis space draws none: it knows no actor or key)."""

    delay: Span = Span(1, 50)  # when it does not hit at once
    pause: Span = Span(200, 3_000)
    pause_long: Span = Span(3_000, 8_000)
    cut: Span = Span(50, 1_000)
    down_soon: Span = Span(50, 500)  # within a heartbeat: promises of the previous life still in flight
    down_later: Span = Span(500, 5_000)


@dataclass(frozen=True)
class FaultRanges:
    """Every kind's ranges (the one table; ``RANGES`` is the one instance)."""

    crash: CrashRanges = CrashRanges()
    pause: PauseRanges = PauseRanges()
    cut: CutRanges = CutRanges()
    clock_step: ClockStepRanges = ClockStepRanges()
    drift: DriftRanges = DriftRanges()
    link: LinkRanges = LinkRanges()
    aimed: AimedRanges = AimedRanges()


RANGES: Final[FaultRanges] = FaultRanges()
"""The ranges ``generate`` and ``sim.testing``'s spaces draw within."""
