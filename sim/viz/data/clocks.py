"""Clock offsets read from a trace: how far each node's wall clock is from true time, at each of its rows (no matplotlib).

Every trace row carries the true time (``t_ns``) and the wall clock of the node that recorded it
(``wall_us``), so the offset ``wall - (start + t)`` of a node is known at each of its rows with no
model of the clock at all. The clock chart (``sim.viz.clocks``) draws these lines; which lines lie
on each other (drawn as one, named for all) and how far two agree are decided here too.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from casty.clock import to_us

from sim.trace import Trace
from sim.world import DEFAULT_START

__all__ = ["ClockDrift", "ClockStep", "clock_drifts", "clock_offsets", "clock_steps", "coincident_groups", "agreement", "offset_between", "offset_at"]

MAX_POINTS = 4000  # per node: a day of heartbeats would otherwise draw millions of points on a few hundred pixels


def clock_offsets(trace: Trace, *, start: datetime = DEFAULT_START) -> dict[str, list[tuple[int, int]]]:
    """Per node, ``[(t_ns, offset_us)]`` at its rows (consecutive equal offsets kept at their ends only).

    ``start`` is the world's start (``World(start=)``): a node whose clock is exact reads
    ``start + t``. Rows without a wall clock (the world's own notes) are skipped.
    """
    epoch_us = to_us(start)
    out: dict[str, list[tuple[int, int]]] = {}
    for row in trace.rows:
        if row.wall_us is None:
            continue
        offset = row.wall_us - epoch_us - row.t_ns // 1000
        points = out.setdefault(row.node, [])
        if row.kind == "clock.step":  # the row is stamped after the jump: the clock read the old offset up to this instant
            points.append((row.t_ns, offset - int(row.get("delta_us", 0) or 0)))
            points.append((row.t_ns, offset))
            continue
        if len(points) >= 2 and points[-1][1] == offset and points[-2][1] == offset:
            points[-1] = (row.t_ns, offset)  # a flat run: move its end, keep its start
        else:
            points.append((row.t_ns, offset))
    for node, points in out.items():
        if len(points) > MAX_POINTS:
            every = len(points) // MAX_POINTS + 1
            steps = {i for i in range(1, len(points)) if abs(points[i][1] - points[i - 1][1]) > 1000}
            keep = sorted(set(range(0, len(points), every)) | steps | {i - 1 for i in steps} | {len(points) - 1})
            out[node] = [points[i] for i in keep]
    return out


def coincident_groups(lines: list[list[tuple[int, int]]], tolerance: int) -> list[list[int]]:
    """Indices of ``lines`` grouped so that the lines of a group agree everywhere they both exist (first one leads)."""
    groups: list[list[int]] = []
    for i, points in enumerate(lines):
        for group in groups:
            if agreement(lines[group[0]], points, tolerance) == 1.0:
                group.append(i)
                break
        else:
            groups.append([i])
    return groups


def agreement(a: list[tuple[int, int]], b: list[tuple[int, int]], tolerance: int) -> float:
    """The share (0 to 1) of the common time span where offset lines ``a`` and ``b`` are within ``tolerance`` µs."""
    first, last = max(a[0][0], b[0][0]), min(a[-1][0], b[-1][0])
    if last < first:
        return 0.0
    samples = sorted({first, last, *(first + (last - first) * k // 200 for k in range(201)),
                      *(t for t, _ in a if first <= t <= last), *(t for t, _ in b if first <= t <= last)})
    close = sum(1 for t in samples if abs(offset_between(a, t) - offset_between(b, t)) <= tolerance)
    return close / len(samples)


def offset_between(points: list[tuple[int, int]], t_ns: int) -> float:
    """The line's offset at ``t_ns`` as drawn: straight between its points, the value after a step at that instant."""
    before = points[0]
    for point in points:
        if point[0] > t_ns:
            if point[0] == before[0]:
                return float(before[1])
            return before[1] + (point[1] - before[1]) * (t_ns - before[0]) / (point[0] - before[0])
        before = point
    return float(before[1])


def offset_at(points: list[tuple[int, int]], t_ns: int) -> int:
    """The offset a node's clock had just after ``t_ns`` (after a step at that instant)."""
    here = points[0][1]
    for t, offset in points:
        if t > t_ns:
            break
        here = offset
    return here


@dataclass(frozen=True, slots=True)
class ClockStep:
    """A ``clock.step`` of a node: when (true time) and by how much its wall clock jumped (s; negative: back)."""

    t_ns: int
    delta_s: float


@dataclass(frozen=True, slots=True)
class ClockDrift:
    """A ``clock.drift`` of a node: when (true time) its clock started to drift, and at what rate (ppm)."""

    t_ns: int
    ppm: float


def clock_steps(trace: Trace, node: str) -> tuple[ClockStep, ...]:
    """The clock steps of ``node``, in trace order (the chart marks each with a triangle and its amount)."""
    return tuple(ClockStep(row.t_ns, int(row.get("delta_us", 0) or 0) / 1e6) for row in trace.of("clock.step", node=node))


def clock_drifts(trace: Trace, node: str) -> tuple[ClockDrift, ...]:
    """The drift changes of ``node``, in trace order (the chart marks each with a ring and its rate)."""
    return tuple(ClockDrift(row.t_ns, float(row.get("drift_ppm", 0.0) or 0.0)) for row in trace.of("clock.drift", node=node))
