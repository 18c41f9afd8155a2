"""An in-memory Store: the durable contract without a file, for tests and examples."""

from __future__ import annotations

from collections.abc import Sequence

from ..ports import NO_EPOCH, StoredEpoch, StoredRecord

__all__ = ["MemoryStore"]


class MemoryStore:
    """Keeps the greatest ``(epoch, version)`` of each key's record in a dict; survives ActorSystems, not processes.

    A drop leaves a tombstone (a record with no state): it still orders later saves, so a
    fenced owner's late save of an older epoch cannot bring a deleted key back.
    """

    def __init__(self) -> None:
        self._records: dict[tuple[str, str], StoredRecord] = {}
        self.saves = 0

    async def load(self, actor: str, key: str) -> StoredRecord | None:
        return self._records.get((actor, key))

    async def save(self, actor: str, key: str, version: int, state: bytes, *, epoch: StoredEpoch = NO_EPOCH) -> None:
        self.saves += 1
        current = self._records.get((actor, key))
        if current is None or (epoch, version) > (current.epoch, current.version):
            self._records[(actor, key)] = StoredRecord(version, state, (int(epoch[0]), str(epoch[1])))

    async def drop(self, actor: str, key: str, version: int, *, epoch: StoredEpoch = NO_EPOCH) -> None:
        current = self._records.get((actor, key))
        if current is None or (current.epoch, current.version) <= (epoch, version):
            self._records[(actor, key)] = StoredRecord(version, b"", (int(epoch[0]), str(epoch[1])))

    async def keys(self) -> Sequence[tuple[str, str]]:
        return sorted(entity for entity, record in self._records.items() if record.state)

    async def records(self) -> Sequence[tuple[str, str, StoredRecord]]:
        """Every record, tombstones included, sorted by (actor, key) (``casty.ports.ListsRecords``)."""
        return [(actor, key, self._records[(actor, key)]) for actor, key in sorted(self._records)]
