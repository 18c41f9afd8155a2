"""Catch-up policies (casty._core.catchup): each rule exactly, as pure functions, beside the seeds' catch_up."""

from __future__ import annotations

import math
from datetime import timedelta

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from casty._core.catchup import (
    MAX_BURST,
    VERSION,
    CatchUp,
    Decision,
    DropLate,
    FireAll,
    FixedDelay,
    InvalidCatchUp,
    Skip,
    decide,
    decide_on_grid,
    decode,
    encode,
    to_bytes,
)
from casty._core.schedules import catch_up

PROPERTY = settings(max_examples=300, deadline=None)

dues = st.integers(min_value=0, max_value=10**15)
periods = st.integers(min_value=1, max_value=10**12)
lates = st.integers(min_value=0, max_value=10**14)
policies: st.SearchStrategy[CatchUp] = st.one_of(
    st.just(Skip()),
    st.builds(FireAll, st.integers(1, MAX_BURST)),
    st.builds(DropLate, st.integers(0, 10**13).map(lambda us: timedelta(microseconds=us))),
    st.just(FixedDelay()),
)


# --- each rule on examples --------------------------------------------------------------------


def test_skip_on_time_moves_one_period() -> None:
    """Skip at its due time delivers that occurrence and moves one period, skipping nothing."""
    assert decide(Skip(), 100, 10, 100) == Decision(100, 1, 10, 110, 0)


def test_skip_late_is_the_seeds_example() -> None:
    """Skip 12.5 periods late: one delivery of the due occurrence, 12 skipped, next on the grid after now."""
    assert decide(Skip(), 0, 10, 125) == Decision(0, 1, 10, 130, 12)


def test_fire_all_within_the_limit_replays_every_occurrence() -> None:
    """FireAll(5), 3.5 periods late: the 4 occurrences 0, 10, 20, 30 are delivered in order, none skipped."""
    decision = decide(FireAll(5), 0, 10, 35)
    assert decision.dues() == (0, 10, 20, 30)
    assert (decision.next_us, decision.skipped) == (40, 0)


def test_fire_all_over_the_limit_keeps_the_most_recent() -> None:
    """FireAll(3), 12.5 periods late: the 3 latest occurrences (100, 110, 120) are delivered, the 10 older skipped."""
    decision = decide(FireAll(3), 0, 10, 125)
    assert decision.dues() == (100, 110, 120)
    assert (decision.next_us, decision.skipped) == (130, 10)


def test_drop_late_within_the_grace_delivers_the_latest_grid_time() -> None:
    """DropLate(7 µs), now 25 on a 10-grid: 20 is 5 late, delivered; 0 and 10 skipped; next 30."""
    decision = decide(DropLate(timedelta(microseconds=7)), 0, 10, 25)
    assert decision.dues() == (20,)
    assert (decision.next_us, decision.skipped) == (30, 2)


def test_drop_late_past_the_grace_delivers_nothing_and_keeps_the_grid() -> None:
    """DropLate(3 µs), now 25: 20 is 5 late, dropped too; all three occurrences skipped; next 30."""
    decision = decide(DropLate(timedelta(microseconds=3)), 0, 10, 25)
    assert decision.dues() == ()
    assert (decision.next_us, decision.skipped) == (30, 3)


def test_drop_late_grace_is_inclusive() -> None:
    """A firing exactly grace late is delivered (late by at most the grace)."""
    assert decide(DropLate(timedelta(microseconds=5)), 0, 10, 25).dues() == (20,)


def test_fixed_delay_leaves_the_grid() -> None:
    """FixedDelay, fired at 25 for due 0 (period 10): delivered once, next 35, nothing skipped."""
    assert decide(FixedDelay(), 0, 10, 25) == Decision(0, 1, 10, 35, 0)


@pytest.mark.parametrize("policy", [Skip(), FireAll(4), DropLate(timedelta(seconds=1)), FixedDelay()], ids=repr)
def test_early_firing_delivers_nothing_and_keeps_the_due(policy: CatchUp) -> None:
    """A firing before the due (the wall clock went back) delivers nothing, under every policy."""
    assert decide(policy, 100, 10, 99) == Decision(100, 0, 10, 100, 0)
    assert decide(policy, 100, None, 99) == Decision(100, 0, 0, 100, 0)


@pytest.mark.parametrize("policy", [Skip(), FireAll(4), FixedDelay()], ids=repr)
def test_one_shot_late_is_delivered_once_and_ends(policy: CatchUp) -> None:
    """A late one-shot is delivered once and the schedule ends (next None)."""
    assert decide(policy, 100, None, 10**9) == Decision(100, 1, 0, None, 0)


def test_one_shot_drop_late_past_the_grace_is_dropped() -> None:
    """A one-shot later than DropLate's grace is not delivered, counted as skipped, and ends."""
    assert decide(DropLate(timedelta(microseconds=10)), 100, None, 111) == Decision(100, 0, 0, None, 1)
    assert decide(DropLate(timedelta(microseconds=10)), 100, None, 110) == Decision(100, 1, 0, None, 0)


