"""Cron tick claims (casty.cluster.claims): the TTL clamp, the age test, first-writer-wins, and the claim key's body."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from conftest import START_US, LoopClock, Recorder, run_virtual

from casty import ActorSystem
from casty.cluster.claims import Claim, ClaimRecord, claim_key, decide, schedule_fire
from casty.protocol.tick_claim import CLAIM_TTL_MAX_US, CLAIM_TTL_MIN_US, REFUSED, claim_ttl_us, is_expired
from casty.observer import ScheduleArmed, ScheduleFired, WriteConfirmed
from casty._core.state import STATE_PAGE

SECOND = 1_000_000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
TICK = START_US + 5 * MINUTE

# --- TTL and age ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("period_us", "ttl_us"),
    [
        (SECOND, MINUTE),  # every second: clamped up to 1 min
        (MINUTE - 1, MINUTE),
        (MINUTE, MINUTE),
        (5 * MINUTE, 5 * MINUTE),  # inside the range: the period itself
        (24 * HOUR, 24 * HOUR),
        (24 * HOUR + 1, 24 * HOUR),
        (7 * 24 * HOUR, 24 * HOUR),  # weekly: clamped down to 24 h
        (None, 24 * HOUR),  # the last tick of a cron has no period
    ],
)
def test_ttl_is_the_period_clamped_to_one_minute_and_one_day(period_us: int | None, ttl_us: int) -> None:
    """claim_ttl_us clamps the cron period to [1 min, 24 h]; no next tick gives 24 h."""
    assert claim_ttl_us(period_us) == ttl_us
    assert (CLAIM_TTL_MIN_US, CLAIM_TTL_MAX_US) == (MINUTE, 24 * HOUR)


@pytest.mark.parametrize("bad", [1.5, True, "60"])
def test_ttl_of_a_non_integer_period_is_a_type_error(bad: object) -> None:
    """A period that is not an int of microseconds raises TypeError naming it."""
    with pytest.raises(TypeError, match="microseconds"):
        claim_ttl_us(bad)  # type: ignore[arg-type]


def test_a_tick_is_expired_only_strictly_past_its_ttl() -> None:
    """At exactly tick + TTL the tick may still be claimed; one microsecond later it is expired."""
    assert not is_expired(TICK, MINUTE, TICK)
    assert not is_expired(TICK, MINUTE, TICK + MINUTE)
    assert is_expired(TICK, MINUTE, TICK + MINUTE + 1)
    assert not is_expired(TICK, MINUTE, TICK - 2 * SECOND)  # a claimant whose clock is behind


def test_claim_key_names_reference_and_utc_tick() -> None:
    """The key is schedule-fire::<reference>@<nominal tick in UTC, ISO 8601>; an empty reference is refused."""
    assert claim_key("report", TICK) == "schedule-fire::report@2026-01-01T00:05:00+00:00"
    assert claim_key("report", TICK + 1) != claim_key("report", TICK)
    with pytest.raises(ValueError, match="reference"):
        claim_key("", TICK)


# --- decide: first writer wins (sans-I/O) ----------------------------------------------


def test_first_claim_writes_the_record_and_wins() -> None:
    """With no record, a fresh claim writes ClaimRecord(node, tick, tick + ttl) and is answered with its own node."""
    record, answer = decide(None, Claim("n2", TICK, MINUTE), TICK + 3 * SECOND)
    assert record == ClaimRecord("n2", TICK, TICK + MINUTE)
    assert answer == "n2"


def test_later_claims_read_the_winner_and_write_nothing() -> None:
    """With a record, any claim (another node, the winner again, even an expired one) gets the recorded winner and no write."""
    record = ClaimRecord("n1", TICK, TICK + MINUTE)
    assert decide(record, Claim("n3", TICK, MINUTE), TICK + 2 * SECOND) == (None, "n1")
    assert decide(record, Claim("n1", TICK, MINUTE), TICK + 2 * SECOND) == (None, "n1")
    assert decide(record, Claim("n2", TICK, MINUTE), TICK + 2 * MINUTE) == (None, "n1")


def test_a_claim_older_than_its_ttl_is_refused_and_writes_nothing() -> None:
    """No record and the owner's clock past tick + TTL: the answer is REFUSED (no winner) and nothing is written."""
    assert decide(None, Claim("n2", TICK, MINUTE), TICK + MINUTE + 1) == (None, REFUSED)
    assert decide(None, Claim("n2", TICK, MINUTE), TICK + MINUTE) == (ClaimRecord("n2", TICK, TICK + MINUTE), "n2")


