"""``OwnerSlot``: one ``KeyOwner`` (``casty.protocol.key_owner``) on its node's loop, for the key's activation.

The replication service (``casty.cluster.replicas``) opens one per activation that holds a key
on this node; the key's ``Promise``/``Ack``/``Nack`` frames reach it there, its outputs go out
through the service (frames in the turn's batch, timers on the service's heap), and its reports
go to the activation's page writer (``casty.cluster.replicated_pages``), which keeps who waits
for which write. The slot itself keeps the owner's timers and this turn's group of writes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

from ..errors import MessageTooLarge
from ..protocol.key_owner import RESEND_TIMER, KeyOwner
from ..protocol.limits import PAGE_OVERHEAD, pages_size
from ..protocol.replication import Lost, Write
from ..protocol.sansio import Output, perform

if TYPE_CHECKING:
    from .replicas import ReplicationService

__all__ = ["OwnerSlot"]


class OwnerSlot:
    """One ``KeyOwner`` on the node's loop: its timers, where its reports go, and this turn's group of writes.

    **Group commit.** Writes made in one loop turn (a schedule's next-due write and the state
    write of the message it told, a body's two updates...) are staged and given to the owner
    as *one* ``KeyOwner.write`` at the end of the turn, just before the turn's frames leave:
    one version, one frame per replica, one round of acks for all of them. Each write still
    gets its own outcome: the slot's opener (``casty.cluster.replicated_pages.ReplicatedPages``)
    keeps who waits for what, learns each group's version as it is written (``on_written``) and
    settles every waiter of the group with the group's version and pages, or with its error.
    Nothing is confirmed sooner or more than before: a write waits for the quorum of a version
    that contains it.

    **The frame limit.** Every write carries the key's whole page set, so a key whose pages
    outgrow a frame could never be replicated: its ``Write`` frames would be dropped in
    transit and the write fail only at its write timeout. ``stage`` refuses such a write at
    once (``MessageTooLarge``, nothing staged), keeping a running size of the pages so that
    the check costs a few lengths per write (``page_limit``; see ``casty.protocol.limits``).
    """

    __slots__ = (
        "service", "owner", "on_report", "on_written", "on_superseded", "_timers", "closed", "_staged",
        "page_limit", "_bytes",
    )

    def __init__(
        self,
        service: ReplicationService,
        owner: KeyOwner,
        on_report: Callable[[Any], None],
        on_written: Callable[[int, dict[str, bytes]], None] | None = None,
        on_superseded: Callable[[], None] | None = None,
    ) -> None:
        self.service = service
        self.owner = owner
        self.on_report = on_report
        self.on_written = on_written  # a group became the write of this version, with this whole page set
        self.on_superseded = on_superseded  # a newer slot of the key took its frames (``superseded``)
        self._timers: dict[str, int] = {}  # timer name -> its number in the service's TimerHeap
        self.closed = False
        self._staged: dict[str, bytes | None] | None = None  # this turn's updates, merged, not yet written
        entity = owner.entity
        self.page_limit: Final = service.page_limit - len(entity[0].encode()) - len(entity[1].encode())
        self._bytes = -1  # pages_size of the owner's pages with the staged updates applied (-1: not known yet)

    def now(self) -> float:
        return self.service.loop.time()

    def stage(self, updates: Mapping[str, bytes | None]) -> None:
        """Add a write to this turn's group (see the class docstring); its outcome is that of the group's version.

        ``MessageTooLarge`` (and nothing staged) if the key's pages after it would not fit a frame.
        """
        staged = self._staged
        pages = self.owner.pages
        size = self._bytes
        if size < 0:
            size = pages_size(pages)
        for name, data in updates.items():
            old = staged[name] if staged is not None and name in staged else pages.get(name)
            if old is not None:
                size -= len(name) + len(old) + PAGE_OVERHEAD
            if data is not None:
                size += len(name) + len(data) + PAGE_OVERHEAD
        if size > self.page_limit:
            entity = self.owner.entity
            raise MessageTooLarge(
                f"{entity[0]}[{entity[1]!r}]: its pages would be {size} bytes after this write, over the "
                f"{self.page_limit} bytes a replicated write of the key can carry in one frame"
            )
        self._bytes = size
        if staged is None:
            self._staged = dict(updates)
            service = self.service  # the first write of the key's turn: the service writes the group at its flush
            service._staged.append(self)
            if not service._flush_armed:
                service._arm_flush()
        else:
            staged.update(updates)  # later updates win, as applying them in turn would

    def commit_staged(self, now: float) -> None:
        """The end of the turn: the group becomes one ``KeyOwner.write`` (the service calls this before it flushes)."""
        updates = self._staged
        if updates is None or self.closed:
            return
        self._staged = None
        version, outputs = self.owner.write(now, updates)
        if self.owner.phase != "held":
            self._bytes = -1  # fenced: its pages did not change
        if self.on_written is not None:  # before the outputs: the local replica's ack may confirm it at once
            self.on_written(version, self.owner.pages)  # this write's whole page set (each write builds a new dict)
        self.perform(outputs)

    def drop_staged(self) -> None:
        """Forget this turn's group (its opener fails its waiters: the activation ended)."""
        self._staged = None
        self._bytes = -1

    def superseded(self) -> None:
        """A newer slot of the key opened here after this one closed: its opener fails what still waits."""
        if self.on_superseded is not None:
            self.on_superseded()

    def perform(self, outputs: Iterable[Output]) -> None:
        """Carry out the owner's outputs, in order (nothing once closed): ``casty.protocol.sansio.perform``."""
        perform(outputs, self)

    # The Performer methods (casty.protocol.sansio): one per output, once per write of every key.

    def send(self, to: str, frame: Any) -> None:
        service = self.service
        if to == service.node and type(frame) is Write:
            service.write_locally(self, frame)
        else:
            service.send(to, frame)

    def report(self, event: Any) -> None:
        if type(event) is Lost:
            self.service.saw(event.entity, event.newer)
        self.on_report(event)

    def set_timer(self, name: str, at: float) -> None:
        service = self.service
        if name == RESEND_TIMER:
            service.resend_at(self, at)
            return
        timers = service.timers
        old = self._timers.pop(name, None)
        if old is not None:
            timers.cancel(old)
        self._timers[name] = timers.arm_method(at, OwnerSlot._fire, self, name)

    def cancel_timer(self, name: str) -> None:
        service = self.service
        if name == RESEND_TIMER:
            service.resend_cancel(self)
            return
        seq = self._timers.pop(name, None)
        if seq is not None:
            service.timers.cancel(seq)

    def _fire(self, name: str) -> None:
        self._timers.pop(name, None)
        if not self.closed:
            self.perform(self.owner.timer(name, self.service.loop.time()))

    def close(self) -> None:
        """Stop the owner: its timers are cancelled, its frames no longer reach it, a staged group is not written."""
        if self.closed:
            return
        self.perform(self.owner.close())
        self.closed = True
        timers = self.service.timers
        for seq in self._timers.values():
            timers.cancel(seq)
        self._timers.clear()
        self.service.resend_cancel(self)
        self.service._release(self)
