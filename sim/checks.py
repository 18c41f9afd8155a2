"""Checks over traces: what must hold in every run, each failure explained.

A check reads a finished world (its trace and results) and raises ``CheckFailed`` with a
message a student can act on: which row, which rule, what was expected. Checks never look
inside the runtime: if a property cannot be seen in the trace, the trace is missing a row.
"""

from __future__ import annotations

import functools
import weakref
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from casty.protocol.placement import Ring

from .effects import at_least_once as at_least_once, at_most_once as at_most_once, effects as effects, exactly_once as exactly_once  # the effects ledger's checks (sim/effects.py)
from .trace import Row, Trace

if TYPE_CHECKING:
    from .world import World

__all__ = [
    "Check",
    "CheckFailed",
    "run_checks",
    "schedule_occurrences",
    "occurrences_accounted_for",
    "no_burst",
    "never_early",
    "epochs_only_grow",
    "single_writer_per_epoch",
    "no_confirmed_write_lost",
    "memory_losses",
    "kept_memory",
    "owed_writes_found",
    "memory_eras",
    "outages",
    "replica_set",
    "Occurrence",
    "explain_occurrences",
    "repeats_and_misses_explained",
]

Check = Callable[["World"], None]


class CheckFailed(AssertionError):
    """A property of the run does not hold; the message says which and where."""

    def __init__(self, check: str, message: str) -> None:
        super().__init__(f"{check}: {message}")
        self.check = check
        self.detail = message


def run_checks(checks: Iterable[Check], world: World) -> list[CheckFailed]:
    failures = []
    for check in checks:
        try:
            check(world)
        except CheckFailed as failure:
            failures.append(failure)
        except AssertionError as failure:
            failures.append(CheckFailed(getattr(check, "__name__", "check"), str(failure)))
    return failures


ScheduleId = tuple[str, str, str]  # (actor, key, schedule name)


def schedule_occurrences(trace: Trace) -> dict[ScheduleId, list[Row]]:
    """Every schedule row (armed, fired, caught up, cancelled) grouped by (actor, key, name), in trace order."""
    groups: dict[ScheduleId, list[Row]] = defaultdict(list)
    for row in trace.of("schedule.*"):
        groups[(str(row.get("actor")), str(row.get("key")), str(row.get("name")))].append(row)
    return dict(groups)


def occurrences_accounted_for(world: World) -> None:
    """Every grid occurrence of every interval schedule is delivered, skipped by catch-up (counted), or lost with a reason.

    Walks each schedule's firings: from one firing's ``next_us`` to the following firing's
    ``due_us`` the grid times in between must be covered by a ``caught_up`` row's count, or by
    a fault of the node (crash, restart) or a cancellation that explains why they never fired.
    """
    trace = world.trace
    faults = trace.of("fault.crash", "fault.restart", "node.stopped")
    for (actor, key, name), rows in schedule_occurrences(trace).items():
        fired = [r for r in rows if r.kind == "schedule.fired"]
        skipped_by_due = {int(r.get("due_us")): int(r.get("skipped")) for r in rows if r.kind == "schedule.caught_up"}
        armed_every = [r.get("every_us") for r in rows if r.kind == "schedule.armed" and r.get("every_us")]
        if not fired or not armed_every:
            continue
        every = int(armed_every[-1])
        for before, after in zip(fired, fired[1:], strict=False):
            expected = before.get("next_us")
            if expected is None or after.get("due_us") == before.get("due_us"):
                continue  # a one-shot, or a repeat (explained elsewhere)
            gap = (int(after.get("due_us")) - int(expected)) // every
            if gap <= 0:
                continue
            explained = any(before.t_ns <= f.t_ns <= after.t_ns for f in faults)
            replaced = any(
                r.kind == "schedule.cancelled" and before.t_ns <= r.t_ns <= after.t_ns for r in rows
            )
            if not (explained or replaced):
                raise CheckFailed(
                    "occurrences_accounted_for",
                    f"{actor.split(':')[-1]}[{key}] schedule {name!r}: {gap} occurrence(s) between "
                    f"t={before.t:.3f}s and t={after.t:.3f}s neither delivered, nor skipped by catch-up, nor lost to a fault",
                )
        for row in fired:
            skipped = skipped_by_due.get(int(row.get("due_us")))
            if skipped is not None and row.get("next_us") is not None:
                expected_next = int(row.get("due_us")) + every * (skipped + 1)
                if int(row.get("next_us")) != expected_next:
                    raise CheckFailed(
                        "occurrences_accounted_for",
                        f"{name!r} at t={row.t:.3f}s: next due {row.get('next_us')} is not due + every*(skipped+1) = {expected_next}",
                    )


