"""``World``: casty nodes on virtual time, with their clocks, disks and network, and faults.

The world owns one ``simpy.Environment`` (time in integer nanoseconds) and derives every
random stream from its seed, one per purpose (``random.Random(f"{seed}:{node}:{purpose}")``),
so that adding a node or a fault never shifts the randomness of another. Each node runs a
real ``casty.ActorSystem`` on its own ``VirtualLoop`` with its own ``NodeClock`` and
``SimDisk``: the world replaces the runtime's ports and nothing else.

Scripts are simpy processes::

    def script(world):
        yield world.timeout(5)
        world.crash("n1")
        yield world.timeout(60)
        world.restart("n1")

    world.process(script(world))
    world.run(until=120)
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Generator, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar

import simpy

from casty import ActorSystem, MemoryStore, SQLiteStore
from casty.clock import to_us
from casty.ports import Store

from .clock import NodeClock
from .disk import SimDisk
from .gcpolicy import YOUNG_THRESHOLD, young_collections_every
from .loop import VirtualLoop
from .network import LinkModel, SimEndpoint, SimNetwork
from .progress import run_until
from .trace import Trace

__all__ = ["World", "SimNode", "NodeSpec", "seconds_to_ns"]

T = TypeVar("T")

DEFAULT_START = datetime(2026, 1, 1, tzinfo=timezone.utc)


def seconds_to_ns(value: float | timedelta) -> int:
    if isinstance(value, timedelta):
        return (value.days * 86_400 + value.seconds) * 1_000_000_000 + value.microseconds * 1000
    return round(value * 1_000_000_000)


@dataclass
class NodeSpec:
    """How a node is built; kept so that ``restart`` builds the same node again."""

    name: str
    store: str | Store | None = "memory"  # "memory", "sqlite" (in-memory SQLite), a file path, None, or a Store object
    fsync: bool = True
    system: dict[str, Any] = field(default_factory=dict)


class SimNode:
    """One simulated node: its loop, clock, disk, transport and the ActorSystem of its current incarnation."""

    def __init__(self, world: World, spec: NodeSpec, clock: NodeClock, store: Store | None) -> None:
        self.world = world
        self.spec = spec
        self.name = spec.name
        self.clock = clock
        self.store = store  # the disk itself: it survives crashes
        self.incarnation = 0
        self.status = "down"
        self.loop: VirtualLoop | None = None
        self.disk: SimDisk | None = None
        self.endpoint: SimEndpoint | None = None
        self.system: ActorSystem | None = None
        self._stop: Any = None
        self._ready: Any = None
        self.paused_at_ns: int | None = None
        self.muted = False  # set when the world is closed: the teardown is not part of the run

    # --- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        world = self.world
        self.incarnation += 1
        loop = VirtualLoop(world.env, f"{self.name}#{self.incarnation}")
        self.loop = loop
        if self.store is not None:
            self.disk = SimDisk(
                self.store,
                world.rng(self.name, f"disk#{self.incarnation}"),
                fsync=self.spec.fsync,
                on_event=lambda kind, fields: world.record(self.name, kind, fields),
            )
        self.endpoint = world.network.endpoint(self.name)
        self.endpoint.loop = loop
        options = dict(self.spec.system)
        if options.get("cluster") is not None:
            options["transport"] = self.endpoint  # node ids are the world's node names; seeds name nodes
        self.system = ActorSystem(
            node=self.name,
            clock=self.clock,
            store=self.disk,
            rng=world.rng(self.name, f"system#{self.incarnation}"),
            observer=world.trace.observer(self.name, self, self._now_ns, self.clock.now_us),
            **options,
        )
        self._ready = loop.create_future()
        self._stop = loop.create_future()
        loop.create_task(self._main(self.system), name=f"{self.name}:node")
        self.status = "up"
        world.record(self.name, "node.started", {"incarnation": self.incarnation})

    async def _main(self, system: ActorSystem) -> None:
        await system.__aenter__()
        self._ready.set_result(system)
        try:
            await self._stop
        except GeneratorExit:
            raise  # the loop was dropped with the node still up: nothing can run any more
        except BaseException:
            await system.stop(crashed=True)
            raise
        await system.stop()

    def _now_ns(self) -> int:
        return int(self.world.env._now)

    def require_up(self) -> VirtualLoop:
        if self.status == "down" or self.loop is None:
            raise RuntimeError(f"node {self.name} is down")
        return self.loop

    async def ready(self) -> ActorSystem:
        system: ActorSystem = await self._ready
        return system

    def __repr__(self) -> str:
        return f"<SimNode {self.name} #{self.incarnation} {self.status}>"


class World:
    """A deterministic world: same seed, same trace, on any machine."""

    def __init__(
        self,
        seed: int = 0,
        *,
        start: datetime = DEFAULT_START,
        network: LinkModel = LinkModel(),
        keep: Callable[[str], bool] | None = None,
        gc_young: int | None = YOUNG_THRESHOLD,
    ) -> None:
        """``keep`` chooses which event kinds become trace rows (all by default); the rest are only counted.

        ``gc_young``: CPython's young-generation threshold while ``run`` runs (see ``sim.gcpolicy``;
        None keeps the process's own).
        """
        self.seed = seed
        self.gc_young = gc_young
        self.env = simpy.Environment(initial_time=0)
        self.epoch_us = to_us(start)
        self.trace = Trace(keep=keep)
        self.nodes: dict[str, SimNode] = {}
        self.network = SimNetwork(self, default=network)
        self.results: dict[str, Any] = {}
        self.on_start: list[Callable[[str], None]] = []
        """Called with the node's name after every ``restart`` (client code a node runs at boot, e.g. its crons)."""
        self.given_plan: Any = None
        """A ``sim.faults.FaultPlan`` given from outside (``python -m sim run --plan``): a scenario that draws its
        own plan replays this one instead. None: the scenario draws its plan from the seed."""

    # --- randomness and time -----------------------------------------------------------

    def rng(self, node: str, purpose: str) -> random.Random:
        """The random stream of one purpose on one node: independent of every other stream."""
        return random.Random(f"{self.seed}:{node}:{purpose}")

    @property
    def now(self) -> float:
        """True time in seconds since the start of the run."""
        return int(self.env.now) / 1e9

    def timeout(self, seconds: float | timedelta) -> simpy.Timeout:
        return self.env.timeout(seconds_to_ns(seconds))

    def process(self, generator: Generator[simpy.Event, Any, Any]) -> simpy.Process:
        return self.env.process(generator)

    def run(self, until: float | timedelta | None = None, *, progress: bool = False) -> None:
        """Run until the given true time (seconds from the start), or until nothing is scheduled.

        ``progress=True`` (with ``until``): a bar of simulated seconds, where it can be seen
        (``sim.progress``); the run and its trace are the same as without it.
        """
        with young_collections_every(self.gc_young):
            if until is None:
                self.env.run()
            else:
                target = seconds_to_ns(until)
                if target > self.env.now:
                    run_until(self.env, target, progress=progress)
        self._raise_loop_errors()

    def _raise_loop_errors(self) -> None:
        for node in self.nodes.values():
            errors = getattr(node.loop, "errors", None)
            if errors:
                context = errors[0]
                raise RuntimeError(f"node {node.name}: unhandled error in the runtime: {context.get('message')}: {context.get('exception')!r}")

    # --- trace -------------------------------------------------------------------------

    def record(self, node: str, kind: str, fields: dict[str, Any] | None = None) -> None:
        """Add a world-level row (fault, network, note) stamped with true time and the node's wall time."""
        member = self.nodes.get(node)
        wall = member.clock.now_us() if member is not None else None
        self.trace.add(int(self.env.now), node, wall, kind, fields or {})

    def note(self, node: str, text: str, **fields: Any) -> None:
        self.record(node, "note", {"text": text, **fields})

    # --- nodes -------------------------------------------------------------------------

    def add_node(
        self,
        name: str,
        *,
        offset: timedelta = timedelta(0),
        drift_ppm: float = 0.0,
        clock_noise_us: int = 0,
        store: str | Store | None = "memory",
        fsync: bool = True,
        start: bool = True,
        **system: Any,
    ) -> SimNode:
        """Add a node (and start it): its wall clock off by ``offset``, its disk a ``store``, ActorSystem options.

        ``store``: ``"memory"`` (a ``MemoryStore``), ``"sqlite"`` (in-memory SQLite), a file
        path, None (no disk), or a ``Store`` object (a database: give the same one to several
        nodes for a store they share, as durable actors of a cluster would use).

        ``cluster=Cluster(seeds=[...])`` makes the node a cluster member: its transport is its
        endpoint on the simulated network, and seeds are node names.
        """
        if name in self.nodes:
            raise ValueError(f"node {name!r} exists already")
        clock = NodeClock(
            self.env,
            epoch_us=self.epoch_us,
            offset=offset,
            drift_ppm=drift_ppm,
            noise_us=clock_noise_us,
            rng=self.rng(name, "clock") if clock_noise_us else None,
        )
        spec = NodeSpec(name, store, fsync, system)
        node = SimNode(self, spec, clock, _make_store(store))
        self.nodes[name] = node
        self.network.add_node(name)
        if start:
            node.start()
        return node

    def node(self, name: str) -> SimNode:
        try:
            return self.nodes[name]
        except KeyError:
            raise KeyError(f"no node {name!r}; nodes: {', '.join(self.nodes)}") from None

    def system(self, name: str) -> ActorSystem:
        node = self.node(name)
        if node.system is None or node.status == "down":
            raise RuntimeError(f"node {name} is down")
        return node.system

    def spawn(self, node: str, fn: Callable[..., Awaitable[T]], *args: Any, name: str | None = None) -> Any:
        """Run ``fn(system, *args)`` as client code on ``node`` once its system is up; returns the task."""
        member = self.node(node)
        loop = member.require_up()

        async def client() -> T:
            system = await member.ready()
            return await fn(system, *args)

        return loop.create_task(client(), name=name or f"{node}:{getattr(fn, '__name__', 'client')}")

    # --- faults ------------------------------------------------------------------------

    def crash(self, name: str) -> None:
        """Crash a node: cut its disk and transport first, then cancel everything it runs."""
        node = self.node(name)
        loop = node.require_up()
        lost = node.disk.crash() if node.disk is not None else 0
        if node.endpoint is not None:
            node.endpoint.closed = True
        self.record(name, "fault.crash", {"incarnation": node.incarnation, "unsynced_lost": lost})
        node.status = "down"
        node.paused_at_ns = None
        loop.kill()
        node.system = None

    def restart(self, name: str, *, wipe_disk: bool = False) -> None:
        """Start a crashed node again: a fresh ActorSystem, a new incarnation, the same disk.

        ``wipe_disk=True`` gives it a new, empty disk of the same kind first (a replaced
        machine, a lost volume): only a disk the world made (``"memory"``, ``"sqlite"``) can
        be wiped; a shared ``Store`` object or a file is refused with ``ValueError``.
        """
        node = self.node(name)
        if node.status != "down":
            raise RuntimeError(f"node {name} is {node.status}; crash it before restarting")
        if wipe_disk:
            kind = node.spec.store
            if kind is not None and kind not in ("memory", "sqlite"):
                raise ValueError(f"node {name}'s disk is {kind!r}, not one the world made: it cannot be wiped alone")
            node.store = _make_store(kind)
        node.start()
        fields: dict[str, Any] = {"incarnation": node.incarnation}
        if wipe_disk:
            fields["wiped"] = True
        self.record(name, "fault.restart", fields)
        for hook in self.on_start:
            hook(name)

    def stop(self, name: str) -> None:
        """An orderly stop: the system exits normally (write-behind flushed)."""
        node = self.node(name)
        node.require_up()
        if node._stop is not None and not node._stop.done():
            node._stop.set_result(None)
        node.status = "down"
        self.record(name, "node.stopped", {"incarnation": node.incarnation})

    def pause(self, name: str) -> None:
        """A stop-the-world pause (a long GC, a frozen VM): the node runs nothing until resumed."""
        node = self.node(name)
        loop = node.require_up()
        if node.status == "paused":
            raise RuntimeError(f"node {name} is paused already")
        loop.pause()
        node.status = "paused"
        node.paused_at_ns = int(self.env.now)
        self.record(name, "fault.pause", {})

    def resume(self, name: str) -> None:
        node = self.node(name)
        loop = node.require_up()
        if node.status != "paused":
            raise RuntimeError(f"node {name} is not paused")
        paused_ns = int(self.env.now) - (node.paused_at_ns or 0)
        node.status = "up"
        node.paused_at_ns = None
        self.record(name, "fault.resume", {"paused_ns": paused_ns})
        loop.resume()

    def partition(self, side_a: Iterable[str], side_b: Iterable[str], *, oneway: bool = False) -> None:
        a, b = sorted(side_a), sorted(side_b)
        self.network.partition(a, b, oneway=oneway)
        for node in a:
            self.record(node, "fault.partition", {"from": a, "to": b, "oneway": oneway})

    def reconnect(self, side_a: Iterable[str], side_b: Iterable[str], *, oneway: bool = False) -> None:
        """Undo one ``partition`` (the links from A to B, and back unless ``oneway``); other cuts stay."""
        a, b = sorted(side_a), sorted(side_b)
        self.network.reconnect(a, b, oneway=oneway)
        for node in a:
            self.record(node, "fault.reconnect", {"from": a, "to": b, "oneway": oneway})

    def inject(self, sender: str, name: str, frame: bytes) -> None:
        """A frame from ``sender``, a stranger outside the world's graph (a forged peer), arrives at node ``name``."""
        self.node(name)
        self.record(name, "fault.forged", {"src": sender, "size": len(frame)})
        self.network.inject(sender, name, frame)

    def heal(self) -> None:
        self.network.heal()
        for node in self.nodes:
            self.record(node, "fault.heal", {})

    def step_clock(self, name: str, delta: timedelta) -> None:
        """Jump a node's wall clock (forward or backward), as an NTP step would."""
        node = self.node(name)
        node.clock.step(delta)
        self.record(name, "clock.step", {"delta_us": seconds_to_ns(delta) // 1000})

    def set_drift(self, name: str, drift_ppm: float) -> None:
        node = self.node(name)
        node.clock.set_drift(drift_ppm)
        self.record(name, "clock.drift", {"drift_ppm": drift_ppm})

    def __enter__(self) -> World:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End every node still running (no faults recorded): for a finished run, so nothing is left pending."""
        for node in self.nodes.values():
            if node.status != "down" and node.loop is not None:
                node.muted = True
                node.loop.kill()
                node.status = "down"
                node.system = None

    def __repr__(self) -> str:
        return f"<World seed={self.seed} t={self.now:g}s nodes={list(self.nodes)}>"


def _make_store(kind: str | Store | None) -> Store | None:
    if kind is None:
        return None
    if not isinstance(kind, str):
        return kind  # a store object: a database the caller may give to several nodes
    if kind == "memory":
        return MemoryStore()
    if kind == "sqlite":
        return SQLiteStore(":memory:")
    return SQLiteStore(kind)
