"""A trace as Chrome/Perfetto Trace Event JSON (open it in ui.perfetto.dev).

Layout. Each node is a process (``pid`` in order of the node's first row, named after the
node). Inside it, threads (``tid``) are tracks:

* ``node`` (tid 1): the node's life. ``down`` spans from a crash to its restart, ``paused``
  spans from a pause to its resume (or crash), and an instant for every row that names no
  key (membership, handoff, faults, clock steps, notes);
* ``net`` (tid 2): one zero-length slice per frame the node sent or received; a sent slice
  and its received slice are joined by a flow arrow (the v2 form: ``bind_id`` with
  ``flow_out`` on the sender's slice, ``flow_in`` on the receiver's), so Perfetto draws the
  message between the nodes. A frame dropped at the sender (partition, loss) is a slice with
  ``args.dropped`` and no arrow; one dropped at the receiver (the link was cut while it flew,
  nobody was there) has its arrow end on a slice named "... dropped (reason)". Frames are
  paired by ``sim.messages``;
* one track per key the node ran (``counter[c0]``): each activation is a complete (``X``)
  span, from ``activation.started`` to the first of its ``activation.ended``, its
  ``activation.failed`` (the run is over, the body restarts later as a new span), the node's
  crash or stop, or the end of the trace (then ``args.ended`` says ``end of trace``). The
  key's own rows (writes, epochs, schedule firings, dropped messages) are instants on it.

Why one track per key and complete spans: with every activation of a node on one track as
``B``/``E`` pairs, two keys active at once closed each other's spans (an ``E`` closes the
innermost open ``B`` of its track, whichever key it was), and a crash, which ends a run
without an ``activation.ended`` row, left a ``B`` open for ever. A key whose runs on one node
overlap (which the runtime does not do) gets a second track (``counter[c0] #2``) rather than
a broken nesting. Timestamps are microseconds of true time (``t_ns / 1000``), each track's
events in time order; every row's fields are the event's ``args`` with the node's ``wall_us``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sim.messages import frame_arrows
from sim.trace import Row, Trace, plain

__all__ = ["perfetto_events", "write_perfetto"]

NODE_TID = 1
NET_TID = 2


@dataclass(slots=True)
class _Span:
    """An activation (or a node's down/paused time) being built: closed once its end row is seen."""

    name: str
    cat: str
    tid: int
    start_ns: int
    args: dict[str, Any]
    end_ns: int | None = None
    ended: str = ""


@dataclass(slots=True)
class _Node:
    pid: int
    tracks: dict[tuple[str, str, int], int] = field(default_factory=dict)  # (actor, key, lane) -> tid
    lanes: dict[tuple[str, str], list[_Span | None]] = field(default_factory=dict)  # each lane's open span of a key
    down: _Span | None = None
    paused: _Span | None = None


def _key_label(actor: str, key: str) -> str:
    return f"{actor.split(':')[-1]}[{key}]"


def _us(t_ns: int) -> float:
    return t_ns / 1000


def perfetto_events(trace: Trace) -> list[dict[str, Any]]:
    """The trace's rows as Trace Event dicts: metadata first, then every track's events in time order."""
    rows = trace.rows
    end = max((row.t_ns for row in rows), default=0)
    nodes: dict[str, _Node] = {}
    timed: list[tuple[int, int, int, dict[str, Any]]] = []  # (ts_ns, order, tie, event): sorted once at the end
    spans: list[tuple[_Node, _Span]] = []  # closed spans

    def node_of(name: str) -> _Node:
        found = nodes.get(name)
        if found is None:
            found = nodes[name] = _Node(len(nodes) + 1)
        return found

    def close(node: _Node, span: _Span, t_ns: int, why: str) -> None:
        span.end_ns, span.ended = t_ns, why
        spans.append((node, span))

    def track(node: _Node, entity: tuple[str, str], lane: int) -> int:
        tid = node.tracks.get((*entity, lane))
        if tid is None:
            tid = node.tracks[(*entity, lane)] = NET_TID + 1 + len(node.tracks)
        return tid

    def close_all(node: _Node, t_ns: int, why: str) -> None:
        for lanes in node.lanes.values():
            for lane, span in enumerate(lanes):
                if span is not None:
                    close(node, span, t_ns, why)
                    lanes[lane] = None
        if node.paused is not None:
            close(node, node.paused, t_ns, why)
            node.paused = None

    for row in rows:
        node = node_of(row.node)
        kind = row.kind
        actor, key = row.get("actor"), row.get("key")
        entity = (str(actor), str(key)) if actor is not None and key is not None else None
        if entity is not None and kind == "activation.started":
            lanes = node.lanes.setdefault(entity, [])
            lane = next((i for i, held in enumerate(lanes) if held is None), len(lanes))  # the first lane not running
            span = _Span(_key_label(*entity), "activation", track(node, entity, lane), row.t_ns, _args(row))
            if lane == len(lanes):
                lanes.append(span)
            else:
                lanes[lane] = span
            continue
        if entity is not None and kind in ("activation.ended", "activation.failed"):
            lanes = node.lanes.get(entity, [])
            running = [i for i, held in enumerate(lanes) if held is not None]
            same = [i for i in running if lanes[i].args.get("lease") == row.get("lease")]  # type: ignore[union-attr]
            if running:
                lane = (same or running)[0]
                ending = lanes[lane]
                assert ending is not None
                lanes[lane] = None
                ending.args["end"] = _args(row)
                close(node, ending, row.t_ns, str(row.get("reason")) if kind == "activation.ended" else f"failed: {row.get('error')}")
                continue
        if kind in ("fault.crash", "node.stopped"):
            close_all(node, row.t_ns, "crash" if kind == "fault.crash" else "stopped")
            if kind == "fault.crash" and node.down is None:
                node.down = _Span("down", "fault", NODE_TID, row.t_ns, _args(row))
        elif kind == "fault.restart" and node.down is not None:
            close(node, node.down, row.t_ns, "restart")
            node.down = None
        elif kind == "fault.pause" and node.paused is None:
            node.paused = _Span("paused", "fault", NODE_TID, row.t_ns, _args(row))
        elif kind == "fault.resume" and node.paused is not None:
            close(node, node.paused, row.t_ns, "resumed")
            node.paused = None
        if kind in ("net.sent", "net.delivered", "net.dropped"):
            continue  # drawn below, as frames with their flows
        tid = track(node, entity, 0) if entity is not None else NODE_TID
        timed.append((row.t_ns, 1, row.seq, {"ph": "i", "s": "t", "name": kind, "cat": kind.split(".")[0],
                                             "pid": node.pid, "tid": tid, "ts": _us(row.t_ns), "args": _args(row)}))

    for node in nodes.values():
        close_all(node, end, "end of trace")
        if node.down is not None:
            close(node, node.down, end, "end of trace")
    for node, span in spans:
        assert span.end_ns is not None
        dur_ns = span.end_ns - span.start_ns
        event = {"ph": "X", "name": span.name, "cat": span.cat, "pid": node.pid, "tid": span.tid,
                 "ts": _us(span.start_ns), "dur": _us(dur_ns), "args": span.args | {"ended": span.ended}}
        timed.append((span.start_ns, 0, -dur_ns, event))  # a parent before what it holds

    by_seq = {row.seq: row for row in rows}
    for flow, arrow in enumerate(frame_arrows(trace), 1):
        sent = by_seq.get(arrow.seq)
        src = node_of(arrow.src)
        label = arrow.tag or "frame"
        out: dict[str, Any] = {"ph": "X", "name": f"{label} to {arrow.dst}", "cat": "net", "pid": src.pid, "tid": NET_TID,
                               "ts": _us(arrow.sent_ns), "dur": 0, "args": _args(sent) if sent is not None else {}}
        if arrow.dropped is not None:
            out["args"] = out["args"] | {"dropped": arrow.dropped}
        if arrow.arrived_ns is not None:  # it reached the receiver (which may have dropped it: then the arrow ends there)
            out |= {"bind_id": flow, "flow_out": True}
            dst = node_of(arrow.dst)
            lost = f" dropped ({arrow.dropped})" if arrow.dropped is not None else ""
            timed.append((arrow.arrived_ns, 2, flow, {
                "ph": "X", "name": f"{label} from {arrow.src}{lost}", "cat": "net", "pid": dst.pid, "tid": NET_TID,
                "ts": _us(arrow.arrived_ns), "dur": 0, "bind_id": flow, "flow_in": True,
                "args": {"src": arrow.src, "frame": arrow.tag, "sent_us": _us(arrow.sent_ns), "dropped": arrow.dropped}}))
        timed.append((arrow.sent_ns, 2, flow, out))

    meta: list[dict[str, Any]] = []
    for name, node in nodes.items():
        meta.append({"ph": "M", "name": "process_name", "pid": node.pid, "args": {"name": name}})
        meta.append({"ph": "M", "name": "process_sort_index", "pid": node.pid, "args": {"sort_index": node.pid}})
        threads = [(NODE_TID, "node"), (NET_TID, "net")] + [
            (tid, _key_label(actor, key) + (f" #{lane + 1}" if lane else "")) for (actor, key, lane), tid in node.tracks.items()
        ]
        for tid, label in threads:
            meta.append({"ph": "M", "name": "thread_name", "pid": node.pid, "tid": tid, "args": {"name": label}})
            meta.append({"ph": "M", "name": "thread_sort_index", "pid": node.pid, "tid": tid, "args": {"sort_index": tid}})
    timed.sort(key=lambda item: item[:3])
    return meta + [event for *_, event in timed]


def _args(row: Row) -> dict[str, Any]:
    out = plain(row.fields)
    assert isinstance(out, dict)
    return out | {"wall_us": row.wall_us}


def write_perfetto(trace: Trace, path: str | Path, events: Iterable[dict[str, Any]] | None = None) -> None:
    """Write ``{"traceEvents": [...], "displayTimeUnit": "ms"}`` to ``path``."""
    with open(path, "w", encoding="utf-8") as out:
        json.dump({"traceEvents": list(events) if events is not None else perfetto_events(trace), "displayTimeUnit": "ms"}, out)
