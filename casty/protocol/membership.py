"""Who is in the cluster: a sans-I/O heartbeat-gossip membership core (SWIM-lite).

One ``Membership`` object per node (``casty.protocol.gossip``: the state machine). It is
fed inputs (``start``, ``timer``, ``receive``, ``leave``) with the current monotonic time and
answers with outputs from :mod:`casty.protocol.sansio`: frames to send, the two timers it
uses ("heartbeat" and "check"), and ``Report(MemberChanged(...))`` facts. It does no I/O and
reads no clock, so the simulator, TCP and unit tests drive the very same object. This module
holds its rules (below, each named, as the code and the tests cite them) and its vocabulary:
the statuses, the timing, the frames and the events.

How it works, and why:

- **Heartbeats carry the whole view.** Every ``heartbeat`` seconds a node bumps its own
  sequence number and sends a ``Heartbeat`` to every member it has not given up on
  (alive, suspect or dead) and to every seed it does not currently see alive. The frame
  carries a digest of the sender's view: ``(node, incarnation, status, seq)`` per member
  (for a suspect or dead member, the seq its verdict was made on; see the merges).
  There is no central node: views converge because everyone merges everyone's digest.
  (All-to-all is O(N^2) frames per period: right for the tens of nodes of a lab; a
  fan-out would be the change to make for hundreds.)
- **Evidence is (incarnation, seq).** A member's counter only grows while it lives, so
  learning a greater ``(incarnation, seq)`` for it, directly or through anyone's digest, is
  proof that it was alive after what we knew; that refreshes its ``last_heard``. A member
  with no fresh evidence for ``suspect_after`` becomes *suspect*; suspected for
  ``dead_after`` more (and still silent) it becomes *dead*; dead or *left* members are
  *removed* ``remove_after`` later.
- **Merges** compare incarnations first: a greater incarnation replaces the record,
  whatever its status (a restart, or a refutation). At the same incarnation a status only
  moves forward, alive < suspect < dead < left < removed, and the seq only grows. Two
  guards keep stale news from doing harm: a *suspect* or *dead* verdict is adopted only if
  its seq is at least ours (the judge had evidence as fresh as ours: a node back from a
  partition cannot kill members we hear fine); *removed* never travels about third
  parties (removal is a local decision; its tombstone only tells the removed node itself).
  *Left* comes from the leaving node itself and is adopted at once.
  A verdict travels with the seq it was made on (the judge's own, or the one it adopted),
  never with what its holder heard since: one who holds X suspect or dead and then hears X
  at that incarnation (X has not refuted yet) keeps the fresher seq as evidence, but its
  digest still carries the verdict's seq. Otherwise the stale verdict would pass the guard
  above at third parties that have heard X after it was made.
- **Refutation.** A node that sees a claim about itself that it did not make (suspect,
  dead, left or removed at its incarnation, or a greater (incarnation, seq) — its previous
  life) takes ``max(claimed, own) + 1`` as its incarnation and heartbeats everyone at once.
  A node we hold as not alive, or did not know, gets an immediate answer to its heartbeat,
  so that it learns its status (or the view, when joining) without waiting a period.
- **Heard directly.** A member enters the view only when it has been heard from
  directly: a ``Heartbeat`` (or ``Leaving``) whose sender is the node that sent it. A
  digest entry about a node this one does not know (or holds removed) is a *rumour*, not
  a member: it is probed at once with a heartbeat, and with every heartbeat while the
  rumour is fresh (``suspect_after + dead_after`` after the last digest that named it), so
  that joins still converge in a round trip; it counts nowhere (view, ring, quorum) until it
  answers. Otherwise one frame from a stranger that knows the cluster's name could name
  members that do not exist, and, never heard, never removed (removal needs a quorum), they
  would keep the cluster below a majority for good. Digest entries about known members
  are merged as below.
- **A new member proves a round trip.** Being heard is not enough either: a node first heard
  in a life this one does not hold (unknown, removed, or a greater incarnation of a member)
  is a *candidate*. Its frame counts for nothing (no record, ring, quorum or digest entry;
  its digest, its claims about us and its ``previous`` are not read) and it is answered
  with a *probe* (``Heartbeat.probe``) that asks for proof. The proof is
  ``Heartbeat.heard``: every heartbeat echoes the ``(incarnation, seq)`` of the last
  heartbeat its sender received from its receiver, and an echo of this life (an
  incarnation between this life's first and its current one, a seq it has sent) proves
  that the sender receives our frames. Only such a frame lets the life in, and then the
  frame is merged as a member's. A stranger whose address does not answer (in the
  simulator a node id with no node behind it; over TCP an address nobody listens at, or a
  handshake that fails under ``Cluster(secret=)``) never sees a probe, so it never becomes
  a member; before, it entered the view, went dead, and stayed on the ring and in the
  quorum until ``remove_after``, where the handoff sync rounds waited for it. A candidate
  is forgotten, as a rumour is, ``suspect_after + dead_after`` after it was last heard. The
  cost is one round trip on the side that is asked: a joiner holds the seed as soon as the
  seed's probe echoes its hello (as before), the seed holds the joiner once the joiner's
  answer echoes the probe. A probe is answered even by one that holds its sender alive;
  an answer is never answered, so a proof never ping-pongs. A new incarnation of a known
  member needs the proof too: a forged "n2 restarted" would otherwise count a dead n2
  alive (a quorum it does not have) until suspect_after, and replace its record with a
  life that does not exist. With the proof the forgery is not adopted, the probe goes to
  the real n2, whose answer at its real incarnation is plain evidence: no refutation, no
  churn. A real restart proves its round trip with its first answers (one hop more at the
  seed). A ``Leaving`` from a node this one does not hold is ignored (it would mint a
  record). Known limits: a node that can send as a member's id (its address, or a
  connection the handshake let in) is that member to this rule; ``Cluster(secret=)`` is
  the defence there. A node of an older version sends no echo, so it cannot join a newer
  one (members it already holds are unaffected).
- **Quorum.** Members as this node knows them are those alive, suspect or dead (left and
  removed ones have gone); ``has_quorum`` needs more than half of them *alive* (suspect
  ones do not count: the minority side steps down at ``suspect_after``, before the
  majority side moves keys away from it at ``suspect_after + dead_after``). A node without
  a quorum never removes dead members: otherwise the minority of a partition would forget
  the majority and, alone with itself, find a majority again.
- **Learning the view.** A node has no quorum in this life until it has *learned* the
  view (``learned``, reported once as ``ViewLearned``), which needs all of:
  (1) the listen window (``MembershipConfig.listen``: by default three heartbeats, at most
  ``suspect_after``) has passed since ``start``: a process back from a crash remembers no
  view, but every live member that still holds it (alive, suspect or dead: not removed)
  heartbeats it every period, so within the window it hears them, and their digests name
  the cluster as they last knew it; (2) if it has other seeds, it has heard a member that
  *knows* the cluster (one whose heartbeat says it learned the view in its life:
  ``Heartbeat.learned``), or, when none of those it heard does, every other seed: nobody
  it heard remembers more than whom it heard since it started, so only the seeds together
  may found the cluster (a restarted node must not believe it is alone, nor that it and
  another restarted node are the whole cluster while the members that remember it are
  paused or cut off: swarm seeds 970 and 1563 acquired keys at round 1 that way);
  (3) no member it holds alive names
  alive a node it has not heard itself, unless more than half of those members name it
  (that node is probed; a member named by a stranger only delays learning until the
  stranger is suspect); (4) the members it holds alive are more than half of the union of
  its own members and the members (alive, suspect or dead) named by the digests of the
  members it holds alive. (5) The *voters* are the members it holds alive that know the
  cluster (all of them, when none does: a founding): a node still listening names only
  whom it heard since its own start, and its silence about a member is no evidence that
  the member was removed. On learning, the members named by more than half of the voters
  are taken into the view as the voters told (the one exception to "heard
  directly", and never on one node's word when several know): a member cut off or dead, not removed, is on
  the ring of everyone else, and must be on the restarted node's ring too, or the two rings
  would give a key different replica sets, and a replica that remembers nothing could
  accept the writes of an owner the others have fenced. Two seeds that crash together and
  restart together thus hear each other first but do not count 2 of 2 as a quorum of a
  5-node cluster: they own nothing until they have heard a majority of the five. A whole
  cluster restarted together has no live member to hear: once every seed is back and the
  window has passed, the nodes that found each other (through the seeds) are the whole
  view, and they regain a quorum; the nodes back later hear a member that knows it. Once
  learned, the rules above alone decide. (Known limits: a seed that never comes back keeps
  a whole-cluster restart from learning until the seed list is changed; a member that only
  a minority of the voters name counts in (4) but is not on the restarted node's ring until
  it is heard; and the remembered view below needs a disk that came through: if every seed
  restarts with no memory (no disk, or a wiped one) while every member that remembers the
  cluster is paused or cut off for longer than the window, the seeds found a cluster of
  whom they hear, since no local fact tells that apart from a new cluster.)
- **The remembered view.** A node with a disk keeps the member list it learned
  (``remembered()``: every other member not removed, with its incarnation; the driver
  writes it only when that list changes, ``casty.cluster.viewstore``), and a core built
  with ``recall=True`` learns nothing before ``recall`` gave it what the disk holds. Each
  remembered member not heard yet is held *dead on no evidence* (its verdict's seq is 0):
  it counts in the quorum and stays on the ring, as on the ring of a member that remembers
  the cluster, so seeds back from a crash with their disks while the members that remember
  the cluster are paused do not found a cluster of themselves: n1, n2 and n4 of five learn
  3 of 5, and a key on n3, n5 and n4 keeps those replicas (swarm seed 848 confirmed a delete
  on n4, n2 and n1 that the heal undid). Such a verdict is news to nobody: any evidence of
  life at that incarnation (heard directly, or a digest's seq above 0) makes the member
  alive, others never adopt it, and the member never refutes it (no churn, no doubt) unless
  it names a greater incarnation than the member's own: that is a previous life's record,
  the member restarted under a wall clock stepped back since (its new life was born below
  the old one), and it is refuted as any claim about a previous life is, or its holder
  would ignore every heartbeat of the lower life and hold it dead, owning nothing, for good
  (swarm seed 749: the others routed a key to a node that named the restarted one owner).
  Where members that know the cluster are heard, their view replaces the disk's on
  learning: a remembered member that a majority of them do not name was removed while
  this node was down, and leaves its view (reported ``removed``). A whole cluster restarted
  with its disks thus needs a majority of the remembered view back, not only the seeds.
  A disk that says nothing (none, wiped, unreadable: ``recall([])``) learns as before.
  The nodes taken in on learning are the other exception to "proves a round trip": they
  were vouched for by a majority of members that did prove theirs.
- **Doubt.** A node reports ``Doubted`` when it learns that others may have stopped hearing
  it while it thought itself fine, which is when its keys may have moved under a newer epoch
  without its quorum ever failing in its own view: (1) its heartbeat timer comes due more
  than ``suspect_after`` late (it was frozen: a long GC, a stopped VM, a paused process), or
  (2) it refutes a suspect, dead or removed claim about itself that came from a member it
  held alive until that frame (a one-way cut: they stopped hearing it, it did not stop
  hearing them). A claim from a member it held suspect or dead is not a doubt: that member
  was cut off from it too, and its verdict is as stale as the rest of its view; otherwise
  every heal of a partition would make the majority side doubt itself because of the
  minority's old verdicts (and a cut-off minority loses its quorum, which already ends its
  runs). The driver ends its runs (``casty.cluster.runtime``, the step-down rule).
- **Timers.** Two, whatever the cluster size: "heartbeat" (periodic) and "check" (armed at
  the earliest pending deadline; firing early is harmless, it re-arms).
- **Determinism.** Members are always visited in node-id order; several status changes
  reported by one input come out sorted by node id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Final, Literal

from .._durations import duration
from ..observer import Event

__all__ = [
    "Status",
    "STATUSES",
    "MembershipConfig",
    "MemberView",
    "MemberChanged",
    "DigestEntry",
    "Heartbeat",
    "Leaving",
    "FRAMES",
    "ViewLearned",
    "Doubted",
]

Status = Literal["alive", "suspect", "dead", "left", "removed"]
STATUSES: Final[tuple[Status, ...]] = ("alive", "suspect", "dead", "left", "removed")

DigestEntry = tuple[str, int, str, int]
"""One member as a node sees it: ``(node, incarnation, status, seq)``; a suspect or dead one with its verdict's seq."""


