"""``Cluster(...)``: the cluster options of an ``ActorSystem`` (``ActorSystem(cluster=Cluster(...), transport=...)``).

Durations are seconds or ``timedelta``s, checked here so that a bad option fails where it is
written. ``membership()`` gives the failure-detector timing as the membership core takes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from ..actor import seconds
from .membership import MembershipConfig

__all__ = ["Cluster"]


def _positive(value: timedelta | float, what: str) -> float:
    out = seconds(value, what)
    if out is None or not out > 0:
        raise ValueError(f"Cluster.{what} must be positive, got {value!r}")
    return out


@dataclass(frozen=True, init=False)
class Cluster:
    """Seeds (node ids), failure-detection timing (seconds), ring vnodes, the cluster name and the rejoin grace.

    ``rejoin_grace``: how long a node that learns it had a previous life stays out of the
    replication protocol (seconds; None: the system's ``write_timeout`` + 1 s). It must
    outlast any acquisition (a type's ``write_timeout``) that the previous life promised to.
    """

    seeds: tuple[str, ...]
    heartbeat: float
    suspect_after: float
    dead_after: float
    remove_after: float
    vnodes: int
    name: str
    rejoin_grace: float | None

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
    ) -> None:
        if isinstance(seeds, str):
            raise TypeError(f"Cluster seeds are a sequence of node ids, not one string: use [{seeds!r}]")
        seed_ids = tuple(seeds)
        for seed in seed_ids:
            if not isinstance(seed, str) or not seed:
                raise ValueError(f"a seed is a non-empty node id string, got {seed!r}")
        if isinstance(vnodes, bool) or not isinstance(vnodes, int) or vnodes < 1:
            raise ValueError(f"Cluster.vnodes must be a positive int, got {vnodes!r}")
        if not isinstance(name, str) or not name:
            raise ValueError(f"Cluster.name must be a non-empty string, got {name!r}")
        set_ = object.__setattr__
        set_(self, "seeds", tuple(dict.fromkeys(seed_ids)))
        set_(self, "heartbeat", _positive(heartbeat, "heartbeat"))
        set_(self, "suspect_after", _positive(suspect_after, "suspect_after"))
        set_(self, "dead_after", _positive(dead_after, "dead_after"))
        set_(self, "remove_after", _positive(remove_after, "remove_after"))
        set_(self, "vnodes", vnodes)
        set_(self, "name", name)
        set_(self, "rejoin_grace", None if rejoin_grace is None else _positive(rejoin_grace, "rejoin_grace"))

    def membership(self) -> MembershipConfig:
        """The failure-detector timing as ``MembershipConfig``."""
        return MembershipConfig(self.heartbeat, self.suspect_after, self.dead_after, self.remove_after)
