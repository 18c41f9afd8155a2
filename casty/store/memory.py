"""An in-memory Store: the durable contract without a file, for tests and examples."""

from __future__ import annotations

from collections.abc import Sequence

from ..ports import StoredRecord

__all__ = ["MemoryStore"]


class MemoryStore:
    """Keeps the greatest version of each key's record in a dict; survives ActorSystems, not processes."""

    def __init__(self) -> None:
        self._records: dict[tuple[str, str], StoredRecord] = {}
        self.saves = 0

    async def load(self, actor: str, key: str) -> StoredRecord | None:
        return self._records.get((actor, key))

    async def save(self, actor: str, key: str, version: int, state: bytes) -> None:
        self.saves += 1
        current = self._records.get((actor, key))
        if current is None or version > current[0]:
            self._records[(actor, key)] = (version, state)

    async def drop(self, actor: str, key: str, version: int) -> None:
        current = self._records.get((actor, key))
        if current is not None and current[0] <= version:
            del self._records[(actor, key)]

    async def keys(self) -> Sequence[tuple[str, str]]:
        return sorted(self._records)