@dataclass(frozen=True, slots=True)
class MembershipConfig:
    """Failure-detection timing, in seconds (the ``Cluster(...)`` arguments of the same names)."""

    heartbeat: float = 1.0
    suspect_after: float = 5.0
    dead_after: float = 5.0
    remove_after: float = 60.0
    listen: float | None = None  # the listen window before a first quorum; None: ``listen_window``'s default

    def __post_init__(self) -> None:
        # The shared duration check: NaN or inf would be a timer that never fires (a node never suspected).
        for name in ("heartbeat", "suspect_after", "dead_after", "remove_after"):
            duration(getattr(self, name), f"MembershipConfig.{name}", positive=True)
        if self.listen is not None:
            duration(self.listen, "MembershipConfig.listen")

    @property
    def listen_window(self) -> float:
        """How long a started node listens before it may count a first quorum: ``listen``, else three heartbeats
        (a live member that holds it heartbeats it every period; three periods ride out a lost frame or two),
        at most ``suspect_after`` (a member silent that long is not counted alive by anyone anyway)."""
        if self.listen is not None:
            return self.listen
        return min(3 * self.heartbeat, self.suspect_after)


@dataclass(frozen=True, slots=True)
class MemberView:
    """One member as this node sees it: ``last_heard`` and ``since`` are this node's monotonic times."""

    node: str
    incarnation: int
    status: Status
    seq: int
    last_heard: float
    since: float


