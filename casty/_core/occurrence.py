"""``ctx.occurrence``: which occurrence of which schedule the message being handled is.

A schedule firing delivers its message in a ``ScheduledEnvelope``, an ``Envelope`` with the
occurrence's integers beside it (one small object per firing; the datetimes are made only
when the body asks). Every other envelope (a tell, an ask, a ``ctx.timer`` tick) is a plain
``Envelope``, so ``ctx.occurrence`` is None for it. Like Orleans' ``TickStatus``, but with the
number of occurrences the firing's catch-up policy skipped.

Two sources: a persisted schedule (``ctx.schedule``; ``schedule`` is its name) and a node
schedule (``system.schedule*``; ``schedule`` is its reference, ``due`` its nominal tick,
``skipped`` what its ``misfire=`` policy skipped). A node schedule's occurrence is local
only: in cluster mode a tick told to a key owned by another node crosses the wire as a plain
tell (the frame carries the message and its origin, nothing more), so there the body reads
None. A cron tick claimed cluster-wide is told by the claim's winner, and carries its
occurrence when that node also owns the key.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..clock import to_datetime
from .mailbox import Envelope

__all__ = ["Occurrence", "ScheduledEnvelope"]


@dataclass(frozen=True, slots=True)
class Occurrence:
    """One occurrence of a schedule, as the body handling its message sees it.

    ``due`` is the grid time it stands for and ``fired_at`` the wall time its timer went
    off (both UTC; ``fired_at - due`` is how late it is); ``skipped`` counts the occurrences
    the same firing's catch-up policy will never deliver (0 when on time). A ``FireAll``
    burst delivers several occurrences fired at the same time, each with its own ``due``.
    """

    schedule: str
    due: datetime
    fired_at: datetime
    skipped: int


class ScheduledEnvelope(Envelope):
    """The envelope of one schedule firing: the message and which occurrence it is."""

    __slots__ = ("schedule", "due_us", "fired_us", "skipped")

    def __init__(self, message: Any, schedule: str, due_us: int, fired_us: int) -> None:
        # Envelope's fields set here, not through its __init__: one envelope per firing, on the firing's hot path
        self.message = message
        self.ask = None
        self.chain = ()
        self.quiet = False
        self.origin = None
        self.schedule = schedule
        self.due_us = due_us
        self.fired_us = fired_us
        self.skipped = 0  # set by the firing once its catch-up is known (before the body can read it)

    def occurrence(self) -> Occurrence:
        return Occurrence(self.schedule, to_datetime(self.due_us), to_datetime(self.fired_us), self.skipped)
