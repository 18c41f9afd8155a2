"""Tests of the errors the runtime raises on purpose: class, message, and that the node survives.

Every error is raised at the call that caused it, with a message naming what was wrong
(the actor type, the key, the message class, the limit). After each one the same
``ActorSystem`` still answers an ask, so a bad call never takes the node down.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from casty import (
    ActorSystem,
    Askable,
    ConfigurationError,
    Context,
    InvalidIdentity,
    MailboxFull,
    NotStarted,
    SchemaError,
    UnknownActor,
    actor,
)
from casty._core.actor import Backoff
from casty.cluster.config import Cluster
from casty.protocol.membership import MembershipConfig
from casty.cluster.node import NodeConfig
from casty.observer import MessageDropped
from casty._core.ref import EntityRef
from conftest import LoopClock, Recorder, run_virtual


def now() -> float:
    return asyncio.get_running_loop().time()


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


# ------------------------------------------------------------------------------ messages and actors


@dataclass(frozen=True)
class Echo(Askable[str]):
    text: str


@dataclass(frozen=True)
class Carry:
    payload: Any


@dataclass(frozen=True)
class CarryAsk(Askable[str]):
    payload: Any


@dataclass(frozen=True)
class Plain:
    text: str


@dataclass(frozen=True)
class Stranger(Askable[str]):
    """A message no actor here accepts."""


@dataclass(frozen=True)
class Hold:
    seconds: float


HANDLED: dict[str, list[Any]] = {}


@actor(initial=0)
async def echo(ctx: Context[int, Echo | Carry | CarryAsk | Plain]) -> None:
    """Answers Echo with its text and records every message it handles."""
    async for msg in ctx.inbox:
        HANDLED.setdefault(ctx.key, []).append(msg)
        if isinstance(msg, Echo):
            msg.reply_to.tell(msg.text)


@actor(mailbox=1)
async def narrow(ctx: Context[int, Hold | Echo]) -> None:
    """A one-slot mailbox; Hold keeps the body busy."""
    async for msg in ctx.inbox:
        HANDLED.setdefault(ctx.key, []).append(msg)
        match msg:
            case Hold(seconds=seconds):
                await asyncio.sleep(seconds)
            case Echo(text=text):
                msg.reply_to.tell(text)


@actor(initial=0, durable="write")
async def durable_counter(ctx: Context[int, Echo]) -> None:
    async for msg in ctx.inbox:
        msg.reply_to.tell(msg.text)


def not_an_actor(ctx: Any) -> None:
    """A plain function: importable, but not an @actor."""


async def still_serves(system: ActorSystem, key: str = "alive") -> None:
    """The node keeps running: the same system answers another ask."""
    assert await system.ref(echo, key).ask(Echo("still here")) == "still here"


# ============================================================================ SchemaError: wrong message type


def test_tell_of_wrong_message_type_is_schema_error() -> None:
    """tell of a message the type does not accept raises SchemaError naming the type and the message class."""
    HANDLED.pop("wrong-tell", None)

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock) as system:
            ref = system.ref(echo, "wrong-tell")
            with pytest.raises(SchemaError) as info:
                ref.tell(Stranger())  # type: ignore[arg-type]
            text = str(info.value)
            assert echo.name in text and "Stranger" in text and "Echo" in text
            assert isinstance(info.value, TypeError)
            assert await ref.ask(Echo("ok")) == "ok"
            assert HANDLED["wrong-tell"] == [Echo("ok")]
            await still_serves(system)

    run_virtual(main)


def test_ask_of_wrong_message_type_is_schema_error() -> None:
    """ask of an Askable the type does not accept raises SchemaError, without sending anything."""
    HANDLED.pop("wrong-ask", None)

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock) as system:
            ref = system.ref(echo, "wrong-ask")
            with pytest.raises(SchemaError) as info:
                await ref.ask(Stranger())
            assert echo.name in str(info.value) and "Stranger" in str(info.value)
            assert now() == 0.0  # raised at the call, not after a timeout
            assert await ref.ask(Echo("ok")) == "ok"
            assert HANDLED["wrong-ask"] == [Echo("ok")]
            assert system.stats()["pending_asks"] == 0
            await still_serves(system)

    run_virtual(main)


# ============================================================================ SchemaError: unencodable message


@pytest.mark.parametrize(
    "payload",
    [pytest.param(lambda: 1, id="lambda"), pytest.param(object(), id="object")],
)
def test_tell_of_unencodable_message_fails_at_the_call(payload: Any, recorder: Recorder) -> None:
    """tell of a frozen dataclass holding a lambda or a bare object raises SchemaError at the call; nothing is queued."""
    key = f"unencodable-{type(payload).__name__}"
    HANDLED.pop(key, None)

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, observer=recorder) as system:
            ref = system.ref(echo, key)
            await settle()
            with pytest.raises(SchemaError) as info:
                ref.tell(Carry(payload))
            text = str(info.value)
            assert "Carry" in text and echo.name in text
            assert system.stats()["queued"] == 0
            await settle()
            assert key not in HANDLED  # the body never saw it
            assert recorder.of(MessageDropped) == []  # refused at the call, not dropped later
            assert await ref.ask(Echo("after")) == "after"
            assert HANDLED[key] == [Echo("after")]
            await still_serves(system)

    run_virtual(main)


def test_ask_of_unencodable_message_fails_at_the_call() -> None:
    """ask of an Askable holding a lambda raises SchemaError at the call, not a timeout later."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock) as system:
            ref = system.ref(echo, "unencodable-ask")
            with pytest.raises(SchemaError) as info:
                await ref.ask(CarryAsk(lambda: 1))
            assert "CarryAsk" in str(info.value)
            assert now() == 0.0
            assert system.stats()["pending_asks"] == 0
            await still_serves(system)

    run_virtual(main)


