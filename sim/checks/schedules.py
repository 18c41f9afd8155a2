"""Schedule checks: every grid occurrence accounted for, no burst after a catch-up, nothing fired early."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from ..trace import Row, Trace
from .base import CheckFailed

if TYPE_CHECKING:
    from ..world import World


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
