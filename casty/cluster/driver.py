"""A thin asyncio driver around the sans-I/O protocol cores, and the membership service on it.

The cores (``casty.protocol.membership``, ``replication``, ...) take inputs and return
outputs (``casty.protocol.sansio``). This module performs those outputs on an asyncio loop
and a ``Transport``, and nothing more: the cores decide, the driver only carries. The
simulator's ``VirtualLoop`` + ``SimEndpoint`` and the real loop + TCP transport run the very
same driver objects.

- ``Dispatcher``: one per transport. It owns the transport's frame handler, decodes every
  frame with the node's ``Wire`` and hands it to the driver registered for its channel.
  Frames that do not decode, or name a channel nobody serves, are dropped and counted
  (and reported as ``FrameRejected`` to the dispatcher's observer, if it has one): a bad
  peer never raises into the transport.
- ``CoreDriver``: one per core, the ``Performer`` of its outputs (``casty.protocol.sansio.perform``). ``Send`` -> ``transport.send(to, wire.encode(channel, frame))``;
  a ``Send`` to this very node goes through the same bytes but not the network: it is looped
  back with ``loop.call_soon`` into the dispatcher (so a core talking to its own node, like a
  replication owner to its local replica, gets a copy, never a shared object). ``SetTimer`` ->
  one loop timer per name (re-arming cancels the previous one; a time already past fires on
  the next loop turn); ``CancelTimer``; ``Report`` -> ``on_report(event)``. Inputs carry
  ``loop.time()``, the only clock the driver reads.
- ``MembershipService``: the membership core on a driver, with the queries the node needs
  (``members``, ``has_quorum``, ``serving``) and its ``MemberChanged`` reports sent to the
  casty observer port.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Generic, Protocol, TypeVar

from ..observer import Event
from ..ports import Observer, Transport
from ..protocol.membership import FRAMES as MEMBERSHIP_FRAMES
from ..protocol.gossip import Membership
from ..protocol.membership import MembershipConfig, MemberView, Status
from ..protocol.sansio import Output, perform
from ..protocol.wire import Wire, WireError, check_channel

__all__ = [
    "MEMBERSHIP_CHANNEL",
    "REPLICATION_CHANNEL",
    "SansIOCore",
    "FrameRejected",
    "Dispatcher",
    "CoreDriver",
    "MembershipService",
]

MEMBERSHIP_CHANNEL: Final = "m"
REPLICATION_CHANNEL: Final = "r"

Receiver = Callable[[str, Any], None]
"""What a dispatcher calls for each decoded frame of a channel: ``(source node, frame)``."""


class SansIOCore(Protocol):
    """What ``CoreDriver`` needs of a protocol core: frames and timer firings in, outputs out."""

    def receive(self, src: str, frame: object, now: float) -> Iterable[Output]: ...

    def timer(self, name: str, now: float) -> Iterable[Output]: ...


C = TypeVar("C", bound=SansIOCore)


@dataclass(frozen=True, slots=True)
class FrameRejected(Event):
    """A frame from ``src`` was dropped on arrival: ``reason`` is a ``WireError`` reason or ``"channel"`` (nobody serves it)."""

    kind: ClassVar[str] = "frame.rejected"
    src: str
    channel: str | None
    reason: str
    error: str


# ============================================================================ dispatcher ====


class Dispatcher:
    """Owns one transport's frame handler: decodes frames and routes them to drivers by channel."""

    _of: ClassVar[weakref.WeakKeyDictionary[Any, weakref.ref[Dispatcher]]] = weakref.WeakKeyDictionary()
    """Each transport's dispatcher, held weakly on both sides. A dispatcher refers to its transport, so a strong value
    would keep its own key (and the whole world around the transport) alive for ever: the transport's handler, a bound
    method of the dispatcher, is what keeps the dispatcher alive exactly as long as the transport."""

    def __init__(self, transport: Transport, wire: Wire, *, observer: Observer | None = None) -> None:
        """Take over ``transport``'s handler (a handler set before is replaced)."""
        self.transport: Final = transport
        self.wire: Final = wire
        self.observer = observer
        self._routes: dict[str, Receiver] = {}
        self.delivered = 0
        self.rejected = 0
        transport.set_handler(self.handle)

    @classmethod
    def of(cls, transport: Transport, wire: Wire, *, observer: Observer | None = None) -> Dispatcher:
        """The dispatcher of ``transport``, made on first use; every user of a transport must share one ``Wire``."""
        try:
            known = cls._of.get(transport)
        except TypeError:
            raise TypeError(
                f"{type(transport).__qualname__} cannot key a weak dictionary: build a Dispatcher yourself and pass it as dispatcher="
            ) from None
        existing = known() if known is not None else None
        if existing is None:
            existing = cls(transport, wire, observer=observer)
            cls._of[transport] = weakref.ref(existing)
        elif existing.wire is not wire:
            raise ValueError(f"the transport of {transport.node} is dispatched with another Wire: share one Wire per transport")
        elif existing.observer is None and observer is not None:
            existing.observer = observer
        return existing

    @property
    def node(self) -> str:
        return self.transport.node

    @property
    def channels(self) -> list[str]:
        return sorted(self._routes)

    def register(self, channel: str, receiver: Receiver) -> None:
        if channel in self._routes:
            raise ValueError(f"channel {channel!r} of {self.node} is served already")
        self._routes[channel] = receiver

    def unregister(self, channel: str, receiver: Receiver | None = None) -> None:
        current = self._routes.get(channel)
        if current is not None and (receiver is None or current == receiver):
            del self._routes[channel]

    def handle(self, src: str, data: bytes) -> None:
        """The transport's frame handler (and the loop-back of frames a node sends itself)."""
        try:
            envelope = self.wire.decode(data)
        except WireError as exc:
            self._reject(src, exc.channel, exc.reason, str(exc))
            return
        receiver = self._routes.get(envelope.channel)
        if receiver is None:
            self._reject(src, envelope.channel, "channel", f"no core serves channel {envelope.channel!r} on {self.node}")
            return
        self.delivered += 1
        receiver(src, envelope.frame)

    def _reject(self, src: str, channel: str | None, reason: str, error: str) -> None:
        self.rejected += 1
        if self.observer is not None:
            self.observer(FrameRejected(src, channel, reason, error))


