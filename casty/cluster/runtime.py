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

**The resume rule** (no ``@active`` key is left without a run) is ``casty.cluster.resume``
(the orphans of this node, resume requests); **the request rule** (a life numbers its asks
above every earlier life's) and the messages, replies and failures between nodes are
``casty.cluster.delivery``. Both are parts of ``ClusterNode`` (mixins), on its attributes.

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
from .._core.state import ACTIVE_PAGE
from ..observer import Event
from ..ports import ListsRecords
from .config import Cluster
from .delivery import REQUEST_BITS, Delivery
from .driver import Dispatcher, MembershipService
from ..protocol.membership import Doubted, MemberChanged, MemberView, ViewLearned
from ..protocol.placement import Placement as RingPlacement
from ..protocol.placement import Ring
from ..protocol.handoff import RoundEnded, RoundStarted
from .replicas import ReplicationService
from .replicated_pages import ReplicatedPages
from ..protocol.replication import Entity, Epoch, Snapshot, Stamp
from .resume import RESUME_EVERY, RESUME_ORIGIN, ResumeRule
from .routing import CLUSTER_WIRE, Router
from .viewstore import VIEW_ACTOR, ViewKeeper

if TYPE_CHECKING:
    from .._core.activation import Activation
    from .._core.system import ActorSystem, Placement

__all__ = ["ClusterNode", "RESUME_EVERY", "RESUME_ORIGIN", "REQUEST_BITS"]  # the rules' constants, re-exported

_log = logging.getLogger("casty")


def _ignore(_event: Event) -> None:
    pass


class ClusterNode(ResumeRule, Delivery):
    """Membership, routing and placement of one node; built on the system's loop at entry.

    The resume rule (``ResumeRule``, ``casty.cluster.resume``) and the messages to and from
    other nodes (``Delivery``, ``casty.cluster.delivery``) are its parts from other modules.
    """

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
            pages = activation.page_writer
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
