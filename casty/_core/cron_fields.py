"""Quartz cron expressions, the parser: text in, ``CronFields`` out (or ``InvalidCronExpression``).

The dialect and its rules are written in ``casty._core.cron``'s docstring; this module holds the
fields' bounds and names, the parsed representation (one selector per field, each answering "which
values" or, for the day field, "which days of this month"), and the parser that builds it, field by
field from the left, naming the field and the token at fault. ``casty._core.cron`` searches the
result; nothing here knows about time zones.
"""

from __future__ import annotations

import calendar
import re
from bisect import bisect_left
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Final, TypeAlias

from casty.errors import InvalidCronExpression

FIRST_YEAR: Final = 1970
LAST_YEAR: Final = 2099
"""Quartz's year range; also the search horizon, so a search always ends."""


# --- fields -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Field:
    """What a field accepts: its name in error messages, its bounds, and its value names."""

    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()
    """Three-letter names; ``names[i]`` stands for ``low + i``."""

    @property
    def span(self) -> int:
        return self.high - self.low + 1


_SECOND: Final = _Field("second", 0, 59)
_MINUTE: Final = _Field("minute", 0, 59)
_HOUR: Final = _Field("hour", 0, 23)
_DAY_OF_MONTH: Final = _Field("day-of-month", 1, 31)
_MONTH: Final = _Field(
    "month", 1, 12, ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
)
_DAY_OF_WEEK: Final = _Field("day-of-week", 1, 7, ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"))
_YEAR: Final = _Field("year", FIRST_YEAR, LAST_YEAR)

_DIGITS: Final = re.compile(r"[0-9]+")
_WORD: Final = re.compile(r"[0-9]+|[A-Z]+")
_LAST_DAY: Final = re.compile(r"L(?:-([0-9]+))?(W?)")
_NEAREST_WEEKDAY: Final = re.compile(r"([0-9]+)W")


# --- parsed representation ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Values:
    """A plain field (second, minute, hour, month, year): the values it selects, ascending.

    A sorted tuple rather than a set so the search can bisect to "the first value at or
    after x" instead of scanning, and so iteration order is fixed.
    """

    values: tuple[int, ...]

    def at_least(self, low: int) -> tuple[int, ...]:
        """The selected values that are >= ``low``, ascending."""
        return self.values[bisect_left(self.values, low) :]


@dataclass(frozen=True, slots=True)
class DaysOfMonth:
    """Day-of-month as plain numbers (``15``, ``1/5``, ``28-3``)."""

    days: tuple[int, ...]

    def days_in(self, year: int, month: int) -> tuple[int, ...]:
        """Which of the days exist in this month (31 does not fire in April, as in Quartz)."""
        length = calendar.monthrange(year, month)[1]
        return tuple(day for day in self.days if day <= length)


@dataclass(frozen=True, slots=True)
class LastDayOfMonth:
    """``L``, ``L-n``, ``LW``, ``L-nW``: counted back from the month's last day."""

    offset: int
    weekday: bool
    """Move to the nearest weekday (``W``), as ``nW`` does."""

    def days_in(self, year: int, month: int) -> tuple[int, ...]:
        first_weekday, length = calendar.monthrange(year, month)
        day = length - self.offset
        if day < 1:  # L-30 in February: no such day this month
            return ()
        return (_nearest_weekday(day, first_weekday, length),) if self.weekday else (day,)


@dataclass(frozen=True, slots=True)
class NearestWeekday:
    """``nW``: the Monday-to-Friday day nearest day n, without leaving the month."""

    day: int

    def days_in(self, year: int, month: int) -> tuple[int, ...]:
        first_weekday, length = calendar.monthrange(year, month)
        if self.day > length:  # 31W in April: like a plain 31, no fire this month
            return ()
        return (_nearest_weekday(self.day, first_weekday, length),)


@dataclass(frozen=True, slots=True)
class DaysOfWeek:
    """Day-of-week as plain values in Quartz numbering (1 = Sunday ... 7 = Saturday)."""

    weekdays: tuple[int, ...]

    def days_in(self, year: int, month: int) -> tuple[int, ...]:
        first_weekday, length = calendar.monthrange(year, month)
        wanted = {_python_weekday(weekday) for weekday in self.weekdays}
        return tuple(day for day in range(1, length + 1) if (first_weekday + day - 1) % 7 in wanted)


@dataclass(frozen=True, slots=True)
class LastWeekdayOfMonth:
    """``nL``: the last weekday n of the month (``6L``: last Friday)."""

    weekday: int

    def days_in(self, year: int, month: int) -> tuple[int, ...]:
        first_weekday, length = calendar.monthrange(year, month)
        last_weekday = (first_weekday + length - 1) % 7
        return (length - (last_weekday - _python_weekday(self.weekday)) % 7,)


@dataclass(frozen=True, slots=True)
class NthWeekdayOfMonth:
    """``n#k``: the k-th weekday n of the month (``6#3``: third Friday); none if no k-th."""

    weekday: int
    nth: int

    def days_in(self, year: int, month: int) -> tuple[int, ...]:
        first_weekday, length = calendar.monthrange(year, month)
        day = 1 + (_python_weekday(self.weekday) - first_weekday) % 7 + 7 * (self.nth - 1)
        return (day,) if day <= length else ()


DaySpec: TypeAlias = (
    DaysOfMonth | LastDayOfMonth | NearestWeekday | DaysOfWeek | LastWeekdayOfMonth | NthWeekdayOfMonth
)
"""The one day field that is not ``?``: whichever it is, it answers "which days of this month"."""


@dataclass(frozen=True, slots=True)
class CronFields:
    """A parsed expression: one selector per field, the day fields folded into one."""

    second: Values
    minute: Values
    hour: Values
    day: DaySpec
    month: Values
    year: Values


def _python_weekday(quartz_weekday: int) -> int:
    """Quartz 1 (Sunday) .. 7 (Saturday) to Python's 0 (Monday) .. 6 (Sunday)."""
    return (quartz_weekday + 5) % 7


def _nearest_weekday(day: int, first_weekday: int, length: int) -> int:
    """The Monday-Friday day nearest ``day`` inside a month (Quartz's ``W``).

    Saturday moves back to Friday and Sunday forward to Monday, unless that would leave
    the month: Saturday the 1st goes forward to Monday the 3rd, Sunday the last goes back
    to Friday. A month always has a weekday within two days of any day, so this never
    fails.
    """
    weekday = (first_weekday + day - 1) % 7
    if weekday == calendar.SATURDAY:
        return day + 2 if day == 1 else day - 1
    if weekday == calendar.SUNDAY:
        return day - 2 if day == length else day + 1
    return day


# --- parsing ------------------------------------------------------------------------------


class _Rejected(Exception):
    """Raised by the field parsers, which do not know the expression; ``parse`` adds it."""

    def __init__(self, token: str, reason: str) -> None:
        super().__init__(reason)
        self.token = token
        self.reason = reason


def _parse_value(text: str, field: _Field, token: str) -> int:
    """One value of a field: a decimal number or, where the field has them, a name."""
    upper = text.upper()
    if _DIGITS.fullmatch(text):
        value = int(text)
    elif upper in field.names:
        value = field.low + field.names.index(upper)
    elif field.names and upper.isalpha():
        raise _Rejected(token, f"unknown name {text!r}, expected one of {', '.join(field.names)}")
    elif upper.isalpha():
        raise _Rejected(token, f"the {field.name} field takes numbers, not names like {text!r}")
    else:
        raise _Rejected(token, f"{text!r} is not a number")
    if not field.low <= value <= field.high:
        raise _Rejected(token, f"{value} is out of range {field.low}-{field.high}")
    return value


def _parse_step(text: str, field: _Field, token: str) -> int:
    """The ``n`` of ``/n``: at least 1 (0 would never advance), at most the field's span."""
    if not _DIGITS.fullmatch(text):
        raise _Rejected(token, f"step {text!r} is not a number")
    step = int(text)
    if not 1 <= step <= field.span:
        raise _Rejected(token, f"step {step} is out of range 1-{field.span}")
    return step


def _cycle(start: int, end: int, step: int, field: _Field) -> tuple[int, ...]:
    """Values from ``start`` to ``end`` every ``step``, wrapping past the field's top.

    Counting offsets modulo the span makes ``22-2`` (hours) and ``FRI-MON`` come out as
    22, 23, 0, 1, 2 and 6, 7, 1, 2 with no special case; a non-wrapping range is the same
    computation with offsets that never reach the span.
    """
    length = (end - start) % field.span
    return tuple(field.low + (start - field.low + offset) % field.span for offset in range(0, length + 1, step))


def _parse_item(item: str, field: _Field) -> tuple[int, ...]:
    """One comma-separated item: ``*``, ``a``, ``a-b``, each optionally ``/n``."""
    if item == "":
        raise _Rejected(item, "empty item (two commas in a row, or a comma at an end)")
    if field is _DAY_OF_WEEK and item.upper() == "L":
        return (7,)  # Quartz: L alone in day-of-week is Saturday
    base, slash, step_text = item.partition("/")
    step = _parse_step(step_text, field, item) if slash else 1
    if base == "*":
        return _cycle(field.low, field.high, step, field)
    if base == "":
        raise _Rejected(item, "a step needs a start: write */n or a/n")
    start_text, dash, end_text = base.partition("-")
    start = _parse_value(start_text, field, item)
    if dash:
        end = _parse_value(end_text, field, item)
    else:
        end = field.high if slash else start  # a/n runs to the top of the field
    if end < start and field is _YEAR:
        raise _Rejected(item, f"the year range {start}-{end} goes backwards (years do not wrap)")
    return _cycle(start, end, step, field)


def _parse_values(text: str, field: _Field) -> Values:
    """A plain field: the union of its comma-separated items."""
    if "?" in text:
        if field in (_DAY_OF_MONTH, _DAY_OF_WEEK):
            raise _Rejected(text, "'?' must be the whole field")
        raise _Rejected(text, "'?' is allowed only in the day-of-month and day-of-week fields")
    selected: set[int] = set()
    for item in text.split(","):
        selected.update(_parse_item(item, field))
    return Values(tuple(sorted(selected)))


def _reject_special_in_list(text: str, is_special: list[bool], what: str) -> None:
    """Quartz takes L, W and # only as the whole day field, never inside a list."""
    if len(is_special) > 1 and any(is_special):
        token = text.split(",")[is_special.index(True)]
        raise _Rejected(token, f"{what} must be the whole field, not part of a list")


def _parse_day_of_month(text: str) -> DaySpec | None:
    """The day-of-month field; ``None`` for ``?``."""
    upper = text.upper()
    if upper == "?":
        return None
    special = ["L" in item or "W" in item for item in upper.split(",")]
    _reject_special_in_list(text, special, "L or W")
    if not special[0]:
        return DaysOfMonth(_parse_values(text, _DAY_OF_MONTH).values)
    if match := _LAST_DAY.fullmatch(upper):
        offset = int(match[1]) if match[1] else 0
        if offset > 30:
            raise _Rejected(text, f"L-{offset} reaches before the month: n in L-n is at most 30")
        return LastDayOfMonth(offset, weekday=match[2] == "W")
    if match := _NEAREST_WEEKDAY.fullmatch(upper):
        return NearestWeekday(_parse_value(match[1], _DAY_OF_MONTH, text))
    if "W" in upper:
        raise _Rejected(text, "W takes a single day (like 15W), not a range, a step or a name")
    raise _Rejected(text, "L in day-of-month takes the forms L, L-n, LW and L-nW")


def _parse_day_of_week(text: str) -> DaySpec | None:
    """The day-of-week field; ``None`` for ``?``."""
    upper = text.upper()
    if upper == "?":
        return None
    # A bare L is a plain value (Saturday); L after a weekday is "last such weekday".
    special = ["#" in item or (item.endswith("L") and item != "L") for item in upper.split(",")]
    _reject_special_in_list(text, special, "nL or n#k")
    if not special[0]:
        return DaysOfWeek(_parse_values(text, _DAY_OF_WEEK).values)
    if "#" in upper:
        day_text, _, nth_text = upper.partition("#")
        if not _WORD.fullmatch(day_text):
            raise _Rejected(text, "# takes a single weekday before it (like 6#3 or FRI#3)")
        weekday = _parse_value(day_text, _DAY_OF_WEEK, text)
        if not _DIGITS.fullmatch(nth_text) or not 1 <= int(nth_text) <= 5:
            raise _Rejected(text, f"the k in n#k must be 1-5, not {nth_text!r}")
        return NthWeekdayOfMonth(weekday, int(nth_text))
    day_text = upper[:-1]
    if not _WORD.fullmatch(day_text):
        raise _Rejected(text, "nL takes a single weekday (like 6L or FRIL)")
    return LastWeekdayOfMonth(_parse_value(day_text, _DAY_OF_WEEK, text))


@contextmanager
def _blame(expression: str, field: _Field) -> Iterator[None]:
    """Turn a field parser's rejection into the public error, naming the field.

    The field parsers see only their own text; this adds the expression and field name.
    """
    try:
        yield
    except _Rejected as rejected:
        raise InvalidCronExpression(expression, rejected.reason, field=field.name, token=rejected.token) from None


def parse(expression: str) -> CronFields:
    """Parse a whole expression, field by field from the left; the first fault is reported."""
    if not isinstance(expression, str):
        raise TypeError(f"a cron expression is a str, not {type(expression).__name__}")
    texts = expression.split()
    if len(texts) not in (6, 7):
        raise InvalidCronExpression(
            expression,
            f"expected 6 or 7 fields (second minute hour day-of-month month day-of-week [year]), got {len(texts)}",
        )
    with _blame(expression, _SECOND):
        second = _parse_values(texts[0], _SECOND)
    with _blame(expression, _MINUTE):
        minute = _parse_values(texts[1], _MINUTE)
    with _blame(expression, _HOUR):
        hour = _parse_values(texts[2], _HOUR)
    with _blame(expression, _DAY_OF_MONTH):
        day_of_month = _parse_day_of_month(texts[3])
    with _blame(expression, _MONTH):
        month = _parse_values(texts[4], _MONTH)
    with _blame(expression, _DAY_OF_WEEK):
        day_of_week = _parse_day_of_week(texts[5])
    year = Values(tuple(range(FIRST_YEAR, LAST_YEAR + 1)))
    if len(texts) == 7:
        with _blame(expression, _YEAR):
            year = _parse_values(texts[6], _YEAR)
    if day_of_month is not None and day_of_week is None:
        day = day_of_month
    elif day_of_week is not None and day_of_month is None:
        day = day_of_week
    else:
        which = "both are" if day_of_month is None else "neither is"
        raise InvalidCronExpression(
            expression,
            f"exactly one of day-of-month and day-of-week must be '?' (Quartz rule), but {which}",
            field=_DAY_OF_WEEK.name,
            token=texts[5],
        )
    return CronFields(second, minute, hour, day, month, year)
