"""Quartz cron expressions: parse one, then ask when it fires next.

The dialect is Quartz's, because that is what schedules written for JVM schedulers use:
``sec min hour day-of-month month day-of-week [year]``, six or seven fields separated by
whitespace, names case-insensitive.

* Every field takes ``*``, lists ``a,b``, ranges ``a-b`` and steps ``*/n``, ``a/n``,
  ``a-b/n``. A range whose start is above its end wraps around the field (``FRI-MON``,
  hour ``22-2``), as in Quartz; the year field alone cannot wrap (it has no cycle).
* Ranges of values: second and minute 0-59, hour 0-23, day-of-month 1-31, month 1-12 or
  ``JAN``-``DEC``, day-of-week 1-7 or ``SUN``-``SAT`` (1 is Sunday, 7 Saturday), year
  1970-2099 (a missing year field means every year).
* Exactly one of the two day fields is ``?`` ("no specific value"): Quartz has no rule
  for combining a day-of-month with a day-of-week, so it makes you pick one.
* day-of-month also takes ``L`` (last day), ``L-n`` (n days before the last, n 0-30),
  ``nW`` (the weekday nearest day n, staying inside the month), ``LW`` (last weekday) and
  ``L-nW``; a day the month lacks does not fire that month (31 in April, 31W too, L-30 in
  February). day-of-week also takes ``L`` (alone: 7, Saturday), ``nL`` (last weekday n of
  the month) and ``n#k`` (k-th weekday n of the month, k 1-5). As in Quartz, these special
  forms must be the whole day field: they do not combine with lists, ranges or steps.

Time zones and daylight saving time. Fire times are wall-clock (local) times in the
Cron's zone, searched as naive datetimes and only then placed in the zone:

* a wall time that does not exist (the hour skipped when clocks spring forward) does not
  fire; the next matching wall time after the gap does;
* a wall time that happens twice (the hour repeated when clocks fall back) fires once,
  at its first occurrence (``fold=0``); nothing fires during the repeat.

With this rule successive fire times are strictly increasing in absolute time, and a daily
job fires exactly once on every day whose wall clock shows its time, never twice, never at a
time it was not given. It is the rule of Quartz's CronTrigger (the dialect's home), and what
the issue's ``cron-dst-spring`` / ``cron-dst-fall`` scenarios check: a 02:30 job does not run
on the spring-forward day and runs once on the fall-back day.

Other schedulers choose differently, and ``tests/test_cron.py`` asserts each difference
against croniter (measured with croniter 7.0.0 on the shared subset of the syntax):

* croniter *moves* a wall time in a gap to the first instant after it (a daily 02:30 fires
  at 03:00 on the spring-forward day in Berlin), as Vixie cron runs a fixed-time job that
  the jump skipped right after the jump; here it does not fire.
* croniter fires a repeated wall time *twice*, once in each pass (02:30 CEST and 02:30 CET
  on the fall-back day; an every-15-minutes job fires through both passes of the hour);
  here it fires once, in the first pass, and an every-15-minutes job is silent for the
  repeat. A job that must keep a fixed rate across the fold wants an interval schedule,
  or a cron in UTC.

Everywhere else (every instant of UTC, and of any zone away from its transitions, half-hour
shifts such as Lord Howe's included) the fire times are croniter's.

Zones must follow PEP 495 (``zoneinfo``, ``datetime.timezone``); pytz zones are not
supported. ``zone(name_or_tzinfo)`` turns an IANA name (``"Europe/Berlin"``) into a
``ZoneInfo``, refusing an unknown one with :class:`InvalidTimeZone`.

Errors are :class:`casty.errors.InvalidCronExpression` naming the field and the token at
fault. The token is the comma-separated item of the field that is wrong (``5-70`` in
``0,5-70``), or the whole field for rules about the field as a whole.
"""

from __future__ import annotations

from bisect import bisect_left
from datetime import datetime, timedelta, timezone, tzinfo
from typing import Final

from .cron_fields import FIRST_YEAR, LAST_YEAR, CronFields, parse
from .cron_zones import InvalidTimeZone, exists, in_transition, last_second_of_transition, to_utc, zone

__all__ = ["Cron", "InvalidTimeZone", "zone"]

_ONE_SECOND: Final = timedelta(seconds=1)
_BEFORE_FIRST_YEAR: Final = datetime(FIRST_YEAR - 1, 1, 1, tzinfo=timezone.utc)
"""Earlier than any fire time in any zone: a search from any earlier instant gives the same answer."""


# --- search -------------------------------------------------------------------------------


