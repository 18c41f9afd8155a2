"""The vocabulary of the cluster's protocol cores: inputs in, outputs out, no I/O.

Every protocol core (membership, replication, handoff, cron claims) is a plain object
that is fed inputs — a frame arrived, a timer fired, the application asked for
something — together with the current monotonic time, and returns outputs: frames to
send, timers to set or cancel, and facts to report. The asyncio driver (one per node)
performs the outputs; the simulator and TCP drive the very same objects, and unit tests
drive them line by line, with no loop at all.
"""

from __future__ import annotations

# Outputs are built per frame and per write, and a frozen dataclass pays a call of
# object.__setattr__ per field to be built: these are slotted but not frozen. Treat them
# as values all the same: nothing changes an output once a core returned it.

from dataclasses import dataclass
from typing import Any

__all__ = ["Send", "SetTimer", "CancelTimer", "Report", "Output"]


@dataclass(slots=True)
class Send:
    """Send ``frame`` (a frozen dataclass of the core's protocol) to node ``to``."""

    to: str
    frame: Any


@dataclass(slots=True)
class SetTimer:
    """(Re)arm the core's timer ``name`` to fire at monotonic time ``at`` (seconds); the driver calls back ``timer(name)``."""

    name: str
    at: float


@dataclass(slots=True)
class CancelTimer:
    """Disarm the core's timer ``name`` if it is set."""

    name: str


@dataclass(slots=True)
class Report:
    """A fact for the node and its observer (a member changed status, an epoch was won, ...)."""

    event: Any


Output = Send | SetTimer | CancelTimer | Report
