"""A real casty node in one asyncio program: a cluster-mode ActorSystem over TCP, and a gateway.

``NodeProcess`` is what ``python -m casty node`` runs (see ``casty.__main__``). Inside one
asyncio program it holds:

- a ``TcpTransport`` listening on the node's address, for the cluster name it was given,
  wrapped in an ``AddressedTransport`` (below);
- an ``ActorSystem`` in cluster mode on that transport (``ActorSystem(cluster=Cluster(...),
  transport=...)``, see ``casty.cluster.runtime``): membership, routing to owners,
  epoch-fenced quorum replication and the resumption of ``@active`` keys on a membership
  change, hosting the actor types of the modules it was told to import;
- a ``Gateway`` (``casty.cluster.gateway``) that serves clients outside the cluster
  (``ClusterClient``, ``python -m casty ask|tell|placement|members``) on the same listener.

Node ids are addresses. A node's id is its canonical ``HOST:PORT`` (``127.0.0.1:7001``,
``[::1]:7001`` for IPv6), so a seed given as ``HOST:PORT`` is at once a node id and a place
to dial, and so is every member learnt from a heartbeat's digest: ``AddressedTransport``
fills the TCP address book from the id itself the first time a frame goes to a node. Hosts
are IP literals in canonical form (``ipaddress``), so two nodes never know one peer under
two ids; the unspecified addresses (``0.0.0.0``, ``::``) are refused, since others could
not dial them. Binding to port 0 is refused for the same reason: the id must be known
before listening, and seeds must name it.

Incarnation. Membership needs a greater incarnation in every life of a node (a restarted
node must not be taken for its previous life, whose suspect or dead verdicts would stick
to it). A node process keeps nothing on disk, so the incarnation is the wall clock at
start, ``Clock.now_us()`` (``SystemClock``, the real adapter; the cluster runtime reads it
when the system starts): microseconds since the epoch grow from one start to the next
however fast a restart is, with no file to keep. A clock stepped back by more than the
downtime would give a smaller number; membership then heals it itself: the restarted node
hears its previous life's greater incarnation in a digest, takes it as a claim about
itself, and refutes it with ``max(claimed, own) + 1``.

State. A node keeps no store: a key's state lives in the replicas of the cluster (in
memory), so it survives a node as long as a quorum of its replicas does. Durable types
(``durable=``) need a store and fail to activate here, with a ``ConfigurationError``.

Output. Facts go to ``emit`` as plain dicts (the CLI writes each as one JSON line on stdout,
for scripts and tests to read): ``ready`` once the node listens and serves,
``member.changed`` for every membership change it sees (``node`` is the member), the
runtime events whose kind is in ``NodeConfig.facts`` (``FACTS`` by default: activations,
owner epochs, schedule firings, refused writes, dropped messages; each event's fields plus
``by``, the reporting node), and ``stopped`` at the end. Every other event goes to the
``casty`` logger.

Stopping. ``stop()`` leaves in order: the actor system stops (membership's ``leave()``
tells every member, routing stops, activations end), gateway calls still waiting get
their error, then the node waits (at most ``leave_timeout``) for the transport to hand
the queued frames to the sockets, and closes it. ``crash()`` stops without a word.
Signals are the CLI's business, not this module's.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Final

from .._core.actor import ActorType
from ..clock import SystemClock
from .._durations import duration
from ..errors import ConfigurationError
from ..observer import Event, LoggingObserver, event_fields
from ..ports import Clock, FrameHandler
from .._core.system import ActorSystem
from .addresses import Address, address_of, format_address, parse_address
from .client_wire import is_client_frame
from .config import Cluster
from .driver import MembershipService
from .frames import FRAME_FACTS, FrameReceived, FrameSent
from .gateway import Gateway
from .runtime import ClusterNode
from ..protocol.membership import MemberChanged, MembershipConfig
from ..protocol.limits import MAX_FRAME
from ..protocol.framing import HEADER_SIZE, secret_bytes
from .tcp import TcpLimits, TcpTransport

__all__ = [
    "load_modules",
    "load_actor_types",
    "SECRET_ENV",
    "read_secret",
    "AddressedTransport",
    "FACTS",
    "NodeConfig",
    "NodeProcess",
]

log = logging.getLogger("casty.node")

_POLL: Final = 0.01  # seconds between looks at the transport while a leave is flushed


def load_actor_types(names: Sequence[str]) -> dict[str, ActorType[Any, Any]]:
    """Import each module (which registers its ``@actor`` types); the types they define, by name, sorted.

    Raises ``ConfigurationError`` naming the module that cannot be imported.
    """
    found: dict[str, ActorType[Any, Any]] = {}
    for name in names:
        try:
            module: ModuleType = importlib.import_module(name)
        except Exception as exc:  # ImportError, or whatever the module raised while importing
            raise ConfigurationError(f"cannot import module {name!r}: {type(exc).__name__}: {exc}") from exc
        for value in vars(module).values():
            if isinstance(value, ActorType) and value.name.partition(":")[0] == module.__name__:
                found[value.name] = value
    return {name: found[name] for name in sorted(found)}


def load_modules(names: Sequence[str]) -> list[str]:
    """Import each module; the names of the actor types they define, sorted (see ``load_actor_types``)."""
    return list(load_actor_types(names))


SECRET_ENV: Final = "CASTY_SECRET"
"""The environment variable the CLI reads the cluster secret from when no ``--secret-file`` is given."""


def read_secret(path: str | None, environ: Mapping[str, str]) -> bytes | None:
    """The cluster secret: the bytes of the file at ``path`` (one trailing newline dropped), else ``environ[SECRET_ENV]``.

    Why not a ``--secret VALUE`` flag: a command line is visible to every user of the machine
    (``ps``), a file's mode and a process's environment are not. ``ValueError`` naming the
    file if it cannot be read or the secret is empty.
    """
    if path is not None:
        try:
            with open(path, "rb") as file:
                data = file.read()
        except OSError as exc:
            raise ValueError(f"cannot read the secret file {path!r}: {exc.strerror or exc}") from None
        data = data[:-2] if data.endswith(b"\r\n") else data[:-1] if data.endswith(b"\n") else data
        if not data:
            raise ValueError(f"the secret file {path!r} is empty")
        return data
    value = environ.get(SECRET_ENV)
    if value is None:
        return None
    if not value:
        raise ValueError(f"{SECRET_ENV} is set but empty")
    return value.encode("utf-8")


class AddressedTransport:
    """A ``TcpTransport`` whose node ids are their addresses: a frame to a node not yet in the
    address book adds it from its id, so members learnt from digests are reachable at once.

    It also counts the frames it hands over (``handed``), so that ``in_flight`` says how
    many outgoing frames the TCP transport has neither written nor dropped yet.

    And it splits what arrives: client frames (first byte ``0xC1``, see
    ``casty.cluster.client_wire``) go to ``set_client_handler``'s handler, every other frame to the
    handler the cluster set (its dispatcher), which so never sees a client frame.
    """

    def __init__(self, tcp: TcpTransport) -> None:
        self.tcp: Final = tcp
        self._known: set[str] = set(tcp.peers())
        self.handed = 0
        self.unaddressable = 0
        self._handler: FrameHandler | None = None
        self._client_handler: FrameHandler | None = None
        self.watch: Callable[[Event], None] | None = None
        """Told a ``FrameSent``/``FrameReceived`` per cluster frame when set (the node's frame facts)."""
        tcp.set_handler(self._receive)

    def _receive(self, source: str, frame: bytes) -> None:
        if is_client_frame(frame):
            if self._client_handler is not None:
                self._client_handler(source, frame)
        elif self._handler is not None:
            if self.watch is not None:
                self.watch(FrameReceived.of(source, frame))
            self._handler(source, frame)

    @property
    def node(self) -> str:
        return self.tcp.node

    @property
    def max_frame(self) -> int:
        """The TCP transport's frame limit: what the router checks a message against before sending it."""
        return self.tcp.max_frame

    def uses_secret(self, secret: bytes | str) -> bool:
        """Whether the TCP transport proves and demands ``secret`` (``Cluster(secret=)`` is checked with it)."""
        return self.tcp.uses_secret(secret)

    def send(self, destination: str, frame: bytes) -> None:
        if destination not in self._known and destination != self.tcp.node:
            address = address_of(destination)
            if address is None:
                self.unaddressable += 1
                log.debug("%s: dropped a frame to %r: not a HOST:PORT node id", self.tcp.node, destination)
                return
            self.tcp.add_peer(destination, address)
            self._known.add(destination)
        self.handed += 1
        if self.watch is not None:
            self.watch(FrameSent.of(destination, frame))
        self.tcp.send(destination, frame)

    def forget(self, node: str) -> None:
        """Drop ``node`` from the address book (its queued frames too); a later frame to it adds it again."""
        self._known.discard(node)
        self.tcp.remove_peer(node)

    @property
    def known(self) -> list[str]:
        """The nodes in the address book, sorted."""
        return sorted(self._known)

    def set_handler(self, handler: FrameHandler) -> None:
        """The handler of cluster frames (the cluster's dispatcher sets it)."""
        self._handler = handler

    def set_client_handler(self, handler: FrameHandler | None) -> None:
        """The handler of client frames (the node's gateway)."""
        self._client_handler = handler

    async def close(self) -> None:
        await self.tcp.close()

    @property
    def in_flight(self) -> int:
        """Frames handed to the TCP transport and not yet written to a socket nor dropped."""
        stats = self.tcp.stats
        settled = stats.sent + stats.dropped - stats.dropped_no_handler  # no_handler counts incoming frames
        return max(0, self.handed - settled)


# --- the node ------------------------------------------------------------------------------


FACTS: Final = frozenset(
    {
        "activation.started",
        "activation.ended",
        "activation.failed",
        "epoch.acquired",
        "schedule.fired",
        "schedule.caught_up",
        "write.failed",
        "message.dropped",
        "dead_letter",
        "effect",  # ctx.effect: what actor code did outside the cluster (a charge, an email)
    }
)
"""The runtime events a node emits as facts by default (``member.changed`` always is): enough to
tell which node runs a key under which owner epoch and where its schedules fire, without
a line per confirmed write. ``net.sent``/``net.delivered`` (a fact per cluster frame,
``casty.cluster.frames``) are only emitted when named (or with ``all_facts``)."""


@dataclass(frozen=True, slots=True)
class NodeConfig:
    """What a node process is told: where it listens, whom it asks first, what it hosts, its timings."""

    bind: Address
    seeds: tuple[Address, ...] = ()
    modules: tuple[str, ...] = ()
    cluster: str = "casty"
    membership: MembershipConfig = field(default_factory=MembershipConfig)
    leave_timeout: float = 2.0
    """At most this long (seconds) to hand the leave frames to the sockets before closing."""
    ask_timeout: float = 10.0
    """The system's ask timeout (seconds): an ask with no reply by then raises ``TimeoutError``."""
    write_timeout: float = 5.0
    """The system's write timeout (seconds): routing retries and quorum writes give up after it."""
    facts: frozenset[str] = FACTS
    """The kinds of runtime events emitted as facts (``"all"`` in the CLI: every kind)."""
    all_facts: bool = False
    """Emit every runtime event as a fact, whatever ``facts`` says."""
    secret: bytes | None = field(default=None, repr=False)
    """The cluster secret (see ``Cluster(secret=)``): peers and clients must prove it in the handshake."""
    limits: TcpLimits = TcpLimits()
    """What the listener holds for strangers: connection caps, handshake and idle timeouts, buffered bytes."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "secret", secret_bytes(self.secret, "the cluster secret"))
        if self.limits.max_buffered < MAX_FRAME + HEADER_SIZE:  # what TcpTransport would refuse at start: refuse it here
            raise ValueError(f"max_buffered ({self.limits.max_buffered}) must hold one partial frame of MAX_FRAME ({MAX_FRAME}) bytes")
        object.__setattr__(self, "bind", parse_address(format_address(self.bind)))
        object.__setattr__(self, "seeds", tuple(parse_address(format_address(s)) for s in self.seeds))
        object.__setattr__(self, "facts", frozenset(self.facts))
        if not self.cluster:
            raise ValueError("the cluster name must not be empty")
        # The shared duration check (NaN and inf too: a NaN leave_timeout reached the stop's wait).
        object.__setattr__(self, "leave_timeout", duration(self.leave_timeout, "leave_timeout"))
        for name in ("ask_timeout", "write_timeout"):
            object.__setattr__(self, name, duration(getattr(self, name), name, positive=True))

    @property
    def node(self) -> str:
        return format_address(self.bind)

    @property
    def seed_ids(self) -> tuple[str, ...]:
        return tuple(format_address(s) for s in self.seeds)

    def cluster_options(self) -> Cluster:
        """The ``Cluster(...)`` of the node's actor system: its seeds, timings and cluster name."""
        m = self.membership
        return Cluster(
            self.seed_ids,
            heartbeat=m.heartbeat,
            suspect_after=m.suspect_after,
            dead_after=m.dead_after,
            remove_after=m.remove_after,
            name=self.cluster,
            secret=self.secret,
        )


Emit = Callable[[dict[str, Any]], None]


class NodeProcess:
    """One real node: ``await start()``, then ``await stop()`` (orderly leave) or ``await crash()``.

    Also ``async with NodeProcess(config, emit) as node:`` (leaves on exit). Build and run it
    on the asyncio loop that will serve it.
    """

    def __init__(
        self,
        config: NodeConfig,
        emit: Emit,
        *,
        clock: Clock | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        self.config: Final = config
        self.emit = emit
        self.clock: Final[Clock] = clock if clock is not None else SystemClock()
        self._log = LoggingObserver(logger)
        self.node: Final = config.node
        self.actors: list[str] = []
        self.system: ActorSystem | None = None
        self.tcp: TcpTransport | None = None
        self.transport: AddressedTransport | None = None
        self.gateway: Gateway | None = None
        self._stopped = False

    @property
    def membership(self) -> MembershipService | None:
        """The membership service of the node's cluster runtime (None before ``start``)."""
        system = self.system
        cluster = ClusterNode.of(system) if system is not None else None  # the runtime of the system's cluster mode
        return cluster.membership if cluster is not None else None

    # --- observer ------------------------------------------------------------------------

    def _observe(self, event: Event) -> None:
        """Membership changes and the chosen runtime events out as facts; everything to the log. Never raises."""
        try:
            if isinstance(event, MemberChanged):
                self.emit(
                    {
                        "event": event.kind,
                        "node": event.node,
                        "status": event.status,
                        "incarnation": event.incarnation,
                        "by": self.node,
                    }
                )
                if event.status == "removed" and self.transport is not None:
                    self.transport.forget(event.node)  # a frame to it later adds it again from its id
            elif self.config.all_facts or event.kind in self.config.facts:
                self.emit({"event": event.kind, **event_fields(event), "by": self.node})
            self._log(event)
        except Exception:
            log.exception("%s: the node's observer failed on %s", self.node, event.kind)

    # --- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        """Import the modules, listen, start the actor system in cluster mode (it joins), serve clients; then emit ``ready``.

        ``ConfigurationError`` for a module that cannot be imported; ``OSError`` if the address
        cannot be bound (nothing is left running in either case).
        """
        if self.tcp is not None:
            raise RuntimeError(f"node {self.node} already started")
        cfg = self.config
        hosted = load_actor_types(cfg.modules)
        self.actors = list(hosted)
        tcp = TcpTransport(self.node, cfg.bind, cluster=cfg.cluster, observer=self._observe, secret=cfg.secret, limits=cfg.limits)
        try:
            await tcp.start()
        except BaseException:
            await tcp.close()
            raise
        for seed in cfg.seeds:
            tcp.add_peer(format_address(seed), seed)
        self.tcp = tcp
        transport = self.transport = AddressedTransport(tcp)
        if cfg.all_facts or cfg.facts & FRAME_FACTS:
            transport.watch = self._observe
        # The system reads its clock for the incarnation as it starts (see the module docstring).
        system = ActorSystem(
            node=self.node,
            cluster=cfg.cluster_options(),
            transport=transport,
            observer=self._observe,
            clock=self.clock,
            ask_timeout=cfg.ask_timeout,
            write_timeout=cfg.write_timeout,
        )
        try:
            await system.__aenter__()
        except BaseException:
            await tcp.close()
            raise
        self.system = system
        service = self.membership
        assert service is not None  # the system runs in cluster mode
        self.gateway = Gateway(
            system,
            transport.send,
            hosted,
            forget=transport.forget,
            is_member=lambda node: any(m.node == node for m in service.members()),
        )
        transport.set_client_handler(self.gateway.handle)
        self.emit(
            {
                "event": "ready",
                "node": self.node,
                "address": format_address(tcp.address),
                "cluster": cfg.cluster,
                "incarnation": service.incarnation,
                "seeds": list(cfg.seed_ids),
                "actors": list(self.actors),
            }
        )

    async def stop(self) -> None:
        """Leave in order: the system stops (telling every member), then its frames reach the sockets (bounded). Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        service, transport = self.membership, self.transport
        if service is not None and transport is not None:
            # Frames queued for members given up on would only hold the flush back: drop them.
            for peer in transport.known:
                if not service.serving(peer) and any(m.node == peer for m in service.members()):
                    transport.forget(peer)
        if self.system is not None:
            await self.system.stop()  # leaves the membership first, then ends the activations
        if transport is not None:
            await asyncio.sleep(0)  # gateway calls failed by the stop answer their clients now
            await self._flush(transport, self.config.leave_timeout)
        await self._close()
        self.emit({"event": "stopped", "node": self.node, "orderly": True})

    async def crash(self) -> None:
        """Stop without a word, as a crash looks to the others (the actor system stops as crashed). Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        if self.system is not None:
            await self.system.stop(crashed=True)
        await self._close()
        self.emit({"event": "stopped", "node": self.node, "orderly": False})

    async def _flush(self, transport: AddressedTransport, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while transport.in_flight and loop.time() < deadline:
            await asyncio.sleep(_POLL)
        if transport.in_flight:
            log.info("%s: left with %d frames not yet written", self.node, transport.in_flight)

    async def _close(self) -> None:
        if self.gateway is not None:
            await self.gateway.close()
        if self.transport is not None:
            self.transport.set_client_handler(None)
        if self.tcp is not None:
            await self.tcp.close()

    async def __aenter__(self) -> NodeProcess:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        if exc_type is None or issubclass(exc_type, asyncio.CancelledError):
            await self.stop()
        else:
            await self.crash()

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else ("running" if self.system is not None else "new")
        return f"<NodeProcess {self.node} {self.config.cluster!r} {state}>"
