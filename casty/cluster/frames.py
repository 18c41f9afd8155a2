"""Facts about single cluster frames on a real node: ``net.sent`` and ``net.delivered``.

The simulated network records every frame it carries (``sim/network.py``); a real node can
do the same when asked (``python -m casty node --facts net.sent,net.delivered``), so the
space-time diagram and the Perfetto flows draw a real TCP run too. A real sender cannot know
when its frame will arrive, so both ends record ``crc``, the CRC-32 of the frame's bytes:
the receiver's fact pairs with the sender's by ``(src, dst, crc)`` (``sim.messages``). The
tag (``Heartbeat``, ``Prepare``, ``Write``, ...) is read from the envelope's header only
(the cluster wire layout ``[version, channel, tag, body]``), never the body.

Building these costs a CRC and a header decode per frame, so the node asks for them only
when one of the two kinds is among its facts; otherwise nothing here runs.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import ClassVar

import msgspec

from ..observer import Event

__all__ = ["FrameSent", "FrameReceived", "frame_tag", "FRAME_FACTS"]

FRAME_FACTS = frozenset({"net.sent", "net.delivered"})

_HEADER = msgspec.msgpack.Decoder(tuple[int, str, str, msgspec.Raw])


def frame_tag(frame: bytes) -> str | None:
    """The frame's tag from its header, or None for bytes of another shape."""
    try:
        return _HEADER.decode(frame)[2]
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


@dataclass(frozen=True, slots=True)
class FrameSent(Event):
    """This node handed a cluster frame for ``dst`` to its transport (it may still be lost on the way)."""

    kind: ClassVar[str] = "net.sent"
    dst: str
    size: int
    frame: str | None
    crc: int

    @classmethod
    def of(cls, dst: str, data: bytes) -> FrameSent:
        return cls(dst, len(data), frame_tag(data), zlib.crc32(data))


@dataclass(frozen=True, slots=True)
class FrameReceived(Event):
    """A cluster frame from ``src`` arrived at this node (handed to its dispatcher)."""

    kind: ClassVar[str] = "net.delivered"
    src: str
    size: int
    frame: str | None
    crc: int

    @classmethod
    def of(cls, src: str, data: bytes) -> FrameReceived:
        return cls(src, len(data), frame_tag(data), zlib.crc32(data))
