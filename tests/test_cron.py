"""Tests of casty._core.cron: Quartz cron parsing, next fire times, errors and DST.

Expected fire times are worked out by hand from a calendar, from START (Tuesday
2026-03-10 08:00:00 UTC) unless a test says otherwise. The property tests generate
expressions from a small model that also knows, independently of the parser, which wall
times each expression selects.
"""

from __future__ import annotations

import calendar
import datetime as datetime_module
import zoneinfo
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone, tzinfo

import pytest
from croniter import croniter
from hypothesis import given, settings
from hypothesis import strategies as st

from casty._core.cron import Cron
from casty.errors import InvalidCronExpression

UTC = timezone.utc
BERLIN = zoneinfo.ZoneInfo("Europe/Berlin")
NEW_YORK = zoneinfo.ZoneInfo("America/New_York")
START = datetime(2026, 3, 10, 8, 0, 0, tzinfo=UTC)

PROPERTY = settings(max_examples=60, deadline=None)


def at(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0, tz: tzinfo = UTC) -> datetime:
    """An aware datetime, for short tables of expected fire times."""
    return datetime(year, month, day, hour, minute, second, tzinfo=tz)


def fires(expression: str, start: datetime = START, count: int = 3, tz: tzinfo = UTC) -> list[datetime]:
    """The first ``count`` fire times after ``start`` (fewer if the schedule runs out)."""
    cron = Cron(expression, tz)
    found: list[datetime] = []
    moment = start
    while len(found) < count and (fire := cron.next_after(moment)) is not None:
        found.append(fire)
        moment = fire
    return found


def daily(hour: int, minute: int, *days: tuple[int, int, int]) -> list[datetime]:
    """The same time of day on several dates."""
    return [at(year, month, day, hour, minute) for year, month, day in days]


# --- the Quartz CronTrigger tutorial ----------------------------------------------------

TUTORIAL = [
    ("0 0 12 * * ?", daily(12, 0, (2026, 3, 10), (2026, 3, 11), (2026, 3, 12))),
    ("0 15 10 ? * *", daily(10, 15, (2026, 3, 10), (2026, 3, 11), (2026, 3, 12))),
    ("0 15 10 * * ?", daily(10, 15, (2026, 3, 10), (2026, 3, 11), (2026, 3, 12))),
    ("0 15 10 * * ? *", daily(10, 15, (2026, 3, 10), (2026, 3, 11), (2026, 3, 12))),
    ("0 15 10 * * ? 2005", []),
    ("0 * 14 * * ?", [at(2026, 3, 10, 14, 0), at(2026, 3, 10, 14, 1), at(2026, 3, 10, 14, 2)]),
    ("0 0/5 14 * * ?", [at(2026, 3, 10, 14, 0), at(2026, 3, 10, 14, 5), at(2026, 3, 10, 14, 10)]),
    (
        "0 0/5 14,18 * * ?",
        [at(2026, 3, 10, 14, minute) for minute in range(0, 60, 5)] + [at(2026, 3, 10, 18, 0), at(2026, 3, 10, 18, 5)],
    ),
    ("0 0-5 14 * * ?", [at(2026, 3, 10, 14, minute) for minute in range(6)] + [at(2026, 3, 11, 14, 0)]),
    (
        "0 10,44 14 ? 3 WED",
        [
            at(2026, 3, 11, 14, 10),
            at(2026, 3, 11, 14, 44),
            at(2026, 3, 18, 14, 10),
            at(2026, 3, 18, 14, 44),
            at(2026, 3, 25, 14, 10),
            at(2026, 3, 25, 14, 44),
            at(2027, 3, 3, 14, 10),
        ],
    ),
    (
        "0 15 10 ? * MON-FRI",
        daily(10, 15, (2026, 3, 10), (2026, 3, 11), (2026, 3, 12), (2026, 3, 13), (2026, 3, 16)),
    ),
    ("0 15 10 15 * ?", daily(10, 15, (2026, 3, 15), (2026, 4, 15), (2026, 5, 15))),
    ("0 15 10 L * ?", daily(10, 15, (2026, 3, 31), (2026, 4, 30), (2026, 5, 31))),
    ("0 15 10 L-2 * ?", daily(10, 15, (2026, 3, 29), (2026, 4, 28), (2026, 5, 29))),
    ("0 15 10 ? * 6L", daily(10, 15, (2026, 3, 27), (2026, 4, 24), (2026, 5, 29))),
    ("0 15 10 ? * 6L 2002-2005", []),
    ("0 15 10 ? * 6#3", daily(10, 15, (2026, 3, 20), (2026, 4, 17), (2026, 5, 15))),
    (
        "0 0 12 1/5 * ?",
        daily(
            12, 0, (2026, 3, 11), (2026, 3, 16), (2026, 3, 21), (2026, 3, 26), (2026, 3, 31), (2026, 4, 1), (2026, 4, 6)
        ),
    ),
    ("0 11 11 11 11 ?", [at(2026, 11, 11, 11, 11), at(2027, 11, 11, 11, 11)]),
]


@pytest.mark.parametrize(("expression", "expected"), TUTORIAL, ids=[expression for expression, _ in TUTORIAL])
def test_quartz_tutorial_examples(expression: str, expected: list[datetime]) -> None:
    """Each example of the Quartz CronTrigger tutorial fires at the hand-computed times after START."""
    assert fires(expression, count=len(expected) or 1) == expected


def test_last_friday_in_a_bounded_year_range() -> None:
    """`6L 2002-2005` fires on the last Fridays of late 2005, then never again."""
    assert fires("0 15 10 ? * 6L 2002-2005", start=at(2005, 11, 1), count=3) == daily(
        10, 15, (2005, 11, 25), (2005, 12, 30)
    )


def test_last_day_of_february_follows_leap_years() -> None:
    """`L` in February is the 28th, or the 29th in a leap year."""
    assert fires("0 0 0 L 2 ?", count=2) == daily(0, 0, (2027, 2, 28), (2028, 2, 29))


