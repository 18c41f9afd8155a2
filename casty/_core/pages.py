"""Where an activation's page writes go: the ``PageWriter`` seam, and its memory and store writers.

Every write of an activation (``@active``, a state write, a schedule's next due, ``become``,
``delete``) goes through one ``PageWriter``, chosen once when the activation is made
(``local_pages`` on a single node; the cluster node's ``page_writer`` in a cluster):

* ``MemoryPages``: no store behind the type: a write is applied to the node's copy
  (``KeyRecords``) and confirmed at once;
* ``StorePages``: a durable type on a single node. Write-behind (``durable=timedelta``): confirmed
  at once, the latest pages saved once per interval. Write-through (``durable="write"``): saved
  first, then applied, so the node's copy only ever holds confirmed pages;
* ``casty.cluster.replicated_pages.ReplicatedPages``: in a cluster, through the key's owner
  epoch over its replicas; it owns the staged writes and their settlement. It drives the
  cluster's ``KeyOwner``, so it lives above the runtime; the activation only sees this protocol.

Fencing stays with the activation, whose leases it is: a writer asks ``check_lease`` where a
write must be refused (for a write-through save, again once the key's save lock is held).
What else a writer may ask of its activation is ``PagesOwner``; ``Activation`` implements it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Protocol

from .. import observer as ev
from ..errors import MessageTooLarge, Unavailable
from ..ports import NO_EPOCH, Store, StoredEpoch
from .state import ACTIVE_PAGE, STATE_PAGE

if TYPE_CHECKING:
    from typing import Any

    from .activation import Activation
    from .actor import ActorType
    from .host import ActivationHost

__all__ = ["PageWriter", "PagesOwner", "MemoryPages", "StorePages", "KeyRecords", "local_pages", "STATE_PAGES"]

Entity = tuple[str, str]

STATE_PAGES = (STATE_PAGE,)
"""The pages of a state write, as its ``WriteConfirmed`` names them (one tuple: told apart by identity)."""


class KeyRecords:
    """The node's copy of every key's pages, by entity: ``versions[entity]`` grows with every write.

    A table of dicts rather than a record object per key. A key's pages dict holds only
    strings and bytes, which CPython leaves untracked by the garbage collector, so a key
    the node holds costs the collector nothing; a record object per key was one more
    object to traverse on every full collection, for every key the node ever held.

    A key's pages dict is made once and only ever changed in place, so an activation
    may keep it: successive activations of the key share it, as they share its version
    and its save lock.
    """

    __slots__ = ("pages", "versions", "epochs", "_locks")

    def __init__(self) -> None:
        self.pages: dict[Entity, dict[str, bytes]] = {}
        self.versions: dict[Entity, int] = {}
        # A durable key's owner epoch, for its saves (the store orders records by epoch, then
        # version): the epoch it was acquired under in a cluster, the stored one on a single node.
        self.epochs: dict[Entity, StoredEpoch] = {}
        self._locks: dict[Entity, asyncio.Lock] = {}

    def __contains__(self, entity: Entity) -> bool:
        return entity in self.pages

    def __len__(self) -> int:
        return len(self.pages)

    def add(self, entity: Entity, version: int, pages: dict[str, bytes], epoch: StoredEpoch = NO_EPOCH) -> None:
        """Hold a key found elsewhere (in the durable store) at ``version``, written under ``epoch``."""
        self.pages[entity] = pages
        self.versions[entity] = version
        self.epochs[entity] = epoch

    def pages_of(self, entity: Entity) -> dict[str, bytes]:
        """The key's pages, empty at version 0 for a key the node never held."""
        pages = self.pages.get(entity)
        if pages is None:
            pages = self.pages[entity] = {}
            self.versions[entity] = 0
        return pages

    def lock(self, entity: Entity) -> asyncio.Lock:
        """Serializes the write-through saves of a key (made on first use: most keys never need it)."""
        lock = self._locks.get(entity)
        if lock is None:
            lock = self._locks[entity] = asyncio.Lock()
        return lock


