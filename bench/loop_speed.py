"""How fast does virtual time go? Raw simpy timeouts against asyncio.sleep wake-ups on a VirtualLoop.

    .venv/bin/python bench/loop_speed.py [--wakeups N] [--sleepers K]

K concurrent sleepers (simpy processes, or asyncio tasks on a VirtualLoop) each wait a fixed,
deterministic delay (1..1000 us) again and again until N wake-ups happened in total. Printed:
raw simpy timeouts/s (a process yielding env.timeout, and a bare Timeout + callback), bare
``asyncio.sleep`` wake-ups/s on a VirtualLoop (driven by ``env.run`` and by ``run_until_complete``),
the same with ``asyncio.timeout`` blocks around each sleep, the stock asyncio selector loop with a
clock that jumps instead of waiting (what asyncio's own machinery costs, for reference), and ratios.
Best of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import platform
import selectors
import sys
import time
from collections.abc import Callable
from pathlib import Path

import simpy

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sim.loop import VirtualLoop, run_until_complete  # noqa: E402


def delays(k: int) -> list[int]:
    return [1_000 * (1 + (i * 7919) % 1000) for i in range(k)]  # ns, deterministic spread


def simpy_processes(n: int, k: int) -> float:
    env = simpy.Environment()
    per = n // k

    def sleeper(d: int):  # type: ignore[no-untyped-def]
        timeout = env.timeout
        for _ in range(per):
            yield timeout(d)

    for d in delays(k):
        env.process(sleeper(d))
    t0 = time.perf_counter()
    env.run()
    return per * k / (time.perf_counter() - t0)


def simpy_callbacks(n: int, k: int) -> float:
    env = simpy.Environment()
    left = [n]

    def fire(event: simpy.Timeout) -> None:
        if left[0] > 0:
            left[0] -= 1
            d = event._delay
            env.timeout(d).callbacks.append(fire)

    for d in delays(k):
        env.timeout(d).callbacks.append(fire)
    t0 = time.perf_counter()
    env.run()
    return n / (time.perf_counter() - t0)


def _sleepers(loop: VirtualLoop, n: int, k: int, timeout: bool) -> Callable[[], object]:
    per = n // k

    async def sleeper(d: float) -> None:
        sleep = asyncio.sleep
        if timeout:
            for _ in range(per):
                async with asyncio.timeout(1.0):
                    await sleep(d)
        else:
            for _ in range(per):
                await sleep(d)

    async def main() -> None:
        await asyncio.gather(*[sleeper(d / 1e9) for d in delays(k)])

    return main


def virtual_env_run(n: int, k: int, timeout: bool = False) -> float:
    env = simpy.Environment()
    loop = VirtualLoop(env, "bench")
    main = _sleepers(loop, n, k, timeout)
    task = loop.create_task(main())  # type: ignore[arg-type]
    t0 = time.perf_counter()
    env.run()
    elapsed = time.perf_counter() - t0
    assert task.done() and task.exception() is None and not loop.errors
    return (n // k) * k / elapsed


def virtual_helper(n: int, k: int, timeout: bool = False) -> float:
    env = simpy.Environment()
    loop = VirtualLoop(env, "bench")
    main = _sleepers(loop, n, k, timeout)
    t0 = time.perf_counter()
    run_until_complete(env, loop, main())  # type: ignore[arg-type]
    elapsed = time.perf_counter() - t0
    assert not loop.errors
    return (n // k) * k / elapsed


class _SkippingSelectorLoop(asyncio.SelectorEventLoop):
    """Reference only: the stock asyncio loop with a clock that jumps instead of waiting (no simpy)."""

    def __init__(self) -> None:
        super().__init__(selectors.DefaultSelector())
        self._t = 0.0
        select = self._selector.select  # type: ignore[attr-defined]

        def jump(timeout: float | None = None) -> list[object]:
            ready = select(0)
            if not ready and timeout:
                self._t += timeout
            return ready  # type: ignore[no-any-return]

        self._selector.select = jump  # type: ignore[attr-defined]
        self._clock_resolution = 1e-9

    def time(self) -> float:
        return self._t


def stock_asyncio(n: int, k: int) -> float:
    loop = _SkippingSelectorLoop()
    try:
        main = _sleepers(loop, n, k, False)  # type: ignore[arg-type]
        t0 = time.perf_counter()
        loop.run_until_complete(main())  # type: ignore[arg-type]
        return (n // k) * k / (time.perf_counter() - t0)
    finally:
        loop.close()


def best(fn: Callable[..., float], repeat: int, *args: object) -> float:
    results = []
    for _ in range(repeat):
        gc.collect()
        results.append(fn(*args))
    return max(results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wakeups", type=int, default=300_000)
    parser.add_argument("--sleepers", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    n, k, r = args.wakeups, args.sleepers, args.repeat

    print(f"Python {platform.python_version()}, simpy {simpy.__version__}, {n} wake-ups, {k} concurrent sleepers, best of {r}")
    raw_proc = best(simpy_processes, r, n, k)
    raw_cb = best(simpy_callbacks, r, n, k)
    v_run = best(virtual_env_run, r, n, k)
    v_helper = best(virtual_helper, r, n, k)
    v_timeout = best(virtual_env_run, r, n, k, True)
    stock = best(stock_asyncio, r, n, k)
    rows = [
        ("raw simpy: process yielding env.timeout", raw_proc),
        ("raw simpy: Timeout + callback", raw_cb),
        ("VirtualLoop: asyncio.sleep, env.run()", v_run),
        ("VirtualLoop: asyncio.sleep, run_until_complete()", v_helper),
        ("VirtualLoop: asyncio.timeout + sleep, env.run()", v_timeout),
        ("reference: stock asyncio loop, clock jumps, no simpy", stock),
    ]
    for label, rate in rows:
        print(f"  {label:<52} {rate:>12,.0f} /s   {1e6 / rate:6.2f} us each")
    print(f"  ratio asyncio.sleep on VirtualLoop / raw simpy process: {v_run / raw_proc:.2f}")
    print(f"  ratio asyncio.sleep on VirtualLoop / raw simpy callback: {v_run / raw_cb:.2f}")
    print(f"  ratio asyncio.sleep on VirtualLoop / stock asyncio loop: {v_run / stock:.2f}")


if __name__ == "__main__":
    main()
