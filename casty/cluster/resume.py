"""The resume rule of a cluster node: no ``@active`` key is left without a run.

Part of ``ClusterNode`` (``casty.cluster.runtime``): a mixin on the node's attributes
(``system``, ``replication``, ``router``, its placement and its refusals), kept here so the
rule reads in one place.

**The resume rule** (no ``@active`` key is left without a run). An activation that ends
here without a successor while ``@active`` stays on the replicas (``lost``: fenced by a
newer epoch; ``handoff``: the key moved; a failed acquisition of a key marked ``@active``
here) makes the key an *orphan* of this node (``orphaned``). Every ``RESUME_EVERY`` seconds
the node looks at its orphans: one that runs here, acquired, is done (forgotten at the
acquisition itself: a run released before the look must not be resumed); one this node owns
is resumed here (an acquisition that fails leaves it an orphan, tried again); one another
node owns is handed to that node with a resume request (a ``Deliver`` with origin
``RESUME_ORIGIN`` and no message), which activates the key there, makes it an orphan of
that node until it is acquired, and answers; without an answer within ``write_timeout`` +
``RESUME_EVERY`` the request is sent again (to whoever owns the key then). A node without
a quorum names no owner: its orphans wait.

Why a long pause needs it: the paused owner's run never learns that the others declared it
dead and that the next replica took the key over (a newer epoch). Once the paused node is
heard again the ring names it owner once more, so the interim owner ends its run
(``handoff``), and the paused node's own stale run is refused at its first write
(``lost``: a schedule's firing, at once if one fell due during the pause, else later). The
sweep of that node's membership change may have come while the stale run still held the
key, and no other sweep follows: before this rule nothing ran the key until a message came.

The bound: from the later of the end of the run and the moment this node's view names the
key's owner after the faults healed (the failure detector's convergence: at most
``suspect_after`` + ``dead_after`` after the last fault, much less when a node is only heard
again), the key runs on its owner within ``RESUME_EVERY`` + one acquisition
(``write_timeout``) + a resume request's round trip, and within another ``RESUME_EVERY`` +
``write_timeout`` for each attempt that fails (no quorum yet, replicas not ready).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from .. import observer as ev
from .._core.state import ACTIVE_PAGE
from ..protocol.replication import Entity
from .routing import Deliver, Failed, Reply

if TYPE_CHECKING:
    from .._core.system import ActorSystem
    from .replicas import ReplicationService
    from .routing import Router

__all__ = ["RESUME_EVERY", "RESUME_ORIGIN", "ResumeRule"]

RESUME_EVERY: Final = 1.0
"""Seconds between two looks at the node's orphans (keys left ``@active`` with no run: see the module docstring)."""
RESUME_ORIGIN: Final = "@resume"
"""The origin of a ``Deliver`` that carries no message: "resume this key, you own it" (answered by an empty ``Reply``)."""


