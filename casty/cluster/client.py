"""Talking to a running cluster from outside it: a gateway on every node, and ``ClusterClient``.

Why a gateway. A program outside the cluster should not have to be a member: a member is
on the ring and would own keys. Nor should it speak the routing protocol itself, which
needs the ring, retries on ``WrongOwner`` and the cluster's view of who is alive. So a client
sends a request to any node (a *gateway*), and the gateway does what its own code would
do: ``system.ref(type, key)`` then ``ask`` or ``tell``, routed to the key's owner by the
cluster, with the cluster's retries and write timeouts. The gateway answers with the reply
value or the error, by type name.

Frames. Client frames ride on the node's ``TcpTransport`` beside the cluster's own. They
are ``Wire`` frames (channel ``"client"``) preceded by one marker byte, ``0xC1``, a byte
msgpack never uses: no cluster frame (a msgpack array) can start with it, so the node's
transport tells the two apart from the first byte (``casty.cluster.node.AddressedTransport``)
and the cluster's dispatcher never sees a client frame.

- ``Call(request, actor, key, message, fields, ask, timeout)``: run message class
  ``message`` (its ``__qualname__``, or ``module:qualname`` when two classes of the type's
  union share a qualname) built from ``fields`` (plain msgpack values: refs as
  ``["@e", actor, key]``) on ``actor[key]``. An ask waits at most ``timeout`` seconds for
  the reply; a tell is answered at once, once the gateway has queued it (not delivered:
  a tell is at most once, as everywhere in casty).
- ``Where(request, actor, key)``: the gateway's view of the key's owner and replicas.
- ``Members(request)``: the gateway's view of the membership.
- ``Result(request, value, error, reason)``: ``value`` as plain data (dataclasses become
  maps, refs lists), or ``error``, the exception's class name, and ``reason``, its text.

A gateway serves only the actor types its node hosts (the ``--module`` types): a type name
from the network is never imported. Bad input (unknown type, message class, field, a field
of the wrong type, a tell-only message asked) is answered with a ``SchemaError`` or
``UnknownActor`` naming it; the node keeps running.

Client identity. Connections are one-way (see ``casty.cluster.tcp``): the gateway answers on
its own connection to the client, so the client listens too, and its id is its address
(``HOST:PORT``, like a node's, so the gateway can dial it back from the id alone).

Failover and at-most-once. ``ClusterClient`` sends each request to one gateway, the first
of its seeds that it has not seen fail. A request is sent again to the next seed only when
it provably never left this process: the gateway could not be dialed (``ConnectFailed``:
the transport drops the frames queued for it) and no connection to it had been up since
the request was queued. Once a request may have reached a gateway, it is never sent
twice: with no reply it ends in ``TimeoutError``, and the caller decides whether a retry is
safe. That rule lives in ``ClientCore``, sans I/O, fed with the transport's events.

Usage::

    async with ClusterClient(["127.0.0.1:7001", "127.0.0.1:7002"]) as client:
        count = await client.ask("app:counter", "k1", "Inc")
        await client.tell("app:counter", "k1", "Add", {"amount": 5})
        where = await client.placement("app:counter", "k1")   # {"owner": ..., "replicas": [...]}

and from a shell, ``python -m casty ask|tell|placement|members --seeds ...`` (``casty.__main__``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import socket
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import msgspec

from .._core.actor import ActorType
from .._core.codec import Codec, type_tag
from ..errors import (
    ActorFailed,
    CastyError,
    ConfigurationError,
    Fenced,
    InvalidIdentity,
    MailboxFull,
    MessageTooLarge,
    NotStarted,
    ReentrancyError,
    SchemaError,
    Unavailable,
    UnknownActor,
)
from ..observer import Event
from .._core.ref import Askable
from ..protocol.limits import MAX_FRAME, check_frame
from .addresses import Address, format_address, node_id, parse_address
from .tcp import ConnectFailed, ConnectionLost, TcpTransport, secret_bytes
from ..protocol.wire import Wire, WireError

if TYPE_CHECKING:
    from .._core.system import ActorSystem

__all__ = [
    "MARK",
    "CLIENT_CHANNEL",
    "Call",
    "Where",
    "Members",
    "Result",
    "CLIENT_FRAMES",
    "CLIENT_WIRE",
    "encode_client_frame",
    "decode_client_frame",
    "is_client_frame",
    "RemoteError",
    "error_from",
    "Gateway",
    "Send",
    "Failed",
    "ClientCore",
    "ClusterClient",
]

log = logging.getLogger("casty.client")

MARK: Final = b"\xc1"
"""The first byte of every client frame: msgpack never uses 0xC1, so no cluster frame starts with it."""

CLIENT_CHANNEL: Final = "client"
MAX_TIMEOUT: Final = 3600.0
"""The longest ask a client may ask a gateway to wait for (seconds)."""

GRACE: Final = 1.0
"""How much longer than an ask's timeout a client waits for the gateway's answer (it answers TimeoutError itself)."""


# --- frames --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Call:
    """Build message class ``message`` from ``fields`` and ask (or tell) it to ``actor[key]``."""

    request: int
    actor: str
    key: str
    message: str
    fields: dict[str, Any] = field(default_factory=dict)
    ask: bool = True
    timeout: float = 10.0


@dataclass(frozen=True, slots=True)
class Where:
    """The gateway's view of ``actor[key]``'s owner and replicas."""

    request: int
    actor: str
    key: str


@dataclass(frozen=True, slots=True)
class Members:
    """The gateway's view of the membership."""

    request: int