def test_ask_of_non_askable_is_schema_error() -> None:
    """ask of a message that is not an Askable raises SchemaError naming the message class."""
    HANDLED.pop("non-askable", None)

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock) as system:
            ref = system.ref(echo, "non-askable")
            with pytest.raises(SchemaError) as info:
                await ref.ask(Plain("x"))  # type: ignore[arg-type]
            text = str(info.value)
            assert "Plain" in text and "Askable" in text
            assert now() == 0.0
            await settle()
            assert "non-askable" not in HANDLED
            await still_serves(system)

    run_virtual(main)


# ============================================================================ InvalidIdentity


@pytest.mark.parametrize(
    ("target", "key", "named"),
    [
        pytest.param("echo", "", "empty", id="empty-key"),
        pytest.param("echo", 7, "int", id="int-key"),
        pytest.param("echo", None, "NoneType", id="none-key"),
        pytest.param("function", "k", "not_an_actor", id="plain-function"),
        pytest.param("string", "k", "test_errors:echo", id="type-name-string"),
    ],
)
def test_invalid_identity(target: str, key: Any, named: str) -> None:
    """ref with an empty or non-string key, or with something that is not an actor type, raises InvalidIdentity."""
    chosen: Any = {"echo": echo, "function": not_an_actor, "string": "test_errors:echo"}[target]

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock) as system:
            with pytest.raises(InvalidIdentity) as info:
                system.ref(chosen, key)
            assert named in str(info.value)
            assert isinstance(info.value, ValueError)
            assert system.activations() == []
            await still_serves(system)

    run_virtual(main)


# ============================================================================ NotStarted


def test_not_started_before_entering() -> None:
    """Before `async with`, ref raises NotStarted; once entered the same system works."""

    async def main(clock: LoopClock) -> None:
        system = ActorSystem(clock=clock)
        with pytest.raises(NotStarted) as info:
            system.ref(echo, "early")
        assert "not started" in str(info.value)
        with pytest.raises(NotStarted):
            await system.release(echo, "early")
        async with system:
            await still_serves(system)

    run_virtual(main)


