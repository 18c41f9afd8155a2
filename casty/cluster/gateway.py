"""The node side of the client surface: a ``Gateway`` serves the frames of clients outside the cluster.

Why a gateway. A program outside the cluster should not have to be a member: a member is
on the ring and would own keys. Nor should it speak the routing protocol itself, which
needs the ring, retries on ``WrongOwner`` and the cluster's view of who is alive. So a client
sends a request to any node (a *gateway*), and the gateway does what its own code would
do: ``system.ref(type, key)`` then ``ask`` or ``tell``, routed to the key's owner by the
cluster, with the cluster's retries and write timeouts. The gateway answers with the reply
value or the error, by type name.

A gateway serves only the actor types its node hosts (the ``--module`` types): a type name
from the network is never imported. Bad input (unknown type, message class, field, a field
of the wrong type, a tell-only message asked) is answered with a ``SchemaError`` or
``UnknownActor`` naming it; the node keeps running.

The frames are ``casty.cluster.client_wire``'s; the client that sends them is
``casty.cluster.client``. The node (``casty.cluster.node.NodeProcess``) builds one gateway
and hands it the client frames its transport splits off.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

import msgspec

from .._core.actor import ActorType
from .._core.codec import Codec, type_tag
from .._core.ref import Askable
from ..errors import ActorFailed, MessageTooLarge, SchemaError, UnknownActor
from ..protocol.limits import MAX_FRAME, check_frame
from ..protocol.wire import WireError
from .client_wire import MAX_TIMEOUT, Call, Members, Result, Where, decode_client_frame, encode_client_frame

if TYPE_CHECKING:
    from .._core.system import ActorSystem

__all__ = ["Gateway"]

log = logging.getLogger("casty.client")  # the client surface's logger, gateway and client alike


def _plain(value: Any) -> Any:
    """A reply value as plain msgpack data: dataclasses as maps, refs as their wire lists."""
    return msgspec.to_builtins(value, builtin_types=(bytes, bytearray), enc_hook=Codec._enc_hook)


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
