"""TCP framing and the connection handshake, sans I/O: bytes in, frames and bytes to write out.

The asyncio transport (``casty.cluster.tcp``) reads and writes the sockets, keeps the
timeouts and the connection caps; everything about what the bytes mean is here, with no
loop, no socket and no clock, so the unit tests (``tests/test_framing.py``) drive it with
plain bytes: partial frames, oversized ones, a stranger's garbage, a wrong proof.

Wire format. Every frame is a 4-byte big-endian length followed by that many bytes. A
length over the receiver's ``max_frame`` (``casty.protocol.limits.MAX_FRAME``, 4 MiB, by
default) is refused from the header alone, before any payload is buffered. A connection
starts with one handshake frame each way: the dialer sends ``Hello(magic, cluster, node)``
(msgpack, via msgspec), the acceptor answers ``Welcome(node)`` or ``HandshakeRefused(reason)`` and
closes. A refusal is given for another cluster name, another protocol ``magic``, an empty
node id or this node's own id (``refusal``). A handshake frame may not exceed
``HANDSHAKE_MAX`` (1 KiB), so a stranger cannot make a node buffer megabytes before saying
who it is.

The cluster secret. With one, the handshake is a mutual challenge: ``Hello`` carries the
dialer's nonce; the acceptor answers ``Challenge(node, nonce, proof)``, the dialer checks
that proof and sends ``Proof(proof)``, and only then does the acceptor welcome it. Each
proof is HMAC-SHA256 over the role, the cluster name, both node ids and both nonces
(``proof``), compared with ``hmac.compare_digest``. A dialer without the secret, with
another one, or that sends anything between its frames of the handshake, is refused before
any of its frames is read; a node with a secret also refuses to talk to one without. The
nonces are given to the cores by their driver (which draws them from the ``Entropy`` port, see
``casty.cluster.tcp``): a core draws nothing itself. The secret authenticates peers; it
does not encrypt or sign the frames that follow.

The two cores, one per end of a connection:

- ``Acceptor``: ``receive(data)`` during the handshake gives a ``Step`` (the bytes to
  write, whether it ended, the refusal if any, the frames that came after it in the same
  chunk); once ``open``, ``feed(data)`` gives the frames, on the hot path, with nothing
  else to build.
- ``Dialer``: ``hello`` is the first frame to write; ``receive(data)`` gives a ``Step``
  until it is welcomed, and raises ``HandshakeError`` saying why if it is not.

Both raise ``FrameError`` (with the whole frames decoded before the bad one) for a byte
stream that breaks the framing, and stay failed after it. An ``Acceptor`` given a
``BufferBudget`` counts its partial frame in it after every chunk (the global bound on
bytes buffered across connections) and raises ``OverBudget`` when it takes the total over;
``release()`` gives its bytes back when the connection ends.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from dataclasses import dataclass
from typing import Final, Literal

import msgspec

from ..errors import CastyError
from .limits import MAX_FRAME

__all__ = [
    "MAGIC",
    "HANDSHAKE_MAX",
    "NONCE_SIZE",
    "HEADER",
    "HEADER_SIZE",
    "LENGTH_LIMIT",
    "FrameError",
    "HandshakeError",
    "OverBudget",
    "FrameDecoder",
    "encode_frame",
    "Hello",
    "Welcome",
    "HandshakeRefused",
    "Challenge",
    "Proof",
    "encode_handshake",
    "decode_hello",
    "decode_reply",
    "decode_proof",
    "proof",
    "secret_bytes",
    "refusal",
    "BufferBudget",
    "Step",
    "Acceptor",
    "Dialer",
]

MAGIC: Final = "casty/1"
"""The protocol name and version a ``Hello`` must carry."""

HANDSHAKE_MAX: Final = 1024
"""The largest handshake frame (a connection's first, and its second when the cluster has a secret), in bytes."""

NONCE_SIZE: Final = 32
"""The bytes of a handshake nonce."""

HEADER: Final = struct.Struct(">I")
"""A frame's length prefix: 4 bytes, big-endian."""

HEADER_SIZE: Final = HEADER.size
LENGTH_LIMIT: Final = 2**32 - 1
"""The largest length a header can say."""


# --- framing -------------------------------------------------------------------------------


class FrameError(CastyError, ValueError):
    """A byte stream that breaks the framing or the handshake.

    ``reason`` says what was wrong. ``frames`` holds the whole frames that the failing
    ``feed`` call decoded before the bad one, so a caller can still deliver them.
    """

    def __init__(self, reason: str, frames: list[bytes] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.frames: list[bytes] = frames if frames is not None else []


class HandshakeError(FrameError):
    """A handshake that did not end in a welcome for the dialer: refused, another node, a wrong or missing proof."""


class OverBudget(FrameError):
    """A connection's partial frame took the bytes buffered across connections past their ``BufferBudget``."""


def encode_frame(payload: bytes, max_frame: int = MAX_FRAME) -> bytes:
    """``payload`` with its 4-byte big-endian length prefix; ``FrameError`` if longer than ``max_frame``."""
    if len(payload) > max_frame:
        raise FrameError(f"frame of {len(payload)} bytes exceeds the {max_frame}-byte limit")
    return HEADER.pack(len(payload)) + payload


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
        if not 0 <= max_frame <= LENGTH_LIMIT:
            raise ValueError(f"max_frame must be within [0, 2**32 - 1], got {max_frame}")
        if first_max is not None and not 0 <= first_max <= LENGTH_LIMIT:
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
        while size - position >= HEADER_SIZE:
            (length,) = HEADER.unpack_from(buffer, position)
            first = self._decoded < self.first_frames and self.first_max is not None
            limit = self.first_max if first and self.first_max is not None else self.max_frame
            if length > limit:
                what = "handshake frame" if first else "frame"
                self._error = f"{what} of {length} bytes exceeds the {limit}-byte limit"
                del buffer[:]
                raise FrameError(self._error, frames)
            end = position + HEADER_SIZE + length
            if end > size:
                break
            frames.append(bytes(buffer[position + HEADER_SIZE : end]))
            self._decoded += 1
            position = end
        if position:
            del buffer[:position]
        return frames


# --- handshake messages --------------------------------------------------------------------


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


class HandshakeRefused(msgspec.Struct, frozen=True, tag="refused"):
    """The acceptor's no, with a reason; the acceptor closes the connection after it.

    A handshake frame (tag ``"refused"`` on the wire), not the public ``casty.errors.Refused``.
    """

    reason: str


_ENCODER: Final = msgspec.msgpack.Encoder()
_HELLO_DECODER: Final = msgspec.msgpack.Decoder(Hello)
_REPLY_DECODER: Final[msgspec.msgpack.Decoder[Welcome | HandshakeRefused | Challenge]] = msgspec.msgpack.Decoder(
    Welcome | HandshakeRefused | Challenge
)
_PROOF_DECODER: Final = msgspec.msgpack.Decoder(Proof)

Handshake = Hello | Welcome | HandshakeRefused | Challenge | Proof


def encode_handshake(message: Handshake) -> bytes:
    """A handshake message as a whole frame (length prefix included)."""
    return encode_frame(_ENCODER.encode(message), HANDSHAKE_MAX)


def decode_hello(frame: bytes) -> Hello:
    """The ``Hello`` in a connection's first frame; ``FrameError`` if it is not one."""
    try:
        return _HELLO_DECODER.decode(frame)
    except msgspec.DecodeError as exc:
        raise FrameError(f"malformed handshake: {exc}") from None


def decode_reply(frame: bytes) -> Welcome | HandshakeRefused | Challenge:
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


QUOTED_MAX = 64  # characters of a stranger's name a refusal quotes: its Refused frame must fit HANDSHAKE_MAX


def _quoted(name: str) -> str:
    """A dialer's name as a refusal quotes it: whole when short, else its first ``QUOTED_MAX`` characters and its length.

    Why cut: the Hello that carried the name fits the 1 KiB handshake limit, but its repr can
    double it (backslashes, quotes), and a Refused frame over the limit would fail the
    acceptor's own write instead of telling the dialer why.
    """
    if len(name) <= QUOTED_MAX:
        return repr(name)
    return f"{name[:QUOTED_MAX]!r}... ({len(name)} characters)"


def refusal(hello: Hello, *, cluster: str, node: str, secret: bool = False) -> str | None:
    """Why the node ``node`` of ``cluster`` (with a cluster ``secret`` or not) refuses ``hello``, or None to go on."""
    if hello.magic != MAGIC:
        return f"unsupported protocol {_quoted(hello.magic)} (this node speaks {MAGIC!r})"
    if hello.cluster != cluster:
        return f"cluster {_quoted(hello.cluster)} is not this node's cluster {cluster!r}"
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


# --- the connection cores ------------------------------------------------------------------


class BufferBudget:
    """Bytes of partial frames held across every incoming connection of a node, against one bound (``limit``).

    Why a shared count: each connection's own bound (``max_frame``) lets one stranger hold
    4 MiB; a thousand of them would hold 4 GiB. Each ``Acceptor`` given the budget counts
    its decoder's partial frame in ``total`` after every chunk, and the chunk that takes the
    total past ``limit`` fails its connection (``OverBudget``) instead of being held.
    """

    __slots__ = ("limit", "total")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0


@dataclass(frozen=True, slots=True)
class Step:
    """What a chunk of handshake bytes asks of the driver.

    ``write``: the handshake frames to send now (possibly none). ``done``: the handshake
    ended (a welcome, or the acceptor's refusal, is in ``write``). ``refused``: the
    acceptor's reason when it refused (the driver sends ``write`` and closes). ``frames``:
    frames that came after the handshake in the same chunk, to deliver once admitted.
    """

    write: bytes = b""
    done: bool = False
    refused: str | None = None
    frames: tuple[bytes, ...] = ()


_WAITING: Final = Step()

AcceptorState = Literal["hello", "proof", "open", "refused", "failed"]


class Acceptor:
    """The accepting end of one connection: the handshake, then the frames, sans I/O.

    ``node`` and ``cluster`` are this node's; ``secret`` (None for none) the cluster's, with
    ``nonce`` this connection's ``NONCE_SIZE`` fresh bytes (unused without a secret).
    ``state`` goes ``hello`` -> (``proof`` with a secret) -> ``open``, or to ``refused`` or
    ``failed``; ``peer`` is the node id the ``Hello`` gave ("" before it).
    """

    __slots__ = ("node", "cluster", "_secret", "_nonce", "_decoder", "_budget", "_held", "state", "peer", "_hello")

    def __init__(
        self, node: str, cluster: str, *, secret: bytes | None = None, nonce: bytes = b"", max_frame: int = MAX_FRAME,
        budget: BufferBudget | None = None,
    ) -> None:
        if secret is not None and len(nonce) != NONCE_SIZE:
            raise ValueError(f"an acceptor with a secret needs a nonce of {NONCE_SIZE} bytes, got {len(nonce)}")
        self.node = node
        self.cluster = cluster
        self._secret = secret
        self._nonce = nonce
        self._decoder = FrameDecoder(max_frame, first_max=HANDSHAKE_MAX, first_frames=2 if secret is not None else 1)
        self._budget = budget
        self._held = 0
        self.state: AcceptorState = "hello"
        self.peer = ""
        self._hello: Hello | None = None

    @property
    def pending(self) -> int:
        """Bytes received that do not yet make a whole frame."""
        return self._decoder.pending

    @property
    def held(self) -> int:
        """The bytes this connection counts in its budget now."""
        return self._held

    @property
    def open(self) -> bool:
        """Whether the peer was welcomed: ``feed`` gives its frames."""
        return self.state == "open"

    def receive(self, data: bytes | bytearray | memoryview) -> Step:
        """Handshake bytes from the dialer: what to write and whether the handshake ended (``FrameError`` if broken)."""
        state = self.state
        if state != "hello" and state != "proof":
            raise RuntimeError(f"the handshake is over (state {state!r}): feed() the frames")
        try:
            frames = self._decoder.feed(data)
            self._account()
            if not frames:
                return _WAITING
            return self._on_hello(frames) if state == "hello" else self._on_proof(frames)
        except FrameError:
            self.state = "failed"
            raise

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """The frames completed by ``data`` from a welcomed peer (``FrameError``, with the frames before the bad one)."""
        if self.state != "open":
            raise RuntimeError(f"no frame before the handshake ends (state {self.state!r})")
        try:
            frames = self._decoder.feed(data)
        except FrameError:
            self.state = "failed"
            raise
        budget = self._budget
        if budget is not None:  # _account, inline: once per chunk read from a welcomed peer (the hot path)
            pending = self._decoder.pending
            budget.total += pending - self._held
            self._held = pending
            if pending and budget.total > budget.limit:
                self.state = "failed"
                raise OverBudget(f"{budget.total} bytes buffered across connections, over max_buffered {budget.limit}", frames)
        return frames

    def release(self) -> None:
        """Give this connection's held bytes back to the budget (the connection ended)."""
        if self._budget is not None:
            self._budget.total -= self._held
        self._held = 0

    def _account(self) -> None:
        budget = self._budget
        if budget is None:
            return
        pending = self._decoder.pending
        budget.total += pending - self._held
        self._held = pending
        if pending and budget.total > budget.limit:
            raise OverBudget(f"{budget.total} bytes buffered across connections, over max_buffered {budget.limit}")

    def _refuse(self, why: str) -> Step:
        self.state = "refused"
        return Step(encode_handshake(HandshakeRefused(why)), done=True, refused=why)

    def _welcome(self, frames: tuple[bytes, ...] = ()) -> Step:
        self.state = "open"
        return Step(encode_handshake(Welcome(self.node)), done=True, frames=frames)

    def _ids(self, hello: Hello) -> dict[str, str]:
        return {"cluster": self.cluster, "dialer": hello.node, "acceptor": self.node}

    def _on_hello(self, frames: list[bytes]) -> Step:
        hello = decode_hello(frames[0])
        self.peer = hello.node
        secret = self._secret
        why = refusal(hello, cluster=self.cluster, node=self.node, secret=secret is not None)
        if why is not None:
            return self._refuse(why)
        if secret is None:
            return self._welcome(tuple(frames[1:]))
        if len(frames) > 1 or self._decoder.pending:
            raise FrameError("data after the hello, before the challenge")
        self._hello = hello
        self.state = "proof"
        mine = proof(secret, "acceptor", **self._ids(hello), dialer_nonce=hello.nonce, acceptor_nonce=self._nonce)
        return Step(encode_handshake(Challenge(self.node, self._nonce, mine)))

    def _on_proof(self, frames: list[bytes]) -> Step:
        theirs = decode_proof(frames[0])
        if len(frames) > 1 or self._decoder.pending:
            raise FrameError("data after the proof, before the welcome")
        hello, secret = self._hello, self._secret
        assert hello is not None and secret is not None  # state "proof" is reached only with both
        expected = proof(secret, "dialer", **self._ids(hello), dialer_nonce=hello.nonce, acceptor_nonce=self._nonce)
        if not hmac.compare_digest(theirs.proof, expected):
            return self._refuse("wrong proof of the cluster secret")
        return self._welcome()


DialerState = Literal["welcome", "open", "failed"]


class Dialer:
    """The dialing end of one connection's handshake, sans I/O: ``hello`` to write first, then ``receive`` until welcomed.

    ``peer`` is the node id this dialer means to reach; ``secret`` and ``nonce`` as for the
    ``Acceptor``. ``HandshakeError`` says why the handshake did not end in a welcome, and
    ``FrameError`` that the acceptor's bytes are not a handshake. After the welcome the
    acceptor sends nothing (connections are one-way), so a byte after it is an error too.
    """

    __slots__ = ("node", "cluster", "peer", "_secret", "_nonce", "_decoder", "_frames", "_challenged", "state")

    def __init__(self, node: str, cluster: str, peer: str, *, secret: bytes | None = None, nonce: bytes = b"") -> None:
        if secret is not None and len(nonce) != NONCE_SIZE:
            raise ValueError(f"a dialer with a secret needs a nonce of {NONCE_SIZE} bytes, got {len(nonce)}")
        self.node = node
        self.cluster = cluster
        self.peer = peer
        self._secret = secret
        self._nonce = nonce if secret is not None else b""
        self._decoder = FrameDecoder(HANDSHAKE_MAX)
        self._frames: list[bytes] = []
        self._challenged = False
        self.state: DialerState = "welcome"

    @property
    def hello(self) -> bytes:
        """The connection's first frame: who this dialer is, and its nonce when the cluster has a secret."""
        return encode_handshake(Hello(MAGIC, self.cluster, self.node, self._nonce))

    @property
    def open(self) -> bool:
        """Whether the acceptor welcomed this dialer."""
        return self.state == "open"

    def receive(self, data: bytes | bytearray | memoryview) -> Step:
        """The acceptor's bytes: what to write (the ``Proof``) and whether it welcomed us; raises why not."""
        if self.state != "welcome":
            raise RuntimeError(f"the handshake is over (state {self.state!r})")
        try:
            return self._receive(data)
        except FrameError:
            self.state = "failed"
            raise

    def _receive(self, data: bytes | bytearray | memoryview) -> Step:
        frames = self._frames
        frames.extend(self._decoder.feed(data))
        write = b""
        secret = self._secret
        while frames:
            answer = decode_reply(frames.pop(0))
            if isinstance(answer, HandshakeRefused):
                raise HandshakeError(f"refused: {answer.reason}")
            if answer.node != self.peer:
                raise HandshakeError(f"reached node {answer.node!r} instead of {self.peer!r}")
            if isinstance(answer, Challenge):
                if secret is None:
                    raise HandshakeError("the acceptor asks for a cluster secret and this node has none")
                if self._challenged:
                    raise HandshakeError("a second challenge")
                self._challenged = True
                ids = {"cluster": self.cluster, "dialer": self.node, "acceptor": self.peer}
                expected = proof(secret, "acceptor", **ids, dialer_nonce=self._nonce, acceptor_nonce=answer.nonce)
                if not hmac.compare_digest(answer.proof, expected):
                    raise HandshakeError("the acceptor's proof of the cluster secret is wrong")
                mine = proof(secret, "dialer", **ids, dialer_nonce=self._nonce, acceptor_nonce=answer.nonce)
                write += encode_handshake(Proof(mine))
                continue
            if secret is not None and not self._challenged:
                raise HandshakeError("the acceptor did not prove the cluster secret (it has none)")
            if frames or self._decoder.pending:
                raise HandshakeError("unexpected data after the welcome")
            self.state = "open"
            return Step(write, done=True)
        return Step(write)