def no_burst(world: World) -> None:
    """A schedule never fires twice at the same instant on the same node (catch-up delivers once, no burst)."""
    seen: set[tuple[str, str, str, str, int]] = set()
    for row in world.trace.of("schedule.fired"):
        ident = (row.node, str(row.get("actor")), str(row.get("key")), str(row.get("name")), row.t_ns)
        if ident in seen:
            raise CheckFailed("no_burst", f"{row.get('name')!r} of {row.get('key')} fired twice at t={row.t:.6f}s on {row.node}")
        seen.add(ident)


def never_early(world: World) -> None:
    """No occurrence fires before its due time on the firing node's own wall clock."""
    for row in world.trace.of("schedule.fired"):
        if int(row.get("now_us")) < int(row.get("due_us")):
            raise CheckFailed(
                "never_early",
                f"{row.get('name')!r} of {row.get('key')} fired at wall {row.get('now_us')} before its due {row.get('due_us')}",
            )


# ================================================================== cluster checks =====

EntityId = tuple[str, str]  # (actor, key)


def _by_entity(rows: Iterable[Row]) -> dict[EntityId, list[Row]]:
    groups: dict[EntityId, list[Row]] = defaultdict(list)
    for row in rows:
        groups[(str(row.get("actor")), str(row.get("key")))].append(row)
    return dict(groups)


def _epoch(row: Row) -> tuple[int, str]:
    return (int(row.get("epoch_round")), str(row.get("epoch_node")))


def _late_acquisitions(world: World) -> set[int]:
    """Indexes (in ``world.trace.rows``) of ``epoch.acquired`` rows recorded after their acquisition really happened.

    A node paused between its write-back reaching a quorum and its activation going on records
    ``epoch.acquired`` only when it resumes: by then a newer owner may have taken the key. Such a
    row is recognised by proof, not by guess: an earlier row of the key has a greater epoch and
    found the late row's write-back version (so it read that write-back: the late acquisition came
    first), and the late row's node was paused while that earlier acquisition happened (its pause
    began before the earlier row and ended before the late one). The ordering checks skip it.

    The proof holds only inside one history of one life (seed 460): the node must not have
    crashed between its pause and the row (a restarted process was not paused in the middle of
    its previous life's acquisition), and the pause must start in the earlier row's memory era
    (``memory_eras``: a key that started over counts its versions from 0 again, so ``found`` in one
    era says nothing of a write-back of another).
    """
    rows = world.trace.rows
    index = {id(row): i for i, row in enumerate(rows)}
    crashes = world.trace.of("fault.crash")
    pauses: list[tuple[str, int, int]] = []  # (node, paused at, resumed at)
    started: dict[str, int] = {}
    for row in world.trace.of("fault.pause", "fault.resume"):
        if row.kind == "fault.pause":
            started[row.node] = row.t_ns
        elif row.get("paused_ns") is not None:
            pauses.append((row.node, row.t_ns - int(row.get("paused_ns")), row.t_ns))
        elif row.node in started:
            pauses.append((row.node, started[row.node], row.t_ns))
    era = memory_eras(world)
    late: set[int] = set()

    def paused_through(actor: str, key: str, row: Row, earlier: Row) -> bool:
        return any(
            node == row.node and began <= earlier.t_ns <= ended <= row.t_ns
            and era(actor, key, began) == era(actor, key, earlier.t_ns)
            and not any(c.node == row.node and began <= c.t_ns <= row.t_ns for c in crashes)
            for node, began, ended in pauses
        )

    for (actor, key), acquired in _by_entity(world.trace.of("epoch.acquired")).items():
        for j, row in enumerate(acquired):
            for earlier in acquired[:j]:
                if (
                    _epoch(earlier) > _epoch(row)
                    and int(earlier.get("found")) >= int(row.get("version"))
                    and paused_through(actor, key, row, earlier)
                ):
                    late.add(index[id(row)])
                    break
    return late


