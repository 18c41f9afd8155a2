"""The fault values: a frozen ``msgspec.Struct`` per kind, each of which knows how to carry itself out on a ``World``.

Why one module for the kinds a plan can hold (the node, link, clock and network-model faults): they share
the base class, its checks of bad input and its one-line ``str`` form, and a reader compares them side by
side. The forged frames (``sim.faults.forged``) and the trace-triggered ``OnAcquire``
(``sim.faults.on_acquire``) reach into the runtime or the trace and live apart.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar

import msgspec
import simpy

if TYPE_CHECKING:
    from ..world import World

def _num(value: float) -> str:
    """A time or amount for ``str(plan)``: two decimals at least, three when needed (3.20, 3.215)."""
    text = f"{value:.3f}"
    return text[:-1] if text.endswith("0") else text


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


def _finite(name: str, value: float, *, low: float = 0.0, positive: bool = False) -> None:
    _check(math.isfinite(value), f"{name} must be finite, got {value!r}")
    _check(value > low if positive else value >= low, f"{name} must be {'>' if positive else '>='} {low:g}, got {value!r}")


def _nodes(name: str, nodes: tuple[str, ...]) -> None:
    _check(all(isinstance(n, str) and n for n in nodes), f"{name} must name nodes, got {nodes!r}")


class Fault(msgspec.Struct, frozen=True, tag_field="kind", forbid_unknown_fields=True, omit_defaults=True):
    """One fault at true time ``at`` (seconds from the start of the run). Subclasses carry the parameters."""

    at: float

    kind: ClassVar[str] = "fault"

    def __post_init__(self) -> None:
        _finite(f"{self.kind}.at", self.at)

    @property
    def end(self) -> float:
        """When the fault is over (its ``at`` plus its duration, if it has one)."""
        duration = getattr(self, "duration", None)
        return self.at + (duration or 0.0)

    def nodes(self) -> tuple[str, ...]:
        """The world nodes this fault names (checked at ``apply``)."""
        node = getattr(self, "node", None)
        return (node,) if node else ()

    def args(self) -> list[str]:
        """The parameters ``str`` shows between the parentheses."""
        return list(self.nodes())

    def __str__(self) -> str:
        return f"{self.kind}({','.join(self.args())})@{_num(self.at)}"

    def misfit(self, world: World) -> str | None:
        """Why this fault cannot be carried out now (None: it fits)."""
        return None

    def start(self, world: World) -> Generator[simpy.Event, Any, None] | None:
        """Carry the fault out at its time; a fault with a duration returns the process that undoes it."""
        raise NotImplementedError


def _status(world: World, node: str) -> str:
    return world.node(node).status


class Crash(Fault, frozen=True, tag="crash"):
    """Crash ``node``: its disk loses unsynced writes, its transport and tasks are cut at once."""

    node: str
    kind: ClassVar[str] = "crash"

    def misfit(self, world: World) -> str | None:
        status = _status(world, self.node)
        return f"the node is {status}" if status == "down" else None

    def start(self, world: World) -> None:
        world.crash(self.node)


class Restart(Fault, frozen=True, tag="restart"):
    """Start a crashed ``node`` again, with its disk or (``wipe``) with a new, empty one."""

    node: str
    wipe: bool = False
    kind: ClassVar[str] = "restart"

    def args(self) -> list[str]:
        return [self.node, "wipe"] if self.wipe else [self.node]

    def misfit(self, world: World) -> str | None:
        status = _status(world, self.node)
        return f"the node is {status}" if status != "down" else None

    def start(self, world: World) -> None:
        world.restart(self.node, wipe_disk=self.wipe)


class Pause(Fault, frozen=True, tag="pause"):
    """Stop the world on ``node`` (a long GC, a frozen VM); resume it after ``duration`` s (None: a later ``Resume``)."""

    node: str
    duration: float | None = None
    kind: ClassVar[str] = "pause"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.duration is not None:
            _finite("pause.duration", self.duration, positive=True)

    def args(self) -> list[str]:
        return [self.node] if self.duration is None else [self.node, f"{_num(self.duration)}s"]

    def misfit(self, world: World) -> str | None:
        status = _status(world, self.node)
        return f"the node is {status}" if status != "up" else None

    def start(self, world: World) -> Generator[simpy.Event, Any, None] | None:
        world.pause(self.node)
        if self.duration is None:
            return None
        return self._resume_later(world, world.node(self.node).incarnation, self.duration)

    def _resume_later(self, world: World, incarnation: int, duration: float) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(duration)
        node = world.node(self.node)
        if node.status == "paused" and node.incarnation == incarnation:
            world.resume(self.node)
        else:
            _skipped(world, self.node, f"the resume of {self}", f"the node is {node.status} (incarnation {node.incarnation})")


class Resume(Fault, frozen=True, tag="resume"):
    """Resume a paused ``node``."""

    node: str
    kind: ClassVar[str] = "resume"

    def misfit(self, world: World) -> str | None:
        status = _status(world, self.node)
        return f"the node is {status}" if status != "paused" else None

    def start(self, world: World) -> None:
        world.resume(self.node)


class Partition(Fault, frozen=True, tag="partition"):
    """Cut every link from side ``a`` to side ``b`` (and back unless ``oneway``); reconnect them after ``duration`` s."""

    a: tuple[str, ...]
    b: tuple[str, ...]
    oneway: bool = False
    duration: float | None = None
    kind: ClassVar[str] = "partition"

    def __post_init__(self) -> None:
        super().__post_init__()
        _nodes("partition.a", self.a)
        _nodes("partition.b", self.b)
        _check(bool(self.a) and bool(self.b), f"a partition needs two non-empty sides, got {self.a!r} | {self.b!r}")
        if self.duration is not None:
            _finite("partition.duration", self.duration, positive=True)

    def nodes(self) -> tuple[str, ...]:
        return (*self.a, *self.b)

    def args(self) -> list[str]:
        arrow = "->" if self.oneway else "|"
        out = [f"{'+'.join(self.a)}{arrow}{'+'.join(self.b)}"]
        if self.duration is not None:
            out.append(f"{_num(self.duration)}s")
        return out

    def start(self, world: World) -> Generator[simpy.Event, Any, None] | None:
        world.partition(self.a, self.b, oneway=self.oneway)
        return None if self.duration is None else self._reconnect_later(world, self.duration)

    def _reconnect_later(self, world: World, duration: float) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(duration)
        world.reconnect(self.a, self.b, oneway=self.oneway)


class Flap(Fault, frozen=True, tag="flap"):
    """A partition of ``a`` from ``b`` that comes and goes: cut for ``period`` s, whole for ``period`` s, for ``duration`` s; it ends whole."""

    a: tuple[str, ...]
    b: tuple[str, ...]
    period: float
    duration: float
    oneway: bool = False
    kind: ClassVar[str] = "flap"

    def __post_init__(self) -> None:
        super().__post_init__()
        _nodes("flap.a", self.a)
        _nodes("flap.b", self.b)
        _check(bool(self.a) and bool(self.b), f"a flap needs two non-empty sides, got {self.a!r} | {self.b!r}")
        _finite("flap.period", self.period, positive=True)
        _finite("flap.duration", self.duration, positive=True)

    def nodes(self) -> tuple[str, ...]:
        return (*self.a, *self.b)

    def args(self) -> list[str]:
        arrow = "->" if self.oneway else "|"
        return [f"{'+'.join(self.a)}{arrow}{'+'.join(self.b)}", f"every {_num(self.period)}s", f"{_num(self.duration)}s"]

    def start(self, world: World) -> Generator[simpy.Event, Any, None]:
        return self._flap(world)

    def _flap(self, world: World) -> Generator[simpy.Event, Any, None]:
        # integer nanoseconds: a float end a rounding short of now would loop on zero-length timeouts
        end_ns = int(world.env.now) + round(self.duration * 1e9)
        period_ns = max(1, round(self.period * 1e9))
        cut = True
        while int(world.env.now) < end_ns:
            if cut:
                world.partition(self.a, self.b, oneway=self.oneway)
            else:
                world.reconnect(self.a, self.b, oneway=self.oneway)
            cut = not cut
            yield world.env.timeout(min(period_ns, end_ns - int(world.env.now)))
        if not cut:  # it ends whole
            world.reconnect(self.a, self.b, oneway=self.oneway)


class Heal(Fault, frozen=True, tag="heal"):
    """Restore every link between every pair of nodes (every partition, including ones with a duration to go)."""

    kind: ClassVar[str] = "heal"

    def start(self, world: World) -> None:
        world.heal()


class ClockStep(Fault, frozen=True, tag="clock_step"):
    """Jump ``node``'s wall clock by ``seconds`` (negative: back), as an NTP step would. A clock runs on a down node too."""

    node: str
    seconds: float
    kind: ClassVar[str] = "clock_step"

    def __post_init__(self) -> None:
        super().__post_init__()
        _finite("clock_step.seconds", self.seconds, low=-math.inf)

    def args(self) -> list[str]:
        return [self.node, f"{self.seconds:+.3f}s".replace(".000s", "s")]

    def start(self, world: World) -> None:
        from datetime import timedelta

        world.step_clock(self.node, timedelta(seconds=self.seconds))


