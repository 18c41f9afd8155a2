"""Fault plans for a user's own tests: a Hypothesis strategy that shrinks, and the same space drawn per seed.

::

    from hypothesis import given, settings
    from sim.testing import fault_plans

    @settings(max_examples=200, deadline=None)
    @given(plan=fault_plans(3, duration=60.0, kinds=("crash", "pause")))
    def test_my_actor(plan):
        with sim.World(0) as world:
            ...                          # nodes n1..n3, the actor's clients
            plan.apply(world)
            world.run(until=90)
            assert ...                   # Hypothesis prints the shrunk `plan=FaultPlan(...)`

Why a space of its own rather than ``sim.faults.generate``: ``generate`` draws realistic
plans (Poisson arrivals, restarts that follow crashes), but a plan it drew cannot be made
*simpler* one step at a time. Here every fault is built from a few small integers
(milliseconds, indices) that Hypothesis shrinks toward zero, and each is encoded so that zero
is the simple end:

- fewer faults: the plan is a list of incidents, each with a flag "it happens" that
  shrinks to "no" (so any incident that does not matter is dropped);
- shorter: every length (a pause, a partition, a crash's downtime) shrinks to its minimum;
- later: a fault's start is counted back from the end of the window (``at = end - lead``),
  so a shrinking ``lead`` moves it toward the end, where it disturbs the least; a length
  is a choice of its own (the end of the window cuts it short), so neither moves the other;
- fewer nodes touched: nodes are picked by index (toward the first node), sides and scopes
  as counts (toward one node);
- milder: a crash's restart is one signed integer (0: no restart, then the shortest
  downtimes, a wiped disk on the negative side), clock steps and drifts shrink toward +1 ms
  and +1 ppm, loss and duplication toward 1 %.

``PlanSpace.draw(rng)`` draws from the same space with a ``random.Random`` (the pytest
plugin's ``@pytest.mark.sim(faults=fault_plans(...))`` does, one plan per seed), so a plan
found by seeds and one found by Hypothesis are values of one kind. Hypothesis is imported
only when a strategy is built: ``import sim.testing`` works without it.
"""

from __future__ import annotations

import random
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

from .faults import (
    ClockDrift,
    ClockStep,
    Crash,
    Duplicate,
    Fault,
    FaultPlan,
    Flap,
    ForgedHeartbeat,
    Heal,
    Loss,
    Partition,
    Pause,
    Reorder,
    Restart,
)
from .faults.ranges import RANGES as _R

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = ["DRAWABLE_KINDS", "DEFAULT_KINDS", "PlanSpace", "fault_plans", "node_names", "space_of"]

DRAWABLE_KINDS: Final[tuple[str, ...]] = (
    "crash", "pause", "clock_step", "partition", "flap", "clock_drift", "loss", "duplicate", "reorder", "heal", "forged_heartbeat",
)
"""The kinds a ``PlanSpace`` draws, simplest first: a shrunk plan prefers the kinds early in this list.
(``restart`` comes with a crash, a pause carries its own resume; ``forged_ref`` and ``on_acquire`` need
actor and key names a space does not know: build those faults by hand.)"""

DEFAULT_KINDS: Final[tuple[str, ...]] = ("crash", "pause", "clock_step", "partition", "flap", "clock_drift", "loss", "duplicate", "reorder")
"""What ``fault_plans`` draws without ``kinds=``: every fault of a working cluster (no forged frames, no
heal); the kinds that need two nodes are left out of a one-node space."""

_TWO_NODES: Final[frozenset[str]] = frozenset({"partition", "flap"})

# The ranges, in milliseconds (and ppm, permille): the swarm generator's own table (sim.faults.ranges, which
# sim.faults.generate draws from), so a user's space is as wide as the project's regression net: past the
# failure detector, minutes back in time. Each spans the generator's short and long ranges, from the mildest
# value the space shrinks toward.
_DOWN = _R.crash.down.ints()  # a crash's downtime, when it restarts
_PAUSE = _R.pause.envelope().ints()
_CUT = _R.cut.envelope().ints()  # a partition or a flap
_PERIOD = _R.cut.period.ints()  # a flap's half-cycle
_STEP = _R.clock_step.envelope().ints()  # a clock step's size, either way
_PPM = _R.drift.envelope().ints()  # either way
_LINK = _R.link.length.ints()  # a loss, duplicate or reorder episode
_P = _R.link.p_envelope().ints()  # its probability, permille
_DUPLICATE_DELAY = _R.link.duplicate_delay.ints()
_REORDER_DELAY = _R.link.reorder_delay.ints()
_MIN_WINDOW_MS = 1_000


