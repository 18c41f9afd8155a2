"""``TcpTransport``: casty's Transport port over TCP, on asyncio streams.

The bytes are the framing core's business (``casty.protocol.framing``, sans I/O): the
length-prefixed frames, the ``max_frame`` and ``HANDSHAKE_MAX`` limits, the handshake with
the cluster name and, with a cluster secret, the mutual HMAC challenge, and the accounting
of partial frames against the global byte bound. Each connection runs one core (an
``Acceptor`` for an incoming one, a ``Dialer`` for an outgoing one); this module is the
asyncio transport around them: one outgoing connection per peer with its bounded queue
and reconnection with capped backoff (here), and the listener with its caps and timeouts
(``casty.cluster.tcp_incoming``); ``casty.cluster.tcp_types`` holds the limits, events and
counters both sides share.

The handshake nonces come from the ``Entropy`` port (``casty.ports``; ``os.urandom`` unless
``entropy=`` says otherwise), drawn here and handed to the cores, not from the injected
``random.Random``: that one is seeded for reproducible jitter, and a nonce an observer can
predict (or one repeated after a restart with the same seed) would let a recorded proof be
replayed. The simulator never runs this adapter. A refused handshake goes to the observer
(``ConnectionLost`` here, ``ConnectFailed`` at the dialer). A silent stranger is closed
after ``handshake_timeout`` (``connect_timeout`` unless given).

Resource bounds on incoming connections, the fields of ``TcpLimits`` (``limits=``), checked
at construction (``ValueError`` naming the field): at most ``max_connections`` open at once (the next
is closed at accept); at most ``max_handshakes`` still in their handshake (the oldest of
them is closed to make room, so strangers holding silent sockets cannot keep a real peer
out); ``handshake_timeout`` to complete it; ``idle_timeout`` with no byte once welcomed (a
member's heartbeats keep its connection busy; a dialer whose connection was closed redials
on its next frame); and ``max_buffered`` bytes of partial frames across all connections
(the connection whose partial frame takes the total past it is closed, not buffered).

Connections are one-way. The dialer's connection carries its frames to the acceptor and
nothing comes back after ``Welcome``. A frame from ``a`` to ``b`` always rides on the
connection that ``a`` opened to ``b``, and ``b`` answers on its own connection to ``a``.
With one direction per connection there is no tie-break when two nodes dial each other at
once, each side has exactly one writer per peer (its own task) and one reader per peer (the
acceptor), and the source of every frame is the node id the handshake proved. An incoming
connection from a node supersedes an older one from the same node, which is closed: a
restarted peer never leaves a half-open ghost behind.

Delivery is best effort, as the port says. Frames from one node to another arrive in order
while a connection lasts. Frames written to a connection that breaks are lost, and the next
frame opens a new connection.

Outgoing queues. ``send`` never blocks and never raises for network reasons. It appends
to the destination's queue and wakes that peer's task, which connects lazily (on the first
frame), writes queued frames in batches and reconnects after a loss.

- Overflow: a queue holds at most ``queue_frames`` frames and ``queue_bytes`` bytes.
  When full, the **oldest** frames are dropped (``stats.dropped_overflow``). The frames
  that protocols on top send again and again (heartbeats, digests, retries) are worth
  more fresh than stale.
- Unreachable: when a connection attempt fails (refused, timed out, handshake refused),
  the frames queued for that peer are dropped (``stats.dropped_unreachable``), and the
  next attempt waits a backoff: ``backoff_min`` doubling up to ``backoff_max``, with
  jitter only when a ``random.Random`` is injected. Frames sent during the backoff wait
  for that attempt. So a frame to a dead node lives at most one backoff plus one
  ``connect_timeout``.
- A node not in the address book (``dropped_unknown``), a frame over this node's own
  ``max_frame`` (``dropped_too_large``), and a transport not started or already closed
  (``dropped_closed``) all drop at once, in ``send`` itself.

Errors on a connection end that connection and nothing else. A garbage or oversized frame,
a malformed handshake or a broken socket is logged with its reason on the ``casty.tcp``
logger and reported to the observer as ``ConnectionLost`` (incoming connections, and
established outgoing ones) or ``ConnectFailed`` (outgoing attempts that never completed the
handshake). Then that connection is closed. The listener and every other connection carry
on.

The listener binds ``127.0.0.1`` unless told otherwise. Pass IP literals: a host name
that resolves to several addresses would bind several sockets. There are no threads, and
time comes only from the running loop (``loop.time``, ``asyncio.sleep``, ``asyncio.timeout``).
"""

