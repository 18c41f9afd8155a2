"""Fault plans as values: typed, frozen faults, a ``FaultPlan`` that applies itself to a ``World``.

A fault is a frozen ``msgspec.Struct`` with an ``at`` time (true seconds from the start of
the run) and its parameters::

    plan = FaultPlan.of(
        Crash(at=3.2, node="n1"), Crash(at=3.2, node="n2"),
        Restart(at=5.0, node="n1", wipe=True), Restart(at=6.1, node="n2"),
        Pause(at=8.0, node="n3", duration=6.0),
        Partition(at=9.0, a=("n4",), b=("n1", "n2", "n3", "n5"), oneway=True, duration=3.0),
        ClockStep(at=10.0, node="n5", seconds=-300.0), ClockStep(at=22.0, node="n5", seconds=300.0),
    )
    plan.apply(world)          # one simpy process carries the faults out at their times
    str(plan)                  # 'crash(n1)@3.20 crash(n2)@3.20 restart(n1,wipe)@5.00 ...'
    FaultPlan.from_json(plan.to_json()) == plan

Why values and not scripts: a plan that can be printed on one line, stored as JSON and
replayed exactly (``python -m sim run swarm --seed N --plan JSON``) is a reproducible
finding; a generator of plans (``FaultMix``, ``generate``) and, later, property-based
strategies can build, shrink and compare them.

The kinds: ``Crash``, ``Restart`` (with or without its disk), ``Pause`` (with an optional
duration) and ``Resume``, ``Partition`` (symmetric or one-way, with an optional duration),
``Flap`` (a partition that comes and goes), ``Heal`` (every partition), ``ClockStep``,
``ClockDrift``, ``Loss``, ``Duplicate`` (the copy held back by up to ``delay``), ``Reorder``,
and two forged frames from a stranger: ``ForgedHeartbeat`` (a membership heartbeat naming
fake members) and ``ForgedRef`` (a routed message carrying a ref to an unknown module).

A fault that no longer fits when its time comes (pausing a crashed node, restarting one
that is up) is noted in the trace (a ``note`` row: "planned pause(n1)@3.20 skipped: the
node is down") and skipped: a plan is drawn before the run and cannot know what the
runtime did meanwhile. A plan naming a node the world does not have is refused at
``apply`` with ``ValueError``.

The JSON form is ``{"faults": [{"kind": "crash", "at": 3.2, "node": "n1"}, ...]}``: one
object per fault, tagged by ``kind``, fields in declaration order and defaults left out, so
the same plan is always the same text.

Beyond single plans: ``FaultMix.draw(rng, nodes)`` picks which kinds a seed uses and how
hard (swarm testing, as TigerBeetle's VOPR does), ``generate(mix, rng, nodes, duration)``
draws a plan from it, and ``heal_all(world)`` ends every fault at once (the start of a
liveness phase). The ``swarm`` scenario (``sim.scenarios.swarm``) puts the three together.
"""

from __future__ import annotations

import math
import random
from collections.abc import Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, Final, Union

import msgspec
import simpy

if TYPE_CHECKING:
    from .world import World

__all__ = [
    "Fault",
    "Crash",
    "Restart",
    "Pause",
    "Resume",
    "Partition",
    "Flap",
    "Heal",
    "ClockStep",
    "ClockDrift",
    "Loss",
    "Duplicate",
    "Reorder",
    "ForgedHeartbeat",
    "ForgedRef",
    "OnAcquire",
    "ON_ACQUIRE_ACTIONS",
    "FAULT_KINDS",
    "GENERATED_KINDS",
    "FaultPlan",
    "FaultMix",
    "generate",
    "heal_all",
]


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


class ForgedHeartbeat(Fault, frozen=True, tag="forged_heartbeat"):
    """A stranger ``sender`` that knows the cluster sends ``node`` one membership heartbeat whose digest names ``fakes``."""

    node: str
    sender: str = "mallory"
    fakes: tuple[str, ...] = ("ghost1", "ghost2")
    kind: ClassVar[str] = "forged_heartbeat"

    def __post_init__(self) -> None:
        super().__post_init__()
        _nodes("forged_heartbeat.fakes", self.fakes)
        _check(bool(self.sender), "forged_heartbeat.sender must name the stranger")

    def args(self) -> list[str]:
        return [f"{self.sender}->{self.node}", *self.fakes]

    def start(self, world: World) -> None:
        from casty.cluster.driver import MEMBERSHIP_CHANNEL
        from casty.protocol.membership import Heartbeat
        from casty.cluster.routing import CLUSTER_WIRE

        digest = tuple((name, 1, "alive", 1) for name in (self.sender, *self.fakes))
        frame = CLUSTER_WIRE.encode(MEMBERSHIP_CHANNEL, Heartbeat(node=self.sender, incarnation=1, seq=1, digest=digest))
        world.inject(self.sender, self.node, frame)


