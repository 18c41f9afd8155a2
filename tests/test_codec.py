"""The codec: typed, safe msgpack for messages, state and pages; refs travel and are rebound."""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest

import casty
from casty import NOBODY, ActorSystem, Askable, Context, Ref, SchemaError, actor
from casty._core.codec import Codec, MessageSchema, type_tag
from casty._core.ref import EntityRef, ReplyRef


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
    with pytest.raises(SchemaError) as info:
        codec.decode_message(bad, schema)
    assert str(info.value) == "Other for t: x: expected int, got str"


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


# ============================================================================ one set of checks (issue 10 #10, #11)
# The checks a value meets on the wire (encode, then decode into its declared type) are run
# where it enters the runtime, on a local key exactly as on a remote one.


@dataclass(frozen=True)
class Put:
    """Told: set the state to ``v``."""

    v: int


@dataclass(frozen=True)
class PutAsk(Askable[int]):
    """Asked: set the state to ``v`` and answer it."""

    v: int


@dataclass(frozen=True)
class Items:
    """A field the fast check cannot vouch for: the decode decides."""

    tags: list[int]


@dataclass(frozen=True)
class Text:
    """Told: set the state to ``text`` (a str state of another type)."""

    text: str


@dataclass(frozen=True)
class Lie(Askable[int]):
    """Asked for an int; the body answers ``answer`` (or the value ``make`` names, built in the body)."""

    answer: Any = None
    make: str = ""


@dataclass(frozen=True)
class SetRaw(Askable[str]):
    """Asked: ``ctx.state.set(value)`` (``update`` if ``via_update``); answers what the write raised, or "ok".

    ``make`` names a value the body builds itself (one that could not travel in this message).
    """

    value: Any = None
    via_update: bool = False
    make: str = ""


@dataclass(frozen=True)
class Read(Askable[int]):
    pass


@actor(initial=0)
async def typed(ctx: Context[int, Put | PutAsk | Items | Lie | SetRaw | Read]) -> None:
    """An int state; every message exercises one check."""
    async for msg in ctx.inbox:
        if isinstance(msg, Put):
            await ctx.state.set(msg.v)
        elif isinstance(msg, PutAsk):
            msg.reply_to.tell(await ctx.state.set(msg.v))
        elif isinstance(msg, Lie):
            msg.reply_to.tell(UNTRAVELLED[msg.make]() if msg.make else msg.answer)
        elif isinstance(msg, SetRaw):
            value = UNTRAVELLED[msg.make]() if msg.make else msg.value
            try:
                if msg.via_update:
                    await ctx.state.update(lambda _: value)
                else:
                    await ctx.state.set(value)
            except SchemaError as exc:
                msg.reply_to.tell(f"SchemaError: {exc}")
            else:
                msg.reply_to.tell("ok")
        elif isinstance(msg, Read):
            msg.reply_to.tell(ctx.state.value)


def nested(depth: int) -> list[object]:
    out: list[object] = []
    for _ in range(depth):
        out = [out]
    return out


def recursive() -> list[object]:
    out: list[object] = []
    out.append(out)
    return out


UNTRAVELLED: dict[str, Callable[[], object]] = {
    "lone-surrogate": lambda: "a\ud800b",
    "recursive": recursive,
    "100k-deep": lambda: nested(100_000),
    "huge-int": lambda: 2**70,
}


def run_local(main: Callable[[ActorSystem], Awaitable[None]]) -> None:
    from conftest import LoopClock, run_virtual

    async def wrapped(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock) as system:
            await main(system)

    run_virtual(wrapped)


def test_a_field_of_the_wrong_type_is_refused_at_tell_and_ask_on_a_local_key() -> None:
    """tell and ask of a message whose field is not its declared type raise SchemaError at the call, worded as the wire's decode."""

    async def main(system: ActorSystem) -> None:
        ref = system.ref(typed, "f")
        with pytest.raises(SchemaError) as told:
            ref.tell(Put("seven"))  # type: ignore[arg-type]
        assert str(told.value) == f"Put for {typed.name}: v: expected int, got str"
        with pytest.raises(SchemaError) as asked:
            await ref.ask(PutAsk(True))
        assert str(asked.value) == f"PutAsk for {typed.name}: v: expected int, got bool"
        with pytest.raises(SchemaError) as listed:
            ref.tell(Items([1, "2"]))  # type: ignore[list-item]
        assert str(listed.value) == f"Items for {typed.name}: tags[1]: expected int, got str"
        assert await ref.ask(Read()) == 0  # nothing was delivered
        assert system.stats()["pending_asks"] == 0

    run_local(main)