def test_day_31_skips_short_months() -> None:
    """A plain 31 fires only in months that have a 31st."""
    assert fires("0 0 0 31 * ?", count=3) == daily(0, 0, (2026, 3, 31), (2026, 5, 31), (2026, 7, 31))


def test_day_of_week_l_alone_is_saturday() -> None:
    """`L` alone in day-of-week means 7, Saturday."""
    assert fires("0 0 12 ? * L", count=2) == daily(12, 0, (2026, 3, 14), (2026, 3, 21))


def test_day_of_week_l_inside_a_list_is_saturday() -> None:
    """`2,L` in day-of-week is Monday and Saturday."""
    assert fires("0 0 12 ? * 2,L", count=3) == daily(12, 0, (2026, 3, 14), (2026, 3, 16), (2026, 3, 21))


def test_names_are_case_insensitive() -> None:
    """Month and weekday names, L, W and # work in lower case too."""
    assert fires("0 15 10 ? mar-apr mon-fri", count=2) == fires("0 15 10 ? MAR-APR MON-FRI", count=2)
    assert fires("0 0 12 lw * ?") == fires("0 0 12 LW * ?")
    assert fires("0 0 12 ? * fri#3") == fires("0 0 12 ? * 6#3")
    assert fires("0 0 12 ? * fril") == fires("0 0 12 ? * 6L")


def test_seconds_are_honoured() -> None:
    """The seconds field selects seconds, including stepped ones."""
    assert fires("*/20 0 9 * * ?", count=4) == [
        at(2026, 3, 10, 9, 0, 0),
        at(2026, 3, 10, 9, 0, 20),
        at(2026, 3, 10, 9, 0, 40),
        at(2026, 3, 11, 9, 0, 0),
    ]


# --- W, LW, # -----------------------------------------------------------------------------


def test_nearest_weekday_to_the_15th() -> None:
    """`15W` moves a Sunday 15th to Monday 16th and a Saturday 15th to Friday 14th."""
    assert fires("0 0 12 15W * ?", count=6) == daily(
        12, 0, (2026, 3, 16), (2026, 4, 15), (2026, 5, 15), (2026, 6, 15), (2026, 7, 15), (2026, 8, 14)
    )


def test_1w_on_a_month_starting_saturday_moves_to_monday_3rd() -> None:
    """`1W` when the 1st is a Saturday (August 2026) is Monday the 3rd, not Friday of July."""
    assert fires("0 0 12 1W * ?", start=at(2026, 7, 15), count=2) == daily(12, 0, (2026, 8, 3), (2026, 9, 1))


def test_1w_on_a_month_starting_sunday_moves_to_monday_2nd() -> None:
    """`1W` when the 1st is a Sunday (March 2026) is Monday the 2nd."""
    assert fires("0 0 12 1W * ?", start=at(2026, 2, 15), count=1) == daily(12, 0, (2026, 3, 2))


def test_31w_on_a_sunday_stays_in_the_month() -> None:
    """`31W` on Sunday 31 May 2026 goes back to Friday the 29th; 30-day June has no fire."""
    assert fires("0 0 12 31W * ?", start=at(2026, 5, 1), count=2) == daily(12, 0, (2026, 5, 29), (2026, 7, 31))


def test_last_weekday_of_the_month() -> None:
    """`LW` is the last Monday-to-Friday day: Saturday 31 Jan -> 30th, Saturday 28 Feb -> 27th."""
    assert fires("0 0 12 LW * ?", start=at(2026, 1, 1), count=3) == daily(
        12, 0, (2026, 1, 30), (2026, 2, 27), (2026, 3, 31)
    )


def test_nth_to_last_day_to_nearest_weekday() -> None:
    """`L-3W`: three days before the last, moved to a weekday (Saturday 28 March -> Friday 27th)."""
    assert fires("0 0 12 L-3W * ?", count=2) == daily(12, 0, (2026, 3, 27), (2026, 4, 27))


def test_fifth_friday_skips_months_without_one() -> None:
    """`6#5` fires only in months that have five Fridays (May and July 2026, not March, April, June)."""
    assert fires("0 0 12 ? * 6#5", count=2) == daily(12, 0, (2026, 5, 29), (2026, 7, 31))


# --- wrapping ranges ----------------------------------------------------------------------


def test_wrapping_hour_range() -> None:
    """Hour `22-2` runs through midnight: 22, 23, 0, 1, 2."""
    assert fires("0 0 22-2 * * ?", count=6) == [
        at(2026, 3, 10, 22),
        at(2026, 3, 10, 23),
        at(2026, 3, 11, 0),
        at(2026, 3, 11, 1),
        at(2026, 3, 11, 2),
        at(2026, 3, 11, 22),
    ]


def test_wrapping_hour_range_with_step() -> None:
    """Hour `22-2/2` steps through midnight: 22, 0, 2."""
    assert fires("0 0 22-2/2 * * ?", count=4) == [
        at(2026, 3, 10, 22),
        at(2026, 3, 11, 0),
        at(2026, 3, 11, 2),
        at(2026, 3, 11, 22),
    ]


def test_wrapping_weekday_range() -> None:
    """`FRI-MON` is Friday, Saturday, Sunday, Monday."""
    assert fires("0 0 12 ? * FRI-MON", count=5) == daily(
        12, 0, (2026, 3, 13), (2026, 3, 14), (2026, 3, 15), (2026, 3, 16), (2026, 3, 20)
    )


def test_wrapping_month_range() -> None:
    """`NOV-FEB` runs across the new year."""
    assert fires("0 0 0 1 NOV-FEB ?", count=5) == daily(
        0, 0, (2026, 11, 1), (2026, 12, 1), (2027, 1, 1), (2027, 2, 1), (2027, 11, 1)
    )


# --- running out, inputs, period ----------------------------------------------------------


def test_year_field_exhausted_gives_none() -> None:
    """Once the year field has no year left, next_after is None."""
    assert Cron("0 0 0 1 1 ? 2026").next_after(START) is None
    assert fires("0 0 0 1 1 ? 2027", count=3) == [at(2027, 1, 1)]


