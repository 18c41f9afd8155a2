"""The codec: typed, safe bytes for messages, state and pages (msgpack via msgspec).

Safety comes from the decoder only ever building types it was given: a message is
encoded as ``[tag, fields]`` where the tag names a dataclass, and decoding looks the tag up
in the receiving actor's own message union, never in the import system. Refs are encoded
as plain lists and rebound to the decoding system. There is no pickle anywhere.

Everything that could cross a network is encoded where it enters the runtime (``tell``,
``ask``, ``state.set``, ``schedule``, a reply), so a value that cannot travel fails there,
with a ``SchemaError`` naming it, and not later on another node. A value that travels but
would not decode into its declared type (a field, a state, an ``Askable[R]`` reply) fails
there too: one runtime, one set of checks, whether the key is local or not. The exact check
is "these bytes decode into that type", which the receiving node runs anyway; the sender
runs a cheaper test first (``fast_check``), which only ever says yes when the decode would
succeed, and falls back to the decode itself for every other case and for the error text.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Union, get_args, get_origin

import msgspec

from ..errors import SchemaError
from .ref import EntityRef, NobodyRef, Ref, ReplyRef, reply_type

__all__ = ["ANYTHING", "DECODE", "FAST_VALUES", "Codec", "MessageSchema", "fast_check", "type_tag", "union_members"]

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



# --- the fast checks -------------------------------------------------------------------

ACTOR_TYPES: dict[str, Any] = {}
"""Every actor type this process defined, by name (``casty._core.actor`` registers them; its ``known_actor`` reads it)."""

NOTHING: Any = object()
"""A fast check's answer for a type with nothing to check (bytes already encoded always decode)."""

DECODE: Any = object()
"""A fast check's answer for a type it cannot vouch for: decode the bytes to know."""

ANYTHING: Any = object()
"""The fast check of ``Any``: any bytes decode into it, so a value that encodes fits."""

_INT_MIN, _INT_END = -(1 << 63), 1 << 64  # what msgpack can hold


