"""How often CPython's cycle collector looks at young objects while a world runs.

A simulated instant can run thousands of keys at once (every key whose schedule is due, a
batch of a thousand replication frames), and the objects of that work live until the network
answers: futures, frames, waiters. With CPython's default threshold (a young collection every
700 net allocations) such a batch spans dozens of young collections; everything in flight is
promoted to the oldest generation, whose full collections (a traversal of every object of
every node) then cost more than the work itself. Young collections every ``threshold``
allocations let a batch die young. Only the first threshold is changed, only while the world
runs, and it is put back after; nothing in the simulated runtime depends on it (cycles are
collected later, not missed), so traces are the same either way.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["YOUNG_THRESHOLD", "young_collections_every"]

YOUNG_THRESHOLD = 20_000
"""Net allocations between young collections while a world runs (CPython's default is 700)."""


@contextmanager
def young_collections_every(threshold: int | None) -> Iterator[None]:
    """Raise the young generation's threshold to ``threshold`` for the block (None, or lower than now: unchanged)."""
    before = gc.get_threshold()
    if threshold is None or threshold <= before[0]:
        yield
        return
    gc.set_threshold(threshold, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
