"""The codec: typed, safe bytes for messages, state and pages (msgpack via msgspec).

Safety comes from the decoder only ever building types it was given: a message is
encoded as ``[tag, fields]`` where the tag names a dataclass, and decoding looks the tag up
in the receiving actor's own message union, never in the import system. Refs are encoded
as plain lists and rebound to the decoding system. There is no pickle anywhere.

Everything that could cross a network is encoded where it enters the runtime (``tell``,
``ask``, ``state.set``, ``schedule``), so a value that cannot travel fails there, with a
``SchemaError`` naming it, and not later on another node.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Union, get_args, get_origin

import msgspec

from .errors import SchemaError
from .ref import EntityRef, NobodyRef, Ref, ReplyRef

__all__ = ["Codec", "MessageSchema", "type_tag", "union_members"]

RefFactory = Callable[[list[Any]], Ref[Any]]


def type_tag(cls: type) -> str:
    """The stable name of a class on the wire: ``module:qualname``."""
    return f"{cls.__module__}:{cls.__qualname__}"


def union_members(annotation: Any) -> tuple[type, ...]:
    """The classes of a message annotation: ``A | B``, ``Union[A, B]`` or a single class."""
    origin = get_origin(annotation)
    if origin is Union or origin is types.UnionType:
        out: list[type] = []
        for arg in get_args(annotation):
            out.extend(union_members(arg))
        return tuple(out)
    if origin is not None and isinstance(origin, type):
        return (origin,)
    if isinstance(annotation, type):
        return (annotation,)
    raise SchemaError(f"message type {annotation!r} is not a class or a union of classes")


class MessageSchema:
    """The message union an actor type accepts, with what it takes to check and decode it."""

    __slots__ = ("name", "classes", "by_tag")

    def __init__(self, name: str, classes: tuple[type, ...]) -> None:
        for cls in classes:
            if not dataclasses.is_dataclass(cls):
                raise SchemaError(f"{name}: message type {cls.__qualname__} must be a frozen dataclass")
            params = getattr(cls, "__dataclass_params__", None)
            if params is not None and not params.frozen:
                raise SchemaError(f"{name}: message type {cls.__qualname__} must be frozen (@dataclass(frozen=True))")
        self.name = name
        self.classes = classes
        self.by_tag: dict[str, type] = {type_tag(cls): cls for cls in classes}

    def accepts(self, message: object) -> bool:
        return isinstance(message, self.classes)

    def check(self, message: object) -> None:
        """Raise ``SchemaError`` unless ``message`` is one of the union's classes."""
        if not isinstance(message, self.classes):
            names = " | ".join(cls.__qualname__ for cls in self.classes)
            raise SchemaError(f"{self.name} takes {names}, not {type(message).__qualname__}: {message!r}")

    def same_as(self, other: MessageSchema) -> bool:
        return set(self.by_tag) == set(other.by_tag)

    def decoder(self, tag: str, dec_hook: Callable[[type, Any], Any]) -> msgspec.msgpack.Decoder[Any]:
        """A new decoder of ``tag`` with ``dec_hook``. Not cached here: the hook binds decoded refs to one
        system, and a schema is shared by every system of the process (``Codec`` caches its own)."""
        cls = self.by_tag.get(tag)
        if cls is None:
            raise SchemaError(f"{self.name} does not take messages tagged {tag!r}")
        return msgspec.msgpack.Decoder(cls, dec_hook=dec_hook)


_Envelope = tuple[str, msgspec.Raw]

_NOBODY_WIRE = ("@n",)
"""NOBODY on the wire (msgpack encodes a tuple as the same array as ``["@n"]``)."""


