"""Repeated and missed occurrences of a schedule, each explained by a cause near it (a crash, a pause, a skewed clock)."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..ledger import ledger, misses
from ..trace import Row, Trace
from .base import CheckFailed
from .schedules import schedule_occurrences

if TYPE_CHECKING:
    from ..world import World


NEAR_NS = 2_000_000_000
"""How far before the first of the two rows bounding a repeat or a miss a cause still counts as "near it" (2 s)."""

OFFSET_TOLERANCE_US = 1_000
"""Two nodes' clocks whose offsets (wall minus true time) differ by more than this (1 ms) are skewed."""

EXPLAINING_FAULTS = ("fault.crash", "fault.restart", "node.stopped", "fault.pause", "fault.resume")


@dataclass(frozen=True)
class Occurrence:
    """A repeated or missed occurrence of a persisted schedule, and what in the trace explains it.

    ``kind`` is ``"repeat"`` (``due_us`` was delivered a second time, by the row ``at``) or
    ``"miss"`` (``due_us`` is on the schedule's grid and was never delivered; ``at`` is the
    firing that moved the schedule past it). ``before`` is the row that bounds the window on
    the other side: the earlier firing of the same due (repeat), or the schedule's previous
    firing (or its arming) before ``at`` (miss). ``because`` lists the explaining rows as
    short texts ("epoch.acquired on n1 at t=9.811s", ...); empty means unexplained. ``why`` is
    the ledger's word on the occurrence (``sim.ledger.Entry.why``: "lost in flight: ...", "skipped
    by the catch-up of ...").
    """

    kind: str
    actor: str
    key: str
    name: str
    due_us: int
    at: Row
    before: Row | None
    because: tuple[str, ...]
    why: str = ""

    def describe(self) -> str:
        what = "delivered again" if self.kind == "repeat" else "never delivered"
        return (
            f"{self.actor.split(':')[-1]}[{self.key}] schedule {self.name!r}: due {self.due_us} {what} "
            f"(at t={self.at.t:.3f}s on {self.at.node})"
        )


def _offset_us(row: Row) -> int | None:
    """The row's node clock offset up to a constant shared by all nodes (wall minus true time, in µs)."""
    return None if row.wall_us is None else row.wall_us - row.t_ns // 1000


def _tenure_start(acquired: list[Row], row: Row) -> int:
    """The ``seq`` of the last ``epoch.acquired`` of the key on ``row``'s node before ``row`` (-1: none)."""
    return max((r.seq for r in acquired if r.node == row.node and r.seq < row.seq), default=-1)


def _explanations(actor: str, key: str, first: Row | None, second: Row, causes: list[Row]) -> tuple[str, ...]:
    """Why the key's schedule could repeat or skip between ``first`` and ``second``: rows from ``causes``.

    - an ownership change: an ``epoch.acquired`` of the key after the earlier of the two firing
      nodes' own acquisitions (the tenure it fired under) and up to ``second``: the key changed
      hands, or two owners coexisted (a stale one in a minority goes on firing until fenced);
    - a crash (restart, orderly stop) or a stop-the-world pause (pause, resume) of either
      firing node, near them;
    - a clock step or drift change on either firing node near them, or the two firing nodes'
      clocks being skewed (their offsets differ by more than ``OFFSET_TOLERANCE_US``).

    "Near them" is from ``NEAR_NS`` before ``first`` to ``second``.
    """
    acquired = [r for r in causes if r.kind == "epoch.acquired" and r.get("actor") == actor and r.get("key") == key]
    tenures = [_tenure_start(acquired, r) for r in (first, second) if r is not None]
    since = min((t for t in tenures if t >= 0), default=-1)  # a node with no acquisition (no cluster) has no tenure
    found = [f"epoch.acquired on {r.node} at t={r.t:.3f}s" for r in acquired if since < r.seq <= second.seq]
    start = (first.t_ns if first is not None else second.t_ns) - NEAR_NS
    nodes = {second.node} | ({first.node} if first is not None else set())
    for row in causes:
        if row.kind != "epoch.acquired" and row.node in nodes and start <= row.t_ns and row.seq <= second.seq:
            found.append(f"{row.kind} of {row.node} at t={row.t:.3f}s")
    if first is not None and first.node != second.node:
        a, b = _offset_us(first), _offset_us(second)
        if a is not None and b is not None and abs(a - b) > OFFSET_TOLERANCE_US:
            found.append(f"clock of {second.node} is {(b - a) / 1e6:+.3f}s off {first.node}'s")
    return tuple(found)