class ForgedRef(Fault, frozen=True, tag="forged_ref"):
    """A stranger routes ``message`` (a message class's ``module:qualname``) to ``actor[key]`` on ``node``; its
    ``reply_to`` is a ref naming ``module``, a module no node has (telling it must never import anything)."""

    node: str
    actor: str
    key: str
    message: str
    module: str = "forged_nowhere"
    sender: str = "mallory"
    kind: ClassVar[str] = "forged_ref"

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("actor", "key", "message", "module", "sender"):
            _check(bool(getattr(self, name)), f"forged_ref.{name} must not be empty")

    def args(self) -> list[str]:
        return [f"{self.sender}->{self.node}", f"{self.actor.rsplit(':', 1)[-1]}[{self.key}]", f"ref={self.module}"]

    def start(self, world: World) -> None:
        from casty.cluster.routing import CLUSTER_WIRE, ROUTING_CHANNEL, Deliver

        ref = ["@e", f"{self.module}:forged", "k"]
        body = msgspec.msgpack.encode((self.message, {"reply_to": ref}))
        frame = CLUSTER_WIRE.encode(ROUTING_CHANNEL, Deliver(request=1, actor=self.actor, key=self.key, message=body, reply_node=self.sender, reply_request=1))
        world.inject(self.sender, self.node, frame)


ON_ACQUIRE_ACTIONS: Final[tuple[str, ...]] = ("pause", "crash", "cut-crash")
"""What ``OnAcquire`` does to the node that acquired its key."""


class OnAcquire(Fault, frozen=True, tag="on_acquire"):
    """Hit the node that acquires ``actor[key]`` next: from ``at`` on, the first ``epoch.acquired`` row of that key
    (within ``window`` s) picks the node, and ``delay`` s later it is paused for ``duration`` s (``pause``), crashed
    and restarted with its disk ``down`` s later (``crash``; ``duration`` unused), or cut off from every other node for ``duration`` s,
    then crashed, reconnected and restarted ``down`` s later (``cut-crash``: what it had not sent yet is lost).

    Why trace-triggered: the windows a replication protocol must get right open at an acquisition
    (a write-back not yet on a quorum, promises still in flight), a few milliseconds wide; a plan
    drawn before the run cannot know when, or on which node, they open. Watching the trace aims at
    them and stays a value: the same plan on the same seed hits the same instant.
    """

    actor: str
    key: str
    action: str = "pause"
    delay: float = 0.0
    duration: float = 1.0
    down: float = 1.0
    window: float = 5.0
    kind: ClassVar[str] = "on_acquire"

    def __post_init__(self) -> None:
        super().__post_init__()
        _check(bool(self.actor) and bool(self.key), "on_acquire.actor and on_acquire.key must not be empty")
        _check(self.action in ON_ACQUIRE_ACTIONS, f"on_acquire.action must be one of {', '.join(ON_ACQUIRE_ACTIONS)}, got {self.action!r}")
        _finite("on_acquire.delay", self.delay)
        _finite("on_acquire.duration", self.duration, positive=True)
        _finite("on_acquire.down", self.down, positive=True)
        _finite("on_acquire.window", self.window, positive=True)

    @property
    def end(self) -> float:
        """The latest it can be over: the whole window waited, then the delay, the fault and the restart."""
        held = {"pause": self.duration, "crash": self.down, "cut-crash": self.duration + self.down}[self.action]
        return self.at + self.window + self.delay + held

    def args(self) -> list[str]:
        out = [f"{self.actor.rsplit(':', 1)[-1]}[{self.key}]", self.action]
        if self.delay:
            out.append(f"+{_num(self.delay)}s")
        if self.action != "crash":  # a crash holds the node only for ``down``
            out.append(f"{_num(self.duration)}s")
        if self.action != "pause":
            out.append(f"down {_num(self.down)}s")
        return out

    def start(self, world: World) -> Generator[simpy.Event, Any, None]:
        acquired = world.env.event()
        since = int(world.env.now)

        def watch(row: Any) -> None:  # called inside the runtime's turn: only note the node, act from the process
            if not acquired.triggered and row.kind == "epoch.acquired" and row.t_ns >= since:
                if row.get("actor") == self.actor and row.get("key") == self.key:
                    acquired.succeed(row.node)

        world.trace.subscribe(watch)
        return self._hit(world, acquired)

    def _hit(self, world: World, acquired: simpy.Event) -> Generator[simpy.Event, Any, None]:
        timeout = world.timeout(self.window)
        yield acquired | timeout
        if not acquired.triggered:
            _skipped(world, "world", str(self), f"no acquisition of {self.key} within {_num(self.window)}s")
            return
        node = str(acquired.value)
        if self.delay:
            yield world.timeout(self.delay)
        state = world.node(node)
        if state.status != "up":
            _skipped(world, node, str(self), f"the node is {state.status}")
            return
        incarnation = state.incarnation
        world.note(node, f"{self} hits {node}", fault=str(self))
        if self.action == "pause":
            world.pause(node)
            yield world.timeout(self.duration)
            if world.node(node).status == "paused" and world.node(node).incarnation == incarnation:
                world.resume(node)
            return
        if self.action == "cut-crash":
            others = [n for n in world.nodes if n != node]
            if others:
                world.partition([node], others)
            yield world.timeout(self.duration)
            if others:
                world.reconnect([node], others)
        if world.node(node).status != "down" and world.node(node).incarnation == incarnation:
            world.crash(node)  # a paused node crashes too
        yield world.timeout(self.down)
        if world.node(node).status == "down":
            world.restart(node)


