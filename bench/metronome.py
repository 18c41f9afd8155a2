"""What ``sim_throughput.py`` and ``cluster_sim.py`` both run: 1000 keys, each on a persisted 1-second schedule.

Shared so that the single-node and the cluster figures measure the very same work: the same
actor, the same arming, the same clock and the same counting of ``schedule.fired``. Only the
world around it differs (one node, or three in a cluster).
"""

from __future__ import annotations

import asyncio
import cProfile
import time
from dataclasses import dataclass
from datetime import timedelta

from casty import ActorSystem, Askable, Context, actor
from sim.world import World

ARMED_BY = 0.5  # seconds of simulated time given to the arming before the clock starts; a cluster may ask for more


@dataclass(frozen=True)
class Beat:
    pass


@dataclass(frozen=True)
class Arm(Askable[None]):
    """Start the schedule: first due in 1 s, or at ``first_due_us`` (wall clock, µs) to share one grid with other keys."""

    first_due_us: int | None = None


@actor(initial=0)
async def metronome(ctx: Context[int, Beat | Arm]) -> None:
    """Counts its beats; Arm starts a 1-second schedule."""
    async for msg in ctx.inbox:
        match msg:
            case Beat():
                await ctx.state.update(lambda n: n + 1)
            case Arm(first_due_us=first_due_us, reply_to=reply_to):
                delay = timedelta(seconds=1)
                if first_due_us is not None:
                    delay = timedelta(microseconds=first_due_us - ctx.system.clock.now_us())
                await ctx.schedule("beat", delay, timedelta(seconds=1), Beat())
                reply_to.tell(None)


def keep_faults_and_nodes(kind: str) -> bool:
    """Only node and fault rows become trace rows; the millions of schedule and write events are only counted."""
    return kind.startswith(("node.", "fault."))


def run_metronomes(
    world: World,
    client: str,
    keys: int,
    minutes: float,
    *,
    armed_by: float = ARMED_BY,
    aligned: bool = False,
    profiler: cProfile.Profile | None = None,
) -> tuple[int, float]:
    """Arm ``keys`` metronomes from node ``client``, run to ``armed_by`` s, then time ``minutes`` of simulated time.

    ``aligned``: every key's first due is the same instant (``armed_by`` + 0.5 s), so all keys
    beat on one grid, as they do on a single node where the arming takes one instant; otherwise
    each key's grid starts 1 s after its own arming (scattered by the network in a cluster).

    Returns the deliveries (``schedule.fired`` events, counted on every node) and the wall time
    of the timed part only (not the arming), which ``profiler`` (if given) profiles. Raises if
    some key was not armed by ``armed_by``.
    """
    armed: list[int] = []

    async def arm(system: ActorSystem) -> None:
        first_due = system.clock.now_us() + int((armed_by + 0.5 - world.now) * 1e6) if aligned else None
        await asyncio.gather(*(system.ref(metronome, f"k{i}").ask(Arm(first_due)) for i in range(keys)))
        armed.append(keys)

    world.spawn(client, arm)
    world.run(until=armed_by)
    if armed != [keys]:
        raise RuntimeError(f"the {keys} keys were not all armed by t={armed_by}s of simulated time")
    before = world.trace.counts.get("schedule.fired", 0)
    if profiler is not None:
        profiler.enable()
    started = time.perf_counter()
    world.run(until=armed_by + minutes * 60)
    elapsed = time.perf_counter() - started
    if profiler is not None:
        profiler.disable()
    delivered = world.trace.counts.get("schedule.fired", 0) - before
    return delivered, elapsed


def single_node(keys: int, minutes: float) -> tuple[int, float]:
    """The work on one node (``World(0)``, node ``n1``, rows counted not kept): (deliveries, wall seconds)."""
    world = World(0, keep=keep_faults_and_nodes)
    world.add_node("n1")
    try:
        return run_metronomes(world, "n1", keys, minutes)
    finally:
        world.close()