def memory_eras(world: World) -> Callable[[str, str, int], int]:
    """For keys with a replica set (``replica_set``), the era of a row: how many times, before its time, fewer than
    a majority of the key's replicas still held its latest confirmed state (``_forgotten_at``).

    Once a majority of a key's replicas forgot it, nothing of its history is owed (no read quorum meets a copy):
    the next owner may rightly start it over, at round 1 and version 0. The ordering checks compare rows within an
    era only. Two approximations, stated: a replica up at a write is taken to hold it (it may have missed it: an
    era could then be missed), and a restarted one to hold nothing until the next write (a handoff may have
    refilled it: an era could be found the runtime did not need). Keys without a replica set are all one era.
    """
    results: dict[str, object] = getattr(world, "results", {})  # a bare (trace-only) world has no results: one era
    if not results.get("replicas") and not results.get("ring"):
        return lambda actor, key, t_ns: 0
    durable = set(world.results.get("durable", ()))
    bounds: dict[tuple[str, str], list[int]] = {}

    def edges_of(actor: str, key: str) -> list[int]:
        return _forgotten_at(world.trace, replica_set(world, actor, key), actor in durable, (actor, key))

    def era(actor: str, key: str, t_ns: int) -> int:
        edges = bounds.get((actor, key))
        if edges is None:
            edges = bounds[(actor, key)] = edges_of(actor, key)
        return sum(1 for edge in edges if edge < t_ns)

    return era


def _forgotten_at(trace: Trace, members: list[str], durable: bool, of: tuple[str, str]) -> list[int]:
    """The times at which fewer than a majority of ``members`` still held the key's latest confirmed state.

    Walks the key's confirmed writes and the members' crashes and restarts in time order. A
    confirmed write is held by every member up at that moment (a down node acknowledged
    nothing; an up one is assumed to have it: the check then finds fewer eras, never more
    than the runtime allows). A crash takes the node out of the holders, except, for a
    durable type, a crash its disk came through (``memory_losses``) on a node that had itself
    confirmed the latest version (only an owner saves a durable key, and only what it
    confirmed). A restarted node holds nothing until the next write. When the holders fall
    below a majority, the key is forgotten: a new era starts, held by the members up then.
    A restarted node's sync round (``handoff.ended``) that had a holder among its peers pulled
    that holder's copy: it holds again. One that ended with none of them opened the node empty:
    once such nodes are a majority, a read quorum can meet no holder (seed 9: the holder was
    paused and off their ring), so the key is forgotten there too and a new era starts.
    """
    if not members:
        return []
    majority = len(members) // 2 + 1
    kept_crashes = set()
    if durable:
        lost = memory_losses(trace, durable=True, of=of)
        every = memory_losses(trace, durable=False)
        kept_crashes = {(n, t) for n in members for t in every.get(n, []) if t not in lost.get(n, [])}
    confirmed = _confirmed_by_node(trace, of)
    events: list[tuple[int, int, str, str, int]] = []  # (t, order, kind, node, version)
    for node, writes in confirmed.items():
        events += [(t, 1, "write", node, v) for t, v in writes]
    for row in trace.of("fault.crash", "fault.restart"):
        if row.node in members:
            events.append((row.t_ns, 0, row.kind, row.node, 0))
    rounds: dict[int, frozenset[str]] = {}  # event index -> the peers of a member's sync round that ended
    for row in trace.of("handoff.ended"):
        if row.node in members:
            rounds[len(events)] = frozenset(str(peer) for peer in row.get("peers") or ())
            events.append((row.t_ns, 2, row.kind, row.node, len(events)))
    events.sort()
    up = set(members)
    holders = set(members)
    opened_empty: set[str] = set()  # up, not holders, and a sync round of theirs ended without a holder
    latest = 0
    mine: dict[str, int] = {}
    edges: list[int] = []
    for t, _order, kind, node, version in events:
        if kind == "write":
            latest = max(latest, version)
            mine[node] = max(mine.get(node, 0), version)
            holders = set(up)
            opened_empty.clear()
        elif kind == "fault.crash":
            up.discard(node)
            opened_empty.discard(node)
            if not ((node, t) in kept_crashes and mine.get(node, -1) >= latest):
                holders.discard(node)
            if len(holders) < majority:
                edges.append(t)
                holders = set(up)
                opened_empty.clear()
        elif kind == "fault.restart":
            up.add(node)
        elif node in up and node not in holders:
            if rounds[version] & holders:
                holders.add(node)
                opened_empty.discard(node)
            else:
                opened_empty.add(node)
                if len(opened_empty) >= majority:
                    edges.append(t)
                    holders = set(up)
                    opened_empty.clear()
    return edges


