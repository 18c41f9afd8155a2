"""``ctx.state``: the key's application state, read as the last confirmed value, written through the lease.

Reads are local and never wait. Every write goes through the activation, which checks the
writer's lease (a replaced run cannot write), encodes the value into the ``state`` page and
confirms it (in memory, or through the durable store) before ``value`` changes.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from .activation import Activation

__all__ = ["State", "STATE_PAGE", "ACTIVE_PAGE", "BEHAVIOR_PAGE", "SCHEDULES_PAGE", "RESERVED_PAGES"]

S = TypeVar("S")

STATE_PAGE = "state"
ACTIVE_PAGE = "@active"
BEHAVIOR_PAGE = "@behavior"
SCHEDULES_PAGE = "@schedules"
RESERVED_PAGES = (ACTIVE_PAGE, BEHAVIOR_PAGE, SCHEDULES_PAGE)


class State(Generic[S]):
    """The state of one key as seen by one run of its body (bound to that run's lease)."""

    __slots__ = ("_activation", "_lease")

    def __init__(self, activation: Activation, lease: int) -> None:
        self._activation = activation
        self._lease = lease

    @property
    def value(self) -> S:
        """The last confirmed state (treat it as immutable: write changes with ``set``/``update``)."""
        return self._activation.state_value  # type: ignore[no-any-return]

    async def set(self, value: S) -> S:
        """Write ``value``; returns it once the write is confirmed. ``Fenced`` if this run was replaced."""
        waiting = self._activation.write_state_soon(self._lease, value)
        if waiting is not None:
            await waiting
        return value

    async def update(self, fn: Callable[[S], S | Awaitable[S]]) -> S:
        """Write ``fn(value)`` (``fn`` may be sync or async); returns the new state once confirmed.

        ``Fenced`` if this run was replaced, before ``fn`` is called.
        """
        activation = self._activation
        activation.check_writer(self._lease, "state.update")  # fenced before fn runs on a state not this run's
        result = fn(activation.state_value)
        # The cheap test first: most update functions are plain lambdas returning a value.
        if hasattr(type(result), "__await__") and inspect.isawaitable(result):
            new: S = await result
        else:
            new = result  # type: ignore[assignment]  # not awaitable: an S (typing.cast would cost a call)
        waiting = self._activation.write_state_soon(self._lease, new)
        if waiting is not None:
            await waiting
        return new

    async def delete(self) -> None:
        """Tombstone the key: state back to initial, every schedule cancelled, behavior back to the original type."""
        await self._activation.delete_state(self._lease)
