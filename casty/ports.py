"""The seams between the runtime and the world it runs in.

The runtime reads wall time, persists durable pages, sends frames to other nodes,
draws randomness and reports what it does only through these protocols. The real
adapters live in :mod:`casty.clock`, :mod:`casty.store` and :mod:`casty.observer`;
the simulator (``sim``) supplies virtual ones. Monotonic time and timers come from
the running asyncio loop, which is the remaining port.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol, runtime_checkable

from .observer import Event

__all__ = ["Clock", "Entropy", "Store", "ListsRecords", "StoredRecord", "StoredEpoch", "NO_EPOCH", "Transport", "FrameHandler", "Observer"]


@runtime_checkable
class Clock(Protocol):
    """Wall-clock time, in integer microseconds since the Unix epoch (UTC).

    Schedules and cron read only this. It may jump (an NTP step), run fast or slow,
    and differ between nodes: the runtime must not assume it is monotonic.
    """

    def now_us(self) -> int: ...


Entropy = Callable[[int], bytes]
"""Secret randomness: ``n`` unpredictable bytes (``os.urandom`` for real nodes).

A port apart from the injected ``random.Random`` on purpose: that one is seeded so runs
repeat, and a handshake nonce drawn from it could be predicted (or repeated after a restart
with the same seed), letting a recorded proof be replayed. Only the TCP adapter reads it; a
test injects its own to see or fix the nonces.
"""


StoredEpoch = tuple[int, str]
"""The owner epoch ``(round, node)`` a page set was written under (``casty.protocol.replication.Epoch``)."""

NO_EPOCH: StoredEpoch = (0, "")
"""The epoch of a page set written outside any owner epoch: by a single node, or before stores kept epochs."""


class StoredRecord(NamedTuple):
    """What a store holds for one key: its version, its encoded pages and the epoch they were written under.

    Records are ordered by ``(epoch, version)``, as replicas order their stamps: within one
    epoch versions grow; a newer epoch wins even at a lower version, because its owner read
    every confirmed write before it wrote (and an older epoch's owner was fenced by it).
    """

    version: int
    state: bytes
    epoch: StoredEpoch = NO_EPOCH


@runtime_checkable
class Store(Protocol):
    """Durable pages of durable actor types, one record per (actor type, key).

    ``save`` must keep the record with the greatest ``(epoch, version)``, so that a late
    write of an older version, or a fenced owner's write of an older epoch, can never undo
    a newer one. ``drop`` replaces a record that is not newer than its own
    ``(epoch, version)`` by a tombstone, a record with ``state == b""``: ``load`` returns
    it (the next writer of the key goes on above it), ``keys`` leaves it out, and a late
    older save cannot bring the key back. Methods are coroutines so that a store may take
    time (a simulated disk with latency, a remote database).
    """

    async def load(self, actor: str, key: str) -> StoredRecord | None: ...

    async def save(self, actor: str, key: str, version: int, state: bytes, *, epoch: StoredEpoch = NO_EPOCH) -> None: ...

    async def drop(self, actor: str, key: str, version: int, *, epoch: StoredEpoch = NO_EPOCH) -> None: ...

    async def keys(self) -> Sequence[tuple[str, str]]: ...


@runtime_checkable
class ListsRecords(Protocol):
    """A ``Store`` that also lists every record it keeps, tombstones included, sorted by ``(actor, key)``.

    A cluster node reads its disk back into its replica when it starts (``ClusterNode``):
    a tombstone must come back with the pages, or an older copy of a deleted key on another
    node's disk would outrank nothing and bring the key back. A store without this method is
    read through ``keys`` and ``load``, without its tombstones.
    """

    async def records(self) -> Sequence[tuple[str, str, StoredRecord]]: ...


FrameHandler = Callable[[str, bytes], None]
"""Called with ``(source node id, frame)`` for every frame that arrives."""


@runtime_checkable
class Transport(Protocol):
    """Frames (opaque bytes, produced by the codec) between node ids.

    Delivery is best effort: frames may be lost, duplicated or reordered; protocols on
    top must tolerate it. ``send`` never blocks; a frame to an unreachable node is dropped.
    """

    @property
    def node(self) -> str: ...

    def send(self, destination: str, frame: bytes) -> None: ...

    def set_handler(self, handler: FrameHandler) -> None: ...

    async def close(self) -> None: ...


Observer = Callable[[Event], None]
"""Receives every typed event the runtime emits; must not raise and must not block."""