class ClockDrift(Fault, frozen=True, tag="clock_drift"):
    """Make ``node``'s wall clock run fast (``ppm`` > 0) or slow from now on."""

    node: str
    ppm: float
    kind: ClassVar[str] = "clock_drift"

    def __post_init__(self) -> None:
        super().__post_init__()
        _finite("clock_drift.ppm", self.ppm, low=-999_999.0)

    def args(self) -> list[str]:
        return [self.node, f"{self.ppm:+g}ppm"]

    def start(self, world: World) -> None:
        world.set_drift(self.node, self.ppm)


class _LinkFault(Fault, frozen=True):
    """A change of the link model on every link touching ``nodes`` (every link when empty), for ``duration`` s."""

    p: float
    duration: float | None = None
    links_of: tuple[str, ...] = ()
    field_name: ClassVar[str] = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        _finite(f"{self.kind}.p", self.p)
        _check(self.p <= 1.0, f"{self.kind}.p must be within [0, 1], got {self.p!r}")
        _nodes(f"{self.kind}.links_of", self.links_of)
        if self.duration is not None:
            _finite(f"{self.kind}.duration", self.duration, positive=True)

    def nodes(self) -> tuple[str, ...]:
        return self.links_of

    def args(self) -> list[str]:
        out = [f"{self.p:g}", *self._extra()]
        if self.links_of:
            out.append("+".join(self.links_of))
        if self.duration is not None:
            out.append(f"{_num(self.duration)}s")
        return out

    def _extra(self) -> list[str]:
        return []

    def _changes(self, on: bool) -> dict[str, Any]:
        return {self.field_name: self.p if on else 0.0}

    def _links(self, world: World) -> list[tuple[str, str]]:
        names = list(world.nodes)
        touched = set(self.links_of) if self.links_of else set(names)
        return [(u, v) for u in names for v in names if u != v and (u in touched or v in touched)]

    def _set(self, world: World, on: bool) -> None:
        changes = self._changes(on)
        for u, v in self._links(world):
            world.network.link(u, v, replace(world.network.model(u, v), **changes))
        world.note("network", f"{self.kind} {'on' if on else 'off'}", fault=str(self), **changes)

    def start(self, world: World) -> Generator[simpy.Event, Any, None] | None:
        self._set(world, True)
        return None if self.duration is None else self._off_later(world, self.duration)

    def _off_later(self, world: World, duration: float) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(duration)
        self._set(world, False)


