"""``ClusterNode``: what an ``ActorSystem(cluster=..., transport=...)`` runs beside its activations.

Membership (``MembershipService``), routing (``Router``) and replication
(``ReplicationService``: the node's replica store on channel ``"r"`` and the owner epochs of
the keys it runs) on the node's transport, and the placement policy over the membership
view. An activation acquires its key over the key's replicas at the type's write level and
confirms every write on a quorum (see ``casty._core.activation``). On every membership change the
node sweeps its replica store: keys marked ``@active`` that it now owns and does not run are
activated (a crashed owner's scheduled keys resume without a message).

Handoff: the node's replica joins the protocol (``ReplicationService.join``) once its
membership has learned the view (``Membership.learned``: never before the listen window, and
not while it has heard only a minority of the cluster as last known) and it has heard from a
peer (at once for a node with no other seed), or after ``Cluster.rejoin_grace`` when a peer spoke of a previous life of
this node (or nobody answered); then, and at every ring change, it pulls the other nodes'
replicas (``casty.protocol.handoff``), answering blank for keys it is not yet ready for.
Each sync round that ends sweeps again, so the ``@active`` keys a restarted node pulled
back, and now owns, resume there.

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

**The request rule.** A ``Reply`` (or ``Failed``) names only the asking node and the ask's
number, and a restarted node is reached at the same name: the late answer to an ask of its
previous life (the owner was slow, or answered after a retry) arrives at the new life. So a
life numbers its asks from its first incarnation up (``REQUEST_BITS``), never from 1 again:
such an answer finds no ask of this life and is dropped (swarm seed 1411: a Get of one
counter returned the count of another key, an increment asked by the previous life).

**The disk rule** (replication rule 8). A node with a durable store reads every record of
it, tombstones included, into its replica before the replica opens: after every node
restarted, the disk of a durable key's last owner is then in the read quorums (its replica
answers a ``Prepare`` with the saved pages, and its sync rounds hand them to the others),
not only the disk of whichever node owns the key next. The same read gives membership the
member list the previous life had learned (``casty.cluster.viewstore``, one reserved record,
written when that list changes): membership learns no view before it (its "The remembered view").

Placement: the ring is built over ``membership.ring_nodes()`` (members alive, suspect or
dead; rebuilt only when that set changes); a key's replicas are the first ``replicas``
distinct nodes clockwise, ``replicas`` being its actor type's ``@actor(replicas=)`` (looked
up by name; a name no module defines raises ``UnknownActor``); its owner is the first of
those replicas the membership says is ``serving`` (alive or suspect), so a type with one
replica has one candidate owner and a key of it is unavailable while that node is down; a
node without a quorum names no owner at all.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Final

from .. import observer as ev
from .._core.activation import Envelope
from .._core.state import ACTIVE_PAGE
from ..errors import ActorFailed, CastyError, Fenced, MessageTooLarge, RemoteError, SchemaError, Unavailable, UnknownActor
from ..observer import Event
from ..ports import ListsRecords
from .._core.ref import ReplyRef, reply_type
from .config import Cluster
from .driver import Dispatcher, MembershipService
from ..protocol.membership import Doubted, MemberChanged, MemberView, ViewLearned
from ..protocol.placement import Placement as RingPlacement
from ..protocol.placement import Ring
from ..protocol.handoff import RoundEnded, RoundStarted
from .replicas import ReplicationService
from .replicated_pages import ReplicatedPages
from ..protocol.replication import Entity, Epoch, Snapshot, Stamp
from .routing import CLUSTER_WIRE, Deliver, Failed, Reply, Router, clip
from .viewstore import VIEW_ACTOR, ViewKeeper

if TYPE_CHECKING:
    from .._core.activation import Activation
    from .._core.system import ActorSystem, Placement

__all__ = ["ClusterNode", "RESUME_EVERY", "RESUME_ORIGIN", "REQUEST_BITS"]

RESUME_EVERY: Final = 1.0
"""Seconds between two looks at the node's orphans (keys left ``@active`` with no run: see the module docstring)."""
RESUME_ORIGIN: Final = "@resume"
"""The origin of a ``Deliver`` that carries no message: "resume this key, you own it" (answered by an empty ``Reply``)."""
REQUEST_BITS: Final = 10
"""A life's request ids start at its first incarnation (wall µs at its birth) shifted by this many bits (the request rule).

The lives of a node are born at distinct microseconds, so their ids never meet unless one
life made more than 1024 asks per microsecond it lived; and a birth time below 2**53 µs
(the year 2255) keeps every id inside the 64-bit integers a frame carries.
"""