@dataclass(frozen=True, slots=True)
class MemberChanged(Event):
    """This node now holds ``node`` at ``incarnation`` with ``status`` (a status change, or a new incarnation)."""

    kind: ClassVar[str] = "member.changed"
    node: str
    incarnation: int
    status: str


@dataclass(frozen=True, slots=True)
class ViewLearned(Event):
    """This node has learned the view (see "Learning the view"): ``alive`` of ``members`` it counted, the rumoured ones included."""

    kind: ClassVar[str] = "member.learned"
    alive: int
    members: int


@dataclass(frozen=True, slots=True)
class Doubted(Event):
    """This node has reason to think others stopped hearing it while it thought itself fine (see "Doubt").

    ``reason`` says which: its own heartbeat came due far too late (the node was frozen), or a
    member it heard fine until this frame claimed it suspect, dead or removed. Keys it runs
    may have moved to another owner under a newer epoch meanwhile: the driver steps down.
    """

    kind: ClassVar[str] = "member.doubted"
    reason: str


# --- frames ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """"I am alive at (incarnation, seq), and this is my view". ``answer``: a reply, never to be answered.

    ``heard``: the ``(incarnation, seq)`` of the last heartbeat the sender received from the
    receiver (the round-trip proof of "A new member proves a round trip"). ``probe``: the
    sender holds the receiver as a candidate and asks for that proof: answer it even if you
    hold the sender alive. Both have defaults (the body is a map): a node without them reads
    the frame as before, but it never proves a round trip, so it cannot join a newer node.
    ``learned``: the sender learned the view in this life, so its digest is the cluster as
    last known, not only whom it heard since it started ("Learning the view" (2) and (5)); a
    node of an older version sends none, and counts as one that does not know the cluster.
    """

    node: str
    incarnation: int
    seq: int
    digest: tuple[DigestEntry, ...]
    answer: bool = False
    previous: int | None = None  # the latest earlier incarnation of the receiver that the sender knew
    heard: tuple[int, int] | None = None
    probe: bool = False
    learned: bool = False  # the sender learned the view in this life: it names the cluster as last known


@dataclass(frozen=True, slots=True)
class Leaving:
    """An orderly leave: mark ``node`` left at once (not suspect, not dead)."""

    node: str
    incarnation: int
    seq: int


FRAMES: Final[tuple[type, ...]] = (Heartbeat, Leaving)