@dataclass(frozen=True, slots=True)
class Result:
    """The answer to request ``request``: ``value`` (plain data), or ``error`` (a class name) and ``reason``."""

    request: int
    value: Any = None
    error: str | None = None
    reason: str = ""


CLIENT_FRAMES: Final[tuple[type, ...]] = (Call, Where, Members, Result)
CLIENT_WIRE: Final = Wire(CLIENT_FRAMES, tags={Call: "c.call", Where: "c.where", Members: "c.members", Result: "c.result"})


def encode_client_frame(frame: object) -> bytes:
    return MARK + CLIENT_WIRE.encode(CLIENT_CHANNEL, frame)


def is_client_frame(data: bytes) -> bool:
    return data[:1] == MARK


def decode_client_frame(data: bytes) -> object:
    """The frame in ``data``; ``WireError`` if it is not a client frame."""
    if not is_client_frame(data):
        raise WireError("not a client frame (no 0xC1 marker)", reason="garbage")
    envelope = CLIENT_WIRE.decode(memoryview(data)[1:])
    if envelope.channel != CLIENT_CHANNEL:
        raise WireError(f"client frame on channel {envelope.channel!r}", reason="channel", channel=envelope.channel)
    return envelope.frame


# --- errors by name ------------------------------------------------------------------------


class RemoteError(CastyError):
    """A gateway answered with an error this client has no class for; ``error`` is its class name."""

    def __init__(self, error: str, reason: str) -> None:
        super().__init__(f"{error}: {reason}" if reason else error)
        self.error = error
        self.reason = reason


_ERRORS: Final[dict[str, type[Exception]]] = {
    cls.__name__: cls
    for cls in (
        Unavailable, Fenced, SchemaError, UnknownActor, InvalidIdentity, MailboxFull, ReentrancyError, NotStarted,
        ConfigurationError, MessageTooLarge, TimeoutError, ValueError, TypeError,
    )
}


def error_from(result: Result) -> Exception:
    """The exception a ``Result`` with ``error`` set stands for (``RemoteError`` for an unknown class name).

    ``ActorFailed`` carries the remote exception only as text, so it comes back as ``RemoteError``
    with ``error == "ActorFailed"``.
    """
    name = result.error or "RemoteError"
    cls = _ERRORS.get(name)
    if cls is None:
        return RemoteError(name, result.reason)
    return cls(result.reason)


def _plain(value: Any) -> Any:
    """A reply value as plain msgpack data: dataclasses as maps, refs as their wire lists."""
    return msgspec.to_builtins(value, builtin_types=(bytes, bytearray), enc_hook=Codec._enc_hook)


# --- the gateway (node side) ---------------------------------------------------------------


