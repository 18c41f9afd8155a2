"""``ActorSystem``: the node. Holds the ports, the table of activations and the keys' pages.

Everything the runtime does on a node goes through here: refs are resolved to
activations, tells and asks are checked against the target type and encoded (so what
cannot travel fails at the call), replies find their pending ask, events reach the
observer. The system takes its ports at construction — the running loop (at entry), a
``Clock``, a ``Store``, a ``random.Random`` and an observer — and reads time and
randomness nowhere else, so the simulator can run it unmodified on virtual time.

A cluster plugs in from above: ``cluster=`` takes any ``ClusterOptions`` (``casty.Cluster``),
which builds the node's ``ClusterPlugin`` at entry (``casty._core.plugin``); the system asks
it where a key lives and hands it what must travel, and never imports ``casty.cluster``.

What an activation may ask of its node is named in ``casty._core.host.ActivationHost``; the
system implements it under public names (``emit``, ``records``, ``next_lease``, ``forget``,
``track``, ...). The cluster node asks a few more (``activate``, ``activation_table``,
``type_named``, ``pending_ask``, ``next_request``, ``number_requests_after``). Each has one name:
the underscored aliases they replaced are gone.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta, tzinfo
from datetime import timezone as dt_timezone
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from .. import observer as ev
from .activation import ASK_CHAIN, Activation, Envelope, KeyRecords, PendingAsk
from .actor import ActorType, Backoff, duration, known_actor, seconds
from ..clock import SystemClock
from .codec import ANYTHING, DECODE, FAST_VALUES, Codec
from ..errors import ConfigurationError, InvalidIdentity, MailboxFull, NotStarted, ReentrancyError, SchemaError, Unavailable
from ..observer import Event, LoggingObserver
from ..ports import Clock, Observer, Store, Transport
from .deadlines import DeadlineQueue
from .timer_heap import TimerHeap
from .plugin import ClusterOptions
from .ref import NOBODY, Askable, EntityRef, NobodyRef, Ref, ReplyRef, reply_type, with_reply_to
from .catchup import CatchUp, Skip
from .occurrence import ScheduledEnvelope
from .scheduler import NodeScheduleInfo, NodeScheduler
from .state import ACTIVE_PAGE

if TYPE_CHECKING:
    from ..protocol.membership import MemberView
    from .host import ActivationHost
    from .plugin import ClusterPlugin

__all__ = ["ActorSystem", "Placement"]

M = TypeVar("M")
R = TypeVar("R")

_MISSING: Any = object()
_SKIP = Skip()

_WIRE_REFS = (EntityRef, ReplyRef, NobodyRef)
"""The ref types the codec encodes."""


@dataclass(frozen=True)
class Placement:
    """Where a key lives: its owner node and its replica nodes (the owner first)."""

    owner: str | None
    replicas: tuple[str, ...]


class ActorSystem:
    """One casty node. Use as ``async with ActorSystem() as system:``.

    A normal exit is an orderly stop (durable write-behind is flushed); an exit by
    exception counts as a crash. In both, ``@active`` markers stay, so that a later system
    on the same store resumes the keys that were running (and their schedules).
    """

    def __init__(
        self,
        *,
        node: str = "local",
        cluster: ClusterOptions | None = None,
        transport: Transport | None = None,
        idle_after: timedelta | float = timedelta(minutes=1),
        backoff: Backoff = Backoff(),
        ask_timeout: timedelta | float = timedelta(seconds=10),
        write_timeout: timedelta | float = timedelta(seconds=5),
        leave_timeout: timedelta | float = timedelta(seconds=30),
        observer: Observer | None = None,
        store: Store | None = None,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        timezone: tzinfo = dt_timezone.utc,
    ) -> None:
        if not isinstance(node, str) or not node:
            raise ValueError(f"node must be a non-empty string, got {node!r}")
        if cluster is not None or transport is not None:
            if not isinstance(cluster, ClusterOptions):  # casty.Cluster, or anything that fits the protocol
                raise ConfigurationError(f"a transport needs cluster=Cluster(...), got cluster={cluster!r}")
            if transport is None:
                raise ConfigurationError("cluster= needs transport=: the Transport this node speaks to the others on")
            if transport.node != node:
                raise ConfigurationError(f"the transport is node {transport.node!r}, the system node {node!r}")
            cluster.check_transport(transport)
        self.cluster = cluster
        self.transport = transport
        self.cluster_node: ClusterPlugin | None = None  # the running cluster, built at entry when cluster= is given
        self.node = node
        self.idle_after: float | None = seconds(idle_after, "idle_after")  # None: keys never idle out
        if not isinstance(backoff, Backoff):
            raise TypeError(f"backoff must be a Backoff, not {type(backoff).__qualname__}")
        self.backoff = backoff
        self.ask_timeout = duration(ask_timeout, "ask_timeout", positive=True)
        self.write_timeout = duration(write_timeout, "write_timeout", positive=True)
        self.leave_timeout = duration(leave_timeout, "leave_timeout")
        self.store = store
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.random = rng if rng is not None else random.Random()
        if observer is None:
            default = LoggingObserver()
            self.observer: Observer | None = default if default.enabled else None
        else:
            self.observer = observer
        self.codec = Codec(self._ref_from_wire)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._running = False
        self._stopped = False
        self._activations: dict[tuple[str, str], Activation] = {}
        self.activation_table: Mapping[tuple[str, str], Activation] = self._activations  # read-only to the others
        self.records = KeyRecords()  # the node's copy of every key's confirmed pages
        self._types: dict[str, ActorType[Any, Any]] = {}
        self._pending: dict[int, PendingAsk] = {}
        self._request_seq = 0
        self._lease_seq = 0
        self._background: dict[asyncio.Task[Any], None] = {}
        self._deadlines: dict[float, DeadlineQueue[PendingAsk]] = {}  # ask timeouts, one queue per duration
        self.dirty: dict[Activation, None] = {}  # write-behind keys with an unsaved change (the stop flushes them)
        self.scheduler = NodeScheduler(self, tz=timezone, cluster_mode=cluster is not None)

    # ================================================================== lifecycle ====

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise NotStarted("the actor system is not started: use `async with ActorSystem() as system:`")
        return self._loop

    @property
    def running(self) -> bool:
        return self._running

    async def __aenter__(self) -> ActorSystem:
        if self._running or self._stopped:
            raise NotStarted("an ActorSystem runs once: make a new one")
        self._loop = asyncio.get_running_loop()
        self.timers = TimerHeap(self._loop, self.clock)  # the clock: schedules' timers follow its steps
        self._running = True
        self.scheduler.start()
        if self.cluster is not None:
            self.cluster_node = self.cluster.build_node(self)
        if self.store is not None and self.cluster_node is None:
            await self._resume_active_keys()  # in a cluster, the owner of each key resumes it (ClusterNode)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop(crashed=exc_type is not None)

    async def stop(self, *, crashed: bool = False) -> None:
        """End every activation; flush durable write-behind unless ``crashed``. Idempotent."""
        if not self._running:
            return
        self._running = False
        self._stopped = True
        if self.cluster_node is not None:
            self.cluster_node.close(crashed=crashed)  # leave first, so that the others route elsewhere at once
        self.scheduler.stop()  # node schedules live in memory only: a stopped node has none
        activations = list(self._activations.values())
        reason = "crashed" if crashed else "stopped"
        for activation in activations:
            activation.stop(reason)
        lives = [a._life for a in activations if a._life is not None]
        if lives:
            await asyncio.gather(*lives, return_exceptions=True)
        dirty = list(self.dirty)
        for activation in dirty:
            if crashed:
                activation.drop_flush()
            else:
                await activation._flush_now()
        if not crashed:
            if self._background:
                await asyncio.gather(*list(self._background), return_exceptions=True)
        for task in list(self._background):
            task.cancel()
        for deadlines in self._deadlines.values():
            deadlines.close()
        self.timers.close()
        error = NotStarted("the actor system stopped")
        for pending in list(self._pending.values()):
            if not pending.future.done():
                pending.future.set_exception(error)
        self._pending.clear()
        self._activations.clear()

    async def _resume_active_keys(self) -> None:
        """Reactivate keys whose stored ``@active`` marker survived (a crash or a stop while running)."""
        assert self.store is not None
        for actor_name, key in await self.store.keys():
            stored = await self.store.load(actor_name, key)
            if stored is None or not stored[1]:  # gone, or a tombstone (dropped since keys() listed it)
                continue
            pages = self.codec.decode_pages(stored[1])
            if ACTIVE_PAGE not in pages:
                continue
            try:
                actor_type = self.type_named(actor_name)
            except Exception as exc:
                self.emit(ev.ActivationFailed, actor_name, key, 0, repr(exc), None, 0.0)
                continue
            self.activate(actor_type, key, actor_type.initial)

    def _check_running(self) -> None:
        if not self._running:
            if self._stopped:
                raise NotStarted("the actor system has stopped")
            raise NotStarted("the actor system is not started: use `async with ActorSystem() as system:`")

    # ================================================================== refs =========

    def ref(self, actor: ActorType[Any, M], key: str, *, initial: Any = _MISSING) -> EntityRef[M]:
        """The ref of ``(actor, key)``; starts the key if it is not running (from ``initial`` if it has no state)."""
        if not self._running:
            self._check_running()
        if not (type(key) is str and key and key.isascii() and isinstance(actor, ActorType)):
            self.validate_identity(actor, key)
        self._types.setdefault(actor.name, actor)
        if self.cluster_node is None or self.cluster_node.owner_of(actor.name, key) == self.node:
            self.activate(actor, key, actor.initial if initial is _MISSING else initial)
        return EntityRef(self, actor.name, key)

    @staticmethod
    def validate_identity(actor: Any, key: Any) -> None:
        if not isinstance(actor, ActorType):
            raise InvalidIdentity(f"{actor!r} is not an actor type (decorate an async def with @actor)")
        if not isinstance(key, str):
            raise InvalidIdentity(f"{actor.name}: a key must be a string, got {type(key).__qualname__} {key!r}")
        if not key:
            raise InvalidIdentity(f"{actor.name}: a key must not be empty")
        if not key.isascii():
            try:
                key.encode()
            except UnicodeEncodeError as exc:  # a lone surrogate: no store, no frame could carry it
                raise SchemaError(f"{actor.name}: a key must be valid unicode (it travels as UTF-8), got {key!r}: {exc.reason}") from exc

    def type_named(self, name: str) -> ActorType[Any, Any]:
        """The type called ``name``, among those this process defined; ``UnknownActor`` otherwise.

        Never an import, whatever the name's origin: a ref's name may come from a peer's
        frame, a client's JSON, a replica's or the store's pages (see ``known_actor``).
        """
        found = self._types.get(name)
        if found is None:
            found = known_actor(name)
            self._types[name] = found
        return found

    def activate(self, actor: ActorType[Any, Any], key: str, initial: Any) -> Activation:
        """The key's activation on this node, made and started if it has none (from ``initial`` if it has no state)."""
        entity = (actor.name, key)
        activation = self._activations.get(entity)
        if activation is None:
            if not key.isascii():
                self.validate_identity(actor, key)  # a ref made by hand (system.ref checked its own)
            if actor.durable is not None and self.store is None:
                raise ConfigurationError(f"{actor.name} is durable ({actor.durable!r}) but this ActorSystem has no store")
            activation = Activation(self, actor, key, actor.initial if initial is _MISSING else initial)
            self._activations[activation.entity] = activation  # its own tuple: one per key, not two
            activation.start()
        return activation

    def forget(self, activation: Activation) -> None:
        """``activation`` ended: out of the table (if it is still the key's), so the next message starts a new one."""
        if self._activations.get(activation.entity) is activation:
            del self._activations[activation.entity]

    def _ref_from_wire(self, obj: list[Any]) -> Ref[Any]:
        """A ref decoded from bytes, bound to this system. An entity ref must name a type this process
        defined (``UnknownActor`` naming it, never an import) and a non-empty key; ``ValueError`` (a
        ``SchemaError`` once the codec has it) for anything else that is not an encoded ref."""
        kind = obj[0]
        if kind == "@e" and len(obj) == 3:
            name, key = obj[1], obj[2]
            if type(key) is not str or not key:
                raise ValueError(f"an encoded entity ref needs a non-empty string key, got {key!r}")
            if type(name) is not str or name not in self._types:
                self.type_named(name)  # UnknownActor: never an import
            return EntityRef(self, name, key)
        if kind == "@r" and len(obj) == 3 and type(obj[1]) is str and type(obj[2]) is int:
            return ReplyRef(self, obj[1], obj[2])
        if kind == "@n" and len(obj) == 1:
            return NOBODY
        raise ValueError(f"not an encoded ref: {obj!r}")

    # ================================================================== messaging ====

    def tell(self, ref: EntityRef[M], message: M, *, origin: str | None = None) -> None:
        """Queue ``message`` for ``ref``'s key (at most once); checked and encoded here, so errors surface now.

        ``origin`` tags deliveries made on someone's behalf (``"node-schedule:<reference>"``):
        if handling such a message fails, the failure is recorded as a dead letter naming it.
        """
        if not self._running:
            self._check_running()
        actor = self._types.get(ref.actor) or self.type_named(ref.actor)
        schema = actor.schema
        if not isinstance(message, schema.classes):
            schema.check(message)  # raises, naming what the type takes
        data = self.codec.encode_message(message, schema)
        if self.cluster_node is not None and not ref.key.isascii():
            self.validate_identity(actor, ref.key)  # a ref made by hand: its key must travel too
        if self.cluster_node is not None and self.cluster_node.owner_of(actor.name, ref.key) != self.node:
            self._request_seq += 1
            self.cluster_node.send(self._request_seq, actor.name, ref.key, data, None, origin)
            return
        activation = self._activations.get((actor.name, ref.key)) or self.activate(actor, ref.key, _MISSING)
        activation.deliver(Envelope(message, origin=origin) if origin is not None else Envelope(message))

    def tell_envelope(self, ref: EntityRef[Any], envelope: Envelope) -> None:
        """``tell`` of ``envelope.message`` whose local delivery is ``envelope`` itself (a node schedule's tick,
        a ``ScheduledEnvelope``: ``ctx.occurrence``); to a key owned elsewhere a ``ScheduledEnvelope`` goes with
        its occurrence (``ClusterPlugin.send_scheduled``), any other as a plain tell. Apart from ``tell`` so that
        a tell's path stays as it is."""
        message, origin = envelope.message, envelope.origin
        if not self._running:
            self._check_running()
        actor = self._types.get(ref.actor) or self.type_named(ref.actor)
        schema = actor.schema
        if not isinstance(message, schema.classes):
            schema.check(message)
        data = self.codec.encode_message(message, schema)
        if self.cluster_node is not None and not ref.key.isascii():
            self.validate_identity(actor, ref.key)
        if self.cluster_node is not None and self.cluster_node.owner_of(actor.name, ref.key) != self.node:
            self._request_seq += 1
            if type(envelope) is ScheduledEnvelope:
                self.cluster_node.send_scheduled(self._request_seq, actor.name, ref.key, data, envelope)
            else:
                self.cluster_node.send(self._request_seq, actor.name, ref.key, data, None, origin)
            return
        activation = self._activations.get((actor.name, ref.key)) or self.activate(actor, ref.key, _MISSING)
        activation.deliver(envelope)

    async def ask(self, ref: EntityRef[Any], message: Askable[R]) -> R:
        """Send ``message`` with a fresh reply slot and wait for the reply (``TimeoutError`` after the ask timeout)."""
        if not self._running:
            self._check_running()
        actor = self._types.get(ref.actor) or self.type_named(ref.actor)
        if not isinstance(message, Askable):
            raise SchemaError(f"ask needs an Askable message; {type(message).__qualname__} is not one (tell it instead)")
        schema = actor.schema
        if not isinstance(message, schema.classes):
            schema.check(message)  # raises, naming what the type takes
        running, links = ASK_CHAIN.get()
        entity = (ref.actor, ref.key)
        if entity == running or (links and any(waiting == entity and not ask.future.done() for waiting, ask in links)):
            waiting_keys = [waiting for waiting, ask in links if not ask.future.done()]
            path = " -> ".join(f"{a}[{k!r}]" for a, k in [*waiting_keys, *([running] if running else []), entity])
            raise ReentrancyError(f"ask would deadlock: {path} (use ctx.ask to ask without blocking the inbox)")
        self._request_seq += 1
        request = self._request_seq
        filled = with_reply_to(message, ReplyRef(self, self.node, request, reply_type(type(message))))
        # The copy differs from the caller's message only in reply_to, which holds a ReplyRef and
        # always encodes; so when the caller's reply_to encodes too (a runtime ref, NOBODY by
        # default) the caller's message is the one checked. Encoding reads an object's __dict__,
        # which makes CPython build it: on the caller's message that dict is garbage at once,
        # on the copy it would live as long as the body holds the message.
        data = self.codec.encode_message(message if type(message.reply_to) in _WIRE_REFS else filled, schema, True)
        loop = self._loop
        assert loop is not None  # running
        future: asyncio.Future[R] = loop.create_future()
        pending = PendingAsk(future, filled)
        if self.cluster_node is not None and not ref.key.isascii():
            self.validate_identity(actor, ref.key)  # a ref made by hand: its key must travel too
        if self.cluster_node is not None and self.cluster_node.owner_of(actor.name, ref.key) != self.node:
            if type(message.reply_to) in _WIRE_REFS:
                data = self.codec.encode_message(filled, schema, True)  # the bytes that travel carry our reply slot
            return await self._remote_ask(actor, ref.key, request, data, pending, future)
        activation = self._activations.get((actor.name, ref.key)) or self.activate(actor, ref.key, _MISSING)
        if activation._mailbox_limit is not None and not activation.has_room():
            if actor.on_full != "wait":
                raise MailboxFull(f"{actor.name}[{ref.key!r}]: mailbox full ({actor.mailbox} messages)")
            await activation.wait_room()
            activation = self.activate(actor, ref.key, _MISSING)
        self._pending[request] = pending
        timeout = actor.ask_timeout if actor.ask_timeout is not None else self.ask_timeout
        deadlines = self._deadlines.get(timeout)
        if deadlines is None:
            deadlines = self._deadlines[timeout] = DeadlineQueue(loop, timeout, self._expire)
        try:
            activation.deliver(Envelope(filled, pending, links + ((running, pending),) if running is not None else links))
            deadlines.add(pending)
            return await future
        except asyncio.CancelledError:
            self._give_up(pending)
            raise
        finally:
            self._pending.pop(request, None)

    async def _remote_ask(
        self, actor: ActorType[Any, Any], key: str, request: int, data: bytes, pending: PendingAsk, future: asyncio.Future[R]
    ) -> R:
        """An ask whose key another node owns: the router carries it; the reply comes back as a ``Reply`` frame."""
        cluster = self.cluster_node
        assert cluster is not None and self._loop is not None
        self._pending[request] = pending
        timeout = actor.ask_timeout if actor.ask_timeout is not None else self.ask_timeout
        deadlines = self._deadlines.get(timeout)
        if deadlines is None:
            deadlines = self._deadlines[timeout] = DeadlineQueue(self._loop, timeout, self._expire)
        try:
            cluster.send(request, actor.name, key, data, request, None)
            deadlines.add(pending)
            return await future
        finally:
            self._pending.pop(request, None)
            cluster.forget(request)

    def _expire(self, pending: PendingAsk) -> None:
        if pending.future.done():
            return
        activation = pending.activation
        where = f"{activation.type.name}[{activation.key!r}]" if activation is not None else "its target"
        timeout = activation.type.ask_timeout if activation is not None and activation.type.ask_timeout else self.ask_timeout
        pending.future.set_exception(
            TimeoutError(f"ask {type(pending.message).__qualname__} to {where} got no reply within {timeout:g} s")
        )
        self._give_up(pending)

    @staticmethod
    def _give_up(pending: PendingAsk) -> None:
        if pending.activation is not None:
            pending.activation.cancel_ask(pending)

    def reply(self, ref: ReplyRef[Any], value: Any) -> None:
        """Complete the ask behind ``ref`` (once; later or stray replies are ignored).

        ``SchemaError`` here, in the replying body, unless ``value`` would cross the network
        as the ask's ``R`` (``ref.expects``): the same check whether the asker is on this
        node or not, so the body fails and the asker gets ``ActorFailed`` either way.
        """
        check = FAST_VALUES.get(ref.expects)  # codec.check_typed, its common case inline: a reply per ask
        if check is None or check is DECODE or check is ANYTHING or not check(value):
            self.codec.check_typed(value, ref.expects, "the reply")
        if ref.node != self.node:
            if self.cluster_node is not None:
                self.cluster_node.reply(ref, value)
                return
            self.emit(ev.MessageDropped, "reply", f"{ref.node}#{ref.request}", type(value).__qualname__, "reply to another node")
            return
        pending = self._pending.get(ref.request)
        if pending is not None and not pending.future.done():
            pending.future.set_result(value)

    # ================================================================== node schedules

    async def schedule_once(
        self, message: M, ref: EntityRef[M], delay: timedelta, *, reference: str | None = None, misfire: CatchUp = _SKIP
    ) -> str:
        """Tell ``message`` to ``ref`` once, ``delay`` from now (node-held: lost when the node restarts);
        ``misfire``: what a late tick does (``Skip()``: told however late; ``DropLate(grace)``)."""
        return await self.scheduler.schedule_once(message, ref, delay, reference=reference, misfire=misfire)

    async def schedule(
        self, message: M, ref: EntityRef[M], interval: timedelta, *, reference: str | None = None, misfire: CatchUp = _SKIP
    ) -> str:
        """Tell ``message`` to ``ref`` every ``interval`` (node-held: lost when the node restarts); ``misfire``:
        ``Skip()`` (default), ``FireAll(limit)``, ``DropLate(grace)`` or ``FixedDelay()``."""
        return await self.scheduler.schedule(message, ref, interval, reference=reference, misfire=misfire)

    async def schedule_cron(
        self, message: M, ref: EntityRef[M], expression: str, *, reference: str | None = None, misfire: CatchUp = _SKIP,
        tz: str | tzinfo | None = None,
    ) -> str:
        """Tell ``message`` to ``ref`` at every fire time of a Quartz cron ``expression``, read in ``tz`` (an IANA
        name or tzinfo; None: the node's zone, UTC in a cluster, where an explicit zone is an extension of the seed);
        ``misfire``: ``Skip()`` (default), ``FireAll(limit)`` or ``DropLate(grace)``."""
        return await self.scheduler.schedule_cron(message, ref, expression, reference=reference, misfire=misfire, tz=tz)

    def pause_schedule(self, reference: str) -> None:
        self.scheduler.pause_schedule(reference)

    def resume_schedule(self, reference: str) -> None:
        """Resume a paused node schedule; its next tick is computed from now (no catch-up)."""
        self.scheduler.resume_schedule(reference)

    def cancel_schedule(self, reference: str) -> None:
        """Stop a node schedule on this node; a tick already delivered is not recalled."""
        self.scheduler.cancel_schedule(reference)

    def list_schedules(self) -> list[NodeScheduleInfo]:
        """This node's schedules, in registration order."""
        return self.scheduler.list_schedules()

    # ================================================================== introspection

    def activations(self) -> list[tuple[str, str]]:
        """The (actor type name, key) of every running activation, in activation order."""
        return [a.entity for a in self._activations.values() if a.active]

    def stats(self) -> dict[str, int]:
        return {
            "activations": len(self._activations),
            "keys": len(self.records),
            "pending_asks": len(self._pending),
            "queued": sum(len(a._mailbox) for a in self._activations.values() if a._mailbox is not None),
        }

    def placement(self, actor: ActorType[Any, Any], key: str) -> Placement:
        """Owner and replicas of a key. A single node owns every key; in a cluster, this node's view of the ring."""
        self.validate_identity(actor, key)
        if self.cluster_node is not None:
            return self.cluster_node.placement(actor.name, key)
        return Placement(owner=self.node, replicas=(self.node,))

    def members(self) -> list[MemberView]:
        """The membership as this node sees it (every member not removed, this node included); [] without a cluster."""
        if self.cluster_node is None:
            if self.cluster is not None:
                self._check_running()
            return []
        return self.cluster_node.members()

    async def release(self, actor: ActorType[Any, Any], key: str) -> None:
        """Deactivate a key as if it had gone idle (after its queued messages); its schedules stay in its pages."""
        self._check_running()
        self.validate_identity(actor, key)
        activation = self._activations.get((actor.name, key))
        if activation is not None:
            await activation.release()

    # ================================================================== for the activations and the cluster

    def next_lease(self) -> int:
        """A lease no run on this node had: a run's writes carry it, so a replaced run's are refused."""
        self._lease_seq += 1
        return self._lease_seq

    def emit(self, cls: type[Event], *fields: Any) -> None:
        """Report ``cls(*fields)`` to the observer; nothing is built when there is none."""
        observer = self.observer
        if observer is not None:
            observer(cls(*fields))

    def track(self, task: asyncio.Task[Any]) -> None:
        """Keep a background task (a write-behind save, a store sweep): an orderly stop waits for it, a failure is reported."""
        self._background[task] = None
        task.add_done_callback(self._untrack)

    def _untrack(self, task: asyncio.Task[Any]) -> None:
        self._background.pop(task, None)
        if not task.cancelled() and task.exception() is not None:
            self.emit(ev.MessageDropped, "system", self.node, "task", f"background task failed: {task.exception()!r}")

    @property
    def actor_system(self) -> ActorSystem:
        """This system (``ActivationHost``): an activation written against the host hands it to actor code as itself."""
        return self

    def pending_ask(self, request: int) -> PendingAsk | None:
        """This node's ask numbered ``request`` while it waits (None once answered, timed out or never made)."""
        return self._pending.get(request)

    def next_request(self) -> int:
        """A number for a request of this node (an ask, a routed message): the one after the last."""
        self._request_seq += 1
        return self._request_seq

    def number_requests_after(self, last: int) -> None:
        """Number this node's next requests after ``last`` (never backwards): a cluster's request rule, one range per life."""
        self._request_seq = max(self._request_seq, last)

    def pages(self, actor: ActorType[Any, Any], key: str) -> dict[str, bytes]:
        """A copy of the node's pages of a key, as encoded bytes (for inspection and tests)."""
        return dict(self.records.pages.get((actor.name, key), {}))

    def __repr__(self) -> str:
        state = "running" if self._running else ("stopped" if self._stopped else "new")
        return f"<ActorSystem node={self.node!r} {state} activations={len(self._activations)}>"



def _fits(system: ActorSystem) -> ActivationHost:
    """Never called: mypy checks here that the system is the ``ActivationHost`` its activations are written against."""
    return system
