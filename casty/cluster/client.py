"""Talking to a running cluster from outside it: ``ClusterClient``, and ``ClientCore``, its rule sans I/O.

A client sends each request to a node's gateway (``casty.cluster.gateway``: why there is
one, and what it serves), in the frames of ``casty.cluster.client_wire``.

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
import logging
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from .._core.actor import ActorType
from ..errors import (
    ConfigurationError,
    Fenced,
    InvalidIdentity,
    MailboxFull,
    MessageTooLarge,
    NotStarted,
    ReentrancyError,
    RemoteError,
    SchemaError,
    Unavailable,
    UnknownActor,
)
from ..observer import Event
from ..protocol.limits import check_frame
from ..protocol.wire import WireError
from .addresses import Address, format_address, node_id, parse_address
from .config import check_cluster_name
from .client_wire import MAX_TIMEOUT, Call, Members, Result, Where, decode_client_frame, encode_client_frame
from ..protocol.framing import secret_bytes
from .tcp import ConnectFailed, ConnectionLost, TcpTransport

__all__ = [
    "RemoteError",
    "error_from",
    "Send",
    "Failed",
    "ClientCore",
    "ClusterClient",
]

log = logging.getLogger("casty.client")

GRACE: Final = 1.0
"""How much longer than an ask's timeout a client waits for the gateway's answer (it answers TimeoutError itself)."""


# --- errors by name ------------------------------------------------------------------------


_ERRORS: Final[dict[str, type[Exception]]] = {
    cls.__name__: cls
    for cls in (
        Unavailable, Fenced, SchemaError, UnknownActor, InvalidIdentity, MailboxFull, ReentrancyError, NotStarted,
        ConfigurationError, MessageTooLarge, TimeoutError, ValueError, TypeError,
    )
}


def error_from(result: Result) -> Exception:
    """The exception a ``Result`` with ``error`` set stands for (``casty.errors.RemoteError`` for an unknown class name).

    ``ActorFailed`` carries the remote exception only as text, so it comes back as ``RemoteError``
    with ``error == "ActorFailed"``.
    """
    name = result.error or "RemoteError"
    cls = _ERRORS.get(name)
    if cls is None:
        return RemoteError(name, result.reason)
    return cls(result.reason)


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
        self.cluster: Final = check_cluster_name(cluster, "ClusterClient.cluster")  # its Hello must fit the handshake
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
