"""casty.protocol.tick_claim: the claim rule of a cron tick (first writer wins, expiry, the TTL) as pure functions."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from casty.protocol.tick_claim import (
    CLAIM_TTL_MAX_US,
    CLAIM_TTL_MIN_US,
    REFUSED,
    claim_ttl_us,
    first_writer_wins,
    is_expired,
)

SECOND = 1_000_000
TICK = 1_767_225_600 * SECOND
NODES = ("n1", "n2", "n3", "n4", "n5")

claims = st.lists(st.tuples(st.sampled_from(NODES), st.integers(-5 * SECOND, 200 * SECOND)), min_size=1, max_size=30)


def run_owner(ttl_us: int, arrivals: list[tuple[str, int]]) -> tuple[list[str], list[tuple[str, int]]]:
    """One owner applying the rule to claims in arrival order, keeping what it writes: (answers, writes)."""
    winner: str | None = None
    answers: list[str] = []
    writes: list[tuple[str, int]] = []
    for node, offset in arrivals:
        expires_us, answer = first_writer_wins(winner, node, TICK, ttl_us, TICK + offset)
        if expires_us is not None:
            winner = node
            writes.append((node, expires_us))
        answers.append(answer)
    return answers, writes


@settings(max_examples=300, derandomize=True)
@given(claims, st.sampled_from([60 * SECOND, 90 * SECOND]))
def test_the_first_claim_not_expired_wins_and_every_later_claim_hears_that_winner(arrivals: list[tuple[str, int]], ttl_us: int) -> None:
    """Whatever the claims and their arrival times: at most one write; before it only REFUSED (expired ticks); from it on, the winner."""
    answers, writes = run_owner(ttl_us, arrivals)
    first = next((i for i, (_, offset) in enumerate(arrivals) if offset <= ttl_us), None)
    if first is None:
        assert (writes, answers) == ([], [REFUSED] * len(arrivals))
        return
    winner = arrivals[first][0]
    assert writes == [(winner, TICK + ttl_us)]
    assert answers == [REFUSED] * first + [winner] * (len(arrivals) - first)


def test_a_recorded_winner_answers_every_claim_even_an_expired_one_and_writes_nothing() -> None:
    """Rule 1 before rule 2: with n1 recorded, n2 asking past the TTL hears n1; n1 asking again hears n1."""
    assert first_writer_wins("n1", "n2", TICK, 60 * SECOND, TICK + 61 * SECOND) == (None, "n1")
    assert first_writer_wins("n1", "n1", TICK, 60 * SECOND, TICK + SECOND) == (None, "n1")


def test_expiry_is_strictly_older_than_the_ttl() -> None:
    """At exactly tick + ttl a claim still wins (record expiring then); one microsecond later it is REFUSED."""
    assert first_writer_wins(None, "n2", TICK, 60 * SECOND, TICK + 60 * SECOND) == (TICK + 60 * SECOND, "n2")
    assert first_writer_wins(None, "n2", TICK, 60 * SECOND, TICK + 60 * SECOND + 1) == (None, REFUSED)
    assert (is_expired(TICK, 60 * SECOND, TICK + 60 * SECOND), is_expired(TICK, 60 * SECOND, TICK + 60 * SECOND + 1)) == (False, True)


@given(st.integers(0, 10 * CLAIM_TTL_MAX_US))
def test_the_ttl_is_the_period_clamped_to_one_minute_and_one_day(period_us: int) -> None:
    """Rule 4: the period itself inside [1 min, 24 h], the nearer bound outside it."""
    assert claim_ttl_us(period_us) == min(max(period_us, CLAIM_TTL_MIN_US), CLAIM_TTL_MAX_US)
    assert CLAIM_TTL_MIN_US <= claim_ttl_us(period_us) <= CLAIM_TTL_MAX_US


def test_a_last_tick_gets_a_day_and_a_period_must_be_an_int() -> None:
    """No next tick (None): 24 h; a float or a bool period is a TypeError naming it."""
    assert claim_ttl_us(None) == CLAIM_TTL_MAX_US == 24 * 3600 * SECOND
    for bad in (1.5, True):
        with pytest.raises(TypeError) as error:
            claim_ttl_us(bad)  # type: ignore[arg-type]
        assert str(error.value) == f"a cron period is an int of microseconds, got {bad!r}"
