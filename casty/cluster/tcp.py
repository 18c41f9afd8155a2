"""``TcpTransport``: casty's Transport port over TCP, on asyncio streams.

Two layers:

- **A sans-I/O framing core** (no sockets, no loop): ``FrameDecoder`` turns any chunking of
  a byte stream back into frames, ``encode_frame`` does the reverse, and ``Hello`` /
  ``Welcome`` / ``Refused`` with ``decode_hello``, ``decode_reply`` and ``refusal`` are the
  handshake. Unit tests drive them with plain bytes.
- **The asyncio driver**, ``TcpTransport``: a listener, one outgoing connection per peer,
  bounded queues, reconnection with capped backoff.

Wire format. Every frame is a 4-byte big-endian length followed by that many bytes. A
length over the receiver's ``max_frame`` (``casty.protocol.limits.MAX_FRAME``, 4 MiB, by
default) is refused from the header alone, before any payload is buffered. A connection
starts with one handshake frame each way: the dialer sends ``Hello(magic, cluster, node)``
(msgpack, via msgspec), the acceptor answers ``Welcome(node)`` or ``Refused(reason)`` and
closes. A refusal is given for another cluster name, another protocol ``magic``, an empty
node id or this node's own id. A handshake frame may not exceed ``HANDSHAKE_MAX`` (1 KiB),
so a stranger cannot make a node buffer megabytes before saying who it is, and a silent one
is closed after ``handshake_timeout`` (``connect_timeout`` unless given).

The cluster secret (``secret=``, from ``Cluster(secret=...)``). With one, the handshake is
a mutual challenge: ``Hello`` carries the dialer's nonce; the acceptor answers
``Challenge(node, nonce, proof)``, the dialer checks that proof and sends ``Proof(proof)``,
and only then does the acceptor welcome it. Each proof is HMAC-SHA256 over the role, the
cluster name, both node ids and both nonces (``proof``), compared with
``hmac.compare_digest``. A dialer without the secret, with another one, or that sends
anything between its frames of the handshake, is refused before any of its frames is read,
and the refusal goes to the observer (``ConnectionLost`` here, ``ConnectFailed`` at the
dialer); a node with a secret also refuses to talk to one without. Nonces come from
``os.urandom``, not from the injected ``random.Random``: that one is seeded for
reproducible jitter, and a nonce an observer can predict (or one repeated after a restart
with the same seed) would let a recorded proof be replayed. This module is a real adapter
that the simulator never runs, so it may read the OS's randomness. The secret authenticates
peers; it does not encrypt or sign the frames that follow (a man in the middle of an
established connection is out of its reach).

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
import hashlib
import hmac
import logging
import math
import os
import random
import struct
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Final, Literal

import msgspec

from ..errors import CastyError
from ..observer import Event
from ..ports import FrameHandler, Observer
from ..protocol.limits import MAX_FRAME
from .addresses import Address

__all__ = [
    "MAGIC",
    "MAX_FRAME",
    "HANDSHAKE_MAX",
    "FrameError",
    "FrameDecoder",
    "encode_frame",
    "Hello",
    "Welcome",
    "Refused",
    "Challenge",
    "Proof",
    "NONCE_SIZE",
    "encode_handshake",
    "decode_hello",
    "decode_reply",
    "decode_proof",
    "proof",
    "secret_bytes",
    "refusal",
    "ConnectionLost",
    "ConnectFailed",
    "TcpStats",
    "TcpLimits",
    "TcpTransport",
]

MAGIC: Final = "casty/1"
"""The protocol name and version a ``Hello`` must carry."""


HANDSHAKE_MAX: Final = 1024
"""The largest handshake frame (a connection's first, and its second when the cluster has a secret), in bytes."""

NONCE_SIZE: Final = 32
"""The bytes of a handshake nonce (from ``os.urandom``, see the module docstring)."""

_HEADER: Final = struct.Struct(">I")
_HEADER_SIZE: Final = _HEADER.size
_LENGTH_LIMIT: Final = 2**32 - 1
_READ_CHUNK: Final = 256 * 1024
_WRITE_BATCH: Final = 256 * 1024
_CLOSE_GRACE: Final = 1.0

log = logging.getLogger("casty.tcp")


# --- sans-I/O framing ----------------------------------------------------------------------


class FrameError(CastyError, ValueError):
    """A byte stream that breaks the framing or the handshake.

    ``reason`` says what was wrong. ``frames`` holds the whole frames that the failing
    ``feed`` call decoded before the bad one, so a caller can still deliver them.
    """

    def __init__(self, reason: str, frames: list[bytes] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.frames: list[bytes] = frames if frames is not None else []


def encode_frame(payload: bytes, max_frame: int = MAX_FRAME) -> bytes:
    """``payload`` with its 4-byte big-endian length prefix; ``FrameError`` if longer than ``max_frame``."""
    if len(payload) > max_frame:
        raise FrameError(f"frame of {len(payload)} bytes exceeds the {max_frame}-byte limit")
    return _HEADER.pack(len(payload)) + payload


class FrameDecoder:
    """Length-prefixed frames out of a byte stream, whatever its chunking.

    ``feed(data)`` returns the frames completed by ``data``, in order. A length over the limit
    raises ``FrameError`` as soon as its header is complete. The limit is ``max_frame``, or
    ``first_max`` for the first ``first_frames`` frames (the handshake). After an error the decoder stays
    failed: every later ``feed`` raises again. A stream cannot recover its framing once it
    has lost it.
    """

    __slots__ = ("max_frame", "first_max", "first_frames", "_buffer", "_decoded", "_error")

    def __init__(self, max_frame: int = MAX_FRAME, *, first_max: int | None = None, first_frames: int = 1) -> None:
        if not 0 <= max_frame <= _LENGTH_LIMIT:
            raise ValueError(f"max_frame must be within [0, 2**32 - 1], got {max_frame}")
        if first_max is not None and not 0 <= first_max <= _LENGTH_LIMIT:
            raise ValueError(f"first_max must be within [0, 2**32 - 1], got {first_max}")
        self.max_frame = max_frame
        self.first_max = first_max
        self.first_frames = first_frames
        self._buffer = bytearray()
        self._decoded = 0
        self._error: str | None = None

    @property
    def pending(self) -> int:
        """Bytes received that do not yet make a whole frame."""
        return len(self._buffer)

    @property
    def decoded(self) -> int:
        """How many frames this decoder has returned so far."""
        return self._decoded

    @property
    def error(self) -> str | None:
        """Why the decoder failed, or None while the stream is sound."""
        return self._error

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        if self._error is not None:
            raise FrameError(self._error)
        buffer = self._buffer
        buffer += data
        size = len(buffer)
        frames: list[bytes] = []
        position = 0
        while size - position >= _HEADER_SIZE:
            (length,) = _HEADER.unpack_from(buffer, position)
            first = self._decoded < self.first_frames and self.first_max is not None
            limit = self.first_max if first and self.first_max is not None else self.max_frame
            if length > limit:
                what = "handshake frame" if first else "frame"
                self._error = f"{what} of {length} bytes exceeds the {limit}-byte limit"
                del buffer[:]
                raise FrameError(self._error, frames)
            end = position + _HEADER_SIZE + length
            if end > size:
                break
            frames.append(bytes(buffer[position + _HEADER_SIZE : end]))
            self._decoded += 1
            position = end
        if position:
            del buffer[:position]
        return frames


# --- sans-I/O handshake --------------------------------------------------------------------


class Hello(msgspec.Struct, frozen=True, tag="hello"):
    """The dialer's first frame: protocol ``magic``, its ``cluster`` name, its ``node`` id and, with a secret, its ``nonce``."""

    magic: str
    cluster: str
    node: str
    nonce: bytes = b""


class Challenge(msgspec.Struct, frozen=True, tag="challenge"):
    """The acceptor's answer to a ``Hello`` when the cluster has a secret: its own ``node`` id and ``nonce``,
    and its ``proof`` that it knows the secret (see ``proof``)."""

    node: str
    nonce: bytes
    proof: bytes


class Proof(msgspec.Struct, frozen=True, tag="proof"):
    """The dialer's answer to a ``Challenge``: its ``proof`` that it knows the secret."""

    proof: bytes


class Welcome(msgspec.Struct, frozen=True, tag="welcome"):
    """The acceptor's yes, naming itself: the dialer checks it reached the node it meant."""

    node: str


class Refused(msgspec.Struct, frozen=True, tag="refused"):
    """The acceptor's no, with a reason; the acceptor closes the connection after it."""

    reason: str


_ENCODER: Final = msgspec.msgpack.Encoder()
_HELLO_DECODER: Final = msgspec.msgpack.Decoder(Hello)
_REPLY_DECODER: Final[msgspec.msgpack.Decoder[Welcome | Refused | Challenge]] = msgspec.msgpack.Decoder(
    Welcome | Refused | Challenge
)
_PROOF_DECODER: Final = msgspec.msgpack.Decoder(Proof)

Handshake = Hello | Welcome | Refused | Challenge | Proof


def encode_handshake(message: Handshake) -> bytes:
    """A handshake message as a whole frame (length prefix included)."""
    return encode_frame(_ENCODER.encode(message), HANDSHAKE_MAX)


def decode_hello(frame: bytes) -> Hello:
    """The ``Hello`` in a connection's first frame; ``FrameError`` if it is not one."""
    try:
        return _HELLO_DECODER.decode(frame)
    except msgspec.DecodeError as exc:
        raise FrameError(f"malformed handshake: {exc}") from None


def decode_reply(frame: bytes) -> Welcome | Refused | Challenge:
    """The acceptor's answer to a ``Hello`` (or to a ``Proof``); ``FrameError`` if it is none of those."""
    try:
        return _REPLY_DECODER.decode(frame)
    except msgspec.DecodeError as exc:
        raise FrameError(f"malformed handshake reply: {exc}") from None


def decode_proof(frame: bytes) -> Proof:
    """The dialer's ``Proof`` in a connection's second frame; ``FrameError`` if it is not one."""
    try:
        return _PROOF_DECODER.decode(frame)
    except msgspec.DecodeError as exc:
        raise FrameError(f"malformed handshake proof: {exc}") from None


Role = Literal["acceptor", "dialer"]


def proof(secret: bytes, role: Role, *, cluster: str, dialer: str, acceptor: str, dialer_nonce: bytes, acceptor_nonce: bytes) -> bytes:
    """HMAC-SHA256 under ``secret`` of who proves (``role``), the cluster, both node ids and both nonces.

    Why all of them. Both nonces make a proof good for one connection only (a recorded one
    replays nowhere); both node ids and the cluster name bind it to this pair of nodes (one
    made for a connection to another node, or of another cluster, does not fit); and the
    role makes the acceptor's proof useless as a dialer's: a stranger that dials a node and
    gets its proof over the stranger's nonce cannot send that proof back (reflection), nor
    relay it to another connection, where the role, the ids or the nonces differ. The input
    is one msgpack array, so no two different tuples give the same bytes.
    """
    data = _ENCODER.encode((MAGIC, role, cluster, dialer, acceptor, dialer_nonce, acceptor_nonce))
    return hmac.new(secret, data, hashlib.sha256).digest()


def secret_bytes(secret: bytes | str | None, what: str = "secret") -> bytes | None:
    """A cluster secret as bytes (a ``str`` in UTF-8); ``ValueError`` naming ``what`` if it is empty or neither."""
    if secret is None:
        return None
    if isinstance(secret, str):
        secret = secret.encode("utf-8")
    if not isinstance(secret, bytes):
        raise TypeError(f"{what} must be bytes or str, got {type(secret).__qualname__}")
    if not secret:
        raise ValueError(f"{what} must not be empty")
    return secret


def refusal(hello: Hello, *, cluster: str, node: str, secret: bool = False) -> str | None:
    """Why the node ``node`` of ``cluster`` (with a cluster ``secret`` or not) refuses ``hello``, or None to go on."""
    if hello.magic != MAGIC:
        return f"unsupported protocol {hello.magic!r} (this node speaks {MAGIC!r})"
    if hello.cluster != cluster:
        return f"cluster {hello.cluster!r} is not this node's cluster {cluster!r}"
    if not hello.node:
        return "empty node id"
    if hello.node == node:
        return f"node id {hello.node!r} is this node's own"
    if secret and not hello.nonce:
        return "this cluster needs its secret: the dialer has none"
    if secret and len(hello.nonce) != NONCE_SIZE:
        return f"a nonce of {len(hello.nonce)} bytes (expected {NONCE_SIZE})"
    if not secret and hello.nonce:
        return "the dialer has a cluster secret and this node has none"
    return None


# --- events and counters -------------------------------------------------------------------


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


class _Incoming:
    """One accepted connection: who it is (once the handshake says), the task reading it, the bytes it holds."""

    __slots__ = ("writer", "address", "node", "admitted", "lost_reason", "task", "buffered")

    def __init__(self, writer: asyncio.StreamWriter, address: str) -> None:
        self.writer = writer
        self.address = address
        self.node = ""
        self.admitted = False
        self.lost_reason: str | None = None
        self.task: asyncio.Task[None] | None = None
        self.buffered = 0  # its decoder's partial frame, as counted in TcpTransport._buffered


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
        _count(self.max_connections, "max_connections")
        _count(self.max_handshakes, "max_handshakes")
        if self.handshake_timeout is not None:
            _seconds(self.handshake_timeout, "handshake_timeout")
        _seconds(self.idle_timeout, "idle_timeout")
        _count(self.max_buffered, "max_buffered")


class _Closed(Exception):
    """The peer closed an incoming connection during the handshake."""


def _seconds(value: float, what: str) -> float:
    """``value`` if it is a positive, finite number of seconds; else ``ValueError`` naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise ValueError(f"{what} must be a positive, finite number of seconds, got {value!r}")
    return float(value)


def _count(value: int, what: str, least: int = 1) -> int:
    """``value`` if it is an int of at least ``least``; else ``ValueError`` naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{what} must be an int of at least {least}, got {value!r}")
    return value


def _format_address(address: Any) -> str:
    if isinstance(address, tuple) and len(address) >= 2:
        host, port = address[0], address[1]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return str(address)


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def _shut(writer: asyncio.StreamWriter, *, graceful: bool) -> None:
    """Close a connection: flush and FIN when ``graceful`` (for at most a second), else reset it at once.

    The close itself is started before the first ``await``, so even a cancellation landing
    here cannot leave the socket open.
    """
    transport = writer.transport
    if graceful and not transport.is_closing():
        writer.close()
    else:
        transport.abort()
    try:
        async with asyncio.timeout(_CLOSE_GRACE):
            await writer.wait_closed()
    except TimeoutError:
        transport.abort()
    except asyncio.CancelledError:
        transport.abort()
        raise
    except Exception:
        pass  # the connection ended with an error: it is closed all the same


def _log_crash(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("internal task %s crashed", task.get_name(), exc_info=task.exception())


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
    ) -> None:
        if not node:
            raise ValueError("a node id must not be empty")
        if not 0 <= max_frame <= _LENGTH_LIMIT:
            raise ValueError(f"max_frame must be within [0, 2**32 - 1], got {max_frame}")
        if queue_frames < 1:
            raise ValueError(f"queue_frames must be at least 1, got {queue_frames}")
        if queue_bytes < max_frame:
            raise ValueError(f"queue_bytes ({queue_bytes}) must hold one frame of max_frame ({max_frame}) bytes")
        _seconds(connect_timeout, "connect_timeout")
        _seconds(backoff_min, "backoff_min")
        _seconds(backoff_max, "backoff_max")
        if not backoff_min <= backoff_max:
            raise ValueError(f"need 0 < backoff_min <= backoff_max, got {backoff_min} and {backoff_max}")
        if not isinstance(limits, TcpLimits):
            raise TypeError(f"limits must be a TcpLimits, got {type(limits).__qualname__}")
        if limits.max_buffered < max_frame + _HEADER_SIZE:
            raise ValueError(f"max_buffered ({limits.max_buffered}) must hold one partial frame of max_frame ({max_frame}) bytes")
        self.limits: Final = limits
        self._max_connections = limits.max_connections
        self._max_handshakes = limits.max_handshakes
        self._handshake_timeout = connect_timeout if limits.handshake_timeout is None else limits.handshake_timeout
        self._idle_timeout = limits.idle_timeout
        self._max_buffered = limits.max_buffered
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
        self._incoming: set[_Incoming] = set()
        self._handshaking: dict[_Incoming, None] = {}  # oldest first: the first to go when too many wait
        self._admitted: dict[str, _Incoming] = {}
        self._buffered = 0
        self.stats = TcpStats()
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
        return len(self._incoming)

    @property
    def buffered(self) -> int:
        """Bytes of partial frames held across every incoming connection (at most ``max_buffered``)."""
        return self._buffered

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
            task.add_done_callback(_log_crash)
            peer.task = task
        peer.wakeup.set()

    async def start(self) -> None:
        """Open the listener on ``bind`` (loopback, any free port by default)."""
        if self._closing:
            raise RuntimeError("the transport is closed")
        if self._server is not None:
            raise RuntimeError("the transport is already started")
        self._loop = asyncio.get_running_loop()
        host, port = self._bind
        self._server = await asyncio.start_server(self._on_client, host, port, limit=_READ_CHUNK)
        name = self._server.sockets[0].getsockname()
        self._address = (str(name[0]), int(name[1]))
        log.debug("%s: listening on %s (cluster %r)", self._node, _format_address(self._address), self._cluster)

    async def close(self) -> None:
        """Stop listening, drop every connection and queue, and wait for every task of this transport to end."""
        if self._closing:
            return
        self._closing = True
        server, self._server = self._server, None
        if server is not None:
            server.close()
        tasks = [p.task for p in self._peers.values() if p.task is not None]
        tasks += [c.task for c in self._incoming if c.task is not None]
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
            peer.lost_reason = f"address changed to {_format_address(address)}"
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
            where = _format_address(address)
            try:
                async with asyncio.timeout(self._connect_timeout):
                    reader, writer = await self._dial(peer, address)
            except Exception as exc:
                if isinstance(exc, TimeoutError):
                    reason = f"no connection and handshake within {self._connect_timeout}s"
                elif isinstance(exc, (_DialError, FrameError)):
                    reason = str(exc)
                else:
                    reason = _describe(exc)
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
        """Connect and shake hands; the streams once welcomed, or an exception saying why not."""
        reader, writer = await asyncio.open_connection(address[0], address[1], limit=_READ_CHUNK)
        try:
            secret = self._secret
            nonce = os.urandom(NONCE_SIZE) if secret is not None else b""
            writer.write(encode_handshake(Hello(MAGIC, self._cluster, self._node, nonce)))
            await writer.drain()
            decoder = FrameDecoder(HANDSHAKE_MAX)
            frames: list[bytes] = []

            async def reply() -> Welcome | Challenge:
                while not frames:
                    data = await reader.read(_READ_CHUNK)
                    if not data:
                        raise _DialError("closed by the acceptor during the handshake")
                    frames.extend(decoder.feed(data))
                answer = decode_reply(frames.pop(0))
                if isinstance(answer, Refused):
                    raise _DialError(f"refused: {answer.reason}")
                if answer.node != peer.node:
                    raise _DialError(f"reached node {answer.node!r} instead of {peer.node!r}")
                return answer

            answer = await reply()
            if secret is not None:
                if not isinstance(answer, Challenge):
                    raise _DialError("the acceptor did not prove the cluster secret (it has none)")
                ids = {"cluster": self._cluster, "dialer": self._node, "acceptor": peer.node}
                expected = proof(secret, "acceptor", **ids, dialer_nonce=nonce, acceptor_nonce=answer.nonce)
                if not hmac.compare_digest(answer.proof, expected):
                    raise _DialError("the acceptor's proof of the cluster secret is wrong")
                writer.write(encode_handshake(Proof(proof(secret, "dialer", **ids, dialer_nonce=nonce, acceptor_nonce=answer.nonce))))
                await writer.drain()
                answer = await reply()
            if isinstance(answer, Challenge):
                raise _DialError("the acceptor asks for a cluster secret and this node has none" if secret is None else "a second challenge")
            if frames or decoder.pending:
                raise _DialError("unexpected data after the welcome")
        except BaseException:
            await _shut(writer, graceful=False)
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
            return peer.lost_reason or f"write failed: {_describe(exc)}"
        finally:
            watcher.cancel()
            await _shut(writer, graceful=graceful and not self._closing)
            await asyncio.wait([watcher])

    async def _watch(self, reader: asyncio.StreamReader) -> str:
        """Read an outgoing connection, where nothing should come after the welcome; return how it ended."""
        try:
            data = await reader.read(_READ_CHUNK)
        except OSError as exc:
            return f"connection error: {_describe(exc)}"
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
                writer.write(_HEADER.pack(len(frame)))
                writer.write(frame)
            else:
                batch += _HEADER.pack(len(frame))
                batch += frame
        if batch:
            writer.write(batch)
        self.stats.sent += count

    # --- incoming -------------------------------------------------------------------------

    def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """The listener's callback (synchronous, so every connection is tracked from its first moment).

        The caps act here, before a task or a buffer exists for the connection: over
        ``max_connections`` the new one is closed at once; over ``max_handshakes`` the oldest
        connection still in its handshake is closed instead, so that strangers holding
        silent sockets cannot keep a real peer (whose handshake takes one round trip) out.
        """
        loop = self._loop
        if self._closing or loop is None:
            writer.transport.abort()
            return
        address = _format_address(writer.get_extra_info("peername"))
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
        conn = _Incoming(writer, address)
        task = loop.create_task(self._serve(conn, reader, writer), name=f"casty.tcp {self._node}<-{conn.address}")
        task.add_done_callback(_log_crash)
        conn.task = task
        self._incoming.add(conn)
        self._handshaking[conn] = None

    async def _handshake_frame(self, conn: _Incoming, reader: asyncio.StreamReader, decoder: FrameDecoder) -> list[bytes]:
        """Read until ``decoder`` gives at least one whole frame (they are handshake-sized); ``_Closed`` at end of stream."""
        frames: list[bytes] = []
        while not frames:
            data = await reader.read(_READ_CHUNK)
            if not data:
                raise _Closed
            frames = decoder.feed(data)
            self._hold(conn, decoder.pending)
        return frames

    def _hold(self, conn: _Incoming, pending: int) -> None:
        """Count ``conn``'s partial frame in the global bound; ``FrameError`` if it takes the total past ``max_buffered``."""
        self._buffered += pending - conn.buffered
        conn.buffered = pending
        if pending and self._buffered > self._max_buffered:
            total = self._buffered
            self.stats.over_buffered += 1
            raise FrameError(f"{total} bytes buffered across connections, over max_buffered {self._max_buffered}")

    async def _authenticate(
        self, conn: _Incoming, hello: Hello, frames: list[bytes], reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
        decoder: FrameDecoder,
    ) -> str | None:
        """With a cluster secret: challenge the dialer and check its proof; why it is refused, or None.

        Nothing may come between the ``Hello`` and the ``Proof``, nor after the ``Proof``
        before the ``Welcome`` (an honest dialer waits for each answer), so no frame of an
        unproven peer is ever read past its handshake, let alone handed to the handler.
        """
        secret = self._secret
        assert secret is not None
        if len(frames) > 1 or decoder.pending:
            raise FrameError("data after the hello, before the challenge")
        nonce = os.urandom(NONCE_SIZE)
        ids = {"cluster": self._cluster, "dialer": hello.node, "acceptor": self._node}
        mine = proof(secret, "acceptor", **ids, dialer_nonce=hello.nonce, acceptor_nonce=nonce)
        writer.write(encode_handshake(Challenge(self._node, nonce, mine)))
        frames = await self._handshake_frame(conn, reader, decoder)
        theirs = decode_proof(frames[0])
        if len(frames) > 1 or decoder.pending:
            raise FrameError("data after the proof, before the welcome")
        expected = proof(secret, "dialer", **ids, dialer_nonce=hello.nonce, acceptor_nonce=nonce)
        if not hmac.compare_digest(theirs.proof, expected):
            return "wrong proof of the cluster secret"
        return None

    async def _serve(self, conn: _Incoming, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One incoming connection: the handshake, then every frame to the handler, until it ends or idles."""
        reason = "closed by the peer"
        level = logging.INFO
        graceful = True
        loop = asyncio.get_running_loop()
        secret = self._secret
        try:
            decoder = FrameDecoder(self._max_frame, first_max=HANDSHAKE_MAX, first_frames=2 if secret is not None else 1)
            async with asyncio.timeout(self._handshake_timeout):
                frames = await self._handshake_frame(conn, reader, decoder)
                hello = decode_hello(frames[0])
                conn.node = hello.node
                why = refusal(hello, cluster=self._cluster, node=self._node, secret=secret is not None)
                if why is None and secret is not None:
                    why = await self._authenticate(conn, hello, frames, reader, writer, decoder)
                    frames = []
                else:
                    frames = frames[1:]
            self._handshaking.pop(conn, None)
            if why is not None:
                writer.write(encode_handshake(Refused(why)))
                self.stats.refused += 1
                reason, level = f"refused: {why}", logging.WARNING
                return
            writer.write(encode_handshake(Welcome(self._node)))
            self._admit(conn)
            for frame in frames:
                self._deliver(conn.node, frame)
            idle = self._idle_timeout
            async with asyncio.timeout(idle) as quiet:
                while True:
                    data = await reader.read(_READ_CHUNK)
                    if not data:
                        reason = conn.lost_reason or "closed by the peer"
                        return
                    quiet.reschedule(loop.time() + idle)
                    frames = decoder.feed(data)
                    for frame in frames:
                        self._deliver(conn.node, frame)
                    self._hold(conn, decoder.pending)
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
            if conn.admitted:
                for frame in exc.frames:
                    self._deliver(conn.node, frame)
            self.stats.protocol_errors += 1
            reason, level, graceful = f"protocol error: {exc.reason}", logging.WARNING, False
        except OSError as exc:
            reason, graceful = conn.lost_reason or f"connection error: {_describe(exc)}", False
        finally:
            self._incoming.discard(conn)
            self._handshaking.pop(conn, None)
            self._buffered -= conn.buffered
            conn.buffered = 0
            if self._admitted.get(conn.node) is conn:
                del self._admitted[conn.node]
            if not self._closing:
                if conn.admitted:
                    self.stats.connections_lost += 1
                who = conn.node or "an unidentified peer"
                log.log(level, "%s: connection from %s at %s closed: %s", self._node, who, conn.address, reason)
                self._emit(ConnectionLost(conn.node, reason, "in", conn.address))
            await _shut(writer, graceful=graceful and not self._closing)

    def _admit(self, conn: _Incoming) -> None:
        conn.admitted = True
        self.stats.accepts += 1
        older = self._admitted.get(conn.node)
        self._admitted[conn.node] = conn
        if older is not None:
            older.lost_reason = "superseded by a newer connection from the same node"
            older.writer.transport.abort()

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
