"""``ReplicatedPages``: an activation's ``PageWriter`` in a cluster: its pages live on the key's replicas.

The activation acquires an owner epoch over the key's replicas (a ``KeyOwner`` in an
``OwnerSlot``, see ``casty.protocol.replication`` and ``casty.cluster.replicas``) and every
write waits for a write quorum. This writer owns the writes waiting for their quorum: each
write of a turn is staged in the key's group (``OwnerSlot.stage``) with its waiter, and
settled here when the owner reports the group (``Confirmed``, ``Fenced``, ``WriteTimedOut``)
or when the activation ends. Every waiter is a ``_Waiter`` that settles itself, in the order
the writes were staged: an ``_Awaited`` gives the future a coroutine awaits the group's
``(version, pages)``; a ``_Staged`` reports the write itself (a state write, a schedule's
firing: no coroutine per write). The node's copy in ``system.records`` only ever
holds confirmed pages. A durable type also keeps a copy of every confirmed write in the
node's store (``StorePages``, the base).

The cluster node makes one per activation (``ClusterNode.page_writer``); the activation
sees only the ``PageWriter`` protocol and never imports this module; this writer asks of the
activation only what ``PagesOwner`` names.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from .. import observer as ev
from .._core.actor import known_actor
from .._core.pages import STATE_PAGES, PagesOwner, StorePages
from .._core.state import ACTIVE_PAGE, BEHAVIOR_PAGE, STATE_PAGE
from ..errors import Fenced, MessageTooLarge, Unavailable
from ..protocol.replication import (
    ZERO_STAMP, Acquired, AcquireTimedOut, Confirmed, Epoch, Lost, Persisting, Stamp, WriteTimedOut,
)
from ..protocol.replication import WriteFenced

if TYPE_CHECKING:
    from .replicas import OwnerSlot
    from .runtime import ClusterNode

__all__ = ["ReplicatedPages", "ACQUIRE_TRIES"]

ACQUIRE_TRIES = 3
"""Prepare rounds one acquisition may take when replicas refuse it for a newer promise (see ``_AcquireLost``)."""


class _AcquireLost(Unavailable):
    """An acquisition's prepare met a newer promise (a ``Nack``, or a newer promise its own replica just gave).

    The owner's round came from what this node knew: its replica's promise and the epochs
    its lost owners saw (``round_hint``). A node cut off while another acquired the key knows
    none of those rounds, so after the heal its first prepare is refused, though nobody holds
    the key (the other released it) and no message has run (swarm seeds 181, 359, 917, 1874,
    1942: the first ask after the heal failed). The refusal names the newer promise, so the
    acquisition is tried again at once above it, up to ``ACQUIRE_TRIES`` rounds: a fresh epoch
    by prepare/promise, as the next message's acquisition would mint. Two nodes whose views both
    name them owner (during a fault) refuse each other at most that many times per acquisition.
    """


class _Waiter(msgspec.Struct):
    """A replicated write staged in its key's group, waiting for the group's outcome (``settle``).

    One kind per way of waiting (``_Awaited``, ``_Staged``), in one list per group so a group
    settles its writes in the order they were staged. (``msgspec.Struct``s for their C
    constructor; never encoded.)
    """

    def settle(self, version: int, pages: dict[str, bytes], error: BaseException | None) -> None:
        """Give this write the group's outcome: confirmed as ``version`` with ``pages``, or failed with ``error``."""
        raise NotImplementedError


class _Awaited(_Waiter):
    """A write a coroutine awaits (``_write_replicated``): its future gets ``(version, pages)``; the coroutine reports it."""

    future: asyncio.Future[tuple[int, dict[str, bytes]]]

    def settle(self, version: int, pages: dict[str, bytes], error: BaseException | None) -> None:
        future = self.future
        if future.done():
            return
        if error is None:
            future.set_result((version, pages))
        else:
            future.set_exception(error)
            future.exception()  # retrieved: the waiting task may be gone (cancelled) by now