class Codec:
    """Encodes and decodes messages, state values and pages for one actor system."""

    def __init__(self, make_ref: RefFactory) -> None:
        self._make_ref = make_ref
        self._encoder = msgspec.msgpack.Encoder(enc_hook=self._enc_hook)
        self._envelope = msgspec.msgpack.Decoder(_Envelope)
        self._value_decoders: dict[Any, msgspec.msgpack.Decoder[Any]] = {}
        # Per codec, not per schema: the decoders' hook binds refs to this codec's system.
        self._message_decoders: dict[tuple[MessageSchema, str], msgspec.msgpack.Decoder[Any]] = {}
        self._pages = msgspec.msgpack.Decoder(dict[str, bytes])
        self._tags: dict[type, str] = {}  # type_tag of each message class met: formatting it is most of a small encode

    # --- refs ------------------------------------------------------------------------

    @staticmethod
    def _enc_hook(obj: Any) -> Any:
        # Exact types first: every ask encodes a ref, and one type test beats three isinstance calls.
        cls = type(obj)
        if cls is NobodyRef:
            return _NOBODY_WIRE
        if cls is ReplyRef:
            return ["@r", obj.node, obj.request]
        if isinstance(obj, EntityRef):
            return ["@e", obj.actor, obj.key]
        if isinstance(obj, ReplyRef):
            return ["@r", obj.node, obj.request]
        if isinstance(obj, NobodyRef):
            return ["@n"]
        raise TypeError(f"cannot encode a {type(obj).__qualname__}: {obj!r}")

    def _dec_hook(self, cls: type, obj: Any) -> Any:
        target = get_origin(cls) or cls
        if isinstance(target, type) and issubclass(target, Ref):
            if not isinstance(obj, list) or not obj:
                raise ValueError(f"expected an encoded ref, got {obj!r}")
            return self._make_ref(obj)
        raise TypeError(f"cannot decode into {cls!r}")

    def ref_from_wire(self, obj: list[Any]) -> Ref[Any]:
        return self._make_ref(obj)

    # --- messages --------------------------------------------------------------------

    def encode_message(self, message: object, schema: MessageSchema | None = None) -> bytes:
        """``[tag, fields]``; ``SchemaError`` naming the message if it cannot be encoded."""
        cls = type(message)
        tag = self._tags.get(cls)
        if tag is None:
            tag = self._tags[cls] = type_tag(cls)
        try:
            return self._encoder.encode((tag, message))
        except (TypeError, msgspec.EncodeError, OverflowError) as exc:
            where = f" for {schema.name}" if schema is not None else ""
            raise SchemaError(f"cannot encode {type(message).__qualname__}{where}: {exc}") from exc

    def decode_message(self, data: bytes, schema: MessageSchema) -> Any:
        """Build a message only if its tag is one of ``schema``'s classes."""
        try:
            tag, raw = self._envelope.decode(data)
            dec = self._message_decoders.get((schema, tag))
            if dec is None:
                dec = self._message_decoders[(schema, tag)] = schema.decoder(tag, self._dec_hook)
            return dec.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise SchemaError(f"{schema.name}: cannot decode message: {exc}") from exc

    # --- values (state pages) --------------------------------------------------------

    def encode_value(self, value: Any, what: str = "value", of: str | None = None) -> bytes:
        """Encode ``value``; the ``SchemaError`` names it as ``what`` (``what of of``: a state write
        passes its actor's name apart, so that the label is only formatted when encoding fails)."""
        try:
            return self._encoder.encode(value)
        except (TypeError, msgspec.EncodeError, OverflowError) as exc:
            label = what if of is None else f"{what} of {of}"
            raise SchemaError(f"cannot encode {label} {type(value).__qualname__}: {exc}") from exc

    def decode_value(self, data: bytes, annotation: Any, what: str = "value") -> Any:
        """``data`` decoded into ``annotation``; ``SchemaError`` naming ``what`` if it does not fit, or if
        ``annotation`` is a type msgspec cannot decode into (a union of two dataclasses, a plain class)."""
        dec = self._value_decoders.get(annotation)
        if dec is None:
            try:
                dec = msgspec.msgpack.Decoder(annotation, dec_hook=self._dec_hook)
            except TypeError as exc:
                raise SchemaError(f"cannot decode {what} as {annotation!r}: not a type the codec can build: {exc}") from exc
            self._value_decoders[annotation] = dec
        try:
            return dec.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise SchemaError(f"cannot decode {what} as {annotation!r}: {exc}") from exc

    # --- page sets -------------------------------------------------------------------

    def encode_pages(self, pages: Mapping[str, bytes]) -> bytes:
        # Sorted so that equal page sets give equal bytes whatever the write order.
        return self._encoder.encode({name: pages[name] for name in sorted(pages)})

    def decode_pages(self, data: bytes) -> dict[str, bytes]:
        try:
            return self._pages.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise SchemaError(f"cannot decode a page set: {exc}") from exc


def resolve_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """``typing.get_type_hints`` with a clear error when an annotation cannot be resolved."""
    try:
        return typing.get_type_hints(fn)
    except Exception as exc:  # NameError, TypeError: unresolvable forward references
        raise SchemaError(f"cannot resolve the annotations of {fn.__qualname__}: {exc}") from exc