def test_search_ends_at_2099() -> None:
    """Without a year field the search stops after the last second of 2099."""
    cron = Cron("59 59 23 31 12 ?")
    assert cron.next_after(at(2099, 12, 31, 23, 59, 58)) == at(2099, 12, 31, 23, 59, 59)
    assert cron.next_after(at(2099, 12, 31, 23, 59, 59)) is None
    assert Cron("0 0 0 1 1 ?").next_after(at(2150, 1, 1)) is None


def test_never_firing_expression_gives_none() -> None:
    """30 February parses (as in Quartz) but never fires."""
    assert Cron("0 0 0 30 2 ?").next_after(START) is None


def test_next_after_is_strict_and_drops_microseconds() -> None:
    """A fire time equal to dt is not returned; a fraction of a second past it counts as past."""
    cron = Cron("* * * * * ?")
    assert cron.next_after(at(2026, 3, 10, 12, 0, 0)) == at(2026, 3, 10, 12, 0, 1)
    assert cron.next_after(at(2026, 3, 10, 12, 0, 0).replace(microsecond=500_000)) == at(2026, 3, 10, 12, 0, 1)


def test_aware_input_is_converted_and_result_is_in_the_crons_zone() -> None:
    """An aware dt in another zone is compared as an instant; the result is in the Cron's zone."""
    cron = Cron("0 0 12 * * ?", BERLIN)
    fire = cron.next_after(at(2026, 3, 10, 10, 59))  # 11:59 in Berlin
    assert fire == at(2026, 3, 10, 12, tz=BERLIN)
    assert fire is not None and fire.tzinfo is BERLIN
    assert cron.next_after(at(2026, 3, 10, 11, 0)) == at(2026, 3, 11, 12, tz=BERLIN)  # 12:00 Berlin: strict


def test_naive_input_is_read_in_the_crons_zone() -> None:
    """A naive dt is a wall time in the Cron's zone."""
    cron = Cron("0 0 12 * * ?", NEW_YORK)
    assert cron.next_after(datetime(2026, 3, 10, 11, 59)) == at(2026, 3, 10, 12, tz=NEW_YORK)
    assert cron.next_after(datetime(2026, 3, 10, 12, 0)) == at(2026, 3, 11, 12, tz=NEW_YORK)


def test_period_hint_is_the_gap_between_the_next_two_fires() -> None:
    """period_hint is the time between the next two fire times, None when fewer than two are left."""
    assert Cron("0 0/5 14 * * ?").period_hint(START) == timedelta(minutes=5)
    assert Cron("0 0/5 14 * * ?").period_hint(at(2026, 3, 10, 14, 52)) == timedelta(hours=23, minutes=5)
    assert Cron("0 0 0 1 1 ? 2027").period_hint(START) is None
    assert Cron("0 0 0 1 1 ? 2026").period_hint(START) is None


def test_period_hint_is_absolute_across_dst() -> None:
    """Across the Berlin spring-forward night, noon to noon is 23 hours of real time."""
    assert Cron("0 0 12 * * ?", BERLIN).period_hint(at(2026, 3, 28, 0, tz=BERLIN)) == timedelta(hours=23)


def test_equality_hash_and_repr() -> None:
    """Crons are equal (and hash equal) by expression and zone; repr evaluates back to an equal Cron."""
    berlin = Cron("0 0 12 * * ?", BERLIN)
    assert berlin == Cron("0 0 12 * * ?", zoneinfo.ZoneInfo("Europe/Berlin"))
    assert hash(berlin) == hash(Cron("0 0 12 * * ?", BERLIN))
    assert berlin != Cron("0 0 12 * * ?")
    assert berlin != Cron("0 0 13 * * ?", BERLIN)
    assert berlin != "0 0 12 * * ?"
    assert berlin.expression == "0 0 12 * * ?" and berlin.tz is BERLIN
    namespace = {"Cron": Cron, "datetime": datetime_module, "zoneinfo": zoneinfo}
    for cron in (berlin, Cron("0 15 10 ? * 6L")):
        assert eval(repr(cron), namespace) == cron


def test_validate_returns_none_or_raises() -> None:
    """Cron.validate returns None for a good expression and raises for a bad one."""
    assert Cron.validate("0 15 10 ? * 6#3") is None
    with pytest.raises(InvalidCronExpression):
        Cron.validate("0 15 10 * * *")


# --- errors: one test per kind of rejection ----------------------------------------------


def rejection(expression: str) -> InvalidCronExpression:
    """The error raised for ``expression`` (which must be raised)."""
    with pytest.raises(InvalidCronExpression) as caught:
        Cron(expression)
    error = caught.value
    assert isinstance(error, ValueError)
    assert error.expression == expression
    if error.token is not None:
        assert repr(error.token) in str(error)
    return error


def assert_rejected(expression: str, field: str | None, token: str | None) -> None:
    """``expression`` is rejected, blaming ``field`` at ``token``."""
    error = rejection(expression)
    assert (error.field, error.token) == (field, token), str(error)


@pytest.mark.parametrize("expression", ["0 0 12 * ?", "0 0 12 * * ? 2026 1", "", "   "])
def test_reject_wrong_field_count(expression: str) -> None:
    """Anything but 6 or 7 fields is rejected, naming no field."""
    assert_rejected(expression, None, None)
    assert "6 or 7 fields" in rejection(expression).reason