class Loss(_LinkFault, frozen=True, tag="loss"):
    """Drop each frame with probability ``p`` (``p=0``: loss off)."""

    kind: ClassVar[str] = "loss"
    field_name: ClassVar[str] = "loss"


class Duplicate(_LinkFault, frozen=True, tag="duplicate"):
    """Deliver each frame twice with probability ``p``, the copy held back by up to ``delay`` s more."""

    delay: float = 0.0
    kind: ClassVar[str] = "duplicate"
    field_name: ClassVar[str] = "duplicate"

    def __post_init__(self) -> None:
        super().__post_init__()
        _finite("duplicate.delay", self.delay)

    def _extra(self) -> list[str]:
        return [f"+{_num(self.delay)}s"] if self.delay else []

    def _changes(self, on: bool) -> dict[str, Any]:
        return {"duplicate": self.p if on else 0.0, "duplicate_delay": self.delay if on else 0.0}


class Reorder(_LinkFault, frozen=True, tag="reorder"):
    """Hold each frame back with probability ``p`` by up to ``delay`` s more, so later frames overtake it."""

    delay: float = 0.010
    kind: ClassVar[str] = "reorder"
    field_name: ClassVar[str] = "reorder"

    def __post_init__(self) -> None:
        super().__post_init__()
        _finite("reorder.delay", self.delay)

    def _extra(self) -> list[str]:
        return [f"+{_num(self.delay)}s"]

    def _changes(self, on: bool) -> dict[str, Any]:
        return {"reorder": self.p if on else 0.0, "reorder_delay": self.delay if on else 0.010}


def _skipped(world: World, node: str, what: str, why: str) -> None:
    world.note(node, f"planned {what} skipped: {why}", fault=what)