def _first_match(fields: CronFields, start: datetime) -> datetime | None:
    """The first naive wall time at or after ``start`` (whole seconds) matching every field.

    Field by field, largest first: each level visits only the values its field selects,
    starting from ``start``'s value while every larger field still equals ``start``'s, and
    from the field's bottom once a larger field has moved past it. The hour, minute and
    second sets are never empty, so the first day that fits yields the answer; the cost
    is bounded by the months up to ``LAST_YEAR`` even for expressions that never fire
    (31 February).
    """
    for year in fields.year.at_least(start.year):
        year_moved = year > start.year
        for month in fields.month.at_least(1 if year_moved else start.month):
            month_moved = year_moved or month > start.month
            days = fields.day.days_in(year, month)
            for day in days[bisect_left(days, 1 if month_moved else start.day) :]:
                day_moved = month_moved or day > start.day
                for hour in fields.hour.at_least(0 if day_moved else start.hour):
                    hour_moved = day_moved or hour > start.hour
                    for minute in fields.minute.at_least(0 if hour_moved else start.minute):
                        minute_moved = hour_moved or minute > start.minute
                        seconds = fields.second.at_least(0 if minute_moved else start.second)
                        if seconds:
                            return datetime(year, month, day, hour, minute, seconds[0])
    return None



class Cron:
    """A Quartz cron expression in a time zone; immutable, equal by expression and zone.

    >>> Cron("0 15 10 ? * MON-FRI").next_after(datetime(2026, 3, 13, 11, tzinfo=timezone.utc))
    datetime.datetime(2026, 3, 16, 10, 15, tzinfo=datetime.timezone.utc)
    """

    __slots__ = ("_expression", "_tz", "_fields")

    def __init__(self, expression: str, tz: tzinfo = timezone.utc) -> None:
        if not isinstance(tz, tzinfo):
            raise TypeError(f"tz must be a datetime.tzinfo, not {type(tz).__name__}")
        self._fields = parse(expression)
        self._expression = expression
        self._tz = tz

    @staticmethod
    def validate(expression: str) -> None:
        """Raise :class:`InvalidCronExpression` if ``expression`` does not parse; else nothing."""
        parse(expression)

    @property
    def expression(self) -> str:
        """The expression as given."""
        return self._expression

    @property
    def tz(self) -> tzinfo:
        """The zone whose wall clock the expression reads."""
        return self._tz

    def next_after(self, dt: datetime) -> datetime | None:
        """The first fire time strictly after ``dt``, aware in this Cron's zone.

        An aware ``dt`` may be in any zone; a naive one is read as a wall time in this
        Cron's zone (a wall time in a DST gap is read per PEP 495, with its ``fold``).
        ``None`` when the expression has no fire time left up to the end of 2099.
        """
        try:
            instant = to_utc(dt if dt.tzinfo is not None else dt.replace(tzinfo=self._tz))
            local = instant.astimezone(self._tz)  # via UTC: normalizes a naive gap time
        except OverflowError:
            # Within a day of datetime.min or max, the zone's offset carries dt out of the
            # range datetimes have. Either end lies outside 1970-2099, where nothing fires:
            # after the top there is no fire time, after the bottom the first one.
            if dt.year > LAST_YEAR:
                return None
            return self.next_after(_BEFORE_FIRST_YEAR)
        if local.year > LAST_YEAR:
            return None
        wall = local.replace(tzinfo=None, microsecond=0, fold=0)
        if local.fold == 1 and in_transition(wall, self._tz):
            # dt is in the repeat of a fallen-back hour: every wall time left in the repeat
            # already fired, at its first occurrence, before dt.
            wall = last_second_of_transition(wall, self._tz)
        while wall.year <= LAST_YEAR:
            candidate = _first_match(self._fields, wall + _ONE_SECOND)
            if candidate is None:
                return None
            if not exists(candidate, self._tz):
                wall = last_second_of_transition(candidate, self._tz)
                continue
            fire = candidate.replace(tzinfo=self._tz)
            if to_utc(fire) > instant:
                return fire
            wall = candidate  # unreachable with well-behaved zones; guarantees progress
        return None

    def period_hint(self, after: datetime) -> timedelta | None:
        """The absolute time between the next two fire times after ``after``.

        A hint of how often the schedule fires around then (to size a claim TTL, say);
        ``None`` when fewer than two fire times are left.
        """
        first = self.next_after(after)
        second = self.next_after(first) if first is not None else None
        if first is None or second is None:
            return None
        return to_utc(second) - to_utc(first)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Cron):
            return NotImplemented
        return self._expression == other._expression and self._tz == other._tz

    def __hash__(self) -> int:
        return hash((self._expression, self._tz))

    def __repr__(self) -> str:
        return f"Cron({self._expression!r}, tz={self._tz!r})"