def explain_occurrences(trace: Trace) -> list[Occurrence]:
    """Every repeated and every missed occurrence of every persisted schedule in ``trace``, with its explanations.

    Which occurrences those are is the ledger's word (``sim.ledger.misses`` of the entries whose
    source is ``"schedule"``); this adds what in the trace explains each, and the two rows that
    bound the window a cause is looked for in:

    - a **repeat**: each firing of a due after its first (``at``), from that first (``before``);
    - a **miss lost in flight**: fired, but its message died before its handler finished: the
      window runs from the firing (``before``) to the ``message.dropped`` row that lost it
      (``at``: ``Attempt.lost_at``), since the crash or the end that lost it comes after the
      firing. Besides the causes of a repeat, a cut of the firing node's links in effect in the
      window (``fault.partition`` not undone by a reconnect or heal before it starts) and a
      failure of the key's body on that node in it (``activation.failed``: the handler raised
      on that message) explain it, and so does the firing node doubting its view in it
      (``member.doubted``: the step-down rule ends every run it holds) or the key's run there ending by a change of
      owner (``activation.ended`` with ``handoff``; a run ended ``lost`` needs a cause of its own), or the newer
      owner epoch the drop names being acquired for the key by its node (its row may follow the drop), or that node's
      acquisition of the named round failing and its retries acquiring a later round (``_retried``), or the node a
      drop's "the key moved to nX" names acquiring the key (``_moved_to``); and when the drop says a quorum was missing (an owner that
      lost its quorum ends its run, fenced; a write that got no quorum fails the handler), so
      do the partitions of any member in effect in the window, the members down or paused
      in it (a crash, stop or pause not undone before the window starts) and frames to or from the
      firing node lost to a loss fault in it;
    - any other **miss** (skipped by a catch-up, passed over by a re-arming, never fired): a
      grid due no firing delivered, its window ending at the first firing whose ``next_us``
      passed it (``at``) and starting at the schedule's row before that (``before``).

    Dues beyond the last ``next_us`` are not counted: the run may simply have ended before them.
    """
    causes = trace.of("epoch.acquired", "clock.step", "clock.drift", *EXPLAINING_FAULTS)
    cuts = trace.of("fault.partition", "fault.reconnect", "fault.heal")
    failures = trace.of("activation.failed")
    doubts = trace.of("member.doubted")
    handoffs = [r for r in trace.of("activation.ended") if r.get("reason") == "handoff"]
    outs = trace.of("fault.crash", "node.stopped", "fault.pause", "fault.restart", "node.started", "fault.resume")
    losses = [r for r in trace.of("net.dropped") if r.get("reason") == "loss"]
    schedules = schedule_occurrences(trace)
    grid: dict[tuple[str, str, str, int], Occurrence] = {}
    for (actor, key, name), rows in schedules.items():
        for segment in _grid_segments(rows):
            for occurrence in _misses(actor, key, name, segment, causes):
                grid.setdefault((actor, key, name, occurrence.due_us), occurrence)
    out: list[Occurrence] = []
    for entry in misses(ledger(trace)):
        if entry.source != "schedule" or entry.due_us is None:
            continue
        actor, key, name, due = entry.actor, entry.key, entry.name, entry.due_us
        if entry.status == "repeated":
            first = entry.attempts[0].row
            for attempt in entry.attempts[1:]:
                out.append(Occurrence("repeat", actor, key, name, due, attempt.row, first, _explanations(actor, key, first, attempt.row, causes), entry.why))
            continue
        lost = next((a for a in entry.attempts if a.lost_at is not None), None)
        if lost is not None and lost.lost_at is not None:
            fired, dropped = lost.row, lost.lost_at
            because = _explanations(actor, key, fired, dropped, causes) + _failures(actor, key, fired, dropped, failures)
            because += _doubts(fired, dropped, doubts) + _moved(actor, key, fired, dropped, handoffs)
            because += _superseded(actor, key, fired, dropped, causes) + _retried(actor, key, fired, dropped, causes, failures)
            because += _moved_to(actor, key, fired, dropped, causes)
            quorum = "quorum" in str(dropped.get("reason"))
            because += _cuts(fired, dropped, cuts, None if quorum else {fired.node})
            if quorum:
                because += _members_out(fired, dropped, outs) + _frames_lost(fired, dropped, losses)
            out.append(Occurrence("miss", actor, key, name, due, dropped, fired, because, entry.why))
            continue
        known = grid.get((actor, key, name, due))
        if known is None:
            known = _passed_over(actor, key, name, due, schedules.get((actor, key, name), []), causes)
        out.append(dataclasses.replace(known, why=entry.why))
    out.sort(key=lambda o: (o.at.seq, o.due_us))
    return out


