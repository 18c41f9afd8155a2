"""The incoming side of the TCP transport: the listener's connections, their caps, their timeouts.

Every connection a node accepts is served here by one task, around one ``Acceptor``
(``casty.protocol.framing``), which says what its bytes mean; this side keeps what the
core cannot, because it needs a loop or sees every connection at once:

- the caps, at accept, before a task or a buffer exists: over ``max_connections`` the new
  connection is closed at once; over ``max_handshakes`` the oldest one still in its
  handshake is closed instead, so strangers holding silent sockets cannot keep a real peer
  (whose handshake takes one round trip) out;
- the timeouts: ``handshake_timeout`` to complete the handshake, ``idle_timeout`` with no
  byte once welcomed;
- the one ``BufferBudget`` of partial frames across connections (``max_buffered``), that
  each connection's core counts itself in;
- the admission: a newer connection from a node supersedes the older one, which is closed.

``TcpTransport`` (``casty.cluster.tcp``) owns one ``Listener``, gives it the counters, the
handler to deliver to and the observer to report to, and sets ``closing`` when it closes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from ..observer import Event
from ..ports import Entropy
from ..protocol.framing import NONCE_SIZE, Acceptor, BufferBudget, FrameError, OverBudget
from .tcp_streams import READ_CHUNK, describe, format_peer, log, log_crash, shut
from .tcp_types import ConnectionLost, TcpLimits, TcpStats

__all__ = ["Incoming", "Listener"]


class Incoming:
    """One accepted connection: who it is (once the handshake says), the task reading it, the bytes it holds."""

    __slots__ = ("writer", "address", "node", "admitted", "lost_reason", "task")

    def __init__(self, writer: asyncio.StreamWriter, address: str) -> None:
        self.writer = writer
        self.address = address
        self.node = ""
        self.admitted = False
        self.lost_reason: str | None = None
        self.task: asyncio.Task[None] | None = None


class _Closed(Exception):
    """The peer closed an incoming connection during the handshake."""


class Listener:
    """The incoming connections of one transport: ``accept`` is the server's callback; see the module docstring."""

    def __init__(
        self,
        node: str,
        cluster: str,
        *,
        secret: bytes | None,
        max_frame: int,
        limits: TcpLimits,
        handshake_timeout: float,
        stats: TcpStats,
        deliver: Callable[[str, bytes], None],
        emit: Callable[[Event], None],
        entropy: Entropy,
    ) -> None:
        self._node = node
        self._entropy = entropy
        self._cluster = cluster
        self._secret = secret
        self._max_frame = max_frame
        self._max_connections = limits.max_connections
        self._max_handshakes = limits.max_handshakes
        self._handshake_timeout = handshake_timeout
        self._idle_timeout = limits.idle_timeout
        self._budget = BufferBudget(limits.max_buffered)  # every incoming connection's partial frame, counted by its core
        self.stats = stats
        self._deliver = deliver
        self._emit = emit
        self.loop: asyncio.AbstractEventLoop | None = None
        """The loop to serve on (the transport sets it at ``start``); None refuses every connection."""
        self.closing = False
        """Set by the transport's ``close``: connections are refused and end without a report."""
        self._incoming: set[Incoming] = set()
        self._handshaking: dict[Incoming, None] = {}  # oldest first: the first to go when too many wait
        self._admitted: dict[str, Incoming] = {}

    @property
    def count(self) -> int:
        """How many incoming connections are open (in the handshake or welcomed)."""
        return len(self._incoming)

    @property
    def buffered(self) -> int:
        """Bytes of partial frames held across every incoming connection (at most ``max_buffered``)."""
        return self._budget.total

    def tasks(self) -> list[asyncio.Task[None]]:
        """The tasks serving the open connections (the transport cancels them when it closes)."""
        return [c.task for c in self._incoming if c.task is not None]

    def accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """The listener's callback (synchronous, so every connection is tracked from its first moment).

        The caps act here, before a task or a buffer exists for the connection: over
        ``max_connections`` the new one is closed at once; over ``max_handshakes`` the oldest
        connection still in its handshake is closed instead, so that strangers holding
        silent sockets cannot keep a real peer (whose handshake takes one round trip) out.
        """
        loop = self.loop
        if self.closing or loop is None:
            writer.transport.abort()
            return
        address = format_peer(writer.get_extra_info("peername"))
        if len(self._incoming) >= self._max_connections:
            writer.transport.abort()
            self.stats.over_cap += 1
            reason = f"over the connection cap ({self._max_connections} incoming connections)"
            log.info("%s: connection from %s closed: %s", self._node, address, reason)
            self._emit(ConnectionLost("", reason, "in", address))
            return
        if len(self._handshaking) >= self._max_handshakes:
            oldest = next(iter(self._handshaking))
            del self._handshaking[oldest]
            self.stats.evicted += 1
            oldest.lost_reason = f"evicted: more than {self._max_handshakes} connections in the handshake"
            oldest.writer.transport.abort()
        conn = Incoming(writer, address)
        task = loop.create_task(self._serve(conn, reader, writer), name=f"casty.tcp {self._node}<-{conn.address}")
        task.add_done_callback(log_crash)
        conn.task = task
        self._incoming.add(conn)
        self._handshaking[conn] = None

    async def _serve(self, conn: Incoming, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One incoming connection: the handshake, then every frame to the handler, until it ends or idles.

        The ``Acceptor`` core decides what the bytes mean (and counts its partial frame in the
        global budget); this task reads, writes what the core says, and keeps the timeouts.
        """
        reason = "closed by the peer"
        level = logging.INFO
        graceful = True
        loop = asyncio.get_running_loop()
        secret = self._secret
        # The challenge nonce comes from the Entropy port, not the seeded Random: a predictable challenge lets a recorded
        # proof be replayed (casty.ports.Entropy says why).
        nonce = self._entropy(NONCE_SIZE) if secret is not None else b""
        core = Acceptor(
            self._node, self._cluster, secret=secret, nonce=nonce, max_frame=self._max_frame, budget=self._budget
        )
        try:
            async with asyncio.timeout(self._handshake_timeout):
                while True:
                    data = await reader.read(READ_CHUNK)
                    if not data:
                        raise _Closed
                    step = core.receive(data)
                    conn.node = core.peer
                    if step.done:
                        break
                    if step.write:
                        writer.write(step.write)
            self._handshaking.pop(conn, None)
            writer.write(step.write)
            if step.refused is not None:
                self.stats.refused += 1
                reason, level = f"refused: {step.refused}", logging.WARNING
                return
            self._admit(conn)
            for frame in step.frames:
                self._deliver(conn.node, frame)
            idle = self._idle_timeout
            async with asyncio.timeout(idle) as quiet:
                while True:
                    data = await reader.read(READ_CHUNK)
                    if not data:
                        reason = conn.lost_reason or "closed by the peer"
                        return
                    quiet.reschedule(loop.time() + idle)
                    for frame in core.feed(data):
                        self._deliver(conn.node, frame)
        except _Closed:
            reason = conn.lost_reason or "closed by the peer before the handshake"
        except TimeoutError:
            if conn.admitted:
                self.stats.idle_closed += 1
                reason, graceful = f"idle for {self._idle_timeout:g}s", False
            else:
                self.stats.protocol_errors += 1
                reason, level, graceful = f"no handshake within {self._handshake_timeout:g}s", logging.WARNING, False
        except FrameError as exc:
            if isinstance(exc, OverBudget):
                self.stats.over_buffered += 1
            if conn.admitted:
                for frame in exc.frames:
                    self._deliver(conn.node, frame)
            self.stats.protocol_errors += 1
            reason, level, graceful = f"protocol error: {exc.reason}", logging.WARNING, False
        except OSError as exc:
            reason, graceful = conn.lost_reason or f"connection error: {describe(exc)}", False
        finally:
            conn.node = core.peer  # the hello's node id even when a later frame of the handshake failed
            self._incoming.discard(conn)
            self._handshaking.pop(conn, None)
            core.release()
            if self._admitted.get(conn.node) is conn:
                del self._admitted[conn.node]
            if not self.closing:
                if conn.admitted:
                    self.stats.connections_lost += 1
                who = conn.node or "an unidentified peer"
                log.log(level, "%s: connection from %s at %s closed: %s", self._node, who, conn.address, reason)
                self._emit(ConnectionLost(conn.node, reason, "in", conn.address))
            await shut(writer, graceful=graceful and not self.closing)

    def _admit(self, conn: Incoming) -> None:
        conn.admitted = True
        self.stats.accepts += 1
        older = self._admitted.get(conn.node)
        self._admitted[conn.node] = conn
        if older is not None:
            older.lost_reason = "superseded by a newer connection from the same node"
            older.writer.transport.abort()