@pytest.mark.parametrize("order", list(itertools.permutations(["n1", "n2", "n3"])))
def test_any_order_of_three_claims_has_one_winner_all_agree_on(order: tuple[str, ...]) -> None:
    """Fed one claim at a time (as the owner's mailbox does), three claims give one write and three equal answers: the first claimant."""
    record: ClaimRecord | None = None
    writes, answers = 0, []
    for step, node in enumerate(order):
        written, answer = decide(record, Claim(node, TICK, MINUTE), TICK + step * SECOND)
        if written is not None:
            record, writes = written, writes + 1
        answers.append(answer)
    assert writes == 1
    assert answers == [order[0]] * 3


# --- the claim key's body, on one node ---------------------------------------------------


def test_claim_key_answers_first_writer_then_removes_itself_after_the_ttl(recorder: Recorder) -> None:
    """On one node: n1 wins (its record confirmed before the answer), n2 reads n1; at tick + TTL the record deletes itself, and a claim after that is refused."""

    async def main(clock: LoopClock) -> tuple[list[str], object, object, dict[str, bytes]]:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            key = claim_key("r", START_US + 10 * SECOND)
            ref = system.ref(schedule_fire, key)
            await asyncio.sleep(10)  # the tick's nominal time
            answers = [await ref.ask(Claim("n1", START_US + 10 * SECOND, MINUTE))]
            answers.append(await ref.ask(Claim("n2", START_US + 10 * SECOND, MINUTE)))
            held = system.pages(schedule_fire, key).get(STATE_PAGE)
            await asyncio.sleep(MINUTE / SECOND + 1)  # past the TTL: the record expired
            answers.append(await ref.ask(Claim("n3", START_US + 10 * SECOND, MINUTE)))
            after = system.pages(schedule_fire, key).get(STATE_PAGE)
            await asyncio.sleep(2 * MINUTE / SECOND)  # no schedule left: the key idles out
            return answers, held, after, system.pages(schedule_fire, key)

    answers, held, after, left = run_virtual(main)
    assert answers == ["n1", "n1", REFUSED]
    assert held is not None  # the record was written before the second claim was answered
    assert after is None  # deleted (a refused claim writes nothing back)
    assert left == {}  # and once idle, nothing of the claim key is left
    (expired,) = [e for e in recorder.of(ScheduleFired) if e.name == "expire"]
    assert expired.due_us == START_US + 10 * SECOND + MINUTE
    state_writes = [e for e in recorder.of(WriteConfirmed) if e.actor == schedule_fire.name and STATE_PAGE in e.pages]
    # activation (@active + initial state), the record, its deletion; the refused claim wrote nothing
    assert [e.pages for e in state_writes] == [("@active", STATE_PAGE), (STATE_PAGE,), (STATE_PAGE, "@behavior", "@schedules")]


def test_claim_with_a_short_period_expires_one_minute_after_its_tick(recorder: Recorder) -> None:
    """A claim made with the clamped TTL of a 5 s cron (1 min) arms its removal one minute after the tick, not 5 s."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            ref = system.ref(schedule_fire, claim_key("r", START_US))
            assert await ref.ask(Claim("n1", START_US, claim_ttl_us(5 * SECOND))) == "n1"
            await asyncio.sleep(30)
            assert await ref.ask(Claim("n2", START_US, claim_ttl_us(5 * SECOND))) == "n1"  # 30 s later: still held

    run_virtual(main)
    assert [e.due_us for e in recorder.of(ScheduleFired) if e.name == "expire"] == []  # the run ended before the TTL
    armed = [e for e in recorder.of(ScheduleArmed) if e.name == "expire"]
    assert [e.due_us for e in armed] == [START_US + MINUTE]