def _cuts(fired: Row, dropped: Row, cuts: list[Row], nodes: set[str] | None) -> tuple[str, ...]:
    """The partitions of the links of ``nodes`` (None: of any node) in effect between ``NEAR_NS`` before ``fired`` and ``dropped``."""
    start = fired.t_ns - NEAR_NS
    found = []
    for row in cuts:
        if row.kind != "fault.partition" or row.seq > dropped.seq:
            continue
        sides = {str(n) for n in (*row.get("from", ()), *row.get("to", ()))}
        if nodes is not None and not sides & nodes:
            continue
        undone = next(
            (u for u in cuts if u.seq > row.seq and (u.kind == "fault.heal" or (u.kind == "fault.reconnect" and u.get("from") == row.get("from") and u.get("to") == row.get("to")))),
            None,
        )
        if undone is not None and undone.t_ns < start:
            continue
        text = f"fault.partition of {', '.join(row.get('from', ()))} from {', '.join(row.get('to', ()))} at t={row.t:.3f}s"
        if text not in found:
            found.append(text)
    return tuple(found)


def _failures(actor: str, key: str, fired: Row, dropped: Row, failures: list[Row]) -> tuple[str, ...]:
    """The key's body failing on the firing node at the drop's instant, after the firing (its handler raised on that message)."""
    return tuple(
        f"activation.failed of {actor.split(':')[-1]}[{key}] on {r.node} at t={r.t:.3f}s: {r.get('error')}"
        for r in failures
        if r.node == fired.node and r.get("actor") == actor and r.get("key") == key and fired.seq < r.seq and r.t_ns == dropped.t_ns
    )  # the failure is recorded right after the drop of its message, at the same instant


def _doubts(fired: Row, dropped: Row, doubts: list[Row]) -> tuple[str, ...]:
    """The firing node doubting its own view between the firing and the drop: by the step-down rule it ends every run it
    holds (``lost``), and the message being handled dies with the run."""
    return tuple(
        f"member.doubted on {r.node} at t={r.t:.3f}s: {r.get('reason')}"
        for r in doubts
        if r.node == fired.node and fired.seq < r.seq and r.t_ns <= dropped.t_ns
    )


def _moved(actor: str, key: str, fired: Row, dropped: Row, handoffs: list[Row]) -> tuple[str, ...]:
    """The key's run on the firing node handed off (a member came back and the key moved to it: a change of owner) between
    the firing and the drop: the message it was handling dies with it. A run ended ``lost`` is no explanation by itself
    (what lost it must be found: a doubt, a cut, members out)."""
    return tuple(
        f"activation.ended ({r.get('reason')}) of {actor.split(':')[-1]}[{key}] on {r.node} at t={r.t:.3f}s"
        for r in handoffs
        if r.node == fired.node and r.get("actor") == actor and r.get("key") == key and fired.seq < r.seq and r.t_ns <= dropped.t_ns
    )


SUPERSEDED = re.compile(r"owner epoch lost to \((\d+), '([^']+)'\)")
"""How a drop names the newer epoch that fenced the run (``Activation.lose_ownership``): its round and node."""


def _superseded(actor: str, key: str, fired: Row, dropped: Row, causes: list[Row]) -> tuple[str, ...]:
    """The newer owner epoch the drop names (``owner epoch lost to (round, node)``), acquired for the key by that node after
    the firing: an ownership change. Its ``epoch.acquired`` row may come after the drop: the new owner's Prepare fenced
    the run when the replicas promised it, and the row is recorded only once its write-back is confirmed, a round trip
    later. It counts up to ``NEAR_NS`` after the drop; an epoch the drop names that no one acquired explains nothing."""
    named = SUPERSEDED.search(str(dropped.get("reason")))
    if named is None:
        return ()
    round_, epoch_node = int(named.group(1)), named.group(2)
    return tuple(
        f"epoch.acquired ({round_}, {epoch_node}) of {actor.split(':')[-1]}[{key}] on {r.node} at t={r.t:.3f}s: the newer owner the drop names"
        for r in causes
        if r.kind == "epoch.acquired"
        and r.get("actor") == actor
        and r.get("key") == key
        and r.get("epoch_round") == round_
        and r.get("epoch_node") == epoch_node
        and r.seq > fired.seq
        and r.t_ns <= dropped.t_ns + NEAR_NS
    )


