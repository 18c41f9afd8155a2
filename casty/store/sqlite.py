"""``SQLiteStore``: durable pages in a real SQLite file.

Calls are synchronous inside ``async`` methods on purpose: the runtime must not use threads
(the simulator refuses them), and a local SQLite write in WAL mode takes microseconds to a
millisecond. The greatest version wins in SQL itself, so an older save arriving late can
never undo a newer one.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence

from ..ports import StoredRecord

__all__ = ["SQLiteStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS casty_pages (
    actor   TEXT    NOT NULL,
    key     TEXT    NOT NULL,
    version INTEGER NOT NULL,
    state   BLOB    NOT NULL,
    PRIMARY KEY (actor, key)
) WITHOUT ROWID
"""


class SQLiteStore:
    """One row per (actor type, key): the version and the encoded pages.

    ``synchronous`` is SQLite's durability knob: ``"FULL"`` (the default here) syncs every
    commit, ``"NORMAL"`` trades the last commits on power loss for speed.
    """

    def __init__(self, path: str | os.PathLike[str], *, synchronous: str = "FULL") -> None:
        if synchronous.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise ValueError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, got {synchronous!r}")
        self.path = os.fspath(path)
        self._db = sqlite3.connect(self.path, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"PRAGMA synchronous={synchronous.upper()}")
        self._db.execute(_SCHEMA)

    async def load(self, actor: str, key: str) -> StoredRecord | None:
        row = self._db.execute("SELECT version, state FROM casty_pages WHERE actor = ? AND key = ?", (actor, key)).fetchone()
        return None if row is None else (int(row[0]), bytes(row[1]))

    async def save(self, actor: str, key: str, version: int, state: bytes) -> None:
        self._db.execute(
            "INSERT INTO casty_pages (actor, key, version, state) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (actor, key) DO UPDATE SET version = excluded.version, state = excluded.state "
            "WHERE excluded.version > casty_pages.version",
            (actor, key, version, state),
        )

    async def drop(self, actor: str, key: str, version: int) -> None:
        self._db.execute("DELETE FROM casty_pages WHERE actor = ? AND key = ? AND version <= ?", (actor, key, version))

    async def keys(self) -> Sequence[tuple[str, str]]:
        return [(str(a), str(k)) for a, k in self._db.execute("SELECT actor, key FROM casty_pages ORDER BY actor, key")]

    def close(self) -> None:
        self._db.close()

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"
