"""``ReplicaStore``: one node's replicas of many keys (the replica side of ``casty.protocol.replication``).

A sans-I/O core: it answers a Prepare or a Write with a pure method and keeps nothing but
promises, stamps and pages. The rules it follows (1 Prepare, 3 Write, 6 Delete, readiness
and blank promises, 8 Disk through ``import_``) are numbered in ``casty.protocol.replication``,
where the frames it answers are defined; this module holds only the state machine.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping

from .replication import ZERO_EPOCH, ZERO_STAMP, Ack, Entity, Epoch, Nack, Prepare, Promise, Snapshot, Stamp, Write
from .sansio import Output, Send

__all__ = ["ReplicaStore"]


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

