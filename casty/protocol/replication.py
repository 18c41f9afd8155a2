"""Replication of a key's pages: owner epochs won by prepare/promise, writes fenced by epoch.

A sans-I/O protocol core (see ``casty.protocol.sansio``): no loop, no clock, no transport.
Two objects per node:

* ``ReplicaStore``: the node's replica of many keys. For each key it holds the newest
  epoch it *promised*, the ``Stamp`` (epoch, version) of the pages it *holds*, and those
  pages. It answers frames with pure methods (``on_prepare``, ``on_write``) and hands
  keys over (``export`` / ``import_``).
* ``KeyOwner``: one state machine per (actor, key) that this node acquires and holds.
  ``acquire`` mints a fresh epoch and prepares every replica; ``receive`` takes their
  answers; ``write`` sends fenced quorum writes; ``timer`` takes the timeouts. Its facts
  come out as ``Report`` of ``Acquired``, ``Lost``, ``AcquireTimedOut``, ``Confirmed``,
  ``Fenced`` and ``WriteTimedOut``.

The rules (epoch = (round, node), stamp = (epoch, version), both compared as tuples):

1. **Prepare.** A replica promises an epoch ``>=`` the one it promised (``>=`` so a
   duplicated Prepare gets the same answer) and returns its stamp and pages; otherwise
   it answers ``Nack`` naming the epoch it promised.
2. **Acquire.** On a read quorum of promises the owner adopts the pages of the newest
   stamp, applies the driver's updates (``@active``, an initial state), and writes the
   result back under its own epoch at ``version = found.version + 1``. Only when that
   write-back reaches the write quorum does it report ``Acquired``: the body may start.
3. **Write.** A replica accepts a write whose epoch is ``>=`` its promise (and raises its
   promise to it); it applies the pages only if the write's stamp is newer than the one
   it holds, and acks either way (an older write of the same epoch is contained in the
   newer one it holds: every write carries the whole page set built on the previous).
   A write whose epoch is older than the promise is refused with ``Nack``.
4. **Confirm.** A replica's ack of version ``v`` means it holds ``>= v``: write ``v`` is
   ``Confirmed`` once ``write quorum`` replicas acked some version ``>= v``. Writes may
   be pipelined; confirmations come out in version order.
5. **Fence.** A ``Nack`` naming a newer epoch ends the owner: every pending write is
   reported ``Fenced``, then ``Lost``; later writes are ``Fenced`` at once, without frames.
   ``Fenced`` and ``WriteTimedOut`` mean *not confirmed*, not *not applied*: such a write
   may still surface at the next owner (the driver raises ``Unavailable`` for both).
   An owner can win its quorums without a replica that had promised a newer epoch (to an
   acquisition that then failed; the owner could not have seen that round). So that the
   Nack ends the owner *before* a client's write meets it, a held owner keeps sending its
   newest write to replicas that have not acked it, even with nothing pending (backing off
   up to ``16 * resend_every``), until every replica acked it.
6. **Delete.** A tombstone is a write of the empty page set: its stamp still orders it,
   so an older replica's pages never come back. A key is *deleted* when it holds no pages
   under a non-zero stamp; ``Acquired.deleted`` says the newest state found was one.
7. **Durable acquire.** For a key whose copy also lives on a disk (``acquire(persist=True)``),
   the owner does not hold the key when its write-back reaches the write quorum: it reports
   ``Persisting`` and waits for the driver's ``persisted`` (the write-back saved to the store
   under the new epoch) before it reports ``Acquired``. Replicas keep their promises in
   memory only; after every replica lost its memory the store is the one place a recovering
   owner learns how high the key's epochs went (``acquire(after=)``), so no epoch may be
   held that the store does not know of: otherwise an owner that acquired the key and
   crashed before its first save would leave the store one round behind, and the next owner
   would mint a round below it (and a straggling frame of that forgotten round would outrank
   the newer owner's writes). The acquire timeout covers the save too.
8. **Disk.** A node's durable store keeps, per durable key it owned, the newest write it
   confirmed (or the tombstone) with its stamp. A replica that starts with no memory takes
   those records in before it answers any frame, as it would take a handoff's snapshots
   (``import_``: the newest stamp wins, the promise rises to its epoch), so after every
   replica lost its memory the disks of the key's former owners still meet the next read
   quorum: without it the next owner recovered only from its own disk, and the writes a
   later owner had saved on another node were lost (per-node disks). The driver does the
   reading (``casty.cluster.runtime``, the disk rule); the core is unchanged.

Versions: the write-back is ``found.version + 1``, every write the next one; the write id
``write`` returns is that version (unique under the epoch), so along the chain of epochs
that a key's confirmed states follow, versions only grow.

Quorums per write level, with R replicas (``quorum_sizes``): ``majority`` reads and
writes R//2+1; ``all`` writes R and reads 1; ``one`` reads 1 and writes 1. ``majority``
and ``all`` make every read quorum meet every write quorum, which is what keeps a
confirmed write (and fences an old owner); ``one`` gives that up for R > 1.

The owner's own node is one of the replicas: the owner treats it like any other, through
frames (``Send(to=own node)``) that the driver loops back into the node's ``ReplicaStore``.
One code path, and the local copy obeys exactly the same promise rules as a remote one.

Epochs must never be minted twice. ``acquire`` picks ``round = max(round seen, after) + 1``;
the ``node`` part must name this *life* of the node (e.g. ``"n1#3"`` with an incarnation),
because a restarted process that knows nothing of its previous rounds could otherwise
reuse ``(round, node)`` while frames of its previous life are still in flight.

Replicas keep everything in memory: a crash that stops and resumes a node loses nothing,
but a node that comes back as a new process is an empty replica, and a node new to a key's
replica set (the ring changed) holds nothing of it. Counting such a copy in a read quorum
could hide a confirmed write, so a replica answers *blank* promises until it is **ready**
for the key (see ``ReplicaStore``): it has pulled the other replicas' copies
(``casty.protocol.handoff``). A blank promise does not count toward the read quorum, and a
replica that is not ready accepts only writes of an epoch it promised since it came back.
What an empty replica cannot pull is a promise its previous life gave to an acquisition
still in flight; the driver therefore keeps a node that knows it had a previous life out of
the protocol for a grace period longer than any acquisition (``casty.cluster.replicas``).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

import msgspec

from .sansio import CancelTimer, Output, Report, Send, SetTimer

__all__ = [
    "Entity",
    "Epoch",
    "Stamp",
    "ZERO_EPOCH",
    "ZERO_STAMP",
    "Level",
    "LEVELS",
    "quorum_sizes",
    "ACQUIRE_TIMER",
    "RESEND_TIMER",
    "WRITE_TIMER",
    # frames
    "Prepare",
    "Promise",
    "Write",
    "Ack",
    "Nack",
    "Snapshot",
    "FRAMES",
    # reports
    "Acquired",
    "Persisting",
    "Lost",
    "AcquireTimedOut",
    "Confirmed",
    "Fenced",
    "WriteTimedOut",
    # cores
    "ReplicaStore",
    "KeyOwner",
    "WriteBackUpdates",
]

Entity = tuple[str, str]
"""(actor type name, key): what a replica holds pages of and an owner acquires."""

Level = Literal["one", "majority", "all"]
LEVELS: tuple[Level, ...] = ("one", "majority", "all")


class Epoch(NamedTuple):
    """An owner's term for one key: ``round`` first, the owner's node id breaks ties."""

    round: int
    node: str


class Stamp(NamedTuple):
    """What a replica's pages are: written under ``epoch`` as ``version``; newer = greater tuple."""

    epoch: Epoch
    version: int