class _Staged(_Waiter):
    """A replicated write nobody needs the pages of, staged in its key's group (``OwnerSlot.stage``).

    When the group is settled it reports the write (``WriteConfirmed`` or ``WriteFailed``),
    takes a state write's value as the activation's state, and settles the future a body
    awaits, if any: the outcome of a state write or of a schedule's firing without a chain of
    coroutines per write. (A ``msgspec.Struct`` for its C constructor: two per delivery in a
    cluster. It is never encoded.)
    """

    activation: PagesOwner
    lease: int
    operation: str
    names: tuple[str, ...]
    future: asyncio.Future[None] | None = None
    value: Any = None  # the new state, for a state write (names is STATE_PAGES)

    def settle(self, version: int, pages: dict[str, bytes], error: BaseException | None) -> None:
        activation = self.activation
        system = activation.system
        future = self.future
        if error is None:
            if self.names is STATE_PAGES and version >= activation.state_version:
                activation.state_version = version
                activation.state_value = self.value
            observer = system.observer
            if observer is not None:
                observer(ev.WriteConfirmed(activation.type.name, activation.key, self.lease, version, self.names))
            if future is not None and not future.done():
                future.set_result(None)
        else:
            why = "fenced" if isinstance(error, Fenced) else "unavailable"
            system.emit(ev.WriteFailed, activation.type.name, activation.key, self.lease, self.operation, why)
            if future is not None and not future.done():
                future.set_exception(error)
                future.exception()  # retrieved: the waiting task may be gone (cancelled) by now


def _settle(waiters: list[_Waiter], version: int, pages: dict[str, bytes], error: BaseException | None) -> None:
    """Give a group of replicated writes their outcome, in the order they were staged."""
    for waiter in waiters:
        waiter.settle(version, pages, error)


