"""``OnAcquire``: a fault aimed at the node that acquires a key next, triggered by the trace."""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any, ClassVar, Final

import simpy

from .values import Fault, _check, _finite, _num, _skipped

if TYPE_CHECKING:
    from ..world import World


ON_ACQUIRE_ACTIONS: Final[tuple[str, ...]] = ("pause", "crash", "cut-crash")
"""What ``OnAcquire`` does to the node that acquired its key."""


class OnAcquire(Fault, frozen=True, tag="on_acquire"):
    """Hit the node that acquires ``actor[key]`` next: from ``at`` on, the first ``epoch.acquired`` row of that key
    (within ``window`` s) picks the node, and ``delay`` s later it is paused for ``duration`` s (``pause``), crashed
    and restarted with its disk ``down`` s later (``crash``; ``duration`` unused), or cut off from every other node for ``duration`` s,
    then crashed, reconnected and restarted ``down`` s later (``cut-crash``: what it had not sent yet is lost).

    Why trace-triggered: the windows a replication protocol must get right open at an acquisition
    (a write-back not yet on a quorum, promises still in flight), a few milliseconds wide; a plan
    drawn before the run cannot know when, or on which node, they open. Watching the trace aims at
    them and stays a value: the same plan on the same seed hits the same instant.
    """

    actor: str
    key: str
    action: str = "pause"
    delay: float = 0.0
    duration: float = 1.0
    down: float = 1.0
    window: float = 5.0
    kind: ClassVar[str] = "on_acquire"

    def __post_init__(self) -> None:
        super().__post_init__()
        _check(bool(self.actor) and bool(self.key), "on_acquire.actor and on_acquire.key must not be empty")
        _check(self.action in ON_ACQUIRE_ACTIONS, f"on_acquire.action must be one of {', '.join(ON_ACQUIRE_ACTIONS)}, got {self.action!r}")
        _finite("on_acquire.delay", self.delay)
        _finite("on_acquire.duration", self.duration, positive=True)
        _finite("on_acquire.down", self.down, positive=True)
        _finite("on_acquire.window", self.window, positive=True)

    @property
    def end(self) -> float:
        """The latest it can be over: the whole window waited, then the delay, the fault and the restart."""
        held = {"pause": self.duration, "crash": self.down, "cut-crash": self.duration + self.down}[self.action]
        return self.at + self.window + self.delay + held

    def args(self) -> list[str]:
        out = [f"{self.actor.rsplit(':', 1)[-1]}[{self.key}]", self.action]
        if self.delay:
            out.append(f"+{_num(self.delay)}s")
        if self.action != "crash":  # a crash holds the node only for ``down``
            out.append(f"{_num(self.duration)}s")
        if self.action != "pause":
            out.append(f"down {_num(self.down)}s")
        return out

    def start(self, world: World) -> Generator[simpy.Event, Any, None]:
        acquired = world.env.event()
        since = int(world.env.now)

        def watch(row: Any) -> None:  # called inside the runtime's turn: only note the node, act from the process
            if not acquired.triggered and row.kind == "epoch.acquired" and row.t_ns >= since:
                if row.get("actor") == self.actor and row.get("key") == self.key:
                    acquired.succeed(row.node)

        world.trace.subscribe(watch)
        return self._hit(world, acquired)

    def _hit(self, world: World, acquired: simpy.Event) -> Generator[simpy.Event, Any, None]:
        timeout = world.timeout(self.window)
        yield acquired | timeout
        if not acquired.triggered:
            _skipped(world, "world", str(self), f"no acquisition of {self.key} within {_num(self.window)}s")
            return
        node = str(acquired.value)
        if self.delay:
            yield world.timeout(self.delay)
        state = world.node(node)
        if state.status != "up":
            _skipped(world, node, str(self), f"the node is {state.status}")
            return
        incarnation = state.incarnation
        world.note(node, f"{self} hits {node}", fault=str(self))
        if self.action == "pause":
            world.pause(node)
            yield world.timeout(self.duration)
            if world.node(node).status == "paused" and world.node(node).incarnation == incarnation:
                world.resume(node)
            return
        if self.action == "cut-crash":
            others = [n for n in world.nodes if n != node]
            if others:
                world.partition([node], others)
            yield world.timeout(self.duration)
            if others:
                world.reconnect([node], others)
        if world.node(node).status != "down" and world.node(node).incarnation == incarnation:
            world.crash(node)  # a paused node crashes too
        yield world.timeout(self.down)
        if world.node(node).status == "down":
            world.restart(node)
