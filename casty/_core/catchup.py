"""Catch-up policies: what a periodic schedule does when a firing comes late.

A schedule's timer goes off at ``now_us`` for an occurrence due at ``due_us``; when the key
was paused, inactive, or its wall clock was stepped forward, ``now`` is past one or more
later grid times too (``due + k * every``). The seeds fix one answer
(``casty._core.schedules.catch_up``): deliver once, skip the rest, resume on the grid. Users
of other schedulers ask for a choice, so each policy here is a frozen value and its rule a
pure function over integers (µs since the epoch), checked exactly by property tests
without a loop:

* :class:`Skip` (the default, the seeds' rule unchanged): the late occurrence is delivered
  once, every later grid time up to ``now`` is skipped, the next due is the first grid time
  strictly after ``now``.
* :class:`FireAll` ``(limit=n)``: every missed occurrence is delivered, in order, each with
  its own due time, at most ``n`` in one burst; when more were missed, the *most recent*
  ``n`` are delivered and the older ones skipped (an occurrence is more stale the older it
  is, the rule of a catch-up window). The grid is kept.
* :class:`DropLate` ``(grace=d)``: the most recent grid time at or before ``now`` is
  delivered if it is at most ``d`` late, else nothing is delivered; the older ones are
  skipped either way, and the grid is kept (Quartz's "do nothing" misfire instruction,
  a CronJob's starting deadline).
* :class:`FixedDelay`: the late occurrence is delivered once and the next due is
  ``now + every``: the schedule leaves the grid, so nothing is ever "skipped".

A firing before its due time (the wall clock stepped back after the timer was armed)
delivers nothing and keeps the due: no policy fires early.

The page encoding is versioned (``encode`` / ``decode``). ``Skip`` encodes as ``None``, so a
page whose schedules all use the default is byte-for-byte a page of today, and a page
written today (no policy recorded) decodes as ``Skip``.

Wired: ``ctx.schedule(..., catch_up=)`` calls ``decide`` at each firing
(``casty._core.activation_schedules``), node schedules' ``misfire=`` calls ``decide``
(once, interval) or ``decide_on_grid`` (cron) in ``casty._core.scheduler``; both check the
value with ``checked``. ``InvalidCatchUp`` lives in ``casty.errors``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Final, TypeAlias

import msgspec

from casty.errors import InvalidCatchUp

__all__ = [
    "Skip", "FireAll", "DropLate", "FixedDelay", "CatchUp", "Decision", "InvalidCatchUp",
    "decide", "decide_on_grid", "encode", "decode", "to_bytes", "Encoded", "VERSION", "MAX_BURST", "checked",
]

VERSION: Final = 1
"""The encoding's version: the first element of every encoded policy but ``Skip``'s ``None``."""

MAX_BURST: Final = 10_000
"""The largest ``FireAll.limit``: a burst is that many envelopes queued at once in one key's
mailbox, so it must stay far below anything that could exhaust memory."""

_MAX_GRACE_US: Final = (timedelta.max.days * 86_400 + timedelta.max.seconds) * 1_000_000 + timedelta.max.microseconds


@dataclass(frozen=True, slots=True)
class Skip:
    """Deliver a late occurrence once, skip the grid times it missed (the seeds' rule)."""


@dataclass(frozen=True, slots=True)
class FireAll:
    """Deliver every missed occurrence in order, at most ``limit`` in one burst (the most recent ones)."""

    limit: int

    def __post_init__(self) -> None:
        if not isinstance(self.limit, int) or isinstance(self.limit, bool):
            raise TypeError(f"FireAll.limit must be an int, not {type(self.limit).__qualname__}")
        if not 1 <= self.limit <= MAX_BURST:
            raise InvalidCatchUp(f"FireAll.limit must be between 1 and {MAX_BURST}, got {self.limit}")


@dataclass(frozen=True, slots=True)
class DropLate:
    """Deliver the latest missed occurrence only if it is at most ``grace`` late; keep the grid.

    ``grace`` is a ``timedelta`` or a number of seconds; it is kept as a ``timedelta`` of
    whole microseconds (a float is rounded to the nearest µs).
    """

    grace: timedelta

    def __post_init__(self) -> None:
        object.__setattr__(self, "grace", timedelta(microseconds=_grace_us(self.grace)))

    @property
    def grace_us(self) -> int:
        return _grace_us(self.grace)


@dataclass(frozen=True, slots=True)
class FixedDelay:
    """Deliver a late occurrence once; the next is one interval after the firing (off the grid)."""


CatchUp: TypeAlias = Skip | FireAll | DropLate | FixedDelay


def _grace_us(value: object) -> int:
    if isinstance(value, timedelta):
        micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise InvalidCatchUp(f"DropLate.grace must be a finite duration, got {value!r}")
        if abs(value) > _MAX_GRACE_US / 1_000_000:
            raise InvalidCatchUp(f"DropLate.grace must be at most timedelta.max, got {value!r}")
        micros = round(value * 1_000_000)
    else:
        raise TypeError(f"DropLate.grace must be a timedelta or a number of seconds, not {type(value).__qualname__}")
    if micros < 0:
        raise InvalidCatchUp(f"DropLate.grace must not be negative, got {value!r}")
    return micros


_POLICIES: Final = (Skip, FireAll, DropLate, FixedDelay)


def checked(what: str, argument: str, policy: object, *, grid: bool = False) -> CatchUp:
    """``policy`` if it is a catch-up policy value usable here, else InvalidCatchUp naming ``what``, ``argument``
    and what was given. ``grid``: a cron schedule, where ``FixedDelay`` has no period to add."""
    if type(policy) not in _POLICIES:
        given = f"the class {policy.__qualname__}" if isinstance(policy, type) else f"{type(policy).__qualname__} {policy!r}"
        raise InvalidCatchUp(
            f"{what}: {argument} must be Skip(), FireAll(limit=...), DropLate(grace=...) or FixedDelay(), got {given}"
        )
    if grid and isinstance(policy, FixedDelay):
        raise InvalidCatchUp(f"{what}: {argument}=FixedDelay() needs an interval: a cron schedule has no fixed period to add")
    return policy  # type: ignore[return-value]


# --- the rule ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Decision:
    """What one firing does: deliver ``count`` occurrences due ``first_us``, ``first_us + step_us``, ...
    now, in order; then wait for ``next_us`` (None: the schedule is done). ``skipped`` counts the
    occurrences due at or before ``now`` that are never delivered."""

    first_us: int
    count: int
    step_us: int
    next_us: int | None
    skipped: int

    def dues(self) -> tuple[int, ...]:
        """The due time of each occurrence delivered now, in order."""
        return tuple(self.first_us + i * self.step_us for i in range(self.count))


def decide(policy: CatchUp, due_us: int, every_us: int | None, now_us: int) -> Decision:
    """The firing at ``now_us`` of an occurrence due at ``due_us``, under ``policy``.

    ``every_us`` is the period (None for a one-shot, which has nothing to skip: it is
    delivered, or dropped by ``DropLate`` when later than the grace). Pure integer
    arithmetic, O(1) however late the firing is.
    """
    if every_us is not None and every_us <= 0:
        raise InvalidCatchUp(f"every_us must be positive, got {every_us}")
    if now_us < due_us:  # early: the wall clock went back after the timer was armed
        return Decision(due_us, 0, every_us or 0, due_us, 0)
    if every_us is None:
        if isinstance(policy, DropLate) and now_us - due_us > policy.grace_us:
            return Decision(due_us, 0, 0, None, 1)
        return Decision(due_us, 1, 0, None, 0)
    missed = (now_us - due_us) // every_us  # grid times after due, at or before now
    after_now = due_us + every_us * (missed + 1)  # the first grid time strictly after now
    if isinstance(policy, Skip):
        return Decision(due_us, 1, every_us, after_now, missed)
    if isinstance(policy, FireAll):
        count = min(missed + 1, policy.limit)
        return Decision(due_us + every_us * (missed + 1 - count), count, every_us, after_now, missed + 1 - count)
    if isinstance(policy, DropLate):
        latest = due_us + every_us * missed
        if now_us - latest <= policy.grace_us:
            return Decision(latest, 1, every_us, after_now, missed)
        return Decision(latest, 0, every_us, after_now, missed + 1)
    if isinstance(policy, FixedDelay):
        return Decision(due_us, 1, every_us, now_us + every_us, 0)
    raise TypeError(f"not a catch-up policy: {type(policy).__qualname__}")


def decide_on_grid(
    policy: CatchUp, due_us: int, now_us: int, following: Callable[[int], int | None], *, max_steps: int = 100_000
) -> tuple[tuple[int, ...], int | None, int]:
    """``decide`` for an irregular grid (a cron expression): ``(dues delivered now, next due, skipped)``.

    ``following(t)`` is the first grid time strictly after ``t`` (None: no more). The grid
    times between ``due`` and ``now`` are walked one by one, at most ``max_steps`` of them;
    past that the walk jumps to ``following(now)`` and ``skipped`` counts only the walked ones
    (the node scheduler's bound today). ``FixedDelay`` has no period to add on a cron grid:
    InvalidCatchUp.
    """
    if isinstance(policy, FixedDelay):
        raise InvalidCatchUp("FixedDelay needs an interval: a cron schedule has no fixed period to add")
    if now_us < due_us:
        return (), due_us, 0
    missed: list[int] = []  # the grid times after due, at or before now (the walked ones)
    nxt = following(due_us)
    while nxt is not None and nxt <= now_us:
        if len(missed) >= max_steps:
            nxt = following(now_us)
            break
        missed.append(nxt)
        nxt = following(nxt)
    occurrences = [due_us, *missed]
    if isinstance(policy, Skip):
        return (due_us,), nxt, len(missed)
    if isinstance(policy, FireAll):
        kept = occurrences[-policy.limit :]
        return tuple(kept), nxt, len(occurrences) - len(kept)
    if isinstance(policy, DropLate):
        latest = occurrences[-1]
        if now_us - latest <= policy.grace_us:
            return (latest,), nxt, len(missed)
        return (), nxt, len(occurrences)
    raise TypeError(f"not a catch-up policy: {type(policy).__qualname__}")


# --- the page encoding --------------------------------------------------------------------------

Encoded: TypeAlias = tuple[int, str, int] | None
"""A policy as a page row stores it: ``None`` (Skip, or no policy recorded) or
``(version, kind, parameter)``; ``parameter`` is FireAll's limit, DropLate's grace in µs, else 0."""

_KINDS: Final = ("fire-all", "drop-late", "fixed-delay")


def encode(policy: CatchUp) -> Encoded:
    """The policy as a small msgpack-able value (see ``Encoded``)."""
    if isinstance(policy, Skip):
        return None
    if isinstance(policy, FireAll):
        return (VERSION, "fire-all", policy.limit)
    if isinstance(policy, DropLate):
        return (VERSION, "drop-late", policy.grace_us)
    if isinstance(policy, FixedDelay):
        return (VERSION, "fixed-delay", 0)
    raise TypeError(f"not a catch-up policy: {type(policy).__qualname__}")


_decoder = msgspec.msgpack.Decoder(Encoded)


def decode(value: object) -> CatchUp:
    """A policy from ``encode``'s value (or msgpack bytes of it); ``None`` (nothing recorded) is Skip.

    A version or kind this node does not know, or a parameter out of range, raises
    InvalidCatchUp naming it: a page from a newer node is refused loudly, never read as Skip.
    """
    if isinstance(value, (bytes, bytearray, memoryview)):
        try:
            value = _decoder.decode(value)
        except msgspec.DecodeError as exc:
            raise InvalidCatchUp(f"catch-up policy: undecodable bytes ({exc})") from None
    if value is None:
        return Skip()
    if not (isinstance(value, (tuple, list)) and len(value) == 3):
        raise InvalidCatchUp(f"catch-up policy: expected None or (version, kind, parameter), got {value!r}")
    version, kind, parameter = value
    if version != VERSION or isinstance(version, bool):
        raise InvalidCatchUp(f"catch-up policy: unknown version {version!r} (this node reads version {VERSION})")
    if kind not in _KINDS:
        raise InvalidCatchUp(f"catch-up policy: unknown kind {kind!r}, expected one of {', '.join(_KINDS)}")
    if not isinstance(parameter, int) or isinstance(parameter, bool):
        raise InvalidCatchUp(f"catch-up policy {kind}: parameter must be an int, got {parameter!r}")
    if kind == "fire-all":
        return FireAll(parameter)
    if kind == "drop-late":
        if not 0 <= parameter <= _MAX_GRACE_US:
            raise InvalidCatchUp(f"catch-up policy drop-late: grace {parameter} \u00b5s is negative or past timedelta.max")
        return DropLate(timedelta(microseconds=parameter))
    if parameter != 0:
        raise InvalidCatchUp(f"catch-up policy fixed-delay: parameter must be 0, got {parameter}")
    return FixedDelay()


def to_bytes(policy: CatchUp) -> bytes:
    """``encode`` as msgpack bytes (for a page field of its own)."""
    return msgspec.msgpack.encode(encode(policy))