# ============================================================================ driver ========


class CoreDriver(Generic[C]):
    """Performs a sans-I/O core's outputs on an asyncio loop and a transport, and feeds it frames and timers."""

    def __init__(
        self,
        core: C,
        *,
        channel: str,
        transport: Transport,
        wire: Wire,
        loop: asyncio.AbstractEventLoop | None = None,
        on_report: Callable[[Any], None],
        dispatcher: Dispatcher | None = None,
    ) -> None:
        """Serve ``channel`` of ``transport`` for ``core``; ``loop`` defaults to the running loop (so build it on its loop)."""
        self.core: Final[C] = core
        self.channel: Final = channel
        self.transport: Final = transport
        self.wire: Final = wire
        self.loop: Final = loop if loop is not None else asyncio.get_running_loop()
        self.on_report = on_report
        if dispatcher is None:
            dispatcher = Dispatcher.of(transport, wire)
        elif dispatcher.transport is not transport or dispatcher.wire is not wire:
            raise ValueError("the dispatcher given serves another transport or Wire")
        self.dispatcher: Final = dispatcher
        self.node: Final = transport.node
        self._timers: dict[str, asyncio.Handle] = {}
        self._closed = False
        self.sent = 0
        check_channel(channel)
        dispatcher.register(channel, self._receive)

    # --- inputs ------------------------------------------------------------------------

    def now(self) -> float:
        return self.loop.time()

    def _receive(self, src: str, frame: Any) -> None:
        if not self._closed:
            self.perform(self.core.receive(src, frame, self.loop.time()))

    def _fire(self, name: str, handle_box: list[asyncio.Handle]) -> None:
        if self._closed or self._timers.get(name) is not handle_box[0]:
            return  # replaced or cancelled after it was queued
        del self._timers[name]
        self.perform(self.core.timer(name, self.loop.time()))

    # --- outputs -----------------------------------------------------------------------

    def perform(self, outputs: Iterable[Output]) -> None:
        """Carry out a core's outputs, in order (after ``close`` they are ignored): ``casty.protocol.sansio.perform``."""
        perform(outputs, self)

    # The Performer methods (casty.protocol.sansio): one per output.

    def report(self, event: Any) -> None:
        self.on_report(event)

    def cancel_timer(self, name: str) -> None:
        handle = self._timers.pop(name, None)
        if handle is not None:
            handle.cancel()

    def send(self, to: str, frame: object) -> None:
        data = self.wire.encode(self.channel, frame)
        self.sent += 1
        if to == self.node:
            self.loop.call_soon(self.dispatcher.handle, self.node, data)
        else:
            self.transport.send(to, data)

    def set_timer(self, name: str, at: float) -> None:
        old = self._timers.pop(name, None)
        if old is not None:
            old.cancel()
        box: list[asyncio.Handle] = []
        if at <= self.loop.time():
            handle: asyncio.Handle = self.loop.call_soon(self._fire, name, box)
        else:
            handle = self.loop.call_at(at, self._fire, name, box)
        box.append(handle)
        self._timers[name] = handle

    # --- lifecycle ---------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def timers(self) -> list[str]:
        """Names of the armed timers, sorted."""
        return sorted(self._timers)

    def close(self) -> None:
        """Cancel every timer and stop serving the channel; later frames and outputs are ignored. The transport stays open."""
        if self._closed:
            return
        self._closed = True
        for name in sorted(self._timers):
            self._timers[name].cancel()
        self._timers.clear()
        self.dispatcher.unregister(self.channel, self._receive)

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"timers={self.timers}"
        return f"<CoreDriver {self.node}/{self.channel} {type(self.core).__name__} {state}>"


