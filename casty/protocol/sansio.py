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

from collections.abc import Iterable
from typing import Any, Protocol

import msgspec

__all__ = ["Send", "SetTimer", "CancelTimer", "Report", "Output", "Performer", "perform"]


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


class Performer(Protocol):
    """What carries out a core's outputs: a driver on an event loop, a test's network, a test's heap.

    ``perform`` calls one method per output; the performer decides what sending, a timer or
    a report means where it runs. ``closed`` is read before every output: once it is true,
    the outputs left are dropped (a core's later outputs are for a driver that no longer is).
    """

    @property
    def closed(self) -> bool: ...

    def send(self, to: str, frame: Any) -> None: ...

    def set_timer(self, name: str, at: float) -> None: ...

    def cancel_timer(self, name: str) -> None: ...

    def report(self, event: Any) -> None: ...


def perform(outputs: Iterable[Output], performer: Performer) -> None:
    """Carry out ``outputs`` in order on ``performer``: the one dispatch of every core's outputs.

    Stops at the first output met while ``performer.closed``. Anything else than the four
    outputs is a bug in a core: ``TypeError`` naming it. The classes are compared by identity
    (outputs are final Structs, never subclassed), cheapest first for the owner of a key that
    writes: a write's frames, then its reports; this runs once per write of every key.
    """
    for output in outputs:
        if performer.closed:
            return
        if type(output) is Send:
            performer.send(output.to, output.frame)
        elif type(output) is Report:
            performer.report(output.event)
        elif type(output) is SetTimer:
            performer.set_timer(output.name, output.at)
        elif type(output) is CancelTimer:
            performer.cancel_timer(output.name)
        else:
            raise TypeError(f"a core returned {output!r}, which is not an output")
