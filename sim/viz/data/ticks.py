"""Periodic deliveries read from a trace: every tick of a run by (node, source), as the ticks chart names its rows (no matplotlib).

Three kinds of periodic work: a persisted actor schedule (``schedule.fired``), an activation timer
(``timer.fired``) and a node schedule (``node_schedule.*``, with its cron claims); a ``dead_letter``
whose origin names a node schedule (its handler failed) goes on that schedule's row. The claim
keys' own schedules (``casty.cluster.claims:schedule_fire``) are runtime bookkeeping: left out
unless ``internal=True``.
"""

from __future__ import annotations

from sim.trace import Row, Trace

__all__ = ["tick_rows", "source_name", "CLAIM_ACTOR"]

CLAIM_ACTOR = "casty.cluster.claims:schedule_fire"
"""The internal actor type whose keys are the cron claims (one key per reference and tick)."""

_KINDS = (
    "schedule.fired", "schedule.caught_up", "timer.fired", "node_schedule.fired", "node_schedule.caught_up",
    "node_schedule.tick_lost", "node_schedule.claim_won", "node_schedule.claim_lost", "node_schedule.claim_skipped",
    "node_schedule.paused", "node_schedule.resumed", "node_schedule.cancelled",
)
_DEAD_ORIGIN = "node-schedule:"  # a dead letter's origin when a node schedule's tick failed in its handler


def source_name(row: Row) -> str:
    """The row's name: a node schedule by its reference; a timer or actor schedule by its key and name.

    A timer's or a schedule's name is only unique within its key (every key of a type arms its
    own ``'beat'``), so the key is part of the row: ``counted[k] · timer 'beat'``.
    """
    if row.kind.startswith("node_schedule."):
        return f"node schedule '{row.get('reference')}'"
    owner = f"{str(row.get('actor')).split(':')[-1]}[{row.get('key')}]"
    if row.kind.startswith("timer."):
        return f"{owner} \u00b7 timer '{row.get('name')}'"
    return f"{owner} \u00b7 actor schedule '{row.get('name')}'"


def tick_rows(trace: Trace, *, internal: bool = False) -> dict[tuple[str, str], list[Row]]:
    """The periodic-delivery rows of a run by ``(node, source)`` (source as the chart names its row), in order of first row."""
    out: dict[tuple[str, str], list[Row]] = {}
    for row in trace.rows:
        if row.kind not in _KINDS or (not internal and row.get("actor") == CLAIM_ACTOR):
            continue
        out.setdefault((row.node, source_name(row)), []).append(row)
    for row in trace.of("dead_letter"):  # the handler's failure, on the row of the schedule that told it
        origin = str(row.get("origin") or "")
        if origin.startswith(_DEAD_ORIGIN):
            source = f"node schedule '{origin[len(_DEAD_ORIGIN):]}'"
            home = (row.node, source) if (row.node, source) in out else next((k for k in out if k[1] == source), (row.node, source))
            out.setdefault(home, []).append(row)
    return out
