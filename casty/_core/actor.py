"""``@actor``: turns an ``async def body(ctx: Context[S, M])`` into an actor type.

The type is named ``module:qualname`` of its body, and every type the process defines is
registered under that name. A name met later (in a ref that crossed the network, in an
``@behavior`` page, as a key of the store) resolves only through that registry: a name
from outside never imports anything, or a peer could make a node import a module of its
choosing. The decorator reads ``S`` and ``M`` from the annotation once, so that every
message and state value can be checked and encoded without guessing.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Generic, Literal, TypeVar, get_args, get_origin, overload

from .codec import ACTOR_TYPES, MessageSchema, resolve_hints, union_members
from .._durations import duration, seconds
from ..errors import SchemaError, UnknownActor

__all__ = ["actor", "ActorType", "Backoff", "duration", "known_actor", "seconds"]

S = TypeVar("S")
M = TypeVar("M")

WriteLevel = Literal["one", "majority", "all"]
OnFull = Literal["refuse", "wait"]
Durable = Literal["write"] | timedelta | None


@dataclass(frozen=True)
class Backoff:
    """Delay before a failed body restarts: ``first * factor**n`` for the n-th consecutive failure, capped at ``limit``."""

    first: timedelta = timedelta(milliseconds=100)
    limit: timedelta = timedelta(seconds=10)
    factor: float = 2.0

    def __post_init__(self) -> None:
        # Checked here, not at the first restart: a bad backoff would otherwise surface as an
        # error out of the restart path, long after the line that wrote it.
        for name in ("first", "limit"):
            value = getattr(self, name)
            if not isinstance(value, timedelta):
                raise TypeError(f"Backoff.{name} must be a timedelta, not {type(value).__qualname__}")
        factor = self.factor
        if isinstance(factor, bool) or not isinstance(factor, (int, float)):
            raise TypeError(f"Backoff.factor must be a number, not {type(factor).__qualname__}")
        if self.first <= timedelta(0) or self.limit < self.first:
            raise ValueError(f"Backoff needs 0 < first <= limit, got first={self.first}, limit={self.limit}")
        if not (math.isfinite(factor) and factor >= 1.0):
            raise ValueError(f"Backoff.factor must be a finite number >= 1, got {factor!r}")

    def delay(self, failures: int) -> float:
        """Seconds to wait after ``failures`` consecutive failures (1 = the first)."""
        first = self.first.total_seconds()
        limit = self.limit.total_seconds()
        exponent = max(0, failures - 1)
        # Bound the exponent so that a long failure streak cannot overflow the float.
        if exponent > 64:
            return limit
        try:
            return min(limit, first * self.factor**exponent)
        except OverflowError:  # a huge (finite) factor: far past the limit
            return limit


_REGISTRY: dict[str, ActorType[Any, Any]] = ACTOR_TYPES  # the codec reads it too: a ref decodes only to a type defined here


class ActorType(Generic[S, M]):
    """An actor type: its body, its name, its state and message types, and its options."""

    def __init__(
        self,
        body: Callable[[Any], Awaitable[None]],
        *,
        initial: Any = None,
        replicas: int = 3,
        write: WriteLevel = "majority",
        mailbox: int | None = None,
        on_full: OnFull = "refuse",
        idle_after: timedelta | float | None = None,
        ask_timeout: timedelta | float | None = None,
        write_timeout: timedelta | float | None = None,
        backoff: Backoff | None = None,
        durable: Durable = None,
        pinned: bool = False,
    ) -> None:
        if not inspect.iscoroutinefunction(body):
            raise TypeError(f"@actor needs an async def body, got {body!r}")
        self.body = body
        self.name = f"{body.__module__}:{body.__qualname__}"
        self.state_type, message_type = _context_types(body)
        self.schema = MessageSchema(self.name, union_members(message_type))
        self.initial = initial
        if replicas < 1:
            raise ValueError(f"{self.name}: replicas must be >= 1, got {replicas}")
        if write not in ("one", "majority", "all"):
            raise ValueError(f"{self.name}: write must be 'one', 'majority' or 'all', got {write!r}")
        if on_full not in ("refuse", "wait"):
            raise ValueError(f"{self.name}: on_full must be 'refuse' or 'wait', got {on_full!r}")
        if mailbox is not None and mailbox < 1:
            raise ValueError(f"{self.name}: mailbox must be None or >= 1, got {mailbox}")
        if not (durable is None or durable == "write" or isinstance(durable, timedelta)):
            raise ValueError(f"{self.name}: durable must be None, 'write' or a timedelta, got {durable!r}")
        if isinstance(durable, timedelta):  # the write-behind interval: zero or less would flush on every turn
            duration(durable, f"{self.name}: durable", positive=True)
        if backoff is not None and not isinstance(backoff, Backoff):
            raise TypeError(f"{self.name}: backoff must be None or a Backoff, not {type(backoff).__qualname__}")
        self.replicas = replicas
        self.write = write
        self.mailbox = mailbox
        self.on_full = on_full
        self.idle_after = seconds(idle_after, f"{self.name}: idle_after")
        self.ask_timeout = seconds(ask_timeout, f"{self.name}: ask_timeout", positive=True)
        self.write_timeout = seconds(write_timeout, f"{self.name}: write_timeout", positive=True)
        self.backoff = backoff
        self.durable = durable
        self.pinned = pinned
        self.__doc__ = body.__doc__
        self.__wrapped__ = body
        _REGISTRY[self.name] = self

    def __repr__(self) -> str:
        return f"<actor {self.name}>"


def _context_types(body: Callable[..., Any]) -> tuple[Any, Any]:
    """Read ``S`` and ``M`` from the body's ``ctx: Context[S, M]`` annotation."""
    from .context import Context

    params = list(inspect.signature(body).parameters)
    if len(params) != 1:
        raise TypeError(f"an actor body takes exactly one parameter (ctx), {body.__qualname__} takes {params}")
    hints = resolve_hints(body)
    annotation = hints.get(params[0])
    if annotation is None or get_origin(annotation) is not Context:
        raise SchemaError(f"{body.__qualname__}: annotate its parameter as Context[State, Message]")
    state_type, message_type = get_args(annotation)
    return state_type, message_type


