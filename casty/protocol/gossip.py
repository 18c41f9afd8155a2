"""``Membership``: one node's membership state machine (heartbeat gossip, failure detection, learning the view).

A sans-I/O core. Its rules ("Heard directly", "A new member proves a round trip", "Quorum",
"Learning the view" (1)-(5), "The remembered view", "Doubt", ...) are written out, named,
in ``casty.protocol.membership``, with the frames, events and timing it uses; this module is
only the state machine that follows them, and cites them by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, cast

from .membership import (
    STATUSES,
    DigestEntry,
    Doubted,
    Heartbeat,
    Leaving,
    MemberChanged,
    MembershipConfig,
    MemberView,
    Status,
    ViewLearned,
)
from .placement import has_quorum as _has_quorum
from .sansio import CancelTimer, Output, Report, Send, SetTimer

__all__ = ["Membership", "HEARTBEAT_TIMER", "CHECK_TIMER"]

_RANK: Final[dict[str, int]] = {status: rank for rank, status in enumerate(STATUSES)}
_PRESENT: Final[frozenset[str]] = frozenset({"alive", "suspect", "dead"})  # still members (quorum, ring)
_SERVING: Final[frozenset[str]] = frozenset({"alive", "suspect"})  # may own keys
_VERDICTS: Final[frozenset[str]] = frozenset({"suspect", "dead"})  # gossiped with the seq they were made on

HEARTBEAT_TIMER: Final = "heartbeat"
CHECK_TIMER: Final = "check"


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
