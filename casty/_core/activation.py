"""One activation of one key: its lifecycle and its lease-fenced state writes.

Its other jobs are mixins of ``Activation`` (no state of their own: these slots hold it),
each in a module of its own: the mailbox and inbox reads (``mailbox.MailboxWork``), the
persisted schedules (``activation_schedules.ScheduleWork``), and the timers, bridges and
merges of a run (``activation_runs.RunWork``). Where its page writes go (memory, the durable
store, the key's replicas) is its ``PageWriter`` (``casty._core.pages``), chosen once as it
is made: the cluster node makes the replicated one, so this module knows no cluster.

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
from typing import TYPE_CHECKING, Any

from .. import observer as ev
from .actor import ActorType, known_actor
from .context import Context
from ..errors import Fenced, SchemaError, Unavailable
from .ref import EntityRef
from .state import ACTIVE_PAGE, BEHAVIOR_PAGE, SCHEDULES_PAGE, STATE_PAGE
from .activation_runs import RunWork
from .activation_schedules import NO_SCHEDULES, ScheduleWork
from .mailbox import ASK_CHAIN, Envelope, PendingAsk
from .pages import STATE_PAGES, KeyRecords, PageWriter, local_pages

if TYPE_CHECKING:
    import contextvars
    from collections import deque

    from .activation_timers import ActivationTimer
    from .context import Inbox
    from .mailbox import AskChain, Link
    from .schedules import ArmedSchedule
    from .host import ActivationHost

__all__ = ["Activation", "Envelope", "PendingAsk", "KeyRecords", "ASK_CHAIN"]

Entity = tuple[str, str]

_NIL = b"\xc0"  # None in msgpack


class Activation(RunWork, ScheduleWork):
    """The in-memory incarnation of one (actor type, key) on one node."""

    __slots__ = (
        "system", "type", "behavior", "key", "entity", "_ref", "state_value", "lease", "pages",
        "_chain_token", "_held_links", "_initial", "_loop", "_mailbox", "_mailbox_limit", "_room", "_waiter", "_current",
        "_reads", "_failures", "state_version", "_ending", "closed", "_next_behavior", "_cancelled_ask",
        "_in_body", "_run_tasks", "_life", "_schedules", "_idle_after", "_idle_handle", "_last_activity",
        "_timers", "_pages",
    )

    def __init__(self, system: ActivationHost, actor_type: ActorType[Any, Any], key: str, initial: Any) -> None:
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
        self.state_version = 0
        self._ending: str | None = None
        self.closed = False
        self._next_behavior: ActorType[Any, Any] | None = None
        self._cancelled_ask = False
        self._in_body = False
        self._run_tasks: dict[asyncio.Task[Any], None] | None = None  # made by the first to_self/merge
        self._life: asyncio.Task[None] | None = None
        self._schedules: Mapping[str, ArmedSchedule] = NO_SCHEDULES  # see _writable_schedules
        self._idle_after = actor_type.idle_after if actor_type.idle_after is not None else system.idle_after
        self._idle_handle: int | None = None  # the idle check's number in the system's TimerHeap
        self._last_activity = self._loop.time()
        self._timers: dict[str, ActivationTimer] | None = None  # ctx.timer, made on first use
        # Where the writes go, chosen once: memory, the store, or (the cluster node's) the key's replicas.
        cluster = system.cluster_node
        self._pages: PageWriter = cluster.page_writer(self) if cluster is not None else local_pages(self)

    @property
    def ref(self) -> EntityRef[Any]:
        """The key's own ref (``ctx.self``), made on first use: most bodies never ask for it."""
        ref = self._ref
        if ref is None:
            ref = self._ref = EntityRef(self.system.actor_system, self.type.name, self.key)
        return ref

    # ================================================================== lifecycle ====

    def start(self) -> None:
        self._life = self._loop.create_task(self._live(), name=f"casty:{self.type.name}[{self.key}]")

    @property
    def active(self) -> bool:
        return not self.closed

    @property
    def page_writer(self) -> PageWriter:
        """Where this activation's writes go, chosen as it was made (the cluster node reads a replicated one's owner slot)."""
        return self._pages

    async def _live(self) -> None:
        system = self.system
        try:
            pages = self._pages
            recovered = pages.acquire_now() if pages.at_once else await pages.acquire()
            if self.system.cluster_node is not None:
                self.system.cluster_node.acquired(self.entity)  # it runs here: no orphan of it is left (the resume rule)
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
            if system.observer is not None:
                system.emit(ev.ActivationStarted, self.type.name, self.key, lease, self.behavior.name, recovered, restart)
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
                if self.closed or me is None:
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
                    self.lease = system.next_lease()
                    system.emit(ev.ActivationEnded, self.type.name, self.key, lease, "cancelled")
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
                system.emit(
                    ev.ActivationFailed,
                    self.type.name,
                    self.key,
                    lease,
                    repr(error),
                    type(failed.message).__qualname__ if failed is not None else None,
                    delay,
                )
                self.lease = system.next_lease()
                await asyncio.sleep(delay)
                continue
            self._current = None
            if self._next_behavior is not None:
                system.emit(ev.ActivationEnded, self.type.name, self.key, lease, "become")
                continue
            if self._mailbox:
                self.lease = system.next_lease()
                system.emit(ev.ActivationEnded, self.type.name, self.key, lease, "returned")
                continue
            await self._deactivate(lease, self._ending or "returned")
            return

    def adopt(self) -> tuple[bool, dict[str, bytes | None]]:
        """Take the key's pages as found: behavior, state and a new lease; returns what ``@active`` must write."""
        system = self.system
        pages = self.pages = self._pages.pages = system.records.pages_of(self.entity)
        behavior_page = pages.get(BEHAVIOR_PAGE)
        if behavior_page is not None:
            self.behavior = known_actor(system.codec.decode_value(behavior_page, str, "@behavior"))  # never an import
        recovered = STATE_PAGE in pages
        self.lease = system.next_lease()
        updates: dict[str, bytes | None] = {ACTIVE_PAGE: system.codec.encode_value([system.node, self.lease], "@active")}
        if recovered:
            self.state_value = self.decode_state(pages[STATE_PAGE])
        else:
            updates[STATE_PAGE] = self.encode_initial()
        return recovered, updates

    def encode_initial(self) -> bytes:
        """The initial state as a page, checked against the state type as any later write is (a
        wrongly typed initial confirmed here would fail the next owner's decode). ``None`` is the
        state of a type with no initial, whatever its state type: written, and read back, as such."""
        value = self.state_value
        if value is None:
            return _NIL
        return self.system.codec.encode_typed(value, self.behavior.state_type, "initial state", of=self.type.name)

    def decode_state(self, page: bytes) -> Any:
        if page == _NIL:
            return None  # a key of a type with no initial, never written (see encode_initial)
        return self.system.codec.decode_value(page, self.behavior.state_type, f"state of {self.type.name}")

    def lose_ownership(self, event: Any) -> None:
        """A newer owner epoch exists: cancel the body, fail its message and the queued asks with ``Unavailable``, leave."""
        if self.closed:
            return
        self.closed = True
        self._ending = "lost"
        self.system.forget(self)
        self._cancel_timers()
        self._pages.close()
        cluster = self.system.cluster_node
        if cluster is not None:
            cluster.orphaned(self.entity)  # @active stays: the key's owner must run it again (the resume rule)
        if self._life is not None:
            self._life.cancel()
        self.system.emit(ev.ActivationEnded, self.type.name, self.key, self.lease, "lost")
        error = Unavailable(f"{self.type.name}[{self.key!r}]: owner epoch lost to {tuple(event.newer)}")
        if self._current is not None:
            self._fail_ask(self._current, error)
            self._current = None
        while self._mailbox:
            self._fail_ask(self._mailbox.popleft(), error)

    def _abandon(self, error: BaseException) -> None:
        """Activation itself failed: fail what waits, leave the table; the next message tries again."""
        self.closed = True
        self.system.forget(self)
        self._pages.close()
        self.system.emit(ev.ActivationFailed, self.type.name, self.key, self.lease, repr(error), None, 0.0)
        cluster = self.system.cluster_node
        if cluster is not None:
            cluster.orphaned(self.entity, if_marked=True)  # a key left @active must be tried again (the resume rule)
        while self._mailbox:
            env = self._mailbox.popleft()
            self._fail_ask(env, error)

    async def _deactivate(self, lease: int, reason: str) -> None:
        """End this activation as idle (or released): clear ``@active``, stop timers, leave the table."""
        self.closed = True
        self.system.forget(self)
        self._cancel_timers()
        self.system.emit(ev.ActivationEnded, self.type.name, self.key, lease, reason)
        await self._pages.deactivate(lease)

    def stop(self, reason: str, why: str = "the actor system stopped") -> None:
        """End at once (the node is leaving or crashing, or the key moved): no writes, ``@active`` stays for recovery."""
        if self.closed:
            return
        self.closed = True
        self._ending = reason
        self._cancel_timers()
        if self._life is not None:
            self._life.cancel()
        if self._in_body:
            self.system.emit(ev.ActivationEnded, self.type.name, self.key, self.lease, reason)
        self._pages.close()
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
        if self.closed:
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

    def check_lease(self, lease: int | None, operation: str) -> None:
        """Refuse a write from a replaced run (``lease``) or, for the key's own writes (None), a closed activation."""
        if self.closed or (lease is not None and lease != self.lease):
            shown = self.lease if lease is None else lease
            self.system.emit(ev.WriteFailed, self.type.name, self.key, shown, operation, "fenced")
            held = "no activation" if self.closed else f"lease {self.lease}"
            raise Fenced(f"{self.type.name}[{self.key!r}]: {operation} from lease {shown} refused; the key is held by {held}")

    def check_writer(self, lease: int, operation: str) -> None:
        """Raise ``Fenced`` if ``lease`` is not the current run's: a replaced run may not even compute a write.

        ``state.update`` asks this before it calls its function, which would otherwise run on the value of
        whatever replaced it (after ``become``, another behaviour's state, perhaps of another type).
        """
        if self.closed or lease != self.lease:
            self.check_lease(lease, operation)

    def drop_flush(self) -> None:
        """Forget the pending write-behind flush (a crash loses what it would have saved)."""
        self._pages.drop_flush()

    async def _flush_now(self) -> None:
        """Save the pending write-behind flush now (the system is stopping)."""
        await self._pages.flush_now()

    def write_state_soon(self, lease: int, value: Any) -> Awaitable[None] | None:
        """Write the state: None once done at once (no store to wait for, no cluster), else what to await.

        What to await is the writer's (``PageWriter.write_state_later``): in a cluster with no
        store behind the key, a future settled with the key's group of writes (no coroutine per
        write); otherwise ``write_state``.
        """
        if self.closed or lease != self.lease:
            self.check_lease(lease, "state.set")  # a replaced run is fenced, whatever its value (and its type)
        data = self.system.codec.encode_typed(value, self.behavior.state_type, "state", of=self.type.name)
        pages = self._pages
        if not pages.confirm_later:
            version = pages.write_page_now(lease, STATE_PAGE, STATE_PAGES, data, "state.set")
            if version >= self.state_version:
                self.state_version = version
                self.state_value = value
            return None
        return pages.write_state_later(lease, value, data)

    async def write_state(self, lease: int, value: Any, data: bytes | None = None) -> None:
        """Write the state and wait until it is confirmed (``data``: the value already encoded)."""
        if data is None:
            if self.closed or lease != self.lease:
                self.check_lease(lease, "state.set")
            data = self.system.codec.encode_typed(value, self.behavior.state_type, "state", of=self.type.name)
        pages = self._pages
        if not pages.confirm_later:  # commit without its coroutine: confirmed at once
            version = pages.write_now(lease, {STATE_PAGE: data}, "state.set")
        else:
            version = await pages.commit(lease, {STATE_PAGE: data}, "state.set")
        if version >= self.state_version:
            self.state_version = version
            self.state_value = value

    async def delete_state(self, lease: int) -> None:
        self.check_lease(lease, "state.delete")
        for armed in list(self._schedules.values()):
            self._remove_schedule(armed, "deleted")
        updates: dict[str, bytes | None] = {STATE_PAGE: None, BEHAVIOR_PAGE: None, SCHEDULES_PAGE: None}
        if self.behavior is not self.type:
            self._next_behavior = self.type
            self._rotate_lease_after(lease)
        version = await self._pages.commit(self.lease, updates, "state.delete")
        if version >= self.state_version:
            self.state_version = version
            self.state_value = self._initial

    def _rotate_lease_after(self, lease: int) -> None:
        """Retire ``lease`` now: the run holding it may finish its step but can no longer write."""
        self.check_lease(lease, "become")
        self.lease = self.system.next_lease()

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
        version = await self._pages.commit(self.lease, updates, "become")
        if has_state and version >= self.state_version:
            self.state_version = version
            self.state_value = state