@pytest.mark.parametrize(
    ("expression", "field", "token"),
    [
        ("60 0 12 * * ?", "second", "60"),
        ("0 60 12 * * ?", "minute", "60"),
        ("0 0 24 * * ?", "hour", "24"),
        ("0 0 12 32 * ?", "day-of-month", "32"),
        ("0 0 12 0 * ?", "day-of-month", "0"),
        ("0 0 12 * 13 ?", "month", "13"),
        ("0 0 12 * 0 ?", "month", "0"),
        ("0 0 12 ? * 8", "day-of-week", "8"),
        ("0 0 12 ? * 0", "day-of-week", "0"),
        ("0 0 12 * * ? 1969", "year", "1969"),
        ("0 0 12 * * ? 2100", "year", "2100"),
        ("0 0,5-70 12 * * ?", "minute", "5-70"),
        ("0 0 12 32W * ?", "day-of-month", "32W"),
        ("0 0 12 ? * 8L", "day-of-week", "8L"),
        ("0 0 12 ? * 8#1", "day-of-week", "8#1"),
    ],
)
def test_reject_value_out_of_range(expression: str, field: str, token: str) -> None:
    """A value outside its field's range is rejected, naming the field and the item."""
    assert_rejected(expression, field, token)
    assert "out of range" in rejection(expression).reason


@pytest.mark.parametrize(
    ("expression", "field", "token"),
    [("0 */0 12 * * ?", "minute", "*/0"), ("0 5/0 12 * * ?", "minute", "5/0"), ("0 0 12 ? * 1-5/0", "day-of-week", "1-5/0")],
)
def test_reject_step_zero(expression: str, field: str, token: str) -> None:
    """A step of 0 is rejected."""
    assert_rejected(expression, field, token)


def test_reject_step_larger_than_the_field() -> None:
    """A step beyond the field's span is rejected."""
    assert_rejected("0 0 */25 * * ?", "hour", "*/25")


def test_reject_step_that_is_not_a_number() -> None:
    """A step must be a decimal number."""
    assert_rejected("0 */x 12 * * ?", "minute", "*/x")
    assert_rejected("0 1/ 12 * * ?", "minute", "1/")


@pytest.mark.parametrize(
    ("expression", "field", "token"),
    [
        ("0 0 12 * FOO ?", "month", "FOO"),
        ("0 0 12 * MON ?", "month", "MON"),
        ("0 0 12 * JANUARY ?", "month", "JANUARY"),
        ("0 0 12 ? * SUNDAY", "day-of-week", "SUNDAY"),
        ("0 0 12 ? * MON-FUN", "day-of-week", "MON-FUN"),
    ],
)
def test_reject_unknown_name(expression: str, field: str, token: str) -> None:
    """A name the field does not know is rejected (month names are not weekdays and vice versa)."""
    assert_rejected(expression, field, token)
    assert "unknown name" in rejection(expression).reason


def test_reject_name_in_a_numeric_field() -> None:
    """Fields without names take only numbers."""
    assert_rejected("0 0 noon * * ?", "hour", "noon")
    assert_rejected("0 0 12 * * ? MMXXVI", "year", "MMXXVI")


@pytest.mark.parametrize(
    ("expression", "field", "token"),
    [
        ("0 1.5 12 * * ?", "minute", "1.5"),
        ("0 -1 12 * * ?", "minute", "-1"),
        ("0 1- 12 * * ?", "minute", "1-"),
        ("0 1-2-3 12 * * ?", "minute", "1-2-3"),
        ("0 /5 12 * * ?", "minute", "/5"),
        ("0 1,,2 12 * * ?", "minute", ""),
        ("0 1, 12 * * ?", "minute", ""),
        ("0 ** 12 * * ?", "minute", "**"),
    ],
)
def test_reject_malformed_item(expression: str, field: str, token: str) -> None:
    """Items that are not `*`, `a`, `a-b` with an optional `/n` are rejected, naming the item."""
    assert_rejected(expression, field, token)


def test_reject_question_mark_in_both_day_fields() -> None:
    """`?` in both day fields breaks Quartz's exactly-one rule, and the error says so."""
    assert_rejected("0 0 12 ? * ?", "day-of-week", "?")
    assert "exactly one of day-of-month and day-of-week must be '?'" in rejection("0 0 12 ? * ?").reason


@pytest.mark.parametrize(("expression", "token"), [("0 0 12 * * *", "*"), ("0 0 12 15 * MON", "MON")])
def test_reject_question_mark_in_neither_day_field(expression: str, token: str) -> None:
    """Restricting (or starring) both day fields breaks Quartz's exactly-one-`?` rule, and the error says so."""
    assert_rejected(expression, "day-of-week", token)
    assert "exactly one of day-of-month and day-of-week must be '?'" in rejection(expression).reason


@pytest.mark.parametrize(
    ("expression", "field"),
    [("? 0 12 * * ?", "second"), ("0 ? 12 * * ?", "minute"), ("0 0 ? * * ?", "hour"), ("0 0 12 * ? ?", "month")],
)
def test_reject_question_mark_outside_the_day_fields(expression: str, field: str) -> None:
    """`?` is only for day-of-month and day-of-week."""
    assert_rejected(expression, field, "?")


def test_reject_question_mark_inside_a_list() -> None:
    """`?` must be a whole day field, not a list item."""
    assert_rejected("0 0 12 ?,1 * *", "day-of-month", "?,1")


@pytest.mark.parametrize(("token"), ["1-5W", "1/2W", "*W", "W", "MONW"])
def test_reject_w_without_a_single_day(token: str) -> None:
    """`W` takes one day number: not a range, a step, `*` or a name."""
    assert_rejected(f"0 0 12 {token} * ?", "day-of-month", token)


@pytest.mark.parametrize(("field_text", "token"), [("1W,15", "1W"), ("L,15", "L"), ("1,LW", "LW")])
def test_reject_l_or_w_inside_a_list(field_text: str, token: str) -> None:
    """As in Quartz, L and W must be the whole day-of-month field."""
    assert_rejected(f"0 0 12 {field_text} * ?", "day-of-month", token)


@pytest.mark.parametrize(("field_text", "token"), [("6#3,2", "6#3"), ("2,6L", "6L")])
def test_reject_nl_or_hash_inside_a_list(field_text: str, token: str) -> None:
    """As in Quartz, `nL` and `n#k` must be the whole day-of-week field."""
    assert_rejected(f"0 0 12 ? * {field_text}", "day-of-week", token)