class PagesOwner(Protocol):
    """What a page writer may ask of its activation (``Activation`` implements it; a writer sees only this).

    Plain attributes where a writer reads them on every write (no call where a read does).
    """

    system: ActivationHost
    """The node: its ``records``, ``codec``, ``loop``, ``store``, leases and events."""
    type: ActorType[Any, Any]
    """The key's actor type: its name for events, ``durable`` and ``write_timeout``."""
    behavior: ActorType[Any, Any]
    """The running behaviour: set from ``@behavior`` when the replicas' pages are adopted."""
    key: str
    """The key, for events and error texts."""
    entity: Entity
    """``(type name, key)``: the key's row in ``system.records``."""
    lease: int
    """The current run's lease: a write names it; an acquisition over the replicas mints it."""
    closed: bool
    """The activation has ended: its own writes (lease None) are refused from then on."""
    pages: dict[str, bytes] | None
    """The key's pages in ``system.records``, set by the writer that adopts them."""
    state_value: Any
    """The state the body sees: a confirmed state write, or the adopted state, becomes it."""
    state_version: int
    """The version of ``state_value``: a write confirmed out of order never replaces a newer one."""

    def check_lease(self, lease: int | None, operation: str) -> None:
        """Raise ``Fenced`` (and report it) for a write from a replaced run, or the key's own once closed."""

    def adopt(self) -> tuple[bool, dict[str, bytes | None]]:
        """Take the pages the node holds as the key's: True if state existed, and what ``@active`` must write."""

    def encode_initial(self) -> bytes:
        """The initial state as a page, for a key whose replicas hold no state."""

    def decode_state(self, page: bytes) -> Any:
        """A state page as a value of the behaviour's state type (pages from the replicas come from the network)."""

    def write_state(self, lease: int, value: Any, data: bytes | None = None) -> Awaitable[None]:
        """The state write with its coroutine: what a writer with no cheaper path returns to await."""

    def lose_ownership(self, event: Any) -> None:
        """A newer owner epoch exists (a ``Lost`` report): end the activation and fail what waits."""


class PageWriter(Protocol):
    """What an activation asks of its pages. ``lease`` None: the key's own write (a timer's), fenced only by closing."""

    confirm_later: bool
    """A write waits for its confirmation (a store's save, a quorum): ``write_now``/``write_page_now`` are not for it."""
    at_once: bool
    """The acquisition needs no wait: ``acquire_now`` rather than ``acquire``."""
    pages: dict[str, bytes] | None
    """The key's pages in the node's ``KeyRecords`` (the activation's ``pages`` too), once acquired."""

    def acquire_now(self) -> bool:
        """Adopt the key's pages and write ``@active``, all at once; True if state existed."""

    async def acquire(self) -> bool:
        """Find the key's pages (a store, the replicas), adopt them and write ``@active``; True if state existed."""

    def write_now(self, lease: int | None, updates: Mapping[str, bytes | None], operation: str) -> int:
        """A fenced write confirmed at once; its version."""

    def write_page_now(self, lease: int | None, name: str, names: tuple[str, ...], data: bytes | None, operation: str) -> int:
        """``write_now`` of the one page ``name`` (``names`` is ``(name,)``), the caller having checked the lease."""

    async def commit(self, lease: int | None, updates: Mapping[str, bytes | None], operation: str) -> int:
        """A fenced write of some pages; its version once confirmed."""

    def commit_soon(self, updates: Mapping[str, bytes | None], operation: str) -> None:
        """The key's own write from a timer callback: nobody waits; a failure is only reported."""

    def write_state_later(self, lease: int, value: Any, data: bytes) -> Awaitable[None]:
        """A state write that is confirmed later (``confirm_later``): what to await."""

    async def deactivate(self, lease: int) -> None:
        """Clear ``@active`` as the activation ends (a failure is reported, never raised: the marker stays)."""

    def close(self) -> None:
        """The activation ends: what waits for a confirmation fails ``Unavailable``."""

    def drop_flush(self) -> None:
        """Forget a pending write-behind flush (a crash loses what it would have saved)."""

    async def flush_now(self) -> None:
        """Save a pending write-behind flush now (the system is stopping)."""


