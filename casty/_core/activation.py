"""One activation of one key: its mailbox, its runs, its writes and its schedule timers.

The lifecycle follows the activation table of the actor-model seed:

* first activation: recover the key's pages (memory, else the durable store), or start
  from ``initial``; write ``@active`` (and the initial state) and only then start the body;
* idle deactivation: the inbox ends after ``idle_after`` without messages, unless the key
  has schedules; the body returns, ``@active`` is cleared;
* body failure: the message being handled is dropped and its ask fails with
  ``ActorFailed``; the body restarts after backoff from the last saved state;
* cancelled ask in progress: the body is cancelled at its current await and restarted;
* ``become``: recorded in ``@behavior``, the new body starts at the old one's next read.

Every run has its own lease; every write names the lease it comes from and is refused
(``Fenced``) unless that lease is still the key's current one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import msgspec

from .. import observer as ev
from .actor import ActorType, known_actor
from ..protocol.replication import (
    ZERO_STAMP, Acquired, AcquireTimedOut, Confirmed, Epoch, Lost, Persisting, Stamp, WriteTimedOut,
)
from ..protocol.replication import Fenced as EpochFenced
from .context import Context
from ..errors import Fenced, MessageTooLarge, SchemaError, Unavailable
from ..ports import NO_EPOCH, StoredEpoch
from .ref import EntityRef
from .state import ACTIVE_PAGE, BEHAVIOR_PAGE, SCHEDULES_PAGE, STATE_PAGE
from .activation_runs import RunWork
from .activation_schedules import NO_SCHEDULES, ScheduleWork
from .activation_timers import ActivationTimer
from .mailbox import ASK_CHAIN, AskChain, Envelope, Link, PendingAsk
from .schedules import ArmedSchedule

if TYPE_CHECKING:
    import contextvars
    from collections import deque

    from ..cluster.replicas import OwnerSlot
    from .context import Inbox
    from .system import ActorSystem

__all__ = ["Activation", "Envelope", "PendingAsk", "KeyRecords", "ASK_CHAIN"]

Entity = tuple[str, str]



class _Staged(msgspec.Struct):
    """A replicated write nobody needs the pages of, staged in its key's group (``OwnerSlot.stage``).

    When the group is settled it reports the write (``WriteConfirmed`` or ``WriteFailed``),
    takes a state write's value as the activation's state, and settles the future a body
    awaits, if any: the outcome of a state write or of a schedule's firing without a chain of
    coroutines per write. (A ``msgspec.Struct`` for its C constructor: two per delivery in a
    cluster. It is never encoded.)
    """

    activation: Activation
    lease: int
    operation: str
    names: tuple[str, ...]
    future: asyncio.Future[None] | None = None
    value: Any = None  # the new state, for a state write (names is _STATE_PAGES)

    def settle(self, version: int, error: BaseException | None) -> None:
        activation = self.activation
        system = activation.system
        future = self.future
        if error is None:
            if self.names is _STATE_PAGES and version >= activation._state_version:
                activation._state_version = version
                activation.state_value = self.value
            observer = system._observer
            if observer is not None:
                observer(ev.WriteConfirmed(activation.type.name, activation.key, self.lease, version, self.names))
            if future is not None and not future.done():
                future.set_result(None)
        else:
            why = "fenced" if isinstance(error, Fenced) else "unavailable"
            system._emit_event(ev.WriteFailed, activation.type.name, activation.key, self.lease, self.operation, why)
            if future is not None and not future.done():
                future.set_exception(error)
                future.exception()  # retrieved: the waiting task may be gone (cancelled) by now


def _settle(waiters: list[Any], version: int, pages: dict[str, bytes], error: BaseException | None) -> None:
    """Give a group of replicated writes their outcome: a ``_Staged`` settles itself; a future gets (version, pages)."""
    for waiter in waiters:
        if type(waiter) is _Staged:
            waiter.settle(version, error)
        elif waiter.done():
            continue
        elif error is None:
            waiter.set_result((version, pages))
        else:
            waiter.set_exception(error)
            waiter.exception()  # retrieved: the waiting task may be gone (cancelled) by now


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


_STATE_PAGES = (STATE_PAGE,)  # the pages of a state write, as its WriteConfirmed names them
_NIL = b"\xc0"  # None in msgpack

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




class Activation(RunWork, ScheduleWork):
    """The in-memory incarnation of one (actor type, key) on one node."""

    __slots__ = (
        "system", "type", "behavior", "key", "entity", "_ref", "state_value", "lease", "pages",
        "_chain_token", "_held_links", "_initial", "_loop", "_mailbox", "_mailbox_limit", "_room", "_waiter", "_current",
        "_reads", "_failures", "_state_version", "_ending", "_closed", "_next_behavior", "_cancelled_ask",
        "_in_body", "_run_tasks", "_life", "_schedules", "_idle_after", "_idle_handle", "_last_activity",
        "_flush_handle", "_durable", "_store", "_timers", "_confirm_later", "_replica",
    )

    def __init__(self, system: ActorSystem, actor_type: ActorType[Any, Any], key: str, initial: Any) -> None:
        self.system = system
        self.type = actor_type
        self.behavior = actor_type
        self.key = key
        self.entity: Entity = (actor_type.name, key)
        self._chain_token: contextvars.Token[AskChain] | None = None  # resets ASK_CHAIN when the body waits
        self._held_links: tuple[Link, ...] | None = None  # the ask links of the last message read
        self._ref: EntityRef[Any] | None = None
        self.state_value: Any = initial
        self.lease = 0
        self.pages: dict[str, bytes] | None = None  # the key's pages in the system's KeyRecords, once acquired
        self._initial = initial
        self._loop = system.loop
        self._mailbox: deque[Envelope] | None = None  # made by the first delivery, dropped while the body waits
        self._mailbox_limit = actor_type.mailbox
        self._room: deque[asyncio.Future[None]] | None = None  # asks waiting for mailbox space
        self._waiter: Inbox[Any] | None = None  # the inbox the body waits on, until woken
        self._current: Envelope | None = None
        self._reads = 0
        self._failures = 0
        self._state_version = 0
        self._ending: str | None = None
        self._closed = False
        self._next_behavior: ActorType[Any, Any] | None = None
        self._cancelled_ask = False
        self._in_body = False
        self._run_tasks: dict[asyncio.Task[Any], None] | None = None  # made by the first to_self/merge
        self._life: asyncio.Task[None] | None = None
        self._schedules: Mapping[str, ArmedSchedule] = NO_SCHEDULES  # see _writable_schedules
        self._idle_after = actor_type.idle_after if actor_type.idle_after is not None else system.idle_after
        self._idle_handle: int | None = None  # the idle check's number in the system's TimerHeap
        self._last_activity = self._loop.time()
        self._flush_handle: asyncio.TimerHandle | None = None
        self._timers: dict[str, ActivationTimer] | None = None  # ctx.timer, made on first use
        self._durable = actor_type.durable
        self._store = system.store if actor_type.durable is not None else None
        # Cluster mode: the key's owner slot (a KeyOwner on the node's ReplicationService) once acquiring;
        # it also holds the acquisition's future and the writes waiting for their quorum.
        self._replica: OwnerSlot | None = None
        # A write is confirmed later (by the store, or by a quorum of replicas), not at once in memory.
        self._confirm_later = (self._store is not None and actor_type.durable == "write") or system._cluster is not None

    @property
    def ref(self) -> EntityRef[Any]:
        """The key's own ref (``ctx.self``), made on first use: most bodies never ask for it."""
        ref = self._ref
        if ref is None:
            ref = self._ref = EntityRef(self.system, self.type.name, self.key)
        return ref

    # ================================================================== lifecycle ====

    def start(self) -> None:
        self._life = self._loop.create_task(self._live(), name=f"casty:{self.type.name}[{self.key}]")

    @property
    def active(self) -> bool:
        return not self._closed

    async def _live(self) -> None:
        system = self.system
        try:
            if self.system._cluster is not None:
                recovered = await self._acquire_replicated()
                self.system._cluster.acquired(self.entity)  # it runs here: no orphan of it is left (the resume rule)
            else:
                recovered = self._acquire_in_memory() if self._store is None else await self._acquire()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # store failure, unknown @behavior, undecodable pages
            self._abandon(exc)
            return
        restart = 0
        backoff = self.type.backoff or system.backoff
        while True:
            if self._next_behavior is not None:
                # become took effect: whatever ended the previous run, the next one is the replacement
                self.behavior, self._next_behavior = self._next_behavior, None
            lease = self.lease
            ctx: Context[Any, Any] = Context(self, lease)
            self._reads = 0
            if system._observer is not None:
                system._emit_event(ev.ActivationStarted, self.type.name, self.key, lease, self.behavior.name, recovered, restart)
            if restart == 0:
                self._arm_recovered_schedules()  # after the start, so overdue firings queue behind nothing stale
            restart += 1
            # The body runs inside this task (no task of its own): an activation costs one
            # task, and a cancelled ask cancels this task, which absorbs it below.
            error: BaseException | None = None
            self._in_body = True
            try:
                await self.behavior.body(ctx)
            except asyncio.CancelledError as cancelled:
                me = asyncio.current_task()
                if self._closed or me is None:
                    self._in_body = False
                    self._cancel_run_tasks()
                    raise
                if self._cancelled_ask and me.cancelling():
                    me.uncancel()
                    self._in_body = False
                    self._cancel_run_tasks()
                    # A cancelled ask interrupted the body: drop the message it was on and
                    # rerun at once for the rest of the mailbox.
                    self._drop_current("ask cancelled")
                    self._cancelled_ask = False
                    self.lease = system._next_lease()
                    system._emit_event(ev.ActivationEnded, self.type.name, self.key, lease, "cancelled")
                    continue
                if me.cancelling():
                    raise
                error = cancelled  # the body's own awaitable was cancelled: a failure of the body
            except Exception as exc:
                error = exc
            self._in_body = False
            self._cancel_run_tasks()
            if error is None and self._reads == 0 and self._mailbox and self._next_behavior is None:
                error = RuntimeError(f"{self.behavior.name} returned without reading its inbox")
            if error is not None:
                self._failures += 1
                delay = backoff.delay(self._failures)
                failed = self._current
                self._current = None
                if failed is not None:
                    self._fail_ask(failed, error)
                    if failed.origin is not None:
                        self._report_failed_delivery(failed, error)
                system._emit_event(
                    ev.ActivationFailed,
                    self.type.name,
                    self.key,
                    lease,
                    repr(error),
                    type(failed.message).__qualname__ if failed is not None else None,
                    delay,
                )
                self.lease = system._next_lease()
                await asyncio.sleep(delay)
                continue
            self._current = None
            if self._next_behavior is not None:
                system._emit_event(ev.ActivationEnded, self.type.name, self.key, lease, "become")
                continue
            if self._mailbox:
                self.lease = system._next_lease()
                system._emit_event(ev.ActivationEnded, self.type.name, self.key, lease, "returned")
                continue
            await self._deactivate(lease, self._ending or "returned")
            return

    async def _acquire(self) -> bool:
        """Find the key's pages, choose behavior and state, write ``@active``; True if state existed."""
        system = self.system
        records = system._records
        if self.entity not in records and self._store is not None:
            stored = await self._store.load(self.type.name, self.key)
            if self.entity not in records and stored is not None:  # another path may have filled it meanwhile
                # The stored epoch carries on: a single node writes under it, so its saves are
                # never older than the record they follow (a cluster's owner may have written it).
                pages = system.codec.decode_pages(stored.state) if stored.state else {}  # b"": a tombstone
                records.add(self.entity, stored.version, pages, stored.epoch)
        recovered, updates = self._adopt()
        await self._commit(self.lease, updates, "activate")
        return recovered

    def _adopt(self) -> tuple[bool, dict[str, bytes | None]]:
        """Take the key's pages as found: behavior, state and a new lease; returns what ``@active`` must write."""
        system = self.system
        pages = self.pages = system._records.pages_of(self.entity)
        behavior_page = pages.get(BEHAVIOR_PAGE)
        if behavior_page is not None:
            self.behavior = known_actor(system.codec.decode_value(behavior_page, str, "@behavior"))  # never an import
        recovered = STATE_PAGE in pages
        self.lease = system._next_lease()
        updates: dict[str, bytes | None] = {ACTIVE_PAGE: system.codec.encode_value([system.node, self.lease], "@active")}
        if recovered:
            self.state_value = self._decode_state(pages[STATE_PAGE])
        else:
            updates[STATE_PAGE] = self._encode_initial()
        return recovered, updates

    def _encode_initial(self) -> bytes:
        """The initial state as a page, checked against the state type as any later write is (a
        wrongly typed initial confirmed here would fail the next owner's decode). ``None`` is the
        state of a type with no initial, whatever its state type: written, and read back, as such."""
        value = self.state_value
        if value is None:
            return _NIL
        return self.system.codec.encode_typed(value, self.behavior.state_type, "initial state", of=self.type.name)

    def _decode_state(self, page: bytes) -> Any:
        if page == _NIL:
            return None  # a key of a type with no initial, never written (see _encode_initial)
        return self.system.codec.decode_value(page, self.behavior.state_type, f"state of {self.type.name}")

    def _acquire_in_memory(self) -> bool:
        """``_acquire`` for a key with no store behind it: nothing to wait for, so no coroutine."""
        recovered, updates = self._adopt()
        self._write_now(self.lease, updates, "activate")
        return recovered

    # ================================================================== cluster ======
    # In a cluster the key's pages live on its replicas: the activation acquires an owner
    # epoch over them (a KeyOwner, see casty.protocol.replication) and every write waits for
    # its quorum. The node's copy in system._records only ever holds confirmed pages.

    def _write_timeout(self) -> float:
        limit = self.type.write_timeout if self.type.write_timeout is not None else self.system.write_timeout
        return limit if limit > 0 else 5.0

    async def _acquire_replicated(self) -> bool:
        """Win an owner epoch over the key's replicas; adopt the newest state they hold, written back with ``@active``.

        The body starts only once a write quorum holds ``@active`` (and the initial state of a
        new key). ``Unavailable`` if the epoch is lost to a newer one or no quorum answers in time.
        """
        system = self.system
        cluster = system._cluster
        assert cluster is not None
        codec = system.codec
        self.lease = system._next_lease()
        active = codec.encode_value([system.node, self.lease], "@active")
        initial = self._encode_initial()

        had_state = [False]  # set by the write-back: whether the newest state found has a state page
        from_store = [False]  # set by the write-back: the replicas held nothing, the store's pages came back

        # A durable type keeps a copy in the node's store: when no replica holds anything of
        # the key (never written, or every replica lost it), the store's pages come back.
        # The store keeps the epoch of the write it saved, so the new epoch is minted above it
        # (``after``): an owner recovering the key after every replica restarted would otherwise
        # start again at round 1, below the epochs the key had; and the store, which orders
        # records by epoch first, would then refuse its saves.
        stored_version, stored_pages, stored_stamp = 0, {}, ZERO_STAMP
        if self._store is not None:
            stored = await self._store.load(self.type.name, self.key)
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

        service = cluster.replication
        self._supersede(service.slot_of(self.entity))
        slot = self._replica = service.open(self.entity, self._on_replication, write_timeout=self._write_timeout())
        replicas = cluster.replicas_of(self.type.name, self.key, self.type.replicas)
        for tried in range(1, ACQUIRE_TRIES + 1):
            acquiring = slot.acquiring = self._loop.create_future()
            slot.perform(slot.owner.acquire(
                slot.now(), replicas, self.type.write, updates=write_back,
                after=max(service.round_hint(self.entity), stored_stamp.epoch), floor=stored_version,
                persist=self._store is not None,
            ))
            try:
                reported = await acquiring
                break
            except _AcquireLost:
                if tried == ACQUIRE_TRIES or slot.closed:
                    raise  # round_hint now holds the newer epoch: the next acquisition starts above it
        acquired = reported if type(reported) is Acquired else await self._hold_once_saved(slot, reported)
        slot.acquiring = None
        records = system._records
        pages = self.pages = records.pages_of(self.entity)
        pages.clear()
        pages.update(acquired.pages)
        records.versions[self.entity] = acquired.version
        if self._store is not None:
            records.epochs[self.entity] = acquired.epoch
        system._emit_event(
            ev.EpochAcquired, self.type.name, self.key, acquired.epoch.round, acquired.epoch.node, acquired.version,
            stored_version if from_store[0] else acquired.found.version,
        )
        behavior_page = pages.get(BEHAVIOR_PAGE)
        if behavior_page is not None:
            self.behavior = known_actor(codec.decode_value(behavior_page, str, "@behavior"))  # pages come from the network
        if had_state[0]:
            self.state_value = self._decode_state(pages[STATE_PAGE])
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
        waiters = earlier.unsettled()
        if waiters:
            error = Unavailable(f"{self.type.name}[{self.key!r}]: a new activation of the key began here before the write was confirmed")
            _settle(waiters, 0, {}, error)

    async def _hold_once_saved(self, slot: OwnerSlot, persisting: Acquired | Persisting) -> Acquired:
        """Replication rule 7: a durable key's write-back goes to the store under its new epoch before the key is held.

        Replicas forget their promises when they restart; after every one of them did, the
        store's epoch is where the next owner starts from (``acquire(after=)``). An owner that
        acquired the key and crashed before its first save would otherwise leave the store a
        round behind, and the key's next owner would mint an epoch below the one it held.
        A ``Lost`` or the acquire timeout during the save fails the acquisition.
        """
        assert type(persisting) is Persisting
        waiting = slot.acquiring = self._loop.create_future()
        try:
            await self._persist_within(
                persisting.pages, persisting.version, persisting.epoch, self._write_timeout(), self.lease,
                "activate", "acquired by the replicas but not saved by the store",
            )
        except BaseException:
            if waiting.done() and not waiting.cancelled():
                waiting.exception()  # a Lost or a timeout came first: the save's own error is the one raised
            raise
        if not waiting.done():
            slot.perform(slot.owner.persisted(persisting.epoch))
        if not waiting.done():
            raise Unavailable(f"{self.type.name}[{self.key!r}]: not acquired: the owner ended while its write-back was saved")
        result = await waiting
        assert type(result) is Acquired
        return result

    def _on_replication(self, event: Any) -> None:
        """A report of the key's owner: settles the acquisition or a write, or ends the activation (``Lost``)."""
        slot = self._replica
        if slot is None:
            return
        if type(event) is Confirmed:  # the one report of every write: first, and without building any text
            entry = slot.writes.pop(event.version, None)
            if entry is None:
                return
            waiters, pages = entry
            versions = self.system._records.versions
            if event.version > versions.get(self.entity, 0) and self.pages is not None:
                self.pages.clear()
                self.pages.update(pages)
                versions[self.entity] = event.version
            _settle(waiters, event.version, pages, None)
            return
        where = f"{self.type.name}[{self.key!r}]"
        acquiring = slot.acquiring
        if isinstance(event, Acquired | Persisting):
            if acquiring is not None and not acquiring.done():
                acquiring.set_result(event)
        elif isinstance(event, EpochFenced | WriteTimedOut):
            entry = slot.writes.pop(event.version, None)
            if entry is not None:
                if isinstance(event, EpochFenced):
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
                self._lose_ownership(event)

    def _lose_ownership(self, event: Any) -> None:
        """A newer owner epoch exists: cancel the body, fail its message and the queued asks with ``Unavailable``, leave."""
        if self._closed:
            return
        self._closed = True
        self._ending = "lost"
        self.system._forget(self)
        self._cancel_timers()
        self._close_replica()
        cluster = self.system._cluster
        if cluster is not None:
            cluster.orphaned(self.entity)  # @active stays: the key's owner must run it again (the resume rule)
        if self._life is not None:
            self._life.cancel()
        self.system._emit_event(ev.ActivationEnded, self.type.name, self.key, self.lease, "lost")
        error = Unavailable(f"{self.type.name}[{self.key!r}]: owner epoch lost to {tuple(event.newer)}")
        if self._current is not None:
            self._fail_ask(self._current, error)
            self._current = None
        while self._mailbox:
            self._fail_ask(self._mailbox.popleft(), error)

    def _close_replica(self) -> None:
        slot = self._replica
        if slot is None:
            return
        self._replica = None
        slot.close()
        waiters = slot.unsettled()
        if waiters:
            error = Unavailable(f"{self.type.name}[{self.key!r}]: the activation ended before the write was confirmed")
            _settle(waiters, 0, {}, error)

    async def _write_replicated(
        self, lease: int | None, updates: Mapping[str, bytes | None], operation: str, *, fence: bool = True
    ) -> int:
        """A write through the key's owner epoch, confirmed once a write quorum of replicas holds it.

        The write joins this turn's group of the key (``OwnerSlot.stage``): it gets the version
        of the group's one replicated write, and the pages of that version.
        """
        slot, shown = self._replicated_slot(lease, operation, fence)
        epoch = slot.owner.epoch  # the write's epoch, for the store (the slot may be gone once it is confirmed)
        future: asyncio.Future[tuple[int, dict[str, bytes]]] = self._loop.create_future()
        self._stage(slot, updates, future, shown, operation)
        try:
            version, pages = await future
        except Fenced:
            self.system._emit_event(ev.WriteFailed, self.type.name, self.key, shown, operation, "fenced")
            raise
        except Unavailable:
            self.system._emit_event(ev.WriteFailed, self.type.name, self.key, shown, operation, "unavailable")
            raise
        if self._store is not None:
            await self._store_replicated(pages, version, epoch, shown, operation)
        self.system._emit_event(ev.WriteConfirmed, self.type.name, self.key, shown, version, tuple(updates))
        return version

    def _replicated_slot(self, lease: int | None, operation: str, fence: bool) -> tuple[OwnerSlot, int]:
        """The slot to stage a write in, and the lease the write's events show; raises (and reports) if there is none."""
        if fence:
            self._check_lease(lease, operation)
        slot = self._replica
        shown = self.lease if lease is None else lease
        if slot is None or slot.owner.phase not in ("held", "lost"):
            self.system._emit_event(ev.WriteFailed, self.type.name, self.key, shown, operation, "unavailable")
            raise Unavailable(f"{self.type.name}[{self.key!r}]: {operation}: the key's owner epoch is not held")
        return slot, shown

    def _stage(self, slot: OwnerSlot, updates: Mapping[str, bytes | None], waiter: object, shown: int, operation: str) -> None:
        """``slot.stage``, reporting a write too large for a frame (``MessageTooLarge``, raised: nothing was staged)."""
        try:
            slot.stage(updates, waiter)
        except MessageTooLarge:
            self.system._emit_event(ev.WriteFailed, self.type.name, self.key, shown, operation, "too_large")
            raise

    def _stage_quietly(self, updates: Mapping[str, bytes | None], operation: str) -> None:
        """The key's own write from a timer callback, in a cluster, with no store: staged, reported when settled, no task.

        What ``_commit_quietly`` does for such a key, without a coroutine and a task per firing:
        the outcome is only reported (``WriteConfirmed`` or ``WriteFailed``); the next owner of
        the key repeats what was not confirmed.
        """
        slot = self._replica
        if self._closed or slot is None or slot.owner.phase not in ("held", "lost"):
            try:
                slot, _shown = self._replicated_slot(None, operation, True)
            except Unavailable:
                return  # reported as WriteFailed
        try:
            self._stage(slot, updates, _Staged(self, self.lease, operation, tuple(updates)), self.lease, operation)
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
        if self._durable != "write":
            self._schedule_flush()
            return
        await self._persist_within(
            pages, version, epoch, self._write_timeout(), lease, operation, "confirmed by the replicas but not by the store"
        )

    def _abandon(self, error: BaseException) -> None:
        """Activation itself failed: fail what waits, leave the table; the next message tries again."""
        self._closed = True
        self.system._forget(self)
        self._close_replica()
        self.system._emit_event(ev.ActivationFailed, self.type.name, self.key, self.lease, repr(error), None, 0.0)
        cluster = self.system._cluster
        if cluster is not None:
            cluster.orphaned(self.entity, if_marked=True)  # a key left @active must be tried again (the resume rule)
        while self._mailbox:
            env = self._mailbox.popleft()
            self._fail_ask(env, error)

    async def _deactivate(self, lease: int, reason: str) -> None:
        """End this activation as idle (or released): clear ``@active``, stop timers, leave the table."""
        self._closed = True
        self.system._forget(self)
        self._cancel_timers()
        self.system._emit_event(ev.ActivationEnded, self.type.name, self.key, lease, reason)
        updates: dict[str, bytes | None] = {ACTIVE_PAGE: None}
        if self._replica is not None:
            try:
                await self._write_replicated(lease, updates, "deactivate", fence=False)
            except (Unavailable, MessageTooLarge):  # too large: pages acquired over the limit can never be written
                pass  # @active stays on the replicas: the key is resumed by its next owner, which idles it again
            finally:
                self._close_replica()
        elif self._store is not None and self._durable == "write":
            try:
                await self._write_through(lease, updates, "deactivate", fence=False)
            except Unavailable:
                pass  # the marker stays on disk: a restarted node resumes the key, which then idles again
        else:
            self._apply(updates)
            if self._store is not None:
                self._schedule_flush()

    def stop(self, reason: str, why: str = "the actor system stopped") -> None:
        """End at once (the node is leaving or crashing, or the key moved): no writes, ``@active`` stays for recovery."""
        if self._closed:
            return
        self._closed = True
        self._ending = reason
        self._cancel_timers()
        if self._life is not None:
            self._life.cancel()
        if self._in_body:
            self.system._emit_event(ev.ActivationEnded, self.type.name, self.key, self.lease, reason)
        self._close_replica()
        error = Unavailable(f"{self.type.name}[{self.key!r}]: {why}")
        if self._current is not None:
            self._fail_ask(self._current, error)
        while self._mailbox:
            self._fail_ask(self._mailbox.popleft(), error)

    async def release(self) -> None:
        """Deactivate as if idle, once the mailbox is drained; return once this run has ended here.

        However the run ends (released, or stopped, lost or moved away while its mailbox
        drained) the caller gets no ``CancelledError``: the run's task being cancelled is not
        the caller being cancelled, and asyncio's ``CancelledError`` means the latter. A
        release that ended otherwise leaves the key as its ending did (``@active`` stays for
        the next owner), as a deactivate write that failed does. Cancelling the caller
        cancels only its wait, never the run. A failure of the run's own ending is raised.
        """
        if self._closed:
            return
        self._ending = "released"
        self._wake()
        life = self._life
        if life is not None:
            await asyncio.wait((life,))
            if not life.cancelled():
                life.result()

    def _cancel_timers(self) -> None:
        if self._timers:
            for timer in list(self._timers.values()):
                self.cancel_timer(timer, "ended")
        for armed in self._schedules.values():
            if armed.timer is not None:
                self.system.timers.cancel(armed.timer)
                armed.timer = None
        if self._idle_handle is not None:
            self.system.timers.cancel(self._idle_handle)
            self._idle_handle = None

    # ================================================================== writes =======

    def _check_lease(self, lease: int | None, operation: str) -> None:
        """Refuse a write from a replaced run (``lease``) or, for the key's own writes (None), a closed activation."""
        if self._closed or (lease is not None and lease != self.lease):
            shown = self.lease if lease is None else lease
            self.system._emit_event(ev.WriteFailed, self.type.name, self.key, shown, operation, "fenced")
            held = "no activation" if self._closed else f"lease {self.lease}"
            raise Fenced(f"{self.type.name}[{self.key!r}]: {operation} from lease {shown} refused; the key is held by {held}")

    def check_writer(self, lease: int, operation: str) -> None:
        """Raise ``Fenced`` if ``lease`` is not the current run's: a replaced run may not even compute a write.

        ``state.update`` asks this before it calls its function, which would otherwise run on the value of
        whatever replaced it (after ``become``, another behaviour's state, perhaps of another type).
        """
        if self._closed or lease != self.lease:
            self._check_lease(lease, operation)

    def _apply(self, updates: Mapping[str, bytes | None]) -> int:
        pages = self.pages
        assert pages is not None
        for name, data in updates.items():
            if data is None:
                pages.pop(name, None)
            else:
                pages[name] = data
        versions = self.system._records.versions
        version = versions[self.entity] = versions[self.entity] + 1
        return version

    async def _commit(self, lease: int | None, updates: Mapping[str, bytes | None], operation: str) -> int:
        """A fenced write of some pages, returning its version once confirmed (by the store, for write-through)."""
        if not self._confirm_later:
            return self._write_now(lease, updates, operation)
        if self._replica is not None:
            return await self._write_replicated(lease, updates, operation)
        self._check_lease(lease, operation)
        version = await self._write_through(lease, updates, operation)
        self.system._emit_event(ev.WriteConfirmed, self.type.name, self.key, self.lease if lease is None else lease, version, tuple(updates))
        return version

    def _write_now(self, lease: int | None, updates: Mapping[str, bytes | None], operation: str) -> int:
        """A fenced write confirmed at once: the node's memory copy, plus a write-behind flush if durable."""
        if self._closed or (lease is not None and lease != self.lease):
            self._check_lease(lease, operation)  # raises Fenced (and reports it)
        pages = self.pages  # _apply, inline: once or twice per message
        assert pages is not None
        for name, data in updates.items():
            if data is None:
                pages.pop(name, None)
            else:
                pages[name] = data
        return self._confirmed_now(lease, tuple(updates))

    def _write_page_now(self, lease: int | None, name: str, names: tuple[str, ...], data: bytes | None, operation: str) -> int:
        """``_write_now`` of the single page ``name`` (``names`` is ``(name,)``, a constant of the caller):
        no updates dict and no tuple of its keys, for the writes every message and every firing make."""
        if self._closed or (lease is not None and lease != self.lease):
            self._check_lease(lease, operation)  # raises Fenced (and reports it)
        pages = self.pages
        assert pages is not None
        if data is None:
            pages.pop(name, None)
        else:
            pages[name] = data
        return self._confirmed_now(lease, names)

    def _confirmed_now(self, lease: int | None, names: tuple[str, ...]) -> int:
        """The shared tail of the two writes above: the new version, the write-behind flush, the event."""
        versions = self.system._records.versions
        version = versions[self.entity] = versions[self.entity] + 1
        if self._store is not None:
            self._schedule_flush()
        observer = self.system._observer
        if observer is not None:
            observer(ev.WriteConfirmed(self.type.name, self.key, self.lease if lease is None else lease, version, names))
        return version

    def _commit_soon(self, updates: Mapping[str, bytes | None], operation: str) -> None:
        """The key's own write from a timer callback: applied now, or saved in the background if write-through."""
        if self._replica is not None and self._store is None:
            self._stage_quietly(updates, operation)
            return
        if self._confirm_later:
            task = self._loop.create_task(self._commit_quietly(updates, operation))
            self.system._track(task)
            return
        self._write_now(None, updates, operation)

    async def _commit_quietly(self, updates: Mapping[str, bytes | None], operation: str) -> None:
        try:
            await self._commit(None, updates, operation)
        except (Unavailable, MessageTooLarge):
            pass  # reported as WriteFailed; the next owner of the key repeats what was not confirmed

    async def _write_through(
        self, lease: int | None, updates: Mapping[str, bytes | None], operation: str, *, fence: bool = True
    ) -> int:
        """Save first, then apply: the node's copy of a write-through key only ever holds confirmed pages.

        Writes of one key are serialized (across its successive activations too: the lock
        lives in the system's KeyRecords), so each save carries every earlier confirmed write.
        """
        current = self.pages
        records = self.system._records
        assert current is not None and self._store is not None
        async with records.lock(self.entity):
            if fence:
                self._check_lease(lease, operation)  # it may have been replaced while this write waited
            pages = dict(current)
            for name, data in updates.items():
                if data is None:
                    pages.pop(name, None)
                else:
                    pages[name] = data
            version = records.versions[self.entity] + 1
            limit = self.type.write_timeout if self.type.write_timeout is not None else self.system.write_timeout
            shown = self.lease if lease is None else lease
            epoch = records.epochs.get(self.entity, NO_EPOCH)
            await self._persist_within(pages, version, epoch, limit or None, shown, operation, "not confirmed by the store")
            current.clear()
            current.update(pages)
            records.versions[self.entity] = version
            return version

    async def _save_snapshot(self) -> None:
        """Write-behind: save the node's latest pages of the key (the store keeps the greatest ``(epoch, version)``)."""
        pages = self.pages
        assert pages is not None and self._store is not None
        records = self.system._records
        version = records.versions[self.entity]
        try:
            await self._persist(pages, version, records.epochs.get(self.entity, NO_EPOCH))
        except asyncio.CancelledError:
            raise
        except Exception:
            self.system._emit_event(ev.WriteFailed, self.type.name, self.key, self.lease, "flush", "unavailable")

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
            self.system._emit_event(ev.WriteFailed, self.type.name, self.key, lease, operation, "unavailable")
            why = f"no answer within write_timeout = {limit:g} s" if isinstance(exc, TimeoutError) and limit else repr(exc)
            raise Unavailable(f"{self.type.name}[{self.key!r}]: {operation} {failed}: {why}") from exc

    async def _persist(self, pages: Mapping[str, bytes], version: int, epoch: StoredEpoch) -> None:
        """Put one version of the key's pages in the store: a save, or a drop once nothing is left (a deleted, idle key)."""
        assert self._store is not None
        if pages:
            await self._store.save(self.type.name, self.key, version, self.system.codec.encode_pages(pages), epoch=epoch)
        else:
            await self._store.drop(self.type.name, self.key, version, epoch=epoch)

    def _schedule_flush(self) -> None:
        """Write-behind (``durable=timedelta``): save the latest pages once per interval."""
        if self._flush_handle is not None:
            return
        assert isinstance(self._durable, timedelta)
        self._flush_handle = self._loop.call_later(self._durable.total_seconds(), self._flush)
        self.system._dirty[self] = None

    def _flush(self) -> None:
        self._flush_handle = None
        self.system._dirty.pop(self, None)
        task = self._loop.create_task(self._flush_now())
        self.system._track(task)

    async def _flush_now(self) -> None:
        self.drop_flush()
        await self._save_snapshot()

    def drop_flush(self) -> None:
        """Forget the pending write-behind flush (a crash loses what it would have saved)."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        self.system._dirty.pop(self, None)

    def write_state_soon(self, lease: int, value: Any) -> Awaitable[None] | None:
        """Write the state: None once done at once (no store to wait for, no cluster), else what to await.

        In a cluster with no store behind the key, what to await is the future a ``_Staged``
        settles: no coroutine per write. Otherwise it is ``write_state``.
        """
        if self._closed or lease != self.lease:
            self._check_lease(lease, "state.set")  # a replaced run is fenced, whatever its value (and its type)
        data = self.system.codec.encode_typed(value, self.behavior.state_type, "state", of=self.type.name)
        if not self._confirm_later:
            version = self._write_page_now(lease, STATE_PAGE, _STATE_PAGES, data, "state.set")
            if version >= self._state_version:
                self._state_version = version
                self.state_value = value
            return None
        slot = self._replica
        if slot is not None and self._store is None:
            if self._closed or lease != self.lease or slot.owner.phase not in ("held", "lost"):
                slot, _shown = self._replicated_slot(lease, "state.set", True)  # raises, and reports why
            future: asyncio.Future[None] = self._loop.create_future()
            try:  # _stage, inline: once per state write
                slot.stage({STATE_PAGE: data}, _Staged(self, lease, "state.set", _STATE_PAGES, future, value))
            except MessageTooLarge:
                self.system._emit_event(ev.WriteFailed, self.type.name, self.key, lease, "state.set", "too_large")
                raise
            return future
        return self.write_state(lease, value, data)

    async def write_state(self, lease: int, value: Any, data: bytes | None = None) -> None:
        """Write the state and wait until it is confirmed (``data``: the value already encoded)."""
        if data is None:
            if self._closed or lease != self.lease:
                self._check_lease(lease, "state.set")
            data = self.system.codec.encode_typed(value, self.behavior.state_type, "state", of=self.type.name)
        if not self._confirm_later:  # _commit without its coroutine: confirmed at once
            version = self._write_now(lease, {STATE_PAGE: data}, "state.set")
        else:
            version = await self._commit(lease, {STATE_PAGE: data}, "state.set")
        if version >= self._state_version:
            self._state_version = version
            self.state_value = value

    async def delete_state(self, lease: int) -> None:
        self._check_lease(lease, "state.delete")
        for armed in list(self._schedules.values()):
            self._remove_schedule(armed, "deleted")
        updates: dict[str, bytes | None] = {STATE_PAGE: None, BEHAVIOR_PAGE: None, SCHEDULES_PAGE: None}
        if self.behavior is not self.type:
            self._next_behavior = self.type
            self._rotate_lease_after(lease)
        version = await self._commit(self.lease, updates, "state.delete")
        if version >= self._state_version:
            self._state_version = version
            self.state_value = self._initial

    def _rotate_lease_after(self, lease: int) -> None:
        """Retire ``lease`` now: the run holding it may finish its step but can no longer write."""
        self._check_lease(lease, "become")
        self.lease = self.system._next_lease()

    async def become(self, lease: int, behavior: ActorType[Any, Any], state: Any, *, has_state: bool) -> None:
        if not isinstance(behavior, ActorType):
            raise TypeError(f"become needs an @actor type, got {behavior!r}")
        if not behavior.schema.same_as(self.type.schema):
            raise SchemaError(
                f"{behavior.name} cannot replace {self.type.name}: a replacement must accept the same messages"
            )
        codec = self.system.codec
        updates: dict[str, bytes | None] = {
            BEHAVIOR_PAGE: None if behavior is self.type else codec.encode_value(behavior.name, "@behavior")
        }
        if has_state:
            updates[STATE_PAGE] = codec.encode_typed(state, behavior.state_type, "state", of=behavior.name)
        self._rotate_lease_after(lease)
        self._next_behavior = behavior
        version = await self._commit(self.lease, updates, "become")
        if has_state and version >= self._state_version:
            self._state_version = version
            self.state_value = state
