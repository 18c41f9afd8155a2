"""Refs: values that name where a message goes, and the ``Askable`` message base.

A ref does not point at a body or a mailbox. It names a logical target — an entity
(actor type + key), the reply slot of one pending ask, or nobody — so it can be copied,
stored in state, encoded into a message and decoded on another node, and still mean the
same thing. A ref is bound to the system that made or decoded it; that system routes it.
"""

from __future__ import annotations

import dataclasses
import sys
import typing
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ForwardRef, Generic, TypeVar, get_args, get_origin

if TYPE_CHECKING:
    from .system import ActorSystem

__all__ = ["Ref", "EntityRef", "ReplyRef", "NobodyRef", "NOBODY", "Askable", "reply_type", "with_reply_to"]

M = TypeVar("M")
R = TypeVar("R")


class Ref(Generic[M]):
    """Where messages of type ``M`` can be sent. ``tell`` is at most once; ``ask`` waits for a reply."""

    __slots__ = ()

    def tell(self, message: M) -> None:
        raise NotImplementedError

    async def ask(self, message: Askable[R]) -> R:
        raise NotImplementedError


class EntityRef(Ref[M]):
    """The ref of an entity: an actor type name and a key, routed by the system that holds it."""

    __slots__ = ("actor", "key", "_system")

    def __init__(self, system: ActorSystem | None, actor: str, key: str) -> None:
        self.actor = actor
        self.key = key
        self._system = system

    def tell(self, message: M) -> None:
        system = self._system
        if system is None:
            _bound(system, self)  # raises NotStarted
        else:
            system.tell(self, message)

    def ask(self, message: Askable[R]) -> Coroutine[Any, Any, R]:
        """The system's ask coroutine itself: a coroutine of our own around it would cost every ask a frame."""
        system = self._system
        if system is None:
            return _unbound_ask(self)
        return system.ask(self, message)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EntityRef) and other.actor == self.actor and other.key == self.key

    def __hash__(self) -> int:
        return hash((self.actor, self.key))

    def __repr__(self) -> str:
        return f"Ref({self.actor}[{self.key!r}])"


class ReplyRef(Ref[M]):
    """The reply slot of one pending ask on one node; telling it completes that ask (once)."""

    __slots__ = ("node", "request", "_system", "expects")

    def __init__(self, system: ActorSystem | None, node: str, request: int, expects: Any = Any) -> None:
        self.node = node
        self.request = request
        self._system = system
        # The R of the Askable[R] this slot answers (``Any``: unknown, no check): a reply of
        # another type fails the replying body at once, on its node, as on the asker's.
        self.expects = expects

    def tell(self, message: M) -> None:
        system = self._system
        if system is None:
            _bound(system, self)  # raises NotStarted
        else:
            system.reply(self, message)

    async def ask(self, message: Askable[R]) -> R:
        raise TypeError("a reply ref answers one ask; it cannot be asked")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ReplyRef) and other.node == self.node and other.request == self.request

    def __hash__(self) -> int:
        return hash((self.node, self.request))

    def __repr__(self) -> str:
        return f"ReplyRef({self.node}#{self.request})"


class NobodyRef(Ref[Any]):
    """A ref that reaches nobody: the ``reply_to`` of an Askable that was told, not asked."""

    __slots__ = ()

    def tell(self, message: Any) -> None:
        return None

    async def ask(self, message: Askable[R]) -> R:
        raise TypeError("nobody cannot be asked")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NobodyRef)

    def __hash__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return "NOBODY"


NOBODY: NobodyRef = NobodyRef()


def _bound(system: ActorSystem | None, ref: Ref[Any]) -> ActorSystem:
    if system is None:
        from ..errors import NotStarted

        raise NotStarted(f"{ref!r} is not bound to an actor system")
    return system


async def _unbound_ask(ref: Ref[Any]) -> Any:
    """The ask of a ref with no system: fails when awaited, as an ask coroutine would."""
    return _bound(None, ref)


@dataclass(frozen=True)
class Askable(Generic[R]):
    """Base of messages that expect a reply of type ``R``.

    ``ask`` fills ``reply_to`` with the ref of its pending reply; the body answers with
    ``msg.reply_to.tell(value)``, now or later, from wherever the ref travelled. Told
    instead of asked, ``reply_to`` is ``NOBODY`` and the answer goes nowhere.
    """

    reply_to: Ref[R] = field(default=NOBODY, kw_only=True, repr=False, compare=False)


A = TypeVar("A", bound=Askable[Any])


_REPLY_TYPES: dict[type, Any] = {}
"""``reply_type`` per message class (keyed by the class object: looked up, never iterated)."""