class MemoryPages:
    """The pages of a key with no store behind it: every write confirmed at once in the node's copy."""

    __slots__ = ("activation", "entity", "system", "versions", "pages", "confirm_later", "at_once")

    def __init__(self, activation: PagesOwner) -> None:
        self.activation = activation
        self.entity = activation.entity
        self.system = activation.system
        self.versions = activation.system.records.versions  # made once, changed in place only
        self.pages: dict[str, bytes] | None = None  # the key's pages in the system's KeyRecords, once acquired
        self.confirm_later = False
        self.at_once = True

    def acquire_now(self) -> bool:
        """Adopt the pages the node holds (none: a new key); nothing to wait for, so no coroutine."""
        activation = self.activation
        recovered, updates = activation.adopt()
        self.write_now(activation.lease, updates, "activate")
        return recovered

    async def acquire(self) -> bool:
        return self.acquire_now()

    def _apply(self, updates: Mapping[str, bytes | None]) -> int:
        pages = self.pages
        assert pages is not None
        for name, data in updates.items():
            if data is None:
                pages.pop(name, None)
            else:
                pages[name] = data
        versions = self.versions
        version = versions[self.entity] = versions[self.entity] + 1
        return version

    def write_now(self, lease: int | None, updates: Mapping[str, bytes | None], operation: str) -> int:
        activation = self.activation
        if activation.closed or (lease is not None and lease != activation.lease):
            activation.check_lease(lease, operation)  # raises Fenced (and reports it)
        pages = self.pages  # _apply, inline: once or twice per message
        assert pages is not None
        for name, data in updates.items():
            if data is None:
                pages.pop(name, None)
            else:
                pages[name] = data
        return self._confirmed(lease, tuple(updates))

    def write_page_now(self, lease: int | None, name: str, names: tuple[str, ...], data: bytes | None, operation: str) -> int:
        # no updates dict and no tuple of its keys: the writes every message and every firing make
        pages = self.pages
        assert pages is not None
        if data is None:
            pages.pop(name, None)
        else:
            pages[name] = data
        return self._confirmed(lease, names)

    def _confirmed(self, lease: int | None, names: tuple[str, ...]) -> int:
        """The shared tail of the two writes above: the new version and its event."""
        versions = self.versions
        version = versions[self.entity] = versions[self.entity] + 1
        observer = self.system.observer
        if observer is not None:
            activation = self.activation
            observer(ev.WriteConfirmed(activation.type.name, activation.key, activation.lease if lease is None else lease, version, names))
        return version

    async def commit(self, lease: int | None, updates: Mapping[str, bytes | None], operation: str) -> int:
        return self.write_now(lease, updates, operation)

    def commit_soon(self, updates: Mapping[str, bytes | None], operation: str) -> None:
        self.write_now(None, updates, operation)

    def write_state_later(self, lease: int, value: Any, data: bytes) -> Awaitable[None]:
        return self.activation.write_state(lease, value, data)

    async def deactivate(self, lease: int) -> None:
        self._apply({ACTIVE_PAGE: None})

    def close(self) -> None:
        pass

    def drop_flush(self) -> None:
        pass

    async def flush_now(self) -> None:
        pass

    async def _commit_quietly(self, updates: Mapping[str, bytes | None], operation: str) -> None:
        try:
            await self.commit(None, updates, operation)
        except (Unavailable, MessageTooLarge):
            pass  # reported as WriteFailed; the next owner of the key repeats what was not confirmed


