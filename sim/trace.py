"""The trace: one row per event of a simulated run, and its exports.

A row is (true time, node, the node's wall time, kind, fields). Rows come from casty's
observer events (``activation.started``, ``schedule.fired``, ...) plus the world's own
(``fault.crash``, ``net.delivered``, ``clock.step``, ...). Views and checks read traces and
nothing else, so anything a figure shows can be traced back to a row.

A row's fields are its event's (``casty.observer``). One kind has two shapes: a
``message.dropped`` row has ``actor``, ``key``, ``message`` (its type name) and ``reason``, and
the drop of a schedule's firing (its handler failed, or its mailbox died or was full) adds
``schedule`` (a persisted schedule's name, a node schedule's reference) and ``due_us`` (the
occurrence's due time, a node schedule's tick), so a reader can tell which firing of a
``FireAll`` burst was lost (``sim.ledger`` does). Rows of traces recorded before the extra
fields lack them; the other drops never carry them.

Determinism is checked on the trace: ``digest()`` hashes a canonical encoding of every row,
so two runs of a scenario with the same seed must give the same digest on any machine.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from casty.observer import Event, event_fields

__all__ = ["Mutable", "Row", "Trace", "plain"]


class Mutable(Protocol):
    """What an observer made by ``Trace.observer`` asks before recording: is its source muted."""

    muted: bool


@dataclass(frozen=True, slots=True)
class Row:
    """One event: ``t_ns`` true simulated time (ns), ``wall_us`` the node's wall clock (µs since the epoch)."""

    seq: int
    t_ns: int
    node: str
    wall_us: int | None
    kind: str
    fields: Mapping[str, Any] = field(default_factory=dict)

    @property
    def t(self) -> float:
        """True time in seconds since the start of the run."""
        return self.t_ns / 1e9

    def get(self, name: str, default: Any = None) -> Any:
        return self.fields.get(name, default)

    def as_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "t_ns": self.t_ns, "node": self.node, "wall_us": self.wall_us, "kind": self.kind, **plain(self.fields)}


