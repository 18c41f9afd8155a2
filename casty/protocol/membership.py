"""Who is in the cluster: a sans-I/O heartbeat-gossip membership core (SWIM-lite).

One ``Membership`` object per node. It is fed inputs (``start``, ``timer``, ``receive``,
``leave``) with the current monotonic time and answers with outputs from
:mod:`casty.protocol.sansio`: frames to send, the two timers it uses ("heartbeat" and
"check"), and ``Report(MemberChanged(...))`` facts. It does no I/O and reads no clock, so
the simulator, TCP and unit tests drive the very same object.

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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Final, Literal, cast

from .._durations import duration
from ..observer import Event
from .placement import has_quorum as _has_quorum
from .sansio import CancelTimer, Output, Report, Send, SetTimer

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
    "Membership",
    "HEARTBEAT_TIMER",
    "CHECK_TIMER",
]

Status = Literal["alive", "suspect", "dead", "left", "removed"]
STATUSES: Final[tuple[Status, ...]] = ("alive", "suspect", "dead", "left", "removed")
_RANK: Final[dict[str, int]] = {status: rank for rank, status in enumerate(STATUSES)}
_PRESENT: Final[frozenset[str]] = frozenset({"alive", "suspect", "dead"})  # still members (quorum, ring)
_SERVING: Final[frozenset[str]] = frozenset({"alive", "suspect"})  # may own keys
_VERDICTS: Final[frozenset[str]] = frozenset({"suspect", "dead"})  # gossiped with the seq they were made on

HEARTBEAT_TIMER: Final = "heartbeat"
CHECK_TIMER: Final = "check"

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


# --- the core ----------------------------------------------------------------------------


@dataclass(slots=True)
class _Record:
    incarnation: int
    status: Status
    seq: int  # the freshest evidence of life at this incarnation: only grows
    last_heard: float
    since: float
    verdict: int = 0  # while suspect or dead: the seq the verdict was made on (what the digest carries)


class Membership:
    """The membership protocol core of one node: feed it inputs, perform its outputs."""

    def __init__(
        self,
        node: str,
        incarnation: int,
        seeds: Sequence[str],
        config: MembershipConfig | None = None,
        *,
        recall: bool = False,
    ) -> None:
        if incarnation < 0:
            raise ValueError(f"incarnation cannot be negative, got {incarnation}")
        self.node: Final = node
        self.config: Final = config if config is not None else MembershipConfig()
        self.seeds: Final[tuple[str, ...]] = tuple(dict.fromkeys(s for s in seeds if s != node))
        self._records: dict[str, _Record] = {node: _Record(incarnation, "alive", 0, 0.0, 0.0)}
        self._started = False
        self._left = False
        # A founder (no other seed) is a cluster by itself; anyone else waits to hear from a peer.
        self._joined = not self.seeds
        self._check_at: float | None = None
        # The greatest incarnation of an earlier life of this node that a peer spoke of (None:
        # nobody did). Such a life may have given promises this one cannot know. Peers tell it
        # in two ways, so that it cannot slip through: a digest entry about an older
        # incarnation of us, or ``Heartbeat.previous`` once they have replaced that record.
        self.previous_life: int | None = None
        self._born = incarnation  # this life's first incarnation (refutations raise it later)
        self._prior: dict[str, int] = {}  # per node, the incarnation its record had before a restart replaced it
        # Learning the view (see the module docstring): until then, no quorum.
        self._learned = False
        self._listen_until = 0.0  # set by start
        self._listening = True  # the listen window has not been seen to end yet (the "check" timer waits for it)
        self._recalled = not recall  # "The remembered view": no learning before the driver gave what the disk holds
        self._told: dict[str, dict[str, DigestEntry]] = {}  # until learned: per member heard, the present nodes its last digest named
        self._knowing: set[str] = set()  # until learned: the members heard whose last heartbeat said they learned the view
        self._rumours: dict[str, float] = {}  # nodes named in digests but never heard directly -> when the rumour expires
        self._doubts: list[Doubted] = []  # reported at the end of the input that found them
        self._heartbeat_due: float | None = None  # when the heartbeat timer was armed for (a late one: frozen)
        self._candidates: dict[str, float] = {}  # new lives heard directly, round trip not proven yet -> when forgotten
        # Per node, the (incarnation, seq) of the last heartbeat received from it, and until when it is kept
        # for a node that is not a member: what our heartbeats echo as ``Heartbeat.heard``.
        self._heard: dict[str, tuple[int, int, float]] = {}

    # --- queries -----------------------------------------------------------------------

    @property
    def incarnation(self) -> int:
        return self._records[self.node].incarnation

    @property
    def joined(self) -> bool:
        """True once this node has heard from another node (or needs nobody: no other seed)."""
        return self._joined

    @property
    def left(self) -> bool:
        return self._left

    @property
    def learned(self) -> bool:
        """True once this node has learned the view (see "Learning the view"); it stays so for this life."""
        return self._learned

    def remembered(self) -> tuple[tuple[str, int], ...]:
        """What a durable store keeps ("The remembered view"): once learned, every other member not removed, with its incarnation.

        Empty before the view is learned (a node still listening knows only whom it heard). It
        changes only when a member joins, leaves, is removed or starts a new incarnation, never
        with a status or a heartbeat: the driver writes it when it changes.
        """
        if not self._learned:
            return ()
        return tuple((node, r.incarnation) for node in sorted(self._records) if node != self.node and (r := self._records[node]).status in _PRESENT)

    def rumours(self) -> tuple[str, ...]:
        """Nodes named by a digest that this node has not heard directly (it probes them), sorted."""
        return tuple(sorted(self._rumours))

    def candidates(self) -> tuple[str, ...]:
        """Nodes heard directly in a life this node does not hold yet, whose round trip is not proven, sorted."""
        return tuple(sorted(self._candidates))

    def members(self) -> list[MemberView]:
        """Every member not removed (this node included), sorted by node id."""
        return [self._view(node) for node in sorted(self._records) if self._records[node].status != "removed"]

    def member(self, node: str) -> MemberView | None:
        """What this node remembers of ``node``, removed tombstones included; None if never known."""
        return self._view(node) if node in self._records else None

    def status(self, node: str) -> Status | None:
        record = self._records.get(node)
        return None if record is None else record.status

    def serving(self, node: str) -> bool:
        """Alive or suspect: may own keys (the ``alive`` predicate of ``Placement.owner``)."""
        record = self._records.get(node)
        return record is not None and record.status in _SERVING

    def ring_nodes(self) -> tuple[str, ...]:
        """The members that stay on the placement ring: alive, suspect and dead (until removed), sorted."""
        return tuple(node for node in sorted(self._records) if self._records[node].status in _PRESENT)

    def quorum_counts(self) -> tuple[int, int]:
        """``(alive, members)`` as this node sees them; members = alive + suspect + dead."""
        if self._left:
            return (0, sum(1 for r in self._records.values() if r.status in _PRESENT))
        alive = sum(1 for r in self._records.values() if r.status == "alive")
        members = sum(1 for r in self._records.values() if r.status in _PRESENT)
        return (alive, members)

    def has_quorum(self) -> bool:
        """Whether this node may own keys: it learned the view, and more than half of the members are alive."""
        return self._learned and not self._left and _has_quorum(*self.quorum_counts())

    def _view(self, node: str) -> MemberView:
        r = self._records[node]
        return MemberView(node, r.incarnation, r.status, r.seq, r.last_heard, r.since)

    # --- inputs ------------------------------------------------------------------------

    def start(self, now: float) -> list[Output]:
        """Say hello to the seeds and start the heartbeat."""
        if self._started:
            raise RuntimeError(f"membership of {self.node} already started")
        self._started = True
        me = self._records[self.node]
        me.last_heard = me.since = now
        me.seq = 1
        self._listen_until = now + self.config.listen_window
        events = [MemberChanged(self.node, me.incarnation, "alive")]
        sends = [Send(seed, self._heartbeat_for(seed)) for seed in self.seeds]
        out: list[Output] = [Report(e) for e in events]
        learned = self._learn(now, events)
        if learned is not None:  # a listen window of zero, no other seed: a founder at once
            out.append(Report(learned))
        out.extend(sends)
        self._heartbeat_due = now + self.config.heartbeat
        out.append(SetTimer(HEARTBEAT_TIMER, self._heartbeat_due))
        out.extend(self._arm_check())
        return out

    def recall(self, members: Sequence[tuple[str, int]], now: float) -> list[Output]:
        """What the node's disk remembers of the view of its previous life (see "The remembered view"); once, with ``recall=True``.

        Each ``(node, incarnation)`` not heard yet in this life is held dead at that incarnation on
        no evidence (verdict seq 0). Empty: the disk remembers nothing (none, a wiped one, or an
        unreadable one); learning may go on as without a disk.
        """
        if self._recalled:
            raise RuntimeError(f"membership of {self.node} recalled its view already (or was built without recall=True)")
        self._recalled = True
        events: list[MemberChanged] = []
        if self._started and not self._left:
            for node, incarnation in sorted(dict(members).items()):
                if node == self.node or node in self._records or incarnation < 0:
                    continue  # heard already in this life (or our own): what it said is fresher than the disk
                self._records[node] = _Record(incarnation, "dead", 0, now, now, 0)
                self._rumours.pop(node, None)
                events.append(MemberChanged(node, incarnation, "dead"))
        return self._finish(events, [], [], now)

    def timer(self, name: str, now: float) -> list[Output]:
        """A timer this core asked for fired."""
        if name not in (HEARTBEAT_TIMER, CHECK_TIMER):
            raise ValueError(f"membership has no timer {name!r}")
        if not self._started or self._left:
            return []
        events: list[MemberChanged] = []
        sends: list[Send] = []
        timers: list[Output] = []
        if name == HEARTBEAT_TIMER:
            late = now - self._heartbeat_due if self._heartbeat_due is not None else 0.0
            if late > self.config.suspect_after:
                self._doubts.append(Doubted(f"frozen: the heartbeat came due {late:.3f} s late"))
            self._records[self.node].seq += 1
            for node in [n for n, until in self._rumours.items() if until <= now]:
                del self._rumours[node]  # nobody named it for suspect_after + dead_after: forget it
            for node in [n for n, until in self._candidates.items() if until <= now]:
                del self._candidates[node]  # it never proved a round trip: forget it, as a rumour
            for node in [n for n, (_, _, until) in self._heard.items() if until <= now and not self._present(n)]:
                del self._heard[node]
            sends = self._broadcast()
            self._heartbeat_due = now + self.config.heartbeat
            timers.append(SetTimer(HEARTBEAT_TIMER, self._heartbeat_due))
        else:
            self._check_at = None
            self._check(now, events)
        return self._finish(events, sends, timers, now)

    def receive(self, src: str, frame: object, now: float) -> list[Output]:
        """A frame from node ``src`` arrived (frames whose sender field is not ``src`` are ignored)."""
        if not self._started or self._left or src == self.node:
            return []
        events: list[MemberChanged] = []
        sends: list[Send] = []
        if isinstance(frame, Heartbeat):
            if frame.node != src:
                return []
            before = self._records.get(src)
            unknown = before is None or before.status == "removed"
            self._heard[src] = (frame.incarnation, frame.seq, now + self._forget_after)
            fresh_life = before is None or frame.incarnation > before.incarnation
            if fresh_life and not self._proves(frame.heard):
                # A candidate: its frame counts for nothing (no record, digest, verdict or claim) until it proves
                # that it receives our frames. Ask for the proof: an address that does not answer never gives it.
                self._candidates[src] = now + self._forget_after
                if frame.answer:
                    return []  # a reply is never answered (no ping-pong); our next heartbeat to it asks again
                return [Send(src, self._heartbeat_for(src, probe=True))]
            self._candidates.pop(src, None)
            incarnation = self.incarnation
            self._saw_previous_life(frame.previous)
            self._merge((src, frame.incarnation, "alive", frame.seq), now, events, direct=True)
            probes: list[str] = []
            heard_fine = before is not None and before.status == "alive"  # until this frame
            for entry in frame.digest:
                self._merge(entry, now, events, probes=probes, claimant=src if heard_fine else None)
            if not self._learned:
                self._told[src] = {e[0]: e for e in frame.digest if e[2] in _PRESENT and e[0] != self.node}
                if frame.learned:
                    self._knowing.add(src)
                else:
                    self._knowing.discard(src)
            self._joined = True
            targets: list[str] = []
            if self.incarnation != incarnation:  # refuted: tell everyone now, not in a period
                targets = self._targets()
                sends = self._broadcast()
            after = self._records.get(src)
            asked = frame.probe or unknown or after is None or after.status != "alive"
            if not frame.answer and src not in targets and asked:
                sends.append(Send(src, self._heartbeat_for(src, answer=True)))
            sends.extend(Send(node, self._heartbeat_for(node)) for node in probes if node not in targets)
        elif isinstance(frame, Leaving):
            if frame.node != src or (not self._present(src) and self.status(src) != "left"):
                return []  # only a member leaves (a stranger's Leaving would mint a record it never earned)
            self._merge((src, frame.incarnation, "left", frame.seq), now, events, direct=True)
        else:
            return []
        return self._finish(events, sends, [], now)

    def leave(self, now: float) -> list[Output]:
        """Leave in order: tell every member, stop heartbeating; later inputs are ignored."""
        if not self._started or self._left:
            return []
        me = self._records[self.node]
        targets = self._targets()
        self._left = True
        me.status = "left"
        me.since = now
        frame = Leaving(self.node, me.incarnation, me.seq)
        out: list[Output] = [Report(MemberChanged(self.node, me.incarnation, "left"))]
        out.extend(Send(to, frame) for to in targets)
        out.append(CancelTimer(HEARTBEAT_TIMER))
        if self._check_at is not None:
            out.append(CancelTimer(CHECK_TIMER))
            self._check_at = None
        return out

    # --- internals ---------------------------------------------------------------------

    def _finish(self, events: list[MemberChanged], sends: list[Send], timers: list[Output], now: float) -> list[Output]:
        """Outputs in a fixed order: reports (sorted by node, stable; then ``ViewLearned`` if it came), sends, timers."""
        learned = self._learn(now, events)
        out: list[Output] = [Report(e) for e in sorted(events, key=lambda e: e.node)]
        if learned is not None:
            out.append(Report(learned))
        if self._doubts:
            out.extend(Report(d) for d in self._doubts)
            self._doubts = []
        out.extend(sends)
        out.extend(timers)
        out.extend(self._arm_check())
        return out

    def _set(self, node: str, record: _Record, status: Status, now: float, events: list[MemberChanged]) -> None:
        if record.status != status:
            record.status = status
            record.since = now
            if status in _VERDICTS:
                record.verdict = record.seq  # made now, on the freshest evidence we have
            events.append(MemberChanged(node, record.incarnation, status))

    def _merge(
        self,
        entry: DigestEntry,
        now: float,
        events: list[MemberChanged],
        *,
        direct: bool = False,
        probes: list[str] | None = None,
        claimant: str | None = None,
    ) -> None:
        """Fold one ``(node, incarnation, status, seq)`` claim into the view (the merge rule).

        ``direct``: the claim comes from ``node`` itself. Otherwise a node with no record (or
        a removed one) does not enter the view: it becomes a rumour, added to ``probes`` when new.
        """
        node, incarnation, raw_status, seq = entry
        if raw_status not in _RANK:
            return  # a status from a newer protocol version: not ours to guess
        status = cast(Status, raw_status)
        if node == self.node:
            self._consider_claim(incarnation, status, seq, now, events, claimant)
            return
        record = self._records.get(node)
        if record is None or (record.status == "removed" and incarnation > record.incarnation):
            if not direct:  # a third party's word: probe it, do not count it
                if status in _PRESENT:
                    if node not in self._rumours and probes is not None:
                        probes.append(node)
                    self._rumours[node] = now + self.config.suspect_after + self.config.dead_after
                return
            self._rumours.pop(node, None)
            if status != "removed":
                if record is not None:
                    self._prior[node] = record.incarnation
                self._records[node] = _Record(incarnation, status, seq, now, now, seq)
                events.append(MemberChanged(node, incarnation, status))
            return
        if record.status == "removed" or incarnation < record.incarnation:
            return
        if not direct and status in _VERDICTS and seq == 0:
            return  # a verdict on no evidence (a remembered member): nothing for anyone who heard it, or knows a life
        if incarnation > record.incarnation:
            if status == "removed":
                return
            self._prior[node] = record.incarnation
            record.incarnation, record.status = incarnation, status
            record.seq, record.last_heard, record.since, record.verdict = seq, now, now, seq
            events.append(MemberChanged(node, incarnation, status))
            return
        if record.status == "dead" and record.verdict == 0 and status == "alive" and seq > 0:
            record.seq, record.last_heard = max(seq, record.seq), now  # remembered, now heard of in this life: alive
            self._set(node, record, "alive", now, events)
            return
        # Same incarnation: the status only moves forward; a verdict needs evidence as fresh as ours.
        adopt = _RANK[status] > _RANK[record.status] and status != "removed" and (status == "left" or seq >= record.seq)
        if seq > record.seq:  # evidence, whatever the status; a verdict we hold keeps its own seq
            record.seq = seq
            record.last_heard = now
        if adopt:
            self._set(node, record, status, now, events)  # an adopted verdict rests on the judge's seq

    def _consider_claim(
        self, incarnation: int, status: Status, seq: int, now: float, events: list[MemberChanged], claimant: str | None = None
    ) -> None:
        """Someone says something about us: refute anything we did not say ourselves.

        ``claimant``: the member that said it, when this node heard it fine until now (see "Doubt")."""
        me = self._records[self.node]
        if self._left or (status in _VERDICTS and seq == 0 and incarnation <= me.incarnation):
            # A verdict on no evidence (a restarted node's remembered member list) about this life: nothing to refute.
            # About a greater incarnation it is a previous life's record (born under a wall clock stepped back since):
            # refuted below, or its holder ignores every heartbeat of this lower life and never holds it alive.
            return
        self._saw_previous_life(incarnation)
        stale = incarnation < me.incarnation or (incarnation == me.incarnation and seq <= me.seq and status == "alive")
        if stale:
            return
        me.incarnation = max(incarnation, me.incarnation) + 1
        me.since = now
        events.append(MemberChanged(self.node, me.incarnation, "alive"))
        if claimant is not None and status in ("suspect", "dead", "removed"):
            self._doubts.append(Doubted(f"{claimant}, heard fine until now, held it {status}"))

    def _saw_previous_life(self, incarnation: int | None) -> None:
        """``incarnation`` is ours but was not minted by this life (below its first one, or above its current one:
        a previous life's, under a wall clock that stepped back since): that life existed."""
        if incarnation is None or self._born <= incarnation <= self._records[self.node].incarnation:
            return
        if self.previous_life is None or incarnation > self.previous_life:
            self.previous_life = incarnation

    def _learn(self, now: float, events: list[MemberChanged]) -> ViewLearned | None:
        """Learn the view if every condition of "Learning the view" holds now; the event to report, once.

        On learning, the members that more than half of the informants (the members held
        alive) name, and that this node has not heard, are taken into the view as told.
        """
        if self._learned or not self._started or self._left or now < self._listen_until or not self._recalled:
            return None
        self._listening = False
        if not self._joined:
            return None
        records = self._records
        alive = {node for node, r in records.items() if r.status == "alive"}
        informants = sorted(alive - {self.node})
        knowing = [member for member in informants if member in self._knowing]
        if self.seeds and not knowing and not all(seed in alive for seed in self.seeds):
            return None  # (2): nobody heard remembers the cluster, and the seeds have not all been heard to found it
        # The remembered view: members only the disk spoke of, not heard of in this life. Where members that know
        # the cluster are heard, their view replaces the disk's (a member they do not name was removed meanwhile).
        memory = {n for n, r in records.items() if knowing and n != self.node and r.status == "dead" and r.verdict == 0}
        union = {node for node, r in records.items() if r.status in _PRESENT and node not in memory}
        named: dict[str, list[tuple[str, DigestEntry]]] = {}
        for member in informants:
            for node, entry in self._told.get(member, {}).items():
                known = records.get(node)
                if known is None or known.status == "removed" or node in memory:
                    named.setdefault(node, []).append((member, entry))
        voters = knowing or informants  # (5): the silence of one that learned nothing yet is no evidence
        vouched = [node for node in sorted(named) if 2 * sum(1 for member, _ in named[node] if member in voters) > len(voters)]
        for node, told in named.items():
            if node not in vouched and any(entry[2] == "alive" for _, entry in told):
                return None  # a live member holds alive a node we have not heard, on its word alone: wait for its answer
            union.add(node)
        if not _has_quorum(len(alive), len(union)):
            return None
        self._learned = True
        self._told.clear()
        self._knowing.clear()
        for node in sorted(memory):  # the disk's word gives way to the members that know the cluster
            gone = records.pop(node)
            if node not in vouched:
                events.append(MemberChanged(node, gone.incarnation, "removed"))
        for node in vouched:  # the cluster as last known, on the word of a majority of those we hear that know it
            for member, entry in named[node]:
                if member in voters:
                    self._merge(entry, now, events, direct=True)
        return ViewLearned(len(alive), len(union))

    def _check(self, now: float, events: list[MemberChanged]) -> None:
        """Apply every failure-detection deadline that has passed."""
        cfg = self.config
        for node in sorted(self._records):
            if node == self.node:
                continue
            record = self._records[node]
            if record.status == "alive" and now >= record.last_heard + cfg.suspect_after:
                self._set(node, record, "suspect", now, events)
            elif (
                record.status == "suspect"
                and now >= record.since + cfg.dead_after
                and now >= record.last_heard + cfg.suspect_after
            ):
                self._set(node, record, "dead", now, events)
        quorum = self.has_quorum()
        for node in sorted(self._records):
            record = self._records[node]
            if node == self.node or now < record.since + cfg.remove_after:
                continue
            if record.status == "left" or (record.status == "dead" and quorum):
                self._set(node, record, "removed", now, events)

    def _deadline(self) -> float | None:
        """The earliest time at which ``_check`` would change something, or None."""
        cfg = self.config
        quorum = self.has_quorum()
        best: float | None = None
        if self._listening and not self._learned and self._started:
            best = self._listen_until  # the window ends: try to learn (afterwards frames and verdicts retry)
        for node, record in self._records.items():  # min() of floats: order does not leak
            if node == self.node:
                continue
            if record.status == "alive":
                at = record.last_heard + cfg.suspect_after
            elif record.status == "suspect":
                at = max(record.since + cfg.dead_after, record.last_heard + cfg.suspect_after)
            elif record.status == "left" or (record.status == "dead" and quorum):
                at = record.since + cfg.remove_after
            else:
                continue
            if best is None or at < best:
                best = at
        return best

    def _arm_check(self) -> list[Output]:
        """Arm "check" only when the earliest deadline comes before the armed one (it re-arms itself)."""
        if self._left:
            return []
        at = self._deadline()
        if at is None:
            if self._check_at is None:
                return []
            self._check_at = None
            return [CancelTimer(CHECK_TIMER)]
        if self._check_at is not None and self._check_at <= at:
            return []
        self._check_at = at
        return [SetTimer(CHECK_TIMER, at)]

    def _targets(self) -> list[str]:
        """Who gets a heartbeat: members not given up on, plus seeds we do not see serving."""
        targets = {node for node, r in self._records.items() if node != self.node and r.status in _PRESENT}
        targets.update(seed for seed in self.seeds if not self.serving(seed))
        targets.update(self._rumours)  # probed until they answer or nobody names them any more
        return sorted(targets)

    def _digest(self) -> tuple[DigestEntry, ...]:
        return tuple(
            (node, r.incarnation, r.status, r.verdict if r.status in _VERDICTS else r.seq)
            for node in sorted(self._records)
            if (r := self._records[node]).status != "removed"
        )

    @property
    def _forget_after(self) -> float:
        """How long a candidate (and the echo kept for a non-member) lives: as long as a rumour."""
        return self.config.suspect_after + self.config.dead_after

    def _present(self, node: str) -> bool:
        record = self._records.get(node)
        return record is not None and record.status in _PRESENT

    def _proves(self, heard: tuple[int, int] | None) -> bool:
        """Whether ``heard`` echoes a heartbeat of this life: an incarnation it minted, a seq it has sent."""
        me = self._records[self.node]
        return heard is not None and self._born <= heard[0] <= me.incarnation and 1 <= heard[1] <= me.seq

    def _heartbeat_for(
        self, to: str, *, answer: bool = False, probe: bool = False, digest: tuple[DigestEntry, ...] | None = None
    ) -> Heartbeat:
        """A heartbeat for ``to``, with the echo of its last heartbeat; a removed node also gets its own tombstone,
        so that it can refute it."""
        me = self._records[self.node]
        entries = self._digest() if digest is None else digest
        tomb = self._records.get(to)
        if tomb is not None and tomb.status == "removed":
            entries = (*entries, (to, tomb.incarnation, "removed", tomb.seq))
        echo = self._heard.get(to)
        heard = None if echo is None else (echo[0], echo[1])
        return Heartbeat(self.node, me.incarnation, me.seq, entries, answer, self._prior.get(to), heard, probe, self._learned)

    def _broadcast(self) -> list[Send]:
        digest = self._digest()
        return [Send(to, self._heartbeat_for(to, digest=digest)) for to in self._targets()]
