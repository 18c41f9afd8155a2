"""Routing (channel ``"d"``): a message for a key goes to the key's owner, wherever the sender is.

The owner runs the key; its state is replicated (``casty.cluster.replicas``): a new owner
(after the old one is declared dead) acquires the key's newest confirmed state.

Frames (they cross the transport as bytes, see ``casty.protocol.wire``):

- ``Deliver(request, actor, key, message, reply_node, reply_request, origin)``: ``message``
  is the codec's bytes of the message (an ask's ``reply_to`` inside names the asking node
  and its request, which ``reply_node``/``reply_request`` repeat); ``request`` is the
  sender's routing id, echoed by a ``WrongOwner``.
- ``ScheduledDeliver(..., schedule, due_us, fired_us, skipped)``: a ``Deliver`` (a subclass:
  routed, retried and accepted the same way) of a node schedule's tick, with its occurrence
  (``casty._core.occurrence``), so the owner queues it as the firing node would have and the
  body reads ``ctx.occurrence`` there. Its own tag: every other ``Deliver`` keeps its bytes.
  The occurrence is checked by ``check_occurrence`` when the frame is built (the sender) and
  when it is decoded (``WireError(reason="body")`` for one no firing makes).
- ``Reply(request, value)``: the value a body replied to an ask of another node, encoded
  with ``codec.encode_value``; the asker decodes it into the ask's reply type ``R`` (read
  from its ``Askable[R]`` message, see ``casty._core.ref.reply_type``), so a cross-node ask returns
  what a local one does, and a reply that does not fit ``R`` fails that ask with ``SchemaError``.
- ``Failed(request, kind, text, actor, key, error_type, error_repr, message_type)``: the ask
  failed on the answering node, and ``kind`` says how, so that the asker raises what a local
  ask raises:
  ``"failed"`` (the body raised: ``ActorFailed`` for ``actor[key]``, carrying a
  ``RemoteError`` with the original type name, text and repr), ``"unavailable"`` and
  ``"fenced"`` (``Unavailable`` / ``Fenced`` with ``text``), ``"schema"`` (the reply could not
  be encoded, or the message not decoded, there: ``SchemaError``), ``"unknown"`` (that node
  has no such actor type: ``UnknownActor``) and ``"too_large"`` (the reply's frame would
  exceed the frame limit, so it was never sent: ``MessageTooLarge``). Texts are cut at
  ``MAX_TEXT`` characters.
- ``WrongOwner(request, owner)``: "I do not own that key" and whom the answerer thinks owns it.

``Router`` is a thin asyncio component (not a sans-I/O core: the decisions are few and all
here): one per node, on the node's loop and transport. The system asks it to ``route`` a
message whose owner is not this node; it sends ``Deliver`` to the owner its view names and,
on ``WrongOwner`` (or while no owner is known), retries after 10 ms, doubling to 1 s, until
``write_timeout`` has passed since the first attempt: then ``on_failed`` (the system fails the
ask with ``Unavailable``, or drops the tell with a ``MessageDropped`` event). A ``Deliver`` is
accepted (``on_deliver``) only by the node its own view names owner; anyone else answers
``WrongOwner``; a ``Deliver`` for an actor type the receiver cannot look up goes to
``on_refused`` (the node fails the ask with ``Failed(kind="unknown")``). A ``Deliver`` lost
on the way (the owner crashed) is not retried: delivery is at most once, and the ask times
out (``TimeoutError``). A copy of a ``Deliver`` the owner already accepted (a duplicated frame,
or a retry re-armed by a duplicated ``WrongOwner``) is dropped and counted in ``duplicates``:
the owner remembers the ``(sender, request)`` pairs it accepted in a bounded window
(``casty.protocol.dedupe``, whose docstring says the window's limits).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal

from .._core.occurrence import check_occurrence
from ..errors import CastyError, MessageTooLarge
from ..ports import Transport
from .driver import Dispatcher
from ..protocol.dedupe import DedupeWindow
from ..protocol.handoff import FRAMES as HANDOFF_FRAMES
from ..protocol.limits import check_frame, frame_limit
from ..protocol.membership import FRAMES as MEMBERSHIP_FRAMES
from .replicas import FRAMES as BATCH_FRAMES
from ..protocol.replication import FRAMES as REPLICATION_FRAMES
from ..protocol.wire import Wire

__all__ = [
    "ROUTING_CHANNEL",
    "Deliver",
    "ScheduledDeliver",
    "Reply",
    "Failed",
    "FailKind",
    "MAX_TEXT",
    "clip",
    "WrongOwner",
    "FRAMES",
    "CLUSTER_WIRE",
    "FIRST_RETRY",
    "MAX_RETRY",
    "next_retry",
    "Router",
]

ROUTING_CHANNEL: Final = "d"
FIRST_RETRY: Final = 0.010
MAX_RETRY: Final = 1.0
MAX_TEXT: Final = 4096
"""The longest error text a ``Failed`` frame carries (a body may raise with a huge message; the frame stays small)."""


@dataclass(frozen=True, slots=True)
class Deliver:
    """Run ``message`` (codec bytes) on ``actor[key]`` if you own it; ``request`` is the sender's routing id."""

    request: int
    actor: str
    key: str
    message: bytes
    reply_node: str | None = None
    reply_request: int | None = None
    origin: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduledDeliver(Deliver):
    """A ``Deliver`` of a node schedule's tick and its occurrence: ``schedule`` (the reference), ``due_us`` (the tick),
    ``fired_us`` (the firing node's wall time at firing), ``skipped`` (what its catch-up skipped)."""

    schedule: str
    due_us: int
    fired_us: int
    skipped: int

    def __post_init__(self) -> None:
        check_occurrence(self.schedule, self.due_us, self.fired_us, self.skipped)


