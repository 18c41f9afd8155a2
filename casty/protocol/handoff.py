"""Handoff: a replica pulls what the other nodes hold, so that it can count again.

A sans-I/O core (see ``casty.protocol.sansio``): no loop, no clock, no transport.

Why: replicas keep pages in memory. A node that comes back as a new process holds nothing,
and a node that the ring makes a new replica of a key (a member was removed or joined)
holds nothing of that key. Until it has the other replicas' copies, its answers must not
count toward a read quorum (``Promise.blank``; ``ReplicaStore`` readiness). ``Handoff``
fetches those copies.

How: a *sync round* starts when the node opens its replica (after its start-up grace) and
again at every change of the ring. The node sends ``SyncRequest(round)`` to every other
node on the ring; each answers with ``SyncDump`` frames: everything its replica store holds
(promise, stamp and pages per key), in parts of at most ``part_size`` keys and, past its
first key, ``part_bytes`` of pages (so that a part fits a transport frame: a key's pages
alone always do, see ``casty.protocol.limits.KEY_MARGIN``), each part
saying how many parts there are and whether the sender's own last round is complete
(``synced``). Every part is imported as it arrives (``Imported``: a merge where the newest
stamp and the greatest promise win, so importing is always safe, early or late, twice or
out of order). A node that has received all the parts of one dump of a peer for the
current round, sent while the peer had it on its ring (``knows_you``), *has an answer*
from it; the driver decides per key from those answers whether the replica is ready (see
``answered``, and ``casty.cluster.replicas``). Requests are sent again every
``resend_every`` seconds to peers that have not answered (frames get lost; a peer may be
down for a while), until the round ends or a newer one replaces it.

Everyone always answers, whatever its own state (a node still in its grace period answers
with ``synced=False``): answering is a read, and the asker decides what it is worth.

Dumps of whole stores are the simple choice for the tens of nodes and thousands of keys of
a lab; a ring-aware, key-range transfer is the change to make for bigger stores.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from .limits import pages_size
from .replication import Snapshot
from .sansio import CancelTimer, Output, Report, Send, SetTimer

__all__ = [
    "SyncRequest",
    "SyncDump",
    "FRAMES",
    "Imported",
    "RoundStarted",
    "RoundEnded",
    "Handoff",
    "SYNC_TIMER",
]

PART_BYTES: Final = 1 << 20
"""The most bytes of pages one ``SyncDump`` part carries past its first key (well under a transport's frame limit)."""

SYNC_TIMER: Final = "sync"
"""The core's one timer: send the current round's request again to peers that have not answered."""


# ====================================================================== frames ======


@dataclass(frozen=True, slots=True)
class SyncRequest:
    """Asker -> peer: send me everything you hold (the asker's round number, echoed back)."""

    round: int


@dataclass(frozen=True, slots=True)
class SyncDump:
    """Peer -> asker: part ``part`` of ``parts`` of the peer's replica store, for ``round``.

    ``dump`` numbers the peer's answers: the parts of one answer are one consistent
    picture, so an answer is complete only when every part of one ``dump`` arrived.
    ``knows_you``: the asker was on the peer's ring when it answered. Only such an answer
    counts: a peer that does not know the asker yet may still confirm writes on a replica
    set without it (its owners have not re-acquired over the new ring), after this dump.

    ``synced``: the peer's own latest sync round is complete (it had answers from every
    other node on its ring), so what it holds is as good as a replica's gets.
    """

    round: int
    dump: int
    part: int
    parts: int
    synced: bool
    snapshots: tuple[Snapshot, ...]
    knows_you: bool = True


FRAMES: tuple[type, ...] = (SyncRequest, SyncDump)
"""Every frame class of this protocol (for the transport codec's tag table)."""


# ===================================================================== reports ======


@dataclass(frozen=True, slots=True)
class Imported:
    """Merge these snapshots from ``source`` into the replica store (any time: merging is monotone)."""

    source: str
    snapshots: tuple[Snapshot, ...]


@dataclass(frozen=True, slots=True)
class RoundStarted:
    """A sync round began: requests went to ``peers``."""

    round: int
    peers: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RoundEnded:
    """Every peer of ``round`` answered in full: ``synced`` names those whose own round was complete."""

    round: int
    peers: tuple[str, ...]
    synced: tuple[str, ...]


# ======================================================================== core ======


class Handoff:
    """The sync rounds of one node: asks its peers for their stores, answers theirs."""

    __slots__ = ("node", "resend_every", "part_size", "part_bytes", "round", "_first_round", "peers", "_dumps", "_parts", "_answers", "_resend_armed", "_ended")

    def __init__(
        self, node: str, *, resend_every: float = 1.0, part_size: int = 128, part_bytes: int = PART_BYTES, first_round: int = 0
    ) -> None:
        if not resend_every > 0:
            raise ValueError(f"resend_every must be positive, got {resend_every}")
        if part_size < 1:
            raise ValueError(f"part_size must be at least 1, got {part_size}")
        if part_bytes < 1:
            raise ValueError(f"part_bytes must be at least 1, got {part_bytes}")
        self.node: Final = node
        self.resend_every = resend_every
        self.part_size = part_size
        self.part_bytes = part_bytes
        self._first_round = first_round
        self.round = first_round  # a life-unique base (the driver passes the incarnation): no answer to a past life counts
        self.peers: tuple[str, ...] = ()
        self._dumps = 0  # answers sent so far (numbers them)
        self._parts: dict[tuple[str, int], set[int]] = {}  # (peer, dump) -> parts received in this round
        self._answers: dict[str, bool] = {}  # peer -> its synced flag, once all its parts came
        self._resend_armed = False
        self._ended = False

    # ------------------------------------------------------------------ queries ----

    @property
    def complete(self) -> bool:
        """The current round has an answer from every peer (vacuously true before any round with peers)."""
        return len(self._answers) == len(self.peers)

    def answered(self, peer: str) -> bool:
        """Whether ``peer`` answered the current round in full."""
        return peer in self._answers

    def synced_peer(self, peer: str) -> bool:
        """Whether ``peer`` answered the current round in full and was synced itself when it did."""
        return self._answers.get(peer, False)

    # ------------------------------------------------------------------- inputs ----

    def begin(self, now: float, peers: Sequence[str]) -> list[Output]:
        """Start a new round over ``peers`` (the other nodes on the ring); earlier rounds' answers stop counting."""
        self.round += 1
        self.peers = tuple(sorted(set(peers) - {self.node}))
        self._parts = {}
        self._answers = {}
        self._ended = False
        out: list[Output] = [Report(RoundStarted(self.round, self.peers))]
        request = SyncRequest(self.round)
        out.extend(Send(peer, request) for peer in self.peers)
        out.extend(self._arm(now))
        out.extend(self._maybe_end())
        return out

    def receive(
        self, src: str, frame: object, export: Callable[[], list[Snapshot]], knows: Callable[[str], bool] | None = None
    ) -> list[Output]:
        """A frame from ``src``: answer a request with ``export()`` in parts, or take a part of an answer.

        ``knows(src)``: whether ``src`` is on this node's ring (None: it is), said in the answer.
        """
        if isinstance(frame, SyncRequest):
            return self._answer(src, frame, export(), True if knows is None else knows(src))
        if isinstance(frame, SyncDump):
            return self._take(src, frame)
        return []

    def timer(self, name: str, now: float) -> list[Output]:
        """The resend timer fired: ask the peers that have not answered again."""
        if name != SYNC_TIMER or not self._resend_armed:
            return []
        self._resend_armed = False
        if self.complete:
            return []
        request = SyncRequest(self.round)
        out: list[Output] = [Send(peer, request) for peer in self.peers if peer not in self._answers]
        out.extend(self._arm(now))
        return out

    # ---------------------------------------------------------------- internals ----

    def _answer(self, src: str, frame: SyncRequest, snapshots: list[Snapshot], knows_you: bool) -> list[Output]:
        chunks = self._split(snapshots)
        parts = len(chunks)
        synced = self.round > self._first_round and self.complete
        self._dumps += 1
        dump = self._dumps
        return [Send(src, SyncDump(frame.round, dump, part, parts, synced, chunk, knows_you)) for part, chunk in enumerate(chunks)]

    def _split(self, snapshots: list[Snapshot]) -> list[tuple[Snapshot, ...]]:
        """``snapshots`` in order, cut into parts of at most ``part_size`` keys and ``part_bytes`` of pages (one key at least).

        By count alone, 128 keys of a few hundred KiB each made one part of tens of MiB,
        which every transport drops (it is over the frame limit): the asker never had an
        answer, and its replica never became ready.
        """
        chunks: list[tuple[Snapshot, ...]] = []
        chunk: list[Snapshot] = []
        size = 0
        for snapshot in snapshots:
            weight = pages_size(snapshot.pages)
            if chunk and (len(chunk) >= self.part_size or size + weight > self.part_bytes):
                chunks.append(tuple(chunk))
                chunk, size = [], 0
            chunk.append(snapshot)
            size += weight
        chunks.append(tuple(chunk))
        return chunks

    def _take(self, src: str, frame: SyncDump) -> list[Output]:
        out: list[Output] = []
        if frame.snapshots:
            out.append(Report(Imported(src, frame.snapshots)))  # a late or stray part is still good data
        if frame.round != self.round or src not in self.peers or src in self._answers:
            return out
        if not 0 <= frame.part < frame.parts:
            return out
        got = self._parts.setdefault((src, frame.dump), set())
        got.add(frame.part)
        if len(got) == frame.parts:
            if not frame.knows_you:
                del self._parts[(src, frame.dump)]  # good data, imported; not an answer yet: asked again
                return out
            self._answers[src] = frame.synced
            for stale in [k for k in self._parts if k[0] == src]:
                del self._parts[stale]
            out.extend(self._maybe_end())
        return out

    def _maybe_end(self) -> list[Output]:
        if self._ended or not self.complete:
            return []
        self._ended = True
        out: list[Output] = []
        if self._resend_armed:
            self._resend_armed = False
            out.append(CancelTimer(SYNC_TIMER))
        synced = tuple(peer for peer in self.peers if self._answers[peer])
        out.append(Report(RoundEnded(self.round, self.peers, synced)))
        return out

    def _arm(self, now: float) -> list[Output]:
        if self._resend_armed or self.complete:
            return []
        self._resend_armed = True
        return [SetTimer(SYNC_TIMER, now + self.resend_every)]
