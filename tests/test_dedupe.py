"""The dedupe rule of routed messages (casty.protocol.dedupe): first copy wins, bounded memory, deterministic."""

from __future__ import annotations

import random

import pytest

from casty.protocol.dedupe import DEFAULT_PER_SENDER, DEFAULT_SENDERS, DedupeWindow


def test_the_first_copy_is_admitted_and_every_later_copy_refused() -> None:
    """admit is True once per (sender, request) and False for each copy, which it counts."""
    window = DedupeWindow()
    assert window.admit("n1", 7) is True
    assert window.admit("n1", 7) is False
    assert window.admit("n1", 7) is False
    assert window.duplicates == 2
    assert window.seen("n1", 7) is True


def test_the_same_request_id_of_another_sender_is_another_message() -> None:
    """Request ids are a sender's own: n2's request 7 is not n1's."""
    window = DedupeWindow()
    assert window.admit("n1", 7) is True
    assert window.admit("n2", 7) is True
    assert window.duplicates == 0
    assert window.remembered() == 2


def test_a_copy_arriving_out_of_order_is_still_refused() -> None:
    """The window is a set of ids, not a high-water mark: a late original-order copy is caught, a late new id admitted."""
    window = DedupeWindow(per_sender=4)
    assert [window.admit("n1", r) for r in (10, 12, 11)] == [True, True, True]
    assert window.admit("n1", 10) is False
    assert window.admit("n1", 9) is True  # older id, never seen: a new message (frames can arrive out of order)


def test_a_sender_window_forgets_its_oldest_admitted_request_past_its_size() -> None:
    """Rule 2: per_sender=3 keeps the last 3 admitted; the 4th admission forgets the first, whose copy is then admitted again (rule 3)."""
    window = DedupeWindow(per_sender=3)
    for request in (1, 2, 3, 4):
        assert window.admit("n1", request) is True
    assert window.remembered() == 3
    assert window.forgotten == 1
    assert [window.seen("n1", r) for r in (1, 2, 3, 4)] == [False, True, True, True]
    assert window.admit("n1", 1) is True  # the documented limit: trailing by more than per_sender


def test_the_least_recently_admitted_sender_is_forgotten_past_the_sender_limit() -> None:
    """Rule 2: with senders=2, a third sender forgets the one admitted least recently (not the first seen)."""
    window = DedupeWindow(per_sender=10, senders=2)
    window.admit("a", 1)
    window.admit("b", 1)
    window.admit("a", 2)  # a is now the most recent
    window.admit("c", 1)
    assert (window.seen("a", 1), window.seen("b", 1), window.seen("c", 1)) == (True, False, True)
    assert window.forgotten == 1
    assert window.remembered() == 3


def test_memory_stays_within_senders_times_per_sender() -> None:
    """Whatever the traffic, at most senders * per_sender pairs are remembered."""
    rng = random.Random(3)
    window = DedupeWindow(per_sender=5, senders=3)
    for _ in range(2000):
        window.admit(f"n{rng.randrange(6)}", rng.randrange(40))
        assert window.remembered() <= 15


def test_two_windows_fed_the_same_history_decide_the_same() -> None:
    """Deterministic: the decisions depend on the history only (no hash order, no clock)."""
    rng = random.Random(11)
    history = [(f"node-{rng.randrange(9)}", rng.randrange(300)) for _ in range(3000)]
    first, second = DedupeWindow(per_sender=16, senders=4), DedupeWindow(per_sender=16, senders=4)
    assert [first.admit(*pair) for pair in history] == [second.admit(*pair) for pair in history]
    assert (first.duplicates, first.forgotten) == (second.duplicates, second.forgotten)


def test_window_sizes_are_validated() -> None:
    """A window of no request or no sender is refused with a message naming the option."""
    with pytest.raises(ValueError, match="per_sender must be at least 1, got 0"):
        DedupeWindow(per_sender=0)
    with pytest.raises(ValueError, match="senders must be at least 1, got -1"):
        DedupeWindow(senders=-1)
    window = DedupeWindow()
    assert (window.per_sender, window.senders) == (DEFAULT_PER_SENDER, DEFAULT_SENDERS) == (4096, 256)
