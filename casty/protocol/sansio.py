"""The vocabulary of the cluster's protocol cores: inputs in, outputs out, no I/O.

Every protocol core (membership, replication, handoff, cron claims) is a plain object
that is fed inputs — a frame arrived, a timer fired, the application asked for
something — together with the current monotonic time, and returns outputs: frames to
send, timers to set or cancel, and facts to report. The asyncio driver (one per node)
performs the outputs; the simulator and TCP drive the very same objects, and unit tests
drive them line by line, with no loop at all.
"""

from __future__ import annotations

# Outputs are built per frame and per write: msgspec Structs, whose constructor is C (a
# dataclass's is a Python function, and a frozen one pays an object.__setattr__ per field).
# Treat them as values: nothing changes an output once a core returned it.

from typing import Any

import msgspec

__all__ = ["Send", "SetTimer", "CancelTimer", "Report", "Output"]


class Send(msgspec.Struct):
    """Send ``frame`` (a frame of the core's protocol: a frozen dataclass or Struct) to node ``to``."""

    to: str
    frame: Any


class SetTimer(msgspec.Struct):
    """(Re)arm the core's timer ``name`` to fire at monotonic time ``at`` (seconds); the driver calls back ``timer(name)``."""

    name: str
    at: float


class CancelTimer(msgspec.Struct):
    """Disarm the core's timer ``name`` if it is set."""

    name: str


class Report(msgspec.Struct):
    """A fact for the node and its observer (a member changed status, an epoch was won, ...)."""

    event: Any


Output = Send | SetTimer | CancelTimer | Report