class StorePages(MemoryPages):
    """The pages of a durable key: the node's copy and the store's, write-behind or write-through (``durable``).

    Also the base of the replicated writer, whose store (if any) keeps a copy of the
    quorum-confirmed writes: ``store`` is None there for a type that is not durable.
    """

    __slots__ = ("store", "durable", "_flush_handle")

    def __init__(self, activation: PagesOwner, store: Store | None) -> None:
        super().__init__(activation)
        self.store = store
        self.durable = activation.type.durable if store is not None else None
        self._flush_handle: asyncio.TimerHandle | None = None
        self.confirm_later = self.durable == "write"  # confirmed once saved, not at once in memory
        self.at_once = False  # the store may hold the key: it is read first

    async def acquire(self) -> bool:
        """Find the key's pages (the node's copy, else the store), adopt them, write ``@active``."""
        activation = self.activation
        system = self.system
        records = system.records
        entity = self.entity
        if entity not in records and self.store is not None:
            stored = await self.store.load(entity[0], entity[1])
            if entity not in records and stored is not None:  # another path may have filled it meanwhile
                # The stored epoch carries on: a single node writes under it, so its saves are
                # never older than the record they follow (a cluster's owner may have written it).
                pages = system.codec.decode_pages(stored.state) if stored.state else {}  # b"": a tombstone
                records.add(entity, stored.version, pages, stored.epoch)
        recovered, updates = activation.adopt()
        await self.commit(activation.lease, updates, "activate")
        return recovered

    def _confirmed(self, lease: int | None, names: tuple[str, ...]) -> int:
        versions = self.versions
        version = versions[self.entity] = versions[self.entity] + 1
        if self.store is not None:
            self._schedule_flush()
        observer = self.system.observer
        if observer is not None:
            activation = self.activation
            observer(ev.WriteConfirmed(activation.type.name, activation.key, activation.lease if lease is None else lease, version, names))
        return version

    async def commit(self, lease: int | None, updates: Mapping[str, bytes | None], operation: str) -> int:
        """Write-behind: at once. Write-through: once the store saved it (``_write_through``)."""
        if not self.confirm_later:
            return self.write_now(lease, updates, operation)
        activation = self.activation
        activation.check_lease(lease, operation)
        version = await self._write_through(lease, updates, operation)
        self.system.emit(
            ev.WriteConfirmed, activation.type.name, activation.key, activation.lease if lease is None else lease, version, tuple(updates)
        )
        return version

    def commit_soon(self, updates: Mapping[str, bytes | None], operation: str) -> None:
        """Applied now, or saved in the background if write-through."""
        if self.confirm_later:
            task = self.system.loop.create_task(self._commit_quietly(updates, operation))
            self.system.track(task)
            return
        self.write_now(None, updates, operation)

    async def deactivate(self, lease: int) -> None:
        updates: dict[str, bytes | None] = {ACTIVE_PAGE: None}
        if self.store is not None and self.durable == "write":
            try:
                await self._write_through(lease, updates, "deactivate", fence=False)
            except Unavailable:
                pass  # the marker stays on disk: a restarted node resumes the key, which then idles again
        else:
            self._apply(updates)
            if self.store is not None:
                self._schedule_flush()

    async def _write_through(
        self, lease: int | None, updates: Mapping[str, bytes | None], operation: str, *, fence: bool = True
    ) -> int:
        """Save first, then apply: the node's copy of a write-through key only ever holds confirmed pages.

        Writes of one key are serialized (across its successive activations too: the lock
        lives in the system's KeyRecords), so each save carries every earlier confirmed write.
        """
        activation = self.activation
        current = self.pages
        records = self.system.records
        assert current is not None and self.store is not None
        async with records.lock(self.entity):
            if fence:
                activation.check_lease(lease, operation)  # it may have been replaced while this write waited
            pages = dict(current)
            for name, data in updates.items():
                if data is None:
                    pages.pop(name, None)
                else:
                    pages[name] = data
            version = records.versions[self.entity] + 1
            limit = activation.type.write_timeout if activation.type.write_timeout is not None else self.system.write_timeout
            shown = activation.lease if lease is None else lease
            epoch = records.epochs.get(self.entity, NO_EPOCH)
            await self._persist_within(pages, version, epoch, limit or None, shown, operation, "not confirmed by the store")
            current.clear()
            current.update(pages)
            records.versions[self.entity] = version
            return version

    async def _save_snapshot(self) -> None:
        """Write-behind: save the node's latest pages of the key (the store keeps the greatest ``(epoch, version)``)."""
        pages = self.pages
        assert pages is not None and self.store is not None
        records = self.system.records
        version = records.versions[self.entity]
        try:
            await self._persist(pages, version, records.epochs.get(self.entity, NO_EPOCH))
        except asyncio.CancelledError:
            raise
        except Exception:
            activation = self.activation
            self.system.emit(ev.WriteFailed, activation.type.name, activation.key, activation.lease, "flush", "unavailable")

    async def _persist_within(
        self,
        pages: Mapping[str, bytes],
        version: int,
        epoch: StoredEpoch,
        limit: float | None,
        lease: int | None,
        operation: str,
        failed: str,
    ) -> None:
        """``_persist`` bounded by ``limit`` seconds (None: no bound); a failure is reported and raised as ``Unavailable``."""
        try:
            async with asyncio.timeout(limit):
                await self._persist(pages, version, epoch)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            name, key = self.entity
            self.system.emit(ev.WriteFailed, name, key, lease, operation, "unavailable")
            why = f"no answer within write_timeout = {limit:g} s" if isinstance(exc, TimeoutError) and limit else repr(exc)
            raise Unavailable(f"{name}[{key!r}]: {operation} {failed}: {why}") from exc

    async def _persist(self, pages: Mapping[str, bytes], version: int, epoch: StoredEpoch) -> None:
        """Put one version of the key's pages in the store: a save, or a drop once nothing is left (a deleted, idle key)."""
        assert self.store is not None
        name, key = self.entity
        if pages:
            await self.store.save(name, key, version, self.system.codec.encode_pages(pages), epoch=epoch)
        else:
            await self.store.drop(name, key, version, epoch=epoch)

    def _schedule_flush(self) -> None:
        """Write-behind (``durable=timedelta``): save the latest pages once per interval."""
        if self._flush_handle is not None:
            return
        assert isinstance(self.durable, timedelta)
        self._flush_handle = self.system.loop.call_later(self.durable.total_seconds(), self._flush)
        self._dirty()[self.activation] = None

    def _dirty(self) -> dict[Any, None]:
        """The node's table of write-behind activations with an unsaved change (this writer's owner is one of them)."""
        return self.system.dirty

    def _flush(self) -> None:
        self._flush_handle = None
        self._dirty().pop(self.activation, None)
        task = self.system.loop.create_task(self.flush_now())
        self.system.track(task)

    async def flush_now(self) -> None:
        self.drop_flush()
        await self._save_snapshot()

    def drop_flush(self) -> None:
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        self._dirty().pop(self.activation, None)


def local_pages(activation: Activation) -> MemoryPages:
    """The writer of an activation on a single node: the store's if its type is durable and the system has one."""
    store = activation.system.store if activation.type.durable is not None else None
    return StorePages(activation, store) if store is not None else MemoryPages(activation)