@pytest.mark.parametrize("token", ["6#0", "6#6", "6#", "6#x", "#3", "1-5#2"])
def test_reject_bad_hash(token: str) -> None:
    """`n#k` needs one weekday and k from 1 to 5."""
    assert_rejected(f"0 0 12 ? * {token}", "day-of-week", token)


def test_reject_hash_k_out_of_range_says_so() -> None:
    """The error for `6#6` says k must be 1-5."""
    assert "1-5" in rejection("0 0 12 ? * 6#6").reason


@pytest.mark.parametrize("token", ["L-31", "L-99W"])
def test_reject_l_minus_n_beyond_30(token: str) -> None:
    """`L-n` takes n up to 30."""
    assert_rejected(f"0 0 12 {token} * ?", "day-of-month", token)


@pytest.mark.parametrize("token", ["L-", "L-x", "L2", "3L", "L/2"])
def test_reject_malformed_l_in_day_of_month(token: str) -> None:
    """Day-of-month L has only the forms L, L-n, LW and L-nW."""
    assert_rejected(f"0 0 12 {token} * ?", "day-of-month", token)


@pytest.mark.parametrize("token", ["1-5L", "L-2", "2-L"])
def test_reject_malformed_l_in_day_of_week(token: str) -> None:
    """Day-of-week L is either alone (Saturday) or after a single weekday (`6L`)."""
    assert_rejected(f"0 0 12 ? * {token}", "day-of-week", token)


def test_reject_backward_year_range() -> None:
    """Years do not wrap around, so a backward year range is rejected."""
    assert_rejected("0 0 12 * * ? 2030-2020", "year", "2030-2020")


def test_reject_first_fault_from_the_left() -> None:
    """With several faults, the leftmost field is named."""
    assert_rejected("0 61 25 * * *", "minute", "61")


def test_reject_non_string_expression_or_zone() -> None:
    """A non-string expression or a zone that is not a tzinfo is a TypeError, not a parse error."""
    with pytest.raises(TypeError):
        Cron(12)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Cron("0 0 12 * * ?", "Europe/Berlin")  # type: ignore[arg-type]


FIELD_NAMES = {None, "second", "minute", "hour", "day-of-month", "month", "day-of-week", "year"}


@PROPERTY
@given(st.lists(st.text(alphabet="0123456789*?,-/#LW JANMONFRIx", max_size=8), min_size=5, max_size=8).map(" ".join))
def test_property_any_text_parses_or_is_rejected_by_name(expression: str) -> None:
    """Arbitrary text either parses or raises InvalidCronExpression naming a real field and a token from the text."""
    try:
        Cron(expression)
    except InvalidCronExpression as error:
        assert error.field in FIELD_NAMES
        assert error.token is None or error.token in expression


# --- DST ----------------------------------------------------------------------------------


def test_berlin_spring_forward_skips_the_missing_wall_time() -> None:
    """02:30 does not exist on 29 March 2026 in Berlin, so that day has no 02:30 fire."""
    assert fires("0 30 2 * * ?", start=at(2026, 3, 28, 0, tz=BERLIN), tz=BERLIN, count=2) == [
        at(2026, 3, 28, 2, 30, tz=BERLIN),
        at(2026, 3, 30, 2, 30, tz=BERLIN),
    ]


def test_berlin_spring_forward_every_half_hour() -> None:
    """Every 30 minutes across the gap: 01:30 CET is followed by 03:00 CEST, half an hour later."""
    found = fires("0 0/30 * * * ?", start=at(2026, 3, 29, 1, 0, tz=BERLIN), tz=BERLIN, count=2)
    assert found == [at(2026, 3, 29, 1, 30, tz=BERLIN), at(2026, 3, 29, 3, 0, tz=BERLIN)]
    assert found[1].timestamp() - found[0].timestamp() == 30 * 60


def test_berlin_fall_back_fires_once_at_the_first_occurrence() -> None:
    """02:30 happens twice on 25 October 2026 in Berlin; it fires once, in summer time (fold=0)."""
    found = fires("0 30 2 * * ?", start=at(2026, 10, 24, 12, tz=BERLIN), tz=BERLIN, count=3)
    assert [fire.replace(tzinfo=None) for fire in found] == [
        datetime(2026, 10, 25, 2, 30),
        datetime(2026, 10, 26, 2, 30),
        datetime(2026, 10, 27, 2, 30),
    ]
    assert found[0].fold == 0
    assert found[0].astimezone(UTC) == at(2026, 10, 25, 0, 30)


def test_berlin_fall_back_every_quarter_hour() -> None:
    """Every 15 minutes across the fold: nothing fires in the repeated hour, absolute times increase."""
    found = fires("0 0/15 * * * ?", start=at(2026, 10, 25, 1, 40, tz=BERLIN), tz=BERLIN, count=6)
    assert [fire.astimezone(UTC) for fire in found] == [
        at(2026, 10, 24, 23, 45),  # 01:45 CEST
        at(2026, 10, 25, 0, 0),  # 02:00 CEST
        at(2026, 10, 25, 0, 15),
        at(2026, 10, 25, 0, 30),
        at(2026, 10, 25, 0, 45),  # 02:45 CEST
        at(2026, 10, 25, 2, 0),  # 03:00 CET: 02:00-02:59 CET is the repeat
    ]


def test_start_inside_the_repeated_hour() -> None:
    """From 02:15 CET (the repeat, fold=1) the next fire is 03:00 CET, not an earlier CEST time."""
    start = datetime(2026, 10, 25, 2, 15, fold=1, tzinfo=BERLIN)
    assert start.astimezone(UTC) == at(2026, 10, 25, 1, 15)
    fire = Cron("0 0/15 * * * ?", BERLIN).next_after(start)
    assert fire is not None and fire.astimezone(UTC) == at(2026, 10, 25, 2, 0)
    assert Cron("* * * * * ?", BERLIN).next_after(start.astimezone(UTC)) == at(2026, 10, 25, 3, 0, 0, tz=BERLIN)


