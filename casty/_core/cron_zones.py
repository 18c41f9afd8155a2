"""Cron's zones: zone names, and the wall-clock questions its DST rule asks of a zone.

The rule itself (a wall time in a spring-forward gap does not fire; one repeated by a fall-back
fires once, in its first pass) is written in ``casty._core.cron``'s docstring and applied by
``Cron.next_after``; here are the PEP 495 readings it is built from: whether a wall time lies in a
transition, whether it exists, the last second of its transition (to jump over a gap or a repeat
in one step), and ``zone``, an IANA name to a ``tzinfo``.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from casty.errors import CastyError


def in_transition(wall: datetime, tz: tzinfo) -> bool:
    """Whether a naive wall time is skipped or repeated in ``tz``.

    PEP 495: the two readings of a wall time (``fold=0`` and ``fold=1``) get different UTC
    offsets exactly when the wall time lies in a DST gap or fold.
    """
    return wall.replace(tzinfo=tz, fold=0).utcoffset() != wall.replace(tzinfo=tz, fold=1).utcoffset()


def exists(wall: datetime, tz: tzinfo) -> bool:
    """Whether a naive wall time occurs in ``tz`` (is not in a spring-forward gap).

    A wall time exists when it survives a round trip through UTC unchanged.
    """
    aware = wall.replace(tzinfo=tz, fold=0)
    return aware.astimezone(timezone.utc).astimezone(tz).replace(tzinfo=None) == wall


def last_second_of_transition(wall: datetime, tz: tzinfo) -> datetime:
    """The last whole wall second of the gap or fold that ``wall`` lies in.

    Lets the search jump over a gap or a repeated hour in one step instead of rejecting
    every matching second in it. The transition spans ``|offset(fold=0) - offset(fold=1)|``
    of wall time, so ``wall`` plus that span is past it; binary search in between.
    """
    offsets = [wall.replace(tzinfo=tz, fold=fold).utcoffset() or timedelta() for fold in (0, 1)]
    inside, outside = 0, int(abs(offsets[0] - offsets[1]).total_seconds())
    while outside - inside > 1:
        middle = (inside + outside) // 2
        if in_transition(wall + timedelta(seconds=middle), tz):
            inside = middle
        else:
            outside = middle
    return wall + timedelta(seconds=inside)


def to_utc(moment: datetime) -> datetime:
    """An aware datetime in UTC: comparing or subtracting two aware datetimes that share a
    tzinfo ignores their offsets, which is wrong across a DST change."""
    return moment.astimezone(timezone.utc)


class InvalidTimeZone(CastyError, ValueError):
    """A time zone name the zone database does not know (or that is not a zone name at all)."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"unknown time zone {name!r}: {reason}")
        self.name = name


def zone(tz: str | tzinfo) -> tzinfo:
    """A tzinfo for ``tz``: an IANA name (``"Europe/Berlin"``, ``"UTC"``) through ``zoneinfo``, a tzinfo as it is.

    The zone database is the system's (or the ``tzdata`` package's), read once per name
    and cached by ``zoneinfo``; an unknown name, an empty one or a path raises
    :class:`InvalidTimeZone` naming it, anything else TypeError.
    """
    if isinstance(tz, tzinfo):
        return tz
    if not isinstance(tz, str):
        raise TypeError(f"a time zone is an IANA name (str) or a datetime.tzinfo, not {type(tz).__name__}")
    if not tz:
        raise InvalidTimeZone(tz, "the name is empty")
    try:
        return ZoneInfo(tz)
    except ZoneInfoNotFoundError:
        raise InvalidTimeZone(tz, "not in the time zone database") from None
    except ValueError as exc:  # a path, a name with '..', a NUL: zoneinfo refuses it as a key
        raise InvalidTimeZone(tz, f"not a zone name ({exc})") from None
