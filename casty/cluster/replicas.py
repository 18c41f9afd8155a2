"""``ReplicationService``: the replication cores of one node on its loop and transport (channel ``"r"``).

One per cluster node, on the node's one ``Dispatcher``:

* the node's ``ReplicaStore`` answers every ``Prepare`` and ``Write`` that arrives;
* each activation that holds a key here opens an ``OwnerSlot``: a ``KeyOwner`` with its own
  timers, to which the ``Promise``/``Ack``/``Nack`` frames of that key (``frame.entity``) go.
  Its reports go to the activation's callback.

**The end of a turn.** Nothing leaves at once. A key's writes of one turn are staged and
become one ``KeyOwner.write`` (``OwnerSlot.stage``: group commit); then, once the work ready
at this instant has run (``_arm_flush``), every frame queued leaves: per destination one
transport message, in which a run of writes (or of acks) is one typed frame (``Writes``,
``Acks``). Frames to this very node are handed to its own ``_receive`` as objects, in the
same runs (the local replica obeys the same rules as a remote one, through the same code;
frames are never changed once sent). A thousand keys whose schedules fire at one instant
thus cost each replica one message and one answer, not a thousand of each.
Epochs are minted as ``"<node>#<incarnation>"``: one life of the node.

**Opening the replica.** The node's ``ReplicaStore`` answers no ``Prepare`` or ``Write``
until the cluster node calls ``join`` (after the membership join, and, for a node that
learned it had a previous life, after a grace period longer than any acquisition: the
promises that life gave to acquisitions still in flight are gone, and those acquisitions
must be over before this replica promises anything). Opening starts the first sync round
of the ``Handoff`` core (``casty.protocol.handoff``); every ring change starts another.

**Readiness** (``ReplicaStore``'s ``ready``): in the current sync round (answers count only
from peers that already had this node on their ring, ``SyncDump.knows_you``),

* a node that was a replica of the key under the ring before, when one of its sync rounds
  had already ended (not a joiner's partial view), is ready once every other replica under the current ring answered: it
  is back with no memory, or lost nothing, and every write confirmed meanwhile went to a
  quorum among those others;
* otherwise (new to the key's replica set, or just joined with views still partial) it is
  ready once the key's replicas under the current ring, the ring before and the current
  ring without this node all answered: a peer that knows this node has ended the
  activations whose replica set moved (``ClusterNode``), so no owner among them confirms a
  write on the old set after its dump. Nodes no longer on the ring are not waited for: one
  that left in order ended its activations first; one removed after ``remove_after`` while
  in fact alive and cut off could still confirm old-set writes (a known limit).

A replica is also ready once its store took a write of the epoch it promised while not
ready (``filled``): an owner won a read quorum of ready replicas, which intersects every old
write quorum, and fenced the older owners there. A key found ready stays ready while its
replica set does not change. Alone on its ring, a node is ready only if it founds the
cluster (no other seed).

This is a driver, not a core: it decides nothing (see ``casty.protocol.replication``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from ..ports import Transport
from .._core.timer_heap import TimerHeap
from .driver import REPLICATION_CHANNEL, Dispatcher
from .owner_slot import OwnerSlot
from ..protocol.limits import KEY_MARGIN, frame_limit
from ..protocol.handoff import SYNC_TIMER, Handoff, Imported, RoundEnded, RoundStarted, SyncDump, SyncRequest
from ..protocol.key_owner import RESEND_TIMER, KeyOwner
from ..protocol.replica_store import ReplicaStore
from ..protocol.replication import ZERO_EPOCH, Ack, Entity, Epoch, Nack, Prepare, Promise, Snapshot, Write, superseded
from ..protocol.sansio import Output, Send, perform
from ..protocol.wire import Wire, WireError

_log = logging.getLogger("casty")

BATCH_BYTES: Final = 1 << 20
"""The most bytes of frames one ``Batch`` carries (a transport refuses frames over 4 MiB)."""


@dataclass(frozen=True, slots=True)
class Batch:
    """Several encoded replication frames for one node, from one loop turn of the sender: one transport message."""

    frames: tuple[bytes, ...]


class Writes(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """A run of ``Write`` frames for one node, in the order they were sent: encoded and decoded in one call."""

    frames: tuple[Write, ...]


class Acks(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """A run of ``Ack`` frames for one node, in the order they were sent: encoded and decoded in one call."""

    frames: tuple[Ack, ...]


FRAMES: tuple[type, ...] = (Batch, Writes, Acks)
"""The driver's own frames (for the transport codec's tag table)."""


def _runs(frames: list[object]) -> list[object]:
    """``frames`` in order, each run of two or more ``Write`` (or ``Ack``) frames as one ``Writes`` (``Acks``).

    In the steady state an owner sends a replica nothing but writes and a replica answers
    nothing but acks: each direction is then one typed run, encoded and decoded by msgspec in
    one call rather than one call (and one envelope) per key, and handled in one tight loop
    (``ReplicationService._receive_writes``, ``_receive_acks``), the local replica's too.
    """
    out: list[object] = []
    i, n = 0, len(frames)
    while i < n:
        kind = type(frames[i])
        j = i + 1
        if kind is Write or kind is Ack:
            while j < n and type(frames[j]) is kind:
                j += 1
        if j - i > 1:
            run: Any = tuple(frames[i:j])  # all of one kind: Write or Ack
            out.append(Writes(run) if kind is Write else Acks(run))
        else:
            out.append(frames[i])
        i = j
    return out


ReplicaSet = Callable[[Entity], tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]]
"""Where a key lives: its replicas under the current ring, under the ring before, and under the current ring without this node."""

__all__ = ["ReplicationService", "OwnerSlot", "Batch", "Writes", "Acks", "BATCH_BYTES", "FRAMES"]


class _HandoffPerformer:
    """The handoff core's outputs on its replication service (the ``Performer`` of ``casty.protocol.sansio``).

    Frames go out on the service's channel; the one sync timer is a loop timer; ``Imported``
    snapshots go into the node's replica store; round reports set the service settled and go to
    its ``on_handoff``. Never closed: the service stops feeding the core inputs when it closes.
    """

    __slots__ = ("service",)
    closed = False

    def __init__(self, service: ReplicationService) -> None:
        self.service = service

    def send(self, to: str, frame: Any) -> None:
        self.service.send(to, frame)

    def set_timer(self, name: str, at: float) -> None:
        service = self.service
        if service._sync_timer is not None:
            service._sync_timer.cancel()
        service._sync_timer = service.loop.call_at(at, service._sync_fired)

    def cancel_timer(self, name: str) -> None:
        service = self.service
        if service._sync_timer is not None:
            service._sync_timer.cancel()
            service._sync_timer = None

    def report(self, event: Any) -> None:
        service = self.service
        if isinstance(event, Imported):
            for snapshot in event.snapshots:
                service.store.import_(snapshot)
        elif isinstance(event, RoundStarted | RoundEnded):
            if isinstance(event, RoundEnded) and event.round == service.handoff.round:
                service._settled = True
            if service._on_handoff is not None:
                service._on_handoff(event, service._round_reason)


class ReplicationService:
    """The node's ``ReplicaStore`` on channel ``"r"``, and the ``KeyOwner`` slots of the keys it holds."""

    def __init__(
        self,
        node: str,
        incarnation: int,
        transport: Transport,
        wire: Wire,
        dispatcher: Dispatcher,
        loop: asyncio.AbstractEventLoop,
        *,
        replica_set: ReplicaSet | None = None,
        on_handoff: Callable[[RoundStarted | RoundEnded, str], None] | None = None,
        alone_is_ready: bool = True,
    ) -> None:
        self.node: Final = node
        self.epoch_node: Final = f"{node}#{incarnation}"
        self.transport: Final = transport
        self.wire: Final = wire
        self.dispatcher: Final = dispatcher
        self.loop: Final = loop
        # Without a placement to ask (unit tests of the driver) every key is ready at once.
        self._replica_set = replica_set
        self._on_handoff = on_handoff
        self._alone_is_ready = alone_is_ready  # a founder with no other seed: alone, it is the whole cluster
        self._ready: dict[Entity, tuple[str, ...]] = {}  # keys found ready, with their replicas then (kept while those stay)
        self.store: Final = ReplicaStore(
            ready=self._is_ready if replica_set is not None else None,
            filled=self._filled if replica_set is not None else None,
            ready_keys=self._ready,  # the same dict, changed in place only
        )
        self.handoff: Final = Handoff(node, first_round=incarnation)
        self.opened = replica_set is None
        self._settled = False  # a sync round of this life ended: its view of the ring is no longer a joiner's partial one
        self._prev_settled = False  # ... and it was so before the last ring change
        self._peers: tuple[str, ...] = ()
        self._sync_timer: asyncio.TimerHandle | None = None
        self._round_reason = "opened"
        self._outbox: dict[str, list[object]] = {}  # frames queued this loop turn, per destination (this node too)
        self._staged: list[OwnerSlot] = []  # slots with a group of writes staged this turn (OwnerSlot.stage)
        self.timers: Final = TimerHeap(loop)  # the owners' write and acquire timers: one loop timer for all
        self._resends: dict[OwnerSlot, float] = {}  # the owners' resend timers (resend_at): slot -> when
        self._resend_sweep: int | None = None  # the sweep's number in self.timers, while armed
        self._resend_sweep_at = 0.0
        self._flush_armed = False
        self._owners: dict[Entity, OwnerSlot] = {}
        self._newer: dict[Entity, Epoch] = {}  # per key, the newest epoch a lost owner here learned of
        self._closed = False
        self.sent = 0
        self.page_limit: Final = frame_limit(transport) - KEY_MARGIN  # what one key's pages may weigh (OwnerSlot.stage)
        dispatcher.register(REPLICATION_CHANNEL, self._receive)

    def open(
        self,
        entity: Entity,
        on_report: Callable[[Any], None],
        *,
        write_timeout: float,
        on_written: Callable[[int, dict[str, bytes]], None] | None = None,
        on_superseded: Callable[[], None] | None = None,
    ) -> OwnerSlot:
        """A new owner of ``entity`` on this node (it replaces any earlier slot of the key: that one's frames stop reaching it).

        ``on_report`` gets the owner's reports, ``on_written`` each group's version as it is
        written, ``on_superseded`` the news that a newer slot of the key replaced this one.
        """
        slot = OwnerSlot(self, KeyOwner(entity, self.epoch_node, write_timeout=write_timeout), on_report, on_written, on_superseded)
        self._owners[entity] = slot
        return slot

    def slot_of(self, entity: Entity) -> OwnerSlot | None:
        """The slot of ``entity`` that this node's frames of the key reach now, if any (``open`` replaces it)."""
        return self._owners.get(entity)

    def saw(self, entity: Entity, epoch: Epoch) -> None:
        """An owner here lost ``entity`` to ``epoch``: the next acquisition of the key must start above it."""
        if epoch > self._newer.get(entity, ZERO_EPOCH):
            self._newer[entity] = epoch

    def round_hint(self, entity: Entity) -> Epoch:
        """The newest epoch known here for ``entity``: the local replica's promise, or one a lost owner here learned of.

        Each acquisition opens a fresh ``KeyOwner`` that knows no round; without this hint a node
        that knows nothing of the key (a restarted one, an empty replica) would climb one round per
        attempt (its own local promise + 1) and lose every attempt until it passes the newer epoch.
        """
        return max(self.store.promised(entity), self._newer.get(entity, ZERO_EPOCH))

    # --- opening, readiness and handoff ------------------------------------------------

    def join(self, peers: tuple[str, ...]) -> None:
        """Join the protocol: answer Prepare and Write from now on, and pull from ``peers`` (the other ring nodes)."""
        if self.opened or self._closed:
            return
        self.opened = True
        self._peers = peers
        self._round_reason = "opened"
        self._perform_handoff(self.handoff.begin(self.loop.time(), peers))

    def ring_changed(self, peers: tuple[str, ...]) -> None:
        """The ring now holds ``peers`` besides this node: keep the ready keys whose replicas did not move, pull again."""
        if peers == self._peers:
            return
        self._peers = peers
        self._prev_settled = self._settled
        replica_set = self._replica_set
        if replica_set is not None:
            moved = [entity for entity, was in self._ready.items() if replica_set(entity)[0] != was]
            for entity in moved:  # in place: the store looks this very dict up (ready_keys)
                del self._ready[entity]
        if self.opened and not self._closed and replica_set is not None:
            self._round_reason = "ring"
            self._perform_handoff(self.handoff.begin(self.loop.time(), peers))

    def _is_ready(self, entity: Entity) -> bool:
        if entity in self._ready:
            return True
        replica_set = self._replica_set
        if not self.opened or replica_set is None:
            return False
        replicas, before, without = replica_set(entity)
        if self.node not in replicas:
            return False
        if not self._peers and not self._alone_is_ready:
            return False  # alone on its ring, but it has other seeds: it does not know the cluster yet
        if self._prev_settled and self.node in before:
            others = sorted(set(replicas) - {self.node})  # a replica already: back with no memory, or nothing lost
        else:
            # New to the key (or its view of the ring before was not settled): the data is on
            # the key's replicas of the ring before and of the ring without this node, and
            # their owners must have ended the activations over the old set (they know this
            # node) first. A gone one never answers: then only an acquisition's write fills it.
            # A node no longer on the ring (it left in order, ending its activations first, or
            # was removed after remove_after) cannot answer and is not waited for.
            others = sorted(((set(replicas) | set(before) | set(without)) & set(self._peers)) - {self.node})
        answered = self.handoff.answered
        if all(answered(peer) for peer in others):
            self._ready[entity] = replicas
            return True
        return False

    def _filled(self, entity: Entity) -> None:
        """The store took the write of an epoch it promised while not ready: the key is ready (see ``ReplicaStore``)."""
        replica_set = self._replica_set
        if replica_set is not None:
            self._ready[entity] = replica_set(entity)[0]

    def _knows(self, node: str) -> bool:
        return node in self._peers

    def _export(self) -> list[Snapshot]:
        store = self.store
        out: list[Snapshot] = []
        for entity in store.entities():
            snapshot = store.export(entity)
            if snapshot is not None:
                out.append(snapshot)
        return out

    def _perform_handoff(self, outputs: Iterable[Output]) -> None:
        perform(outputs, _HandoffPerformer(self))

    def _sync_fired(self) -> None:
        self._sync_timer = None
        if not self._closed:
            self._perform_handoff(self.handoff.timer(SYNC_TIMER, self.loop.time()))

    @property
    def closed(self) -> bool:
        return self._closed

    def _release(self, slot: OwnerSlot) -> None:
        if self._owners.get(slot.owner.entity) is slot:
            del self._owners[slot.owner.entity]

    # --- resend timers -------------------------------------------------------------------

    def resend_at(self, slot: OwnerSlot, at: float) -> None:
        """Arm ``slot``'s resend timer (``KeyOwner``'s ``"resend"``) for ``at``.

        Every write of every key arms it and nearly every write is confirmed well before it
        fires, which then cancels it: a dict entry per key instead of a timer, and one sweep
        armed for the earliest entry, make that a set and a pop.
        """
        resends = self._resends
        resends.pop(slot, None)
        resends[slot] = at
        if self._resend_sweep is None or at < self._resend_sweep_at:
            self._arm_resend_sweep(at)

    def resend_cancel(self, slot: OwnerSlot) -> None:
        self._resends.pop(slot, None)

    def _arm_resend_sweep(self, at: float) -> None:
        if self._resend_sweep is not None:
            self.timers.cancel(self._resend_sweep)
        self._resend_sweep_at = at
        self._resend_sweep = self.timers.arm_method(at, ReplicationService._sweep_resends, self, None)

    def _sweep_resends(self, _arg: None) -> None:
        """Fire every resend timer that is due, in the order they were armed; arm again for the earliest left."""
        self._resend_sweep = None
        now = self.loop.time()
        due: list[OwnerSlot] = []
        earliest: float | None = None
        for slot, at in self._resends.items():
            if at <= now:
                due.append(slot)
            elif earliest is None or at < earliest:
                earliest = at
        for slot in due:
            del self._resends[slot]
        for slot in due:
            slot._fire(RESEND_TIMER)
        if earliest is not None and (self._resend_sweep is None or earliest < self._resend_sweep_at):
            self._arm_resend_sweep(earliest)

    def _arm_flush(self) -> None:
        """Flush once what is ready to run now has run: ``call_later(0)``, not ``call_soon``.

        ``call_soon`` would run the flush right after the callbacks queued *before* the first
        frame of the turn, so the work those callbacks wake up (a body that a firing's tell
        woke, which writes the state) would miss the batch and the group commit. A zero-delay
        timer runs after them: on asyncio's loop in the next iteration, after that iteration's
        ready callbacks; on the simulator's, once the instant's drain is over.
        """
        self._flush_armed = True
        self.loop.call_later(0, self._flush)

    def send(self, to: str, frame: object) -> None:
        """Queue a frame for ``to``; every frame queued in this loop turn leaves together at the end of it (``_flush``)."""
        if self._closed:
            return
        self.sent += 1
        box = self._outbox.get(to)
        if box is None:
            self._outbox[to] = [frame]
            if not self._flush_armed:
                self._arm_flush()
        else:
            box.append(frame)

    def _flush(self) -> None:
        """Send what this turn queued: one transport message per destination (a ``Batch`` when there are several).

        A thousand keys firing at one instant write to the same two or three replicas: batching
        turns thousands of frames (and as many deliveries, each a loop turn at the receiver)
        into a handful, over TCP as in the simulator (and a key's writes of the turn are one
        write already: ``OwnerSlot.stage``). Frames for this
        node's own replica go to its ``_receive`` as objects, in the same runs (the same code as
        a remote one; frames are never changed once sent). A crash before the
        flush loses the batch, as it would lose frames still in a socket buffer. Batches stay
        under ``BATCH_BYTES``, well below a transport's frame limit; a frame bigger than that
        (one key's large pages) leaves alone, and ``OwnerSlot.stage`` keeps it under the limit.
        """
        staged, self._staged = self._staged, []
        now = self.loop.time()
        for slot in staged:  # first the turn's groups of writes: their frames leave with the rest
            slot.commit_staged(now)
        self._flush_armed = False
        outbox, self._outbox = self._outbox, {}
        if self._closed:
            return
        local: list[object] = []
        for to, frames in outbox.items():  # insertion order: deterministic
            if to == self.node:
                local = frames
                continue
            try:
                pieces = self._encode(frames)
            except WireError:
                pieces = self._encode_each(to, frames)  # one frame that cannot travel must not hold back the others
            for data in self._batches(pieces):
                self.transport.send(to, data)
        for frame in _runs(local):
            self._receive(self.node, frame)

    def _encode(self, frames: list[object]) -> list[bytes]:
        """One node's frames of the turn, encoded in order, runs as one frame each (``_runs``), each part under ``BATCH_BYTES``."""
        encode = self.wire.encode
        pieces: list[bytes] = []
        for frame in _runs(frames):
            if type(frame) is Writes or type(frame) is Acks:
                pieces.extend(self._encode_run(list(frame.frames)))
            else:
                pieces.append(encode(REPLICATION_CHANNEL, frame))
        return pieces

    def _encode_each(self, to: str, frames: list[object]) -> list[bytes]:
        """The turn's frames for ``to`` one by one, without those that cannot be encoded (logged): the
        keys they were for time out as unavailable; every other key's frames leave as usual."""
        pieces: list[bytes] = []
        for frame in frames:
            try:
                pieces.append(self.wire.encode(REPLICATION_CHANNEL, frame))
            except WireError as exc:
                _log.error("%s: a %s for %s cannot be sent and is dropped: %s", self.node, type(frame).__name__, to, exc)
        return pieces

    def _encode_run(self, run: list[Any]) -> list[bytes]:
        """A run as one frame, or halved until each part is under ``BATCH_BYTES``."""
        if len(run) == 1:
            return [self.wire.encode(REPLICATION_CHANNEL, run[0])]
        data = self.wire.encode(REPLICATION_CHANNEL, Writes(tuple(run)) if type(run[0]) is Write else Acks(tuple(run)))
        if len(data) <= BATCH_BYTES:
            return [data]
        half = len(run) // 2
        return self._encode_run(run[:half]) + self._encode_run(run[half:])

    def _batches(self, items: list[bytes]) -> list[bytes]:
        if len(items) == 1:
            return items
        out: list[bytes] = []
        chunk: list[bytes] = []
        size = 0
        for data in items:
            if chunk and size + len(data) > BATCH_BYTES:
                out.append(self._batch(chunk))
                chunk, size = [], 0
            chunk.append(data)
            size += len(data)
        out.append(self._batch(chunk))
        return out

    def _batch(self, chunk: list[bytes]) -> bytes:
        return chunk[0] if len(chunk) == 1 else self.wire.encode(REPLICATION_CHANNEL, Batch(tuple(chunk)))

    def _receive(self, src: str, frame: object) -> None:
        if self._closed:
            return
        # by type identity, the frames of every write first (cheaper than isinstance chains)
        if type(frame) is Acks:
            self._receive_acks(src, frame.frames)
        elif type(frame) is Writes:
            self._receive_writes(src, frame.frames)
        elif type(frame) is Ack or type(frame) is Promise or type(frame) is Nack:
            slot = self._owners.get(frame.entity)
            if slot is not None:
                slot.perform(slot.owner.receive(src, frame, self.loop.time()))
        elif type(frame) is Write or type(frame) is Prepare:
            if not self.opened:
                return  # not in the protocol yet: no promise, no ack (the owner resends)
            previous = self.store.promised(frame.entity)
            for output in self.store.receive(src, frame):
                if isinstance(output, Send):
                    self.send(output.to, output.frame)
            if type(frame) is Prepare:
                self._fence_older_owner(src, frame, previous)
        elif isinstance(frame, Batch):
            for data in frame.frames:
                self.dispatcher.handle(src, data)  # each one checked and routed as if it came alone
        elif isinstance(frame, SyncRequest | SyncDump):
            self._perform_handoff(self.handoff.receive(src, frame, self._export, self._knows))

    def _fence_older_owner(self, src: str, prepare: Prepare, previous: Epoch) -> None:
        """This node's replica just promised ``prepare.epoch`` over ``previous``: the owner of an older epoch hears it now.

        An owner here is one of the key's replicas, so its next write would get this very
        replica's ``Nack``: it is fenced already, and only does not know it. An acquisition
        that another node gave up at once (a view that named it owner for an instant: a node
        resumed from a pause, or healed from a partition, before it heard the key's owner
        again) leaves such promises behind and tells nobody, so the holder would learn it at
        its next write, failing the message (swarm seeds 294, 558, 1038, 1744). The owner is
        handed that ``Nack`` at once instead: its run ends (``lost``) and the resume rule
        acquires the key again above the promise (``round_hint``) before a message needs it.
        Ending an owner early is always safe; nothing is refused that would have been confirmed.
        An owner elsewhere (the node that minted ``previous``, neither ``src`` nor this one),
        whose own replica may have missed the Prepare, is sent that ``Nack`` (rule 9).
        """
        entity = prepare.entity
        told = superseded(previous, self.store.promised(entity), src, self.node)
        if told is not None:
            self.send(told, Nack(entity, previous, None, prepare.epoch))
        slot = self._owners.get(entity)
        if slot is None or slot.closed:
            return
        owner = slot.owner
        if owner.phase in ("idle", "lost") or not prepare.epoch > owner.epoch or self.store.promised(entity) != prepare.epoch:
            return  # no owner running, not older, or this replica refused the prepare (it promised newer still)
        slot.perform(owner.receive(self.node, Nack(entity, owner.epoch, None, prepare.epoch), self.loop.time()))

    def write_locally(self, slot: OwnerSlot, write: Write) -> None:
        """An owner's write to this node's own replica: taken at once, and its answer given to the owner at once.

        The same store and owner code a frame would reach, with no trip through the outbox:
        the local replica's ack is the one every write gets first, and a loopback is instant.
        """
        if not self.opened or self._closed:
            return  # not in the protocol yet: no ack (the owner resends), as for a frame
        answer = self.store.on_write(write)
        if answer is not None and not slot.closed:
            outputs = slot.owner.receive(self.node, answer, self.loop.time())
            if outputs:
                slot.perform(outputs)

    def _receive_acks(self, src: str, acks: tuple[Ack, ...]) -> None:
        """A run of acks: each to its key's owner slot, as ``_receive`` would, with the clock read once."""
        owners = self._owners
        now = self.loop.time()
        for ack in acks:
            slot = owners.get(ack.entity)
            if slot is not None:
                outputs = slot.owner.receive(src, ack, now)
                if outputs:
                    slot.perform(outputs)

    def _receive_writes(self, src: str, writes: tuple[Write, ...]) -> None:
        """A run of writes: each answered by the store, as ``_receive`` would (``ReplicaStore.on_write``, no output list)."""
        if not self.opened:
            return  # not in the protocol yet: no ack (the owner resends)
        on_write = self.store.on_write
        send = self.send
        for write in writes:
            answer = on_write(write)
            if answer is not None:
                send(src, answer)

    def close(self) -> None:
        """Stop serving the channel; every owner slot is closed (pending writes get no outcome)."""
        if self._closed:
            return
        for slot in list(self._owners.values()):
            slot.close()
        self._closed = True
        self.timers.close()
        if self._sync_timer is not None:
            self._sync_timer.cancel()
            self._sync_timer = None
        self.dispatcher.unregister(REPLICATION_CHANNEL, self._receive)