class _Draw(Protocol):
    """Where the small integers come from: Hypothesis (shrinkable) or a ``random.Random`` (a seed)."""

    def integer(self, low: int, high: int) -> int: ...

    def boolean(self) -> bool: ...

    def restart(self, most: int, wipe: bool) -> int:
        """A crash's restart in one choice: 0 none, ``k`` > 0 after the ``k``-th downtime, ``-k`` the same, wiped."""
        ...


class _RandomDraw:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def integer(self, low: int, high: int) -> int:
        return low if low == high else self.rng.randint(low, high)

    def boolean(self) -> bool:
        return self.rng.random() < 0.5

    def restart(self, most: int, wipe: bool) -> int:
        if most == 0 or self.rng.random() < _R.crash.stays_down:  # as sim.faults.generate: most crashed nodes come back
            return 0
        k = self.rng.randint(1, most)
        return -k if wipe and self.rng.random() < 0.25 else k


class _HypothesisDraw:
    def __init__(self, draw: Callable[[Any], Any]) -> None:
        from hypothesis import strategies as st

        self._draw = draw
        self._st = st

    def integer(self, low: int, high: int) -> int:
        if low == high:  # a choice of one is no choice: drawing it would only make the incident longer to shrink
            return low
        value: int = self._draw(self._st.integers(low, high))
        return value

    def boolean(self) -> bool:
        value: bool = self._draw(self._st.booleans())
        return value

    def restart(self, most: int, wipe: bool) -> int:
        return 0 if most == 0 else self.integer(-most if wipe else 0, most)