ZERO_EPOCH = Epoch(0, "")
"""Below every real epoch: what a replica has promised for a key it never heard of."""

ZERO_STAMP = Stamp(ZERO_EPOCH, 0)
"""Below every real stamp: the stamp of a key nobody ever wrote."""


def quorum_sizes(level: Level, replicas: int) -> tuple[int, int]:
    """``(read quorum, write quorum)`` for ``level`` over ``replicas`` replicas."""
    if replicas < 1:
        raise ValueError(f"a key needs at least one replica, got {replicas}")
    if level == "majority":
        q = replicas // 2 + 1
        return q, q
    if level == "all":
        return 1, replicas
    if level == "one":
        return 1, 1
    raise ValueError(f"unknown write level {level!r}: expected one of {LEVELS}")


# ====================================================================== frames ======
# Frozen dataclasses of msgspec-encodable fields only (str, int, bytes, tuples, dicts, None):
# a frame that could not cross a real network must not cross a simulated one either.


@dataclass(frozen=True, slots=True)
class Prepare:
    """Owner -> replica: promise ``epoch`` for ``entity`` and tell me what you hold."""

    entity: Entity
    epoch: Epoch


@dataclass(frozen=True, slots=True)
class Promise:
    """Replica -> owner: promised ``epoch``; it held ``pages`` stamped ``stamp`` when it promised.

    ``blank``: the replica is not yet *ready* for the key (it came back with no memory, or
    just joined the key's replica set, and has not yet pulled what the other replicas hold):
    what it returns may miss confirmed writes, so it does not count toward the read quorum.
    """

    entity: Entity
    epoch: Epoch
    stamp: Stamp
    pages: dict[str, bytes]
    blank: bool = False