def replica_set(world: World, actor: str, key: str) -> list[str]:
    """The replica set a scenario recorded for ``actor/key`` (``results["replicas"]``), else the one its converged ring
    gives (``results["ring"]``: ``{"nodes": [...], "replicas": n}``, placed by ``casty.protocol.placement.Ring``), else []."""
    recorded: dict[str, list[str]] = world.results.get("replicas", {})
    members = recorded.get(f"{actor}/{key}")
    if members:
        return list(members)
    ring = world.results.get("ring")
    if not ring:
        return []
    return list(_ring_replicas(tuple(ring["nodes"]), int(ring["replicas"]), actor, key))


@functools.lru_cache(maxsize=4096)
def _ring_replicas(nodes: tuple[str, ...], count: int, actor: str, key: str) -> tuple[str, ...]:
    return _ring(nodes).replicas(actor, key, count)


@functools.lru_cache(maxsize=16)
def _ring(nodes: tuple[str, ...]) -> Ring:
    return Ring(nodes)


def epochs_only_grow(world: World) -> None:
    """Per (actor, key), the owner epochs ``(epoch_round, epoch_node)`` of ``epoch.acquired`` rows strictly grow in trace order, across all nodes.

    Two acquisitions of the same epoch, or a smaller one after a greater, would mean two owners
    could both believe they hold the key: the epoch is what fences the older one. A row recorded
    late by a paused node (``_late_acquisitions``: proven earlier by a newer owner's ``found``) is skipped.
    """
    late = _late_acquisitions(world)
    era = memory_eras(world)
    index = {id(row): i for i, row in enumerate(world.trace.rows)}
    for (actor, key), all_rows in _by_entity(world.trace.of("epoch.acquired")).items():
        rows = [r for r in all_rows if index[id(r)] not in late]
        for before, after in zip(rows, rows[1:], strict=False):
            if era(actor, key, before.t_ns) != era(actor, key, after.t_ns):
                continue  # a majority of the key's replicas forgot it in between (memory_eras): it started over
            a = (int(before.get("epoch_round")), str(before.get("epoch_node")))
            b = (int(after.get("epoch_round")), str(after.get("epoch_node")))
            if not b > a:
                raise CheckFailed(
                    "epochs_only_grow",
                    f"{actor.split(':')[-1]}[{key}]: epoch {b} acquired on {after.node} at t={after.t:.3f}s "
                    f"is not greater than {a} acquired on {before.node} at t={before.t:.3f}s",
                )


def single_writer_per_epoch(world: World) -> None:
    """Only the holder of a key's newest epoch confirms new writes of it; no version of a key is confirmed twice.

    ``write.confirmed`` rows do not carry the epoch, so the holder is derived from the trace:
    from an ``epoch.acquired`` row of a key (on node M, write-back confirmed as ``version`` w)
    until the next one, M holds the key. A ``write.confirmed`` row of the key on another node N
    is then allowed only with a version below w: such a write reached its quorum before M read
    the replicas (M's ``found`` covers it), its confirmation just surfaced late on N. A version
    >= w confirmed on N would be a write made under an older epoch after the newer one was
    taken: two writers at once. Independently, a (key, version) confirmed on two nodes is two
    histories of the key. Only cluster keys (those with an ``epoch.acquired`` row) are checked;
    rows recorded late by a paused node (``_late_acquisitions``) do not change the holder.
    """
    acquired = _by_entity(world.trace.of("epoch.acquired"))
    late = _late_acquisitions(world)
    era = memory_eras(world)
    index = {id(row): i for i, row in enumerate(world.trace.rows)}
    for (actor, key), rows in _by_entity(world.trace.of("epoch.acquired", "write.confirmed")).items():
        if (actor, key) not in acquired:
            continue
        holder: Row | None = None
        confirmed_by: dict[int, str] = {}
        current = 0
        for row in rows:
            if era(actor, key, row.t_ns) != current:  # the key started over (memory_eras): a new history
                current, holder, confirmed_by = era(actor, key, row.t_ns), None, {}
            if row.kind == "epoch.acquired" and index[id(row)] in late:
                continue  # recorded late (see _late_acquisitions): it held the key before the current holder
            if row.kind == "epoch.acquired":
                holder = row
                continue
            version = int(row.get("version"))
            name = f"{actor.split(':')[-1]}[{key}]"
            if version in confirmed_by and confirmed_by[version] != row.node:
                raise CheckFailed(
                    "single_writer_per_epoch",
                    f"{name}: version {version} confirmed on {confirmed_by[version]} and again on {row.node} (t={row.t:.3f}s)",
                )
            confirmed_by[version] = row.node
            if holder is not None and row.node != holder.node and version >= int(holder.get("version")):
                raise CheckFailed(
                    "single_writer_per_epoch",
                    f"{name}: {row.node} confirmed version {version} at t={row.t:.3f}s while {holder.node} held epoch "
                    f"({holder.get('epoch_round')}, {holder.get('epoch_node')}) since t={holder.t:.3f}s (write-back version {holder.get('version')})",
                )


