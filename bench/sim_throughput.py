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
import platform
import time

import simpy

from metronome import single_node


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--minutes", type=float, default=60.0)
    args = parser.parse_args()
    print(f"python               {platform.python_version()} {platform.python_implementation()}")
    raw = max(simpy_timeouts_per_second() for _ in range(3))
    print(f"simpy timeouts/s     {raw:.0f}")
    delivered, elapsed = single_node(args.keys, args.minutes)
    rate = delivered / elapsed
    print(f"keys                 {args.keys}")
    print(f"simulated            {args.minutes:g} min")
    print(f"delivered            {delivered}")
    print(f"wall.s               {elapsed:.1f}")
    print(f"deliveries/s         {rate:.0f}")
    print(f"ratio                {rate / raw:.3f}")


if __name__ == "__main__":
    main()