AnyFault = Union[
    Crash, Restart, Pause, Resume, Partition, Flap, Heal, ClockStep, ClockDrift, Loss, Duplicate, Reorder, ForgedHeartbeat, ForgedRef,
    OnAcquire,
]
FAULT_KINDS: Final[tuple[type[Fault], ...]] = (
    Crash, Restart, Pause, Resume, Partition, Flap, Heal, ClockStep, ClockDrift, Loss, Duplicate, Reorder, ForgedHeartbeat, ForgedRef,
    OnAcquire,
)
"""Every fault class, in the order the JSON tags and the docs list them."""


class _PlanJSON(msgspec.Struct, forbid_unknown_fields=True):
    faults: tuple[AnyFault, ...]


def _skipped(world: World, node: str, what: str, why: str) -> None:
    world.note(node, f"planned {what} skipped: {why}", fault=what)


@dataclass(frozen=True)
class FaultPlan:
    """Faults sorted by time (stable: two at the same time keep their given order). Equal plans are equal values."""

    faults: tuple[Fault, ...] = ()
    _json: ClassVar[msgspec.json.Encoder] = msgspec.json.Encoder()

    def __post_init__(self) -> None:
        for fault in self.faults:
            if not isinstance(fault, Fault) or type(fault) not in FAULT_KINDS:
                raise TypeError(f"a FaultPlan holds faults, got {fault!r}")
        object.__setattr__(self, "faults", tuple(sorted(self.faults, key=lambda f: f.at)))

    @classmethod
    def of(cls, *faults: Fault) -> FaultPlan:
        return cls(tuple(faults))

    @property
    def end(self) -> float:
        """When the last fault is over (0 for an empty plan)."""
        return max((f.end for f in self.faults), default=0.0)

    def nodes(self) -> tuple[str, ...]:
        """Every node the plan names, sorted."""
        return tuple(sorted({n for f in self.faults for n in f.nodes()}))

    def __str__(self) -> str:
        return " ".join(str(f) for f in self.faults) if self.faults else "(no faults)"

    def __len__(self) -> int:
        return len(self.faults)

    def __iter__(self) -> Iterator[Fault]:
        """The faults in time order: a plan reads like the sequence it is (``for fault in plan``)."""
        return iter(self.faults)

    def __getitem__(self, index: int) -> Fault:
        return self.faults[index]

    def to_json(self) -> str:
        """``{"faults": [{"kind": ..., "at": ..., ...}, ...]}``: stable text, one tagged object per fault."""
        return self._json.encode(_PlanJSON(tuple(self.faults))).decode()  # type: ignore[arg-type]

    @classmethod
    def from_json(cls, text: str | bytes) -> FaultPlan:
        """The plan ``to_json`` wrote; ``ValueError`` naming what is wrong for anything else."""
        try:
            decoded = msgspec.json.decode(text, type=_PlanJSON)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise ValueError(f"not a fault plan: {exc}") from None
        return cls(tuple(decoded.faults))

    def apply(self, world: World) -> simpy.Process:
        """Schedule the plan on ``world`` (one simpy process); ``ValueError`` if it names a node the world lacks."""
        unknown = [n for n in self.nodes() if n not in world.nodes]
        if unknown:
            raise ValueError(f"the plan names node(s) {', '.join(unknown)}; the world has {', '.join(world.nodes)}")
        return world.process(self._run(world))

    def _run(self, world: World) -> Generator[simpy.Event, Any, None]:
        for fault in self.faults:
            if fault.at > world.now:
                yield world.timeout(fault.at - world.now)
            why = fault.misfit(world)
            if why is not None:
                nodes = fault.nodes()
                _skipped(world, nodes[0] if nodes else "network", str(fault), why)
                continue
            follow_up = fault.start(world)
            if follow_up is not None:
                world.process(follow_up)


