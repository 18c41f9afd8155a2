"""Single-process throughput of a casty runtime, written against the API both casty runtimes share.

The same file runs, unchanged, against our pure-Python ``casty`` (the repo's ``.venv``) and against the public
``casty`` release that we use as the speed anchor (``/tmp/anchor``, see DEVELOPERS.md). It imports only
``ActorSystem``, ``Askable``, ``Context``, ``Ref`` and ``actor`` from ``casty``, and whichever ``casty`` the
interpreter finds is the one measured: the ``casty.file`` line of the output says which.

Usage::

    python bench/local.py            # full run, well under a minute
    python bench/local.py --quick    # a tenth of the work, a few seconds

Every figure is a rate, operations per second, so higher is better. Each is measured ``--reps`` times (3 by default)
and the best repetition is reported, on the ground that noise on a shared machine only ever slows a run down. All
the repetitions are printed too, so a reader can see how much they spread.

Figures
-------
``ask/s``
    Sequential request-reply round trips to one key that is already active: ``await ref.ask(Ping())``, where the body
    answers with its state. One ask is in flight at a time, so this is the latency of the whole ask path (building
    the message, giving it a reply address, queueing it, waking the body, the answer coming back, waking the caller)
    expressed as a rate. It is the cost every caller of an actor pays.
``tell+update/s``
    N fire-and-forget ``ref.tell(Incr())`` to one active key, each handled by the body with
    ``await ctx.state.update(lambda v: v + 1)``, followed by a single ask whose answer proves all N were processed.
    The figure is N divided by the time from the first tell to that answer. It measures the one-way message path
    plus a confirmed state write per message: the throughput of a busy actor whose mailbox never runs dry.
``activations/s``
    N distinct keys, each brought to life by one ask to a key nobody has addressed before:
    ``await system.ref(counter, key).ask(Ping())``, one key at a time. It measures what a first message costs: making
    the ref, creating the activation from the type's initial state, starting its body and the round trip. A virtual
    actor runtime does this every time a new key is touched, so it matters as much as the steady-state figures.

Fairness
--------
- Both runtimes run exactly this code: one actor type, the same two message shapes (``Incr`` told, ``Ping`` asked),
  the same initial state, the runtime's default ``ActorSystem()`` settings.
- Every repetition gets a fresh ``ActorSystem`` and its own warm-up (a tenth of N, at least 100 operations, of the
  same kind as what is measured), so no repetition inherits the keys, mailboxes or garbage of another.
- Keys and anything else the timed loop needs are built before the clock starts; nothing is printed, logged or
  checked inside a timed loop beyond adding up the answers. The answers are checked after the clock stops, and a
  wrong answer fails the run instead of producing a figure.
- The garbage collector is left on, as it is in production, and ``gc.collect()`` runs before each timed section so
  that one repetition does not pay for the garbage of the one before.

Output
------
One ``label value`` pair per line, the label padded to a fixed width, so that ``bench/compare.py`` (or ``awk``) can
parse it. Figure lines are exactly ``ask/s``, ``tell+update/s`` and ``activations/s``, each an integer rate; the
matching ``<figure>.runs`` line lists every repetition.
"""

import argparse
import asyncio
import gc
import importlib.metadata
import json
import platform
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import casty
from casty import ActorSystem, Askable, Context, Ref, actor

LABEL_WIDTH = 20


@dataclass(frozen=True)
class Incr:
    """Told: add one to the state."""


@dataclass(frozen=True)
class Ping(Askable[int]):
    """Asked: answer with the current state."""


@actor(initial=0)
async def counter(ctx: Context[int, Incr | Ping]) -> None:
    """A counter: `Incr` writes state + 1 and waits for the write, `Ping` answers the state."""
    async for msg in ctx.inbox:
        if isinstance(msg, Ping):
            msg.reply_to.tell(ctx.state.value)
        else:
            await ctx.state.update(lambda v: v + 1)