# ============================================================================ membership ====


class MembershipService:
    """The membership core of one node, driven on its loop and transport; changes go to the observer."""

    def __init__(
        self,
        node: str,
        incarnation: int,
        seeds: Sequence[str],
        config: MembershipConfig | None,
        transport: Transport,
        wire: Wire,
        observer: Observer,
        *,
        loop: asyncio.AbstractEventLoop | None = None,
        channel: str = MEMBERSHIP_CHANNEL,
        recall: bool = False,
    ) -> None:
        """Start membership at once (hello to the seeds, heartbeat armed); build it on the node's loop.

        ``incarnation`` must grow with every life of the node (a restarted node uses a higher one).
        ``recall``: the node has a disk; it learns no view before ``recall`` gave what the disk remembers.
        """
        if transport.node != node:
            raise ValueError(f"MembershipService of {node!r} given the transport of {transport.node!r}")
        wire.require(MEMBERSHIP_FRAMES, who="membership")
        self.observer = observer
        self.core: Final = Membership(node, incarnation, seeds, config, recall=recall)
        self.driver: Final = CoreDriver(
            self.core,
            channel=channel,
            transport=transport,
            wire=wire,
            loop=loop,
            on_report=self._report,
            dispatcher=Dispatcher.of(transport, wire, observer=observer),
        )
        self.driver.perform(self.core.start(self.driver.now()))

    def _report(self, event: Any) -> None:
        if isinstance(event, Event):
            self.observer(event)

    # --- queries -----------------------------------------------------------------------

    @property
    def node(self) -> str:
        return self.core.node

    @property
    def incarnation(self) -> int:
        return self.core.incarnation

    def members(self) -> list[MemberView]:
        """Every member not removed (this node included), sorted by node id."""
        return self.core.members()

    def status(self, node: str) -> Status | None:
        return self.core.status(node)

    def has_quorum(self) -> bool:
        """Joined, and more than half of the members alive: this node may own keys."""
        return self.core.has_quorum()

    def serving(self, node: str) -> bool:
        """``node`` is alive or suspect: it may own keys (the placement's ``alive`` predicate)."""
        return self.core.serving(node)

    def ring_nodes(self) -> tuple[str, ...]:
        return self.core.ring_nodes()

    # --- lifecycle ---------------------------------------------------------------------

    def recall(self, members: Sequence[tuple[str, int]]) -> None:
        """Give the core the member list the disk remembers (membership's "The remembered view")."""
        self.driver.perform(self.core.recall(members, self.driver.now()))

    def leave(self) -> None:
        """Leave in order (tell every member), then stop."""
        self.driver.perform(self.core.leave(self.driver.now()))
        self.driver.close()

    def close(self) -> None:
        """Stop without a word (as a crash looks to the others): timers cancelled, channel released."""
        self.driver.close()

    def __repr__(self) -> str:
        alive = sum(1 for m in self.members() if m.status == "alive")
        return f"<MembershipService {self.node}#{self.incarnation} alive={alive} quorum={self.has_quorum()}>"