def _retried(actor: str, key: str, fired: Row, dropped: Row, causes: list[Row], failures: list[Row]) -> tuple[str, ...]:
    """The newer epoch the drop names was never acquired, but its node's acquisition of the key failed after the drop
    (``activation.failed`` "not acquired": the named round's Prepare fenced this run when the replicas promised it, then
    got no quorum) and its retries, each within ``NEAR_NS`` of the failure before, acquired a later round of that same
    node epoch (swarm seed 723: n3 resumes from a pause, its round 3 fences n4 and fails at 12.039 s, round 4 fails at
    13.043 s, round 5 is acquired at 13.145 s). A later round with no failed acquisition of the named one explains nothing."""
    named = SUPERSEDED.search(str(dropped.get("reason")))
    if named is None:
        return ()
    round_, epoch_node = int(named.group(1)), named.group(2)
    node = epoch_node.split("#")[0]
    tries = [
        r
        for r in failures
        if r.node == node and r.get("actor") == actor and r.get("key") == key and r.seq > dropped.seq and "not acquired" in str(r.get("error"))
    ]
    horizon, failed = dropped.t_ns + NEAR_NS, []
    for r in tries:  # the failed attempts chained from the drop, each within NEAR_NS of the one before
        if r.t_ns > horizon:
            break
        failed.append(r)
        horizon = r.t_ns + NEAR_NS
    if not failed:
        return ()
    got = next(
        (
            r
            for r in causes
            if r.kind == "epoch.acquired"
            and r.get("actor") == actor
            and r.get("key") == key
            and r.node == node
            and r.get("epoch_node") == epoch_node
            and int(r.get("epoch_round")) > round_
            and r.seq > failed[0].seq
            and r.t_ns <= failed[-1].t_ns + NEAR_NS
        ),
        None,
    )
    if got is None:
        return ()
    at = ", ".join(f"t={r.t:.3f}s" for r in failed)
    return (
        f"epoch.acquired ({got.get('epoch_round')}, {epoch_node}) of {actor.split(':')[-1]}[{key}] on {node} at t={got.t:.3f}s "
        f"after its failed acquisitions ({at}): the node of the newer epoch ({round_}, {epoch_node}) the drop names",
    )


MOVED = re.compile(r"the key moved to ([A-Za-z0-9_.-]+)")
"""How a failed handler's drop names the node the key moved to (``ClusterRuntime``'s handoff stop: "the key moved to nX")."""


def _moved_to(actor: str, key: str, fired: Row, dropped: Row, causes: list[Row]) -> tuple[str, ...]:
    """The node the drop says the key moved to acquiring the key after the firing, up to ``NEAR_NS`` after the drop: a
    change of owner (swarm seeds 524, 1108, 1210: the new owner acquires 8 ms to 1.98 s after the drop, once its
    membership settles). A move to a node that does not acquire the key in time explains nothing."""
    named = MOVED.search(str(dropped.get("reason")))
    if named is None:
        return ()
    node = named.group(1)
    got = next(
        (
            r
            for r in causes
            if r.kind == "epoch.acquired" and r.get("actor") == actor and r.get("key") == key and r.node == node and r.seq > fired.seq and r.t_ns <= dropped.t_ns + NEAR_NS
        ),
        None,
    )  # the first acquisition there is the move; later ones are that owner's own history
    if got is None:
        return ()
    return (f"the key moved to {node}: epoch.acquired ({got.get('epoch_round')}, {got.get('epoch_node')}) of {actor.split(':')[-1]}[{key}] on {node} at t={got.t:.3f}s",)


def _frames_lost(fired: Row, dropped: Row, losses: list[Row]) -> tuple[str, ...]:
    """For a run ended or a write failed for want of a quorum: frames to or from the firing node lost to a loss fault
    (``net.dropped`` with reason ``loss``) between ``NEAR_NS`` before ``fired`` and ``dropped``. Lost heartbeats make it
    suspect its peers (its view loses its majority: the step-down rule), lost writes or acks leave a write short."""
    start = fired.t_ns - NEAR_NS
    lost = [r for r in losses if (r.node == fired.node or r.get("dst") == fired.node) and start <= r.t_ns and r.seq <= dropped.seq]
    if not lost:
        return ()
    return (f"{len(lost)} frames to or from {fired.node} lost (net.dropped loss) from t={lost[0].t:.3f}s to t={lost[-1].t:.3f}s",)