class Gateway:
    """Serves client frames on a node: runs each ``Call`` through the node's ``ActorSystem``.

    ``send(node, bytes)`` is the node's transport send (it dials a client back from its id);
    ``forget(node)`` drops a client from the address book once ``keep_clients`` newer clients
    have come (never a member: ``is_member``). At most ``max_inflight`` calls run at once; one
    more is answered ``Unavailable`` at once. A reply whose frame would exceed ``max_frame`` is
    answered ``MessageTooLarge`` instead (the transport would drop it, and the client time out).
    """

    def __init__(
        self,
        system: ActorSystem,
        send: Callable[[str, bytes], None],
        hosted: Mapping[str, ActorType[Any, Any]],
        *,
        forget: Callable[[str], None] | None = None,
        is_member: Callable[[str], bool] | None = None,
        max_inflight: int = 1024,
        keep_clients: int = 256,
        max_frame: int = MAX_FRAME,
    ) -> None:
        self.system: Final = system
        self.max_frame: Final = max_frame
        self._send = send
        self.hosted: Final = dict(hosted)
        self._forget = forget
        self._is_member = is_member
        self.max_inflight = max_inflight
        self.keep_clients = keep_clients
        self._tasks: dict[asyncio.Task[None], None] = {}
        self._clients: OrderedDict[str, None] = OrderedDict()
        self._closed = False
        self.served = 0
        self.rejected = 0

    # --- receiving -----------------------------------------------------------------------

    def handle(self, src: str, data: bytes) -> None:
        """A client frame from ``src``: decode it and serve it (a bad frame is logged and dropped)."""
        if self._closed:
            return
        try:
            frame = decode_client_frame(data)
        except WireError as exc:
            self.rejected += 1
            log.info("%s: dropped a client frame from %s: %s", self.system.node, src, exc)
            return
        self._seen(src)
        if isinstance(frame, Call):
            if len(self._tasks) >= self.max_inflight:
                self._answer(src, Result(frame.request, None, "Unavailable", f"gateway busy: {self.max_inflight} calls running"))
                return
            task = self.system.loop.create_task(self._call(src, frame), name=f"casty.gateway {src}#{frame.request}")
            self._tasks[task] = None
            task.add_done_callback(self._done)
        elif isinstance(frame, Where):
            self._answer(src, self._where(frame))
        elif isinstance(frame, Members):
            members = [
                {"node": m.node, "status": m.status, "incarnation": m.incarnation} for m in self.system.members()
            ]
            self._answer(src, Result(frame.request, members))
        else:
            self.rejected += 1
            log.info("%s: dropped a %s from client %s: not a request", self.system.node, type(frame).__qualname__, src)

    def _seen(self, src: str) -> None:
        clients = self._clients
        clients[src] = None
        clients.move_to_end(src)
        while len(clients) > self.keep_clients:
            oldest, _ = clients.popitem(last=False)
            if self._forget is not None and not (self._is_member is not None and self._is_member(oldest)):
                self._forget(oldest)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.pop(task, None)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s: a gateway call failed: %r", self.system.node, task.exception())

    def _answer(self, src: str, result: Result) -> None:
        try:
            data = encode_client_frame(result)
            check_frame(len(data), self.max_frame, "the reply")
        except WireError as exc:
            data = encode_client_frame(Result(result.request, None, "SchemaError", f"the reply cannot be sent: {exc}"))
        except MessageTooLarge as exc:  # the transport would drop it and leave the client to time out
            data = encode_client_frame(Result(result.request, None, "MessageTooLarge", str(exc)))
        self.served += 1
        self._send(src, data)

    # --- serving -------------------------------------------------------------------------

    def _type(self, name: str) -> ActorType[Any, Any]:
        found = self.hosted.get(name)
        if found is None:
            hosted = ", ".join(sorted(self.hosted)) or "none"
            raise UnknownActor(f"actor type {name!r} is not hosted by node {self.system.node} (hosted: {hosted})")
        return found

    def _where(self, frame: Where) -> Result:
        try:
            actor = self._type(frame.actor)
            placed = self.system.placement(actor, frame.key)
        except Exception as exc:
            return Result(frame.request, None, type(exc).__name__, str(exc))
        return Result(frame.request, {"owner": placed.owner, "replicas": list(placed.replicas)})

    def build(self, actor: ActorType[Any, Any], name: str, fields: Mapping[str, Any]) -> Any:
        """The message ``name`` of ``actor``'s union built from ``fields``, checked by the codec; ``SchemaError`` naming what is wrong."""
        schema = actor.schema
        matches = [cls for cls in schema.classes if name in (cls.__qualname__, type_tag(cls))]
        takes = " | ".join(cls.__qualname__ for cls in schema.classes)
        if not matches:
            raise SchemaError(f"{actor.name} takes {takes}, not {name!r}")
        if len(matches) > 1:
            tags = ", ".join(type_tag(cls) for cls in matches)
            raise SchemaError(f"{actor.name}: {name!r} names several message classes ({tags}): give module:qualname")
        cls = matches[0]
        known = {f.name for f in dataclasses.fields(cls) if f.init}
        unknown = sorted(set(fields) - known)
        if unknown:
            raise SchemaError(f"{cls.__qualname__} has no field {', '.join(map(repr, unknown))} (fields: {', '.join(sorted(known)) or 'none'})")
        if "reply_to" in fields and issubclass(cls, Askable):
            raise SchemaError(f"{cls.__qualname__}: reply_to is filled by the ask, do not give it")
        data = msgspec.msgpack.encode((type_tag(cls), dict(fields)))
        return self.system.codec.decode_message(data, schema)

    async def _call(self, src: str, frame: Call) -> None:
        try:
            actor = self._type(frame.actor)
            message = self.build(actor, frame.message, frame.fields)
            ref = self.system.ref(actor, frame.key)
            if not frame.ask:
                ref.tell(message)
                result = Result(frame.request, None)
            else:
                if not isinstance(message, Askable):
                    raise SchemaError(f"{type(message).__qualname__} is not Askable: tell it instead")
                if not 0 < frame.timeout <= MAX_TIMEOUT:
                    raise ValueError(f"an ask timeout is within (0, {MAX_TIMEOUT:g}] seconds, got {frame.timeout!r}")
                try:
                    value = await asyncio.wait_for(self.system.ask(ref, message), frame.timeout)
                except TimeoutError as exc:
                    raise TimeoutError(str(exc) or f"{actor.name}[{frame.key!r}]: no reply within {frame.timeout:g} s") from None
                result = Result(frame.request, _plain(value))
        except asyncio.CancelledError:
            raise
        except ActorFailed as exc:
            result = Result(frame.request, None, "ActorFailed", str(exc))
        except Exception as exc:
            result = Result(frame.request, None, type(exc).__name__, str(exc))
        self._answer(src, result)

    async def close(self) -> None:
        """Stop serving: calls still running are cancelled (their clients get no answer)."""
        self._closed = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