@dataclass(frozen=True, slots=True)
class Reply:
    """The reply to ask ``request`` of the receiving node: ``value`` as codec bytes."""

    request: int
    value: bytes


FailKind = Literal["failed", "unavailable", "fenced", "schema", "unknown", "too_large"]
"""How an ask failed on the answering node; the wire refuses any other kind (msgspec checks the Literal)."""


@dataclass(frozen=True, slots=True)
class Failed:
    """Ask ``request`` of the receiving node failed on the answering node (``kind``: how; ``text``: the error's message).

    For ``kind="failed"`` (the body raised), ``actor``/``key`` name the key whose body raised,
    ``message_type`` the class name of the message it raised on, and
    ``error_type``/``error_repr`` the exception (``text`` is its ``str``).
    """

    request: int
    kind: FailKind
    text: str
    actor: str = ""
    key: str = ""
    error_type: str = ""
    error_repr: str = ""
    message_type: str = ""


_CUT: Final = "... (truncated)"


def clip(text: str) -> str:
    """``text`` cut to ``MAX_TEXT`` characters, saying so."""
    if len(text) <= MAX_TEXT:
        return text
    return text[: MAX_TEXT - len(_CUT)] + _CUT


@dataclass(frozen=True, slots=True)
class WrongOwner:
    """The answer to a ``Deliver`` sent to a node that does not own the key; ``owner`` is its view of who does."""

    request: int
    owner: str | None


FRAMES: Final[tuple[type, ...]] = (Deliver, ScheduledDeliver, Reply, Failed, WrongOwner)

CLUSTER_WIRE: Final = Wire((*MEMBERSHIP_FRAMES, *FRAMES, *REPLICATION_FRAMES, *HANDOFF_FRAMES, *BATCH_FRAMES))
"""The Wire of a cluster node: membership, routing and replication frames (one per process, shared by its nodes)."""


def next_retry(delay: float) -> float:
    """The backoff after ``delay``: doubling, capped at ``MAX_RETRY``."""
    return min(delay * 2, MAX_RETRY)


class _Route:
    __slots__ = ("frame", "data", "deadline", "delay", "waiting", "handle")

    def __init__(self, frame: Deliver, data: bytes, deadline: float) -> None:
        self.frame = frame
        self.data = data  # the frame encoded: every attempt sends the same bytes
        self.deadline = deadline
        self.delay = FIRST_RETRY
        self.waiting = False  # a retry is armed (not sent yet)
        self.handle: asyncio.Handle | None = None


OwnerOf = Callable[[str, str], "str | None"]


