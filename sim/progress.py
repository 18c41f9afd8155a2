"""Progress bars for sweeps and long runs: ``tqdm.auto`` where someone can see them, nothing elsewhere.

A bar is drawn only in a terminal (stderr is a TTY) or in a notebook (``tqdm.auto`` picks
the widget there); in CI, in a captured test or a redirected stream it stays silent, and
so it does when turned off or when tqdm is not installed (it is an optional dependency:
the ``test`` and ``notebooks`` extras bring it). The bar only watches: it never changes
what runs, so a run with a bar has the same trace as one without.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import simpy

__all__ = ["bar", "run_until", "STEPS"]

STEPS = 200
"""How many pieces a run with a bar is cut into: the bar moves at each (simulated time, not wall time)."""


class _Silent:
    """What a bar that is not shown accepts: the same calls, doing nothing."""

    n: float = 0

    def update(self, n: float = 1) -> None:
        self.n += n

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        pass


@contextmanager
def bar(total: float, *, desc: str, unit: str, enabled: bool = True, leave: bool = True, **options: Any) -> Iterator[Any]:
    """A ``tqdm.auto.tqdm`` of ``total`` (closed on exit), or a silent stand-in when it would not be seen.

    ``leave``: the last state stays on screen (a sweep's count of seeds and violations); False clears it.
    """
    if not enabled:
        yield _Silent()
        return
    try:
        tqdm = importlib.import_module("tqdm.auto").tqdm  # untyped, optional: looked up at run time
    except ImportError:
        yield _Silent()
        return
    # disable=None: tqdm turns itself off on a stream that is not a TTY; the notebook widget shows anyway.
    shown = tqdm(total=total, desc=desc, unit=unit, disable=None, leave=leave, dynamic_ncols=True, **options)
    try:
        yield shown
    finally:
        shown.close()


def run_until(env: simpy.Environment, target_ns: int, *, progress: bool) -> None:
    """``env.run(until=target_ns)``, in ``STEPS`` pieces when a bar is wanted.

    Stopping simpy at a time and going on gives the same order of events as one run: the
    stop event is processed before the events of its instant, which wait for the next piece
    in their own order.
    """
    if not progress:
        env.run(until=target_ns)
        return
    start = int(env.now)
    step = max(1, (target_ns - start) // STEPS)
    with bar((target_ns - start) / 1e9, desc="simulating", unit="s", enabled=True, leave=False, bar_format=_SIM_FORMAT) as shown:
        at = start
        while at < target_ns:
            at = min(target_ns, at + step)
            env.run(until=at)
            shown.update((at - start) / 1e9 - shown.n)


_SIM_FORMAT = "{desc}: {percentage:3.0f}%|{bar}| {n:.1f}/{total:.1f} simulated s [{elapsed}<{remaining}]"