def test_not_started_after_exit() -> None:
    """After the system exited, ref, tell and ask (also through refs made earlier) raise NotStarted."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock) as system:
            ref = system.ref(echo, "late")
            assert await ref.ask(Echo("before")) == "before"
        with pytest.raises(NotStarted) as info:
            system.ref(echo, "late")
        assert "stopped" in str(info.value)
        with pytest.raises(NotStarted):
            ref.tell(Plain("after"))
        with pytest.raises(NotStarted):
            await ref.ask(Echo("after"))
        with pytest.raises(NotStarted):
            async with system:
                pass

    run_virtual(main)


# ============================================================================ UnknownActor


@pytest.mark.parametrize(
    ("name", "named"),
    [
        pytest.param("casty_lab_nowhere.missing:ghost", "casty_lab_nowhere.missing", id="no-module"),
        pytest.param("test_errors:ghost_actor", "ghost_actor", id="no-attribute"),
        pytest.param("test_errors:not_an_actor", "not_an_actor", id="not-an-actor"),
        pytest.param("no-colon-here", "no-colon-here", id="not-a-type-name"),
    ],
)
def test_unknown_actor_for_unimportable_type_name(name: str, named: str) -> None:
    """tell and ask through a ref whose type name cannot be imported as an @actor raise UnknownActor naming it."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock) as system:
            ref: EntityRef[Any] = EntityRef(system, name, "k")
            with pytest.raises(UnknownActor) as info:
                ref.tell(Plain("x"))
            assert named in str(info.value)
            with pytest.raises(UnknownActor):
                await ref.ask(Echo("x"))
            assert system.activations() == []
            await still_serves(system)

    run_virtual(main)


# ============================================================================ MailboxFull


def test_mailbox_full_refuses_tell_and_ask() -> None:
    """@actor(mailbox=1) queues one message while busy; the next tell or ask raises MailboxFull naming type, key and limit."""
    HANDLED.pop("n", None)

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock) as system:
            ref = system.ref(narrow, "n")
            assert await ref.ask(Echo("up")) == "up"
            ref.tell(Hold(5))
            await settle()  # the body is now busy with Hold; the mailbox is empty
            ref.tell(Hold(0))  # takes the one slot
            with pytest.raises(MailboxFull) as info:
                ref.tell(Hold(1))
            text = str(info.value)
            assert narrow.name in text and "'n'" in text and "1" in text
            with pytest.raises(MailboxFull):
                await ref.ask(Echo("no room"))
            assert now() == 0.0
            await still_serves(system)
            await asyncio.sleep(5)  # Hold(5) ends, Hold(0) is read: the slot is free again
            assert await ref.ask(Echo("room again")) == "room again"
            assert now() == 5.0
            assert HANDLED["n"] == [Echo("up"), Hold(5), Hold(0), Echo("room again")]

    run_virtual(main)


# ============================================================================ ConfigurationError


def test_durable_actor_without_store_is_configuration_error() -> None:
    """A durable actor on a system without a store raises ConfigurationError naming the type and the missing store."""

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock) as system:
            with pytest.raises(ConfigurationError) as info:
                system.ref(durable_counter, "d")
            text = str(info.value)
            assert durable_counter.name in text and "store" in text
            ref: EntityRef[Any] = EntityRef(system, durable_counter.name, "d")
            with pytest.raises(ConfigurationError):
                await ref.ask(Echo("x"))
            assert system.activations() == []
            await still_serves(system)

    run_virtual(main)


# ============================================================================ @actor definition errors


def test_actor_on_non_async_function_is_type_error() -> None:
    """@actor on a plain def raises TypeError naming the function."""

    def sync_body(ctx: Context[int, Echo]) -> None:
        pass

    with pytest.raises(TypeError) as info:
        actor(sync_body)
    assert "sync_body" in str(info.value) and "async" in str(info.value)
    with pytest.raises(TypeError):
        actor(initial=0)(sync_body)


def test_actor_without_context_annotation_is_schema_error() -> None:
    """@actor on a body whose parameter is not annotated Context[S, M] raises SchemaError naming the body."""

    async def unannotated(ctx) -> None:  # type: ignore[no-untyped-def]
        pass

    async def wrong_annotation(ctx: int) -> None:
        pass

    with pytest.raises(SchemaError) as info:
        actor(unannotated)
    assert "unannotated" in str(info.value) and "Context" in str(info.value)
    with pytest.raises(SchemaError) as info:
        actor(wrong_annotation)
    assert "wrong_annotation" in str(info.value)


@dataclass
class Mutable:
    value: int


class NotADataclass:
    pass