@dataclass(frozen=True)
class Params:
    """How much work each figure does."""

    mode: str
    reps: int
    ask_n: int
    tell_n: int
    activation_n: int

    @staticmethod
    def warmup(n: int) -> int:
        """Warm-up operations before a timed section of `n` operations."""
        return max(n // 10, 100)


class BenchError(RuntimeError):
    """An answer was not what the runtime must have answered: the figure would be meaningless."""


def line(label: str, value: object) -> None:
    print(f"{label:<{LABEL_WIDTH}} {value}", flush=True)


async def bench_ask(n: int) -> float:
    """Seconds for `n` sequential asks to one active key."""
    async with ActorSystem() as system:
        ref: Ref[Incr | Ping] = system.ref(counter, "hot")
        ref.tell(Incr())  # state 1, so that every answer below is a 1 that can be counted
        warmup = Params.warmup(n)
        seen = 0
        for _ in range(warmup):
            seen += await ref.ask(Ping())
        if seen != warmup:
            raise BenchError(f"ask warm-up: {warmup} answers added up to {seen}, expected {warmup}")

        gc.collect()
        total = 0
        start = time.perf_counter()
        for _ in range(n):
            total += await ref.ask(Ping())
        elapsed = time.perf_counter() - start

        if total != n:
            raise BenchError(f"ask: {n} answers added up to {total}, expected {n}")
        return elapsed


async def bench_tell_update(n: int) -> float:
    """Seconds for `n` tells, each a confirmed state update, and one ask that sees them all."""
    async with ActorSystem() as system:
        ref: Ref[Incr | Ping] = system.ref(counter, "hot")
        warmup = Params.warmup(n)
        for _ in range(warmup):
            ref.tell(Incr())
        before = await ref.ask(Ping())
        if before != warmup:
            raise BenchError(f"tell+update warm-up: state is {before}, expected {warmup}")

        gc.collect()
        start = time.perf_counter()
        for _ in range(n):
            ref.tell(Incr())
        after = await ref.ask(Ping())
        elapsed = time.perf_counter() - start

        if after != warmup + n:
            raise BenchError(f"tell+update: state is {after}, expected {warmup + n}")
        return elapsed


async def bench_activations(n: int) -> float:
    """Seconds to activate `n` fresh keys, one ask each, one after the other."""
    async with ActorSystem() as system:
        warmup_keys = [f"warm-{i}" for i in range(Params.warmup(n))]
        keys = [f"key-{i}" for i in range(n)]
        seen = 0
        for key in warmup_keys:
            seen += await system.ref(counter, key).ask(Ping())
        if seen != 0:
            raise BenchError(f"activations warm-up: fresh keys answered {seen} in total, expected 0")

        gc.collect()
        total = 0
        start = time.perf_counter()
        for key in keys:
            total += await system.ref(counter, key).ask(Ping())
        elapsed = time.perf_counter() - start

        if total != 0:
            raise BenchError(f"activations: fresh keys answered {total} in total, expected 0")
        return elapsed


async def figure(label: str, n: int, reps: int, run: Callable[[int], Awaitable[float]]) -> None:
    """Run one figure `reps` times, each in a fresh system, and print every rate and the best."""
    rates = [n / await run(n) for _ in range(reps)]
    line(f"{label}.runs", " ".join(f"{rate:.0f}" for rate in rates))
    line(label, f"{max(rates):.0f}")


def implementation() -> tuple[str, str]:
    """The distribution the imported `casty` was installed from, and its version; `?` when it cannot be told.

    `packages_distributions` names every distribution that claims a top-level `casty`, whether or not it is the one
    imported (a `PYTHONPATH` entry can shadow it), so a claim counts only when its files hold the imported module: the
    installed `casty/__init__.py`, or the project folder of an editable install.
    """
    version = getattr(casty, "__version__", None)
    imported = Path(getattr(casty, "__file__", None) or next(iter(getattr(casty, "__path__", [])), "")).resolve()
    for name in importlib.metadata.packages_distributions().get("casty", []):
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        homes = [Path(str(dist.locate_file("casty"))).resolve()]
        direct_url = dist.read_text("direct_url.json")
        if direct_url:
            url = json.loads(direct_url).get("url", "")
            if url.startswith("file://"):
                homes.append(Path(url.removeprefix("file://")).resolve())
        if any(imported == home or home in imported.parents for home in homes):
            return name, version or dist.version
    return "?", version or "unknown"


def parse_args(argv: list[str] | None = None) -> Params:
    parser = argparse.ArgumentParser(description="Single-process throughput of a casty runtime.")
    parser.add_argument("--quick", action="store_true", help="a tenth of the work: a smoke run of a few seconds")
    parser.add_argument("--reps", type=int, default=3, help="repetitions per figure; the best is reported")
    parser.add_argument("--ask-n", type=int, help="asks per repetition (default 30000, quick 3000)")
    parser.add_argument("--tell-n", type=int, help="tells per repetition (default 30000, quick 3000)")
    parser.add_argument("--activation-n", type=int, help="fresh keys per repetition (default 10000, quick 1000)")
    args = parser.parse_args(argv)
    scale = 10 if args.quick else 1
    params = Params(
        mode="quick" if args.quick else "full",
        reps=args.reps,
        ask_n=args.ask_n or 30_000 // scale,
        tell_n=args.tell_n or 30_000 // scale,
        activation_n=args.activation_n or 10_000 // scale,
    )
    if min(params.reps, params.ask_n, params.tell_n, params.activation_n) < 1:
        parser.error("--reps and every -n must be at least 1")
    return params


async def run(params: Params) -> None:
    await figure("ask/s", params.ask_n, params.reps, bench_ask)
    await figure("tell+update/s", params.tell_n, params.reps, bench_tell_update)
    await figure("activations/s", params.activation_n, params.reps, bench_activations)


def main(argv: list[str] | None = None) -> int:
    params = parse_args(argv)
    dist, version = implementation()
    line("python", f"{platform.python_version()} {platform.python_implementation()}")
    line("casty.file", getattr(casty, "__file__", None) or list(getattr(casty, "__path__", [])))
    line("casty.dist", dist)
    line("casty.version", version)
    line("mode", params.mode)
    line("reps", params.reps)
    line("ask.n", params.ask_n)
    line("tell.n", params.tell_n)
    line("activation.n", params.activation_n)
    line("warmup", "max(n // 10, 100) per repetition")
    started = time.perf_counter()
    try:
        asyncio.run(run(params))
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    line("wall.s", f"{time.perf_counter() - started:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