# --- validation -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "error", "words"),
    [
        (lambda: FireAll(0), InvalidCatchUp, f"FireAll.limit must be between 1 and {MAX_BURST}, got 0"),
        (lambda: FireAll(-3), InvalidCatchUp, f"FireAll.limit must be between 1 and {MAX_BURST}, got -3"),
        (lambda: FireAll(MAX_BURST + 1), InvalidCatchUp, f"FireAll.limit must be between 1 and {MAX_BURST}, got {MAX_BURST + 1}"),
        (lambda: FireAll(2.0), TypeError, "FireAll.limit must be an int, not float"),
        (lambda: FireAll(True), TypeError, "FireAll.limit must be an int, not bool"),
        (lambda: DropLate(timedelta(seconds=-1)), InvalidCatchUp, "DropLate.grace must not be negative, got datetime.timedelta(days=-1, seconds=86399)"),
        (lambda: DropLate(-0.5), InvalidCatchUp, "DropLate.grace must not be negative, got -0.5"),
        (lambda: DropLate(math.nan), InvalidCatchUp, "DropLate.grace must be a finite duration, got nan"),
        (lambda: DropLate(math.inf), InvalidCatchUp, "DropLate.grace must be a finite duration, got inf"),
        (lambda: DropLate(1e300), InvalidCatchUp, "DropLate.grace must be at most timedelta.max, got 1e+300"),
        (lambda: DropLate("5s"), TypeError, "DropLate.grace must be a timedelta or a number of seconds, not str"),
    ],
)
def test_bad_policies_raise_typed_errors_naming_the_field(build: object, error: type[Exception], words: str) -> None:
    """Each bad parameter raises InvalidCatchUp (a ValueError) or TypeError, naming the field and the value."""
    with pytest.raises(error) as caught:
        build()  # type: ignore[operator]
    assert str(caught.value) == words
    assert issubclass(InvalidCatchUp, ValueError)


def test_drop_late_takes_seconds_and_keeps_whole_microseconds() -> None:
    """DropLate(1.5) is a grace of 1.5 s, kept as a timedelta, equal to DropLate(timedelta(seconds=1.5))."""
    assert DropLate(1.5) == DropLate(timedelta(milliseconds=1500))
    assert DropLate(1.5).grace == timedelta(seconds=1, microseconds=500_000)
    assert DropLate(1e-7).grace_us == 0


def test_non_positive_period_is_refused() -> None:
    """decide with a period of zero names every_us (a grid needs a positive period)."""
    with pytest.raises(InvalidCatchUp, match="every_us must be positive, got 0"):
        decide(Skip(), 0, 0, 5)


# --- encoding ---------------------------------------------------------------------------------


def test_no_policy_recorded_decodes_as_skip() -> None:
    """None (a page written before policies existed) and Skip's own encoding decode as Skip."""
    assert encode(Skip()) is None
    assert decode(None) == Skip()
    assert decode(msgspec.msgpack.encode(None)) == Skip()


@pytest.mark.parametrize(
    ("policy", "value"),
    [
        (FireAll(7), (VERSION, "fire-all", 7)),
        (DropLate(timedelta(seconds=2)), (VERSION, "drop-late", 2_000_000)),
        (FixedDelay(), (VERSION, "fixed-delay", 0)),
    ],
    ids=repr,
)
def test_encoding_is_versioned_and_exact(policy: CatchUp, value: tuple[int, str, int]) -> None:
    """Each policy encodes as (version, kind, parameter) and its msgpack bytes decode back to an equal policy."""
    assert encode(policy) == value
    assert decode(value) == policy
    assert decode(to_bytes(policy)) == policy
    assert decode(list(value)) == policy  # a msgpack array read without a type is a list


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ((2, "fire-all", 3), "unknown version 2 (this node reads version 1)"),
        ((1, "fire-some", 3), "unknown kind 'fire-some', expected one of fire-all, drop-late, fixed-delay"),
        ((1, "fire-all", 0), "FireAll.limit must be between 1"),
        ((1, "drop-late", -1), "grace -1 µs is negative or past timedelta.max"),
        ((1, "fixed-delay", 4), "fixed-delay: parameter must be 0, got 4"),
        ((1, "fire-all", "3"), "fire-all: parameter must be an int, got '3'"),
        ("skip", "expected None or (version, kind, parameter), got 'skip'"),
        (b"\xc1", "undecodable bytes"),
    ],
)
def test_unknown_or_bad_encodings_are_refused_loudly(value: object, words: str) -> None:
    """A version, kind or parameter this node does not know raises InvalidCatchUp naming it, never decodes as Skip."""
    with pytest.raises(InvalidCatchUp) as caught:
        decode(value)
    assert words in str(caught.value)


@PROPERTY
@given(policies)
def test_property_every_policy_round_trips(policy: CatchUp) -> None:
    """decode(encode(p)) == p and decode(to_bytes(p)) == p for every valid policy."""
    assert decode(encode(policy)) == policy
    assert decode(to_bytes(policy)) == policy


# --- properties -------------------------------------------------------------------------------


