"""Driving virtual loops from outside: ``run_until_complete`` (the test and notebook entry point) and the
report of what every pending task waits for.

Apart from ``sim.loop`` (which re-exports ``run_until_complete``, ``pending_tasks`` and ``describe_pending``):
the loop runs inside simpy's callbacks; this steps simpy until one awaitable is done.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TYPE_CHECKING, TypeVar

import simpy

from .errors import Deadlock, SimulationTimeout
from .loop_describe import describe_task
from .loop_events import _heappop, _Timer, loops_of

if TYPE_CHECKING:
    from .loop import VirtualLoop

T = TypeVar("T")


# --------------------------------------------------------------------------------------------------
# Driving a loop from outside: the test and notebook entry point


def pending_tasks(env: simpy.Environment) -> list[tuple[str, str, str]]:
    """(loop name, task name, where it waits) for every pending task on every loop of ``env``, in a stable order."""
    rows = []
    for loop in loops_of(env):
        for task in loop.tasks():
            rows.append((loop.name, task.get_name(), describe_task(task)))
    return rows


def describe_pending(env: simpy.Environment) -> str:
    """A readable report of what every task of the world waits for (and which paused loops hold callbacks)."""
    rows = pending_tasks(env)
    lines = [f"  [{loop}] {name!r}: {where}" for loop, name, where in rows] or ["  (no pending task)"]
    held = [f"{loop.name!r} ({len(loop._ready)} callbacks)" for loop in loops_of(env) if loop._paused and loop._ready]
    if held:
        lines.append("  paused loops holding callbacks: " + ", ".join(held))
    killed = [loop.name for loop in loops_of(env) if loop._killed and loop.tasks()]
    if killed:
        lines.append("  killed loops with tasks that survived cancellation: " + ", ".join(map(repr, killed)))
    return "\n".join(lines)


def run_until_complete(env: simpy.Environment, loop: VirtualLoop, awaitable: Awaitable[T], *,
                       until_ns: int | None = None) -> T:
    """Run ``awaitable`` as a task of ``loop``, stepping ``env`` until it is done; return its result.

    Raises ``Deadlock`` when no simulated event is left while the task is pending (the message lists
    every pending task of every loop of ``env`` and what it awaits), ``SimulationTimeout`` when the next
    event lies beyond ``until_ns`` (``env.now`` is then ``until_ns``), and the task's own exception if it
    failed. Works from inside a running asyncio loop (Jupyter): the outer running loop is restored.
    """
    if loop._env is not env:
        raise ValueError(f"VirtualLoop {loop.name!r} does not belong to this environment")
    for other in loops_of(env):
        if other._draining:
            raise RuntimeError("run_until_complete cannot step the world from inside a loop's callbacks")
    if asyncio.iscoroutine(awaitable):
        task: asyncio.Future[T] = loop.create_task(awaitable)
    else:
        task = asyncio.ensure_future(awaitable, loop=loop)
    queue = env._queue
    step = env.step
    done = task.done
    state = loop._state
    while not done():
        if not queue:
            name = task.get_name() if isinstance(task, asyncio.Task) else repr(task)
            rows = pending_tasks(env)
            raise Deadlock(
                f"Deadlock at t={env.now} ns: no simulated event is left and {name!r} on loop {loop.name!r} "
                f"is still pending. Pending tasks:\n{describe_pending(env)}",
                task=task,
                pending=rows,
            )
        top = queue[0]
        event = top[3]
        if type(event) is _Timer and event._cancelled:  # a dead timer: drop it without moving time
            _heappop(queue)
            if event._scheduled:
                event._scheduled = False
                state.cancelled -= 1
            continue
        if until_ns is not None and top[0] > until_ns:
            if env.now < until_ns:
                env.run(until=until_ns)
            raise SimulationTimeout(
                f"{until_ns} ns passed and the task on loop {loop.name!r} is still pending:\n{describe_pending(env)}",
                task=task,
            )
        step()
    return task.result()