def node_names(nodes: int | Sequence[str]) -> tuple[str, ...]:
    """``3`` -> ``("n1", "n2", "n3")``; a sequence of names is kept as given (``TypeError``/``ValueError`` otherwise)."""
    if isinstance(nodes, bool) or not isinstance(nodes, (int, Sequence)) or isinstance(nodes, (str, bytes)):
        raise TypeError(f"nodes must be a count or a sequence of node names, got {nodes!r}")
    if isinstance(nodes, int):
        if nodes < 1:
            raise ValueError(f"nodes must be at least 1, got {nodes}")
        return tuple(f"n{i}" for i in range(1, nodes + 1))
    names = tuple(nodes)
    if not names or not all(isinstance(n, str) and n for n in names):
        raise ValueError(f"nodes must name at least one node, each a non-empty string, got {nodes!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"node names must be distinct, got {names!r}")
    return names


def _ms(seconds: float) -> float:
    return round(seconds / 1000, 3)


@dataclass(frozen=True)
class PlanSpace:
    """Plans of up to ``max_faults`` faults of ``kinds`` on ``names``, each over within ``[start, end)`` seconds."""

    names: tuple[str, ...]
    start_ms: int
    end_ms: int
    kinds: tuple[str, ...]
    max_faults: int
    wipe: bool = True

    @classmethod
    def of(
        cls,
        nodes: int | Sequence[str],
        duration: float,
        *,
        kinds: Sequence[str] | str | None = None,
        max_faults: int = 4,
        start: float = 0.0,
        wipe: bool = True,
    ) -> PlanSpace:
        """The space ``fault_plans`` draws from; a ``ValueError`` or ``TypeError`` names a bad argument."""
        names = node_names(nodes)
        for what, value in (("duration", duration), ("start", start)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value in (float("inf"), float("-inf")):
                raise TypeError(f"{what} must be a finite number of seconds, got {value!r}")
        if start < 0:
            raise ValueError(f"start must be >= 0, got {start!r}")
        start_ms, end_ms = round(start * 1000), round((start + duration) * 1000)
        if end_ms - start_ms < _MIN_WINDOW_MS:
            raise ValueError(f"the fault window must be at least {_MIN_WINDOW_MS / 1000:g} s, got duration={duration!r}")
        if isinstance(max_faults, bool) or not isinstance(max_faults, int) or max_faults < 0:
            raise ValueError(f"max_faults must be an int >= 0, got {max_faults!r}")
        chosen = _kinds(kinds, names)
        if not isinstance(wipe, bool):
            raise TypeError(f"wipe must be a bool, got {wipe!r}")
        return cls(names, start_ms, end_ms, chosen, max_faults, wipe)

    # --- drawing ---------------------------------------------------------------------

    def draw(self, rng: random.Random) -> FaultPlan:
        """A plan drawn with ``rng`` (the same space the strategy shrinks over): for seeds, not for shrinking."""
        draw = _RandomDraw(rng)
        count = rng.randint(0, self.max_faults)
        return self._plan([self._incident(draw) for _ in range(count)])

    def strategy(self) -> SearchStrategy[FaultPlan]:
        """The Hypothesis strategy of this space (see the module docstring for how it shrinks)."""
        from hypothesis import strategies as st

        @st.composite
        def incident(draw: Callable[[Any], Any]) -> list[Fault]:
            # Each incident begins with a flag "it happens": lowering that one choice drops the incident and
            # leaves every other choice where it was. Deleting the incident's choices instead (what st.lists
            # shrinks by) takes a block of at most five choices in Hypothesis 6.170, and an incident has up
            # to seven with its continue flag: plans kept faults that did not matter.
            happens: bool = draw(st.booleans())
            faults = self._incident(_HypothesisDraw(draw))
            return faults if happens else []

        plans = st.lists(incident(), max_size=self.max_faults).map(self._plan)
        _SPACES[plans] = self
        return plans

    def _plan(self, incidents: list[list[Fault]]) -> FaultPlan:
        faults = [fault for incident in incidents for fault in incident]
        return FaultPlan(tuple(faults[: self.max_faults]))  # a crash's restart counts as a fault of its own

    def _pick(self, draw: _Draw, names: Sequence[str]) -> str:
        return names[draw.integer(0, len(names) - 1)]

    def _some(self, draw: _Draw, names: Sequence[str], most: int) -> tuple[str, ...]:
        """1 to ``most`` distinct names, in the space's order (shrinks toward the first one alone)."""
        pool = list(names)
        chosen = [pool.pop(draw.integer(0, len(pool) - 1)) for _ in range(draw.integer(1, most))]
        return tuple(n for n in self.names if n in chosen)

    def _lead(self, draw: _Draw) -> int:
        """How long before the end of the window an incident starts, in ms (shrinks toward the latest start)."""
        return draw.integer(1, self.end_ms - self.start_ms)

    def _timed(self, draw: _Draw, bounds: tuple[int, int]) -> tuple[float, float]:
        """A start, and a length within ``bounds`` ms cut short where it would pass the end of the window.

        Start and length are separate choices and neither moves the other: a shorter length keeps
        the start; a later start keeps the length unless the end of the window cuts it."""
        lead = max(2, self._lead(draw))  # at least 1 ms to last and 1 ms to spare: over before the window ends
        span = draw.integer(bounds[0], min(bounds[1], self.end_ms - self.start_ms - 1))
        return _ms(self.end_ms - lead), _ms(min(span, lead - 1))

    def _incident(self, draw: _Draw) -> list[Fault]:
        kind = self.kinds[draw.integer(0, len(self.kinds) - 1)]
        names = self.names
        if kind == "crash":
            # whether it restarts, after how long and with which disk is one choice (0: no restart): a crash
            # costs the shrinker as few choices as a pause, and dropping its restart is one step that keeps
            # the crash where it is
            node = self._pick(draw, names)
            lead = self._lead(draw)
            at = _ms(self.end_ms - lead)
            most = max(0, min(_DOWN[1], self.end_ms - self.start_ms - 1) - _DOWN[0] + 1)
            code = draw.restart(most, self.wipe)
            down = min(_DOWN[0] + abs(code) - 1, lead - 1)  # a restart is over before the window ends
            if code == 0 or down < 1:
                return [Crash(at=at, node=node)]
            return [Crash(at=at, node=node), Restart(at=_ms(self.end_ms - lead + down), node=node, wipe=code < 0)]
        if kind == "pause":
            node = self._pick(draw, names)
            at, span = self._timed(draw, _PAUSE)
            return [Pause(at=at, node=node, duration=span)]
        if kind == "clock_step":
            node = self._pick(draw, names)
            at = _ms(self.end_ms - self._lead(draw))
            step = draw.integer(-_STEP[1], _STEP[1]) or 1  # ms, either way; shrinks toward +1 ms
            return [ClockStep(at=at, node=node, seconds=_ms(step))]
        if kind in ("partition", "flap"):
            a = self._some(draw, names, len(names) - 1)
            rest = [n for n in names if n not in a]
            b = self._some(draw, rest, len(rest))
            oneway = draw.boolean()
            at, span = self._timed(draw, _CUT)
            if kind == "partition":
                return [Partition(at=at, a=a, b=b, oneway=oneway, duration=span)]
            period = draw.integer(*_PERIOD)
            return [Flap(at=at, a=a, b=b, period=_ms(period), duration=span, oneway=oneway)]
        if kind == "clock_drift":
            node = self._pick(draw, names)
            at = _ms(self.end_ms - self._lead(draw))
            ppm = draw.integer(-_PPM[1], _PPM[1]) or 1  # fast or slow; shrinks toward +1 ppm
            return [ClockDrift(at=at, node=node, ppm=float(ppm))]
        if kind in ("loss", "duplicate", "reorder"):
            scope = self._some(draw, names, len(names))
            p = draw.integer(*_P) / 1000
            at, span = self._timed(draw, _LINK)
            if kind == "loss":
                return [Loss(at=at, p=p, duration=span, links_of=scope)]
            if kind == "duplicate":
                return [Duplicate(at=at, p=p, duration=span, links_of=scope, delay=_ms(draw.integer(*_DUPLICATE_DELAY)))]
            return [Reorder(at=at, p=p, duration=span, links_of=scope, delay=_ms(draw.integer(*_REORDER_DELAY)))]
        if kind == "heal":
            return [Heal(at=_ms(self.end_ms - self._lead(draw)))]
        node = self._pick(draw, names)  # forged_heartbeat
        at = _ms(self.end_ms - self._lead(draw))
        fakes = tuple(f"ghost{i}" for i in range(1, draw.integer(1, len(names)) + 1))
        return [ForgedHeartbeat(at=at, node=node, fakes=fakes)]


def _kinds(kinds: Sequence[str] | str | None, names: tuple[str, ...]) -> tuple[str, ...]:
    if kinds is None:
        return tuple(k for k in DEFAULT_KINDS if len(names) >= 2 or k not in _TWO_NODES)
    wanted = (kinds,) if isinstance(kinds, str) else tuple(kinds)
    unknown = [k for k in wanted if k not in DRAWABLE_KINDS]
    if unknown:
        raise ValueError(f"unknown or undrawable fault kind(s) {unknown}; a space draws {', '.join(DRAWABLE_KINDS)}")
    if not wanted:
        raise ValueError("kinds must name at least one fault kind")
    lonely = [k for k in wanted if k in _TWO_NODES and len(names) < 2]
    if lonely:
        raise ValueError(f"{', '.join(lonely)} need(s) at least two nodes; the space has {', '.join(names)}")
    return tuple(k for k in DRAWABLE_KINDS if k in wanted)


_SPACES: weakref.WeakKeyDictionary[Any, PlanSpace] = weakref.WeakKeyDictionary()


def space_of(strategy: object) -> PlanSpace | None:
    """The space a strategy made by ``fault_plans`` draws from (None for any other object)."""
    try:
        return _SPACES.get(strategy)
    except TypeError:  # not weak-referenceable: not ours
        return None


def fault_plans(
    nodes: int | Sequence[str],
    duration: float,
    *,
    kinds: Sequence[str] | str | None = None,
    max_faults: int = 4,
    start: float = 0.0,
    wipe: bool = True,
) -> SearchStrategy[FaultPlan]:
    """A Hypothesis strategy of ``FaultPlan``s on ``nodes`` (a count: ``n1``..``nK``, or names).

    Every fault starts at or after ``start`` and is over before ``start + duration`` (seconds);
    at most ``max_faults`` faults (a crash's restart counts); ``kinds`` of ``DRAWABLE_KINDS``
    (default ``DEFAULT_KINDS``); ``wipe=False``: a crash's restart always keeps its disk (a node
    whose store is a database that outlives the machine). Shrinks toward fewer, shorter and
    later faults that touch fewer nodes (the module docstring says how).
    """
    return PlanSpace.of(nodes, duration, kinds=kinds, max_faults=max_faults, start=start, wipe=wipe).strategy()
