"""Durations as the runtime's options take them: a ``timedelta`` or a number of seconds, checked once.

Every duration option (an actor type's, the system's, the cluster's, the membership core's,
a node's) goes through ``duration``, so they all refuse the same values with the same words.
It lives in a module of its own, importing nothing of casty, so that the sans-I/O cores can
use it too.
"""

from __future__ import annotations

import math
from datetime import timedelta

__all__ = ["duration", "seconds"]

_MAX_SECONDS = timedelta.max.total_seconds()


def duration(value: timedelta | float | int, what: str, *, positive: bool = False) -> float:
    """A duration given as a timedelta or as seconds, as float seconds, checked where the option is written.

    NaN compares false with everything, so a NaN deadline is never reached and a NaN idle
    time made the idle check re-arm itself for "now" forever (100% CPU); infinity never
    fires either, and past ``timedelta.max`` no timedelta or datetime can say when. So a
    duration is a finite number of seconds up to ``timedelta.max``, never negative, and
    not zero where ``positive`` (a zero ask timeout would fail every ask). Every duration
    option of the runtime goes through here, so they all refuse the same values the same way.
    """
    if isinstance(value, timedelta):
        out = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            out = float(value)
        except OverflowError:  # an int beyond any float
            out = math.inf
    else:
        raise TypeError(f"{what} must be a timedelta or a number of seconds, not {type(value).__qualname__}")
    if not abs(out) <= _MAX_SECONDS:
        raise ValueError(f"{what} must be a finite duration of at most timedelta.max, got {value!r}")
    if out < 0:
        raise ValueError(f"{what} must not be negative, got {value!r}")
    if positive and out == 0:
        raise ValueError(f"{what} must be positive, got {value!r}")
    return out


def seconds(value: timedelta | float | int | None, what: str, *, positive: bool = False) -> float | None:
    """``duration`` for an option where None means "not set" (None stays None)."""
    return None if value is None else duration(value, what, positive=positive)
