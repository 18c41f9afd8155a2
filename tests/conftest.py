"""Shared test tools: run a coroutine on virtual time, with a wall clock that follows it.

Schedule and idle tests must not sleep for real. ``VirtualTimeLoop`` is an ordinary
selector loop whose clock only moves when the loop would otherwise wait: a sleep of a day
completes at once, at exactly the right virtual instant. ``LoopClock`` is the casty
``Clock`` port reading that virtual time as wall time, with ``step`` for clock jumps.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

import pytest

T = TypeVar("T")

START_US = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """A real asyncio loop on virtual monotonic time: waiting advances the clock instead of sleeping."""

    def __init__(self) -> None:
        super().__init__(selectors.DefaultSelector())
        self._virtual = 0.0
        real_select = self._selector.select  # type: ignore[attr-defined]

        def select(timeout: float | None = None) -> list[Any]:
            events = real_select(0)
            if events:
                return events
            if timeout is None:
                raise RuntimeError("deadlock: the loop would wait forever (nothing scheduled, nothing ready)")
            self._virtual += timeout
            return []

        self._selector.select = select  # type: ignore[attr-defined]

    def time(self) -> float:
        return self._virtual


class LoopClock:
    """Wall clock = start + the loop's virtual time + steps; ``step`` jumps it like NTP would."""

    def __init__(self, loop: asyncio.AbstractEventLoop, start_us: int = START_US) -> None:
        self._loop = loop
        self._start_us = start_us
        self._offset_us = 0

    def now_us(self) -> int:
        return self._start_us + round(self._loop.time() * 1_000_000) + self._offset_us

    def step(self, delta: timedelta) -> None:
        self._offset_us += round(delta.total_seconds() * 1_000_000)


def run_virtual(main: Callable[[LoopClock], Awaitable[T]]) -> T:
    """Run ``main(clock)`` to completion on a fresh VirtualTimeLoop."""
    loop = VirtualTimeLoop()
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(main(LoopClock(loop)))
    finally:
        asyncio.set_event_loop(None)
        loop.close()


class Recorder:
    """An observer that keeps every event, with helpers to pick them by type."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    def __call__(self, event: Any) -> None:
        self.events.append(event)

    def of(self, cls: type[T]) -> list[T]:
        return [e for e in self.events if isinstance(e, cls)]


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()