from __future__ import annotations

import asyncio
import hmac
import os
import random
from collections import deque
from collections.abc import Mapping
from typing import Final

from ..observer import Event
from ..ports import Entropy, FrameHandler, Observer
from ..protocol.framing import HEADER, HEADER_SIZE, LENGTH_LIMIT, NONCE_SIZE, Dialer, FrameError, secret_bytes
from ..protocol.limits import MAX_FRAME
from .addresses import Address
from .tcp_incoming import Listener
from .tcp_streams import READ_CHUNK, describe, format_peer, log, log_crash, shut
from .tcp_types import ConnectFailed, ConnectionLost, TcpLimits, TcpStats, check_seconds

__all__ = [
    "MAX_FRAME",
    "secret_bytes",
    "ConnectionLost",
    "ConnectFailed",
    "TcpStats",
    "TcpLimits",
    "TcpTransport",
]

_WRITE_BATCH: Final = 256 * 1024


# --- the asyncio driver --------------------------------------------------------------------


class _DialError(Exception):
    """An outgoing attempt failed for ``reason`` after the socket was connected."""


class _Peer:
    """One destination: its address, its queue of frames and the task that carries them."""

    __slots__ = (
        "node", "address", "queue", "queued_bytes", "wakeup", "task", "writer", "failures", "retry_at", "lost_reason",
    )

    def __init__(self, node: str, address: Address) -> None:
        self.node = node
        self.address = address
        self.queue: deque[bytes] = deque()
        self.queued_bytes = 0
        self.wakeup = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.failures = 0
        self.retry_at = 0.0
        self.lost_reason: str | None = None


