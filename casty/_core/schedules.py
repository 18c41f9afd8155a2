"""Persisted actor schedules: the ``@schedules`` page, the catch-up rule, the handle.

A schedule is data in the key's state, not a timer: ``(name, encoded message, due µs
since the epoch, period µs or None)``. Whoever runs the key arms timers from that page
against its wall clock; a firing tells the message and writes the next due. Keeping the
rule here, as pure functions over integers, lets the tests and the simulator check it
exactly, without a loop.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar

import msgspec

from ..clock import to_datetime, to_us

if TYPE_CHECKING:
    from .activation_schedules import ScheduleWork

__all__ = [
    "ScheduleEntry", "ArmedSchedule", "catch_up", "checked_due", "encode_schedules", "encode_armed", "decode_schedules",
    "Schedule", "to_micros", "FIRST_US", "LAST_US",
]

M = TypeVar("M")


@dataclass(frozen=True, slots=True)
class ScheduleEntry:
    """One row of the ``@schedules`` page, exactly as stored and replicated."""

    name: str
    message: bytes
    due_us: int
    every_us: int | None

    def problem(self) -> str | None:
        """Why this row cannot be armed, or None: a page may come from a node without today's checks (an older
        version, a peer), and a due past the last datetime or a period of zero would break the key's timers."""
        if not FIRST_US <= self.due_us <= LAST_US:
            return f"due {self.due_us} \u00b5s is past the last datetime"
        if self.every_us is not None and self.every_us <= 0:
            return f"period {self.every_us} \u00b5s is not positive"
        return None


def catch_up(due_us: int, every_us: int, now_us: int) -> tuple[int, int]:
    """The next due after a firing at ``now_us``, and how many grid times were skipped.

    ``next = due + every * (max(0, now - due) // every + 1)``: the first time on the
    fixed-rate grid strictly after ``now`` (or one period after ``due`` when on time). A
    late firing delivers once and skips the rest: there is no burst of missed occurrences.
    """
    skipped = max(0, now_us - due_us) // every_us
    return due_us + every_us * (skipped + 1), skipped


FIRST_US: Final = to_us(datetime.min.replace(tzinfo=timezone.utc))
LAST_US: Final = to_us(datetime.max.replace(tzinfo=timezone.utc))
"""The due times a schedule may hold, µs since the epoch: the UTC datetimes Python can represent.

A due time outside them cannot become ``Schedule.due``, a ``repr`` or a ``list_schedules``
row, and past 2**64 µs not even a page row; so a schedule never holds one."""

_LAST = datetime.max.replace(tzinfo=timezone.utc).isoformat()


def checked_due(what: str, argument: str, value: object, due_us: int) -> int:
    """``due_us``, or ValueError naming ``argument`` when it is not a representable UTC datetime.

    Called with every due time a new schedule implies (its first, and its next for an
    interval) before anything is changed, so a refused schedule leaves nothing behind.
    """
    if not FIRST_US <= due_us <= LAST_US:
        raise ValueError(f"{what}: {argument}={value} puts a due time past {_LAST}, the last datetime")
    return due_us


def to_micros(value: timedelta, what: str) -> int:
    """A timedelta as whole microseconds (exact: timedelta itself has µs resolution)."""
    if not isinstance(value, timedelta):
        raise TypeError(f"{what} must be a timedelta, not {type(value).__qualname__}")
    return (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds


_Row = tuple[str, bytes, int, int | None]
_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(list[_Row])


def encode_schedules(entries: list[ScheduleEntry]) -> bytes:
    """The ``@schedules`` page: a list of ``[name, message bytes, due µs, every µs | nil]`` in creation order."""
    return _encoder.encode([(e.name, e.message, e.due_us, e.every_us) for e in entries])


def encode_armed(schedules: Iterable[ArmedSchedule]) -> bytes:
    """``encode_schedules`` of the rows of armed schedules (the same bytes), without a ``ScheduleEntry`` per row."""
    return _encoder.encode([(a.name, a.data, a.due_us, a.every_us) for a in schedules])


def decode_schedules(page: bytes) -> list[ScheduleEntry]:
    return [ScheduleEntry(name, message, due, every) for name, message, due, every in _decoder.decode(page)]


class ArmedSchedule:
    """A schedule as the running key holds it: the page row, its decoded message and its timer."""

    __slots__ = ("name", "message", "data", "due_us", "every_us", "timer", "live", "envelope")

    def __init__(self, name: str, message: Any, data: bytes, due_us: int, every_us: int | None) -> None:
        self.name = name
        self.message = message
        self.data = data
        self.due_us = due_us
        self.every_us = every_us
        self.timer: int | None = None  # its number in the node's TimerHeap, while armed
        self.live = True
        self.envelope: Any = None  # the mailbox envelope of ``message``, made at the first firing and reused

    def entry(self) -> ScheduleEntry:
        return ScheduleEntry(self.name, self.data, self.due_us, self.every_us)


class Schedule(Generic[M]):
    """A handle on one persisted schedule of the running key (``ctx.schedules[name]``).

    It reads the live row, so ``due`` follows every firing; ``due`` is None once the
    schedule is gone (a one-shot that fired, a cancelled or replaced schedule). ``cancel``
    removes it from the page through the same fenced write as any state change.
    """

    __slots__ = ("_activation", "_lease", "_armed")

    def __init__(self, activation: ScheduleWork, lease: int, armed: ArmedSchedule) -> None:
        self._activation = activation
        self._lease = lease
        self._armed = armed

    @property
    def name(self) -> str:
        return self._armed.name

    @property
    def message(self) -> M:
        return self._armed.message  # type: ignore[no-any-return]

    @property
    def interval(self) -> timedelta | None:
        every = self._armed.every_us
        return None if every is None else timedelta(microseconds=every)

    @property
    def due(self) -> datetime | None:
        return to_datetime(self._armed.due_us) if self._armed.live else None

    async def cancel(self) -> None:
        """Remove this schedule; a firing already told is not recalled."""
        if self._armed.live:
            await self._activation.cancel_schedule(self._lease, self._armed)

    def __repr__(self) -> str:
        due = self.due
        return f"Schedule({self.name!r}, interval={self.interval}, due={due.isoformat() if due else None}, message={self.message!r})"
