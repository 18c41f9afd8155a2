"""Activation-scoped timers (``ctx.timer``): the seed's "grain timers".

A timer belongs to the activation that set it, not to the key's state: it is not
persisted, it is cancelled when the activation ends, and it can never start a key (a
tick is delivered to the activation that owns the timer, or dropped). A tick does not
refresh the idle clock unless the timer was set with ``keep_alive=True``, so a key whose
only activity is its own timer still idles out. Time is the loop's monotonic time: a
timer measures durations, not wall-clock instants (that is what schedules are for).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from .activation_runs import RunWork
    from .timer_heap import Timer

__all__ = ["ActivationTimer", "TimerHandle"]

M = TypeVar("M")


class ActivationTimer:
    """One timer as the activation holds it: its message, period, next due and loop timer."""

    __slots__ = ("name", "message", "every", "keep_alive", "due", "timer", "live", "fired")

    def __init__(self, name: str, message: Any, every: float | None, keep_alive: bool, due: float) -> None:
        self.name = name
        self.message = message
        self.every = every
        self.keep_alive = keep_alive
        self.due = due
        self.timer: Timer | None = None
        self.live = True
        self.fired = 0

    def next_due(self, now: float) -> float:
        """The first tick of the fixed-rate grid after ``now``: a late tick is delivered once, the rest skipped."""
        assert self.every is not None
        missed = max(0.0, now - self.due) // self.every
        return self.due + self.every * (missed + 1)


class TimerHandle(Generic[M]):
    """What ``ctx.timer`` returns: the timer's name, message, interval, and ``cancel()``."""

    __slots__ = ("_activation", "_timer")

    def __init__(self, activation: RunWork, timer: ActivationTimer) -> None:
        self._activation = activation
        self._timer = timer

    @property
    def name(self) -> str:
        return self._timer.name

    @property
    def message(self) -> M:
        return self._timer.message  # type: ignore[no-any-return]

    @property
    def interval(self) -> timedelta | None:
        return None if self._timer.every is None else timedelta(seconds=self._timer.every)

    @property
    def active(self) -> bool:
        return self._timer.live

    @property
    def fired(self) -> int:
        """How many ticks this timer has delivered."""
        return self._timer.fired

    def cancel(self) -> None:
        """Stop the timer (a tick already in the mailbox is not recalled)."""
        self._activation.cancel_timer(self._timer, "cancelled")

    def __repr__(self) -> str:
        state = "active" if self._timer.live else "cancelled"
        return f"TimerHandle({self.name!r}, interval={self.interval}, {state})"