_log = logging.getLogger("casty")


def _ignore(_event: Event) -> None:
    pass


class ClusterNode:
    """Membership, routing and placement of one node; built on the system's loop at entry."""

    def __init__(self, system: ActorSystem, config: Cluster) -> None:
        transport = system.transport
        assert transport is not None
        self.system: Final = system
        self.config: Final = config
        reported = system.observer or _ignore
        self._sweep_armed = False
        self._started_at = system.loop.time()
        # Only the node's own options decide the grace (not which modules happen to be imported):
        # a type whose write_timeout exceeds the system's needs Cluster(rejoin_grace=...) to match.
        self._grace = config.rejoin_grace if config.rejoin_grace is not None else system.write_timeout + 1.0
        self._grace_timer: Any = None
        self._resweep: Any = None
        self._orphans: dict[Entity, None] = {}  # keys left @active with no run, to resume (the resume rule)
        self._orphan_timer: Any = None
        self._nudges: dict[int, Entity] = {}  # resume requests in flight: request -> key
        self._nudged: dict[Entity, tuple[int, float]] = {}  # key -> its request in flight, and when it is given up
        self._built = False
        born = system.clock.now_us()  # this life's first incarnation: grows with every life of the node
        # Request ids of one life (the request rule): a Reply names only the node and the ask's
        # number, and a restarted node is reached at the same name, so the late reply to an ask of
        # its previous life must not find an ask of this one under that number.
        system.number_requests_after(born << REQUEST_BITS)
        self._quorum = False  # whether this node had a quorum at the last membership report (the step-down rule)

        def observer(event: Event) -> None:
            reported(event)
            if isinstance(event, MemberChanged):
                if self._built:
                    self._ring_check()  # at once: no write may be confirmed on a moved replica set after this
                    self._standing(event)
                self._membership_changed()
            elif isinstance(event, Doubted):
                if self._built and self.system.running:
                    self._step_down(event.reason)
            elif isinstance(event, ViewLearned):
                if self._built:
                    self._quorum = self.membership.has_quorum()
                self._membership_changed()  # a first quorum: open the replica, resume the keys this node owns
            if self._keeper is not None and isinstance(event, (MemberChanged, ViewLearned)) and self._built:
                if self.membership.core.learned:
                    self._keeper.keep(self.membership.core.remembered())  # a write only when the list changed

        # The remembered view (membership): a node with a disk learns no view before it read it back.
        self._keeper = ViewKeeper(system.store, system.codec, born, system.loop, node=system.node) if system.store is not None else None

        self.dispatcher: Final = Dispatcher.of(transport, CLUSTER_WIRE, observer=system.observer)
        self.membership: Final = MembershipService(
            system.node,
            born,
            config.seeds,
            config.membership(),
            transport,
            CLUSTER_WIRE,
            observer,
            loop=system.loop,
            recall=self._keeper is not None,
        )
        self.router: Final = Router(
            system.node,
            transport,
            CLUSTER_WIRE,
            self.dispatcher,
            system.loop,
            owner_of=self.owner_of,
            on_deliver=self._deliver_here,
            on_reply=self._reply_arrived,
            on_failed=self._failed,
            write_timeout=system.write_timeout,
            on_refused=self._refused,
        )
        self.replication: Final = ReplicationService(
            system.node, self.membership.incarnation, transport, CLUSTER_WIRE, self.dispatcher, system.loop,
            replica_set=self._replica_set, on_handoff=self._handoff_report, alone_is_ready=not self.membership.core.seeds,
        )
        self._ring_nodes: tuple[str, ...] | None = None
        self._ring = RingPlacement(Ring((), vnodes=config.vnodes))
        self._previous_ring = self._ring  # the ring before the last change: where moved keys' data still is
        self._without_for: tuple[str, ...] | None = None
        self._without = self._ring  # the current ring without this node: where a newcomer's keys' data is
        self._grace_timer = system.loop.call_at(self._started_at + self._grace, self._membership_changed)
        self._built = True
        self._seeded = system.store is None  # the disk rule: the replica opens once the store was read back into it
        if not self._seeded:
            system.track(system.loop.create_task(self._seed_replica()))

    @staticmethod
    def of(system: ActorSystem) -> ClusterNode | None:
        """The ``ClusterNode`` ``system`` runs (None alone, before entry, or under another ``ClusterPlugin``)."""
        node = system.cluster_node
        return node if isinstance(node, ClusterNode) else None

    # --- placement -----------------------------------------------------------------------

    def _current(self) -> RingPlacement:
        nodes = self.membership.ring_nodes()
        if nodes != self._ring_nodes:
            self._ring_nodes = nodes
            self._previous_ring = self._ring
            self._ring = RingPlacement(Ring(nodes, vnodes=self.config.vnodes))
        return self._ring

    def _ring_check(self) -> None:
        """The ring may have changed: tell the replica (new sync round) and end the activations it moved."""
        before = self._ring_nodes
        self._current()
        if self._ring_nodes == before:
            return
        # Even before the replica opens: its answers to the peers' sync rounds must say that
        # it knows them (it holds nothing and confirms nothing yet, so its answer is safe to count).
        self.replication.ring_changed(self._peers())
        self._end_moved_activations()

    def _replicas(self, actor: str) -> int:
        """How many replicas hold a key of type ``actor`` (its ``replicas=``), which are also its candidate owners.

        Looked up by name (``UnknownActor`` if no module defines it): the router asks about
        names that arrived in frames, and a name this node cannot resolve must fail clearly.
        """
        return self.system.type_named(actor).replicas

    def placement(self, actor: str, key: str) -> Placement:
        """Owner and replicas of ``actor[key]`` in this node's view; the type's ``replicas=`` sets how many."""
        from .._core.system import Placement

        membership = self.membership
        placed = self._current().place(
            actor, key, replicas=self._replicas(actor), alive=membership.serving, quorum=membership.has_quorum()
        )
        return Placement(owner=placed.owner, replicas=placed.replicas)

    def members(self) -> list[MemberView]:
        """The membership as this node sees it (every member not removed, this node included)."""
        return self.membership.members()

    def replicas_of(self, actor: str, key: str, n: int) -> tuple[str, ...]:
        """The ``n`` nodes that hold ``actor[key]``'s state (dead ones included: a quorum of them suffices)."""
        return self._current().replicas(actor, key, n)

    def owner_of(self, actor: str, key: str) -> str | None:
        membership = self.membership
        if not membership.has_quorum():
            return None
        return self._current().owner(actor, key, replicas=self._replicas(actor), alive=membership.serving)

    # --- handoff: open the replica, pull on ring changes, resume @active keys -------------

    def _replica_set(self, entity: Entity) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
        """The key's replicas under the current ring, under the ring before the last change, and without this node."""
        actor_name, key = entity
        try:
            count = self.system.type_named(actor_name).replicas
        except Exception:
            count = 3  # a type this node does not host: the default
        current = self._current()
        nodes = self._ring_nodes or ()
        if nodes != self._without_for:
            self._without_for = nodes
            self._without = RingPlacement(Ring(tuple(n for n in nodes if n != self.system.node), vnodes=self.config.vnodes))
        return (
            current.replicas(actor_name, key, count),
            self._previous_ring.replicas(actor_name, key, count),
            self._without.replicas(actor_name, key, count),
        )

    def _handoff_report(self, event: RoundStarted | RoundEnded, reason: str) -> None:
        if isinstance(event, RoundStarted):
            self.system.emit(ev.HandoffStarted, event.round, event.peers, reason)
            return
        self.system.emit(ev.HandoffEnded, event.round, event.peers, event.synced, len(self.replication.store.entities()))
        self._membership_changed()  # keys pulled back with @active may be ours to resume
        if self.system.store is not None:
            self.system.track(self.system.loop.create_task(self._sweep_store()))

    async def _sweep_store(self) -> None:
        """Activate the keys the node's durable store marks ``@active`` that this node owns and does not run.

        This is how a durable key that every replica lost (all of them restarted) resumes, with
        its schedules, on its owner; the activation adopts the store's pages only if no replica
        holds anything of the key (see ``Activation._acquire_replicated``).
        """
        system = self.system
        store = system.store
        assert store is not None
        for actor_name, key in sorted(await store.keys()):
            if not system.running or not self.membership.has_quorum():
                return
            if actor_name == VIEW_ACTOR:
                continue  # the remembered view, not a key
            if (actor_name, key) in system.activation_table:
                continue
            try:
                stored = await store.load(actor_name, key)
                marked = stored is not None and bool(stored[1]) and ACTIVE_PAGE in system.codec.decode_pages(stored[1])
            except Exception as exc:
                system.emit(ev.ActivationFailed, actor_name, key, 0, f"not resumed from the store: {exc!r}", None, 0.0)
                continue
            if marked and (actor_name, key) not in system.activation_table:
                self._resume((actor_name, key), "not resumed from the store")

    def _resume(self, entity: Entity, failed: str) -> bool:
        """Activate ``entity`` here if this node owns it (it resumes with no message); True if it was started.

        A failure (a type this node does not host, a store error) is reported as
        ``ActivationFailed`` with ``failed`` before the reason, and the sweep goes on.
        """
        system = self.system
        actor_name, key = entity
        try:
            if self.owner_of(actor_name, key) != system.node:
                return False
            actor = system.type_named(actor_name)
            system.activate(actor, key, actor.initial)
            return True
        except Exception as exc:
            system.emit(ev.ActivationFailed, actor_name, key, 0, f"{failed}: {exc!r}", None, 0.0)
            return False

    def _peers(self) -> tuple[str, ...]:
        node = self.system.node
        return tuple(other for other in self.membership.ring_nodes() if other != node)

    def _open_or_resync(self) -> None:
        """Open the replica once it is safe (see the module docstring); after that, pull again when the ring changes."""
        replication = self.replication
        if replication.opened:
            self._ring_check()
            return
        core = self.membership.core
        if not core.learned:
            # Not before the membership learned the view: a restarted node whose ring holds only
            # the nodes it has heard so far (another restarted one, say) would find itself ready
            # for keys it is no replica of in the cluster as last known, and answer prepares
            # with nothing as if it held their copies.
            return
        # A node with no other seed founds the cluster: nobody can tell it of a previous life,
        # so it opens at once once it listened (give every node another seed for the grace to protect it).
        if not self._seeded:
            return  # the disk rule: the store's records first (_seed_replica opens it when done)
        heard = not core.seeds or any(member.node != self.system.node for member in core.members())
        if (heard and core.previous_life is None) or self.system.loop.time() >= self._started_at + self._grace:
            replication.join(self._peers())

    async def _seed_replica(self) -> None:
        """The disk rule: read every record of the node's durable store (tombstones too) into its replica, then let it open.

        A read that fails leaves the replica as it was (empty): the node serves as before the
        rule, its own store still consulted by its acquisitions; the error is logged.
        """
        system = self.system
        store = system.store
        assert store is not None
        snapshots: list[Snapshot] = []
        members: tuple[tuple[str, int], ...] = ()
        try:
            assert self._keeper is not None
            remembered = await self._keeper.read()
            members = remembered.members if remembered is not None else ()
        except Exception as exc:  # noqa: BLE001 - an unreadable memory is no memory: learn as a node without a disk
            _log.error("%s: the remembered member list could not be read: %r", system.node, exc)
        if self.replication.closed:
            return
        self.membership.recall(members)
        try:
            if isinstance(store, ListsRecords):
                listed = list(await store.records())
            else:
                listed = []
                for actor_name, key in await store.keys():
                    record = await store.load(actor_name, key)
                    if record is not None:
                        listed.append((actor_name, key, record))
            for actor_name, key, record in listed:
                if actor_name == VIEW_ACTOR:
                    continue  # the remembered view, not a key
                epoch = Epoch(int(record.epoch[0]), str(record.epoch[1]))
                pages = system.codec.decode_pages(record.state) if record.state else {}  # b"": a tombstone (rule 6)
                snapshots.append(Snapshot((actor_name, key), epoch, Stamp(epoch, int(record.version)), pages))
        except Exception as exc:  # noqa: BLE001 - a disk error must not keep the node out of the cluster
            _log.error("%s: the durable store could not be read back into the replica: %r", system.node, exc)
            snapshots = []
        if self.replication.closed:
            return
        for snapshot in snapshots:
            self.replication.store.import_(snapshot)
        self._seeded = True
        self._membership_changed()

    def _membership_changed(self) -> None:
        """A member changed status: sweep the replicas for ``@active`` keys this node now owns (on the next loop turn)."""
        if not self._sweep_armed:
            self._sweep_armed = True
            self.system.loop.call_soon(self._sweep)

    def _end_moved_activations(self) -> None:
        """End the activations of keys that another node now owns, as this node's quorum view says.

        No write: ``@active`` stays on the replicas, so the new owner resumes the key (its
        acquisition would fence this one anyway; ending now stops its timers and schedules at
        once). Its queued asks fail with ``Unavailable``; a tell queued here is lost, as at
        most once allows. A node without a quorum names no owner and ends nothing: it is
        fenced at its next write instead.
        """
        system = self.system
        node = system.node
        for activation in list(system.activation_table.values()):
            name, key = activation.type.name, activation.key
            try:
                owner = self.owner_of(name, key)
                replicas = self.replicas_of(name, key, activation.type.replicas)
            except Exception:
                continue
            pages = activation._pages
            slot = pages.slot if isinstance(pages, ReplicatedPages) else None
            if owner is not None and owner != node:
                activation.stop("handoff", f"the key moved to {owner}")
                system.forget(activation)
                self.orphaned(activation.entity)  # the new owner may not know the key is @active
            elif slot is not None and slot.owner.replicas and slot.owner.replicas != replicas:
                # Still ours, but over other replicas: no write may be confirmed on the old set
                # from now on (a new replica counts on that); the sweep acquires it again.
                activation.stop("handoff", "the key's replicas moved")
                system.forget(activation)
                self.orphaned(activation.entity)

    def _standing(self, event: MemberChanged) -> None:
        """The step-down rule: a node that may have been superseded while cut off ends every run it holds.

        Two facts tell a node that another may have taken its keys under a newer epoch while
        it could not hear or be heard: it lost its quorum (here: it owns nothing from now on;
        the minority side steps down at ``suspect_after``), or the membership reports
        ``Doubted`` (the observer above: it was frozen past ``suspect_after``, or a member it
        heard fine claimed it suspect or dead: a one-way cut). Its runs still hold their old
        epochs, and nothing else ends them: after the heal the ring names this node owner
        again, and the first write of each stale run would be fenced, failing a message the
        key's current epoch would have answered. A refutation of a stale verdict from a member
        this node held dead (a partition's other side coming back) is not a doubt: the
        majority side of a healed partition keeps its runs.
        """
        quorum = self.membership.has_quorum()
        if not self.system.running:
            pass  # stopping (an orderly leave reports this node left: no quorum): the system ends its runs itself
        elif self._quorum and not quorum:
            alive, members = self.membership.core.quorum_counts()
            self._step_down(f"{self.system.node} lost its quorum ({alive} of {members} members alive)")
        self._quorum = quorum

    def _step_down(self, why: str) -> None:
        """End every activation here as ``lost``: its epoch may have been superseded (see ``_standing``).

        No write (``@active`` stays), as when a newer epoch fences a run: each key becomes an
        orphan (the resume rule runs a scheduled key again on its owner once this node names
        one), its current and queued asks fail with ``Unavailable`` (at most once: the body
        may have begun one), and the next message for it starts a new activation, which
        acquires the key with a fresh prepare round instead of failing. An activation still
        acquiring is spared: the promises it waits for are given now, so if it wins them no
        newer epoch exists (and if it does not, it fails and is tried again as usual).
        """
        system = self.system
        for activation in list(system.activation_table.values()):
            if activation.pages is None:
                continue  # still acquiring
            activation.stop("lost", f"the run may be superseded: {why}")
            system.forget(activation)
            self.orphaned(activation.entity)

    def _sweep(self) -> None:
        """Open or re-sync the replica, then activate every key it holds with ``@active`` that this node now owns and does not run.

        A key whose owner crashed with it running (a schedule, or a body at work) resumes on
        its next owner without waiting for a message; the activation acquires the key as
        usual, so it runs from the newest confirmed state of a quorum, not from this replica's.
        """
        self._sweep_armed = False
        if self.replication.closed:
            return
        self._open_or_resync()
        self._end_moved_activations()
        system = self.system
        if not system.running or not self.membership.has_quorum():
            return
        store = self.replication.store
        resumed = 0
        for entity in store.entities():
            if entity not in system.activation_table and store.has_page(entity, ACTIVE_PAGE):
                resumed += self._resume(entity, "not resumed")
        if resumed and self._resweep is None:
            # An acquisition may fail (replicas not ready yet, no quorum in time) and a resumed
            # key has no message to try again: look again just after those acquisitions timed out.
            self._resweep = system.loop.call_later((system.write_timeout or 5.0) + 0.05, self._resweep_now)

    def _resweep_now(self) -> None:
        self._resweep = None
        self._membership_changed()

    def page_writer(self, activation: Activation) -> ReplicatedPages:
        """The ``PageWriter`` of an activation on this node: its pages live on the key's replicas."""
        return ReplicatedPages(activation, self)

    # --- the resume rule: orphans -------------------------------------------------------

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

    # --- sending -------------------------------------------------------------------------

    def send(self, request: int, actor: str, key: str, message: bytes, reply_request: int | None, origin: str | None) -> None:
        """Route an encoded message to its owner (an ask names its ``reply_request``)."""
        reply_node = self.system.node if reply_request is not None else None
        self.router.route(Deliver(request, actor, key, message, reply_node, reply_request, origin))

    def forget(self, request: int) -> None:
        self.router.forget(request)

    def reply(self, ref: ReplyRef[Any], value: Any) -> None:
        """Answer an ask of another node with a ``Reply`` frame (``Failed(kind="schema")`` if the value cannot travel)."""
        try:
            data = self.system.codec.encode_value(value, "reply")
        except SchemaError as exc:
            self.system.emit(ev.MessageDropped, "reply", f"{ref.node}#{ref.request}", type(value).__qualname__, str(exc))
            self.router.reply(ref.node, Failed(ref.request, "schema", clip(f"{self.system.node}: {exc}")))
            return
        self.router.reply(ref.node, Reply(ref.request, data))

    def fail(self, ref: ReplyRef[Any], error: BaseException, actor: str, key: str, message: Any) -> None:
        """Fail an ask of another node as the same ask would fail on one node.

        ``Unavailable`` and ``Fenced`` (the key could not confirm a write, or lost its epoch:
        not the body's fault) arrive as those classes; anything else the body of ``actor[key]``
        raised on ``message`` arrives as ``ActorFailed`` around a ``RemoteError`` with the
        exception's type name, text and repr (the exception object cannot travel).
        """
        if isinstance(error, Unavailable):
            text = clip(str(error) or type(error).__name__)
            self.router.reply(ref.node, Failed(ref.request, "fenced" if isinstance(error, Fenced) else "unavailable", text))
            return
        self.router.reply(
            ref.node,
            Failed(
                ref.request, "failed", clip(str(error)), actor, key,
                type(error).__name__, clip(repr(error)), type(message).__name__,
            ),
        )

    def _refuse(self, frame: Deliver, error: BaseException) -> None:
        """Fail the ask behind ``frame`` (if any) because this node could not take its message at all."""
        if frame.reply_node is None or frame.reply_request is None:
            return
        text = clip(f"{self.system.node} could not take the message for {frame.actor}[{frame.key!r}]: {error}")
        if isinstance(error, SchemaError):
            refusal = Failed(frame.reply_request, "schema", text)
        elif isinstance(error, UnknownActor):
            refusal = Failed(frame.reply_request, "unknown", text)
        elif isinstance(error, Fenced):
            refusal = Failed(frame.reply_request, "fenced", text)
        else:
            refusal = Failed(frame.reply_request, "unavailable", text)
        self.router.reply(frame.reply_node, refusal)

    # --- receiving -----------------------------------------------------------------------

    def _deliver_here(self, frame: Deliver) -> None:
        """A message for a key this node owns: decode it (refs bound to this system) and queue it."""
        system = self.system
        if not system.running:
            return
        if frame.origin == RESUME_ORIGIN:
            self._resume_asked(frame)
            return
        try:
            actor = system.type_named(frame.actor)
            message = system.codec.decode_message(frame.message, actor.schema)
            activation = system.activation_table.get((actor.name, frame.key)) or system.activate(actor, frame.key, actor.initial)
            activation.deliver(Envelope(message, origin=frame.origin) if frame.origin is not None else Envelope(message))
        except Exception as exc:
            system.emit(ev.MessageDropped, frame.actor, frame.key, "message", f"routed message not delivered: {exc!r}")
            self._refuse(frame, exc)

    def _refused(self, src: str, frame: Deliver, error: CastyError) -> None:
        """The router could not place a ``Deliver`` (no such actor type here): drop it, fail its ask at the asker."""
        self.system.emit(ev.MessageDropped, frame.actor, frame.key, "message", f"routed message from {src} refused: {error}")
        self._refuse(frame, error)

    def _reply_arrived(self, src: str, frame: Reply | Failed) -> None:
        """The answer to one of this node's asks: its value decoded into the ask's ``R``, or the error it failed with."""
        if frame.request in self._nudges:
            self._resume_answered(frame.request, frame if isinstance(frame, Failed) else None)
            return
        pending = self.system.pending_ask(frame.request)
        if pending is None or pending.future.done():
            return
        message = pending.message
        if isinstance(frame, Failed):
            pending.future.set_exception(_error_of(frame, message))
            return
        annotation = reply_type(type(message))
        try:
            value = self.system.codec.decode_value(frame.value, annotation, f"the reply to {type(message).__qualname__} from {src}")
        except SchemaError as exc:
            pending.future.set_exception(exc)
            return
        pending.future.set_result(value)

    def _failed(self, frame: Deliver, reason: str) -> None:
        if frame.origin == RESUME_ORIGIN:
            if frame.reply_request is not None:
                self._request_ended(frame.reply_request, taken=False)  # no owner took it: the key stays an orphan
            return
        where = f"{frame.actor}[{frame.key!r}]"
        if frame.reply_request is not None:
            pending = self.system.pending_ask(frame.reply_request)
            if pending is not None and not pending.future.done():
                pending.future.set_exception(Unavailable(f"ask to {where}: no owner took it: {reason}"))
            return
        self.system.emit(ev.MessageDropped, frame.actor, frame.key, "message", f"unavailable: {reason}")

    # --- lifecycle -----------------------------------------------------------------------

    def close(self, *, crashed: bool = False) -> None:
        """Leave the membership (in order, telling everyone; silently if ``crashed``) and stop routing."""
        for timer in (self._grace_timer, self._resweep, self._orphan_timer):
            if timer is not None:
                timer.cancel()
        if crashed and self._keeper is not None:
            self._keeper.close()  # a crash writes nothing more (an orderly leave keeps the last list it wrote)
        if crashed:
            self.membership.close()
        else:
            self.membership.leave()
        self.router.close()
        self.replication.close()


def _error_of(frame: Failed, message: Any) -> BaseException:
    """The exception a local ask of ``message`` would have raised, rebuilt from a ``Failed`` frame."""
    kind = frame.kind
    if kind == "failed":
        error = RemoteError(frame.error_type, frame.text, frame.error_repr)
        failed_on = frame.message_type if frame.message_type not in ("", type(message).__name__) else None
        return ActorFailed(frame.actor, frame.key, error, message, failed_on=failed_on)
    if kind == "fenced":
        return Fenced(frame.text)
    if kind == "schema":
        return SchemaError(frame.text)
    if kind == "unknown":
        return UnknownActor(frame.text)
    if kind == "too_large":
        return MessageTooLarge(frame.text)
    return Unavailable(frame.text)