# --- the client core (sans I/O) ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Send:
    """Output: send ``data`` (request ``request``) to gateway ``to``."""

    to: str
    request: int
    data: bytes


@dataclass(frozen=True, slots=True)
class Failed:
    """Output: request ``request`` cannot be sent anywhere (every gateway was tried and could not be dialed)."""

    request: int
    reason: str


@dataclass(slots=True)
class _Attempt:
    request: int
    data: bytes
    gateway: str
    tried: list[str]
    resendable: bool  # queued while no connection to the gateway was up: a failed dial drops it unsent


class ClientCore:
    """Which gateway each request goes to, and which requests may go to another one (see the module docstring).

    Inputs: ``submit`` (a new request; ``connected`` says whether a connection to the
    current gateway is up), ``connect_failed`` and ``connection_lost`` (the transport's
    events), ``result`` (a ``Result`` frame) and ``forget`` (the caller gave up).
    """

    def __init__(self, gateways: Sequence[str]) -> None:
        if not gateways:
            raise ValueError("a client needs at least one gateway (a seed node)")
        self.gateways: Final = tuple(dict.fromkeys(gateways))
        self._current = 0
        self._seq = 0
        self._attempts: dict[int, _Attempt] = {}

    @property
    def gateway(self) -> str:
        """The gateway new requests go to."""
        return self.gateways[self._current]

    @property
    def pending(self) -> int:
        return len(self._attempts)

    def next_request(self) -> int:
        self._seq += 1
        return self._seq

    def submit(self, request: int, data: bytes, *, connected: bool) -> Send:
        gateway = self.gateway
        self._attempts[request] = _Attempt(request, data, gateway, [gateway], not connected)
        return Send(gateway, request, data)

    def connect_failed(self, gateway: str, *, connected: Callable[[str], bool]) -> list[Send | Failed]:
        """``gateway`` could not be dialed: move on from it; resend what provably never left."""
        if self.gateway == gateway:
            self._current = (self._current + 1) % len(self.gateways)
        out: list[Send | Failed] = []
        for attempt in list(self._attempts.values()):
            if attempt.gateway != gateway or not attempt.resendable:
                continue
            untried = [g for g in self._rotation() if g not in attempt.tried]
            if not untried:
                del self._attempts[attempt.request]
                out.append(Failed(attempt.request, f"no gateway could be reached (tried {', '.join(attempt.tried)})"))
                continue
            attempt.gateway = untried[0]
            attempt.tried.append(untried[0])
            attempt.resendable = not connected(untried[0])
            out.append(Send(untried[0], attempt.request, attempt.data))
        return out

    def _rotation(self) -> list[str]:
        n = len(self.gateways)
        return [self.gateways[(self._current + i) % n] for i in range(n)]

    def connection_lost(self, gateway: str) -> None:
        """A connection to ``gateway`` that was up broke: what was queued for it may have been written."""
        for attempt in self._attempts.values():
            if attempt.gateway == gateway:
                attempt.resendable = False

    def result(self, src: str, frame: Result) -> Result | None:
        """The result of a pending request, or None (unknown request, or from another gateway than it went to)."""
        attempt = self._attempts.get(frame.request)
        if attempt is None or attempt.gateway != src:
            return None
        del self._attempts[frame.request]
        return frame

    def forget(self, request: int) -> None:
        self._attempts.pop(request, None)


