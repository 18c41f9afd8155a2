"""Checks over traces: what must hold in every run, each failure explained.

A check reads a finished world (its trace and results) and raises ``CheckFailed`` with a
message a student can act on: which row, which rule, what was expected. Checks never look
inside the runtime: if a property cannot be seen in the trace, the trace is missing a row.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

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
    first), and the late row's node resumed from a pause in between. The ordering checks skip it.
    """
    rows = world.trace.rows
    index = {id(row): i for i, row in enumerate(rows)}
    resumes = world.trace.of("fault.resume")
    late: set[int] = set()
    for _entity, acquired in _by_entity(world.trace.of("epoch.acquired")).items():
        for j, row in enumerate(acquired):
            for earlier in acquired[:j]:
                if (
                    _epoch(earlier) > _epoch(row)
                    and int(earlier.get("found")) >= int(row.get("version"))
                    and any(r.node == row.node and earlier.t_ns <= r.t_ns <= row.t_ns for r in resumes)
                ):
                    late.add(index[id(row)])
                    break
    return late


def epochs_only_grow(world: World) -> None:
    """Per (actor, key), the owner epochs ``(epoch_round, epoch_node)`` of ``epoch.acquired`` rows strictly grow in trace order, across all nodes.

    Two acquisitions of the same epoch, or a smaller one after a greater, would mean two owners
    could both believe they hold the key: the epoch is what fences the older one. A row recorded
    late by a paused node (``_late_acquisitions``: proven earlier by a newer owner's ``found``) is skipped.
    """
    late = _late_acquisitions(world)
    index = {id(row): i for i, row in enumerate(world.trace.rows)}
    for (actor, key), all_rows in _by_entity(world.trace.of("epoch.acquired")).items():
        rows = [r for r in all_rows if index[id(r)] not in late]
        for before, after in zip(rows, rows[1:], strict=False):
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
    index = {id(row): i for i, row in enumerate(world.trace.rows)}
    for (actor, key), rows in _by_entity(world.trace.of("epoch.acquired", "write.confirmed")).items():
        if (actor, key) not in acquired:
            continue
        holder: Row | None = None
        confirmed_by: dict[int, str] = {}
        for row in rows:
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