def no_confirmed_write_lost(world: World) -> None:
    """A new owner starts from every write confirmed before it took the key: its ``found`` version >= the last confirmed version.

    For each ``epoch.acquired`` row of a key, the greatest ``version`` of the key's
    ``write.confirmed`` rows earlier in the trace (on any node) must be <= the acquisition's
    ``found``. It holds as long as a majority of the key's replicas kept their stores (a
    confirmed write is on a write quorum, the new owner reads a read quorum, and the two
    intersect); the check assumes that, so use it in scenarios where no more than a minority
    of the replicas lose their memory (a crash of one node of three). Rows recorded late by a
    paused node (``_late_acquisitions``) are skipped: the writes before their row came after them.
    """
    late = _late_acquisitions(world)
    index = {id(row): i for i, row in enumerate(world.trace.rows)}
    for (actor, key), rows in _by_entity(world.trace.of("epoch.acquired", "write.confirmed")).items():
        last: Row | None = None
        for row in rows:
            if row.kind == "epoch.acquired" and index[id(row)] in late:
                continue  # recorded late (see _late_acquisitions): the writes before its row came after it
            if row.kind == "write.confirmed":
                if last is None or int(row.get("version")) > int(last.get("version")):
                    last = row
            elif last is not None and int(row.get("found")) < int(last.get("version")):
                raise CheckFailed(
                    "no_confirmed_write_lost",
                    f"{actor.split(':')[-1]}[{key}]: {row.node} acquired the key at t={row.t:.3f}s from version {row.get('found')}, "
                    f"but version {last.get('version')} was confirmed on {last.node} at t={last.t:.3f}s",
                )


_FOREVER = 2**62
_LOSSES: weakref.WeakKeyDictionary[Trace, dict[tuple[bool, tuple[str, str] | None, int, int], dict[str, list[int]]]] = weakref.WeakKeyDictionary()
_CONFIRMED: weakref.WeakKeyDictionary[Trace, dict[tuple[tuple[str, str], int], dict[str, list[tuple[int, int]]]]] = weakref.WeakKeyDictionary()


def memory_losses(trace: Trace, *, durable: bool, of: tuple[str, str] | None = None, version: int = 0) -> dict[str, list[int]]:
    """Per node, the true times (ns) at which it lost its memory of a key's replica, as the trace shows them.

    For an in-memory type every ``fault.crash`` is a loss: its replica store was RAM. For a
    durable type a crash is a loss only if its disk did not come through it: the crash row
    lost unsynced writes (``unsynced_lost`` > 0), or the next ``fault.restart`` of the node
    came with a new disk (``wiped``), or it never restarted; a restart with its disk keeps
    what the node saved. ``of=(actor, key)`` says what the node saved of that key: an owner
    saves a durable key's confirmed writes to its own disk, a replica keeps its copy in
    memory only, so a crash with its disk keeps the key (at ``version`` or later) only on a
    node that had confirmed such a write of it (a ``write.confirmed`` row on that node
    before the crash). Computed once per trace, length and arguments (the checks share it).
    """
    cache = _LOSSES.setdefault(trace, {})
    cache_key = (durable, of, version, len(trace.rows))
    found = cache.get(cache_key)
    if found is None:
        found = cache[cache_key] = _memory_losses(trace, durable=durable, of=of, version=version)
    return found


