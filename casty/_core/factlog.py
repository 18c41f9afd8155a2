"""A node's facts kept in a file: ``python -m casty node --trace FILE``.

The node prints its facts on stdout for whoever reads them now; ``FactLog`` keeps the same
facts for later, one JSON object per line, in the shape a simulated run's trace has
(``sim.tracefile`` reads both, and merges several nodes' files into one trace, so the
simulator's views draw a real cluster)::

    {"node": "127.0.0.1:7001", "wall_us": 1767225600123456, "kind": "epoch.acquired",
     "fields": {"actor": "app:tally", "key": "k1", "epoch_round": 1, ...}}

``node`` is the node that recorded the fact (the ``by`` of a stdout fact; ``ready`` and
``stopped`` name the node itself), ``wall_us`` its wall clock when the fact was recorded
(the ``Clock`` port: the node's own clock), ``kind`` the fact's ``event`` and ``fields`` the
rest, apart from the row's own names (``member.changed`` has a ``node`` field: the member).

Each line goes to the file in one ``os.write`` on a file opened ``O_APPEND``, with no buffer
in the process: a ``kill -9`` loses no line already recorded, and at worst cuts the one
being written (the loader leaves a torn last line out). Appending, not truncating, keeps
every life of a node restarted with the same file (the loader reads the restarts from it).
The write is synchronous on purpose, like ``SQLiteStore``: a line is small, and no thread.
A failed write (disk full) is logged once and counted in ``lost``; the node keeps serving.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from typing import Any

from ..ports import Clock

__all__ = ["FactLog"]

log = logging.getLogger("casty.node")


class FactLog:
    """Append each fact of node ``node`` to the file at ``path`` as one JSON line stamped with ``clock``.

    Opening raises ``OSError`` (the path cannot be opened for appending) at once, so a bad
    ``--trace`` fails before the node starts.
    """

    def __init__(self, path: str, node: str, clock: Clock) -> None:
        self.path = path
        self.node = node
        self._clock = clock
        self.lost = 0
        self.written = 0
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def line(self, fact: Mapping[str, Any]) -> bytes:
        """The line of ``fact`` (a stdout fact: ``event``, its fields, maybe ``by``), stamped now."""
        fields = {name: value for name, value in fact.items() if name not in ("event", "by")}
        row = {"node": self.node, "wall_us": self._clock.now_us(), "kind": str(fact.get("event")), "fields": fields}
        return (json.dumps(row, default=repr, separators=(",", ":")) + "\n").encode()

    def record(self, fact: Mapping[str, Any]) -> None:
        """Write ``fact`` as one line now (never raises: a failed write is logged once and counted)."""
        if self._fd is None:
            self.lost += 1
            return
        data = self.line(fact)
        try:
            while data:
                done = os.write(self._fd, data)
                data = data[done:]
        except OSError as exc:
            if not self.lost:
                log.warning("%s: cannot write to the trace file %s: %s (facts not written are counted in FactLog.lost)",
                            self.node, self.path, exc.strerror or exc)
            self.lost += 1
            return
        self.written += 1

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __repr__(self) -> str:
        return f"<FactLog {self.node} {self.path!r} written={self.written} lost={self.lost}>"
