"""Time as the views show it: the x-axis unit, short durations, the trace's end, each node's wall clock.

Pure functions of a trace (no matplotlib): the charts, the explorer and the notebooks' checks
read time through these, so a label, a picture and an assertion say the same number.
"""

from __future__ import annotations

import bisect
import statistics
from dataclasses import dataclass
from datetime import datetime, timezone

from sim.trace import Trace

__all__ = ["TimeUnit", "time_unit", "fmt_duration", "fmt_signed", "end_ns", "WallMap", "wall_clock_name"]


@dataclass(frozen=True, slots=True)
class TimeUnit:
    """The x-axis unit: its name and how many seconds it holds."""

    name: str
    seconds: float

    def x(self, t_ns: float) -> float:
        return t_ns / 1e9 / self.seconds


def time_unit(span_s: float) -> TimeUnit:
    """Seconds up to 2 min, minutes up to 2 h, hours up to 3 days, then days."""
    if span_s <= 120:
        return TimeUnit("s", 1.0)
    if span_s <= 2 * 3600:
        return TimeUnit("min", 60.0)
    if span_s <= 3 * 86400:
        return TimeUnit("h", 3600.0)
    return TimeUnit("d", 86400.0)


def fmt_duration(seconds: float) -> str:
    """A short human duration in the largest unit that keeps it round: '250 ms', '90 s', '1 min', '2.5 h', '1 d'."""
    sign = "-" if seconds < 0 else ""
    s = abs(seconds)
    units = (("d", 86400.0), ("h", 3600.0), ("min", 60.0), ("s", 1.0), ("ms", 1e-3))
    for name, size in units:
        value = s / size
        if 1 <= value < 1000 and abs(value * 10 - round(value * 10)) < 1e-6:
            return f"{sign}{value:g} {name}"
    for name, size in units:  # not round in any unit: the largest unit it reaches, 3 digits
        if s >= size:
            return f"{sign}{s / size:.3g} {name}"
    return f"{sign}{s * 1e6:.3g} µs"


def fmt_signed(seconds: float) -> str:
    return ("+" if seconds >= 0 else "") + fmt_duration(seconds)


def end_ns(trace: Trace) -> int:
    """The latest true time in the trace (rows are normally in time order; this does not rely on it)."""
    return max((row.t_ns for row in trace.rows), default=0)


class WallMap:
    """Each node's wall clock as an offset from true time, piecewise constant between rows.

    The offset of a node is ``wall_us - t_ns/1000`` of its rows; a ``clock.step`` adds its
    ``delta_us`` to the offset just before it (whatever wall time the step row itself carries).
    ``origin_us`` is the wall time at true time 0 of the reference clock: the median of every
    node's first offset, so a single skewed node does not move everyone's axis.
    """

    def __init__(self, trace: Trace) -> None:
        self._points: dict[str, list[tuple[int, int, int]]] = {}  # node -> [(t_ns, seq, offset_us)]
        firsts: list[int] = []
        for row in trace.rows:
            points = self._points.setdefault(row.node, [])
            if row.kind == "clock.step":
                before = points[-1][2] if points else None
                if before is not None:
                    points.append((row.t_ns, row.seq, before + int(row.get("delta_us", 0) or 0)))
                continue
            if row.wall_us is None:
                continue
            offset = row.wall_us - row.t_ns // 1000
            if not points:
                firsts.append(offset)
            points.append((row.t_ns, row.seq, offset))
        self.origin_us: int | None = int(statistics.median_low(firsts)) if firsts else None

    def offset_at(self, node: str, t_ns: int, seq: int | None = None) -> int:
        """The node's wall-minus-true offset (µs) at ``t_ns`` (just before row ``seq`` if given)."""
        points = self._points.get(node) or []
        if not points:
            return self.origin_us or 0
        probe = (t_ns, seq if seq is not None else 1 << 62)
        i = bisect.bisect_left(points, probe, key=lambda p: (p[0], p[1])) if seq is not None else bisect.bisect_right(points, probe, key=lambda p: (p[0], p[1]))
        return points[max(i - 1, 0)][2]

    def wall_us(self, node: str, t_ns: int, seq: int | None = None) -> int:
        return t_ns // 1000 + self.offset_at(node, t_ns, seq)



def wall_clock_name(origin_us: int | None) -> str:
    if origin_us is None:
        return "start"
    return datetime.fromtimestamp(origin_us / 1e6, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
