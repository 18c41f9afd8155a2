"""Messages between nodes, paired from a trace: each ``net.sent`` row with the row where it arrived.

The space-time diagram draws these pairs as arrows and the Perfetto export as flow arrows, so
the pairing lives here once, without matplotlib. Two worlds record frames differently:

* the simulated network knows each frame's flight time: its ``net.sent`` row carries
  ``delay_ns``, and the receiver's ``net.delivered`` (or ``net.dropped`` with ``src``) row is
  at exactly send time + delay, so a frame is found by ``(src, dst, arrival time)``;
* a real node (``python -m casty node --facts net.sent,net.delivered``) cannot know when its
  frame will arrive; both ends record ``crc``, the CRC-32 of the frame's bytes, and a frame
  is found by ``(src, dst, crc)``, first sent first received (TCP keeps a link's order, so
  two equal frames on one link pair in order). A real frame sent and never received (the
  receiver was killed, or the connection dropped it) ends as ``dropped="never arrived"``.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.trace import Row, Trace

__all__ = ["FrameArrow", "frame_arrows"]


@dataclass(frozen=True, slots=True)
class FrameArrow:
    """One frame: sent by ``src`` at ``sent_ns`` to ``dst``; ``arrived_ns`` None when it was dropped at the sender.

    ``seq`` is the ``seq`` of the sent row (the frame's identity in the trace, e.g. a flow id).
    """

    src: str
    dst: str
    tag: str | None
    sent_ns: int
    arrived_ns: int | None
    dropped: str | None  # the drop reason, or None when it was handed to the receiver
    seq: int = -1


def _sent_key(row: Row) -> tuple[str, str, object]:
    if "crc" in row.fields:
        return (row.node, str(row.get("dst")), ("crc", row.get("crc")))
    return (row.node, str(row.get("dst")), row.t_ns + int(row.get("delay_ns", 0) or 0))


def _arrival_key(row: Row) -> tuple[str, str, object]:
    if "crc" in row.fields:
        return (str(row.get("src")), row.node, ("crc", row.get("crc")))
    return (str(row.get("src")), row.node, row.t_ns)


def frame_arrows(trace: Trace, start_ns: int = 0, end_ns_: int | None = None) -> list[FrameArrow]:
    """The frames sent within [start_ns, end_ns_] (default: to the last row), paired with their delivery (or drop) rows."""
    stop = end_ns_ if end_ns_ is not None else max((row.t_ns for row in trace.rows), default=0)
    in_flight: dict[tuple[str, str, object], list[Row]] = {}  # (src, dst, arrival time or crc) -> sent rows
    arrows: list[FrameArrow] = []
    last_delivery: dict[tuple[str, str, int], int] = {}  # (src, dst, arrival) -> arrow, for "no receiver" rows
    for row in trace.rows:
        kind = row.kind
        if kind == "net.sent":
            if start_ns <= row.t_ns <= stop:
                in_flight.setdefault(_sent_key(row), []).append(row)
        elif kind == "net.delivered" or (kind == "net.dropped" and row.get("src") is not None):
            waiting = in_flight.get(_arrival_key(row))
            if not waiting:
                continue
            sent = waiting.pop(0)
            src = sent.node
            dropped = None if kind == "net.delivered" else str(row.get("reason", "dropped"))
            arrows.append(FrameArrow(src, row.node, sent.get("frame"), sent.t_ns, row.t_ns, dropped, sent.seq))
            if kind == "net.delivered":
                last_delivery[(src, row.node, row.t_ns)] = len(arrows) - 1
        elif kind == "net.dropped" and start_ns <= row.t_ns <= stop:
            reason = str(row.get("reason", "dropped"))
            dst = str(row.get("dst"))
            if reason == "no receiver":  # recorded by the sender right after the delivery row: the frame reached a dead node
                i = last_delivery.pop((row.node, dst, row.t_ns), None)
                if i is not None:
                    a = arrows[i]
                    arrows[i] = FrameArrow(a.src, a.dst, a.tag, a.sent_ns, a.arrived_ns, reason, a.seq)
                continue
            arrows.append(FrameArrow(row.node, dst, row.get("frame"), row.t_ns, None, reason, row.seq))
    for (src, dst, _), rows in in_flight.items():
        for sent in rows:
            if "crc" in sent.fields:  # a real frame nobody recorded receiving
                arrows.append(FrameArrow(src, dst, sent.get("frame"), sent.t_ns, None, "never arrived", sent.seq))
    return sorted(arrows, key=lambda a: (a.sent_ns, a.src, a.dst))