def _confirmed_by_node(trace: Trace, of: tuple[str, str]) -> dict[str, list[tuple[int, int]]]:
    """(time, version) of every confirmed write of ``of``, per node, in trace order (cached per trace and length)."""
    cache = _CONFIRMED.setdefault(trace, {})
    cache_key = (of, len(trace.rows))
    found = cache.get(cache_key)
    if found is None:
        found = {}
        for row in trace.of("write.confirmed"):
            if (str(row.get("actor")), str(row.get("key"))) == of:
                found.setdefault(row.node, []).append((row.t_ns, int(row.get("version"))))
        cache[cache_key] = found
    return found


def _memory_losses(trace: Trace, *, durable: bool, of: tuple[str, str] | None, version: int) -> dict[str, list[int]]:
    saved: dict[str, int] = {}  # node -> first time it confirmed a write of `of` at `version` or later (on its disk since)
    if durable and of is not None:
        for node, writes in _confirmed_by_node(trace, of).items():
            first = next((t for t, v in writes if v >= version), None)
            if first is not None:
                saved[node] = first
    losses: dict[str, list[int]] = defaultdict(list)
    pending: dict[str, Row] = {}
    for row in trace.of("fault.crash", "fault.restart"):
        if row.kind == "fault.crash":
            on_disk = of is None or saved.get(row.node, _FOREVER) < row.t_ns
            if not durable or int(row.get("unsynced_lost") or 0) > 0 or not on_disk:
                losses[row.node].append(row.t_ns)
            else:
                pending[row.node] = row
        else:
            crash = pending.pop(row.node, None)
            if crash is not None and row.get("wiped"):
                losses[row.node].append(crash.t_ns)
    for node, crash in pending.items():
        losses[node].append(crash.t_ns)
    return dict(losses)


_OUTAGES: weakref.WeakKeyDictionary[Trace, dict[int, dict[str, list[tuple[int, int]]]]] = weakref.WeakKeyDictionary()


def outages(trace: Trace) -> dict[str, list[tuple[int, int]]]:
    """Per node, the ``[crash, restart)`` intervals (true ns) it was down; one never restarted ends at ``2**62``."""
    cache = _OUTAGES.setdefault(trace, {})
    found = cache.get(len(trace.rows))
    if found is not None:
        return found
    out: dict[str, list[tuple[int, int]]] = defaultdict(list)
    since: dict[str, int] = {}
    for row in trace.of("fault.crash", "fault.restart"):
        if row.kind == "fault.crash":
            since.setdefault(row.node, row.t_ns)
        elif row.node in since:
            out[row.node].append((since.pop(row.node), row.t_ns))
    for node, t in since.items():
        out[node].append((t, _FOREVER))
    cache[len(trace.rows)] = found = dict(out)
    return found


def kept_memory(
    replicas: Iterable[str],
    losses: dict[str, list[int]],
    since_ns: int,
    until_ns: int,
    down: dict[str, list[tuple[int, int]]] | None = None,
) -> bool:
    """Whether a write confirmed at ``since_ns`` is still owed at ``until_ns``: a majority of ``replicas`` were up at
    ``since_ns`` (not inside a ``down`` interval: a down node acknowledged nothing) and lost no memory in
    ``(since_ns, until_ns]``. Then the write quorum that confirmed it meets them, so a copy survived on a replica
    that kept it, and a read quorum (of replicas that did not forget, or synced from those that did not) finds it."""
    members = list(replicas)
    outs = down or {}
    kept = [
        n
        for n in members
        if not any(start <= since_ns < end for start, end in outs.get(n, ()))
        and not any(since_ns < t <= until_ns for t in losses.get(n, ()))
    ]
    return len(kept) >= len(members) // 2 + 1


