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

This package is the public face (``from sim.faults import Crash, FaultPlan, generate``); each
concept has a module of its own: ``values`` (the fault kinds), ``forged`` (the forged frames),
``on_acquire`` (the trace-triggered fault), ``plan`` (``FaultPlan``, ``heal_all``) and
``generator`` (``FaultMix``, ``generate``).
"""

from __future__ import annotations

from .forged import ForgedHeartbeat, ForgedRef
from .generator import GENERATED_KINDS, FaultMix, generate
from .on_acquire import ON_ACQUIRE_ACTIONS, OnAcquire
from .plan import FAULT_KINDS, AnyFault, FaultPlan, heal_all
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
)

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
