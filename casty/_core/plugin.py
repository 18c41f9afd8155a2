"""What the runtime asks of a cluster: the seam between ``casty._core`` and the drivers above it.

The runtime never imports ``casty.cluster``: a cluster plugs into an ``ActorSystem`` by
implementing the protocols named here, and the system only calls what they declare.

* ``ClusterOptions``: what ``ActorSystem(cluster=...)`` takes (``casty.Cluster``): it checks
  the node's transport when the system is built, and builds the node's ``ClusterPlugin``
  on the system's loop at entry.
* ``ClusterPlugin``: the running cluster of one node (``casty.cluster.runtime.ClusterNode``):
  where a key lives, how a message or a reply reaches another node, the members, the end.
  A few members serve the activation: its page writer (``page_writer``, which reads the
  replicas from ``ClusterNode`` itself), the resume rule and failing a remote ask.
* ``TickClaims``: what the node scheduler asks of the cluster for a cron tick in cluster
  mode (one delivery per tick cluster-wide). ``casty.cluster.claims`` provides it when
  imported (``provide_tick_claims``), as it defines the claim's actor type every node must
  know by name; ``casty.Cluster`` imports it, so a system with a cluster always has it.

Structural (``typing.Protocol``): an implementation does not subclass anything here, so the
layers stay apart in both directions; mypy checks that ``Cluster`` and ``ClusterNode`` fit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..ports import Transport
    from ..protocol.membership import MemberView
    from .activation import Activation
    from .pages import PageWriter
    from .occurrence import ScheduledEnvelope
    from .ref import ReplyRef
    from .system import ActorSystem, Placement

__all__ = ["ClusterOptions", "ClusterPlugin", "TickClaims"]


@runtime_checkable
class ClusterOptions(Protocol):
    """What ``ActorSystem(cluster=...)`` takes: options that check a transport and build the node's cluster."""

    def check_transport(self, transport: Transport) -> None:
        """``ConfigurationError`` if ``transport`` cannot carry this cluster as configured (a secret it does not check)."""

    def build_node(self, system: ActorSystem) -> ClusterPlugin:
        """The running cluster of ``system`` (membership, routing, replication), built on its loop at entry."""


class ClusterPlugin(Protocol):
    """What an ``ActorSystem`` asks of the cluster it runs in (``ClusterOptions.build_node`` made it)."""

    # --- the system: placement, routing, members, the end --------------------------------

    def owner_of(self, actor: str, key: str) -> str | None:
        """The node that runs ``actor[key]`` in this node's view (None: no quorum here): tell and ask deliver there."""

    def placement(self, actor: str, key: str) -> Placement:
        """Owner and replicas of ``actor[key]`` in this node's view (``ActorSystem.placement``)."""

    def members(self) -> list[MemberView]:
        """The membership as this node sees it, itself included (``ActorSystem.members``)."""

    def send(self, request: int, actor: str, key: str, message: bytes, reply_request: int | None, origin: str | None) -> None:
        """Carry an encoded message to the key's owner; an ask names its ``reply_request`` (its answer resolves it)."""

    def send_scheduled(self, request: int, actor: str, key: str, message: bytes, envelope: ScheduledEnvelope) -> None:
        """``send`` of a node schedule's tick with its occurrence (``envelope``'s): the owner queues it as a ``ScheduledEnvelope``."""

    def forget(self, request: int) -> None:
        """The ask ``request`` is over here (answered, timed out, cancelled): stop retrying it."""

    def reply(self, ref: ReplyRef[Any], value: Any) -> None:
        """Answer the ask of another node behind ``ref`` with ``value`` (checked by the system already)."""

    def close(self, *, crashed: bool = False) -> None:
        """Leave the cluster (in order, or silently if ``crashed``) and stop routing: the system is stopping."""

    # --- the activation: replicated writes, the resume rule, remote asks ------------------

    def page_writer(self, activation: Activation) -> PageWriter:
        """Where ``activation``'s page writes go, chosen once as it is made (``casty.cluster.replicated_pages``)."""

    def orphaned(self, entity: tuple[str, str], *, if_marked: bool = False) -> None:
        """A run of ``entity`` ended here with ``@active`` left: see that its owner runs it again (the resume rule)."""

    def acquired(self, entity: tuple[str, str]) -> None:
        """A run of ``entity`` acquired the key here: it is nobody's orphan on this node any more (the resume rule)."""

    def fail(self, ref: ReplyRef[Any], error: BaseException, actor: str, key: str, message: Any) -> None:
        """Fail the ask of another node behind ``ref`` as the same ask would have failed on one node."""


class TickClaims(Protocol):
    """What the node scheduler asks of the cluster for a cron tick in cluster mode: one delivery per tick."""

    def key(self, reference: str, tick_us: int) -> str:
        """The tick's claim key (the scheduler's events name it)."""

    def ttl_us(self, period_us: int | None) -> int:
        """The claim TTL of a tick whose cron period is ``period_us`` (None: the cron has no next tick)."""

    def expired(self, tick_us: int, ttl_us: int, now_us: int) -> bool:
        """Whether the tick is older than its TTL at ``now_us``: then it is skipped without a claim."""

    async def claim(self, system: ActorSystem, key: str, tick_us: int, ttl_us: int) -> str | None:
        """Claim the tick for ``system``'s node: the winner's node id, or None if the claim's owner refused it as expired.

        Raises what the claim's ask raised (no owner, a timeout, a fenced owner): the node
        does not know it won, so it does not tell.
        """
