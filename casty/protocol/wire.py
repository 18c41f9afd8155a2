"""The cluster's frame codec: protocol frames to bytes and back, for one shared transport.

Every frame a protocol core emits (``Send(to, frame)``) crosses the transport as bytes,
in the simulator as on TCP: a frame that cannot cross a real network cannot cross the
simulated one. ``Wire`` is the registry of the frame classes a node speaks (the cores'
``FRAMES`` tuples, listed explicitly), and the only thing that turns bytes into objects.

Wire format (msgpack, via msgspec), one array per frame::

    [version, channel, tag, body]

- ``version``: ``WIRE_VERSION`` (2). A node refuses any other, with a ``WireError``.
- ``channel``: which core of the node the frame is for (``"m"`` membership, ``"r"``
  replication, later routing, handoff, claims): several cores share one transport, and
  one ``Dispatcher`` per transport (see ``casty.cluster.driver``) routes by channel.
- ``tag``: which frame class, a short stable name per class: the class ``__qualname__``
  unless the registry is given another (``Wire(frames, tags={Ack: "r.ack"})``). Two
  registered classes may not share a tag; tags are checked when the ``Wire`` is built.
- ``body``: the frame's fields as a msgpack map (field name -> value), as msgspec encodes
  a dataclass. Maps cost a few bytes per field but let a newer node add a field with a
  default without breaking an older one (unknown fields are ignored when decoding). The
  frames of every write (``Write``, ``Ack`` and their runs ``Writes``, ``Acks``) are the
  exception: ``array_like`` msgspec Structs, their fields positional, for size and speed; a
  field added to one of them is a new wire version. Version 2 is the one where they became
  arrays.

Decoding is safe by construction: the tag is looked up in the registry, never in the
import system (no ``importlib``, no pickle), and the body is decoded by a msgspec decoder
typed with the registered class, so every field is type-checked (``NamedTuple`` fields such
as ``Epoch`` and ``Stamp`` come back as those NamedTuples; tuples as tuples, bytes as bytes).
All typed decoders are built when the ``Wire`` is built, so decoding resolves no annotation
either. Anything else (truncated or random bytes, another version, an unknown tag, a field
of the wrong type) raises ``WireError`` saying what was wrong, with a short ``reason``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from ..errors import CastyError

__all__ = ["WIRE_VERSION", "MAX_CHANNEL", "Envelope", "Wire", "WireError", "check_channel"]

WIRE_VERSION: Final = 2
"""The version of the envelope layout; a node refuses frames of any other version."""

MAX_CHANNEL: Final = 32
"""The longest channel name allowed (channels are short names: "m", "r", ...)."""

_Header = tuple[int, str, str, msgspec.Raw]


class WireError(CastyError, ValueError):
    """Bytes that are not a frame this node can decode, or a frame it cannot encode.

    ``reason`` is one of ``"garbage"`` (not a frame envelope at all), ``"version"``,
    ``"channel"``, ``"tag"`` (no registered class has it), ``"body"`` (fields that do not
    fit the class) or ``"encode"`` (an unregistered class or unencodable fields).
    """

    def __init__(self, message: str, *, reason: str, channel: str | None = None, tag: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.channel = channel
        self.tag = tag


@dataclass(frozen=True, slots=True)
class Envelope:
    """A decoded frame and the channel (the core) it is addressed to."""

    channel: str
    frame: Any


def _check_frame_class(cls: object) -> type:
    if not isinstance(cls, type):
        raise TypeError(f"a frame class is a class, got {cls!r}")
    if dataclasses.is_dataclass(cls):
        params = getattr(cls, "__dataclass_params__", None)
        if params is not None and not params.frozen:
            raise TypeError(f"frame class {cls.__qualname__} must be a frozen dataclass")
        return cls
    if issubclass(cls, msgspec.Struct):
        return cls
    raise TypeError(f"frame class {cls.__qualname__} must be a frozen dataclass or a msgspec.Struct")


def check_channel(channel: object) -> str:
    """``channel`` if it is a valid channel name, else ``WireError``."""
    if not isinstance(channel, str) or not channel or len(channel) > MAX_CHANNEL:
        raise WireError(
            f"a channel is a non-empty str of at most {MAX_CHANNEL} characters, got {channel!r}",
            reason="channel",
        )
    return channel


class Wire:
    """The frame codec of a node: encodes frames of the registered classes, decodes only those."""

    __slots__ = ("_tags", "_classes", "_decoders", "_encoder", "_header", "_channels")

    def __init__(self, frames: Iterable[type], *, tags: Mapping[type, str] | None = None) -> None:
        """Register ``frames`` (e.g. ``(*membership.FRAMES, *replication.FRAMES)``), tagged by ``__qualname__``
        unless ``tags`` names another tag for a class. A class listed twice counts once; two classes
        with one tag are refused (``ValueError``): give one of them an explicit tag."""
        overrides = dict(tags or {})
        self._tags: dict[type, str] = {}
        self._classes: dict[str, type] = {}
        for raw in frames:
            cls = _check_frame_class(raw)
            if cls in self._tags:
                continue
            tag = overrides.pop(cls, cls.__qualname__)
            if not isinstance(tag, str) or not tag:
                raise ValueError(f"the tag of {cls.__qualname__} must be a non-empty str, got {tag!r}")
            other = self._classes.get(tag)
            if other is not None:
                raise ValueError(
                    f"frame classes {other.__module__}.{other.__qualname__} and {cls.__module__}.{cls.__qualname__} "
                    f"both have the tag {tag!r}: give one of them another with tags={{cls: 'tag'}}"
                )
            self._tags[cls] = tag
            self._classes[tag] = cls
        if overrides:
            names = ", ".join(sorted(c.__qualname__ for c in overrides))
            raise ValueError(f"tags given for classes that are not registered frames: {names}")
        # Every typed decoder now: decoding then never resolves an annotation (nor imports anything).
        self._decoders: dict[str, msgspec.msgpack.Decoder[Any]] = {
            tag: msgspec.msgpack.Decoder(cls) for tag, cls in self._classes.items()
        }
        self._encoder = msgspec.msgpack.Encoder()
        self._header: msgspec.msgpack.Decoder[_Header] = msgspec.msgpack.Decoder(_Header)
        self._channels: set[str] = set()  # channels already checked by encode (a node uses two or three)

    # --- registry ----------------------------------------------------------------------

    @property
    def tags(self) -> dict[str, type]:
        """Tag -> class, in registration order (a copy)."""
        return dict(self._classes)

    def tag(self, cls: type) -> str:
        """The tag of a registered frame class (``KeyError`` if it is not registered)."""
        try:
            return self._tags[cls]
        except KeyError:
            raise KeyError(f"{cls.__qualname__} is not a registered frame class") from None

    def knows(self, frame_or_class: object) -> bool:
        cls = frame_or_class if isinstance(frame_or_class, type) else type(frame_or_class)
        return cls in self._tags

    def require(self, frames: Iterable[type], *, who: str = "this core") -> None:
        """Raise ``ValueError`` unless every class of ``frames`` is registered (checked when a core is wired)."""
        missing = [cls.__qualname__ for cls in frames if cls not in self._tags]
        if missing:
            raise ValueError(f"the Wire does not register the frames of {who}: {', '.join(missing)}")

    # --- codec -------------------------------------------------------------------------

    def encode(self, channel: str, frame: object) -> bytes:
        """``[version, channel, tag, body]`` as msgpack bytes; ``WireError`` for an unregistered class or bad fields."""
        if type(channel) is not str or channel not in self._channels:  # checked once per channel: encode runs per frame
            self._channels.add(check_channel(channel))
        tag = self._tags.get(type(frame))
        if tag is None:
            raise WireError(
                f"cannot encode a {type(frame).__qualname__} on channel {channel!r}: not a registered frame class",
                reason="encode",
                channel=channel,
            )
        try:
            return self._encoder.encode((WIRE_VERSION, channel, tag, frame))
        except (TypeError, ValueError, OverflowError, msgspec.EncodeError, RecursionError) as exc:
            raise WireError(
                f"cannot encode {tag!r} frame on channel {channel!r}: {exc}", reason="encode", channel=channel, tag=tag
            ) from exc

    def decode(self, data: bytes | bytearray | memoryview) -> Envelope:
        """The channel and frame encoded in ``data``; ``WireError`` (never anything else) if it is not one."""
        try:
            version, channel, tag, body = self._header.decode(data)
        except (msgspec.DecodeError, TypeError, RecursionError) as exc:  # ValidationError is a DecodeError; too deep to skip
            raise WireError(
                f"not a cluster frame ({len(data)} bytes; expected msgpack [version, channel, tag, body]): {exc}",
                reason="garbage",
            ) from None
        if version != WIRE_VERSION:
            raise WireError(
                f"frame of wire version {version} on channel {channel!r}: this node speaks version {WIRE_VERSION}",
                reason="version",
                channel=channel,
                tag=tag,
            )
        if not channel or len(channel) > MAX_CHANNEL:
            raise WireError(f"frame with an invalid channel {channel[:MAX_CHANNEL + 8]!r}", reason="channel", tag=tag)
        decoder = self._decoders.get(tag)
        if decoder is None:
            known = ", ".join(self._classes) or "none"
            raise WireError(
                f"unknown frame tag {tag[:64]!r} on channel {channel!r} (registered: {known})",
                reason="tag",
                channel=channel,
                tag=tag,
            )
        try:
            frame = decoder.decode(body)
        except Exception as exc:  # a ValidationError, or whatever a frame's __post_init__ raises
            raise WireError(
                f"bad {tag!r} frame on channel {channel!r}: {exc}", reason="body", channel=channel, tag=tag
            ) from None
        return Envelope(channel, frame)

    def __repr__(self) -> str:
        return f"<Wire v{WIRE_VERSION} {', '.join(self._classes)}>"
