"""``SQLiteStore``: durable pages in a real SQLite file.

Calls are synchronous inside ``async`` methods on purpose: the runtime must not use threads
(the simulator refuses them), and a local SQLite write in WAL mode takes microseconds to a
millisecond. The greatest ``(epoch, version)`` wins in SQL itself, so an older save arriving
late, or a fenced owner's save of an older epoch, can never undo a newer one.

A drop leaves a tombstone (a row with an empty state) that orders later saves the same way,
so a late save of an older epoch cannot bring a deleted key back either; ``keys`` leaves
tombstones out, ``load`` returns them (with ``state == b""``) so the next writer goes on
above them, and ``records`` lists them with the rest.

A database made before epochs were stored has no epoch columns: opening it adds them, with
the defaults ``(0, '')``, so its rows read as written under no epoch (below every real one).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence

from ..ports import NO_EPOCH, StoredEpoch, StoredRecord

__all__ = ["SQLiteStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS casty_pages (
    actor       TEXT    NOT NULL,
    key         TEXT    NOT NULL,
    version     INTEGER NOT NULL,
    state       BLOB    NOT NULL,
    epoch_round INTEGER NOT NULL DEFAULT 0,
    epoch_node  TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (actor, key)
) WITHOUT ROWID
"""

_EPOCH_COLUMNS = (
    ("epoch_round", "INTEGER NOT NULL DEFAULT 0"),
    ("epoch_node", "TEXT NOT NULL DEFAULT ''"),
)

# (epoch_round, epoch_node, version) compared as a tuple; TEXT compares as UTF-8 bytes, which
# orders like Python's str comparison of the node ids.
_NEWER = (
    "(excluded.epoch_round > casty_pages.epoch_round"
    " OR (excluded.epoch_round = casty_pages.epoch_round AND excluded.epoch_node > casty_pages.epoch_node)"
    " OR (excluded.epoch_round = casty_pages.epoch_round AND excluded.epoch_node = casty_pages.epoch_node"
    " AND excluded.version > casty_pages.version))"
)
_NOT_OLDER = (  # a drop replaces a record of the same (epoch, version) too
    "(excluded.epoch_round > casty_pages.epoch_round"
    " OR (excluded.epoch_round = casty_pages.epoch_round AND excluded.epoch_node > casty_pages.epoch_node)"
    " OR (excluded.epoch_round = casty_pages.epoch_round AND excluded.epoch_node = casty_pages.epoch_node"
    " AND excluded.version >= casty_pages.version))"
)


class SQLiteStore:
    """One row per (actor type, key): the version, the encoded pages and the epoch they were written under.

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
        self._add_epoch_columns()

    def _add_epoch_columns(self) -> None:
        """Bring a table of the schema before epochs up to date (its rows keep epoch ``(0, '')``)."""
        present = {str(row[1]) for row in self._db.execute("PRAGMA table_info(casty_pages)")}
        for name, declaration in _EPOCH_COLUMNS:
            if name not in present:
                self._db.execute(f"ALTER TABLE casty_pages ADD COLUMN {name} {declaration}")

    async def load(self, actor: str, key: str) -> StoredRecord | None:
        row = self._db.execute(
            "SELECT version, state, epoch_round, epoch_node FROM casty_pages WHERE actor = ? AND key = ?", (actor, key)
        ).fetchone()
        return None if row is None else StoredRecord(int(row[0]), bytes(row[1]), (int(row[2]), str(row[3])))

    async def save(self, actor: str, key: str, version: int, state: bytes, *, epoch: StoredEpoch = NO_EPOCH) -> None:
        self._db.execute(
            "INSERT INTO casty_pages (actor, key, version, state, epoch_round, epoch_node) VALUES (?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (actor, key) DO UPDATE SET version = excluded.version, state = excluded.state, "
            f"epoch_round = excluded.epoch_round, epoch_node = excluded.epoch_node WHERE {_NEWER}",
            (actor, key, version, state, int(epoch[0]), str(epoch[1])),
        )

    async def drop(self, actor: str, key: str, version: int, *, epoch: StoredEpoch = NO_EPOCH) -> None:
        self._db.execute(
            "INSERT INTO casty_pages (actor, key, version, state, epoch_round, epoch_node) VALUES (?, ?, ?, x'', ?, ?) "
            "ON CONFLICT (actor, key) DO UPDATE SET version = excluded.version, state = excluded.state, "
            f"epoch_round = excluded.epoch_round, epoch_node = excluded.epoch_node WHERE {_NOT_OLDER}",
            (actor, key, version, int(epoch[0]), str(epoch[1])),
        )

    async def keys(self) -> Sequence[tuple[str, str]]:
        return [(str(a), str(k)) for a, k in self._db.execute("SELECT actor, key FROM casty_pages WHERE length(state) > 0 ORDER BY actor, key")]

    async def records(self) -> Sequence[tuple[str, str, StoredRecord]]:
        """Every row, tombstones included, sorted by (actor, key) (``casty.ports.ListsRecords``)."""
        rows = self._db.execute("SELECT actor, key, version, state, epoch_round, epoch_node FROM casty_pages ORDER BY actor, key")
        return [(str(a), str(k), StoredRecord(int(v), bytes(s), (int(r), str(n)))) for a, k, v, s, r, n in rows]

    def close(self) -> None:
        self._db.close()

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"