class Write(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """Owner -> replica: the whole page set of ``entity`` as of ``version`` under ``epoch``.

    ``pages`` is never changed once in a frame (the owner builds a new dict per write, a
    decoded frame has its own): the local replica keeps the very dict, with no copy.

    A ``msgspec.Struct``, not a dataclass like the rarer frames: the frame of every write is
    built in C, is not tracked by the garbage collector (no field can hold a reference back
    to it), and travels as an array, without its field names.
    """

    entity: Entity
    epoch: Epoch
    version: int
    pages: dict[str, bytes]


class Ack(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """Replica -> owner: accepted the write ``(epoch, version)``; it now holds at least that version."""

    entity: Entity
    epoch: Epoch
    version: int


@dataclass(frozen=True, slots=True)
class Nack:
    """Replica -> owner: refused ``epoch`` (a Prepare if ``version`` is None, else that write): it promised ``promised``."""

    entity: Entity
    epoch: Epoch
    version: int | None
    promised: Epoch


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One key as a replica holds it, for handoff: its promise, its stamp and its pages."""

    entity: Entity
    promised: Epoch
    stamp: Stamp
    pages: dict[str, bytes]


FRAMES: tuple[type, ...] = (Prepare, Promise, Write, Ack, Nack, Snapshot)
"""Every frame class of this protocol (for the transport codec's tag table)."""


# ===================================================================== reports ======


@dataclass(frozen=True, slots=True)
class Acquired:
    """The owner holds ``epoch``: ``pages`` (found + updates) are confirmed as ``version``; the body may start.

    ``found`` is the newest stamp the read quorum held (``ZERO_STAMP`` for a new key);
    ``deleted`` says that state was a tombstone (no pages under a real stamp).
    """

    entity: Entity
    epoch: Epoch
    version: int
    pages: dict[str, bytes]
    found: Stamp
    deleted: bool


@dataclass(frozen=True, slots=True)
class Persisting:
    """A durable acquisition's write-back reached its write quorum: save ``pages`` as ``version`` under ``epoch``, then call ``persisted``.

    Only for ``acquire(persist=True)`` (rule 7): the owner holds the key, and reports
    ``Acquired``, once the driver says the save is done, so that the store always knows
    the newest epoch an owner held.
    """

    entity: Entity
    epoch: Epoch
    version: int
    pages: dict[str, bytes]


@dataclass(frozen=True, slots=True)
class Lost:
    """The owner's ``epoch`` is over: a replica promised ``newer``. Its body must end; its writes are fenced.

    ``newer == epoch`` when a promise showed pages already written under this very epoch
    (another life of the node minted it): the next ``acquire`` moves to a higher round.
    """

    entity: Entity
    epoch: Epoch
    newer: Epoch


@dataclass(frozen=True, slots=True)
class AcquireTimedOut:
    """No quorum of promises and write-back acks came within the acquire timeout: not the owner."""

    entity: Entity
    epoch: Epoch


class Confirmed(msgspec.Struct, frozen=True):
    """Write ``version`` of ``epoch`` is held by a write quorum: these ``replicas`` acked it (or a later version)."""

    entity: Entity
    epoch: Epoch
    version: int
    replicas: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Fenced:
    """Write ``version`` was refused: a replica promised ``newer``. Not confirmed (it may still surface)."""

    entity: Entity
    epoch: Epoch
    version: int
    newer: Epoch


@dataclass(frozen=True, slots=True)
class WriteTimedOut:
    """Write ``version`` got no write quorum within the write timeout. Not confirmed (it may still surface)."""

    entity: Entity
    epoch: Epoch
    version: int


# ================================================================ replica side =====


class _Record:
    """A replica's state for one key; ``stamp.epoch <= promised`` always.

    The stamp is kept as its two parts and built on demand: a write of the epoch already
    held (nearly every write) then changes only ``version`` and ``pages``, and no tuple per
    write lives on until the next one (NamedTuples stay tracked by the garbage collector,
    and a thousand keys writing every second would keep promoting them to its oldest
    generation).
    """

    __slots__ = ("promised", "epoch", "version", "pages")

    def __init__(self) -> None:
        self.promised = ZERO_EPOCH
        self.epoch = ZERO_EPOCH  # the stamp's epoch
        self.version = 0  # the stamp's version
        self.pages: dict[str, bytes] = {}

    @property
    def stamp(self) -> Stamp:
        return Stamp(self.epoch, self.version)

    def keep(self, stamp: Stamp, pages: Mapping[str, bytes]) -> None:
        self.epoch, self.version = stamp
        self.pages = dict(pages)


class ReplicaStore:
    """One node's replicas of many keys, in memory: promises, stamps and pages.

    Every answer is computed from the frame and the store alone, so duplicated,
    reordered or replayed frames get answers consistent with what the store holds:
    a promise or an ack is never taken back, a stamp or a promise never goes down.

    **Readiness.** ``ready(entity)`` (given by the driver; always True if omitted) says
    whether this replica holds every write confirmed on the key so far: false for a node
    back with no memory, or new to the key's replica set, until it has pulled the other
    replicas' copies (``casty.protocol.handoff``). A replica that is not ready

    * still promises, but its ``Promise`` is ``blank``: the owner does not count it toward
      the read quorum, so an empty copy can never hide a confirmed write;
    * accepts a write only of the very epoch it promised while not ready (an owner that
      won a read quorum of ready replicas after this replica came back); a write of any
      other epoch gets no answer at all, not a ``Nack``: an owner whose epoch predates the
      loss of memory must find its quorum among replicas that remember their promises.
      Accepting that write fills the replica with the owner's whole state under an epoch it
      promised: ``filled(entity)`` tells the driver, which counts the key ready from then on.
    """

    __slots__ = ("_records", "_ready", "_ready_keys", "_filled", "_blank_promises")

    def __init__(
        self,
        ready: Callable[[Entity], bool] | None = None,
        filled: Callable[[Entity], None] | None = None,
        *,
        ready_keys: Container[Entity] = frozenset(),
    ) -> None:
        """``ready_keys``: keys the driver already knows are ready, looked up before ``ready`` is called (a write per key per second)."""
        self._records: dict[Entity, _Record] = {}
        self._ready = ready
        self._ready_keys = ready_keys
        self._filled = filled
        self._blank_promises: dict[Entity, Epoch] = {}  # epochs promised while not ready, per key

    def is_ready(self, entity: Entity) -> bool:
        """Whether this replica's answers about ``entity`` count (see the class docstring)."""
        return self._ready is None or self._ready(entity)

    def _record(self, entity: Entity) -> _Record:
        record = self._records.get(entity)
        if record is None:
            record = self._records[entity] = _Record()
        return record

    # ---------------------------------------------------------------- frames ----

    def receive(self, src: str, frame: object) -> list[Output]:
        """The driver's entry point: answer a Prepare or a Write from ``src``; other frames are not for replicas."""
        if isinstance(frame, Prepare):
            return [Send(src, self.on_prepare(frame))]
        if isinstance(frame, Write):
            answer = self.on_write(frame)
            return [] if answer is None else [Send(src, answer)]
        return []

    def on_prepare(self, frame: Prepare) -> Promise | Nack:
        """Promise ``frame.epoch`` unless a newer epoch was promised; a promise returns what the key holds."""
        record = self._record(frame.entity)
        if frame.epoch < record.promised:
            return Nack(frame.entity, frame.epoch, None, record.promised)
        record.promised = frame.epoch
        if self.is_ready(frame.entity):
            return Promise(frame.entity, frame.epoch, record.stamp, dict(record.pages))
        self._blank_promises[frame.entity] = frame.epoch
        return Promise(frame.entity, frame.epoch, record.stamp, dict(record.pages), blank=True)

    def on_write(self, frame: Write) -> Ack | Nack | None:
        """Accept a write of the promised epoch or a newer one; keep its pages only if its stamp is newer.

        Accepting raises the promise to the write's epoch: a replica that took a write of
        epoch E never takes one of an older epoch again. None (no answer): this replica is
        not ready for the key and did not promise this epoch while not ready.
        """
        entity = frame.entity
        epoch = frame.epoch
        ready = self._ready
        filling = ready is not None and entity not in self._ready_keys and not ready(entity)
        if filling and self._blank_promises.get(entity) != epoch:
            return None
        record = self._records.get(entity)
        if record is None:
            record = self._records[entity] = _Record()
        if epoch < record.promised:
            return Nack(entity, epoch, frame.version, record.promised)
        if not filling:
            if self._blank_promises:
                self._blank_promises.pop(entity, None)
        elif self._filled is not None:
            # The write of an owner that won a read quorum of ready replicas after this one
            # came back: it carries the whole newest state, and this replica promised its
            # epoch, so from here on it is a replica like the others.
            self._filled(entity)
        if epoch != record.promised:  # nearly always equal: keep the object held (see _Record)
            record.promised = epoch
        version = frame.version
        held = record.epoch
        if epoch > held or (version > record.version and epoch == held):
            if epoch != held:
                record.epoch = epoch
            record.version = version
            record.pages = frame.pages  # a frame's pages are never changed (see Write): no copy
        return Ack(entity, epoch, version)

    # --------------------------------------------------------------- queries ----

    def promised(self, entity: Entity) -> Epoch:
        """The newest epoch promised for ``entity`` (``ZERO_EPOCH`` if none): a round hint for ``KeyOwner.acquire``."""
        record = self._records.get(entity)
        return record.promised if record is not None else ZERO_EPOCH

    def stamp(self, entity: Entity) -> Stamp:
        """The stamp of the pages held for ``entity`` (``ZERO_STAMP`` if none)."""
        record = self._records.get(entity)
        return record.stamp if record is not None else ZERO_STAMP

    def pages(self, entity: Entity) -> dict[str, bytes]:
        """A copy of the pages held for ``entity`` (empty if none, or deleted)."""
        record = self._records.get(entity)
        return dict(record.pages) if record is not None else {}

    def has_page(self, entity: Entity, name: str) -> bool:
        """Whether the pages held for ``entity`` include ``name`` (no copy made)."""
        record = self._records.get(entity)
        return record is not None and name in record.pages

    def entities(self) -> list[Entity]:
        """Every key this store has a record of, sorted (no hash order leaks out)."""
        return sorted(self._records)

    # --------------------------------------------------------------- handoff ----

    def export(self, entity: Entity) -> Snapshot | None:
        """What this replica holds of ``entity`` (None if nothing), to import on another replica."""
        record = self._records.get(entity)
        if record is None:
            return None
        return Snapshot(entity, record.promised, record.stamp, dict(record.pages))

    def import_(self, snapshot: Snapshot) -> bool:
        """Merge a snapshot: the newest stamp's pages win, the promise becomes the greater one; True if anything changed.

        Taking the greater promise only ever refuses more: an epoch fenced at the source
        stays fenced here.
        """
        record = self._record(snapshot.entity)
        changed = False
        promised = max(record.promised, snapshot.promised, snapshot.stamp.epoch)
        if promised > record.promised:
            record.promised = promised
            changed = True
        if snapshot.stamp > record.stamp:
            record.keep(snapshot.stamp, snapshot.pages)
            changed = True
        return changed


# ================================================================== owner side =====

WriteBackUpdates = Mapping[str, bytes | None] | Callable[[Stamp, Mapping[str, bytes]], Mapping[str, bytes | None]]
"""The updates the write-back applies to the pages found: fixed, or computed from (found stamp, found pages)."""

Phase = Literal["idle", "preparing", "writing_back", "persisting", "held", "lost"]

ACQUIRE_TIMER = "acquire"
"""The owner's timer for the whole acquisition (promises and write-back)."""
RESEND_TIMER = "resend"
"""The owner's timer for sending the current round again to replicas that have not answered."""
WRITE_TIMER = "write"
"""The owner's timer for its pending writes' timeouts: armed at the oldest pending write's deadline.

One timer for every pending write, left armed when writes are confirmed (a key that writes
every second would otherwise set and cancel a timer per write): when it fires it times out
the writes whose deadline passed, and arms again for the oldest one still pending, if any."""


def _apply(pages: Mapping[str, bytes], updates: Mapping[str, bytes | None]) -> dict[str, bytes]:
    out = dict(pages)
    for name, data in updates.items():
        if data is None:
            out.pop(name, None)
        else:
            out[name] = data
    return out


class KeyOwner:
    """Acquires and holds one key on this node: mints epochs, collects promises, confirms writes.

    Phases: ``idle`` (never acquired, or the last acquire timed out) -> ``preparing``
    (Prepare sent) -> ``writing_back`` (quorum of promises; the adopted pages are being
    written back) -> [``persisting``: only with ``persist=True``, ``Persisting`` reported,
    waiting for ``persisted``] -> ``held`` (``Acquired`` reported; ``write`` allowed) -> ``lost``
    (a newer epoch was seen). ``acquire`` may be called again from ``idle`` or ``lost``
    and then mints a newer epoch. A refusal while acquiring is not retried here: the
    driver decides (placement may say that the other node is the rightful owner).

    Frames from other keys, unknown senders, older epochs, or that a phase no longer
    waits for are ignored (beyond remembering the rounds they show), so duplicates and
    stragglers are harmless. Timers: ``"acquire"``, ``"resend"`` and ``"write"``; a timer
    call that comes before its deadline or after its work finished does nothing. The write
    timer stays armed when the writes it watches are confirmed (see ``WRITE_TIMER``); the
    resend timer is cancelled once nothing is pending and every replica acked the newest
    write (a lagging replica is caught up, see rule 5).
    """

    __slots__ = (
        "entity", "node", "write_timeout", "acquire_timeout", "resend_every",
        "phase", "epoch", "version", "pages", "replicas", "level", "newer",
        "_read_quorum", "_write_quorum", "_round_seen", "_deadline", "_updates",
        "_promises", "_blank", "_floor", "_found", "_found_deleted", "_acked", "_pending", "_resend_at",
        "_write_timer_at", "_persist", "_idle_resends",
    )

    def __init__(
        self,
        entity: Entity,
        node: str,
        *,
        write_timeout: float = 5.0,
        acquire_timeout: float | None = None,
        resend_every: float | None = 0.5,
    ) -> None:
        if write_timeout <= 0:
            raise ValueError(f"write_timeout must be positive, got {write_timeout}")
        if resend_every is not None and resend_every <= 0:
            raise ValueError(f"resend_every must be positive or None, got {resend_every}")
        self.entity = entity
        self.node = node
        self.write_timeout = write_timeout
        self.acquire_timeout = write_timeout if acquire_timeout is None else acquire_timeout
        self.resend_every = resend_every
        self.phase: Phase = "idle"
        self.epoch = ZERO_EPOCH
        self.version = 0
        self.pages: dict[str, bytes] = {}
        self.replicas: tuple[str, ...] = ()
        self.level: Level = "majority"
        self.newer: Epoch | None = None  # the epoch that fenced this owner, once lost
        self._read_quorum = 1
        self._write_quorum = 1
        self._round_seen = 0
        self._deadline = 0.0
        self._updates: WriteBackUpdates = {}
        self._promises: dict[str, Promise] = {}  # ready replicas' promises: they make the read quorum
        self._blank: dict[str, Promise] = {}  # not-ready replicas' promises: their pages count, not their number
        self._floor = 0  # the write-back's version is above this (a durable store's version)
        self._found = ZERO_STAMP
        self._found_deleted = False
        self._acked: dict[str, int] = {}  # replica -> greatest version it acked under self.epoch
        self._pending: dict[int, float] = {}  # version -> deadline, in version order (so in deadline order)
        self._resend_at: float | None = None
        self._write_timer_at: float | None = None  # when the write timer is armed to fire, if it is
        self._persist = False  # this acquisition holds the key only once the driver saved it (rule 7)
        self._idle_resends = 0  # catch-up resends since the last write (their interval doubles)

    # ------------------------------------------------------------ acquiring ----

    def acquire(
        self,
        now: float,
        replicas: Sequence[str],
        level: Level = "majority",
        *,
        updates: WriteBackUpdates | None = None,
        after: Epoch = ZERO_EPOCH,
        floor: int = 0,
        persist: bool = False,
    ) -> list[Output]:
        """Start acquiring under a fresh epoch: Prepare to every replica, arm the acquire timeout.

        ``updates`` are applied to the pages found before they are written back (the
        ``@active`` page, an initial state...); ``after`` is an epoch known to exist (the
        local replica's promise, a ``Lost.newer``, the epoch a durable store saved the key
        under) that the new round must exceed; ``floor`` a version the write-back must
        exceed (a durable store's, whose pages the updates may bring back when every
        replica lost the key), so epochs and versions keep growing across a restart of
        every replica. ``persist``: the key is durable, and the write-back must be saved
        before the key counts as held (rule 7: ``Persisting``, then ``persisted``).
        """
        if self.phase not in ("idle", "lost"):
            raise RuntimeError(f"{self.entity}: acquire while {self.phase}")
        chosen = tuple(replicas)
        if len(set(chosen)) != len(chosen):
            raise ValueError(f"{self.entity}: replicas must be distinct, got {chosen}")
        self._read_quorum, self._write_quorum = quorum_sizes(level, len(chosen))
        self.replicas = chosen
        self.level = level
        self._round_seen = max(self._round_seen, after.round)
        self._round_seen += 1
        self.epoch = Epoch(self._round_seen, self.node)
        self.phase = "preparing"
        self.newer = None
        self._updates = {} if updates is None else updates
        self._floor = floor
        self._persist = persist
        self._promises = {}
        self._blank = {}
        self._acked = {}
        self._found = ZERO_STAMP
        self._found_deleted = False
        self._idle_resends = 0
        self._deadline = now + self.acquire_timeout
        out: list[Output] = [Send(replica, Prepare(self.entity, self.epoch)) for replica in chosen]
        out.append(SetTimer(ACQUIRE_TIMER, self._deadline))
        self._arm_resend(now, out)
        return out

    def persisted(self, epoch: Epoch) -> list[Output]:
        """The driver saved the write-back of ``epoch`` (see ``Persisting``): the key is held; ``Acquired``.

        Nothing if this owner is no longer persisting that epoch (it was lost, timed out or
        closed meanwhile): a save that comes too late holds nothing.
        """
        if self.phase != "persisting" or epoch != self.epoch:
            return []
        return self._hold()

    def _hold(self) -> list[Output]:
        self.phase = "held"
        out: list[Output] = [CancelTimer(ACQUIRE_TIMER)]
        if not self._lagging():
            self._disarm_resend(out)  # else it stays armed: a lagging replica is caught up (rule 5)
        out.append(Report(Acquired(
            self.entity, self.epoch, self.version, dict(self.pages), self._found, self._found_deleted
        )))
        return out

    # -------------------------------------------------------------- writing ----

    def write(self, now: float, updates: Mapping[str, bytes | None], tombstone: bool = False) -> tuple[int, list[Output]]:
        """Write the pages after ``updates`` (None deletes a page) or, with ``tombstone``, delete them all.

        Returns the write id (its version, unique under this epoch) and the outputs. The
        outcome comes later as ``Confirmed``, ``Fenced`` or ``WriteTimedOut`` of that version;
        once the owner is ``lost``, at once as ``Fenced``.
        """
        if tombstone and updates:
            raise ValueError(f"{self.entity}: a tombstone deletes every page; it takes no updates")
        if self.phase == "lost":
            self.version += 1
            assert self.newer is not None
            return self.version, [Report(Fenced(self.entity, self.epoch, self.version, self.newer))]
        if self.phase != "held":
            raise RuntimeError(f"{self.entity}: write while {self.phase} (the body starts after Acquired)")
        if tombstone:
            pages: dict[str, bytes] = {}
        else:
            pages = dict(self.pages)  # a new dict: the frame shares it, so it is never changed after
            for name, data in updates.items():  # _apply, inline: once per write of every key
                if data is None:
                    pages.pop(name, None)
                else:
                    pages[name] = data
        self.pages = pages
        version = self.version = self.version + 1
        deadline = now + self.write_timeout
        self._pending[version] = deadline
        frame = Write(self.entity, self.epoch, version, pages)
        out: list[Output] = [Send(replica, frame) for replica in self.replicas]
        if self._write_timer_at is None:
            self._write_timer_at = deadline
            out.append(SetTimer(WRITE_TIMER, deadline))
        self._idle_resends = 0
        resend_every = self.resend_every
        if resend_every is not None and (self._resend_at is None or self._resend_at > now + resend_every):
            self._resend_at = now + resend_every  # _arm_resend, inline; or sooner than a catch-up resend
            out.append(SetTimer(RESEND_TIMER, self._resend_at))
        return version, out

    def close(self) -> list[Output]:
        """Stop (the key is released, or its node leaves): cancel the timers; pending writes get no outcome."""
        out: list[Output] = []
        self._pending.clear()
        self._disarm_write_timer(out)
        if self.phase in ("preparing", "writing_back", "persisting"):
            out.append(CancelTimer(ACQUIRE_TIMER))
        self.phase = "idle"
        self._disarm_resend(out)
        return out

    # ------------------------------------------------------------- receiving ----

    def receive(self, src: str, frame: object, now: float) -> list[Output]:
        """A frame from replica ``src`` arrived."""
        if type(frame) is Ack:  # the frame of every write: checked first, the same way as below
            if frame.entity != self.entity:
                return []
            epoch = frame.epoch
            if epoch.round > self._round_seen:
                self._round_seen = epoch.round
            if epoch != self.epoch or src not in self.replicas or self.phase in ("idle", "lost"):
                return []
            return self._on_ack(src, frame, now)
        if not isinstance(frame, Promise | Ack | Nack) or frame.entity != self.entity:
            return []
        self._see(frame.epoch)
        if isinstance(frame, Nack):
            self._see(frame.promised)
        if isinstance(frame, Promise):
            self._see(frame.stamp.epoch)
        if src not in self.replicas or frame.epoch != self.epoch or self.phase in ("idle", "lost"):
            return []
        if isinstance(frame, Nack):
            if frame.promised > self.epoch:
                return self._lose(frame.promised)
            return []  # cannot happen under these rules (a refusal names a newer promise)
        if isinstance(frame, Promise):
            return self._on_promise(src, frame, now)
        return self._on_ack(src, frame, now)

    def _see(self, epoch: Epoch) -> None:
        if epoch.round > self._round_seen:
            self._round_seen = epoch.round

    def _on_promise(self, src: str, frame: Promise, now: float) -> list[Output]:
        if self.phase != "preparing" or src in self._promises:
            return []  # late or duplicated: the quorum was already decided, or this replica counted
        if frame.stamp.epoch >= self.epoch:
            # Pages written under this very epoch before it was won: another life of this
            # node minted it too. Give it up; the next acquire picks a higher round.
            return self._lose(frame.stamp.epoch)
        if frame.blank:
            # Not ready: it may lack confirmed writes, so it does not make the quorum; the
            # pages it holds are real writes all the same, so they take part in "newest
            # wins". It is prepared again until it answers ready (see _resend).
            self._blank[src] = frame
            return []
        self._blank.pop(src, None)
        self._promises[src] = frame
        if len(self._promises) < self._read_quorum:
            return []
        # The newest stamp wins; equal stamps hold equal pages (one writer per epoch), and
        # the replicas' order makes the choice deterministic anyway.
        best: Promise | None = None
        for replica in self.replicas:
            promise = self._promises.get(replica) or self._blank.get(replica)
            if promise is not None and (best is None or promise.stamp > best.stamp):
                best = promise
        assert best is not None
        self._found = best.stamp
        self._found_deleted = best.stamp.version > 0 and not best.pages
        updates = self._updates(best.stamp, best.pages) if callable(self._updates) else self._updates
        self.pages = _apply(best.pages, updates)
        self.version = max(best.stamp.version, self._floor) + 1
        self.phase = "writing_back"
        self._promises = {}
        self._blank = {}
        frame_out = Write(self.entity, self.epoch, self.version, dict(self.pages))
        return [Send(replica, frame_out) for replica in self.replicas]

    def _on_ack(self, src: str, frame: Ack, now: float) -> list[Output]:
        if self.phase not in ("held", "writing_back", "persisting"):
            return []
        acked = self._acked
        if frame.version <= acked.get(src, 0) or frame.version > self.version:
            return []  # a duplicate, an older write this replica already covers, or nonsense
        acked[src] = frame.version
        out: list[Output] = []
        if self.phase != "held":
            if self.phase == "persisting":
                return []  # the write-back's quorum was counted: the store's save is awaited
            if self._holders(self.version) is None:
                return []
            if not self._persist:
                return self._hold()
            self.phase = "persisting"  # rule 7: held once the store has it; the acquire timer stays armed
            if not self._lagging():
                self._disarm_resend(out)  # else it stays armed: a lagging replica is caught up (rule 5)
            out.append(Report(Persisting(self.entity, self.epoch, self.version, dict(self.pages))))
            return out
        pending = self._pending
        if not pending:
            if self._resend_at is not None and not self._lagging():
                self._disarm_resend(out)  # the last lagging replica caught up
            return out
        oldest = next(iter(pending))
        if frame.version < oldest:
            return out  # older than every pending write: it confirms nothing new
        held = 0
        for replica in self.replicas:  # _holders(oldest), counted without building it: most acks confirm nothing
            if acked.get(replica, 0) >= oldest:
                held += 1
        if held < self._write_quorum:
            return out
        for version in list(pending):
            holders = self._holders(version)
            if holders is None:
                break  # fewer replicas hold a later version: nothing after this one is confirmed either
            del pending[version]
            out.append(Report(Confirmed(self.entity, self.epoch, version, holders)))
        if not pending and not self._lagging():
            self._disarm_resend(out)  # cheaper to cancel than to fire for nothing; the write timer stays (WRITE_TIMER)
        return out

    def _lagging(self) -> bool:
        """Whether some replica has not acked the newest version (the write-back or the last write)."""
        acked = self._acked
        version = self.version
        for replica in self.replicas:
            if acked.get(replica, 0) < version:
                return True
        return False

    def _holders(self, version: int) -> tuple[str, ...] | None:
        """The replicas holding ``version`` or later under this epoch, if they make a write quorum."""
        acked = self._acked
        holders = [replica for replica in self.replicas if acked.get(replica, 0) >= version]
        return tuple(holders) if len(holders) >= self._write_quorum else None

    def _lose(self, newer: Epoch) -> list[Output]:
        """A newer epoch exists: fail what is pending, report ``Lost``, refuse all further writes."""
        out: list[Output] = []
        if self.phase in ("preparing", "writing_back", "persisting"):
            out.append(CancelTimer(ACQUIRE_TIMER))
        for version in self._pending:
            out.append(Report(Fenced(self.entity, self.epoch, version, newer)))
        self._pending.clear()
        self._disarm_write_timer(out)
        self._disarm_resend(out)
        self.phase = "lost"
        self.newer = newer
        out.append(Report(Lost(self.entity, self.epoch, newer)))
        return out

    # ---------------------------------------------------------------- timers ----

    def timer(self, name: str, now: float) -> list[Output]:
        """A timer set by this owner fired."""
        if name == ACQUIRE_TIMER:
            if self.phase not in ("preparing", "writing_back", "persisting") or now < self._deadline:
                return []
            self.phase = "idle"
            out: list[Output] = []
            self._disarm_resend(out)
            out.append(Report(AcquireTimedOut(self.entity, self.epoch)))
            return out
        if name == RESEND_TIMER:
            return self._resend(now)
        if name == WRITE_TIMER:
            return self._time_out_writes(now)
        return []

    def _time_out_writes(self, now: float) -> list[Output]:
        """The write timer fired: every pending write past its deadline times out; arm again for the oldest left."""
        if self._write_timer_at is None or now < self._write_timer_at:
            return []
        self._write_timer_at = None
        out: list[Output] = []
        pending = self._pending
        for version, deadline in list(pending.items()):
            if deadline > now:
                self._write_timer_at = deadline
                out.append(SetTimer(WRITE_TIMER, deadline))
                break
            del pending[version]
            out.append(Report(WriteTimedOut(self.entity, self.epoch, version)))
        return out

    def _disarm_write_timer(self, out: list[Output]) -> None:
        if self._write_timer_at is not None:
            self._write_timer_at = None
            out.append(CancelTimer(WRITE_TIMER))

    def _arm_resend(self, now: float, out: list[Output]) -> None:
        if self.resend_every is None or self._resend_at is not None:
            return
        self._resend_at = now + self.resend_every
        out.append(SetTimer(RESEND_TIMER, self._resend_at))

    def _disarm_resend(self, out: list[Output]) -> None:
        if self._resend_at is not None:
            self._resend_at = None
            out.append(CancelTimer(RESEND_TIMER))

    def _resend(self, now: float) -> list[Output]:
        """Frames get lost: send the current round again to the replicas that have not answered it.

        Only the newest write is resent: a replica that acks it holds every earlier one.
        """
        if self._resend_at is None or now < self._resend_at:
            return []
        self._resend_at = None
        out: list[Output] = []
        if self.phase == "preparing":
            prepare = Prepare(self.entity, self.epoch)
            out.extend(Send(replica, prepare) for replica in self.replicas if replica not in self._promises)
        elif self.phase == "held" and self._pending and self.resend_every is not None:
            # The timer stays armed across confirmations: the oldest write pending now may be
            # younger than resend_every, its acks still on their way. Wait until it is not.
            sent = next(iter(self._pending.values())) - self.write_timeout
            if now < sent + self.resend_every:
                self._resend_at = sent + self.resend_every
                out.append(SetTimer(RESEND_TIMER, self._resend_at))
                return out
            newest = self.version
            frame = Write(self.entity, self.epoch, newest, dict(self.pages))
            out.extend(Send(replica, frame) for replica in self.replicas if self._acked.get(replica, 0) < newest)
        elif self.phase in ("writing_back", "persisting", "held") and self.resend_every is not None:
            # The write-back, or (nothing pending) a catch-up of a lagging replica: a newer
            # promise it holds must end this owner before a client's write meets it (rule 5).
            newest = self.version
            lagging = [replica for replica in self.replicas if self._acked.get(replica, 0) < newest]
            if not lagging:
                return out
            frame = Write(self.entity, self.epoch, newest, dict(self.pages))
            out.extend(Send(replica, frame) for replica in lagging)
            if self.phase != "writing_back":
                self._idle_resends += 1
                self._resend_at = now + self.resend_every * 2 ** min(self._idle_resends, 4)
                out.append(SetTimer(RESEND_TIMER, self._resend_at))
                return out
        else:
            return out
        self._arm_resend(now, out)
        return out