def test_a_reply_of_the_wrong_type_fails_the_body_with_actor_failed_on_a_local_key() -> None:
    """A str answer to an Askable[int] raises SchemaError in the replying body; the local asker gets ActorFailed, and the key serves on."""
    from casty.errors import ActorFailed

    async def main(system: ActorSystem) -> None:
        ref = system.ref(typed, "r")
        with pytest.raises(ActorFailed) as failed:
            await ref.ask(Lie("not an int"))
        assert str(failed.value) == f"{typed.name}['r'] failed on Lie: SchemaError('the reply must be int: expected int, got str')"
        with pytest.raises(ActorFailed) as unencodable:
            await ref.ask(Lie(make="huge-int"))
        assert isinstance(unencodable.value.error, SchemaError)
        assert "cannot encode the reply int" in str(unencodable.value.error)
        assert await ref.ask(Lie(5)) == 5
        assert await ref.ask(Read()) == 0

    run_local(main)


def test_a_state_of_the_wrong_type_is_refused_by_set_and_update_on_a_local_key() -> None:
    """ctx.state.set / update of a value not of the state type raise SchemaError in the body; the state keeps its last value."""

    async def main(system: ActorSystem) -> None:
        ref = system.ref(typed, "s")
        assert await ref.ask(PutAsk(4)) == 4
        assert await ref.ask(SetRaw("four")) == f"SchemaError: state of {typed.name} must be int: expected int, got str"
        assert await ref.ask(SetRaw(4.0, via_update=True)) == f"SchemaError: state of {typed.name} must be int: expected int, got float"
        assert await ref.ask(SetRaw(None)) == f"SchemaError: state of {typed.name} must be int: expected int, got None"
        assert await ref.ask(Read()) == 4
        assert await ref.ask(SetRaw(5)) == "ok"
        assert await ref.ask(Read()) == 5

    run_local(main)


def test_a_wrongly_typed_initial_fails_the_activation_at_once() -> None:
    """system.ref(..., initial="x") for an int state: the activation fails with SchemaError, the ask with ActorFailed (not a timeout)."""
    from casty.errors import ActorFailed

    async def main(system: ActorSystem) -> None:
        loop = asyncio.get_running_loop()
        start = loop.time()
        with pytest.raises(ActorFailed) as failed:
            await system.ref(typed, "i", initial="x").ask(Read())
        assert loop.time() == start
        assert isinstance(failed.value.error, SchemaError)
        assert str(failed.value.error) == f"initial state of {typed.name} must be int: expected int, got str"
        assert await system.ref(typed, "i2").ask(Read()) == 0

    run_local(main)


@pytest.mark.parametrize(
    "make, text",
    [
        pytest.param("lone-surrogate", "surrogates not allowed", id="lone-surrogate"),
        pytest.param("recursive", "nested too deeply (or it contains itself)", id="recursive"),
        pytest.param("100k-deep", "nested too deeply (or it contains itself)", id="100k-deep"),
    ],
)
def test_values_that_cannot_travel_are_schema_errors_at_the_call(make: str, text: str) -> None:
    """A lone surrogate, a recursive list, a 100k-deep list: SchemaError at tell, ask, state.set, update and reply, never a raw error."""
    from casty.errors import ActorFailed

    async def main(system: ActorSystem) -> None:
        ref = system.ref(typed, "t")
        payload = UNTRAVELLED[make]()
        with pytest.raises(SchemaError) as told:
            ref.tell(Lie(payload))
        assert str(told.value) == f"cannot encode Lie for {typed.name}: {text}" or text in str(told.value), told.value
        with pytest.raises(SchemaError, match=re.escape(text)):
            await ref.ask(Lie(payload))
        for via_update in (False, True):
            answer = await ref.ask(SetRaw(make=make, via_update=via_update))
            assert answer.startswith(f"SchemaError: cannot encode state of {typed.name} ") and text in answer, answer
        with pytest.raises(ActorFailed) as replied:
            await ref.ask(Lie(make=make))
        assert isinstance(replied.value.error, SchemaError) and text in str(replied.value.error)
        assert await ref.ask(Read()) == 0

    run_local(main)


def test_a_key_with_a_lone_surrogate_is_a_schema_error_at_ref() -> None:
    """system.ref(actor, key) with a lone surrogate in the key raises SchemaError naming it; nothing activates; other keys serve."""

    async def main(system: ActorSystem) -> None:
        with pytest.raises(SchemaError) as info:
            system.ref(typed, "k\udc80")
        assert str(info.value) == f"{typed.name}: a key must be valid unicode (it travels as UTF-8), got 'k\\udc80': surrogates not allowed"
        assert system.activations() == []
        assert await system.ref(typed, "clé").ask(Read()) == 0  # non-ASCII is fine

    run_local(main)