def test_message_union_with_non_frozen_dataclass_is_schema_error() -> None:
    """A message union containing a non-frozen dataclass (or a non-dataclass) raises SchemaError naming that class."""

    async def loose(ctx: Context[int, Echo | Mutable]) -> None:
        pass

    async def odd(ctx: Context[int, Echo | NotADataclass]) -> None:
        pass

    with pytest.raises(SchemaError) as info:
        actor(loose)
    assert "Mutable" in str(info.value) and "frozen" in str(info.value)
    with pytest.raises(SchemaError) as info:
        actor(odd)
    assert "NotADataclass" in str(info.value)


# ============================================================================ durations: NaN, infinite, wrong type


SYSTEM_DURATIONS = ("idle_after", "ask_timeout", "write_timeout", "leave_timeout")
ACTOR_DURATIONS = ("idle_after", "ask_timeout", "write_timeout")


@pytest.mark.parametrize("option", SYSTEM_DURATIONS)
@pytest.mark.parametrize(
    ("value", "text"),
    [(math.nan, "nan"), (math.inf, "inf"), (10**400, "1" + "0" * 400), (1e300, "1e+300")],
    ids=["nan", "inf", "huge-int", "past-timedelta-max"],
)
def test_system_duration_not_finite_is_value_error_at_construction(option: str, value: float, text: str) -> None:
    """ActorSystem(option=NaN, inf, or more than timedelta.max) raises ValueError naming the option and the value (a NaN idle_after used to spin the loop)."""
    with pytest.raises(ValueError) as info:
        ActorSystem(**{option: value})  # type: ignore[arg-type]
    assert str(info.value) == f"{option} must be a finite duration of at most timedelta.max, got {text}"


@pytest.mark.parametrize("option", ACTOR_DURATIONS)
@pytest.mark.parametrize(("value", "text"), [(math.nan, "nan"), (-math.inf, "-inf"), (math.inf, "inf")])
def test_actor_duration_not_finite_is_value_error_at_decoration(option: str, value: float, text: str) -> None:
    """@actor(option=NaN or ±inf) raises ValueError naming the type, the option and the value."""

    async def timed(ctx: Context[int, Echo]) -> None:
        pass

    with pytest.raises(ValueError) as info:
        actor(initial=0, **{option: value})(timed)
    name = f"{__name__}:test_actor_duration_not_finite_is_value_error_at_decoration.<locals>.timed"
    assert str(info.value) == f"{name}: {option} must be a finite duration of at most timedelta.max, got {text}"


@pytest.mark.parametrize("option", ["ask_timeout", "write_timeout"])
def test_zero_ask_or_write_timeout_is_value_error(option: str) -> None:
    """A zero ask or write timeout (every ask or write would fail at once) is refused on the system and on a type."""

    async def zero(ctx: Context[int, Echo]) -> None:
        pass

    with pytest.raises(ValueError) as info:
        ActorSystem(**{option: 0})  # type: ignore[arg-type]
    assert str(info.value) == f"{option} must be positive, got 0"
    with pytest.raises(ValueError) as info:
        actor(initial=0, **{option: timedelta(0)})(zero)
    assert str(info.value).endswith(f"zero: {option} must be positive, got datetime.timedelta(0)")


@pytest.mark.parametrize("value", [True, "5", None])
def test_duration_of_wrong_type_is_type_error(value: Any) -> None:
    """A bool, a str, or None given as the system's ask_timeout raises TypeError naming the option and the type."""
    with pytest.raises(TypeError) as info:
        ActorSystem(ask_timeout=value)
    assert str(info.value) == f"ask_timeout must be a timedelta or a number of seconds, not {type(value).__qualname__}"


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        ({"factor": math.nan}, ValueError, "Backoff.factor must be a finite number >= 1, got nan"),
        ({"factor": math.inf}, ValueError, "Backoff.factor must be a finite number >= 1, got inf"),
        ({"factor": "2"}, TypeError, "Backoff.factor must be a number, not str"),
        ({"factor": True}, TypeError, "Backoff.factor must be a number, not bool"),
        ({"first": 0.1}, TypeError, "Backoff.first must be a timedelta, not float"),
        ({"limit": 10}, TypeError, "Backoff.limit must be a timedelta, not int"),
    ],
)
def test_backoff_bad_field_is_refused_at_construction(kwargs: dict[str, Any], error: type[Exception], text: str) -> None:
    """Backoff with a NaN/inf factor raises ValueError, with a factor or time of the wrong type TypeError, each naming the field."""
    with pytest.raises(error) as info:
        Backoff(**kwargs)
    assert str(info.value) == text


