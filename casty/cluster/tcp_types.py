"""The plain data of the TCP transport: the bounds it is given (``TcpLimits``), the events it reports, its counters.

Apart from ``casty.cluster.tcp`` so that its two sides (the outgoing queues there, the
listener in ``casty.cluster.tcp_incoming``) share them without importing each other, and so
that a reader finds what a transport promises without reading how it does it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import ClassVar

from ..observer import Event

__all__ = ["ConnectionLost", "ConnectFailed", "TcpStats", "TcpLimits", "check_seconds", "check_count"]


@dataclass(frozen=True, slots=True)
class ConnectionLost(Event):
    """A connection ended for ``reason``: a garbage or oversized frame, a refused handshake, the peer went away, ...

    ``direction`` is "in" (accepted here; ``node`` is "" if it never said who it was) or
    "out" (dialed from here, after a completed handshake). ``address`` is the peer's
    host:port.
    """

    kind: ClassVar[str] = "net.connection_lost"
    node: str
    reason: str
    direction: str
    address: str


@dataclass(frozen=True, slots=True)
class ConnectFailed(Event):
    """An attempt to reach ``node`` failed (``reason``); ``dropped`` queued frames were dropped; next try in ``retry_in`` s."""

    kind: ClassVar[str] = "net.connect_failed"
    node: str
    address: str
    reason: str
    dropped: int
    retry_in: float


@dataclass(slots=True)
class TcpStats:
    """What a transport did, counted since it was built."""

    sent: int = 0
    """Frames written to a socket (or handed to this node itself)."""
    received: int = 0
    """Frames handed to the handler."""
    connects: int = 0
    """Outgoing connections that completed the handshake."""
    connect_failures: int = 0
    """Outgoing attempts that did not complete it."""
    accepts: int = 0
    """Incoming connections welcomed."""
    refused: int = 0
    """Incoming handshakes refused (another cluster, another protocol, ...)."""
    protocol_errors: int = 0
    """Incoming connections closed for a garbage or oversized frame or a malformed or missing handshake."""
    over_cap: int = 0
    """Incoming connections closed at once: ``max_connections`` were open already."""
    evicted: int = 0
    """Incoming connections still in the handshake closed to make room for a newer one (``max_handshakes``)."""
    idle_closed: int = 0
    """Welcomed incoming connections closed after ``idle_timeout`` without a byte."""
    over_buffered: int = 0
    """Incoming connections closed for a partial frame that took the bytes buffered past ``max_buffered``."""
    connections_lost: int = 0
    """Welcomed incoming or established outgoing connections that ended (not counting ``close``)."""
    dropped_unknown: int = 0
    """Frames to a node not in the address book."""
    dropped_too_large: int = 0
    """Frames over this node's ``max_frame``."""
    dropped_overflow: int = 0
    """Frames pushed out of a full queue (the oldest go first)."""
    dropped_unreachable: int = 0
    """Frames queued for a peer when an attempt to reach it failed."""
    dropped_closed: int = 0
    """Frames sent before ``start`` or after ``close``."""
    dropped_no_handler: int = 0
    """Frames that arrived while no handler was set."""

    @property
    def dropped(self) -> int:
        """Every frame dropped, whatever the reason."""
        return sum(getattr(self, f.name) for f in fields(self) if f.name.startswith("dropped_"))


@dataclass(frozen=True, slots=True)
class TcpLimits:
    """How much the incoming side of a transport holds for peers it has not (or not recently) heard from.

    Each bound is here because without it a stranger that can reach the port can take a
    node down without sending a single valid frame: idle sockets exhaust its descriptors,
    and partial frames its memory. All of them are checked here (``ValueError`` naming the
    option for NaN, infinity, zero or a negative value).
    """

    max_connections: int = 256
    """Incoming connections open at once (handshaking or welcomed); the next one is closed at accept."""
    max_handshakes: int = 64
    """Incoming connections still in their handshake; one more closes the oldest of them."""
    handshake_timeout: float | None = None
    """Seconds an incoming connection has to complete its handshake (None: the transport's ``connect_timeout``)."""
    idle_timeout: float = 60.0
    """Seconds a welcomed incoming connection may stay without a byte before it is closed."""
    max_buffered: int = 64 * 1024 * 1024
    """Bytes of partial frames held across all incoming connections (at least one frame of ``max_frame``)."""

    def __post_init__(self) -> None:
        check_count(self.max_connections, "max_connections")
        check_count(self.max_handshakes, "max_handshakes")
        if self.handshake_timeout is not None:
            check_seconds(self.handshake_timeout, "handshake_timeout")
        check_seconds(self.idle_timeout, "idle_timeout")
        check_count(self.max_buffered, "max_buffered")


def check_seconds(value: float, what: str) -> float:
    """``value`` if it is a positive, finite number of seconds; else ``ValueError`` naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise ValueError(f"{what} must be a positive, finite number of seconds, got {value!r}")
    return float(value)


def check_count(value: int, what: str, least: int = 1) -> int:
    """``value`` if it is an int of at least ``least``; else ``ValueError`` naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{what} must be an int of at least {least}, got {value!r}")
    return value
