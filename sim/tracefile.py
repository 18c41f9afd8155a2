"""Trace files: JSON lines from a simulated run or from real nodes, read back as one list of rows.

Every line is one JSON object with the row's ``node`` (who recorded it), ``wall_us`` (that
node's wall clock, µs since the epoch, or null), ``kind`` and ``fields`` (an object). Two
worlds write it:

* ``Trace.to_jsonl`` (a simulated run) adds ``seq`` and ``t_ns``, the true time;
* ``python -m casty node --trace FILE`` (a real node, ``casty._core.factlog``) writes the facts it
  prints, one per line, stamped with its wall clock. A real cluster has no true time, so
  ``t_ns`` is read from the wall clocks: nanoseconds since the earliest ``wall_us`` of all
  the files given (nodes on one machine share its clock; across machines, their skew shows).

Several files (one per node) are merged by time into one trace, each file's lines keeping
their order (``heapq.merge``: a clock stepped back on one node does not reorder its own
rows); ties keep the order the files were given. ``seq`` is numbered afresh.

A real node's facts are named as the node prints them; three of them are read in the
simulator's words, so the same views draw both worlds: ``ready`` is ``node.started``
(its ``incarnation`` is the life's number in the file, 1, 2, ..., as in the simulator; the
membership incarnation the node printed, a wall-clock number, is ``member_incarnation``);
``stopped`` is ``node.stopped`` (an orderly leave) or ``fault.crash`` (``orderly`` false);
and a life that ends without ``stopped`` (the process was killed, ``kill -9``) gets a
``fault.crash`` row at its last line, with ``inferred`` saying so. If the same file then
has another ``ready`` (the node was started again with the same ``--trace`` file: the flag
appends), a ``fault.restart`` row comes before that life's ``node.started``. A file still
being written reads as a node killed at its last line.

Lines a kill cut short: a last line without its newline that is not JSON is left out (and
listed in ``torn``); any other bad line raises ``TraceFileError`` naming the file, the line
and what is wrong.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from sim.trace import Row

__all__ = ["TraceFileError", "load_rows", "read_lines"]


class TraceFileError(ValueError):
    """A trace file's line is not a row: ``path`` and ``line`` (1-based) say where, the message what."""

    def __init__(self, path: str, line: int, problem: str) -> None:
        super().__init__(f"{path}:{line}: {problem}")
        self.path = path
        self.line = line
        self.problem = problem


# (t_ns or None, node, wall_us, kind, fields, line number) of one file, in file order
_Line = tuple[int | None, str, int | None, str, dict[str, Any], int]


def read_lines(path: str | Path, torn: list[tuple[str, int]] | None = None) -> list[_Line]:
    """The rows of one file, checked; a torn last line is left out (and appended to ``torn``)."""
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise TraceFileError(name, text_line(Path(path).read_bytes(), exc.start), f"not UTF-8 ({exc.reason})") from None
    except OSError as exc:
        raise TraceFileError(name, 0, f"cannot read it: {exc.strerror or exc}") from None
    lines = text.split("\n")
    out: list[_Line] = []
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        last = number == len(lines)  # no newline after it: the writer may have been killed mid-line
        try:
            data = json.loads(raw)
        except ValueError as exc:
            if last:
                if torn is not None:
                    torn.append((name, number))
                continue
            raise TraceFileError(name, number, f"not JSON ({exc})") from None
        out.append(_check(name, number, data))
    return out


def text_line(data: bytes, offset: int) -> int:
    """The 1-based line of byte ``offset``."""
    return data.count(b"\n", 0, offset) + 1


def _check(path: str, number: int, data: Any) -> _Line:
    if not isinstance(data, dict):
        raise TraceFileError(path, number, f"not a JSON object: {json.dumps(data)[:80]}")
    missing = [name for name in ("node", "wall_us", "kind", "fields") if name not in data]
    if missing:
        raise TraceFileError(path, number, f"missing {', '.join(repr(m) for m in missing)} (a row has node, wall_us, kind, fields)")
    node, wall_us, kind, fields, t_ns = data["node"], data["wall_us"], data["kind"], data["fields"], data.get("t_ns")
    if not isinstance(node, str) or not node:
        raise TraceFileError(path, number, f"'node' must be a non-empty string, got {json.dumps(node)}")
    if not isinstance(kind, str) or not kind:
        raise TraceFileError(path, number, f"'kind' must be a non-empty string, got {json.dumps(kind)}")
    if wall_us is not None and (type(wall_us) is not int):
        raise TraceFileError(path, number, f"'wall_us' must be an integer (µs since the epoch) or null, got {json.dumps(wall_us)}")
    if not isinstance(fields, dict):
        raise TraceFileError(path, number, f"'fields' must be a JSON object, got {json.dumps(fields)[:80]}")
    if t_ns is not None and (type(t_ns) is not int or t_ns < 0):
        raise TraceFileError(path, number, f"'t_ns' must be a non-negative integer, got {json.dumps(t_ns)}")
    if t_ns is None and wall_us is None:
        raise TraceFileError(path, number, "a row without 't_ns' (a real node's) needs its 'wall_us'")
    return (t_ns, node, wall_us, kind, fields, number)


