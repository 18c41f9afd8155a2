"""The codec: typed, safe msgpack for messages, state and pages; refs travel and are rebound."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import msgspec
import pytest

import casty
from casty import NOBODY, ActorSystem, Askable, Context, Ref, SchemaError, actor
from casty.codec import Codec, MessageSchema, type_tag
from casty.ref import EntityRef, ReplyRef


@dataclass(frozen=True)
class Hello(Askable[str]):
    name: str
    friends: tuple[Ref[str], ...] = ()


@dataclass(frozen=True)
class Bye:
    who: Ref[str]


@dataclass(frozen=True)
class Other:
    x: int


@actor(initial=None)
async def greeter(ctx: Context[None, Hello | Bye]) -> None:
    """Only here to be referred to."""
    async for _ in ctx.inbox:
        pass


def make_codec() -> tuple[Codec, ActorSystem]:
    system = ActorSystem(node="n1")
    return system.codec, system


def test_message_round_trip_rebinds_refs_to_the_decoding_system() -> None:
    """A message with entity, reply and nobody refs decodes equal, with refs bound to the decoding system."""
    codec, system = make_codec()
    schema = MessageSchema("t", (Hello, Bye))
    friend: Ref[str] = EntityRef(None, greeter.name, "ana")
    msg = Hello("bia", (friend,), reply_to=ReplyRef(None, "n0", 7))
    back = codec.decode_message(codec.encode_message(msg, schema), schema)
    assert back == msg and back.reply_to == ReplyRef(None, "n0", 7)
    assert back.friends[0]._system is system  # type: ignore[attr-defined]
    told = codec.decode_message(codec.encode_message(Hello("x"), schema), schema)
    assert told.reply_to is NOBODY


def test_decoder_builds_only_the_types_of_the_schema() -> None:
    """A tag outside the receiving actor's union is refused with SchemaError; nothing is imported for it."""
    codec, _ = make_codec()
    schema = MessageSchema("t", (Hello, Bye))
    foreign = codec.encode_message(Other(1))
    with pytest.raises(SchemaError, match="does not take"):
        codec.decode_message(foreign, schema)
    evil = msgspec.msgpack.encode(("subprocess:Popen", {"args": ["true"]}))
    before = set(sys.modules)
    with pytest.raises(SchemaError):
        codec.decode_message(evil, schema)
    assert set(sys.modules) - before == set()


def test_field_of_wrong_type_is_a_schema_error_on_decode() -> None:
    """Bytes whose fields do not match the dataclass's annotations are refused, not half-built."""
    codec, _ = make_codec()
    schema = MessageSchema("t", (Other,))
    bad = msgspec.msgpack.encode((type_tag(Other), {"x": "not an int"}))
    with pytest.raises(SchemaError, match="Expected `int`"):
        codec.decode_message(bad, schema)


def test_unencodable_message_names_the_type() -> None:
    """A message holding something the codec cannot carry fails with SchemaError naming the message type."""
    codec, _ = make_codec()
    with pytest.raises(SchemaError, match="cannot encode Other"):
        codec.encode_message(Other(lambda: 1))  # type: ignore[arg-type]


def test_state_values_round_trip_by_annotation() -> None:
    """State is decoded against the declared state type, refs included."""
    codec, _ = make_codec()
    value = {"a": (1, 2), "b": (3,)}
    assert codec.decode_value(codec.encode_value(value), dict[str, tuple[int, ...]]) == value
    ref: Ref[str] = EntityRef(None, greeter.name, "k")
    assert codec.decode_value(codec.encode_value([ref]), list[Ref[str]]) == [ref]
    with pytest.raises(SchemaError):
        codec.decode_value(codec.encode_value("text"), int)


def test_page_sets_encode_deterministically() -> None:
    """Equal page sets give equal bytes whatever order they were written in."""
    codec, _ = make_codec()
    assert codec.encode_pages({"b": b"2", "a": b"1"}) == codec.encode_pages({"a": b"1", "b": b"2"})
    assert codec.decode_pages(codec.encode_pages({"x": b"\x00"})) == {"x": b"\x00"}


def test_message_types_must_be_frozen_dataclasses() -> None:
    """A schema refuses plain classes and non-frozen dataclasses, naming them."""

    @dataclass
    class Mutable:
        x: int

    class Plain:
        pass

    with pytest.raises(SchemaError, match="Mutable must be frozen"):
        MessageSchema("t", (Mutable,))
    with pytest.raises(SchemaError, match="Plain must be a frozen dataclass"):
        MessageSchema("t", (Plain,))


def test_runtime_has_no_pickle() -> None:
    """No module of casty imports pickle (or marshal): the codec is the only way bytes become objects."""
    root = Path(casty.__file__).parent
    offenders = [
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if any(word in path.read_text() for word in ("import pickle", "import marshal", "from pickle"))
    ]
    assert offenders == []
