"""``ctx.occurrence``: which occurrence of which schedule the message being handled is.

A schedule firing delivers its message in a ``ScheduledEnvelope``, an ``Envelope`` with the
occurrence's integers beside it (one small object per firing; the datetimes are made only
when the body asks). Every other envelope (a tell, an ask, a ``ctx.timer`` tick) is a plain
``Envelope``, so ``ctx.occurrence`` is None for it. Like Orleans' ``TickStatus``, but with the
number of occurrences the firing's catch-up policy skipped.

Two sources: a persisted schedule (``ctx.schedule``; ``schedule`` is its name) and a node
schedule (``system.schedule*``; ``schedule`` is its reference, ``due`` its nominal tick,
``skipped`` what its ``misfire=`` policy skipped). A persisted schedule fires where its key
runs. A node schedule's tick told to a key another node owns crosses the wire with its
occurrence (``casty.cluster.routing.ScheduledDeliver``: the four integers and the name, each
checked by ``check_occurrence`` when the frame is built and when it is decoded), and the
owner queues it in a ``ScheduledEnvelope`` as the firing node would have: the body reads the
same occurrence there, and a drop of it there (its handler failed, the owner crashed or lost
the key with it queued) names it (``ScheduledMessageDropped``). A cron tick claimed
cluster-wide is told by the claim's winner, the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..clock import to_datetime
from ..errors import CastyError
from .mailbox import Envelope
from .schedules import FIRST_US, LAST_US

__all__ = ["InvalidOccurrence", "MAX_SKIPPED", "Occurrence", "ScheduledEnvelope", "check_occurrence"]

MAX_SKIPPED = 2**63 - 1
"""The most occurrences one firing may say it skipped: what a frame's signed 64-bit integer holds."""


class InvalidOccurrence(CastyError, ValueError):
    """An occurrence whose fields no firing makes: an empty schedule, a time that is no UTC datetime, a negative skip."""


def check_occurrence(schedule: object, due_us: object, fired_us: object, skipped: object) -> None:
    """Raise ``InvalidOccurrence`` naming the first field no schedule firing could have produced.

    The limits a firing's occurrence keeps on the node that fires it (a non-empty reference or
    name, a due and a firing time that are representable UTC datetimes, ``0 <= skipped``),
    checked where an occurrence comes from outside that node: a frame built to carry one, and
    the same frame decoded from the network (the wire turns this error into ``WireError``).
    ``bool`` is refused where an ``int`` is meant (it is one to Python, not to a schedule).
    """
    if type(schedule) is not str or not schedule:
        raise InvalidOccurrence(f"an occurrence's schedule is a non-empty str, got {schedule!r:.80}")
    for field, value in (("due_us", due_us), ("fired_us", fired_us)):
        if type(value) is not int or not FIRST_US <= value <= LAST_US:
            raise InvalidOccurrence(
                f"an occurrence's {field} is an int of µs between {FIRST_US} and {LAST_US} (a UTC datetime), got {value!r:.80}"
            )
    if type(skipped) is not int or not 0 <= skipped <= MAX_SKIPPED:
        raise InvalidOccurrence(f"an occurrence's skipped is an int from 0 to {MAX_SKIPPED}, got {skipped!r:.80}")


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
