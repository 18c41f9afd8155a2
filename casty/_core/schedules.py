"""Persisted actor schedules: the ``@schedules`` page, the catch-up rule, the handle.

A schedule is data in the key's state, not a timer: ``(name, encoded message, due µs
since the epoch, period µs or None[, catch-up policy])``; the fifth element is written only
for a policy other than ``Skip`` (``casty._core.catchup.encode``), so a page of schedules
that all use the default is byte-for-byte the page of a node that knew no policies, and
such a page (four-element rows) decodes as ``Skip``. Whoever runs the key arms timers from that page
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
from .catchup import CatchUp, Encoded, Skip, decode

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
    catch_up: Encoded = None  # the policy as ``catchup.encode`` wrote it: None is Skip (and every row of old pages)

    def policy(self) -> CatchUp:
        """The row's catch-up policy; InvalidCatchUp for one this node cannot read (a newer version)."""
        return decode(self.catch_up)

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


class _Row(msgspec.Struct, array_like=True):
    """A page row as decoded: four elements (no policy: Skip, every page written before policies) or five."""

    name: str
    message: bytes
    due_us: int
    every_us: int | None
    catch_up: Any = None  # read loosely: a policy of a newer encoding must reach ScheduleEntry.policy (InvalidCatchUp
    # for that row only), not fail the whole page's decode


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(list[_Row])


def _row(name: str, message: bytes, due_us: int, every_us: int | None, code: Encoded) -> tuple[Any, ...]:
    # the fifth element only for a policy: array_like structs would write a trailing nil even with
    # omit_defaults, which would change the bytes (and digests) of every page of today
    return (name, message, due_us, every_us) if code is None else (name, message, due_us, every_us, code)


def encode_schedules(entries: list[ScheduleEntry]) -> bytes:
    """The ``@schedules`` page: a list of ``[name, message bytes, due µs, every µs | nil(, policy)]`` in creation order."""
    return _encoder.encode([_row(e.name, e.message, e.due_us, e.every_us, e.catch_up) for e in entries])


def encode_armed(schedules: Iterable[ArmedSchedule]) -> bytes:
    """``encode_schedules`` of the rows of armed schedules (the same bytes), without a ``ScheduleEntry`` per row."""
    return _encoder.encode([
        (a.name, a.data, a.due_us, a.every_us) if a.code is None else (a.name, a.data, a.due_us, a.every_us, a.code)
        for a in schedules
    ])


def decode_schedules(page: bytes) -> list[ScheduleEntry]:
    """The rows of an ``@schedules`` page; a policy is left encoded (``ScheduleEntry.policy`` decodes it)."""
    return [
        ScheduleEntry(r.name, r.message, r.due_us, r.every_us, tuple(r.catch_up) if type(r.catch_up) is list else r.catch_up)
        for r in _decoder.decode(page)
    ]


_SKIP: Final = Skip()


class ArmedSchedule:
    """A schedule as the running key holds it: the page row, its decoded message and its timer."""

    __slots__ = ("name", "message", "data", "due_us", "every_us", "timer", "live", "policy", "code")

    def __init__(
        self, name: str, message: Any, data: bytes, due_us: int, every_us: int | None, policy: CatchUp = _SKIP,
        code: Encoded = None,
    ) -> None:
        self.name = name
        self.policy = policy  # what a late firing does (casty._core.catchup)
        self.code = code  # ``policy`` as its page row stores it (None: Skip, no fifth element)
        self.message = message
        self.data = data
        self.due_us = due_us
        self.every_us = every_us
        self.timer: int | None = None  # its number in the node's TimerHeap, while armed
        self.live = True

    def entry(self) -> ScheduleEntry:
        return ScheduleEntry(self.name, self.data, self.due_us, self.every_us, self.code)


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

    @property
    def catch_up(self) -> CatchUp:
        """What a late firing of this schedule does (``Skip`` unless it was created with another policy)."""
        return self._armed.policy

    async def cancel(self) -> None:
        """Remove this schedule; a firing already told is not recalled."""
        if self._armed.live:
            await self._activation.cancel_schedule(self._lease, self._armed)

    def __repr__(self) -> str:
        due = self.due
        return f"Schedule({self.name!r}, interval={self.interval}, due={due.isoformat() if due else None}, message={self.message!r})"