def _utf8(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _is_int(v: Any) -> bool:
    return type(v) is int and _INT_MIN <= v < _INT_END


def _is_float(v: Any) -> bool:
    cls = type(v)
    return cls is float or (cls is int and _INT_MIN <= v < _INT_END)


def _is_str(v: Any) -> bool:
    return type(v) is str and (v.isascii() or _utf8(v))


def _is_bool(v: Any) -> bool:
    return type(v) is bool


def _is_bytes(v: Any) -> bool:
    return type(v) is bytes


def _is_none(v: Any) -> bool:
    return v is None


def _is_ref(v: Any) -> bool:
    cls = type(v)
    if cls is ReplyRef or cls is NobodyRef:
        return True
    if cls is not EntityRef:
        return False
    return v.actor in ACTOR_TYPES and _is_str(v.key) and bool(v.key)  # a ref decodes only to a type defined here


_SCALARS: dict[Any, Callable[[Any], bool]] = {
    int: _is_int, float: _is_float, str: _is_str, bool: _is_bool, bytes: _is_bytes, type(None): _is_none, None: _is_none,
}

FAST_VALUES: dict[Any, Any] = {}
"""``fast_check`` per annotation (keyed by the annotation: looked up, never iterated)."""


def fast_check(annotation: Any) -> Any:
    """A test of a value against ``annotation`` that is True only if the value encodes and its bytes
    decode into ``annotation``; ``DECODE`` where no such cheap test is known (containers,
    ``msgspec.Struct``, a dataclass with such a field): then only the decode can tell; ``ANYTHING``
    for ``Any``, where a value fits if it encodes.

    Exact types only (``type(v) is int``): a subclass, a bool for an int, a list for a tuple all
    go to the decode, which decides as the receiving node would.
    """
    try:
        found = FAST_VALUES.get(annotation)
    except TypeError:  # an unhashable annotation
        return DECODE
    if found is None:
        found = FAST_VALUES[annotation] = _compile(annotation)
    return found


def _compile(annotation: Any) -> Any:
    if annotation is Any:
        return ANYTHING
    scalar = _SCALARS.get(annotation) if isinstance(annotation, type) or annotation is None else None
    if scalar is not None:
        return scalar
    origin = get_origin(annotation)
    if origin is Union or origin is types.UnionType:
        parts = [fast_check(arg) for arg in get_args(annotation)]
        if DECODE in parts or ANYTHING in parts:
            return DECODE
        return lambda v: any(part(v) for part in parts)
    target = origin if origin is not None else annotation
    if isinstance(target, type) and issubclass(target, Ref):
        return _is_ref
    if origin is None and isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        fields = dataclass_checks(annotation)
        if fields is DECODE:
            return DECODE
        cls = annotation
        if not fields:
            return lambda v: type(v) is cls
        each = _all_of(fields)
        return lambda v: type(v) is cls and each(v)
    return DECODE


def dataclass_checks(cls: type) -> Any:
    """The fast check of each field of dataclass ``cls`` as ``[(name, check)]``, or ``DECODE`` if a field has none."""
    try:
        hints = typing.get_type_hints(cls)
        msgspec.msgpack.Decoder(cls)  # a type the codec cannot build has no fast check: the decode says why
    except Exception:
        return DECODE
    out: list[tuple[str, Callable[[Any], bool]]] = []
    for f in dataclasses.fields(cls):
        if not f.init:
            return DECODE
        check = fast_check(hints.get(f.name, Any))
        if check is DECODE or check is ANYTHING:  # ANYTHING: the value must still encode, which only encoding says
            return DECODE
        out.append((f.name, check))
    return out


def _message_check(cls: type, asked: bool) -> Any:
    """The fast check of a message of exactly ``cls`` whose bytes are already encoded: ``NOTHING`` if
    it has no field to check. An asked message's ``reply_to`` is always the ask's own reply slot."""
    fields = dataclass_checks(cls)
    if fields is DECODE:
        return DECODE
    if asked:
        fields = [(name, check) for name, check in fields if name != "reply_to"]
    if not fields:
        return NOTHING
    return _all_of(fields)


def _all_of(fields: list[tuple[str, Callable[[Any], bool]]]) -> Callable[[Any], bool]:
    """One test of every field; no generator for the one- and two-field messages most bodies take."""
    if len(fields) == 1:
        ((name, check),) = fields
        return lambda v: check(getattr(v, name))
    if len(fields) == 2:
        (first, check1), (second, check2) = fields
        return lambda v: check1(getattr(v, first)) and check2(getattr(v, second))

    def every(v: Any) -> bool:
        for name, check in fields:
            if not check(getattr(v, name)):
                return False
        return True

    return every


_AT = re.compile(r"^(?P<text>.*) - at `\$(?P<path>.*)`$", re.DOTALL)


def validation_text(error: BaseException) -> str:
    """msgspec's ``Expected `int`, got `str` - at `$.v``` as ``v: expected int, got str``."""
    text, path = str(error), ""
    found = _AT.match(text)
    if found is not None:
        text, path = found.group("text"), found.group("path").lstrip(".")
    text = text.replace("`", "")
    text = text[:1].lower() + text[1:]
    return f"{path}: {text}" if path else text


def type_name(annotation: Any) -> str:
    """``int``, ``list[int]``, ``Item | None``: an annotation as its code reads."""
    if isinstance(annotation, type) and get_origin(annotation) is None:
        return annotation.__qualname__
    return repr(annotation).replace("typing.", "")


_ENCODE_ERRORS = (TypeError, ValueError, msgspec.EncodeError, OverflowError, RecursionError)
"""What encoding raises for a value that cannot travel: not msgpack, a lone surrogate (a
``UnicodeEncodeError``, a ``ValueError``), an int past 64 bits, a structure too deep or recursive."""


def _encode_failure(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply (or it contains itself)"
    return str(exc)


class MessageSchema:
    """The message union an actor type accepts, with what it takes to check and decode it."""

    __slots__ = ("name", "classes", "by_tag", "checks", "ask_checks")

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
        # The fast check of each message class met (see ``fast_check``), made at first use: at
        # decoration a string annotation may name a class its module has not defined yet.
        self.checks: dict[type, Any] = {}
        self.ask_checks: dict[type, Any] = {}  # the same, for a message whose reply_to is an ask's own slot

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
        if cls is object:  # an ``object`` annotation holds any value, as ``Any`` does (msgspec asks the hook)
            return obj
        target = get_origin(cls) or cls
        if isinstance(target, type) and issubclass(target, Ref):
            if not isinstance(obj, list) or not obj:
                raise ValueError(f"expected an encoded ref, got {obj!r}")
            return self._make_ref(obj)
        raise TypeError(f"cannot decode into {cls!r}")

    def ref_from_wire(self, obj: list[Any]) -> Ref[Any]:
        return self._make_ref(obj)

    # --- messages --------------------------------------------------------------------

    def encode_message(self, message: object, schema: MessageSchema | None = None, asked: bool = False) -> bytes:
        """``[tag, fields]``; ``SchemaError`` naming the message if it cannot be encoded, or (given
        ``schema``) if the bytes would not decode into it on the receiving node. ``asked``: its
        ``reply_to`` is the reply slot of an ask (a runtime ref), which needs no check."""
        cls = type(message)
        tag = self._tags.get(cls)
        if tag is None:
            tag = self._tags[cls] = type_tag(cls)
        try:
            data = self._encoder.encode((tag, message))
        except _ENCODE_ERRORS as exc:
            where = f" for {schema.name}" if schema is not None else ""
            raise SchemaError(f"cannot encode {cls.__qualname__}{where}: {_encode_failure(exc)}") from exc
        if schema is not None:
            checks = schema.ask_checks if asked else schema.checks
            check = checks.get(cls)
            if check is not NOTHING:
                if check is None:
                    check = checks[cls] = _message_check(cls, asked) if cls in schema.classes else DECODE
                    if check is NOTHING:
                        return data
                if check is DECODE or not check(message):
                    self.decode_message(data, schema)  # raises what the receiving node would
        return data

    def decode_message(self, data: bytes, schema: MessageSchema) -> Any:
        """Build a message only if its tag is one of ``schema``'s classes; its ``reply_to`` knows the ``R`` it answers."""
        tag: Any = None
        try:
            tag, raw = self._envelope.decode(data)
            dec = self._message_decoders.get((schema, tag))
            if dec is None:
                dec = self._message_decoders[(schema, tag)] = schema.decoder(tag, self._dec_hook)
            message = dec.decode(raw)
        except msgspec.ValidationError as exc:
            cls = schema.by_tag.get(tag)
            what = cls.__qualname__ if cls is not None else "message"
            raise SchemaError(f"{what} for {schema.name}: {validation_text(exc)}") from exc
        except (msgspec.DecodeError, RecursionError) as exc:
            raise SchemaError(f"{schema.name}: cannot decode message: {_encode_failure(exc)}") from exc
        reply_to = getattr(message, "reply_to", None)
        if type(reply_to) is ReplyRef:
            reply_to.expects = reply_type(type(message))
        return message

    # --- values (state pages) --------------------------------------------------------

    def encode_value(self, value: Any, what: str = "value", of: str | None = None) -> bytes:
        """Encode ``value``; the ``SchemaError`` names it as ``what`` (``what of of``: a state write
        passes its actor's name apart, so that the label is only formatted when encoding fails)."""
        try:
            return self._encoder.encode(value)
        except _ENCODE_ERRORS as exc:
            label = what if of is None else f"{what} of {of}"
            raise SchemaError(f"cannot encode {label} {type(value).__qualname__}: {_encode_failure(exc)}") from exc

    def encode_typed(self, value: Any, annotation: Any, what: str, of: str | None = None) -> bytes:
        """``encode_value``, then ``SchemaError`` unless the bytes decode into ``annotation`` (a state, a
        reply): the check the node that reads them runs, run where the value is written."""
        try:
            data = self._encoder.encode(value)
        except _ENCODE_ERRORS:
            self.encode_value(value, what, of)  # raises, naming it
            raise
        cls = type(value)
        if cls is annotation and (cls is int or cls is str or cls is float or cls is bool):
            return data  # encoded, so in range and valid UTF-8: the common state write, without a call
        try:
            check = FAST_VALUES.get(annotation)
        except TypeError:  # an unhashable annotation
            check = DECODE
        if check is None:
            check = fast_check(annotation)
        if check is not ANYTHING and (check is DECODE or not check(value)):
            self.check_decodes(data, annotation, what, of)
        return data

    def check_typed(self, value: Any, annotation: Any, what: str) -> None:
        """``SchemaError`` unless ``value`` encodes and decodes into ``annotation``; no bytes kept (a local reply)."""
        check = fast_check(annotation)
        if check is DECODE or check is ANYTHING or not check(value):
            self.encode_typed(value, annotation, what)

    def check_decodes(self, data: bytes, annotation: Any, what: str, of: str | None = None) -> None:
        """``SchemaError`` naming ``what`` unless ``data`` decodes into ``annotation``."""
        label = what if of is None else f"{what} of {of}"
        try:
            self._value_decoder(annotation, label).decode(data)
        except msgspec.ValidationError as exc:
            raise SchemaError(f"{label} must be {type_name(annotation)}: {validation_text(exc)}") from exc
        except (msgspec.DecodeError, RecursionError) as exc:
            raise SchemaError(f"cannot decode {label} as {type_name(annotation)}: {_encode_failure(exc)}") from exc

    def _value_decoder(self, annotation: Any, what: str) -> msgspec.msgpack.Decoder[Any]:
        dec = self._value_decoders.get(annotation)
        if dec is None:
            try:
                dec = msgspec.msgpack.Decoder(annotation, dec_hook=self._dec_hook)
            except TypeError as exc:
                raise SchemaError(f"cannot decode {what} as {annotation!r}: not a type the codec can build: {exc}") from exc
            self._value_decoders[annotation] = dec
        return dec

    def decode_value(self, data: bytes, annotation: Any, what: str = "value") -> Any:
        """``data`` decoded into ``annotation``; ``SchemaError`` naming ``what`` if it does not fit, or if
        ``annotation`` is a type msgspec cannot decode into (a union of two dataclasses, a plain class)."""
        dec = self._value_decoder(annotation, what)
        try:
            return dec.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
            raise SchemaError(f"cannot decode {what} as {annotation!r}: {_encode_failure(exc)}") from exc

    # --- page sets -------------------------------------------------------------------

    def encode_pages(self, pages: Mapping[str, bytes]) -> bytes:
        # Sorted so that equal page sets give equal bytes whatever the write order.
        return self._encoder.encode({name: pages[name] for name in sorted(pages)})

    def decode_pages(self, data: bytes) -> dict[str, bytes]:
        try:
            return self._pages.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
            raise SchemaError(f"cannot decode a page set: {exc}") from exc


def resolve_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """``typing.get_type_hints`` with a clear error when an annotation cannot be resolved."""
    try:
        return typing.get_type_hints(fn)
    except Exception as exc:  # NameError, TypeError: unresolvable forward references
        raise SchemaError(f"cannot resolve the annotations of {fn.__qualname__}: {exc}") from exc