@overload
def actor(body: Callable[[Any], Awaitable[None]], /) -> ActorType[Any, Any]: ...


@overload
def actor(
    *,
    initial: Any = ...,
    replicas: int = ...,
    write: WriteLevel = ...,
    mailbox: int | None = ...,
    on_full: OnFull = ...,
    idle_after: timedelta | float | None = ...,
    ask_timeout: timedelta | float | None = ...,
    write_timeout: timedelta | float | None = ...,
    backoff: Backoff | None = ...,
    durable: Durable = ...,
    pinned: bool = ...,
) -> Callable[[Callable[[Any], Awaitable[None]]], ActorType[Any, Any]]: ...


def actor(body: Callable[[Any], Awaitable[None]] | None = None, /, **options: Any) -> Any:
    """Define an actor type: ``@actor`` or ``@actor(initial=..., idle_after=..., ...)``."""
    if body is not None:
        return ActorType(body, **options)

    def decorate(fn: Callable[[Any], Awaitable[None]]) -> ActorType[Any, Any]:
        return ActorType(fn, **options)

    return decorate


def known_actor(name: str) -> ActorType[Any, Any]:
    """The actor type called ``name`` if this process has already defined it; never imports anything.

    The only way a name becomes a type: names arrive from the network (a routed message, a
    ref inside one, a replica's key, a page) or from the store, and none of them may make
    this process import a module. A program hosts a type by importing its module itself
    (``python -m casty node --module``, or an ordinary import).
    """
    found = _REGISTRY.get(name) if type(name) is str else None
    if found is None:
        raise UnknownActor(f"actor type {name!r} is not hosted here (no such @actor was defined in this process)")
    return found