class TcpTransport:
    """casty's ``Transport`` over TCP: see the module docstring for the wire format and the choices.

    ``start()`` opens the listener (its actual address is ``address``, so port 0 works).
    ``add_peer`` fills the address book, ``send`` queues a frame and never blocks,
    ``set_handler`` receives ``(source node, frame)``, and ``close()`` stops it all. It can
    also be used as ``async with TcpTransport(...) as transport:``.
    """

    def __init__(
        self,
        node: str,
        bind: Address = ("127.0.0.1", 0),
        *,
        cluster: str = "casty",
        peers: Mapping[str, Address] | None = None,
        max_frame: int = MAX_FRAME,
        connect_timeout: float = 5.0,
        queue_frames: int = 10_000,
        queue_bytes: int = 64 * 1024 * 1024,
        backoff_min: float = 0.05,
        backoff_max: float = 5.0,
        rng: random.Random | None = None,
        observer: Observer | None = None,
        secret: bytes | str | None = None,
        limits: TcpLimits = TcpLimits(),
        entropy: Entropy = os.urandom,
    ) -> None:
        if not node:
            raise ValueError("a node id must not be empty")
        if not 0 <= max_frame <= LENGTH_LIMIT:
            raise ValueError(f"max_frame must be within [0, 2**32 - 1], got {max_frame}")
        if queue_frames < 1:
            raise ValueError(f"queue_frames must be at least 1, got {queue_frames}")
        if queue_bytes < max_frame:
            raise ValueError(f"queue_bytes ({queue_bytes}) must hold one frame of max_frame ({max_frame}) bytes")
        check_seconds(connect_timeout, "connect_timeout")
        check_seconds(backoff_min, "backoff_min")
        check_seconds(backoff_max, "backoff_max")
        if not backoff_min <= backoff_max:
            raise ValueError(f"need 0 < backoff_min <= backoff_max, got {backoff_min} and {backoff_max}")
        if not isinstance(limits, TcpLimits):
            raise TypeError(f"limits must be a TcpLimits, got {type(limits).__qualname__}")
        if limits.max_buffered < max_frame + HEADER_SIZE:
            raise ValueError(f"max_buffered ({limits.max_buffered}) must hold one partial frame of max_frame ({max_frame}) bytes")
        self.limits: Final = limits
        self._secret = secret_bytes(secret)
        self._node = node
        self._bind = bind
        self._cluster = cluster
        self._max_frame = max_frame
        self._connect_timeout = connect_timeout
        self._queue_frames = queue_frames
        self._queue_bytes = queue_bytes
        self._backoff_min = backoff_min
        self._backoff_max = backoff_max
        self._rng = rng
        self._observer = observer
        self._handler: FrameHandler | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._address: Address | None = None
        self._closing = False
        self._peers: dict[str, _Peer] = {}
        self._retired: set[asyncio.Task[None]] = set()
        self._watchers: set[asyncio.Task[str]] = set()
        self.stats = TcpStats()
        self._entropy = entropy
        self._listener: Final = Listener(
            node, cluster, secret=self._secret, max_frame=max_frame, limits=limits,
            handshake_timeout=connect_timeout if limits.handshake_timeout is None else limits.handshake_timeout,
            stats=self.stats, deliver=self._deliver, emit=self._emit, entropy=entropy,
        )
        for peer, address in (peers or {}).items():
            self.add_peer(peer, address)

    # --- the Transport port ---------------------------------------------------------------

    @property
    def node(self) -> str:
        return self._node

    @property
    def cluster(self) -> str:
        return self._cluster

    @property
    def max_frame(self) -> int:
        """The largest frame this transport sends or accepts (``casty.protocol.limits.MAX_FRAME`` by default)."""
        return self._max_frame

    @property
    def address(self) -> Address:
        """The (host, port) the listener is bound to; only after ``start``."""
        if self._address is None:
            raise RuntimeError("the transport is not listening: call start() first")
        return self._address

    @property
    def incoming(self) -> int:
        """How many incoming connections are open (in the handshake or welcomed)."""
        return self._listener.count

    @property
    def buffered(self) -> int:
        """Bytes of partial frames held across every incoming connection (at most ``max_buffered``)."""
        return self._listener.buffered

    @property
    def authenticated(self) -> bool:
        """Whether this transport proves, and asks every peer to prove, a cluster secret in the handshake."""
        return self._secret is not None

    def uses_secret(self, secret: bytes | str) -> bool:
        """Whether ``secret`` is the one this transport was given (``ActorSystem`` checks ``Cluster(secret=)`` with it)."""
        mine, theirs = self._secret, secret_bytes(secret)
        return mine is not None and theirs is not None and hmac.compare_digest(mine, theirs)

    @property
    def outgoing(self) -> frozenset[str]:
        """The peers this node holds an established outgoing connection to."""
        return frozenset(p.node for p in self._peers.values() if p.writer is not None)

    def set_handler(self, handler: FrameHandler) -> None:
        self._handler = handler

    def send(self, destination: str, frame: bytes) -> None:
        """Queue ``frame`` for ``destination``; never blocks, never raises for network reasons (drops instead)."""
        if not isinstance(frame, (bytes, bytearray, memoryview)):
            raise TypeError(f"a frame is bytes, got {type(frame).__qualname__}")
        data = bytes(frame)
        stats = self.stats
        loop = self._loop
        if loop is None or self._closing:
            stats.dropped_closed += 1
            return
        if len(data) > self._max_frame:
            stats.dropped_too_large += 1
            log.warning(
                "%s: dropped a frame of %d bytes to %s: over max_frame %d", self._node, len(data), destination, self._max_frame
            )
            return
        if destination == self._node:
            stats.sent += 1
            loop.call_soon(self._deliver, self._node, data)
            return
        peer = self._peers.get(destination)
        if peer is None:
            stats.dropped_unknown += 1
            log.debug("%s: dropped a frame to unknown node %s", self._node, destination)
            return
        queue = peer.queue
        queue.append(data)
        peer.queued_bytes += len(data)
        while len(queue) > self._queue_frames or peer.queued_bytes > self._queue_bytes:
            peer.queued_bytes -= len(queue.popleft())
            stats.dropped_overflow += 1
        if peer.task is None:
            task = loop.create_task(self._dial_loop(peer), name=f"casty.tcp {self._node}->{peer.node}")
            task.add_done_callback(log_crash)
            peer.task = task
        peer.wakeup.set()

    async def start(self) -> None:
        """Open the listener on ``bind`` (loopback, any free port by default)."""
        if self._closing:
            raise RuntimeError("the transport is closed")
        if self._server is not None:
            raise RuntimeError("the transport is already started")
        self._loop = self._listener.loop = asyncio.get_running_loop()
        host, port = self._bind
        self._server = await asyncio.start_server(self._listener.accept, host, port, limit=READ_CHUNK)
        name = self._server.sockets[0].getsockname()
        self._address = (str(name[0]), int(name[1]))
        log.debug("%s: listening on %s (cluster %r)", self._node, format_peer(self._address), self._cluster)

    async def close(self) -> None:
        """Stop listening, drop every connection and queue, and wait for every task of this transport to end."""
        if self._closing:
            return
        self._closing = self._listener.closing = True
        server, self._server = self._server, None
        if server is not None:
            server.close()
        tasks = [p.task for p in self._peers.values() if p.task is not None]
        tasks += self._listener.tasks()
        tasks += list(self._retired)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._watchers:  # cancelled by their pumps; a second cancellation may have cut the wait short
            await asyncio.wait(list(self._watchers))
        if server is not None:
            await server.wait_closed()
        for peer in self._peers.values():
            self.stats.dropped_closed += len(peer.queue)
            peer.queue.clear()
            peer.queued_bytes = 0
            peer.task = None

    async def __aenter__(self) -> TcpTransport:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # --- the address book -----------------------------------------------------------------

    def add_peer(self, node: str, address: Address) -> None:
        """Tell where ``node`` listens. A new address for a connected peer drops the old connection."""
        if not node:
            raise ValueError("a node id must not be empty")
        if node == self._node:
            return
        address = (str(address[0]), int(address[1]))
        peer = self._peers.get(node)
        if peer is None:
            self._peers[node] = _Peer(node, address)
            return
        if peer.address == address:
            return
        peer.address = address
        peer.failures = 0
        peer.retry_at = 0.0
        if peer.writer is not None:
            peer.lost_reason = f"address changed to {format_peer(address)}"
            peer.writer.transport.abort()

    def remove_peer(self, node: str) -> None:
        """Forget ``node``: its queued frames are dropped and its connection closed."""
        peer = self._peers.pop(node, None)
        if peer is None:
            return
        self.stats.dropped_unreachable += len(peer.queue)
        peer.queue.clear()
        peer.queued_bytes = 0
        if peer.task is not None:
            task = peer.task
            peer.task = None
            self._retired.add(task)
            task.add_done_callback(self._retired.discard)
            task.cancel()

    def peers(self) -> dict[str, Address]:
        """The address book: node id -> (host, port)."""
        return {node: peer.address for node, peer in self._peers.items()}

    # --- outgoing -------------------------------------------------------------------------

    def _backoff(self, failures: int) -> float:
        delay = min(self._backoff_max, self._backoff_min * 2.0 ** min(failures - 1, 62))
        if self._rng is not None:
            delay *= 0.5 + 0.5 * self._rng.random()
        return delay

    async def _dial_loop(self, peer: _Peer) -> None:
        """The peer's one task: wait for frames, connect, write them; after a failure, back off and retry."""
        loop = asyncio.get_running_loop()
        while True:
            while not peer.queue:
                peer.wakeup.clear()
                await peer.wakeup.wait()
            delay = peer.retry_at - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            address = peer.address
            where = format_peer(address)
            try:
                async with asyncio.timeout(self._connect_timeout):
                    reader, writer = await self._dial(peer, address)
            except Exception as exc:
                if isinstance(exc, TimeoutError):
                    reason = f"no connection and handshake within {self._connect_timeout}s"
                elif isinstance(exc, (_DialError, FrameError)):  # FrameError: HandshakeError included
                    reason = str(exc)
                else:
                    reason = describe(exc)
                peer.failures += 1
                retry_in = self._backoff(peer.failures)
                peer.retry_at = loop.time() + retry_in
                dropped = len(peer.queue)
                peer.queue.clear()
                peer.queued_bytes = 0
                self.stats.dropped_unreachable += dropped
                self.stats.connect_failures += 1
                log.info(
                    "%s: cannot reach %s at %s: %s (%d frames dropped, next try in %.3fs)",
                    self._node, peer.node, where, reason, dropped, retry_in,
                )
                self._emit(ConnectFailed(peer.node, where, reason, dropped, retry_in))
                continue
            peer.failures = 0
            peer.lost_reason = None
            peer.writer = writer
            self.stats.connects += 1
            log.debug("%s: connected to %s at %s", self._node, peer.node, where)
            try:
                reason = await self._pump(peer, reader, writer)
            finally:
                peer.writer = None
            peer.failures = 1
            retry_in = self._backoff(1)
            peer.retry_at = loop.time() + retry_in
            self.stats.connections_lost += 1
            log.info("%s: connection to %s at %s lost: %s", self._node, peer.node, where, reason)
            self._emit(ConnectionLost(peer.node, reason, "out", where))

    async def _dial(self, peer: _Peer, address: Address) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """Connect and shake hands (the ``Dialer`` core says what to write and when it is over); the streams once welcomed."""
        reader, writer = await asyncio.open_connection(address[0], address[1], limit=READ_CHUNK)
        try:
            secret = self._secret
            nonce = self._entropy(NONCE_SIZE) if secret is not None else b""
            core = Dialer(self._node, self._cluster, peer.node, secret=secret, nonce=nonce)
            writer.write(core.hello)
            await writer.drain()
            while not core.open:
                data = await reader.read(READ_CHUNK)
                if not data:
                    raise _DialError("closed by the acceptor during the handshake")
                step = core.receive(data)
                if step.write:
                    writer.write(step.write)
                    await writer.drain()
        except BaseException:
            await shut(writer, graceful=False)
            raise
        return reader, writer

    async def _pump(self, peer: _Peer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> str:
        """Write the peer's queue to an established connection until it breaks; return why it broke."""
        loop = asyncio.get_running_loop()
        watcher = loop.create_task(self._watch(reader), name=f"casty.tcp {self._node}->{peer.node} watch")
        watcher.add_done_callback(lambda _: peer.wakeup.set())
        self._watchers.add(watcher)
        watcher.add_done_callback(self._watchers.discard)
        graceful = True
        try:
            while True:
                if watcher.done():
                    graceful = False
                    return peer.lost_reason or watcher.result()
                if not peer.queue:
                    peer.wakeup.clear()
                    await peer.wakeup.wait()
                    continue
                self._write_batch(peer, writer)
                await writer.drain()
        except OSError as exc:
            graceful = False
            return peer.lost_reason or f"write failed: {describe(exc)}"
        finally:
            watcher.cancel()
            await shut(writer, graceful=graceful and not self._closing)
            await asyncio.wait([watcher])

    async def _watch(self, reader: asyncio.StreamReader) -> str:
        """Read an outgoing connection, where nothing should come after the welcome; return how it ended."""
        try:
            data = await reader.read(READ_CHUNK)
        except OSError as exc:
            return f"connection error: {describe(exc)}"
        if not data:
            return "closed by the peer"
        return "protocol error: the acceptor sent data after its welcome"

    def _write_batch(self, peer: _Peer, writer: asyncio.StreamWriter) -> None:
        queue = peer.queue
        batch = bytearray()
        count = 0
        while queue and len(batch) < _WRITE_BATCH:
            frame = queue.popleft()
            peer.queued_bytes -= len(frame)
            count += 1
            if len(frame) >= _WRITE_BATCH:
                if batch:
                    writer.write(batch)
                    batch = bytearray()
                writer.write(HEADER.pack(len(frame)))
                writer.write(frame)
            else:
                batch += HEADER.pack(len(frame))
                batch += frame
        if batch:
            writer.write(batch)
        self.stats.sent += count

    # --- delivery and reports -------------------------------------------------------------

    def _deliver(self, source: str, frame: bytes) -> None:
        handler = self._handler
        if self._closing:
            self.stats.dropped_closed += 1
            return
        if handler is None:
            self.stats.dropped_no_handler += 1
            return
        self.stats.received += 1
        try:
            handler(source, frame)
        except Exception:
            log.exception("%s: the frame handler raised on a frame from %s", self._node, source)

    def _emit(self, event: Event) -> None:
        if self._observer is not None:
            try:
                self._observer(event)
            except Exception:  # the port says it must not raise; if it does, no connection pays for it
                log.exception("%s: the observer raised on %s", self._node, event.kind)
