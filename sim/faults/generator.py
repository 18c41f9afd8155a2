"""The swarm's seeded generator: ``FaultMix`` (which kinds a seed uses, how hard) and ``generate`` (a plan from it).

The swarm and cluster-random scenarios draw their plans here, so every draw (its numbers and their order)
is part of those scenarios' digests: a change that moves a draw moves every seed after it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

import msgspec

from .forged import ForgedHeartbeat, ForgedRef
from .on_acquire import OnAcquire
from .plan import FaultPlan
from .ranges import RANGES as R
from .values import (
    ClockDrift,
    ClockStep,
    Crash,
    Duplicate,
    Fault,
    Flap,
    Loss,
    Partition,
    Pause,
    Reorder,
    Restart,
    _check,
    _finite,
)


GENERATED_KINDS: Final[tuple[str, ...]] = (
    "crash", "pause", "partition", "flap", "clock_step", "clock_drift", "loss", "duplicate", "reorder", "forged_heartbeat", "forged_ref",
)
"""The kinds ``generate`` draws (``restart``, ``resume`` and ``heal`` come with the faults they end)."""


@dataclass(frozen=True)
class FaultMix:
    """Which fault kinds a seed's plan uses and how hard they hit, drawn per seed (swarm testing).

    Each seed draws its own mix (``FaultMix.draw``), so some seeds are crash storms, others
    only clock steps or flapping links: a bug that needs one kind in quantity without the
    others drowning it is found, and no seed is narrowed to what the runtime passes.

    ``kinds``: the kinds on (of ``GENERATED_KINDS``); ``rate``: faults per 10 s of the safety
    phase; ``max_at_once``: how many nodes a crash or pause takes together; ``majority``:
    whether a crash group may be a majority (or every node); ``seeds``: whether seed nodes
    may be crashed or paused; ``wipe``: the chance a restart comes back with an empty disk;
    ``long``: the chance a pause, partition or clock step is long (past the failure detector,
    minutes back in time); ``aimed``: ``OnAcquire`` faults per 10 s, aimed at the keys
    ``generate`` is given (``aims``): a pause, crash or cut of a node right after it acquires one.
    """

    kinds: tuple[str, ...]
    rate: float = 3.0
    max_at_once: int = 1
    majority: bool = False
    seeds: bool = True
    wipe: float = 0.0
    long: float = 0.3
    aimed: float = 0.0

    def __post_init__(self) -> None:
        unknown = [k for k in self.kinds if k not in GENERATED_KINDS]
        _check(not unknown, f"FaultMix.kinds: unknown kind(s) {unknown}; known: {', '.join(GENERATED_KINDS)}")
        _finite("FaultMix.rate", self.rate, positive=True)
        _check(self.max_at_once >= 1, f"FaultMix.max_at_once must be >= 1, got {self.max_at_once}")
        for name in ("wipe", "long"):
            value = getattr(self, name)
            _check(0.0 <= value <= 1.0, f"FaultMix.{name} must be within [0, 1], got {value!r}")
        _finite("FaultMix.aimed", self.aimed)

    @classmethod
    def draw(cls, rng: random.Random, nodes: int, *, aim_rng: random.Random | None = None) -> FaultMix:
        """A mix for one seed: 1 to all kinds on (crash more often than not), rates and widths at random.

        ``aim_rng`` (a stream of its own, so the rest of the mix and the plan drawn after it stay
        what they were without it): draw ``aimed`` too, 0 for a quarter of the seeds, else 1-6 per 10 s.
        """
        count = rng.randint(1, len(GENERATED_KINDS))
        kinds = rng.sample(GENERATED_KINDS, count)
        if "crash" not in kinds and rng.random() < 0.5:
            kinds.append("crash")
        return cls(
            kinds=tuple(k for k in GENERATED_KINDS if k in kinds),
            rate=round(rng.uniform(1.0, 8.0), 2),
            max_at_once=rng.randint(1, nodes),
            majority=rng.random() < 0.5,
            seeds=rng.random() < 0.8,
            wipe=rng.choice((0.0, 0.0, 0.3, 1.0)),
            long=rng.choice((0.0, 0.3, 0.6)),
            aimed=0.0 if aim_rng is None or aim_rng.random() < 0.25 else round(aim_rng.uniform(1.0, 6.0), 2),
        )

    def __str__(self) -> str:
        return (
            f"kinds={'+'.join(self.kinds)} rate={self.rate:g}/10s at_once={self.max_at_once} "
            f"majority={'yes' if self.majority else 'no'} seeds={'yes' if self.seeds else 'no'} wipe={self.wipe:g} long={self.long:g}"
            + (f" aimed={self.aimed:g}/10s" if self.aimed else "")
        )


@dataclass
class _Busy:
    """Per node, until when a crash or pause already holds it (the generator does not stack them)."""

    until: dict[str, float] = field(default_factory=dict)

    def free(self, nodes: Iterable[str], at: float) -> list[str]:
        return [n for n in nodes if self.until.get(n, -1.0) < at]


def _t(value: float) -> float:
    return round(value, 3)


def generate(
    mix: FaultMix,
    rng: random.Random,
    nodes: Sequence[str],
    duration: float,
    *,
    start: float = 0.0,
    seed_nodes: Sequence[str] = (),
    refs: Sequence[tuple[str, str, str]] = (),
    aims: Sequence[tuple[str, str]] = (),
    aim_rng: random.Random | None = None,
) -> FaultPlan:
    """Draw a plan of ``mix``'s kinds over ``[start, start + duration)`` on ``nodes``; every fault is over by then.

    The ranges below are ``sim.faults.ranges.RANGES``' (the Hypothesis space of ``sim.testing`` reads them too).
    Faults arrive as a Poisson process of ``mix.rate`` per 10 s. A crash takes 1 to
    ``mix.max_at_once`` free nodes together (a majority or all of them if ``mix.majority``,
    else fewer than half), each restarted 0.3-10 s later (some only when the run heals),
    with an empty disk at ``mix.wipe``. Pauses take nodes for 0.2-3 s, or 3-15 s (past the
    failure detector) when long. Partitions cut a random split, one-way a third of the time.
    A forged heartbeat names 1 to ``len(nodes)`` fake members (as many fakes as members leave
    the real ones without a majority of the view they would then hold).
    Clock steps go either way by up to 3 s, or minutes back (and forward again later) when
    long. ``refs``: (actor, key, message tag) a ``ForgedRef`` may target; without any, that
    kind is not drawn. Times are rounded to the millisecond, so the JSON stays short.

    ``aims``: (actor, key) pairs ``OnAcquire`` faults may watch, drawn at ``mix.aimed`` per
    10 s from ``aim_rng`` (default ``rng``) after the rest, so a plan without them is a prefix
    of the plan with them: half pauses (0.2-3 s, or 3-8 s when long), a quarter crashes, a
    quarter cut-then-crash; most hit at once (delay 0), the rest within 50 ms; a crashed node
    restarts 0.05-0.5 s later (within a heartbeat: promises of its previous life still in
    flight) or 0.5-5 s later.
    """
    names = list(nodes)
    _check(len(names) >= 1, "generate needs at least one node")
    targets = names if mix.seeds else [n for n in names if n not in seed_nodes] or names
    kinds = [k for k in mix.kinds if k != "forged_ref" or refs]
    faults: list[Fault] = []
    busy = _Busy()
    end = start + duration
    if not kinds:
        return FaultPlan()
    t = start
    while True:
        t += rng.expovariate(mix.rate / 10.0)
        if t >= end - 0.5:
            break
        kind = rng.choice(kinds)
        room = end - t  # every fault must be over by `end`
        long = rng.random() < mix.long
        if kind in ("crash", "pause"):
            free = busy.free(targets, t)
            if not free:
                continue
            limit = min(mix.max_at_once, len(free))
            if not mix.majority:
                limit = min(limit, max(1, (len(names) - 1) // 2))
            group = rng.sample(free, rng.randint(1, limit))
            for node in group:
                at = _t(t + R.crash.spread.draw(rng))
                if kind == "crash":
                    down = R.crash.down.draw(rng)
                    faults.append(Crash(at=at, node=node))
                    if rng.random() < 1 - R.crash.stays_down and at + down < end:
                        faults.append(Restart(at=_t(at + down), node=node, wipe=rng.random() < mix.wipe))
                        busy.until[node] = at + down + 1.0
                    else:
                        busy.until[node] = end  # restarted when the run heals
                else:
                    length = min((R.pause.long if long else R.pause.short).draw(rng), room - 0.4)
                    if length <= 0.05:
                        continue
                    faults.append(Pause(at=at, node=node, duration=_t(length)))
                    busy.until[node] = at + length + 0.5
        elif kind in ("partition", "flap"):
            if len(names) < 2:
                continue
            side = rng.sample(names, rng.randint(1, len(names) - 1))
            rest = tuple(n for n in names if n not in side)
            a, b = tuple(sorted(side)), rest
            oneway = rng.random() < 1 / 3
            length = min((R.cut.long if long else R.cut.short).draw(rng), room - 0.1)
            if kind == "partition":
                faults.append(Partition(at=_t(t), a=a, b=b, oneway=oneway, duration=_t(length)))
            else:
                faults.append(Flap(at=_t(t), a=a, b=b, period=_t(R.cut.period.draw(rng)), duration=_t(length), oneway=oneway))
        elif kind == "clock_step":
            node = rng.choice(names)
            if long:
                back = R.clock_step.back.draw(rng)
                faults.append(ClockStep(at=_t(t), node=node, seconds=-_t(back)))
                fix = t + R.clock_step.fix_after.draw(rng)
                if fix < end:
                    faults.append(ClockStep(at=_t(fix), node=node, seconds=_t(back)))
            else:
                faults.append(ClockStep(at=_t(t), node=node, seconds=_t(rng.choice((-1, 1)) * R.clock_step.short.draw(rng))))
        elif kind == "clock_drift":
            faults.append(ClockDrift(at=_t(t), node=rng.choice(names), ppm=round(rng.choice((-1, 1)) * (R.drift.long if long else R.drift.short).draw(rng))))
        elif kind in ("loss", "duplicate", "reorder"):
            scope = tuple(sorted(rng.sample(names, rng.randint(1, len(names))))) if rng.random() < 0.5 else ()
            length = _t(min(R.link.length.draw(rng), room - 0.1))
            p = round((R.link.p_long if long else R.link.p).draw(rng), 3)
            if kind == "loss":
                faults.append(Loss(at=_t(t), p=p, duration=length, links_of=scope))
            elif kind == "duplicate":
                faults.append(Duplicate(at=_t(t), p=p, duration=length, links_of=scope, delay=_t(R.link.duplicate_delay.draw(rng))))
            else:
                faults.append(Reorder(at=_t(t), p=p, duration=length, links_of=scope, delay=_t(R.link.reorder_delay.draw(rng))))
        elif kind == "forged_heartbeat":
            fakes = tuple(f"ghost{i}" for i in range(1, rng.randint(1, len(names)) + 1))  # as many as the real ones: no quorum
            faults.append(ForgedHeartbeat(at=_t(t), node=rng.choice(names), fakes=fakes))
        elif kind == "forged_ref":
            actor, key, message = rng.choice(list(refs))
            faults.append(ForgedRef(at=_t(t), node=rng.choice(names), actor=actor, key=key, message=message))
    faults.extend(_aimed(mix, aim_rng or rng, list(aims), start, end))
    return FaultPlan(tuple(faults))


def _aimed(mix: FaultMix, rng: random.Random, aims: list[tuple[str, str]], start: float, end: float) -> list[Fault]:
    """The ``OnAcquire`` faults of ``generate``, each over by ``end``."""
    out: list[Fault] = []
    if not aims or not mix.aimed:
        return out
    t = start
    while True:
        t += rng.expovariate(mix.aimed / 10.0)
        if t >= end - 1.0:
            return out
        actor, key = rng.choice(aims)
        action = rng.choice(("pause", "pause", "crash", "cut-crash"))
        delay = 0.0 if rng.random() < 0.6 else _t(R.aimed.delay.draw(rng))
        long = rng.random() < mix.long
        held = R.aimed.pause_long if long and action == "pause" else R.aimed.pause if action == "pause" else R.aimed.cut
        duration = _t(held.draw(rng))
        down = _t((R.aimed.down_soon if rng.random() < 0.5 else R.aimed.down_later).draw(rng))
        # A default is left out of the JSON only when it is not passed: msgspec's omit_defaults compares a float
        # default by identity, so an equal 0.0 or 1.0 made here would be written out.
        extra: dict[str, float] = {} if action == "crash" else {"duration": duration}  # a crash holds the node only for `down`
        if delay:
            extra["delay"] = delay
        fault = OnAcquire(at=_t(t), actor=actor, key=key, action=action, down=down, window=_t(min(10.0, end - t)), **extra)
        room = end - fault.end
        fitted = fault if room >= 0 else _shorter_window(fault, fault.window + room)
        if fitted is not None:
            out.append(fitted)


def _shorter_window(fault: OnAcquire, window: float) -> OnAcquire | None:
    """``fault`` with a shorter watch window (None: no window left)."""
    window = math.floor(window * 1000) / 1000
    if window <= 0.01:
        return None
    return msgspec.structs.replace(fault, window=window)