class ResumeRule:
    """The node's orphans (keys left ``@active`` with no run) and its resume requests; part of ``ClusterNode``."""

    _orphans: dict[Entity, None]  # keys left @active with no run, to resume
    _orphan_timer: Any
    _nudges: dict[int, Entity]  # resume requests in flight: request -> key
    _nudged: dict[Entity, tuple[int, float]]  # key -> its request in flight, and when it is given up

    if TYPE_CHECKING:  # the node's, used here
        @property
        def system(self) -> ActorSystem: ...
        @property
        def replication(self) -> ReplicationService: ...
        @property
        def router(self) -> Router: ...

        def owner_of(self, actor: str, key: str) -> str | None: ...
        def _resume(self, entity: Entity, failed: str) -> bool: ...
        def _refuse(self, frame: Deliver, error: BaseException) -> None: ...

    def orphaned(self, entity: Entity, *, if_marked: bool = False) -> None:
        """An activation of ``entity`` ended here with no successor: see that the key runs again on its owner.

        ``if_marked``: only if this node's replica holds the key's ``@active`` (a failed
        acquisition: the key may never have been active).
        """
        if self.replication.closed or not self.system.running:
            return
        if if_marked and not self.replication.store.has_page(entity, ACTIVE_PAGE):
            return
        self._orphans[entity] = None
        self._arm_orphans()

    def acquired(self, entity: Entity) -> None:
        """An activation of ``entity`` acquired the key here: it runs, so it is no orphan of this node any more.

        Forgotten at once, not at the next look at the orphans: the run may end released or
        idle (``@active`` cleared) before that look, which would find no run and resume the
        key with no message a few ms after its release (a stale entry).
        """
        if entity in self._orphans:
            self._forget_orphan(entity)

    def _arm_orphans(self) -> None:
        if self._orphan_timer is None:
            self._orphan_timer = self.system.loop.call_later(RESUME_EVERY, self._look_at_orphans)

    def _look_at_orphans(self) -> None:
        """Resume the orphans this node owns, hand the others to their owners (see the module docstring)."""
        self._orphan_timer = None
        system = self.system
        if self.replication.closed or not system.running:
            return
        node = system.node
        now = system.loop.time()
        orphans = self._orphans
        for entity in list(orphans):
            activation = system.activation_table.get(entity)
            if activation is not None:
                if activation.pages is not None:  # acquired: it runs here
                    self._forget_orphan(entity)
                continue  # still acquiring: look again
            actor_name, key = entity
            try:
                owner = self.owner_of(actor_name, key)
            except Exception as exc:  # a type this node cannot look up: nothing to resume here
                system.emit(ev.ActivationFailed, actor_name, key, 0, f"not resumed: {exc!r}", None, 0.0)
                self._forget_orphan(entity)
                continue
            if owner is None:
                continue  # no quorum here: wait for the view to heal
            if owner == node:
                if not self._resume(entity, "not resumed"):
                    self._forget_orphan(entity)  # reported: this node cannot run it
                continue
            asked = self._nudged.get(entity)
            if asked is not None and now < asked[1]:
                continue  # a resume request is in flight
            self._ask_to_resume(entity)
        if orphans:
            self._arm_orphans()

    def _ask_to_resume(self, entity: Entity) -> None:
        """Send the key's owner a resume request: a ``Deliver`` with no message and origin ``RESUME_ORIGIN``."""
        system = self.system
        self._forget_request(entity)  # one unanswered before: given up
        request = system.next_request()
        self._nudges[request] = entity
        self._nudged[entity] = (request, system.loop.time() + (system.write_timeout or 5.0) + RESUME_EVERY)
        actor_name, key = entity
        self.router.route(Deliver(request, actor_name, key, b"", system.node, request, RESUME_ORIGIN))

    def _resume_asked(self, frame: Deliver) -> None:
        """A resume request for a key this node owns: activate it (it is this node's orphan until acquired) and answer."""
        system = self.system
        entity = (frame.actor, frame.key)
        try:
            actor = system.type_named(frame.actor)
            if entity not in system.activation_table:
                system.activate(actor, frame.key, actor.initial)
        except Exception as exc:
            system.emit(ev.ActivationFailed, frame.actor, frame.key, 0, f"not resumed on request: {exc!r}", None, 0.0)
            self._refuse(frame, exc)
            return
        self._orphans[entity] = None
        self._arm_orphans()
        if frame.reply_node is None or frame.reply_request is None:
            return
        if frame.reply_node == system.node:
            self._resume_answered(frame.reply_request, None)
        else:
            self.router.reply(frame.reply_node, Reply(frame.reply_request, b""))

    def _resume_answered(self, request: int, failed: Failed | None) -> None:
        """The owner answered a resume request: it took the key (or cannot run it at all); else it stays an orphan here."""
        self._request_ended(request, taken=failed is None or failed.kind in ("unknown", "schema"))

    def _request_ended(self, request: int, *, taken: bool) -> None:
        """Resume request ``request`` is over: ``taken``, the key is no orphan here any more; else it is asked again at the next look."""
        entity = self._nudges.pop(request, None)
        if entity is None:
            return
        self.router.forget(request)
        if taken:
            self._forget_orphan(entity)
        elif self._nudged.get(entity, (0, 0.0))[0] == request:
            del self._nudged[entity]

    def _forget_request(self, entity: Entity) -> None:
        asked = self._nudged.pop(entity, None)
        if asked is not None:
            self._nudges.pop(asked[0], None)
            self.router.forget(asked[0])

    def _forget_orphan(self, entity: Entity) -> None:
        self._orphans.pop(entity, None)
        self._forget_request(entity)
