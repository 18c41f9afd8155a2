"""``Context[S, M]``: what one run of a body sees of its key.

A context is bound to one run (one lease). When the run is replaced — by ``become``, a
restart after failure, a cancelled ask, or a later activation — the old context keeps
working for reads but its writes are refused. Local variables of the body belong to the
run as well; what must survive goes in ``ctx.state``.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .ref import Askable, EntityRef, Ref
from .schedules import Schedule
from .state import State

if TYPE_CHECKING:
    from .activation import Activation
    from .actor import ActorType
    from .system import ActorSystem

__all__ = ["Context", "Inbox"]

S = TypeVar("S")
M = TypeVar("M")
R = TypeVar("R")
T = TypeVar("T")

_MISSING: Any = object()


class Inbox(Generic[M]):
    """The mailbox as an async iterator: one reader, one message at a time.

    Reading the next message marks the previous one as handled. Iteration ends when the
    activation goes idle, is released or stopped, or a ``become`` takes effect.
    """

    __slots__ = ("_activation", "_lease")

    def __init__(self, activation: Activation, lease: int) -> None:
        self._activation = activation
        self._lease = lease

    def __aiter__(self) -> AsyncIterator[M]:
        return self

    def __anext__(self) -> Awaitable[M]:
        return self._activation.next_message(self._lease)


class Context(Generic[S, M]):
    """The key's identity, state, inbox and tools, for one run of its body."""

    __slots__ = ("_activation", "_lease", "key", "state", "inbox", "self", "system")

    def __init__(self, activation: Activation, lease: int) -> None:
        self._activation = activation
        self._lease = lease
        self.key: str = activation.key
        self.state: State[S] = State(activation, lease)
        self.inbox: Inbox[M] = Inbox(activation, lease)
        self.self: EntityRef[M] = activation.ref
        self.system: ActorSystem = activation.system

    # --- behavior --------------------------------------------------------------------

    async def become(self, behavior: ActorType[Any, M], state: Any = _MISSING) -> None:
        """Switch the key to ``behavior`` (same messages; its own state type), at the next inbox read.

        Recorded in the ``@behavior`` page with ``state`` (if given) in one write. From now
        on this context no longer owns state writes; schedules are kept.
        """
        await self._activation.become(self._lease, behavior, state, has_state=state is not _MISSING)

    # --- persisted schedules ---------------------------------------------------------

    async def schedule(self, name: str, delay: timedelta, interval: timedelta | None, message: M) -> Schedule[M]:
        """Create or replace the schedule ``name``: first due after ``delay``, then every ``interval`` (None: once)."""
        return await self._activation.add_schedule(self._lease, self, name, delay, interval, message)

    @property
    def schedules(self) -> Mapping[str, Schedule[M]]:
        """The key's live schedules by name, in creation order."""
        return self._activation.schedule_handles(self)

    # --- work whose results come back as messages ----------------------------------

    def to_self(
        self,
        awaitable: Awaitable[T],
        mapper: Callable[[T], M] | None = None,
        *,
        failed: Callable[[BaseException], M] | None = None,
    ) -> None:
        """Run ``awaitable`` beside the body and deliver its result (through ``mapper``) to this key's inbox.

        With ``failed``, an exception becomes a message too; without it, the failure is
        reported to the observer as a dropped message. The work belongs to this run.
        """
        self._activation.spawn_bridge(self._lease, awaitable, mapper, failed)

    def ask(
        self,
        target: Ref[Any],
        message: Askable[R],
        mapper: Callable[[R], M],
        *,
        failed: Callable[[BaseException], M] | None = None,
    ) -> None:
        """Ask ``target`` without blocking the inbox; the mapped reply arrives as a message."""
        self._activation.spawn_bridge(self._lease, target.ask(message), mapper, failed)

    def merge(self, source: AsyncIterable[M]) -> None:
        """Deliver every item of ``source`` into this key's inbox, for as long as this run lasts."""
        self._activation.spawn_merge(self._lease, source)

    def __repr__(self) -> str:
        return f"<Context {self._activation.type.name}[{self.key!r}] lease={self._lease}>"
