"""Placement: the consistent-hash ring per actor type, the owner policy and the quorum rule."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from casty.protocol.placement import Placed, Placement, Ring, has_quorum, key_token, vnode_token

ACTOR = "app:Counter"
KEYS = [f"key-{i}" for i in range(10_000)]
NODES10 = [f"n{i:02d}" for i in range(10)]
ROOT = Path(__file__).resolve().parents[1]


def owners(ring: Ring, actor: str = ACTOR) -> list[str]:
    return [ring.replicas(actor, key, 1)[0] for key in KEYS]


def test_tokens_are_pinned() -> None:
    """Tokens are a wire contract: these values must never change, or a rolling upgrade would move every key."""
    assert key_token("app:Counter", "k1") == 4054440855491778089
    assert vnode_token("app:Counter", "n1", 0) == 15145576467613893425
    ring = Ring(["n1", "n2", "n3", "n4", "n5"])
    assert [ring.replicas("app:Counter", f"k{i}", 3) for i in range(3)] == [
        ("n2", "n3", "n1"),
        ("n5", "n2", "n3"),
        ("n4", "n3", "n5"),
    ]


def test_length_prefix_keeps_parts_apart() -> None:
    """Hashed parts are length-prefixed, so ("ab","c") and ("a","bc") land on different tokens."""
    assert key_token("ab", "c") != key_token("a", "bc")
    assert vnode_token("a", "n1", 12) != vnode_token("a", "n11", 2)


def test_replicas_are_distinct_and_bounded() -> None:
    """replicas() returns min(n, N) distinct ring nodes; more than N gives all of them, 0 or an empty ring gives none."""
    ring = Ring(NODES10, vnodes=16)
    for key in KEYS[:500]:
        reps = ring.replicas(ACTOR, key, 3)
        assert len(reps) == 3 and len(set(reps)) == 3 and set(reps) <= set(NODES10)
        assert ring.replicas(ACTOR, key, 1) == reps[:1]
        assert ring.replicas(ACTOR, key, 5)[:3] == reps
    assert sorted(ring.replicas(ACTOR, "k", 99)) == NODES10
    assert ring.replicas(ACTOR, "k", 0) == ()
    assert Ring([]).replicas(ACTOR, "k", 3) == ()
    with pytest.raises(ValueError):
        ring.replicas(ACTOR, "k", -1)
    with pytest.raises(ValueError):
        Ring(NODES10, vnodes=0)


def test_node_order_and_duplicates_do_not_matter() -> None:
    """The ring depends on the set of nodes only, never on the order they were listed in."""
    a = Ring(["n3", "n1", "n2", "n1"])
    b = Ring(["n1", "n2", "n3"])
    assert a == b and a.nodes == ("n1", "n2", "n3")
    assert [a.replicas(ACTOR, k, 2) for k in KEYS[:300]] == [b.replicas(ACTOR, k, 2) for k in KEYS[:300]]


def test_adding_a_node_moves_about_one_nth_and_only_to_it() -> None:
    """Adding an 11th node moves ~1/11 of 10k owners, every moved key to the new node."""
    before = Ring(NODES10)
    after = before.with_node("n10")
    moved = [(a, b) for a, b in zip(owners(before), owners(after)) if a != b]
    assert all(new == "n10" for _, new in moved)
    share = len(moved) / len(KEYS)
    assert 0.05 < share < 0.14, share  # expected 1/11 = 0.091


def test_removing_a_node_moves_only_its_keys() -> None:
    """Removing a node moves exactly the keys it owned (~1/10), and no other key."""
    before = Ring(NODES10)
    after = before.without_node("n03")
    old, new = owners(before), owners(after)
    moved = [i for i in range(len(KEYS)) if old[i] != new[i]]
    assert moved == [i for i in range(len(KEYS)) if old[i] == "n03"]
    assert 0.06 < len(moved) / len(KEYS) < 0.14


def test_replica_lists_change_by_insertion_of_the_new_node() -> None:
    """With a node added, each replica list is the old one with the new node inserted (then cut to R)."""
    before = Ring(NODES10)
    after = before.with_node("n10")
    changed = 0
    for key in KEYS:
        old, new = before.replicas(ACTOR, key, 3), after.replicas(ACTOR, key, 3)
        if old != new:
            changed += 1
            assert "n10" in new
            rest = tuple(n for n in new if n != "n10")
            assert rest == old[: len(rest)]
    assert 0.18 < changed / len(KEYS) < 0.36  # expected R/N' = 3/11 = 0.27


def test_keys_spread_evenly_with_vnodes() -> None:
    """With 64 vnodes each of 10 nodes owns between half and twice its fair share of 10k keys."""
    counts = Counter(owners(Ring(NODES10)))
    assert set(counts) == set(NODES10)
    fair = len(KEYS) / len(NODES10)
    assert all(0.5 * fair < c < 2.0 * fair for c in counts.values()), counts


def test_actor_types_spread_differently() -> None:
    """The type name salts the hash: the same key of two types mostly lands on different owners."""
    ring = Ring(NODES10)
    same = sum(a == b for a, b in zip(owners(ring, "app:A"), owners(ring, "app:B")))
    assert same / len(KEYS) < 0.2  # independent placement: about 1/10


def test_owner_is_first_alive_or_suspect_replica() -> None:
    """owner() skips replicas the predicate calls down, and is None when none is up or there is no quorum."""
    placement = Placement(Ring(NODES10))
    reps = placement.replicas(ACTOR, "k", 3)
    assert placement.owner(ACTOR, "k", replicas=3, alive=lambda n: True) == reps[0]
    assert placement.owner(ACTOR, "k", replicas=3, alive=lambda n: n != reps[0]) == reps[1]
    assert placement.owner(ACTOR, "k", replicas=3, alive=lambda n: n == reps[2]) == reps[2]
    assert placement.owner(ACTOR, "k", replicas=3, alive=lambda n: False) is None
    # A node outside the replica set being up does not make it the owner.
    outsider = next(n for n in NODES10 if n not in reps)
    assert placement.owner(ACTOR, "k", replicas=3, alive=lambda n: n == outsider) is None
    assert placement.owner(ACTOR, "k", replicas=3, alive=lambda n: True, quorum=False) is None
    assert placement.place(ACTOR, "k", replicas=3, alive=lambda n: n != reps[0]) == Placed(reps[1], reps)
    assert placement.place(ACTOR, "k", replicas=3, alive=lambda n: True, quorum=False) == Placed(None, reps)


def test_has_quorum_needs_more_than_half_alive() -> None:
    """Quorum is strictly more than half of the members as known: 3/5 yes, 2/5 and 2/4 no, 0/0 no."""
    assert has_quorum(3, 5) and has_quorum(1, 1) and has_quorum(2, 3) and has_quorum(3, 4)
    assert not has_quorum(2, 5) and not has_quorum(2, 4) and not has_quorum(1, 2) and not has_quorum(0, 0)
    with pytest.raises(ValueError):
        has_quorum(4, 3)
    with pytest.raises(ValueError):
        has_quorum(-1, 3)


_PROBE = """
import json, sys
from casty.protocol.placement import Ring
ring = Ring([f"n{i}" for i in range(7)], vnodes=32)
print(json.dumps([list(ring.replicas(t, f"k{i}", 3)) for t in ("a:A", "b:B") for i in range(2000)]))
"""


@pytest.mark.parametrize("hashseed", ["0", "12345"])
def test_same_answers_in_another_process(hashseed: str) -> None:
    """A fresh process with a different PYTHONHASHSEED computes exactly the same replicas."""
    ring = Ring([f"n{i}" for i in range(7)], vnodes=32)
    here = [list(ring.replicas(t, f"k{i}", 3)) for t in ("a:A", "b:B") for i in range(2000)]
    env = {**os.environ, "PYTHONHASHSEED": hashseed}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], cwd=ROOT, env=env, capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(done.stdout) == here