def test_backoff_with_huge_factor_caps_at_limit() -> None:
    """A finite but huge factor gives the limit after a few failures instead of an OverflowError out of delay()."""
    backoff = Backoff(first=timedelta(milliseconds=100), limit=timedelta(seconds=10), factor=1e300)
    assert [backoff.delay(n) for n in (1, 2, 3, 100)] == [0.1, 10.0, 10.0, 10.0]


def test_backoff_of_wrong_type_is_type_error() -> None:
    """backoff= that is not a Backoff raises TypeError at construction, not an AttributeError at the first restart."""

    async def backs(ctx: Context[int, Echo]) -> None:
        pass

    with pytest.raises(TypeError) as info:
        ActorSystem(backoff=0.1)  # type: ignore[arg-type]
    assert str(info.value) == "backoff must be a Backoff, not float"
    with pytest.raises(TypeError) as info:
        actor(initial=0, backoff=timedelta(seconds=1))(backs)
    assert str(info.value).endswith("backs: backoff must be None or a Backoff, not timedelta")


@pytest.mark.parametrize(
    ("value", "text"),
    [(timedelta(0), "must be positive, got datetime.timedelta(0)"), (timedelta(seconds=-1), "must not be negative, got datetime.timedelta(days=-1, seconds=86399)")],
    ids=["zero", "negative"],
)
def test_durable_write_behind_interval_must_be_positive(value: timedelta, text: str) -> None:
    """durable=timedelta(0) or a negative timedelta raises ValueError naming the type and the option."""

    async def behind(ctx: Context[int, Echo]) -> None:
        pass

    with pytest.raises(ValueError) as info:
        actor(initial=0, durable=value)(behind)
    assert str(info.value).endswith(f"behind: durable {text}")


@pytest.mark.parametrize("option", ["heartbeat", "suspect_after", "dead_after", "remove_after", "rejoin_grace"])
def test_cluster_duration_infinite_is_value_error(option: str) -> None:
    """Cluster(option=inf) is refused with ValueError naming the option (positive() let inf through)."""
    with pytest.raises(ValueError) as info:
        Cluster(["a"], **{option: math.inf})
    assert str(info.value) == f"{option} must be a finite duration of at most timedelta.max, got inf"


def test_bad_durations_leave_a_running_node_serving() -> None:
    """Refused durations (a system, a type, a Backoff) made while a node runs leave that node answering."""

    async def late(ctx: Context[int, Echo]) -> None:
        pass

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock) as system:
            with pytest.raises(ValueError):
                ActorSystem(idle_after=math.nan)
            with pytest.raises(ValueError):
                actor(initial=0, idle_after=math.nan)(late)
            with pytest.raises(ValueError):
                Backoff(factor=math.nan)
            await still_serves(system)

    run_virtual(main)


@pytest.mark.parametrize("option", ["heartbeat", "suspect_after", "dead_after", "remove_after", "listen"])
def test_membership_timing_infinite_is_value_error(option: str) -> None:
    """MembershipConfig(option=inf), the sans-I/O core's own timing, is refused like every other duration."""
    with pytest.raises(ValueError) as info:
        MembershipConfig(**{option: math.inf})
    assert str(info.value) == f"MembershipConfig.{option} must be a finite duration of at most timedelta.max, got inf"


@pytest.mark.parametrize(
    ("option", "value", "text"),
    [
        ("leave_timeout", math.nan, "leave_timeout must be a finite duration of at most timedelta.max, got nan"),
        ("ask_timeout", math.inf, "ask_timeout must be a finite duration of at most timedelta.max, got inf"),
        ("write_timeout", math.inf, "write_timeout must be a finite duration of at most timedelta.max, got inf"),
    ],
)
def test_node_config_duration_not_finite_is_value_error(option: str, value: float, text: str) -> None:
    """NodeConfig (python -m casty node's settings) refuses a NaN or infinite timeout when it is made, not when the node stops."""
    with pytest.raises(ValueError) as info:
        NodeConfig(bind=("127.0.0.1", 7000), **{option: value})
    assert str(info.value) == text