class Router:
    """Sends messages to their key's owner, retries on ``WrongOwner``, accepts what this node owns."""

    def __init__(
        self,
        node: str,
        transport: Transport,
        wire: Wire,
        dispatcher: Dispatcher,
        loop: asyncio.AbstractEventLoop,
        *,
        owner_of: OwnerOf,
        on_deliver: Callable[[Deliver], None],
        on_reply: Callable[[str, Reply | Failed], None],
        on_failed: Callable[[Deliver, str], None],
        write_timeout: float,
        on_refused: Callable[[str, Deliver, CastyError], None] | None = None,
    ) -> None:
        wire.require(FRAMES, who="routing")
        self.node: Final = node
        self.transport: Final = transport
        self.wire: Final = wire
        self.dispatcher: Final = dispatcher
        self.loop: Final = loop
        self.owner_of = owner_of
        self.on_deliver = on_deliver
        self.on_reply = on_reply
        self.on_failed = on_failed
        self.on_refused = on_refused
        self.write_timeout = write_timeout
        self.max_frame: Final = frame_limit(transport)
        self._routes: dict[int, _Route] = {}
        self._accepted = DedupeWindow()  # the (sender, request) pairs of Delivers accepted here (the dedupe rule)
        self._closed = False
        self.sent = 0
        self.retries = 0
        dispatcher.register(ROUTING_CHANNEL, self._receive)

    # --- sending -------------------------------------------------------------------------

    def route(self, frame: Deliver) -> None:
        """Get ``frame`` to its key's owner (this node included, should the view change meanwhile).

        The frame is encoded once, here, and checked against the transport's frame limit:
        one too large raises ``MessageTooLarge`` to the caller of ``tell``/``ask`` at once,
        where the transport would drop it on every attempt and leave an ask to time out.
        """
        data = self.wire.encode(ROUTING_CHANNEL, frame)
        check_frame(len(data), self.max_frame, f"{frame.actor}[{frame.key!r}]")
        entry = _Route(frame, data, self.loop.time() + self.write_timeout)
        self._routes[frame.request] = entry
        self._attempt(entry)

    def reply(self, node: str, frame: Reply | Failed) -> None:
        """Answer ask ``frame.request`` of ``node`` (at most once: a lost answer leaves the ask to time out).

        A reply whose frame exceeds the frame limit would be dropped by the transport and its
        ask left to time out; it is answered ``Failed(kind="too_large")`` instead, so the asker
        raises ``MessageTooLarge`` at once, as its own request would have.
        """
        if self._closed:
            return
        data = self.wire.encode(ROUTING_CHANNEL, frame)
        try:
            check_frame(len(data), self.max_frame, f"{self.node}: the reply to ask {frame.request} of {node}")
        except MessageTooLarge as exc:
            data = self.wire.encode(ROUTING_CHANNEL, Failed(frame.request, "too_large", clip(str(exc))))
        self.sent += 1
        self.transport.send(node, data)

    def forget(self, request: int) -> None:
        """Stop caring about ``request`` (its ask completed or was given up)."""
        entry = self._routes.pop(request, None)
        if entry is not None and entry.handle is not None:
            entry.handle.cancel()

    @property
    def in_flight(self) -> int:
        return len(self._routes)

    @property
    def duplicates(self) -> int:
        """Copies of already accepted ``Deliver`` frames dropped here (the dedupe rule)."""
        return self._accepted.duplicates

    def _send(self, to: str, frame: object) -> None:
        if not self._closed:
            self.sent += 1
            self.transport.send(to, self.wire.encode(ROUTING_CHANNEL, frame))

    def _attempt(self, entry: _Route) -> None:
        entry.waiting = False
        entry.handle = None
        if self._closed or self._routes.get(entry.frame.request) is not entry:
            return
        frame = entry.frame
        owner = self.owner_of(frame.actor, frame.key)
        if owner == self.node:
            del self._routes[frame.request]
            self.on_deliver(frame)
        elif owner is None:
            self._retry(entry, "no owner: this node has no quorum or sees no replica alive")
        else:
            self.sent += 1
            self.transport.send(owner, entry.data)
            # Nothing confirms a delivery: forget the route once no WrongOwner can matter any more.
            entry.handle = self.loop.call_at(entry.deadline + MAX_RETRY, self._expire, entry)

    def _retry(self, entry: _Route, reason: str) -> None:
        if entry.handle is not None:
            entry.handle.cancel()
        now = self.loop.time()
        if now + entry.delay > entry.deadline:
            self._routes.pop(entry.frame.request, None)
            entry.handle = None
            self.on_failed(entry.frame, f"{reason} (gave up after {self.write_timeout:g} s of retries)")
            return
        self.retries += 1
        entry.waiting = True
        entry.handle = self.loop.call_later(entry.delay, self._attempt, entry)
        entry.delay = next_retry(entry.delay)

    def _expire(self, entry: _Route) -> None:
        if self._routes.get(entry.frame.request) is entry and not entry.waiting:
            del self._routes[entry.frame.request]

    # --- receiving -----------------------------------------------------------------------

    def _receive(self, src: str, frame: object) -> None:
        if self._closed:
            return
        if isinstance(frame, Deliver):
            try:
                owner = self.owner_of(frame.actor, frame.key)
            except CastyError as exc:  # an actor type this node cannot look up (UnknownActor)
                if self.on_refused is not None:
                    self.on_refused(src, frame, exc)
                return
            if owner == self.node:
                if self._accepted.admit(src, frame.request):
                    self.on_deliver(frame)
            else:
                self._send(src, WrongOwner(frame.request, owner))
        elif isinstance(frame, Reply | Failed):
            self.on_reply(src, frame)
        elif isinstance(frame, WrongOwner):
            entry = self._routes.get(frame.request)
            if entry is not None and not entry.waiting:
                self._retry(entry, f"wrong owner ({src} names {frame.owner or 'nobody'})")

    # --- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        """Stop serving the channel and drop every pending route (their asks end with the system)."""
        if self._closed:
            return
        self._closed = True
        for entry in self._routes.values():
            if entry.handle is not None:
                entry.handle.cancel()
        self._routes.clear()
        self.dispatcher.unregister(ROUTING_CHANNEL, self._receive)