def heal_all(world: World, *, offsets: dict[str, float] | None = None) -> None:
    """End every fault: links whole and back to the world's default model, paused nodes resumed, crashed nodes
    restarted with their disks, and each clock corrected as NTP would (drift off, stepped back to ``offsets[node]``
    seconds from true time, 0 by default): a step of its own, which timers must notice."""
    from datetime import timedelta

    world.heal()
    default = world.network.default
    for u in world.nodes:
        for v in world.nodes:
            if u != v and world.network.model(u, v) != default:
                world.network.link(u, v, default)
    for name, node in world.nodes.items():
        if node.clock._drift_ppm:
            world.set_drift(name, 0.0)
        want_us = round((offsets or {}).get(name, 0.0) * 1e6)
        off_us = node.clock.offset_us() - want_us
        if abs(off_us) > 1_000:
            world.step_clock(name, timedelta(microseconds=-off_us))
        if node.status == "paused":
            world.resume(name)
        elif node.status == "down":
            world.restart(name)
    world.note("world", "every fault healed")


# ========================================================================== generator ======

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
                at = _t(t + rng.uniform(0.0, 0.3))
                if kind == "crash":
                    down = rng.uniform(0.3, 10.0)
                    faults.append(Crash(at=at, node=node))
                    if rng.random() < 0.9 and at + down < end:
                        faults.append(Restart(at=_t(at + down), node=node, wipe=rng.random() < mix.wipe))
                        busy.until[node] = at + down + 1.0
                    else:
                        busy.until[node] = end  # restarted when the run heals
                else:
                    length = min(rng.uniform(3.0, 15.0) if long else rng.uniform(0.2, 3.0), room - 0.4)
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
            length = min(rng.uniform(3.0, 15.0) if long else rng.uniform(0.3, 3.0), room - 0.1)
            if kind == "partition":
                faults.append(Partition(at=_t(t), a=a, b=b, oneway=oneway, duration=_t(length)))
            else:
                faults.append(Flap(at=_t(t), a=a, b=b, period=_t(rng.uniform(0.1, 2.0)), duration=_t(length), oneway=oneway))
        elif kind == "clock_step":
            node = rng.choice(names)
            if long:
                back = rng.uniform(30.0, 600.0)
                faults.append(ClockStep(at=_t(t), node=node, seconds=-_t(back)))
                fix = t + rng.uniform(1.0, 15.0)
                if fix < end:
                    faults.append(ClockStep(at=_t(fix), node=node, seconds=_t(back)))
            else:
                faults.append(ClockStep(at=_t(t), node=node, seconds=_t(rng.choice((-1, 1)) * rng.uniform(0.05, 3.0))))
        elif kind == "clock_drift":
            faults.append(ClockDrift(at=_t(t), node=rng.choice(names), ppm=round(rng.choice((-1, 1)) * rng.uniform(50.0, 50_000.0 if long else 2_000.0))))
        elif kind in ("loss", "duplicate", "reorder"):
            scope = tuple(sorted(rng.sample(names, rng.randint(1, len(names))))) if rng.random() < 0.5 else ()
            length = _t(min(rng.uniform(0.3, 8.0), room - 0.1))
            p = round(rng.uniform(0.05, 0.6 if long else 0.3), 3)
            if kind == "loss":
                faults.append(Loss(at=_t(t), p=p, duration=length, links_of=scope))
            elif kind == "duplicate":
                faults.append(Duplicate(at=_t(t), p=p, duration=length, links_of=scope, delay=_t(rng.uniform(0.0, 0.5))))
            else:
                faults.append(Reorder(at=_t(t), p=p, duration=length, links_of=scope, delay=_t(rng.uniform(0.005, 0.2))))
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
        delay = 0.0 if rng.random() < 0.6 else _t(rng.uniform(0.001, 0.05))
        long = rng.random() < mix.long
        duration = _t(rng.uniform(3.0, 8.0) if long and action == "pause" else rng.uniform(0.2, 3.0) if action == "pause" else rng.uniform(0.05, 1.0))
        if action == "crash":
            duration = 1.0  # unused by a crash: the default, left out of the JSON
        down = _t(rng.uniform(0.05, 0.5) if rng.random() < 0.5 else rng.uniform(0.5, 5.0))
        fault = OnAcquire(at=_t(t), actor=actor, key=key, action=action, delay=delay, duration=duration, down=down, window=_t(min(10.0, end - t)))
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