class ReplicatedPages(StorePages):
    """The pages of an activation in a cluster: acquired over the key's replicas, every write confirmed by a quorum."""

    __slots__ = ("cluster", "slot", "_acquiring", "_writes", "_staged_waiters")

    def __init__(self, activation: PagesOwner, cluster: ClusterNode) -> None:
        system = activation.system
        super().__init__(activation, system.store if activation.type.durable is not None else None)
        self.cluster = cluster
        # The key's owner slot (a KeyOwner on the node's ReplicationService) once acquiring.
        self.slot: OwnerSlot | None = None
        self._acquiring: asyncio.Future[Acquired | Persisting] | None = None  # what the acquisition awaits
        # The writes waiting for a quorum: version -> (waiters, the pages as of that write), and
        # the waiters of the writes staged this turn (the slot's group, not written yet).
        self._writes: dict[int, tuple[list[_Waiter], dict[str, bytes]]] = {}
        self._staged_waiters: list[_Waiter] = []
        self.confirm_later = True  # by a quorum of replicas, never at once in memory
        self.at_once = False

    def _write_timeout(self) -> float:
        activation = self.activation
        limit = activation.type.write_timeout if activation.type.write_timeout is not None else self.system.write_timeout
        return limit if limit > 0 else 5.0

    async def acquire(self) -> bool:
        """Win an owner epoch over the key's replicas; adopt the newest state they hold, written back with ``@active``.

        The body starts only once a write quorum holds ``@active`` (and the initial state of a
        new key). ``Unavailable`` if the epoch is lost to a newer one or no quorum answers in time.
        """
        activation = self.activation
        system = self.system
        cluster = self.cluster
        codec = system.codec
        entity = self.entity
        activation.lease = system.next_lease()
        active = codec.encode_value([system.node, activation.lease], "@active")
        initial = activation.encode_initial()

        had_state = [False]  # set by the write-back: whether the newest state found has a state page
        from_store = [False]  # set by the write-back: the replicas held nothing, the store's pages came back

        # A durable type keeps a copy in the node's store: when no replica holds anything of
        # the key (never written, or every replica lost it), the store's pages come back.
        # The store keeps the epoch of the write it saved, so the new epoch is minted above it
        # (``after``): an owner recovering the key after every replica restarted would otherwise
        # start again at round 1, below the epochs the key had; and the store, which orders
        # records by epoch first, would then refuse its saves.
        stored_version, stored_pages, stored_stamp = 0, {}, ZERO_STAMP
        if self.store is not None:
            stored = await self.store.load(entity[0], entity[1])
            if stored is not None:
                stored_version = stored.version
                stored_pages = codec.decode_pages(stored.state) if stored.state else {}  # b"": a tombstone
                stored_stamp = Stamp(Epoch(*stored.epoch), stored.version)

        def write_back(found: Stamp, pages: Mapping[str, bytes]) -> dict[str, bytes | None]:
            updates: dict[str, bytes | None] = {}
            if stored_pages and stored_stamp > found:
                # The store holds a confirmed write newer than any the replicas hold (they lost
                # it): its pages replace theirs, as a newer stamp's would.
                updates.update(dict.fromkeys(pages))
                updates.update(stored_pages)
                pages = stored_pages
                from_store[0] = True
            had_state[0] = STATE_PAGE in pages
            updates[ACTIVE_PAGE] = active
            if STATE_PAGE not in pages:
                updates[STATE_PAGE] = initial
            return updates

        actor_type = activation.type
        service = cluster.replication
        self._supersede(service.slot_of(entity))
        slot = self.slot = service.open(
            entity, self._on_replication, write_timeout=self._write_timeout(), on_written=self._written,
            on_superseded=self._superseded,
        )
        replicas = cluster.replicas_of(actor_type.name, activation.key, actor_type.replicas)
        for tried in range(1, ACQUIRE_TRIES + 1):
            acquiring = self._acquiring = self.system.loop.create_future()
            slot.perform(slot.owner.acquire(
                slot.now(), replicas, actor_type.write, updates=write_back,
                after=max(service.round_hint(entity), stored_stamp.epoch), floor=stored_version,
                persist=self.store is not None,
            ))
            try:
                reported = await acquiring
                break
            except _AcquireLost:
                if tried == ACQUIRE_TRIES or slot.closed:
                    raise  # round_hint now holds the newer epoch: the next acquisition starts above it
        acquired = reported if type(reported) is Acquired else await self._hold_once_saved(slot, reported)
        self._acquiring = None
        records = system.records
        pages = activation.pages = self.pages = records.pages_of(entity)
        pages.clear()
        pages.update(acquired.pages)
        records.versions[entity] = acquired.version
        if self.store is not None:
            records.epochs[entity] = acquired.epoch
        system.emit(
            ev.EpochAcquired, actor_type.name, activation.key, acquired.epoch.round, acquired.epoch.node, acquired.version,
            stored_version if from_store[0] else acquired.found.version,
        )
        behavior_page = pages.get(BEHAVIOR_PAGE)
        if behavior_page is not None:
            activation.behavior = known_actor(codec.decode_value(behavior_page, str, "@behavior"))  # pages come from the network
        if had_state[0]:
            activation.state_value = activation.decode_state(pages[STATE_PAGE])
        return had_state[0]

    def _supersede(self, earlier: OwnerSlot | None) -> None:
        """An earlier run's slot of the key, still open here, ends now: its writes fail ``Unavailable`` at once.

        Only a run that is deactivating (released or idle) leaves the table before its slot
        closes: its deactivate write waits for a quorum. The slot this activation opens takes
        the key's frames, so that write's acks would never reach it, and its release would
        wait out the whole write timeout for nothing (the ``thawed-acquisition`` probe, seed
        29: the resume rule activated the key again 4 ms into its release). Its fate is not
        known here, as for a timed-out write: ``@active`` may stay, and this run idles the key
        again. Closing that slot also stops its resends under the older epoch.
        """
        if earlier is None or earlier.closed:
            return
        earlier.close()
        earlier.superseded()  # its writer (the earlier run's) fails what still waits: _superseded

    def _superseded(self) -> None:
        """This writer's slot was closed by a newer activation's (``_supersede``): its writes fail ``Unavailable`` now."""
        waiters = self._unsettled(self.slot)
        if waiters:
            name, key = self.entity
            error = Unavailable(f"{name}[{key!r}]: a new activation of the key began here before the write was confirmed")
            _settle(waiters, 0, {}, error)

    def _written(self, version: int, pages: dict[str, bytes]) -> None:
        """The slot wrote this turn's group as ``version``: its waiters wait for that version's quorum."""
        self._writes[version] = (self._staged_waiters, pages)
        self._staged_waiters = []

    def _unsettled(self, slot: OwnerSlot | None) -> list[_Waiter]:
        """Every waiter without an outcome yet (written or staged), taken away: the caller fails them."""
        waiters = [waiter for group, _pages in self._writes.values() for waiter in group]
        waiters.extend(self._staged_waiters)
        self._writes = {}
        self._staged_waiters = []
        if slot is not None:
            slot.drop_staged()
        return waiters

    async def _hold_once_saved(self, slot: OwnerSlot, persisting: Acquired | Persisting) -> Acquired:
        """Replication rule 7: a durable key's write-back goes to the store under its new epoch before the key is held.

        Replicas forget their promises when they restart; after every one of them did, the
        store's epoch is where the next owner starts from (``acquire(after=)``). An owner that
        acquired the key and crashed before its first save would otherwise leave the store a
        round behind, and the key's next owner would mint an epoch below the one it held.
        A ``Lost`` or the acquire timeout during the save fails the acquisition.
        """
        assert type(persisting) is Persisting
        activation = self.activation
        waiting = self._acquiring = self.system.loop.create_future()
        try:
            await self._persist_within(
                persisting.pages, persisting.version, persisting.epoch, self._write_timeout(), activation.lease,
                "activate", "acquired by the replicas but not saved by the store",
            )
        except BaseException:
            if waiting.done() and not waiting.cancelled():
                waiting.exception()  # a Lost or a timeout came first: the save's own error is the one raised
            raise
        if not waiting.done():
            slot.perform(slot.owner.persisted(persisting.epoch))
        if not waiting.done():
            name, key = self.entity
            raise Unavailable(f"{name}[{key!r}]: not acquired: the owner ended while its write-back was saved")
        result = await waiting
        assert type(result) is Acquired
        return result

    def _on_replication(self, event: Any) -> None:
        """A report of the key's owner: settles the acquisition or a write, or ends the activation (``Lost``)."""
        slot = self.slot
        if slot is None:
            return
        if type(event) is Confirmed:  # the one report of every write: first, and without building any text
            entry = self._writes.pop(event.version, None)
            if entry is None:
                return
            waiters, pages = entry
            versions = self.versions
            if event.version > versions.get(self.entity, 0) and self.pages is not None:
                self.pages.clear()
                self.pages.update(pages)
                versions[self.entity] = event.version
            _settle(waiters, event.version, pages, None)
            return
        name, key = self.entity
        where = f"{name}[{key!r}]"
        acquiring = self._acquiring
        if isinstance(event, Acquired | Persisting):
            if acquiring is not None and not acquiring.done():
                acquiring.set_result(event)
        elif isinstance(event, WriteFenced | WriteTimedOut):
            entry = self._writes.pop(event.version, None)
            if entry is not None:
                if isinstance(event, WriteFenced):
                    error: Unavailable = Fenced(f"{where}: write {event.version} fenced: a newer owner epoch {tuple(event.newer)} exists")
                else:
                    error = Unavailable(f"{where}: write {event.version} got no write quorum within write_timeout = {self._write_timeout():g} s")
                _settle(entry[0], event.version, entry[1], error)
        elif isinstance(event, Lost | AcquireTimedOut):
            if acquiring is not None and not acquiring.done():
                if isinstance(event, Lost):
                    acquiring.set_exception(_AcquireLost(f"{where}: not acquired: lost to a newer owner epoch"))
                else:
                    acquiring.set_exception(Unavailable(f"{where}: not acquired: no quorum of replicas answered in time"))
            elif isinstance(event, Lost):
                self.activation.lose_ownership(event)

    def close(self) -> None:
        """The activation ended: close the owner slot; every write still waiting fails ``Unavailable``."""
        slot = self.slot
        if slot is None:
            return
        self.slot = None
        slot.close()
        waiters = self._unsettled(slot)
        if waiters:
            name, key = self.entity
            error = Unavailable(f"{name}[{key!r}]: the activation ended before the write was confirmed")
            _settle(waiters, 0, {}, error)

    async def commit(self, lease: int | None, updates: Mapping[str, bytes | None], operation: str) -> int:
        if self.slot is not None:
            return await self._write_replicated(lease, updates, operation)
        return await StorePages.commit(self, lease, updates, operation)  # fenced: the slot is gone with the activation

    def commit_soon(self, updates: Mapping[str, bytes | None], operation: str) -> None:
        if self.slot is not None and self.store is None:
            self._stage_quietly(updates, operation)
            return
        task = self.system.loop.create_task(self._commit_quietly(updates, operation))
        self.system.track(task)

    def write_state_later(self, lease: int, value: Any, data: bytes) -> Awaitable[None]:
        """With no store behind the key: the future a ``_Staged`` settles (no coroutine per write); else ``write_state``."""
        activation = self.activation
        slot = self.slot
        if slot is not None and self.store is None:
            if activation.closed or lease != activation.lease or slot.owner.phase not in ("held", "lost"):
                slot, _shown = self._replicated_slot(lease, "state.set", True)  # raises, and reports why
            future: asyncio.Future[None] = self.system.loop.create_future()
            try:  # _stage, inline: once per state write
                slot.stage({STATE_PAGE: data})
            except MessageTooLarge:
                self.system.emit(ev.WriteFailed, activation.type.name, activation.key, lease, "state.set", "too_large")
                raise
            self._staged_waiters.append(_Staged(activation, lease, "state.set", STATE_PAGES, future, value))
            return future
        return activation.write_state(lease, value, data)

    async def deactivate(self, lease: int) -> None:
        if self.slot is None:
            await StorePages.deactivate(self, lease)
            return
        try:
            await self._write_replicated(lease, {ACTIVE_PAGE: None}, "deactivate", fence=False)
        except (Unavailable, MessageTooLarge):  # too large: pages acquired over the limit can never be written
            pass  # @active stays on the replicas: the key is resumed by its next owner, which idles it again
        finally:
            self.close()

    async def _write_replicated(
        self, lease: int | None, updates: Mapping[str, bytes | None], operation: str, *, fence: bool = True
    ) -> int:
        """A write through the key's owner epoch, confirmed once a write quorum of replicas holds it.

        The write joins this turn's group of the key (``OwnerSlot.stage``): it gets the version
        of the group's one replicated write, and the pages of that version.
        """
        slot, shown = self._replicated_slot(lease, operation, fence)
        epoch = slot.owner.epoch  # the write's epoch, for the store (the slot may be gone once it is confirmed)
        future: asyncio.Future[tuple[int, dict[str, bytes]]] = self.system.loop.create_future()
        self._stage(slot, updates, _Awaited(future), shown, operation)
        name, key = self.entity
        try:
            version, pages = await future
        except Fenced:
            self.system.emit(ev.WriteFailed, name, key, shown, operation, "fenced")
            raise
        except Unavailable:
            self.system.emit(ev.WriteFailed, name, key, shown, operation, "unavailable")
            raise
        if self.store is not None:
            await self._store_replicated(pages, version, epoch, shown, operation)
        self.system.emit(ev.WriteConfirmed, name, key, shown, version, tuple(updates))
        return version

    def _replicated_slot(self, lease: int | None, operation: str, fence: bool) -> tuple[OwnerSlot, int]:
        """The slot to stage a write in, and the lease the write's events show; raises (and reports) if there is none."""
        activation = self.activation
        if fence:
            activation.check_lease(lease, operation)
        slot = self.slot
        shown = activation.lease if lease is None else lease
        if slot is None or slot.owner.phase not in ("held", "lost"):
            name, key = self.entity
            self.system.emit(ev.WriteFailed, name, key, shown, operation, "unavailable")
            raise Unavailable(f"{name}[{key!r}]: {operation}: the key's owner epoch is not held")
        return slot, shown

    def _stage(self, slot: OwnerSlot, updates: Mapping[str, bytes | None], waiter: _Waiter, shown: int, operation: str) -> None:
        """``slot.stage``, ``waiter`` waiting for its outcome; a write too large for a frame is reported
        and raised (``MessageTooLarge``: nothing was staged)."""
        try:
            slot.stage(updates)
        except MessageTooLarge:
            name, key = self.entity
            self.system.emit(ev.WriteFailed, name, key, shown, operation, "too_large")
            raise
        self._staged_waiters.append(waiter)

    def _stage_quietly(self, updates: Mapping[str, bytes | None], operation: str) -> None:
        """The key's own write from a timer callback, with no store: staged, reported when settled, no task.

        What ``_commit_quietly`` does for such a key, without a coroutine and a task per firing:
        the outcome is only reported (``WriteConfirmed`` or ``WriteFailed``); the next owner of
        the key repeats what was not confirmed.
        """
        activation = self.activation
        slot = self.slot
        if activation.closed or slot is None or slot.owner.phase not in ("held", "lost"):
            try:
                slot, _shown = self._replicated_slot(None, operation, True)
            except Unavailable:
                return  # reported as WriteFailed
        lease = activation.lease
        try:
            self._stage(slot, updates, _Staged(activation, lease, operation, tuple(updates)), lease, operation)
        except MessageTooLarge:
            pass  # reported as WriteFailed; a timer callback has nobody to raise it to

    async def _store_replicated(
        self, pages: Mapping[str, bytes], version: int, epoch: Epoch, lease: int | None, operation: str
    ) -> None:
        """A durable type's copy of a quorum-confirmed write: saved before the write counts (``durable="write"``), or flushed later.

        Only confirmed writes reach the store, under the replicated epoch and version, so a
        store's greatest ``(epoch, version)`` is the newest state some owner confirmed, and a
        fenced owner's late save never overwrites a newer epoch's.
        """
        if self.durable != "write":
            self._schedule_flush()
            return
        await self._persist_within(
            pages, version, epoch, self._write_timeout(), lease, operation, "confirmed by the replicas but not by the store"
        )
