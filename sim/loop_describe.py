"""Stable descriptions of tasks and callbacks, for ``Deadlock``, ``Livelock`` and the loop's error log.

Apart from ``sim.loop`` (which re-exports nothing of it: ``describe_pending`` there is the world-wide report)
because none of it runs on the loop's hot path: it reads coroutine frames only when something went wrong.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any


# --------------------------------------------------------------------------------------------------
# Descriptions (for Deadlock, Livelock and logs): no addresses, so messages are stable across runs


def _where_code(code: Any, lineno: int | None = None) -> str:
    filename = os.path.basename(code.co_filename)
    return f"{filename}:{lineno if lineno is not None else code.co_firstlineno}"


def _await_chain(coro: Any, limit: int = 12) -> list[str]:
    """The chain of coroutines a task is suspended in, outermost first: ``['main() at x.py:3', ...]``."""
    chain: list[str] = []
    while coro is not None and len(chain) < limit:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None) or getattr(coro, "ag_frame", None)
        name = getattr(coro, "__qualname__", None) or type(coro).__name__
        if frame is None and not hasattr(coro, "cr_await") and not hasattr(coro, "gi_yieldfrom"):
            break  # not a coroutine: a Future's iterator, the leaf
        chain.append(f"{name}() at {_where_code(frame.f_code, frame.f_lineno)}" if frame is not None else f"{name}()")
        coro = getattr(coro, "cr_await", None) if hasattr(coro, "cr_await") else getattr(coro, "gi_yieldfrom", None)
    return chain


def _describe_awaitable(fut: Any, home: asyncio.AbstractEventLoop | None = None) -> str:
    if fut is None:
        return "nothing (ready to run)"
    if isinstance(fut, asyncio.Task):
        return f"task {fut.get_name()!r}"
    loop = fut.get_loop() if hasattr(fut, "get_loop") else None
    where = ""
    if loop is not home:
        where = f" of loop {getattr(loop, 'name', type(loop).__name__)!r}"
    state = "cancelled " if fut.cancelled() else ("done " if fut.done() else "")
    return f"a {state}{type(fut).__name__}{where}"


def describe_task(task: asyncio.Task[Any]) -> str:
    """Where a task is suspended and on what: ``main() at t.py:9 -> Event.wait() at locks.py:212 -> awaits a SimFuture``."""
    chain = _await_chain(task.get_coro())
    waiting = _describe_awaitable(getattr(task, "_fut_waiter", None), task.get_loop())
    return " -> ".join([*chain, f"awaits {waiting}"]) if chain else f"awaits {waiting}"


def describe_callback(callback: Any) -> str:
    """A stable, address-free description of a loop callback (a task step names the task and its position)."""
    owner = getattr(callback, "__self__", None)
    if isinstance(owner, asyncio.Task):
        chain = _await_chain(owner.get_coro(), limit=4)
        return f"step of task {owner.get_name()!r}" + (f" in {chain[-1]}" if chain else "")
    func = getattr(callback, "func", None)  # functools.partial
    if func is not None and callable(func):
        return describe_callback(func)
    name = getattr(callback, "__qualname__", None) or getattr(callback, "__name__", None) or type(callback).__name__
    code = getattr(callback, "__code__", None)
    if code is None and hasattr(callback, "__func__"):
        code = getattr(callback.__func__, "__code__", None)
    return f"{name}() at {_where_code(code)}" if code is not None else f"{name}()"


def _task_order(task: asyncio.Task[Any]) -> tuple[int, int, str]:
    seq = getattr(task, "_sim_seq", None)
    return (0, seq, "") if seq is not None else (1, 0, task.get_name())
