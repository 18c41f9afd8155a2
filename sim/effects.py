"""Checks over the effects ledger: how often each external effect (``ctx.effect``) happened.

Actor code records an action outside the actor system with ``ctx.effect(key, **details)``;
in a simulated run each record is an ``effect`` trace row (fields ``actor``, ``key``,
``effect``, ``node``, ``details``). The runtime cannot make such an action happen exactly
once (a crash between the action and the checkpoint repeats or omits it), so these checks
count, per effect key, what a run really did::

    from sim.checks import exactly_once, at_most_once, at_least_once

    exactly_once(world, "charge")                       # every charge:* key exactly once
    at_least_once(world, "report", expected=days)       # each of these keys at least once
    at_most_once(world.trace, "email:welcome")          # a World or a Trace

**The effect key is the identity**, across the whole run (like an idempotency key): two
records with the same key are the same action done twice, whichever actor key or node did
them. Put in it what makes the action unique (``f"charge:{ctx.key}:{period}"``).

**The pattern** (second argument) selects effect keys: ``"*"`` every key; otherwise the key
itself and every key that continues it after a character that is neither a letter nor a
digit. ``"charge"`` selects ``charge``, ``charge:o1``, ``charge/o1``, ``charge.o1`` and
``charge-o1``, not ``charger`` or ``charge2``; ``"charge:o1"`` selects only that order's.

**expected**: the full effect keys that must be there. Without it the checks can only
count keys that occurred: ``exactly_once`` and ``at_least_once`` then require at least one
matching key, and an action that never happened for one key of many goes unseen. A check
fails with ``CheckFailed`` (``check`` is the function's name) whose message names each
offending key, its count and every occurrence (node, true time, the actor key).

In a scenario's checks: ``checks=(lambda world: exactly_once(world, "charge"),)``. Under pytest a failed
check's traceback ends at the test's own call (``__tracebackhide__``): the user's line and the message.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from .trace import Row, Trace

if TYPE_CHECKING:
    from .world import World

__all__ = ["EFFECT", "effects", "exactly_once", "at_most_once", "at_least_once", "matches"]

EFFECT = "effect"
"""The trace kind of an effect row (``casty.observer.Effect.kind``)."""

_SHOWN = 5  # offending keys spelled out in a message; the rest are counted


def matches(effect: str, pattern: str) -> bool:
    """Whether ``pattern`` selects the effect key ``effect`` (see the module docstring)."""
    if pattern == "*" or effect == pattern:
        return True
    return effect.startswith(pattern) and not effect[len(pattern)].isalnum()


def effects(source: World | Trace, pattern: str = "*") -> dict[str, list[Row]]:
    """The effect rows whose key ``pattern`` selects, grouped by effect key (keys in order of first occurrence)."""
    if not isinstance(pattern, str) or not pattern:
        raise ValueError(f"an effect pattern is a non-empty str (an effect key, a prefix of one, or '*'), got {pattern!r}")
    trace = source if isinstance(source, Trace) else source.trace
    if not trace.keeps(EFFECT):  # the rows are only counted: every check would pass on nothing
        raise ValueError("this trace does not keep effect rows (its keep= refuses the kind 'effect'): the effects cannot be counted")
    groups: dict[str, list[Row]] = {}
    for row in trace.of(EFFECT):
        key = str(row.get("effect"))
        if matches(key, pattern):
            groups.setdefault(key, []).append(row)
    return groups


def exactly_once(source: World | Trace, pattern: str, *, expected: Iterable[str] | None = None) -> None:
    """Every effect key ``pattern`` selects (and each of ``expected``) happened exactly once."""
    __tracebackhide__ = True  # pytest: a failure's traceback ends at the test's call, not in here
    _count("exactly_once", source, pattern, expected, low=1, high=1)


def at_most_once(source: World | Trace, pattern: str) -> None:
    """No effect key ``pattern`` selects happened twice (none at all is fine: an omission is allowed)."""
    __tracebackhide__ = True  # pytest: a failure's traceback ends at the test's call, not in here
    _count("at_most_once", source, pattern, None, low=0, high=1)


def at_least_once(source: World | Trace, pattern: str, *, expected: Iterable[str] | None = None) -> None:
    """Each of ``expected`` (or, without it, some key ``pattern`` selects) happened at least once; repeats are fine."""
    __tracebackhide__ = True  # pytest: a failure's traceback ends at the test's call, not in here
    _count("at_least_once", source, pattern, expected, low=1, high=None)


def _count(check: str, source: World | Trace, pattern: str, expected: Iterable[str] | None, *, low: int, high: int | None) -> None:
    __tracebackhide__ = True  # pytest: a failure's traceback ends at the test's call, not in here
    from .checks import CheckFailed  # sim.checks re-exports these checks: imported when first needed

    groups = effects(source, pattern)
    wanted = list(dict.fromkeys(expected)) if expected is not None else []
    for key in wanted:
        if not isinstance(key, str) or not matches(key, pattern):
            raise ValueError(f"{check}: expected key {key!r} is not selected by the pattern {pattern!r}")
    if not groups and not wanted and low > 0:
        raise CheckFailed(check, f"no effect matching {pattern!r} happened (0 times)")
    want = "exactly 1" if high == low else ("at most 1" if high is not None else "at least 1")
    bad: list[str] = []
    for key in [*wanted, *(k for k in groups if k not in wanted)]:
        rows = groups.get(key, [])
        if len(rows) < low or (high is not None and len(rows) > high):
            bad.append(f"{key} happened {_times(len(rows))} (want {want})" + (": " + ", ".join(_occurrence(r) for r in rows) if rows else ""))
    if bad:
        shown = "; ".join(bad[:_SHOWN])
        more = f"; and {len(bad) - _SHOWN} more keys" if len(bad) > _SHOWN else ""
        raise CheckFailed(check, shown + more)


def _times(count: int) -> str:
    return "once" if count == 1 else f"{count} times"


def _occurrence(row: Row) -> str:
    actor = str(row.get("actor")).rpartition(":")[2]
    seconds = f"{row.t:.6f}".rstrip("0").rstrip(".")
    return f"{row.node} at {seconds} s by {actor}[{row.get('key')}]"