# --- the client (asyncio driver) -----------------------------------------------------------


def _free_port(host: str) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


class ClusterClient:
    """A program outside the cluster: asks, tells and looks up placement through a gateway node.

    ``seeds`` are node ids (``HOST:PORT``) or addresses; the client listens on ``host`` (a
    free port) for the answers. Use ``async with ClusterClient(seeds) as client:``. A cluster
    with a ``secret`` needs it here too: the client proves it to the gateway, and the gateway
    to the client when it dials back with the answer.
    """

    def __init__(
        self,
        seeds: Sequence[str | Address],
        *,
        cluster: str = "casty",
        host: str = "127.0.0.1",
        timeout: float = 10.0,
        connect_timeout: float = 2.0,
        secret: bytes | str | None = None,
    ) -> None:
        ids = [node_id(s) if isinstance(s, str) else format_address(parse_address(format_address(s))) for s in seeds]
        self.core: Final = ClientCore(ids)
        self.cluster: Final = cluster
        self.host: Final = parse_address(f"[{host}]:1" if ":" in host else f"{host}:1")[0]
        if not 0 < timeout <= MAX_TIMEOUT:
            raise ValueError(f"timeout must be within (0, {MAX_TIMEOUT:g}] seconds, got {timeout!r}")
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._secret = secret_bytes(secret, "the cluster secret")
        self.node: str | None = None
        self.tcp: TcpTransport | None = None
        self._futures: dict[int, asyncio.Future[Result]] = {}

    # --- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        """Listen on a free port of ``host`` (its address is this client's id)."""
        if self.tcp is not None:
            raise RuntimeError("the client is already started")
        last: OSError | None = None
        for _ in range(5):  # the port found free may be taken before we bind it: try another
            address = (self.host, _free_port(self.host))
            node = format_address(address)
            tcp = TcpTransport(
                node, address, cluster=self.cluster, connect_timeout=self.connect_timeout, observer=self._event, secret=self._secret
            )
            try:
                await tcp.start()
            except OSError as exc:
                await tcp.close()
                last = exc
                continue
            for gateway in self.core.gateways:
                tcp.add_peer(gateway, parse_address(gateway))
            tcp.set_handler(self._frame)
            self.tcp, self.node = tcp, node
            return
        raise OSError(f"the client found no free port to listen on at {self.host}: {last}")

    async def close(self) -> None:
        for future in self._futures.values():
            if not future.done():
                future.set_exception(NotStarted("the client closed"))
        self._futures.clear()
        if self.tcp is not None:
            await self.tcp.close()

    async def __aenter__(self) -> ClusterClient:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @property
    def gateway(self) -> str:
        """The gateway the next request goes to."""
        return self.core.gateway

    # --- requests ------------------------------------------------------------------------

    async def ask(
        self, actor: str | ActorType[Any, Any], key: str, message: str, fields: Mapping[str, Any] | None = None,
        *, timeout: float | None = None,
    ) -> Any:
        """Ask ``actor[key]`` message class ``message`` built from ``fields``; the reply as plain data.

        Raises what the gateway raised (``Unavailable``, ``TimeoutError``, ``SchemaError``,
        ``UnknownActor``...; ``RemoteError`` for the rest, ``ActorFailed`` included), or
        ``TimeoutError`` if no answer came ``GRACE`` seconds after ``timeout``.
        """
        wait = self.timeout if timeout is None else timeout
        name = actor if isinstance(actor, str) else actor.name
        return await self._request(lambda r: Call(r, name, key, message, dict(fields or {}), True, wait), wait + GRACE)

    async def tell(
        self, actor: str | ActorType[Any, Any], key: str, message: str, fields: Mapping[str, Any] | None = None,
        *, timeout: float | None = None,
    ) -> None:
        """Tell ``actor[key]``; returns once a gateway accepted and queued it (at most once, not a delivery receipt)."""
        wait = self.timeout if timeout is None else timeout
        name = actor if isinstance(actor, str) else actor.name
        await self._request(lambda r: Call(r, name, key, message, dict(fields or {}), False, wait), wait)

    async def placement(self, actor: str | ActorType[Any, Any], key: str, *, timeout: float | None = None) -> dict[str, Any]:
        """The gateway's view of ``actor[key]``: ``{"owner": node or None, "replicas": [nodes]}``."""
        name = actor if isinstance(actor, str) else actor.name
        value = await self._request(lambda r: Where(r, name, key), self.timeout if timeout is None else timeout)
        return dict(value)

    async def members(self, *, timeout: float | None = None) -> list[dict[str, Any]]:
        """The gateway's view of the membership: ``[{"node", "status", "incarnation"}, ...]``."""
        value = await self._request(lambda r: Members(r), self.timeout if timeout is None else timeout)
        return list(value)

    async def _request(self, make: Callable[[int], object], wait: float) -> Any:
        tcp = self.tcp
        if tcp is None:
            raise NotStarted("the client is not started: use `async with ClusterClient(seeds) as client:`")
        core = self.core
        request = core.next_request()
        frame = make(request)
        data = encode_client_frame(frame)
        check_frame(len(data), tcp.max_frame, f"{type(frame).__name__} request")  # the transport would drop it unsent
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._futures[request] = future
        send = core.submit(request, data, connected=core.gateway in tcp.outgoing)
        try:
            tcp.send(send.to, send.data)
            try:
                result = await asyncio.wait_for(future, wait)
            except TimeoutError:
                raise TimeoutError(f"no answer from gateway {send.to} within {wait:g} s") from None
        finally:
            self._futures.pop(request, None)
            core.forget(request)
        if result.error is not None:
            raise error_from(result)
        return result.value

    # --- transport callbacks -------------------------------------------------------------

    def _frame(self, src: str, data: bytes) -> None:
        try:
            frame = decode_client_frame(data)
        except WireError as exc:
            log.info("client %s: dropped a frame from %s: %s", self.node, src, exc)
            return
        if not isinstance(frame, Result):
            log.info("client %s: dropped a %s from %s", self.node, type(frame).__qualname__, src)
            return
        done = self.core.result(src, frame)
        if done is not None:
            future = self._futures.get(done.request)
            if future is not None and not future.done():
                future.set_result(done)

    def _event(self, event: Event) -> None:
        tcp = self.tcp
        if isinstance(event, ConnectionLost) and event.direction == "out":
            self.core.connection_lost(event.node)
        elif isinstance(event, ConnectFailed) and tcp is not None:
            outgoing = tcp.outgoing
            for out in self.core.connect_failed(event.node, connected=lambda g: g in outgoing):
                if isinstance(out, Send):
                    log.info("client %s: %s unreachable, request %d goes to %s", self.node, event.node, out.request, out.to)
                    tcp.send(out.to, out.data)
                else:
                    future = self._futures.get(out.request)
                    if future is not None and not future.done():
                        future.set_exception(Unavailable(out.reason))