def load_rows(paths: Iterable[str | Path], torn: list[tuple[str, int]] | None = None) -> tuple[list[Row], bool]:
    """Every file's rows, merged by time into one list (see the module docstring); and whether they are a simulated run's."""
    files = [(str(p), read_lines(p, torn)) for p in paths]
    simulated = {name: any(line[0] is not None for line in lines) for name, lines in files}
    for name, lines in files:
        if simulated[name]:
            bad = next((line for line in lines if line[0] is None), None)
            if bad is not None:
                raise TraceFileError(name, bad[5], "no 't_ns', though other rows of this file have one")
    if len(set(simulated.values())) > 1:
        sim_file = next(n for n, s in simulated.items() if s)
        real_file = next(n for n, s in simulated.items() if not s)
        raise TraceFileError(real_file, 1, f"a real node's file (no 't_ns') cannot be merged with a simulated run's ({sim_file})")
    walls = [line[2] for _, lines in files for line in lines if line[2] is not None]
    origin = min(walls, default=0)
    streams: list[list[tuple[int, str, int | None, str, dict[str, Any]]]] = []
    for name, lines in files:
        if simulated[name]:
            streams.append([(line[0] or 0, line[1], line[2], line[3], line[4]) for line in lines])
        else:
            streams.append(list(_real_rows(lines, origin)))
    merged = heapq.merge(*streams, key=lambda item: item[0])
    rows = [Row(seq, t_ns, node, wall_us, kind, fields) for seq, (t_ns, node, wall_us, kind, fields) in enumerate(merged)]
    return rows, all(simulated.values())


def _life_starts(lines: list[_Line]) -> set[int]:
    """The index of each life's first line: its ``ready``, or the node's reports of itself just before it.

    A starting node sees itself alive (``member.changed`` of its own id, at the new
    incarnation) before it prints ``ready``; those lines belong to the new life, so a crash
    inferred for the life before is placed before them, not after.
    """
    starts = set()
    for j, (_, node, _, kind, fields, _) in enumerate(lines):
        if kind != "ready":
            continue
        i = j
        while i > 0 and lines[i - 1][3] == "member.changed" and lines[i - 1][4].get("node") == node \
                and lines[i - 1][4].get("incarnation") == fields.get("incarnation"):
            i -= 1
        starts.add(i)
    return starts


def _real_rows(lines: list[_Line], origin_us: int) -> Iterator[tuple[int, str, int | None, str, dict[str, Any]]]:
    """A real node's facts in the simulator's words, with the crashes and restarts they imply."""
    starts = _life_starts(lines)
    alive = False  # between a life's start and its stopped
    crashed = False  # the life before ended in a crash (stated or inferred)
    last: tuple[int, str, int | None] | None = None  # (t_ns, node, wall_us) of the life's last row
    life = 0
    for index, (_, node, wall_us, kind, fields, _number) in enumerate(lines):
        assert wall_us is not None  # _check: a real row has its wall time
        t_ns = (wall_us - origin_us) * 1000
        if index in starts:
            if alive and last is not None:
                yield (*last, "fault.crash", {"incarnation": life, "inferred": "no stopped fact before the next start"})
                crashed = True
            life += 1
            if crashed:
                yield (t_ns, node, wall_us, "fault.restart", {"incarnation": life})
            alive, crashed = True, False
        if kind == "ready":
            kind = "node.started"
            fields = {**fields, "incarnation": life, "member_incarnation": fields.get("incarnation")}
        elif kind == "stopped":
            alive, crashed = False, not fields.get("orderly", True)
            kind = "fault.crash" if crashed else "node.stopped"
            fields = {"incarnation": life, **fields}
        yield (t_ns, node, wall_us, kind, fields)
        last = (t_ns, node, wall_us)
    if alive and last is not None:
        yield (*last, "fault.crash", {"incarnation": life, "inferred": "the file ends without a stopped fact"})
