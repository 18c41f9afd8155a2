"""Activation runs read from a trace: one bar per run of a key on a node, stacked in sub-rows (no matplotlib).

``activation.started`` opens a bar on the node's row, the same node/actor/key's ``activation.ended``
(or ``activation.failed``: the run is over and the body restarts after a backoff) closes it; a bar
still open at the node's crash ends there, and one still open at the end of the trace runs to the
end. Concurrent activations of a node stack in sub-rows; a key keeps its sub-row when it can.
The activation timeline draws these bars; a test or a notebook can count them without drawing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sim.trace import Row, Trace
from sim.viz.data.keys import is_internal, key_label
from sim.viz.data.timebase import end_ns

__all__ = ["Bar", "activation_bars", "assign_slots", "entity_names", "timeline_nodes", "NODE_KINDS"]

def entity_names(entities: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """Labels of (actor, key), each named as a key: ``"k"`` alone when one actor type (the legend's title names it), else ``counted["k"]``."""
    entities = list(dict.fromkeys(entities))
    actors = {a for a, _ in entities}
    return {e: key_label(e[0], e[1], with_type=len(actors) > 1) for e in entities}


NODE_KINDS = ("activation.", "fault.", "clock.step", "schedule.", "write.", "message.dropped")
"""The row kinds that put a node on the timeline (a node with none of these gets no row)."""


def timeline_nodes(trace: Trace) -> list[str]:
    """The nodes the timeline gives a row, in the trace's order: those with a row of ``NODE_KINDS`` (not the world's own notes)."""
    with_events = {r.node for r in trace.rows if r.kind.startswith(NODE_KINDS)}
    return [n for n in trace.nodes() if n in with_events]


@dataclass(slots=True)
class Bar:
    """One activation run of ``entity`` (actor, key) on ``node``; ``slot`` is its sub-row (set by ``assign_slots``)."""

    node: str
    entity: tuple[str, str]
    lease: Any
    start_ns: int
    end_ns: int = -1
    how: str = "open"  # ended reason, "failed", "crash", "superseded", "end of trace"
    slot: int = 0
    behavior: str | None = None  # the run's behaviour when ``become`` made it another type than the key's own


def activation_bars(trace: Trace, keys: set[str] | None) -> tuple[list[Bar], list[tuple[Row, Bar | None]]]:
    """Bars (one per activation run) and the failures, each with the bar it ended (if any)."""
    bars: list[Bar] = []
    failures: list[tuple[Row, Bar | None]] = []
    open_: dict[tuple[str, str, str], Bar] = {}

    def close(ident: tuple[str, str, str], t_ns: int, how: str) -> Bar | None:
        bar = open_.pop(ident, None)
        if bar is not None:
            bar.end_ns, bar.how = t_ns, how
        return bar

    for row in trace.rows:
        kind = row.kind
        if kind == "fault.crash":
            for ident in [i for i in open_ if i[0] == row.node]:
                close(ident, row.t_ns, "crash")
            continue
        if not kind.startswith("activation."):
            continue
        entity = (str(row.get("actor")), str(row.get("key")))
        if keys is not None and entity[1] not in keys:
            continue
        if keys is None and is_internal(entity[0]):  # the runtime's own keys (cron claims): drawn only when named
            continue
        ident = (row.node, *entity)
        if kind == "activation.started":
            close(ident, row.t_ns, "superseded")
            bar = Bar(row.node, entity, row.get("lease"), row.t_ns)
            behavior = row.get("behavior")
            if behavior is not None and str(behavior) != entity[0]:
                bar.behavior = str(behavior).split(":")[-1]
            open_[ident] = bar
            bars.append(bar)
        elif kind == "activation.ended":
            close(ident, row.t_ns, str(row.get("reason", "ended")))
        elif kind == "activation.failed":
            running = open_.get(ident)
            if running is not None and (row.get("lease") is None or running.lease is None or row.get("lease") == running.lease):
                failures.append((row, close(ident, row.t_ns, "failed")))
            else:  # not this run's failure (lease 0: the activation could not even start): a marker only
                failures.append((row, running))
    last = end_ns(trace)
    for ident in list(open_):
        close(ident, last, "end of trace")
    return bars, failures


def assign_slots(bars: list[Bar]) -> dict[str, int]:
    """Stack overlapping bars of a node in sub-rows; a key goes back to its previous sub-row when free."""
    slots_per_node: dict[str, int] = {}
    by_node: dict[str, list[Bar]] = {}
    for bar in bars:
        by_node.setdefault(bar.node, []).append(bar)
    for node, node_bars in by_node.items():
        free_at: list[int] = []  # slot -> end of its last bar
        last_slot: dict[tuple[str, str], int] = {}
        for bar in sorted(node_bars, key=lambda b: (b.start_ns, b.end_ns)):
            preferred = last_slot.get(bar.entity)
            slot: int
            if preferred is not None and free_at[preferred] <= bar.start_ns:
                slot = preferred
            else:
                unclaimed = next((i for i, end in enumerate(free_at) if end <= bar.start_ns and i not in last_slot.values()), None)
                slot = unclaimed if unclaimed is not None else next((i for i, end in enumerate(free_at) if end <= bar.start_ns), len(free_at))
            if slot == len(free_at):
                free_at.append(0)
            free_at[slot] = max(bar.end_ns, bar.start_ns + 1)
            last_slot[bar.entity] = slot
            bar.slot = slot
        slots_per_node[node] = len(free_at)
    return slots_per_node
