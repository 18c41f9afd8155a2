"""A queue of timeouts that all last the same, armed with one timer.

Every ask has a timeout, and almost every ask is answered long before it. One loop timer
per ask would mean a heap push, a cancel and a dead handle left in the loop's heap each
time. Asks with the same timeout expire in the order they were made, so a FIFO of
deadlines with a single timer on its head does the same job; answered entries are shed
from the head as new ones arrive.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections import deque
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

__all__ = ["DeadlineQueue"]


class _Settled(Protocol):
    def settled(self) -> bool: ...


T = TypeVar("T", bound=_Settled)

_EMPTY_CONTEXT = contextvars.Context()


class DeadlineQueue(Generic[T]):
    """Calls ``on_expire(item)`` for each item not settled ``timeout`` seconds after it was added."""

    __slots__ = ("_loop", "_timeout", "_on_expire", "_queue", "_timer")

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout: float, on_expire: Callable[[T], None]) -> None:
        self._loop = loop
        self._timeout = timeout
        self._on_expire = on_expire
        self._queue: deque[tuple[float, T]] = deque()
        self._timer: asyncio.TimerHandle | None = None

    def add(self, item: T) -> None:
        queue = self._queue
        while queue and queue[0][1].settled():
            queue.popleft()
        deadline = self._loop.time() + self._timeout
        queue.append((deadline, item))
        if self._timer is None:
            self._timer = self._loop.call_at(deadline, self._expire, context=_EMPTY_CONTEXT)

    def _expire(self) -> None:
        self._timer = None
        queue = self._queue
        now = self._loop.time()
        while queue and queue[0][0] <= now:
            _, item = queue.popleft()
            if not item.settled():
                self._on_expire(item)
        while queue and queue[0][1].settled():
            queue.popleft()
        if queue:
            self._timer = self._loop.call_at(queue[0][0], self._expire, context=_EMPTY_CONTEXT)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._queue.clear()

    def __len__(self) -> int:
        return len(self._queue)
