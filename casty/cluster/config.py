"""``Cluster(...)``: the cluster options of an ``ActorSystem`` (``ActorSystem(cluster=Cluster(...), transport=...)``).

Durations are seconds or ``timedelta``s, checked here so that a bad option fails where it is
written. ``membership()`` gives the failure-detector timing as the membership core takes it.

The cluster ``secret`` is checked against the transport when the system is built
(``check_transport``): a ``Cluster(secret=...)`` over a transport that does not prove and
demand that same secret in its handshake would look protected and not be, so it is a
``ConfigurationError`` rather than a silent hole. The secret never shows in ``repr``.

``Cluster`` is what ``ActorSystem(cluster=...)`` takes (``casty._core.plugin.ClusterOptions``):
the system calls ``check_transport`` when it is built and ``build_node`` at entry, and never
imports this layer. Importing this module imports ``casty.cluster.claims`` too: a system with a
cluster claims its cron ticks there, and every node must know the claim's actor type by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Final

from .._core.actor import seconds
from ..errors import ConfigurationError
from ..protocol.framing import HANDSHAKE_MAX
from ..protocol.membership import MembershipConfig
from . import claims as _claims  # noqa: F401 - the cron claims and their actor type (see the module docstring)
from .tcp import secret_bytes

if TYPE_CHECKING:
    from .._core.system import ActorSystem
    from ..ports import Transport
    from .runtime import ClusterNode

__all__ = ["Cluster", "check_transport", "MAX_CLUSTER_NAME", "check_cluster_name"]

MAX_CLUSTER_NAME: Final = 200
"""The longest cluster name, in UTF-8 bytes: small enough that every handshake frame naming it fits ``HANDSHAKE_MAX``.

Why a bound here, and not a larger handshake. The name travels in the dialer's ``Hello``
(with its node id and a 32-byte nonce) and, twice, in a refusal (``cluster 'a' is not this
node's cluster 'b'``, each as ``repr``, so up to two bytes a byte); all are read under the
1 KiB ``HANDSHAKE_MAX``, which bounds what a stranger can make a node buffer before it says
who it is. 200 bytes keeps the worst refusal (two names of backslashes: 804 bytes of reprs) and
any Hello inside it; a name is a label, it needs no more. The seeds never travel in a
handshake, so a long ``--seeds`` list is not bounded by it.
"""


def check_cluster_name(name: object, what: str = "Cluster.name") -> str:
    """``name`` if it can be a cluster name; else ``ValueError`` naming ``what``, the rule and the limit.

    One check for every path that names a cluster (``Cluster(name=)`` in process, the node's
    and the clients' ``--cluster``, ``ClusterClient(cluster=)``), so a name one refuses is a
    name none takes: printable text (it shows in logs and refusals), valid UTF-8 (it travels),
    1 to ``MAX_CLUSTER_NAME`` bytes.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"{what} must be a non-empty string, got {name!r}")
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise ValueError(f"{what} {ascii(name[:40])} is not valid unicode ({exc.reason})") from None
    if size > MAX_CLUSTER_NAME:
        raise ValueError(
            f"{what} is {size} bytes, over the {MAX_CLUSTER_NAME}-byte limit of a cluster name "
            f"(it must fit the {HANDSHAKE_MAX}-byte handshake frame): {name[:40]!r}..."
        )
    if not name.isprintable():
        raise ValueError(f"{what} must be printable text (no control characters), got {name!r}")
    return name


def _positive(value: timedelta | float, what: str) -> float:
    out = seconds(value, what)
    if out is None or not out > 0:
        raise ValueError(f"Cluster.{what} must be positive, got {value!r}")
    return out


@dataclass(frozen=True, init=False)
class Cluster:
    """Seeds (node ids), failure-detection timing (seconds), ring vnodes, the cluster name, the rejoin grace, the secret.

    ``rejoin_grace``: how long a node that learns it had a previous life stays out of the
    replication protocol (seconds; None: the system's ``write_timeout`` + 1 s). It must
    outlast any acquisition (a type's ``write_timeout``) that the previous life promised to.

    ``secret``: bytes or str (kept as UTF-8 bytes), or None. With one, a peer joins the
    cluster's connections only by proving it in the TCP handshake (``TcpTransport(secret=)``,
    which must be given the same one). Left out of ``repr``.
    """

    seeds: tuple[str, ...]
    heartbeat: float
    suspect_after: float
    dead_after: float
    remove_after: float
    vnodes: int
    name: str
    rejoin_grace: float | None
    secret: bytes | None = field(repr=False)

    def __init__(
        self,
        seeds: Sequence[str] = (),
        *,
        heartbeat: timedelta | float = 1.0,
        suspect_after: timedelta | float = 5.0,
        dead_after: timedelta | float = 5.0,
        remove_after: timedelta | float = 60.0,
        vnodes: int = 64,
        name: str = "casty",
        rejoin_grace: timedelta | float | None = None,
        secret: bytes | str | None = None,
    ) -> None:
        if isinstance(seeds, str):
            raise TypeError(f"Cluster seeds are a sequence of node ids, not one string: use [{seeds!r}]")
        seed_ids = tuple(seeds)
        for seed in seed_ids:
            if not isinstance(seed, str) or not seed:
                raise ValueError(f"a seed is a non-empty node id string, got {seed!r}")
        if isinstance(vnodes, bool) or not isinstance(vnodes, int) or vnodes < 1:
            raise ValueError(f"Cluster.vnodes must be a positive int, got {vnodes!r}")
        check_cluster_name(name)
        set_ = object.__setattr__
        set_(self, "seeds", tuple(dict.fromkeys(seed_ids)))
        set_(self, "heartbeat", _positive(heartbeat, "heartbeat"))
        set_(self, "suspect_after", _positive(suspect_after, "suspect_after"))
        set_(self, "dead_after", _positive(dead_after, "dead_after"))
        set_(self, "remove_after", _positive(remove_after, "remove_after"))
        set_(self, "vnodes", vnodes)
        set_(self, "name", name)
        set_(self, "rejoin_grace", None if rejoin_grace is None else _positive(rejoin_grace, "rejoin_grace"))
        set_(self, "secret", secret_bytes(secret, "Cluster.secret"))

    def membership(self) -> MembershipConfig:
        """The failure-detector timing as ``MembershipConfig``."""
        return MembershipConfig(self.heartbeat, self.suspect_after, self.dead_after, self.remove_after)

    def check_transport(self, transport: Transport) -> None:
        """``ConfigurationError`` if this cluster's secret is one ``transport`` does not check (``check_transport``)."""
        check_transport(self, transport)

    def build_node(self, system: ActorSystem) -> ClusterNode:
        """The running cluster of ``system`` (``ClusterNode``), built on its loop as it enters."""
        from .runtime import ClusterNode  # the drivers, only once a system runs in a cluster

        return ClusterNode(system, self)


def check_transport(cluster: Cluster, transport: object) -> None:
    """``ConfigurationError`` if ``cluster`` has a secret that ``transport`` does not use in its handshake.

    A transport says so with ``uses_secret(secret) -> bool`` (``TcpTransport``, and the node's
    ``AddressedTransport`` around it); one without that method cannot authenticate peers.
    """
    if cluster.secret is None:
        return
    uses_secret = getattr(transport, "uses_secret", None)
    if uses_secret is None:
        raise ConfigurationError(
            f"Cluster(secret=...) needs a transport that checks it in its handshake; {type(transport).__qualname__} does not"
        )
    if not uses_secret(cluster.secret):
        raise ConfigurationError("Cluster(secret=...) and the transport's secret differ: give TcpTransport(secret=) the same one")
