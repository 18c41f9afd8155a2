"""What the space-time diagram shows, read from a trace: its default window and each node's own events as labels (no matplotlib).

The frames themselves (``net.sent`` paired with ``net.delivered``) are the world's own reading,
``sim.messages.frame_arrows``. Here: the window around the first ownership change (the new owner's
Prepare .. its first confirmed write), which of a node's rows are marked on its line, and each
mark's (marker, colour, text).
"""

from __future__ import annotations

from collections.abc import Iterable

from sim.trace import Row, Trace
from sim.viz.data.keys import is_internal, key_label
from sim.viz.data.timebase import end_ns
from sim.viz.palette import BLUE, GREEN, GREY, INK, PURPLE, VERMILLION

__all__ = ["default_window", "spacetime_lanes", "event_label", "node_marks", "LOCAL_KINDS", "PRIORITY"]


def default_window(trace: Trace) -> tuple[int, int]:
    """(start_ns, end_ns) around the first ownership change (else the first epoch): the new owner's Prepare .. its first write."""
    acquired = trace.of("epoch.acquired")
    if not acquired:
        return 0, min(end_ns(trace), 200_000_000)
    first_owner = {(r.get("actor"), r.get("key")): r.node for r in reversed(acquired)}
    change = next((r for r in acquired if first_owner[(r.get("actor"), r.get("key"))] != r.node), acquired[0])
    prepares = [r for r in trace.of("net.sent", node=change.node) if r.get("frame") == "Prepare" and r.t_ns <= change.t_ns]
    start = prepares[-1].t_ns if prepares and change.t_ns - prepares[-1].t_ns < 500_000_000 else change.t_ns - 5_000_000
    confirmed = next((r for r in trace.of("write.confirmed", node=change.node, key=change.get("key")) if r.t_ns >= change.t_ns), None)
    stop = confirmed.t_ns if confirmed is not None and confirmed.t_ns - change.t_ns < 200_000_000 else change.t_ns + 5_000_000
    margin = max((stop - start) // 10, 1_000_000)
    return max(start - margin, 0), stop + margin


LOCAL_KINDS = ("epoch.acquired", "write.confirmed", "write.failed", "schedule.fired", "activation.started", "activation.ended",
               "member.changed", "fault.", "handoff.started", "handoff.ended", "message.dropped")


# which of a node's rows at one instant gives the marker and the colour of their common label (the text keeps row order)
PRIORITY = ("fault.crash", "fault.restart", "epoch.acquired", "write.failed", "write.confirmed", "schedule.fired",
            "activation.started", "activation.ended", "message.dropped", "fault.partition", "fault.heal", "fault.pause",
            "fault.resume", "member.changed", "handoff.started", "handoff.ended")


def event_label(row: Row, incarnation: dict[str, int], with_key: bool) -> tuple[str, str, str] | None:
    """(marker, colour, text) of a node's own row, or None to leave it out; ``with_key`` names the key in every line."""
    kind = row.kind
    named = key_label(row.get("actor"), row.get("key")) if row.get("key") is not None else ""
    short = f"{named} " if with_key else ""
    if kind == "epoch.acquired":
        node = str(row.get("epoch_node", "")).split("#")[0]
        found = f"found v{row.get('found')}" if row.get("found") else "found nothing"
        return "*", PURPLE, f"epoch ({row.get('epoch_round')}, {node}#{incarnation.get(row.node, 1)}) of {named}, {found}"
    if kind == "write.confirmed":
        pages = ", ".join(row.get("pages") or ())
        return "s", BLUE, f"write v{row.get('version')} confirmed ({pages})"
    if kind == "write.failed":
        return "X", VERMILLION, f"write {row.get('reason')} ({row.get('operation')})"
    if kind == "schedule.fired":
        return "o", INK, f"fires schedule '{row.get('name')}'" + (f" of {named}" if with_key else "")
    if kind == "activation.started":
        return ">", GREEN, f"{short}activated" + (" (recovered)" if row.get("recovered") else "")
    if kind == "activation.ended":
        return "|", GREY, f"{short}ended: {row.get('reason')}"
    if kind == "message.dropped":
        return "x", GREY, f"{row.get('message')} dropped"
    if kind == "member.changed":
        if row.get("node") == row.node:
            return None
        return "d", "#666666", f"sees {row.get('node')} {row.get('status')}"
    if kind == "handoff.started":
        return "4", GREEN, f"handoff round: asks {', '.join(row.get('peers') or ()) or 'nobody'}"
    if kind == "handoff.ended":
        return "3", GREEN, f"handoff done ({row.get('keys')} key{'' if row.get('keys') == 1 else 's'})"
    if kind == "fault.crash":
        return "X", VERMILLION, "CRASH"
    if kind == "fault.restart":
        return "^", GREEN, f"restart #{row.get('incarnation')}"
    if kind == "fault.pause":
        return "s", GREY, "paused"
    if kind == "fault.resume":
        return "s", GREY, "resumed"
    if kind == "fault.partition":
        return "|", "#7A5C00", f"partition {' '.join(row.get('from') or ())} | {' '.join(row.get('to') or ())}"
    if kind == "fault.heal":
        return "|", "#7A5C00", "heal"
    return None


def spacetime_lanes(trace: Trace) -> list[str]:
    """The diagram's lanes: the nodes that started, in order; else (a trace without node.started) every node that sent or got a frame."""
    started = list(dict.fromkeys(r.node for r in trace.of("node.started")))
    return started or [n for n in trace.nodes() if any(r.node == n for r in trace.of("net."))]


def node_marks(trace: Trace, t0: int, t1: int, lanes: Iterable[str], *, internal: bool) -> dict[tuple[str, int], list[tuple[str, str, str, str]]]:
    """The nodes' own rows in ``[t0, t1]`` (ns) on ``lanes``, grouped by (node, instant): ``(marker, colour, text, kind)`` each, in row order.

    An epoch's incarnation is the node's life at that row; every line names its key when the window holds
    rows of more than one key. The runtime's own keys are left out unless ``internal``.
    """
    shown = set(lanes)
    lives: dict[str, int] = {}
    picked: list[tuple[Row, dict[str, int]]] = []
    for row in trace.rows:
        if row.kind == "node.started":
            lives[row.node] = int(row.get("incarnation", 1) or 1)
        if (t0 <= row.t_ns <= t1 and row.node in shown and row.kind.startswith(LOCAL_KINDS)
                and (internal or not is_internal(row.get("actor")))):
            picked.append((row, dict(lives)))
    keys = {(r.get("actor"), r.get("key")) for r, _ in picked if r.get("key") is not None}
    grouped: dict[tuple[str, int], list[tuple[str, str, str, str]]] = {}
    for row, at in picked:
        found = event_label(row, at, with_key=len(keys) > 1)
        if found is not None:
            grouped.setdefault((row.node, row.t_ns), []).append((*found, row.kind))
    return grouped