def owed_writes_found(world: World) -> None:
    """A new owner starts from every write it owes: its ``found`` version >= every confirmed version still owed.

    ``no_confirmed_write_lost`` without its assumption: a confirmed write (``write.confirmed``
    row at time c) is owed by an acquisition at time a iff a majority of the key's replica set
    was up at c and kept its memory over (c, a] (``kept_memory``, ``memory_losses``, ``outages``). The replica sets come
    from ``replica_set`` (recorded, or the converged ring's) and the durable types from
    ``world.results["durable"]`` (actor names); a key with no replica set is not checked. Rows recorded late by a paused node (``_late_acquisitions``) are skipped.

    The acks come before the row: at c, within a round trip, unless the owner was paused. A
    paused owner's loop holds the acks that arrived meanwhile and confirms the write when it
    resumes, so a write confirmed by a node that resumed since its acquisition of the key may
    have been acked as early as that acquisition (its writes come after it): the memory it is
    owed from is then kept from the acquisition on, not from c (swarm seed 227: n3 acquired,
    wrote and froze at 23.99 s; its two replicas acked and then crashed, and the row came at
    its resume, 31.15 s).
    """
    durable = set(world.results.get("durable", ()))
    late = _late_acquisitions(world)
    down = outages(world.trace)
    resumed: dict[str, list[int]] = defaultdict(list)
    for resume in world.trace.of("fault.resume"):
        resumed[resume.node].append(resume.t_ns)
    index = {id(row): i for i, row in enumerate(world.trace.rows)}
    for (actor, key), rows in _by_entity(world.trace.of("epoch.acquired", "write.confirmed")).items():
        members = replica_set(world, actor, key)
        if not members:
            continue
        is_durable = actor in durable
        confirmed: list[tuple[Row, int]] = []  # (row, the earliest its acks may have come)
        acquired_at: dict[str, int] = {}  # node -> its latest acquisition of the key
        for row in rows:
            if row.kind == "write.confirmed":
                since = acquired_at.get(row.node, row.t_ns)
                paused = any(since < t <= row.t_ns for t in resumed.get(row.node, ()))
                confirmed.append((row, since if paused else row.t_ns))
                continue
            acquired_at[row.node] = row.t_ns
            if index[id(row)] in late:
                continue
            owed = [
                c
                for c, since in confirmed
                if kept_memory(members, memory_losses(world.trace, durable=is_durable, of=(actor, key), version=int(c.get("version")) if is_durable else 0), since, row.t_ns, down)
            ]
            top = max(owed, key=lambda c: int(c.get("version")), default=None)
            if top is not None and int(row.get("found")) < int(top.get("version")):
                raise CheckFailed(
                    "owed_writes_found",
                    f"{actor.split(':')[-1]}[{key}]: {row.node} acquired the key at t={row.t:.3f}s from version {row.get('found')}, "
                    f"but version {top.get('version')} confirmed on {top.node} at t={top.t:.3f}s is owed (a majority of "
                    f"{'+'.join(members)} kept its memory since)",
                )


# ================================================= repeated and missed occurrences =====

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
    short texts ("epoch.acquired on n1 at t=9.811s", ...); empty means unexplained.
    """

    kind: str
    actor: str
    key: str
    name: str
    due_us: int
    at: Row
    before: Row | None
    because: tuple[str, ...]

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

    A **repeat** is a (actor, key, name, due) with more than one ``schedule.fired`` row: each
    firing after the first is one. A **miss** is a due on an interval schedule's grid (the
    ``due_us + k * every_us`` of its ``schedule.armed`` rows), from its first delivered due up
    to the furthest ``next_us`` a firing set, that no ``schedule.fired`` row delivered: a
    catch-up skipped it (``schedule.caught_up``), or an owner resumed past it. Its window ends
    at the first firing whose ``next_us`` passed it. A grid restarts where the schedule is
    cancelled or armed off its grid (re-armed with another phase or period). Dues beyond the
    last ``next_us`` are not counted: the run may simply have ended before them.
    """
    causes = trace.of("epoch.acquired", "clock.step", "clock.drift", *EXPLAINING_FAULTS)
    out: list[Occurrence] = []
    for (actor, key, name), rows in schedule_occurrences(trace).items():
        first_of_due: dict[int, Row] = {}
        for row in rows:
            if row.kind != "schedule.fired":
                continue
            due = int(row.get("due_us"))
            earlier = first_of_due.setdefault(due, row)
            if earlier is not row:
                out.append(Occurrence("repeat", actor, key, name, due, row, earlier, _explanations(actor, key, earlier, row, causes)))
        for segment in _grid_segments(rows):
            out.extend(_misses(actor, key, name, segment, causes))
    out.sort(key=lambda o: (o.at.seq, o.due_us))
    return out


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