def test_start_inside_the_first_pass_of_the_repeated_hour() -> None:
    """From 02:15 CEST (fold=0) the rest of that hour still fires in summer time."""
    fire = Cron("0 0/15 * * * ?", BERLIN).next_after(datetime(2026, 10, 25, 2, 15, tzinfo=BERLIN))
    assert fire is not None and fire.fold == 0 and fire.astimezone(UTC) == at(2026, 10, 25, 0, 30)


def test_new_york_gap_and_overlap() -> None:
    """New York 2026: 02:xx is skipped on 8 March; 01:xx fires once (EDT) on 1 November."""
    cron = Cron("0 30 1,2 * * ?", NEW_YORK)
    spring = fires(cron.expression, start=at(2026, 3, 8, 0, tz=NEW_YORK), tz=NEW_YORK, count=2)
    assert [fire.astimezone(UTC) for fire in spring] == [at(2026, 3, 8, 6, 30), at(2026, 3, 9, 5, 30)]
    autumn = fires(cron.expression, start=at(2026, 11, 1, 0, tz=NEW_YORK), tz=NEW_YORK, count=3)
    assert [fire.astimezone(UTC) for fire in autumn] == [
        at(2026, 11, 1, 5, 30),  # 01:30 EDT
        at(2026, 11, 1, 7, 30),  # 02:30 EST
        at(2026, 11, 2, 6, 30),  # 01:30 EST next day
    ]


def test_naive_start_in_the_gap_is_read_per_pep_495() -> None:
    """A naive 02:30 on New York's spring-forward day reads as 03:30 EDT (fold=0), so 03:00 is past."""
    cron = Cron("0 0/30 * * * ?", NEW_YORK)
    assert cron.next_after(datetime(2026, 3, 8, 2, 30)) == at(2026, 3, 8, 4, 0, tz=NEW_YORK)


def test_every_second_across_a_gap_is_fast() -> None:
    """Skipping a gap of matching seconds is one jump, not one step per second."""
    cron = Cron("* * * * * ?", BERLIN)
    assert cron.next_after(at(2026, 3, 29, 1, 59, 59, tz=BERLIN)) == at(2026, 3, 29, 3, 0, 0, tz=BERLIN)


TOKYO = zoneinfo.ZoneInfo("Asia/Tokyo")


@pytest.mark.parametrize(
    ("start", "tz"),
    [
        pytest.param(datetime.max, NEW_YORK, id="naive-max-west-of-utc"),
        pytest.param(datetime.max.replace(tzinfo=UTC), TOKYO, id="utc-max-east-of-utc"),
        pytest.param(datetime.max.replace(tzinfo=TOKYO), NEW_YORK, id="tokyo-max-in-new-york"),
    ],
)
def test_next_after_the_last_datetime_in_any_zone_is_none(start: datetime, tz: tzinfo) -> None:
    """next_after (and period_hint) a time whose reading in the zone is past year 9999 is None, not an OverflowError."""
    cron = Cron("0 0 0 * * ?", tz)
    assert cron.next_after(start) is None
    assert cron.period_hint(start) is None


@pytest.mark.parametrize(
    ("start", "tz"),
    [
        pytest.param(datetime.min, TOKYO, id="naive-min-east-of-utc"),
        pytest.param(datetime.min.replace(tzinfo=UTC), NEW_YORK, id="utc-min-west-of-utc"),
    ],
)
def test_next_after_the_first_datetime_in_any_zone_is_the_first_fire_time(start: datetime, tz: tzinfo) -> None:
    """next_after a time whose reading in the zone is before year 1 is the first fire time (1970), not an OverflowError."""
    cron = Cron("0 0 0 * * ?", tz)
    assert cron.next_after(start) == datetime(1970, 1, 1, tzinfo=tz)
    assert cron.period_hint(start) == timedelta(days=1)


# --- a model of expressions, for the property tests ---------------------------------------


@dataclass(frozen=True)
class Item:
    """One generated list item: `*`, `a`, `a-b` (may wrap), each optionally `/step`."""

    start: int | None  # None: `*`
    end: int | None  # None: a single value, or up to the top when stepped
    step: int | None

    def text(self, names: tuple[str, ...], low: int) -> str:
        def value(number: int) -> str:
            return names[number - low] if names else str(number)

        base = "*" if self.start is None else value(self.start)
        if self.start is not None and self.end is not None:
            base += "-" + value(self.end)
        return base if self.step is None else f"{base}/{self.step}"

    def selects(self, value: int, low: int, high: int) -> bool:
        """Whether ``value`` is selected, by its cyclic distance from the start."""
        span = high - low + 1
        if self.start is None:
            first, last = low, high
        else:
            first = self.start
            last = self.end if self.end is not None else (high if self.step is not None else first)
        distance = (value - first) % span
        return distance <= (last - first) % span and distance % (self.step or 1) == 0


@dataclass(frozen=True)
class Plain:
    """A plain field: a list of items over ``low..high``."""

    items: tuple[Item, ...]
    low: int
    high: int
    names: tuple[str, ...] = ()

    def text(self) -> str:
        return ",".join(item.text(self.names, self.low) for item in self.items)

    def selects(self, value: int) -> bool:
        return any(item.selects(value, self.low, self.high) for item in self.items)


@dataclass(frozen=True)
class Special:
    """A special day form: kind is one of L (offset, weekday flag), W (day), nL (weekday), # (weekday, k)."""

    kind: str
    a: int
    b: int = 0

    def text(self) -> str:
        if self.kind == "L":
            return "L" + (f"-{self.a}" if self.a else "") + ("W" if self.b else "")
        if self.kind == "W":
            return f"{self.a}W"
        if self.kind == "nL":
            return f"{self.a}L"
        return f"{self.a}#{self.b}"


def quartz_weekday(day: date) -> int:
    """Quartz weekday numbering: 1 Sunday .. 7 Saturday."""
    return day.isoweekday() % 7 + 1


