"""The remembered view on a node's disk: one reserved record of its durable store.

Membership's "The remembered view" needs a restarted node to know the cluster its previous
life had learned: without it, two seeds back from a crash while the members that remember
the cluster are paused found a cluster of whom they hear (swarm seed 848). The record goes
through the ``Store`` port that durable keys use, so every store (``MemoryStore``,
``SQLiteStore``, the simulator's ``SimDisk``, a user's) keeps it with no new method:

- its actor name ``VIEW_ACTOR`` (``"@cluster"``) can name no actor type (those are
  ``module:qualname``), so it never collides with a key; its key is the node's id, so nodes
  that share one database (a store given to several nodes) each keep their own; the runtime's readers of the store
  (the disk rule, the ``@active`` sweep) skip it; its state is a page set (one page, ``"view"``)
  with no ``@active`` page, so a reader that does not know it decodes it and passes by;
- the page is JSON: ``{"life": incarnation, "members": [[node, incarnation], ...]}``, the
  members sorted (equal views give equal bytes);
- it is written only when the member list changes (a join, a removal, a new incarnation),
  never per heartbeat, by one task at a time that writes the latest list; the version grows
  with every write and starts above both the stored one and this life's incarnation (wall
  microseconds at its birth), because a store keeps the greatest version it was given.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from .._core.codec import Codec
from ..errors import SchemaError
from ..ports import StoredRecord, Store

__all__ = ["VIEW_ACTOR", "VIEW_PAGE", "RememberedView", "encode_view", "decode_view", "ViewKeeper"]

VIEW_ACTOR: Final = "@cluster"
VIEW_PAGE: Final = "view"

_log = logging.getLogger("casty")

Members = tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class RememberedView:
    """What the disk says: the life that wrote it, the other members it had learned, the record's version."""

    life: int
    members: Members
    version: int


def encode_view(codec: Codec, life: int, members: Sequence[tuple[str, int]]) -> bytes:
    """The record's state: a page set with the JSON page ``"view"``."""
    body = {"life": life, "members": [[node, incarnation] for node, incarnation in sorted(members)]}
    return codec.encode_pages({VIEW_PAGE: json.dumps(body, separators=(",", ":")).encode()})


def decode_view(codec: Codec, record: StoredRecord) -> RememberedView:
    """Read a stored record back; a record that is not a remembered view is a ``SchemaError`` naming what was wrong."""
    if not record.state:
        return RememberedView(0, (), int(record.version))  # a tombstone: nothing remembered
    pages = codec.decode_pages(record.state)
    if VIEW_PAGE not in pages:
        raise SchemaError(f"the {VIEW_ACTOR} record has no {VIEW_PAGE!r} page")
    try:
        body: Any = json.loads(pages[VIEW_PAGE])
        life = body["life"]
        members = tuple((node, incarnation) for node, incarnation in body["members"])
    except (ValueError, KeyError, TypeError) as exc:
        raise SchemaError(f"the {VIEW_ACTOR} record is not a view: {exc!r}") from exc
    if not isinstance(life, int) or not all(isinstance(n, str) and isinstance(i, int) and i >= 0 for n, i in members):
        raise SchemaError(f"the {VIEW_ACTOR} record names members of the wrong types: {members!r}")
    return RememberedView(life, tuple(sorted(members)), int(record.version))


class ViewKeeper:
    """Reads the remembered view once, then writes the member list when it changes (one write in flight at a time)."""

    def __init__(self, store: Store, codec: Codec, life: int, loop: asyncio.AbstractEventLoop, *, node: str) -> None:
        self._store = store
        self._codec = codec
        self._life = life
        self._loop = loop
        self._node = node
        self._version = life  # the next write's version is above it (and above what read() finds)
        self._written: Members | None = None
        self._wanted: Members | None = None
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self.writes = 0

    async def read(self) -> RememberedView | None:
        """The view the disk remembers, or None (none stored). Store errors and bad records propagate."""
        record = await self._store.load(VIEW_ACTOR, self._node)
        if record is None:
            return None
        self._version = max(self._version, int(record.version))
        view = decode_view(self._codec, record)
        self._written = view.members if view.life == self._life else None
        return view

    def keep(self, members: Sequence[tuple[str, int]]) -> None:
        """The member list the node learned now: write it unless it is what was written last."""
        wanted = tuple(sorted(members))
        if self._closed or wanted == (self._wanted if self._wanted is not None else self._written):
            return
        self._wanted = wanted
        if self._task is None:
            self._task = self._loop.create_task(self._write(), name=f"{self._node}:view")

    def close(self) -> None:
        """No more writes (the node stops or crashed); a write in flight is cancelled."""
        self._closed = True
        if self._task is not None:
            self._task.cancel()

    async def _write(self) -> None:
        try:
            while not self._closed and self._wanted is not None and self._wanted != self._written:
                wanted = self._wanted
                self._version += 1
                try:
                    await self._store.save(VIEW_ACTOR, self._node, self._version, encode_view(self._codec, self._life, wanted))
                except Exception as exc:  # noqa: BLE001 - a disk error costs the memory, not the node
                    _log.error("%s: the member list could not be kept on the disk: %r", self._node, exc)
                    self._wanted = None  # the next change writes again
                    return
                self._written = wanted
                self.writes += 1
        finally:
            self._task = None
