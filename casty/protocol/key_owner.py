"""``KeyOwner``: the state machine of one key acquired and held on this node (the owner side of ``casty.protocol.replication``).

A sans-I/O core: ``acquire`` mints an epoch and prepares every replica, ``receive`` takes
their answers, ``write`` sends fenced quorum writes, ``timer`` takes the timeouts; its facts
come out as ``Report`` of the reports defined in ``casty.protocol.replication``. The rules it
follows (2 Acquire, 4 Confirm, 5 Fence, 7 Durable acquire) are numbered there, with the
frames and the epochs; this module holds only the state machine and its timers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Literal

from .replication import (
    ZERO_EPOCH,
    ZERO_STAMP,
    Ack,
    Acquired,
    AcquireTimedOut,
    Confirmed,
    Entity,
    Epoch,
    WriteFenced,
    Level,
    Lost,
    Nack,
    Persisting,
    Prepare,
    Promise,
    Stamp,
    Write,
    WriteTimedOut,
    quorum_sizes,
)
from .sansio import CancelTimer, Output, Report, Send, SetTimer

__all__ = ["KeyOwner", "WriteBackUpdates", "ACQUIRE_TIMER", "RESEND_TIMER", "WRITE_TIMER"]

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
        outcome comes later as ``Confirmed``, ``WriteFenced`` or ``WriteTimedOut`` of that version;
        once the owner is ``lost``, at once as ``WriteFenced``.
        """
        if tombstone and updates:
            raise ValueError(f"{self.entity}: a tombstone deletes every page; it takes no updates")
        if self.phase == "lost":
            self.version += 1
            assert self.newer is not None
            return self.version, [Report(WriteFenced(self.entity, self.epoch, self.version, self.newer))]
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
            out.append(Report(WriteFenced(self.entity, self.epoch, version, newer)))
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
