"""Errors raised by the simulated world when the code it runs leaves the simulation's rules."""

from __future__ import annotations


class SimulationError(RuntimeError):
    """Base class: the simulation cannot go on as asked."""


class ForbiddenInSimulation(RuntimeError):
    """The code asked a VirtualLoop for something that would escape virtual time (threads, sockets, ...)."""


class Deadlock(SimulationError):
    """No simulated event is left, yet the awaited task is still pending: everyone waits on everyone."""

    def __init__(self, message: str, *, task: object = None, pending: list[tuple[str, str, str]] | None = None) -> None:
        super().__init__(message)
        self.task = task
        #: (loop name, task name, what it awaits) for every pending task of every loop of the world
        self.pending = pending or []


class Livelock(SimulationError):
    """A loop ran an unbounded number of callbacks without virtual time advancing."""

    def __init__(self, message: str, *, loop: str = "", now_ns: int = 0, top: list[tuple[str, int]] | None = None) -> None:
        super().__init__(message)
        self.loop = loop
        self.now_ns = now_ns
        #: the most frequent callbacks of a sample taken after the limit was crossed, (description, count)
        self.top = top or []


class SimulationTimeout(SimulationError, TimeoutError):
    """The awaited task was still pending when the simulated deadline (``until_ns``) passed."""

    def __init__(self, message: str, *, task: object = None) -> None:
        super().__init__(message)
        self.task = task
