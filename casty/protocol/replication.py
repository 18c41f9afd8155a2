"""Replication of a key's pages: owner epochs won by prepare/promise, writes fenced by epoch.

A sans-I/O protocol (see ``casty.protocol.sansio``): no loop, no clock, no transport.
This module is its vocabulary and its rules: epochs and stamps, the quorum sizes, the
frames replicas and owners exchange, the facts an owner reports. Two state machines per
node follow the rules, each in a module of its own:

* ``ReplicaStore`` (``casty.protocol.replica_store``): the node's replica of many keys. For
  each key it holds the newest epoch it *promised*, the ``Stamp`` (epoch, version) of the
  pages it *holds*, and those pages. It answers frames with pure methods (``on_prepare``,
  ``on_write``) and hands keys over (``export`` / ``import_``).
* ``KeyOwner`` (``casty.protocol.key_owner``): one state machine per (actor, key) that this
  node acquires and holds. ``acquire`` mints a fresh epoch and prepares every replica;
  ``receive`` takes their answers; ``write`` sends fenced quorum writes; ``timer`` takes the
  timeouts. Its facts come out as ``Report`` of ``Acquired``, ``Lost``, ``AcquireTimedOut``,
  ``Confirmed``, ``WriteFenced`` and ``WriteTimedOut``.

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
   reported ``WriteFenced``, then ``Lost``; later writes are ``WriteFenced`` at once, without frames.
   ``WriteFenced`` and ``WriteTimedOut`` mean *not confirmed*, not *not applied*: such a write
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
9. **Supersede.** A replica whose promise rises from one node's epoch to a newer one tells
   that node at once (``superseded``): it sends it the ``Nack`` of the older epoch, as if
   refusing its Prepare, so a holder of that epoch ends (rule 5) now, not at its next write.
   A holder's replicas all acked its newest write, so rule 5's resends have stopped; when
   an acquisition another node gave up at once (a view that named it owner for an instant)
   reached a read quorum without the holder's own replica, nobody else would tell it, and
   its next write, a client's, was fenced. Nobody is told when the promise did not move
   (refused, or a duplicated Prepare), nor the sender (it minted the newer epoch), nor this
   node (its driver hands its own owner the Nack directly). Telling is only ever early: the
   node is fenced already; a Nack that is lost leaves rule 5 to fence the next write.

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

from dataclasses import dataclass
from typing import Literal, NamedTuple

import msgspec

__all__ = [
    "Entity",
    "Epoch",
    "Stamp",
    "ZERO_EPOCH",
    "ZERO_STAMP",
    "Level",
    "LEVELS",
    "quorum_sizes",
    "superseded",
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
    "WriteFenced",
    "WriteTimedOut",
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


def superseded(previous: Epoch, promised: Epoch, sender: str, here: str) -> str | None:
    """Rule 9: the node a replica at ``here`` must tell that its promise rose from ``previous`` to ``promised``.

    ``previous`` and ``promised`` are the replica's promise before and after a Prepare from
    ``sender``. The node is the one that minted ``previous``: an epoch's node part names one
    life of a node as ``"<node>#<life>"`` (``casty.cluster.replicas``), or the node alone.
    ``None`` when nobody must be told (the promise did not rise, no epoch was promised before,
    or that node is the sender or this one). The caller sends it ``Nack(entity, previous,
    None, promised)``; a node whose owner no longer holds ``previous`` ignores it.
    """
    if not promised > previous:
        return None
    node = previous.node.partition("#")[0]
    return None if node in ("", sender, here) else node


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
class WriteFenced:
    """Write ``version`` was refused: a replica promised ``newer``. Not confirmed (it may still surface).

    A report of the core, not an exception: the activation turns it into the public
    ``casty.errors.Fenced`` its writer raises (a replaced run's write, by lease or by epoch).
    """

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
