"""``SimDisk``: a node's durable store behind simulated latency, failures and crashes.

It wraps a real store (the same ``SQLiteStore`` casty uses, on a per-node database, or a
``MemoryStore``) that outlives the node's incarnations: it *is* the disk. The wrapper
belongs to one incarnation. Latency is virtual time spent on the node's loop; a failure
raises ``OSError`` into the runtime, as a real disk error would.

With ``fsync=True`` (the default) a save returns once it is on the disk: what casty
confirms survives a crash. With ``fsync=False`` a save returns when it reaches the page
cache and reaches the disk at the next periodic sync; a crash loses what was not synced.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence
from typing import Any

from casty.ports import NO_EPOCH, ListsRecords, Store, StoredEpoch, StoredRecord

__all__ = ["SimDisk", "DiskCrashed"]

Latency = Callable[[random.Random], float]


def fixed(seconds: float) -> Latency:
    """A latency model that always takes ``seconds``."""
    return lambda rng: seconds


class DiskCrashed(OSError):
    """The node this disk belongs to has crashed: nothing more reaches the disk."""


class SimDisk:
    """A ``Store`` for one node incarnation, over a store that survives the node."""

    def __init__(
        self,
        store: Store,
        rng: random.Random,
        *,
        read_latency: Latency = fixed(0.0002),
        write_latency: Latency = fixed(0.0005),
        fsync: bool = True,
        sync_interval: float = 1.0,
        failure_rate: float = 0.0,
        on_event: Callable[[str, dict[str, Any]], None] | None = None,
    ) -> None:
        if not 0.0 <= failure_rate <= 1.0:
            raise ValueError(f"failure_rate must be within [0, 1], got {failure_rate}")
        self.store = store
        self._rng = rng
        self._read_latency = read_latency
        self._write_latency = write_latency
        self.fsync = fsync
        self._sync_interval = sync_interval
        self.failure_rate = failure_rate
        self._fail_next = 0
        self._crashed = False
        self._unsynced: dict[tuple[str, str], tuple[str, int, bytes, StoredEpoch]] = {}
        self._sync_timer: asyncio.TimerHandle | None = None
        self._on_event = on_event
        self.saves = 0
        self.lost = 0

    # --- fault injection -------------------------------------------------------------

    def fail_next(self, count: int = 1) -> None:
        """Make the next ``count`` operations fail with OSError."""
        self._fail_next += count

    def crash(self) -> int:
        """Cut the disk off: later operations raise, unsynced writes are lost. Returns how many were lost."""
        self._crashed = True
        lost = len(self._unsynced)
        self.lost += lost
        self._unsynced.clear()
        if self._sync_timer is not None:
            self._sync_timer.cancel()
            self._sync_timer = None
        return lost

    def _check(self, operation: str) -> None:
        if self._crashed:
            raise DiskCrashed(f"disk of a crashed node: {operation} refused")
        if self._fail_next:
            self._fail_next -= 1
            self._emit("disk.failed", {"operation": operation, "injected": True})
            raise OSError(f"simulated disk error during {operation}")
        if self.failure_rate and self._rng.random() < self.failure_rate:
            self._emit("disk.failed", {"operation": operation, "injected": False})
            raise OSError(f"simulated disk error during {operation}")

    def _emit(self, kind: str, fields: dict[str, Any]) -> None:
        if self._on_event is not None:
            self._on_event(kind, fields)

    # --- the Store port --------------------------------------------------------------

    async def load(self, actor: str, key: str) -> StoredRecord | None:
        await asyncio.sleep(self._read_latency(self._rng))
        self._check("load")
        pending = self._unsynced.get((actor, key))
        if pending is not None:
            kind, version, state, epoch = pending
            return StoredRecord(version, state, epoch)  # a drop's is a tombstone (state b""), as the store keeps it
        return await self.store.load(actor, key)

    async def save(self, actor: str, key: str, version: int, state: bytes, *, epoch: StoredEpoch = NO_EPOCH) -> None:
        await asyncio.sleep(self._write_latency(self._rng))
        self._check("save")
        self.saves += 1
        if self.fsync:
            await self.store.save(actor, key, version, state, epoch=epoch)
        else:
            self._buffer(actor, key, ("save", version, state, epoch))

    async def drop(self, actor: str, key: str, version: int, *, epoch: StoredEpoch = NO_EPOCH) -> None:
        await asyncio.sleep(self._write_latency(self._rng))
        self._check("drop")
        if self.fsync:
            await self.store.drop(actor, key, version, epoch=epoch)
        else:
            self._buffer(actor, key, ("drop", version, b"", epoch))

    async def keys(self) -> Sequence[tuple[str, str]]:
        await asyncio.sleep(self._read_latency(self._rng))
        self._check("keys")
        stored = set(await self.store.keys())
        for (actor, key), (kind, _, _, _) in self._unsynced.items():
            if kind == "drop":
                stored.discard((actor, key))
            else:
                stored.add((actor, key))
        return sorted(stored)

    async def records(self) -> Sequence[tuple[str, str, StoredRecord]]:
        """Every record, tombstones included (``casty.ports.ListsRecords``), with what the page cache holds over the disk's."""
        await asyncio.sleep(self._read_latency(self._rng))
        self._check("records")
        store = self.store
        if isinstance(store, ListsRecords):
            found = {(actor, key): record for actor, key, record in await store.records()}
        else:
            found = {}
            for actor, key in await store.keys():
                record = await store.load(actor, key)
                if record is not None:
                    found[(actor, key)] = record
        for entity, (_kind, version, state, epoch) in self._unsynced.items():
            found[entity] = StoredRecord(version, state, epoch)  # what load reads too: the buffered entry over the disk's
        return [(actor, key, found[(actor, key)]) for actor, key in sorted(found)]

    # --- page cache ------------------------------------------------------------------

    def _buffer(self, actor: str, key: str, entry: tuple[str, int, bytes, StoredEpoch]) -> None:
        current = self._unsynced.get((actor, key))
        if current is None or (entry[3], entry[1]) >= (current[3], current[1]):  # (epoch, version), as the store orders
            self._unsynced[(actor, key)] = entry
        if self._sync_timer is None:
            loop = asyncio.get_running_loop()
            self._sync_timer = loop.call_later(self._sync_interval, self._start_sync)

    def _start_sync(self) -> None:
        self._sync_timer = None
        asyncio.get_running_loop().create_task(self.sync())

    async def sync(self) -> None:
        """Write the page cache to the disk (what a periodic fsync does)."""
        if self._crashed:
            return
        pending, self._unsynced = self._unsynced, {}
        for (actor, key), (kind, version, state, epoch) in pending.items():
            if kind == "drop":
                await self.store.drop(actor, key, version, epoch=epoch)
            else:
                await self.store.save(actor, key, version, state, epoch=epoch)
        if pending:
            self._emit("disk.synced", {"records": len(pending)})

    @property
    def unsynced(self) -> int:
        return len(self._unsynced)