@PROPERTY
@given(dues, periods, lates)
def test_property_skip_is_the_seeds_catch_up(due: int, every: int, late: int) -> None:
    """Skip gives exactly schedules.catch_up's next due and skipped count, and delivers the due occurrence once."""
    now = due + late
    decision = decide(Skip(), due, every, now)
    assert (decision.next_us, decision.skipped) == catch_up(due, every, now)
    assert decision.dues() == (due,)


@PROPERTY
@given(policies, dues, periods, st.integers(-(10**12), 10**14))
def test_property_never_early(policy: CatchUp, due: int, every: int, late: int) -> None:
    """No policy delivers an occurrence due after now, nor one before the due it was asked about, and next is after now."""
    now = due + late
    decision = decide(policy, due, every, now)
    assert all(due <= d <= now for d in decision.dues())
    assert decision.next_us is not None
    assert decision.next_us > now or (now < due and decision.next_us == due and decision.count == 0)


@PROPERTY
@given(st.one_of(st.just(Skip()), st.builds(FireAll, st.integers(1, 50)), st.builds(DropLate, st.integers(0, 10**6))), dues, periods, lates)
def test_property_grid_kept_and_every_occurrence_accounted(policy: CatchUp, due: int, every: int, late: int) -> None:
    """Skip, FireAll, DropLate: next is the first grid time after now, and delivered + skipped = the grid times due..now, exactly."""
    now = due + late
    decision = decide(policy, due, every, now)
    assert decision.next_us is not None
    assert (decision.next_us - due) % every == 0 and now < decision.next_us <= now + every
    on_grid = (now - due) // every + 1  # due, due+every, ... <= now
    assert all((d - due) % every == 0 for d in decision.dues())
    assert decision.count + decision.skipped == on_grid


@PROPERTY
@given(st.integers(1, 200), dues, periods, lates)
def test_property_fire_all_burst_is_bounded_in_order_and_the_latest(limit: int, due: int, every: int, late: int) -> None:
    """FireAll: at most limit deliveries, one period apart, ending at the latest grid time <= now."""
    now = due + late
    decision = decide(FireAll(limit), due, every, now)
    dues_now = decision.dues()
    assert 1 <= len(dues_now) <= limit
    assert all(b - a == every for a, b in zip(dues_now, dues_now[1:]))
    assert dues_now[-1] <= now < dues_now[-1] + every
    assert decision.skipped == max(0, (now - due) // every + 1 - limit)


@PROPERTY
@given(st.integers(0, 10**13), dues, periods, lates)
def test_property_drop_late_delivers_iff_within_grace(grace: int, due: int, every: int, late: int) -> None:
    """DropLate: delivers the latest grid time <= now exactly when it is at most grace late, else nothing."""
    now = due + late
    decision = decide(DropLate(timedelta(microseconds=grace)), due, every, now)
    latest = due + (now - due) // every * every
    assert decision.dues() == ((latest,) if now - latest <= grace else ())


@PROPERTY
@given(dues, periods, lates)
def test_property_fixed_delay_is_fired_plus_interval(due: int, every: int, late: int) -> None:
    """FixedDelay: one delivery, next = now + interval, nothing ever skipped."""
    now = due + late
    assert decide(FixedDelay(), due, every, now) == Decision(due, 1, every, now + every, 0)


@PROPERTY
@given(
    st.one_of(st.just(Skip()), st.builds(FireAll, st.integers(1, 20)), st.builds(DropLate, st.integers(0, 500))),
    st.integers(0, 10**6),
    st.integers(1, 1000),
    st.integers(0, 20_000),
)
def test_property_grid_walk_agrees_with_the_arithmetic(policy: CatchUp, due: int, every: int, late: int) -> None:
    """decide_on_grid over a regular grid (following(t) = next multiple) gives decide's dues, next and skipped."""
    now = due + late

    def following(t: int) -> int:
        return due + ((t - due) // every + 1) * every

    decision = decide(policy, due, every, now)
    assert decide_on_grid(policy, due, now, following) == (decision.dues(), decision.next_us, decision.skipped)


def test_grid_walk_ends_with_the_grid_and_refuses_fixed_delay() -> None:
    """On a grid that ends (following None) the next due is None; FixedDelay on a grid is InvalidCatchUp."""
    grid = [0, 7, 9, 30]

    def following(t: int) -> int | None:
        return next((g for g in grid if g > t), None)

    assert decide_on_grid(FireAll(10), 0, 40, following) == ((0, 7, 9, 30), None, 0)
    assert decide_on_grid(Skip(), 0, 10, following) == ((0,), 30, 2)
    assert decide_on_grid(DropLate(timedelta(microseconds=1)), 0, 10, following) == ((9,), 30, 2)
    with pytest.raises(InvalidCatchUp, match="FixedDelay needs an interval"):
        decide_on_grid(FixedDelay(), 0, 10, following)


def test_grid_walk_is_bounded() -> None:
    """Past max_steps grid times the walk jumps to following(now) and counts only the walked ones."""
    assert decide_on_grid(Skip(), 0, 1000, lambda t: t + 1, max_steps=5) == ((0,), 1001, 5)