def closest_weekday(target: int, year: int, month: int) -> int:
    """The Monday-Friday day of the month closest to ``target`` (never a tie in practice)."""
    length = calendar.monthrange(year, month)[1]
    weekdays = [day for day in range(1, length + 1) if date(year, month, day).weekday() < 5]
    return min(weekdays, key=lambda day: abs(day - target))


@dataclass(frozen=True)
class Model:
    """A generated expression and, independently of the parser, the wall times it selects."""

    second: Plain
    minute: Plain
    hour: Plain
    day_of_month: Plain | Special | None  # None: `?`
    month: Plain
    day_of_week: Plain | Special | None
    year: Plain | None

    def text(self) -> str:
        fields = [self.second, self.minute, self.hour, self.day_of_month, self.month, self.day_of_week]
        texts = ["?" if field is None else field.text() for field in fields]
        if self.year is not None:
            texts.append(self.year.text())
        return " ".join(texts)

    def date_matches(self, day: date) -> bool:
        if not self.month.selects(day.month) or (self.year is not None and not self.year.selects(day.year)):
            return False
        length = calendar.monthrange(day.year, day.month)[1]
        if isinstance(self.day_of_month, Plain):
            return self.day_of_month.selects(day.day)
        if isinstance(self.day_of_week, Plain):
            return self.day_of_week.selects(quartz_weekday(day))
        special = self.day_of_month or self.day_of_week
        assert isinstance(special, Special)
        if special.kind == "L":
            target = length - special.a
            if target < 1:
                return False
            return day.day == (closest_weekday(target, day.year, day.month) if special.b else target)
        if special.kind == "W":
            return special.a <= length and day.day == closest_weekday(special.a, day.year, day.month)
        if special.kind == "nL":
            return quartz_weekday(day) == special.a and day.day + 7 > length
        return quartz_weekday(day) == special.a and (day.day - 1) // 7 + 1 == special.b

    def matches(self, wall: datetime) -> bool:
        return (
            self.date_matches(wall.date())
            and self.hour.selects(wall.hour)
            and self.minute.selects(wall.minute)
            and self.second.selects(wall.second)
        )


def items(low: int, high: int, *, wrap: bool = True, start_steps: bool = True) -> st.SearchStrategy[Item]:
    """Items of every shape over ``low..high``."""
    value = st.integers(low, high)
    step = st.integers(1, high - low + 1)
    ranges = st.tuples(value, value).map(sorted) if not wrap else st.tuples(value, value)
    shapes = [
        st.builds(Item, st.none(), st.none(), st.none()),
        st.builds(Item, value, st.none(), st.none()),
        ranges.map(lambda pair: Item(pair[0], pair[1], None)),
        st.builds(Item, st.none(), st.none(), step),
        st.tuples(ranges, step).map(lambda pair: Item(pair[0][0], pair[0][1], pair[1])),
    ]
    if start_steps:
        shapes.append(st.builds(Item, value, st.none(), step))
    return st.one_of(*shapes)


def plain(low: int, high: int, names: tuple[str, ...] = (), **shape: bool) -> st.SearchStrategy[Plain]:
    """A field of one to three items, sometimes written with names."""
    use_names = st.booleans() if names else st.just(False)
    return st.builds(
        lambda chosen, named: Plain(tuple(chosen), low, high, names if named else ()),
        st.lists(items(low, high, **shape), min_size=1, max_size=3),
        use_names,
    )


MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
WEEKDAY_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")

day_of_month_specials = st.one_of(
    st.builds(Special, st.just("L"), st.integers(0, 30), st.integers(0, 1)),
    st.builds(Special, st.just("W"), st.integers(1, 31)),
)
day_of_week_specials = st.one_of(
    st.builds(Special, st.just("nL"), st.integers(1, 7)),
    st.builds(Special, st.just("#"), st.integers(1, 7), st.integers(1, 5)),
)
day_fields = st.one_of(
    st.tuples(st.one_of(plain(1, 31), day_of_month_specials), st.none()),
    st.tuples(st.none(), st.one_of(plain(1, 7, WEEKDAY_NAMES), day_of_week_specials)),
)
years = st.one_of(
    st.none(),
    st.builds(lambda chosen: Plain(tuple(chosen), 1970, 2099), st.lists(items(2018, 2040, wrap=False), min_size=1, max_size=2)),
)


def models(
    seconds: st.SearchStrategy[Plain] = plain(0, 59), year_fields: st.SearchStrategy[Plain | None] = years
) -> st.SearchStrategy[Model]:
    """Whole expressions, every form of every field."""
    return st.builds(
        lambda second, minute, hour, days, month, year: Model(second, minute, hour, days[0], month, days[1], year),
        seconds,
        plain(0, 59),
        plain(0, 23),
        day_fields,
        plain(1, 12, MONTH_NAMES),
        year_fields,
    )


HORIZON_DAYS = 3 * 366
"""How far the brute-force scans look; beyond it they only say "nothing found"."""

starts = st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2030, 12, 31))


def brute_first_after(model: Model, after: datetime, days: int) -> datetime | None:
    """The first wall time after ``after`` that the model selects, by scanning day by day."""
    for offset in range(days):
        day = after.date() + timedelta(days=offset)
        if not model.date_matches(day):
            continue
        for hour in range(24):
            if not model.hour.selects(hour) or datetime.combine(day, time(hour, 59, 59)) <= after:
                continue
            for minute in range(60):
                if not model.minute.selects(minute) or datetime.combine(day, time(hour, minute, 59)) <= after:
                    continue
                for second in range(60):
                    candidate = datetime.combine(day, time(hour, minute, second))
                    if candidate > after and model.second.selects(second):
                        return candidate
    return None


# --- property tests -----------------------------------------------------------------------