def test_the_fast_check_says_yes_only_when_the_decode_would() -> None:
    """fast_check never accepts a value its type's decode refuses (bool for int, a big int, a subclass, a surrogate)."""
    from casty._core.codec import DECODE, fast_check

    codec, _ = make_codec()
    cases: list[tuple[object, object]] = [
        (int, 3), (int, True), (int, 2**64), (int, -(2**63) - 1), (float, 1), (float, 1.5), (float, "1"),
        (str, "é"), (str, "\ud800"), (bytes, b"x"), (bytes, bytearray(b"x")), (int | None, None), (int | None, "x"),
        (Other, Other(1)), (Other, Other("1")), (Put, Other(1)), (Ref[str], NOBODY), (Ref[str], "x"),  # type: ignore[arg-type]
        (Ref[str], EntityRef(None, greeter.name, "k")), (Ref[str], EntityRef(None, "nowhere:thing", "k")),
        (bool, 1), (type(None), None),
    ]
    for annotation, value in cases:
        check = fast_check(annotation)
        assert check is not DECODE, annotation
        try:
            codec.check_decodes(codec.encode_value(value), annotation, "v")
            decodes = True
        except SchemaError:
            decodes = False
        except casty.UnknownActor:
            decodes = False
        assert (not check(value)) or decodes, (annotation, value)
    assert fast_check(list[int]) is DECODE


@dataclass(frozen=True)
class Arm(Askable[str]):
    """Asked: ``ctx.schedule`` under a name with a lone surrogate; answers what it raised and the schedules left."""


@actor(initial=0)
async def arming(ctx: Context[int, Arm]) -> None:
    """Tries to arm a schedule whose name cannot travel."""
    async for msg in ctx.inbox:
        try:
            await ctx.schedule("tick\ud800", timedelta(seconds=1), None, msg)
            outcome = "armed"
        except SchemaError as exc:
            outcome = f"SchemaError: {exc}"
        msg.reply_to.tell(f"{outcome}; schedules={sorted(ctx.schedules)!r}")


def test_a_schedule_name_with_a_lone_surrogate_is_a_schema_error_and_nothing_is_armed() -> None:
    """ctx.schedule("tick\\ud800", ...) raises SchemaError before anything is armed: ctx.schedules stays empty (the @schedules page could not hold it)."""

    async def main(system: ActorSystem) -> None:
        answer = await system.ref(arming, "a").ask(Arm())
        assert answer == "SchemaError: a schedule name must be valid unicode (it is stored as UTF-8), got 'tick\\ud800'; schedules=[]"

    run_local(main)


@actor(initial=0, durable="write")
async def kept_count(ctx: Context[int, PutAsk | Read]) -> None:
    """A durable int: PutAsk writes through to the store."""
    async for msg in ctx.inbox:
        if isinstance(msg, PutAsk):
            msg.reply_to.tell(await ctx.state.set(msg.v))
        else:
            msg.reply_to.tell(ctx.state.value)


def test_a_durable_key_with_a_lone_surrogate_is_a_schema_error_at_ref_not_a_store_error(tmp_path: Path) -> None:
    """On an SQLite-backed system, ref(durable type, "k\\udc80") is a SchemaError at the call (the store never sees the key); other keys write through."""
    from casty import SQLiteStore
    from conftest import LoopClock, run_virtual

    async def main(clock: LoopClock) -> None:
        store = SQLiteStore(tmp_path / "keys.db")
        async with ActorSystem(clock=clock, store=store) as system:
            with pytest.raises(SchemaError, match="a key must be valid unicode"):
                await system.ref(kept_count, "k\udc80").ask(PutAsk(1))
            assert await system.ref(kept_count, "k").ask(PutAsk(2)) == 2
        assert [key for _, key in await store.keys()] == ["k"]

    run_virtual(main)


def test_an_object_annotation_takes_any_value_as_any_does() -> None:
    """A value typed ``object`` (a field, an item, a reply) decodes as it was encoded, so checking it locally refuses nothing that travels."""
    codec, _ = make_codec()
    data = codec.encode_value([1, "a", {"k": [2.5]}])
    assert codec.decode_value(data, tuple[int, object, object], "v") == (1, "a", {"k": [2.5]})
    codec.check_typed(("x", None), tuple[str, object], "the reply")
