"""How fast the simulated world runs the real runtime, against simpy's own speed.

Two figures in one run:

``simpy timeouts/s``
    Raw simpy: 1000 processes each yielding a 1-second ``env.timeout`` 1000 times, the
    same shape as the 1000 ticking keys below. The ceiling any simpy-based world can
    reach per event.
``deliveries/s``
    One simulated node running the real casty runtime: 1000 keys, each with a persisted
    1-second interval schedule, over a simulated hour (3.6 million deliveries). Each
    delivery is a timer firing, a tell, the body waking to handle it with a state update,
    and the schedule page's next-due write, with every observer event built and counted.
    Trace rows are counted, not kept (keeping 14 million rows would measure memory).

Printed: both rates, their ratio (target >= 0.10) and the wall time of the simulated
hour (target < 40 s on a 2-core machine).

    python bench/sim_throughput.py            # the full hour
    python bench/sim_throughput.py --minutes 5
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import time
from dataclasses import dataclass
from datetime import timedelta

import simpy

from casty import ActorSystem, Askable, Context, actor
from sim.world import World


def simpy_timeouts_per_second(processes: int = 1000, each: int = 1000) -> float:
    """1000 simpy processes each waiting on 1000 one-second timeouts: the same shape as 1000 ticking keys."""
    env = simpy.Environment()

    def ticker(env: simpy.Environment):  # type: ignore[no-untyped-def]
        for _ in range(each):
            yield env.timeout(1_000_000_000)

    for _ in range(processes):
        env.process(ticker(env))
    started = time.perf_counter()
    env.run()
    return processes * each / (time.perf_counter() - started)


@dataclass(frozen=True)
class Beat:
    pass


@dataclass(frozen=True)
class Arm(Askable[None]):
    pass


@actor(initial=0)
async def metronome(ctx: Context[int, Beat | Arm]) -> None:
    """Counts its beats; Arm starts a 1-second schedule."""
    async for msg in ctx.inbox:
        match msg:
            case Beat():
                await ctx.state.update(lambda n: n + 1)
            case Arm(reply_to=reply_to):
                await ctx.schedule("beat", timedelta(seconds=1), timedelta(seconds=1), Beat())
                reply_to.tell(None)


def scheduled_deliveries(keys: int, minutes: float) -> tuple[int, float]:
    world = World(0, keep=lambda kind: kind.startswith(("node.", "fault.")))
    world.add_node("n1")

    async def arm(system: ActorSystem) -> None:
        await asyncio.gather(*(system.ref(metronome, f"k{i}").ask(Arm()) for i in range(keys)))

    world.spawn("n1", arm)
    world.run(until=0.5)
    started = time.perf_counter()
    world.run(until=0.5 + minutes * 60)
    elapsed = time.perf_counter() - started
    delivered = world.trace.counts.get("schedule.fired", 0)
    world.close()
    return delivered, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--minutes", type=float, default=60.0)
    args = parser.parse_args()
    print(f"python               {platform.python_version()} {platform.python_implementation()}")
    raw = max(simpy_timeouts_per_second() for _ in range(3))
    print(f"simpy timeouts/s     {raw:.0f}")
    delivered, elapsed = scheduled_deliveries(args.keys, args.minutes)
    rate = delivered / elapsed
    print(f"keys                 {args.keys}")
    print(f"simulated            {args.minutes:g} min")
    print(f"delivered            {delivered}")
    print(f"wall.s               {elapsed:.1f}")
    print(f"deliveries/s         {rate:.0f}")
    print(f"ratio                {rate / raw:.3f}")


if __name__ == "__main__":
    main()
