"""``SimNetwork``: casty's ``Transport`` port over a simulated network.

Frames are the bytes casty's codec produces, in the simulator too: what cannot cross a real
network cannot cross this one. Every link has a latency distribution, loss, duplication and
reordering, with per-link overrides; which node can reach which is a ``networkx.DiGraph``
(an edge u -> v means frames from u reach v), so a partition — symmetric or one-way — is
just missing edges, and a view can draw it.

A frame's delivery is a simpy event at ``now + latency``; on arrival the destination
node's handler runs on that node's own loop, as the node.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import msgspec
import networkx as nx  # type: ignore[import-untyped]
import simpy

from casty.protocol.limits import MAX_FRAME
from casty.ports import FrameHandler

if TYPE_CHECKING:
    from .world import World

__all__ = ["SimNetwork", "SimEndpoint", "LinkModel", "Latency"]

# net.* rows carry the frame's tag (``frame``: "Heartbeat", "Prepare", "Deliver", ...) so a
# view can tell a heartbeat from a write. Only the envelope's header is read (casty's cluster
# wire layout ``[version, channel, tag, body]``); bytes of any other shape give None.
_HEADER = msgspec.msgpack.Decoder(tuple[int, str, str, msgspec.Raw])


def _frame_tag(frame: bytes) -> str | None:
    try:
        return _HEADER.decode(frame)[2]
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


@dataclass(frozen=True)
class Latency:
    """One-way latency: ``base`` seconds plus an exponential tail of mean ``jitter`` seconds."""

    base: float = 0.001
    jitter: float = 0.0005

    def sample(self, rng: random.Random) -> float:
        return self.base + (rng.expovariate(1.0 / self.jitter) if self.jitter > 0 else 0.0)


@dataclass(frozen=True)
class LinkModel:
    """How a link behaves: latency, and probabilities of loss, duplication and reordering."""

    latency: Latency = Latency()
    loss: float = 0.0
    duplicate: float = 0.0
    reorder: float = 0.0  # a reordered frame is held back by up to ``reorder_delay`` extra
    reorder_delay: float = 0.010
    duplicate_delay: float = 0.0  # the second copy of a duplicated frame is held back by up to this much extra

    def __post_init__(self) -> None:
        if not 0.0 <= self.duplicate_delay < float("inf"):
            raise ValueError(f"duplicate_delay must be a finite delay >= 0, got {self.duplicate_delay}")
        for name in ("loss", "duplicate", "reorder"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be within [0, 1], got {value}")


class SimEndpoint:
    """One node's view of the network: the Transport port of that node.

    Its frame limit is TCP's (``casty.protocol.limits.MAX_FRAME``): a frame over it is
    dropped in ``send`` and recorded as ``net.dropped`` with reason ``"too large"``, as
    ``TcpTransport.send`` drops it, so that what cannot cross a real network cannot cross
    this one either.
    """

    max_frame: int = MAX_FRAME

    def __init__(self, network: SimNetwork, node: str) -> None:
        self._network = network
        self._node = node
        self._handler: FrameHandler | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.closed = False

    @property
    def node(self) -> str:
        return self._node

    def send(self, destination: str, frame: bytes) -> None:
        if not isinstance(frame, (bytes, bytearray, memoryview)):
            raise TypeError(f"a frame is bytes, got {type(frame).__qualname__}")
        if self.closed:
            return
        if len(frame) > self.max_frame:
            self._network._record("net.dropped", self._node, {"dst": destination, "size": len(frame), "reason": "too large", "frame": _frame_tag(bytes(frame))})
            return
        self._network._send(self._node, destination, bytes(frame))

    def set_handler(self, handler: FrameHandler) -> None:
        self._handler = handler

    async def close(self) -> None:
        self.closed = True

    def _arrive(self, source: str, frame: bytes) -> None:
        if self.closed or self._handler is None or self.loop is None or self.loop.is_closed():
            self._network._record("net.dropped", source, {"dst": self._node, "size": len(frame), "reason": "no receiver", "frame": _frame_tag(frame)})
            return
        self.loop.call_soon(self._handler, source, frame)


class SimNetwork:
    """All links between the world's nodes; endpoints implement casty's Transport."""

    def __init__(self, world: World, *, default: LinkModel = LinkModel()) -> None:
        self._world = world
        self._env: simpy.Environment = world.env
        self.default = default
        self.graph: nx.DiGraph = nx.DiGraph()
        self._endpoints: dict[str, SimEndpoint] = {}
        self._models: dict[tuple[str, str], LinkModel] = {}
        self._rng = world.rng("network", "links")
        self.sent = 0
        self.delivered = 0
        self.dropped = 0

    # --- topology --------------------------------------------------------------------

    def add_node(self, node: str) -> None:
        if node in self.graph:
            return
        existing = list(self.graph.nodes)
        self.graph.add_node(node)
        for other in existing:
            self.graph.add_edge(node, other)
            self.graph.add_edge(other, node)

    def endpoint(self, node: str) -> SimEndpoint:
        """A fresh endpoint for a new incarnation of ``node`` (the old one stops receiving)."""
        self.add_node(node)
        old = self._endpoints.get(node)
        if old is not None:
            old.closed = True
        endpoint = SimEndpoint(self, node)
        self._endpoints[node] = endpoint
        return endpoint

    def link(self, source: str, destination: str, model: LinkModel | None = None, **changes: Any) -> None:
        """Override one direction of a link: a whole ``model``, or some fields of the current one."""
        current = self._models.get((source, destination), self.default)
        self._models[(source, destination)] = model if model is not None else replace(current, **changes)

    def model(self, source: str, destination: str) -> LinkModel:
        return self._models.get((source, destination), self.default)

    def partition(self, side_a: Iterable[str], side_b: Iterable[str], *, oneway: bool = False) -> None:
        """Cut every link from side A to side B (and back, unless ``oneway``)."""
        a, b = list(side_a), list(side_b)
        for u in a:
            for v in b:
                if self.graph.has_edge(u, v):
                    self.graph.remove_edge(u, v)
                if not oneway and self.graph.has_edge(v, u):
                    self.graph.remove_edge(v, u)

    def reconnect(self, side_a: Iterable[str], side_b: Iterable[str], *, oneway: bool = False) -> None:
        """Restore the links a ``partition(side_a, side_b, oneway=...)`` cut; any other cut stays."""
        a, b = list(side_a), list(side_b)
        for u in a:
            for v in b:
                if u != v:
                    self.graph.add_edge(u, v)
                    if not oneway:
                        self.graph.add_edge(v, u)

    def inject(self, source: str, destination: str, frame: bytes) -> None:
        """Deliver ``frame`` from ``source``, a stranger with no place in the graph, after the default latency."""
        delay_ns = round(self.default.latency.sample(self._rng) * 1e9)
        self.sent += 1
        event = self._env.timeout(delay_ns)
        event.callbacks.append(_Injected(self, source, destination, frame))

    def heal(self) -> None:
        """Restore every link between every pair of nodes."""
        nodes = list(self.graph.nodes)
        for u in nodes:
            for v in nodes:
                if u != v and not self.graph.has_edge(u, v):
                    self.graph.add_edge(u, v)

    def reachable(self, source: str, destination: str) -> bool:
        return source == destination or self.graph.has_edge(source, destination)

    # --- delivery --------------------------------------------------------------------

    def _record(self, kind: str, node: str, fields: dict[str, Any]) -> None:
        if kind == "net.dropped":
            self.dropped += 1
        self._world.record(node, kind, fields)

    def _keeps(self, kind: str) -> bool:
        """Whether the trace keeps rows of ``kind``; if not, the event is only counted here.

        A frame is two trace events (sent, delivered), and a benchmark run with ``World(keep=...)``
        sends millions of frames: building their fields and reading the node's wall clock only for
        rows that are kept is what ``Trace.observer`` does for runtime events too. The counts are
        the same either way.
        """
        trace = self._world.trace
        if trace.keeps(kind):
            return True
        trace.counts[kind] = trace.counts.get(kind, 0) + 1
        return False

    def _send(self, source: str, destination: str, frame: bytes) -> None:
        self.sent += 1
        if destination not in self._endpoints:
            self._record("net.dropped", source, {"dst": destination, "size": len(frame), "reason": "unknown node", "frame": _frame_tag(frame)})
            return
        if not self.reachable(source, destination):
            self._record("net.dropped", source, {"dst": destination, "size": len(frame), "reason": "partition", "frame": _frame_tag(frame)})
            return
        model = self._models.get((source, destination), self.default)
        rng = self._rng
        if model.loss and rng.random() < model.loss:
            self._record("net.dropped", source, {"dst": destination, "size": len(frame), "reason": "loss", "frame": _frame_tag(frame)})
            return
        copies = 2 if model.duplicate and rng.random() < model.duplicate else 1
        for copy in range(copies):
            delay = model.latency.sample(rng)
            if model.reorder and rng.random() < model.reorder:
                delay += rng.uniform(0.0, model.reorder_delay)
            if copy and model.duplicate_delay:
                delay += rng.uniform(0.0, model.duplicate_delay)
            delay_ns = round(delay * 1e9)
            if self._keeps("net.sent"):
                self._world.record(source, "net.sent", {"dst": destination, "size": len(frame), "delay_ns": delay_ns, "frame": _frame_tag(frame)})
            event = self._env.timeout(delay_ns)
            event.callbacks.append(_Delivery(self, source, destination, frame))

    def _deliver(self, source: str, destination: str, frame: bytes) -> None:
        endpoint = self._endpoints.get(destination)
        if endpoint is None or not self.reachable(source, destination):
            self._record("net.dropped", destination, {"src": source, "size": len(frame), "reason": "partition in flight", "frame": _frame_tag(frame)})
            return
        self.delivered += 1
        if self._keeps("net.delivered"):
            self._world.record(destination, "net.delivered", {"src": source, "size": len(frame), "frame": _frame_tag(frame)})
        endpoint._arrive(source, frame)


class _Delivery:
    """The simpy callback that hands one frame to its destination."""

    __slots__ = ("network", "source", "destination", "frame")

    def __init__(self, network: SimNetwork, source: str, destination: str, frame: bytes) -> None:
        self.network = network
        self.source = source
        self.destination = destination
        self.frame = frame

    def __call__(self, _event: simpy.Event) -> None:
        self.network._deliver(self.source, self.destination, self.frame)


class _Injected:
    """The simpy callback that hands a forged frame (from outside the graph) to its destination."""

    __slots__ = ("network", "source", "destination", "frame")

    def __init__(self, network: SimNetwork, source: str, destination: str, frame: bytes) -> None:
        self.network = network
        self.source = source
        self.destination = destination
        self.frame = frame

    def __call__(self, _event: simpy.Event) -> None:
        endpoint = self.network._endpoints.get(self.destination)
        if endpoint is None:
            self.network._record("net.dropped", self.destination, {"src": self.source, "size": len(self.frame), "reason": "unknown node", "frame": _frame_tag(self.frame)})
            return
        self.network.delivered += 1
        endpoint._arrive(self.source, self.frame)
