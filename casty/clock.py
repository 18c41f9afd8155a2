"""Wall clocks: the real one, and a hand-driven one for tests and examples."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

__all__ = ["SystemClock", "ManualClock", "to_datetime", "to_us"]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class SystemClock:
    """The machine's wall clock (``time.time_ns``), the real adapter of the Clock port."""

    def now_us(self) -> int:
        return time.time_ns() // 1_000

    def __repr__(self) -> str:
        return "SystemClock()"


class ManualClock:
    """A wall clock that moves only when told to, so schedule tests need no real sleeps.

    ``advance`` moves it forward, ``set`` jumps anywhere (backward too, like an NTP step).
    Timers of the asyncio loop are not affected: pair it with a loop whose time you also
    control, or with short real waits.
    """

    def __init__(self, start_us: int = 1_767_225_600_000_000) -> None:
        # Default start: 2026-01-01T00:00:00Z, a readable instant far from the epoch.
        self._now_us = start_us

    def now_us(self) -> int:
        return self._now_us

    def advance(self, delta: timedelta | float) -> None:
        seconds = delta.total_seconds() if isinstance(delta, timedelta) else float(delta)
        self._now_us += round(seconds * 1_000_000)

    def set(self, when: datetime | int) -> None:
        self._now_us = to_us(when) if isinstance(when, datetime) else int(when)

    def __repr__(self) -> str:
        return f"ManualClock({to_datetime(self._now_us).isoformat()})"


def to_datetime(us: int) -> datetime:
    """Microseconds since the epoch as an aware UTC datetime (exact, no float rounding)."""
    return _EPOCH + timedelta(microseconds=us)


def to_us(when: datetime) -> int:
    """An aware datetime as microseconds since the epoch (exact, no float rounding)."""
    if when.tzinfo is None:
        raise ValueError(f"naive datetime {when!r}: give a time zone")
    delta = when - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
