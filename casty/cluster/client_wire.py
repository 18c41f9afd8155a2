"""The frames between a ``ClusterClient`` and a node's ``Gateway``, and how they are told apart from the cluster's.

Frames. Client frames ride on the node's ``TcpTransport`` beside the cluster's own. They
are ``Wire`` frames (channel ``"client"``) preceded by one marker byte, ``0xC1``, a byte
msgpack never uses: no cluster frame (a msgpack array) can start with it, so the node's
transport tells the two apart from the first byte (``casty.cluster.node.AddressedTransport``)
and the cluster's dispatcher never sees a client frame.

- ``Call(request, actor, key, message, fields, ask, timeout)``: run message class
  ``message`` (its ``__qualname__``, or ``module:qualname`` when two classes of the type's
  union share a qualname) built from ``fields`` (plain msgpack values: refs as
  ``["@e", actor, key]``) on ``actor[key]``. An ask waits at most ``timeout`` seconds for
  the reply; a tell is answered at once, once the gateway has queued it (not delivered:
  a tell is at most once, as everywhere in casty).
- ``Where(request, actor, key)``: the gateway's view of the key's owner and replicas.
- ``Members(request)``: the gateway's view of the membership.
- ``Result(request, value, error, reason)``: ``value`` as plain data (dataclasses become
  maps, refs lists), or ``error``, the exception's class name, and ``reason``, its text.

Why a module of its own: both ends speak these frames, the gateway on the node
(``casty.cluster.gateway``) and the client outside the cluster (``casty.cluster.client``),
and the node's transport reads the marker (``casty.cluster.node.AddressedTransport``);
none of them needs the others' code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from ..protocol.wire import Wire, WireError

__all__ = [
    "MARK",
    "CLIENT_CHANNEL",
    "MAX_TIMEOUT",
    "Call",
    "Where",
    "Members",
    "Result",
    "CLIENT_FRAMES",
    "CLIENT_WIRE",
    "encode_client_frame",
    "decode_client_frame",
    "is_client_frame",
]

MARK: Final = b"\xc1"
"""The first byte of every client frame: msgpack never uses 0xC1, so no cluster frame starts with it."""

CLIENT_CHANNEL: Final = "client"
MAX_TIMEOUT: Final = 3600.0
"""The longest ask a client may ask a gateway to wait for (seconds)."""


@dataclass(frozen=True, slots=True)
class Call:
    """Build message class ``message`` from ``fields`` and ask (or tell) it to ``actor[key]``."""

    request: int
    actor: str
    key: str
    message: str
    fields: dict[str, Any] = field(default_factory=dict)
    ask: bool = True
    timeout: float = 10.0


@dataclass(frozen=True, slots=True)
class Where:
    """The gateway's view of ``actor[key]``'s owner and replicas."""

    request: int
    actor: str
    key: str


@dataclass(frozen=True, slots=True)
class Members:
    """The gateway's view of the membership."""

    request: int


@dataclass(frozen=True, slots=True)
class Result:
    """The answer to request ``request``: ``value`` (plain data), or ``error`` (a class name) and ``reason``."""

    request: int
    value: Any = None
    error: str | None = None
    reason: str = ""


CLIENT_FRAMES: Final[tuple[type, ...]] = (Call, Where, Members, Result)
CLIENT_WIRE: Final = Wire(CLIENT_FRAMES, tags={Call: "c.call", Where: "c.where", Members: "c.members", Result: "c.result"})


def encode_client_frame(frame: object) -> bytes:
    return MARK + CLIENT_WIRE.encode(CLIENT_CHANNEL, frame)


def is_client_frame(data: bytes) -> bool:
    return data[:1] == MARK


def decode_client_frame(data: bytes) -> object:
    """The frame in ``data``; ``WireError`` if it is not a client frame."""
    if not is_client_frame(data):
        raise WireError("not a client frame (no 0xC1 marker)", reason="garbage")
    envelope = CLIENT_WIRE.decode(memoryview(data)[1:])
    if envelope.channel != CLIENT_CHANNEL:
        raise WireError(f"client frame on channel {envelope.channel!r}", reason="channel", channel=envelope.channel)
    return envelope.frame
