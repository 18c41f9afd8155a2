"""The seams between the runtime and the world it runs in.

The runtime reads wall time, persists durable pages, sends frames to other nodes,
draws randomness and reports what it does only through these protocols. The real
adapters live in :mod:`casty.clock`, :mod:`casty.store` and :mod:`casty.observer`;
the simulator (``sim``) supplies virtual ones. Monotonic time and timers come from
the running asyncio loop, which is the remaining port.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from .observer import Event

__all__ = ["Clock", "Store", "StoredRecord", "Transport", "FrameHandler", "Observer"]


@runtime_checkable
class Clock(Protocol):
    """Wall-clock time, in integer microseconds since the Unix epoch (UTC).

    Schedules and cron read only this. It may jump (an NTP step), run fast or slow,
    and differ between nodes: the runtime must not assume it is monotonic.
    """

    def now_us(self) -> int: ...


StoredRecord = tuple[int, bytes]
"""What a store holds for one key: ``(version, encoded pages)``; the greatest version wins."""


@runtime_checkable
class Store(Protocol):
    """Durable pages of durable actor types, one record per (actor type, key).

    ``save`` must keep the record with the greatest version, so that a late write of an
    older version can never undo a newer one. Methods are coroutines so that a store
    may take time (a simulated disk with latency, a remote database).
    """

    async def load(self, actor: str, key: str) -> StoredRecord | None: ...

    async def save(self, actor: str, key: str, version: int, state: bytes) -> None: ...

    async def drop(self, actor: str, key: str, version: int) -> None: ...

    async def keys(self) -> Sequence[tuple[str, str]]: ...


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
