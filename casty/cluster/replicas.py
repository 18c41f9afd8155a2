"""``ReplicationService``: the replication cores of one node on its loop and transport (channel ``"r"``).

One per cluster node, on the node's one ``Dispatcher``:

* the node's ``ReplicaStore`` answers every ``Prepare`` and ``Write`` that arrives;
* each activation that holds a key here opens an ``OwnerSlot``: a ``KeyOwner`` with its own
  timers, to which the ``Promise``/``Ack``/``Nack`` frames of that key (``frame.entity``) go.
  Its reports go to the activation's callback.

Sends to this very node are looped back with ``loop.call_soon`` through the same bytes (the
local replica obeys the same rules as a remote one, and gets a copy, never a shared object).
Epochs are minted as ``"<node>#<incarnation>"``: one life of the node.

This is a driver, not a core: it decides nothing (see ``casty.cluster.replication``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any, Final

from ..ports import Transport
from .driver import REPLICATION_CHANNEL, Dispatcher
from .replication import ZERO_EPOCH, Ack, Acquired, Entity, Epoch, KeyOwner, Lost, Nack, Prepare, Promise, ReplicaStore, Write
from .sansio import CancelTimer, Output, Report, Send, SetTimer
from .wire import Wire

__all__ = ["ReplicationService", "OwnerSlot"]


class OwnerSlot:
    """One ``KeyOwner`` on the node's loop: its timers, and where its reports go."""

    __slots__ = ("service", "owner", "on_report", "_timers", "closed", "acquiring", "writes")

    def __init__(self, service: ReplicationService, owner: KeyOwner, on_report: Callable[[Any], None]) -> None:
        self.service = service
        self.owner = owner
        self.on_report = on_report
        self._timers: dict[str, asyncio.TimerHandle | asyncio.Handle] = {}
        self.closed = False
        # kept here for the activation that opened the slot: its acquisition, and its writes
        # waiting for a quorum (version -> (future, the pages as of that write))
        self.acquiring: asyncio.Future[Acquired] | None = None
        self.writes: dict[int, tuple[asyncio.Future[None], dict[str, bytes]]] = {}

    def now(self) -> float:
        return self.service.loop.time()

    def perform(self, outputs: Iterable[Output]) -> None:
        """Carry out the owner's outputs, in order (nothing once closed)."""
        service = self.service
        for output in outputs:
            if self.closed:
                return
            if isinstance(output, Send):
                service.send(output.to, output.frame)
            elif isinstance(output, SetTimer):
                old = self._timers.pop(output.name, None)
                if old is not None:
                    old.cancel()
                self._timers[output.name] = service.loop.call_at(output.at, self._fire, output.name)
            elif isinstance(output, CancelTimer):
                handle = self._timers.pop(output.name, None)
                if handle is not None:
                    handle.cancel()
            elif isinstance(output, Report):
                if isinstance(output.event, Lost):
                    service.saw(output.event.entity, output.event.newer)
                self.on_report(output.event)

    def _fire(self, name: str) -> None:
        self._timers.pop(name, None)
        if not self.closed:
            self.perform(self.owner.timer(name, self.service.loop.time()))

    def close(self) -> None:
        """Stop the owner: its timers are cancelled, its frames no longer reach it."""
        if self.closed:
            return
        self.perform(self.owner.close())
        self.closed = True
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        self.service._release(self)


class ReplicationService:
    """The node's ``ReplicaStore`` on channel ``"r"``, and the ``KeyOwner`` slots of the keys it holds."""

    def __init__(
        self,
        node: str,
        incarnation: int,
        transport: Transport,
        wire: Wire,
        dispatcher: Dispatcher,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.node: Final = node
        self.epoch_node: Final = f"{node}#{incarnation}"
        self.transport: Final = transport
        self.wire: Final = wire
        self.dispatcher: Final = dispatcher
        self.loop: Final = loop
        self.store: Final = ReplicaStore()
        self._owners: dict[Entity, OwnerSlot] = {}
        self._newer: dict[Entity, Epoch] = {}  # per key, the newest epoch a lost owner here learned of
        self._closed = False
        self.sent = 0
        dispatcher.register(REPLICATION_CHANNEL, self._receive)

    def open(self, entity: Entity, on_report: Callable[[Any], None], *, write_timeout: float) -> OwnerSlot:
        """A new owner of ``entity`` on this node (it replaces any earlier slot of the key: that one's frames stop reaching it)."""
        slot = OwnerSlot(self, KeyOwner(entity, self.epoch_node, write_timeout=write_timeout), on_report)
        self._owners[entity] = slot
        return slot

    def saw(self, entity: Entity, epoch: Epoch) -> None:
        """An owner here lost ``entity`` to ``epoch``: the next acquisition of the key must start above it."""
        if epoch > self._newer.get(entity, ZERO_EPOCH):
            self._newer[entity] = epoch

    def round_hint(self, entity: Entity) -> Epoch:
        """The newest epoch known here for ``entity``: the local replica's promise, or one a lost owner here learned of.

        Each acquisition opens a fresh ``KeyOwner`` that knows no round; without this hint a node
        that knows nothing of the key (a restarted one, an empty replica) would climb one round per
        attempt (its own local promise + 1) and lose every attempt until it passes the newer epoch.
        """
        return max(self.store.promised(entity), self._newer.get(entity, ZERO_EPOCH))

    def _release(self, slot: OwnerSlot) -> None:
        if self._owners.get(slot.owner.entity) is slot:
            del self._owners[slot.owner.entity]

    def send(self, to: str, frame: object) -> None:
        if self._closed:
            return
        data = self.wire.encode(REPLICATION_CHANNEL, frame)
        self.sent += 1
        if to == self.node:
            self.loop.call_soon(self.dispatcher.handle, self.node, data)
        else:
            self.transport.send(to, data)

    def _receive(self, src: str, frame: object) -> None:
        if self._closed:
            return
        if isinstance(frame, Prepare | Write):
            for output in self.store.receive(src, frame):
                if isinstance(output, Send):
                    self.send(output.to, output.frame)
        elif isinstance(frame, Promise | Ack | Nack):
            slot = self._owners.get(frame.entity)
            if slot is not None:
                slot.perform(slot.owner.receive(src, frame, self.loop.time()))

    def close(self) -> None:
        """Stop serving the channel; every owner slot is closed (pending writes get no outcome)."""
        if self._closed:
            return
        for slot in list(self._owners.values()):
            slot.close()
        self._closed = True
        self.dispatcher.unregister(REPLICATION_CHANNEL, self._receive)