@PROPERTY
@given(models(), starts)
def test_property_fires_increase_and_match_every_field(model: Model, start: datetime) -> None:
    """Iterating next_after gives strictly increasing UTC times, each matching every field of the expression."""
    cron = Cron(model.text())
    previous = start.replace(tzinfo=UTC)
    for _ in range(6):
        fire = cron.next_after(previous)
        if fire is None:
            break
        assert fire > previous and fire.tzinfo is UTC and fire.microsecond == 0
        assert model.matches(fire.replace(tzinfo=None)), (model.text(), fire)
        previous = fire


@PROPERTY
@given(models(), starts)
def test_property_agrees_with_a_brute_force_scan(model: Model, start: datetime) -> None:
    """next_after finds the same first fire time as a day-by-day scan of the model (so none is skipped)."""
    expected = brute_first_after(model, start, HORIZON_DAYS)
    fire = Cron(model.text()).next_after(start.replace(tzinfo=UTC))
    if expected is None:  # nothing within the scan's horizon
        assert fire is None or fire.replace(tzinfo=None) >= start + timedelta(days=HORIZON_DAYS - 1)
    else:
        assert fire is not None and fire.replace(tzinfo=None) == expected, model.text()


def exists(wall: datetime, tz: tzinfo) -> bool:
    """Whether a naive wall time occurs in ``tz``."""
    return wall.replace(tzinfo=tz).astimezone(UTC).astimezone(tz).replace(tzinfo=None) == wall


def expected_under_dst_rule(model: Model, after: datetime, tz: tzinfo) -> datetime | None:
    """The documented DST rule, spelled out: the first selected wall time that exists and whose
    first occurrence is after ``after``."""
    candidate: datetime | None = after.astimezone(tz).replace(tzinfo=None)
    while candidate is not None:
        candidate = brute_first_after(model, candidate, HORIZON_DAYS)
        if candidate is not None and exists(candidate, tz):
            fire = candidate.replace(tzinfo=tz, fold=0)
            if fire.astimezone(UTC) > after.astimezone(UTC):
                return fire
    return None


transition_days = st.sampled_from(
    [
        (BERLIN, datetime(2026, 3, 29)),
        (BERLIN, datetime(2026, 10, 25)),
        (NEW_YORK, datetime(2026, 3, 8)),
        (NEW_YORK, datetime(2026, 11, 1)),
    ]
)


@PROPERTY
@given(
    # One second per minute and no year field keep the spelled-out rule (which steps from one
    # selected wall time to the next) quick and within its scan horizon.
    models(
        seconds=st.builds(lambda second: Plain((Item(second, None, None),), 0, 59), st.integers(0, 59)),
        year_fields=st.none(),
    ),
    transition_days,
    st.integers(-6 * 3600, 6 * 3600),
)
def test_property_dst_rule(model: Model, where: tuple[tzinfo, datetime], offset: int) -> None:
    """Near a DST change, fires follow the skip-gap / first-occurrence rule and strictly increase in absolute time."""
    tz, midnight = where
    cron = Cron(model.text(), tz)
    moment = (midnight.replace(tzinfo=tz) + timedelta(hours=2)).astimezone(UTC) + timedelta(seconds=offset)
    for _ in range(4):
        fire = cron.next_after(moment)
        expected = expected_under_dst_rule(model, moment, tz)
        if expected is None:  # nothing within the scan's horizon
            horizon = moment.astimezone(tz).replace(tzinfo=None) + timedelta(days=HORIZON_DAYS - 1)
            assert fire is None or fire.replace(tzinfo=None) >= horizon, model.text()
            break
        assert fire == expected, model.text()
        assert fire is not None  # for the type checker
        assert fire.tzinfo is tz and fire.fold == 0 and exists(fire.replace(tzinfo=None), tz)
        assert model.matches(fire.replace(tzinfo=None))
        assert fire.timestamp() > moment.timestamp()
        moment = fire


# --- differential test against croniter ---------------------------------------------------


def croniter_items(field: Plain, shift: int = 0) -> str:
    """A plain numeric field in croniter syntax, values shifted by ``shift`` (for weekdays)."""
    texts = []
    for item in field.items:
        if item.start is None:
            base = "*" if shift == 0 or item.step is None else f"{field.low + shift}-{field.high + shift}"
        else:
            if item.end is None or item.end == item.start:
                # croniter reads 0-0 as the whole field and 0-0/n as 0/n (0 to the top): a-a is just a.
                texts.append(str(item.start + shift))
                continue
            base = f"{item.start + shift}-{item.end + shift}"
        texts.append(base if item.step is None else f"{base}/{item.step}")
    return ",".join(texts)


def numeric(low: int, high: int) -> st.SearchStrategy[Plain]:
    """Fields both dialects read alike: numbers, forward ranges, steps on `*` or a range."""
    return plain(low, high, wrap=False, start_steps=False)


@settings(max_examples=80, deadline=None)
@given(
    numeric(0, 59),
    numeric(0, 59),
    numeric(0, 23),
    st.one_of(st.tuples(numeric(1, 28), st.none()), st.tuples(st.none(), numeric(1, 7))),
    numeric(1, 12),
    starts.map(lambda moment: moment.replace(microsecond=0, tzinfo=UTC)),
)
def test_property_agrees_with_croniter(
    second: Plain, minute: Plain, hour: Plain, days: tuple[Plain | None, Plain | None], month: Plain, start: datetime
) -> None:
    """On numeric expressions with one day field free, the next three fires equal croniter's."""
    day_of_month, day_of_week = days
    quartz = Model(second, minute, hour, day_of_month, month, day_of_week, None).text()
    theirs = " ".join(
        [
            croniter_items(second),
            croniter_items(minute),
            croniter_items(hour),
            "*" if day_of_month is None else croniter_items(day_of_month),
            croniter_items(month),
            "*" if day_of_week is None else croniter_items(day_of_week, shift=-1),  # Quartz 1-7 -> croniter 0-6
        ]
    )
    reference = croniter(theirs, start, second_at_beginning=True)
    expected = [reference.get_next(datetime) for _ in range(3)]
    assert fires(quartz, start=start, count=3) == expected, (quartz, theirs)
