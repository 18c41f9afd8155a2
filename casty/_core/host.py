"""``ActivationHost``: what an activation may ask of the node it runs on.

An activation (one key's run: its mailbox, its lease-fenced writes, its timers and
schedules) needs a handful of things from its node, and this protocol names all of them,
each with why. ``ActorSystem`` implements it (mypy checks that it fits, see the end of
``casty._core.system``), under these public names; the activation asks nothing else of it
(``Activation.system`` and its mixins' are typed ``ActivationHost``, so mypy refuses a reach past it),
so what the node and the activation owe each other can be read here rather than found by
searching one module for the other's private names.

Everything here is the node's, shared by every activation on it: the ports (loop, clock,
store, codec), the defaults a type may leave open, the node's copy of the keys' pages, the
table of activations, the observer, and the cluster when there is one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..observer import Event
    from ..ports import Clock, Observer, Store
    from .activation import Activation, KeyRecords
    from .mailbox import PendingAsk
    from .system import ActorSystem
    from .actor import Backoff
    from .codec import Codec
    from .plugin import ClusterPlugin
    from .ref import EntityRef
    from .timer_heap import TimerHeap

__all__ = ["ActivationHost"]


class ActivationHost(Protocol):
    """What an activation may ask of its node (``ActorSystem``), and why it asks."""

    # --- the ports and the defaults -------------------------------------------------------

    @property
    def node(self) -> str:
        """This node's id: the ``@active`` marker names it, and so do remote asks' reply refs."""

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The running loop: a run is a task on it, its idle clock and write timeouts read its time."""

    @property
    def clock(self) -> Clock:
        """The node's wall clock: schedules' due times and catch-up are wall-clock times."""

    @property
    def timers(self) -> TimerHeap:
        """The node's timers on one loop timer: idle checks, schedules and ``ctx.timer`` arm theirs here."""

    @property
    def codec(self) -> Codec:
        """Encodes and decodes the key's pages, its messages and its replies (typed, never pickle)."""

    @property
    def store(self) -> Store | None:
        """The node's durable store (None without one): a durable type loads and saves its pages there."""

    @property
    def idle_after(self) -> float | None:
        """The node's idle timeout, for a type that sets none (None: keys never idle out)."""

    @property
    def backoff(self) -> Backoff:
        """The node's restart backoff, for a type that sets none."""

    @property
    def write_timeout(self) -> float:
        """The node's write timeout, for a type that sets none (how long a write waits for its quorum)."""

    # --- what the node keeps for every key -------------------------------------------------

    @property
    def records(self) -> KeyRecords:
        """The node's copy of every key's confirmed pages and versions: a new run of a key starts from it."""

    @property
    def dirty(self) -> dict[Activation, None]:
        """The write-behind activations with an unsaved change: the node's stop flushes them."""

    @property
    def activation_table(self) -> Mapping[tuple[str, str], Activation]:
        """The activations the node runs, by (type name, key): a run that ends checks it is still the key's."""

    @property
    def observer(self) -> Observer | None:
        """The node's observer (None: nobody listens), for the rare event that is costly to build."""

    @property
    def cluster_node(self) -> ClusterPlugin | None:
        """The cluster the node runs in (None alone): the key's replicas, the resume rule, asks from other nodes."""

    @property
    def actor_system(self) -> ActorSystem:
        """The user's ``ActorSystem`` itself: what ``ctx.system`` and the key's own ``ctx.self`` ref hand to actor code."""

    def pending_ask(self, request: int) -> PendingAsk | None:
        """The node's ask numbered ``request`` while it waits: a failed delivery answers the ask it came from."""

    # --- what an activation asks the node to do --------------------------------------------

    def emit(self, cls: type[Event], *fields: Any) -> None:
        """Report an event (started, ended, a write confirmed or failed...) to the observer, if there is one."""

    def next_lease(self) -> int:
        """A lease no run on this node had: a run's writes carry it, so a replaced run's are refused (``Fenced``)."""

    def forget(self, activation: Activation) -> None:
        """The run ended: take it out of the table, so that the next message for its key starts a new one."""

    def track(self, task: asyncio.Task[Any]) -> None:
        """Keep a background task of the key (a write-behind save) that the node's orderly stop waits for."""

    def tell(self, ref: EntityRef[Any], message: Any, *, origin: str | None = None) -> None:
        """Deliver a message to a key (its own, from a timer or a schedule), checked and encoded as any tell."""