def plain(value: Any) -> Any:
    """Fields as JSON-ready values (tuples become lists, mappings keep their order)."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


class Trace:
    """An append-only list of rows with selection helpers and exports."""

    def __init__(self, rows: Iterable[Row] = (), *, keep: Callable[[str], bool] | None = None) -> None:
        self.rows: list[Row] = list(rows)
        self._listeners: list[Callable[[Row], None]] = []
        self._keep = keep
        self._kept: dict[str, bool] = {}  # keep's answer per kind, asked once
        self.counts: dict[str, int] = {}  # every event seen, kept or not, by kind
        for row in self.rows:  # rows handed in (a loaded file) were seen too: count them, or counts reads {}
            self.counts[row.kind] = self.counts.get(row.kind, 0) + 1
        self.torn: list[tuple[str, int]] = []  # (file, line) of last lines a kill cut short (from_jsonl)
        self.time_axis = "true time"  # what t_ns measures; a real cluster's files have only wall clocks (from_jsonl)

    # --- recording -------------------------------------------------------------------

    def add(self, t_ns: int, node: str, wall_us: int | None, kind: str, fields: Mapping[str, Any]) -> Row | None:
        """Append a row (or only count it, when ``keep`` says this kind is not kept)."""
        self.counts[kind] = self.counts.get(kind, 0) + 1
        if self._keep is not None and not self.keeps(kind):
            return None
        return self._append(t_ns, node, wall_us, kind, dict(fields))

    def _append(self, t_ns: int, node: str, wall_us: int | None, kind: str, fields: dict[str, Any]) -> Row:
        row = Row(len(self.rows), t_ns, node, wall_us, kind, fields)
        self.rows.append(row)
        for listener in self._listeners:
            listener(row)
        return row

    def add_event(self, t_ns: int, node: str, wall: Callable[[], int], event: Event) -> Row | None:
        """Append a runtime event; ``wall`` reads the node's wall clock, only for rows that are kept."""
        kind = event.kind
        counts = self.counts
        counts[kind] = counts.get(kind, 0) + 1
        if self._keep is not None:
            kept = self._kept.get(kind)  # keeps(kind), inline: once per event
            if kept is None:
                kept = self.keeps(kind)
            if not kept:
                return None
        return self._append(t_ns, node, wall(), kind, event_fields(event))

    def observer(
        self, node: str, source: Mutable, now_ns: Callable[[], int], wall: Callable[[], int]
    ) -> Callable[[Event], None]:
        """An observer for one node's runtime: ``add_event(now_ns(), node, wall, event)`` unless ``source.muted``.

        Counting and the keep test run in the observer's own frame (a simulated run hands over
        millions of events, most only counted); the clocks are read only for rows that are kept.
        """

        def observe(event: Event) -> None:
            if source.muted:
                return
            kind = event.kind
            counts = self.counts
            counts[kind] = counts.get(kind, 0) + 1
            if self._keep is not None:
                kept = self._kept.get(kind)
                if kept is None:
                    kept = self.keeps(kind)
                if not kept:
                    return
            self._append(now_ns(), node, wall(), kind, event_fields(event))

        return observe

    def keeps(self, kind: str) -> bool:
        """Whether rows of this kind are stored (not only counted)."""
        kept = self._kept.get(kind)
        if kept is None:
            kept = self._kept[kind] = self._keep is None or bool(self._keep(kind))
        return kept

    def subscribe(self, listener: Callable[[Row], None]) -> None:
        """Call ``listener(row)`` for every row added from now on (live views)."""
        self._listeners.append(listener)

    # --- reading ---------------------------------------------------------------------

    def __iter__(self) -> Iterator[Row]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> Row:
        return self.rows[index]

    def of(self, *kinds: str, node: str | None = None, **match: Any) -> list[Row]:
        """Rows of the given kinds (a kind ending in '.' or '*' is a prefix), optionally on one node and with field values."""
        out = []
        for row in self.rows:
            if kinds and not any(_kind_matches(row.kind, k) for k in kinds):
                continue
            if node is not None and row.node != node:
                continue
            if any(row.fields.get(name) != value for name, value in match.items()):
                continue
            out.append(row)
        return out

    def nodes(self) -> list[str]:
        """Node names in order of first appearance."""
        seen: dict[str, None] = {}
        for row in self.rows:
            seen.setdefault(row.node, None)
        return list(seen)

    @property
    def end_ns(self) -> int:
        return self.rows[-1].t_ns if self.rows else 0

    # --- exports ---------------------------------------------------------------------

    def digest(self) -> str:
        """SHA-256 over the canonical JSON of every row: equal for equal runs, on any machine."""
        h = hashlib.sha256()
        for row in self.rows:
            h.update(json.dumps(row.as_dict(), sort_keys=True, separators=(",", ":")).encode())
            h.update(b"\n")
        return h.hexdigest()

    def to_jsonl(self, path: str | Path) -> None:
        """One row per line: ``{"seq", "t_ns", "node", "wall_us", "kind", "fields": {...}}`` (``from_jsonl`` reads it back).

        The fields stay apart from the row's own names, so a field called ``node`` (the
        member of ``member.changed``) does not overwrite the recording node.
        """
        with open(path, "w", encoding="utf-8") as out:
            for row in self.rows:
                line = {"seq": row.seq, "t_ns": row.t_ns, "node": row.node, "wall_us": row.wall_us, "kind": row.kind,
                        "fields": plain(row.fields)}
                out.write(json.dumps(line, separators=(",", ":")) + "\n")

    @classmethod
    def from_jsonl(cls, *paths: str | Path) -> Trace:
        """One trace from JSON-lines files: a simulated run's (``to_jsonl``) or real nodes' (``python -m casty node --trace``).

        See ``sim.tracefile`` for the two shapes, how several nodes' files are merged by time
        and what a file that ends without ``stopped`` means. A bad line raises
        ``TraceFileError`` naming the file and the line.
        """
        from sim.tracefile import load_rows  # the loader's module imports this one

        torn: list[tuple[str, int]] = []
        rows, simulated = load_rows(paths, torn)
        trace = cls(rows)
        trace.torn = torn
        if not simulated:
            trace.time_axis = "wall-clock time"
        return trace

    def to_perfetto(self, path: str | Path) -> None:
        """Chrome/Perfetto trace-event JSON: a process per node, a track per key, flows for frames (see ``sim.perfetto``)."""
        from sim.perfetto import write_perfetto  # the exporter's module imports this one

        write_perfetto(self, path)

    def __repr__(self) -> str:
        return f"<Trace {len(self.rows)} rows, {len(self.nodes())} nodes, {self.end_ns / 1e9:g} s>"


def _kind_matches(kind: str, pattern: str) -> bool:
    if pattern.endswith("*"):
        return kind.startswith(pattern[:-1])
    if pattern.endswith("."):
        return kind.startswith(pattern)
    return kind == pattern
