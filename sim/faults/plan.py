"""``FaultPlan``: faults sorted by time, printed on one line, stored as JSON, applied to a ``World``; ``heal_all``."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Final, Union

import msgspec
import simpy

from .forged import ForgedHeartbeat, ForgedRef
from .on_acquire import OnAcquire
from .values import (
    ClockDrift,
    ClockStep,
    Crash,
    Duplicate,
    Fault,
    Flap,
    Heal,
    Loss,
    Partition,
    Pause,
    Reorder,
    Restart,
    Resume,
    _skipped,
)

if TYPE_CHECKING:
    from ..world import World


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