def reply_type(cls: type) -> Any:
    """The ``R`` of a message class that is an ``Askable[R]``, or ``Any`` where the class names none.

    An ask that crosses nodes gets its reply as bytes; the asker decodes them into ``R`` so
    that a remote ask returns what a local one does (a dataclass, not a dict). ``R`` is read
    from the class's generic bases, through generic subclasses in between
    (``class Get(Query[Item])`` with ``class Query(Askable[T], Generic[T])`` gives ``Item``)
    and plain subclasses (``class Sub(Get)``). ``Any`` is the explicit fallback, and the
    reply then arrives as plain msgpack values (dicts, lists): for a bare ``Askable``
    subclass, ``Askable[Any]``, a type variable left unbound, or a string annotation that
    does not resolve in the module that wrote it.
    """
    found = _REPLY_TYPES.get(cls, _UNSET)
    if found is _UNSET:
        found = _REPLY_TYPES[cls] = _closed(_reply_of(cls, {}))
    return found


_UNSET: Any = object()


def _reply_of(cls: type, bindings: dict[Any, Any]) -> Any:
    """``R`` as declared by ``cls`` or its bases, with ``bindings`` for ``cls``'s own type parameters."""
    for base in cls.__dict__.get("__orig_bases__", cls.__bases__):
        origin = get_origin(base)
        if origin is None:
            if base is Askable:
                return Any  # a bare Askable: no R named
            if isinstance(base, type) and issubclass(base, Askable):
                return _reply_of(base, {})
            continue
        if not (isinstance(origin, type) and issubclass(origin, Askable)):
            continue
        args = tuple(_resolve(_substitute(arg, bindings), cls) for arg in get_args(base))
        if origin is Askable:
            return args[0] if args else Any
        params = getattr(origin, "__parameters__", ())
        return _reply_of(origin, dict(zip(params, args)))
    return Any


def _substitute(arg: Any, bindings: dict[Any, Any]) -> Any:
    if isinstance(arg, TypeVar):
        return bindings.get(arg, arg)
    params = getattr(arg, "__parameters__", None) if get_origin(arg) is not None else None  # list[T], not a bare class
    if params and bindings:
        try:
            return arg[tuple(bindings.get(p, p) for p in params)]
        except TypeError:
            return arg
    return arg


def _resolve(arg: Any, owner: type) -> Any:
    """A string (or ``ForwardRef``) argument evaluated in the module of the class that wrote it; ``Any`` if it does not resolve."""
    if isinstance(arg, str):
        arg = ForwardRef(arg)
    if not isinstance(arg, ForwardRef):
        return arg
    module = sys.modules.get(owner.__module__)

    def probe() -> None: ...

    probe.__annotations__ = {"return": arg}
    try:
        return typing.get_type_hints(probe, globalns=vars(module) if module is not None else {})["return"]
    except Exception:  # NameError, SyntaxError: an annotation that names nothing here
        return Any


def _closed(annotation: Any) -> Any:
    """``annotation``, or ``Any`` if a type variable is still open in it (nothing can decode into ``T``),
    or if it is ``object`` (any value is one; the codec decodes into ``Any``, not ``object``)."""
    if annotation is object:
        return Any
    if isinstance(annotation, TypeVar) or (get_origin(annotation) is not None and getattr(annotation, "__parameters__", None)):
        return Any
    return annotation


def with_reply_to(message: A, reply_to: Ref[Any]) -> A:
    """A copy of ``message`` whose ``reply_to`` is ``reply_to`` (the caller's message is never changed).

    ``dataclasses.replace`` re-runs ``__init__`` and walks the fields on every call; an ask
    only needs a shallow copy with one field changed, so copy the instance attributes
    directly (falling back to ``replace`` for slotted dataclasses). They are set one by one
    rather than through the copy's ``__dict__``: CPython keeps the attributes of an object
    whose ``__dict__`` was never asked for inline, without a dict object, and the message a
    body holds in its loop variable is then one object fewer for the garbage collector.
    """
    attributes = getattr(message, "__dict__", None)
    if attributes is None:
        return dataclasses.replace(message, reply_to=reply_to)
    copy: A = object.__new__(type(message))
    for name, value in attributes.items():
        _set_attribute(copy, name, reply_to if name == "reply_to" else value)
    if "reply_to" not in attributes:
        _set_attribute(copy, "reply_to", reply_to)
    return copy


_set_attribute = object.__setattr__
"""Sets an attribute past a frozen dataclass's ``__setattr__``, as ``__init__`` itself does."""
