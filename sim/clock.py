"""Per-node wall clocks: true time plus offset, drift and steps (what NTP does to real machines).

A node's casty ``Clock`` port reads its ``NodeClock``. True time is the world's simpy time
(integer ns); a node's wall time is::

    wall = base_wall + (true - base_true) * (1 + drift_ppm / 1e6) + noise

re-based whenever the drift changes, and shifted by ``step`` (forward or backward). All
integer arithmetic: the same run gives the same microseconds on every machine.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta

import simpy

from casty.clock import to_datetime

__all__ = ["NodeClock"]


class NodeClock:
    """The wall clock of one simulated node (implements casty's ``Clock`` port)."""

    def __init__(
        self,
        env: simpy.Environment,
        *,
        epoch_us: int,
        offset: timedelta = timedelta(0),
        drift_ppm: float = 0.0,
        noise_us: int = 0,
        rng: random.Random | None = None,
    ) -> None:
        if noise_us < 0:
            raise ValueError(f"noise_us must be >= 0, got {noise_us}")
        if noise_us and rng is None:
            raise ValueError("a clock with noise needs its own random.Random")
        self._env = env
        self._epoch_us = epoch_us
        self._base_true_ns = int(env.now)
        self._base_wall_us = epoch_us + _us(offset) + int(env.now) // 1000
        self._drift_ppm = float(drift_ppm)
        self._noise_us = noise_us
        self._rng = rng

    def _exact_us(self) -> int:
        elapsed_ns = int(self._env._now) - self._base_true_ns
        if self._drift_ppm:
            elapsed_ns += round(elapsed_ns * self._drift_ppm / 1_000_000)
        return self._base_wall_us + elapsed_ns // 1000

    def now_us(self) -> int:
        elapsed_ns = int(self._env._now) - self._base_true_ns  # _exact_us, inline: read on every firing
        if self._drift_ppm:
            elapsed_ns += round(elapsed_ns * self._drift_ppm / 1_000_000)
        wall = self._base_wall_us + elapsed_ns // 1000
        if self._noise_us and self._rng is not None:
            wall += self._rng.randint(-self._noise_us, self._noise_us)
        return wall

    def now(self) -> datetime:
        return to_datetime(self.now_us())

    def offset_us(self) -> int:
        """Wall time minus true time (µs): how far this node's clock is off, noise aside."""
        return self._exact_us() - (self._true_epoch_us() + int(self._env.now) // 1000)

    def _true_epoch_us(self) -> int:
        # The wall time true time 0 maps to for a perfect clock (offset 0, no drift).
        return self._epoch_us

    @property
    def drift_ppm(self) -> float:
        return self._drift_ppm

    def step(self, delta: timedelta) -> None:
        """Jump the clock by ``delta`` (negative: backward), as an NTP step would."""
        self._base_wall_us += _us(delta)

    def set_drift(self, drift_ppm: float) -> None:
        """Change the rate from now on (parts per million; positive runs fast)."""
        self._base_wall_us = self._exact_us()
        self._base_true_ns = int(self._env.now)
        self._drift_ppm = float(drift_ppm)

    def __repr__(self) -> str:
        return f"NodeClock({self.now().isoformat()}, offset={self.offset_us() / 1e6:+.6f}s, drift={self._drift_ppm:g}ppm)"


def _us(delta: timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