def _members_out(fired: Row, dropped: Row, outs: list[Row]) -> tuple[str, ...]:
    """For a run ended or a write failed for want of a quorum: the members down (crashed, stopped) or paused at some
    point between ``NEAR_NS`` before ``fired`` and ``dropped``, each by the row that took it out."""
    start = fired.t_ns - NEAR_NS
    back = {"fault.crash": ("fault.restart", "node.started"), "node.stopped": ("fault.restart", "node.started"), "fault.pause": ("fault.resume",)}
    found = []
    for row in outs:
        if row.kind not in back or row.seq > dropped.seq:
            continue
        returned = next((r for r in outs if r.seq > row.seq and r.node == row.node and r.kind in back[row.kind]), None)
        if returned is not None and returned.t_ns < start:
            continue
        found.append(f"{row.kind} of {row.node} at t={row.t:.3f}s")
    return tuple(found)


def _passed_over(actor: str, key: str, name: str, due: int, rows: list[Row], causes: list[Row]) -> Occurrence:
    """A grid miss the segment walk did not bound: the first firing of an earlier due whose ``next_us`` passed it."""
    fired = [r for r in rows if r.kind == "schedule.fired"]
    passed = next((r for r in fired if int(r.get("due_us")) < due and r.get("next_us") is not None and int(r.get("next_us")) > due), fired[-1] if fired else rows[-1])
    previous = next((r for r in reversed(rows) if r.seq < passed.seq and r.kind in ("schedule.fired", "schedule.armed")), None)
    return Occurrence("miss", actor, key, name, due, passed, previous, _explanations(actor, key, previous, passed, causes))


def _grid_segments(rows: list[Row]) -> list[tuple[int, int, list[Row]]]:
    """Split a schedule's rows into (anchor_us, every_us, rows) runs that share one interval grid."""
    segments: list[tuple[int, int, list[Row]]] = []
    current: tuple[int, int, list[Row]] | None = None
    for row in rows:
        if row.kind == "schedule.cancelled":
            current = None
            continue
        if row.kind == "schedule.armed":
            every = row.get("every_us")
            if not every:
                current = None
                continue
            due, every = int(row.get("due_us")), int(every)
            if current is None or current[1] != every or (due - current[0]) % every:
                current = (due, every, [row])
                segments.append(current)
                continue
        if current is not None:
            current[2].append(row)
    return segments


def _misses(actor: str, key: str, name: str, segment: tuple[int, int, list[Row]], causes: list[Row]) -> list[Occurrence]:
    """The grid dues of one segment that no firing delivered, each with the firing that passed it and its explanations."""
    anchor, every, rows = segment
    fired = [r for r in rows if r.kind == "schedule.fired" and (int(r.get("due_us")) - anchor) % every == 0]
    if not fired:
        return []
    delivered = {int(r.get("due_us")) for r in fired}
    passed_by = max((int(r.get("next_us")) for r in fired if r.get("next_us") is not None), default=0)
    out = []
    for due in range(min(delivered), passed_by, every):
        if due in delivered:
            continue
        passed = next((r for r in fired if r.get("next_us") is not None and int(r.get("next_us")) > due), None)
        if passed is None:
            continue  # cannot happen: some firing's next_us is passed_by, beyond due
        previous = next((r for r in reversed(rows) if r.seq < passed.seq and r.kind in ("schedule.fired", "schedule.armed")), None)
        out.append(Occurrence("miss", actor, key, name, due, passed, previous, _explanations(actor, key, previous, passed, causes)))
    return out


def repeats_and_misses_explained(world: World) -> None:
    """Every repeated or missed occurrence of a persisted schedule is explained by an ownership change, a fault or the clock.

    ``explain_occurrences`` says what counts as a repeat or a miss, ``_explanations`` what
    explains one: an ``epoch.acquired`` of the key during the tenure the firing nodes fired
    under; a crash, restart, stop or pause of a firing node near it; a clock step or drift
    change of a firing node near it, or a clock offset between the two firing nodes. Anything
    else would be the runtime repeating or dropping occurrences on its own.

    Pauses are not in the issue's list (ownership change, crash, clock step); they are here
    because a paused node is stopped the way a crashed one is, only shorter: when it resumes its
    overdue timer fires late and catches up, so ``cluster-random`` skips dues after a pause of
    the owner too short to move the key.
    """
    for occurrence in explain_occurrences(world.trace):
        if not occurrence.because:
            bounds = f" (previous row at t={occurrence.before.t:.3f}s on {occurrence.before.node})" if occurrence.before is not None else ""
            raise CheckFailed(
                "repeats_and_misses_explained",
                f"{occurrence.describe()}{bounds}: no ownership change, crash, pause, clock step or clock offset of the firing nodes near it",
            )
