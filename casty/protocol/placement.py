"""Where a key lives: a consistent-hash ring per actor type, and the owner policy on top.

Every node must compute the same replicas for the same (actor type, key) from the same
member list, in any process, on any machine, after any restart: the ring is a contract
between nodes, as much as a frame format is. So tokens come from ``hashlib.blake2b`` over
length-prefixed UTF-8 parts (never from ``hash()``, which changes with ``PYTHONHASHSEED``),
and nothing here depends on the order in which nodes were given.

Each node contributes ``vnodes`` points to the ring of each actor type. The type name is
part of every hashed point, so two types spread their keys over the nodes independently
(one hot type does not pile its keys on the same nodes as every other type). A key belongs
to the first point whose token is at or after the key's token, wrapping around; its
replicas are the next distinct nodes met clockwise from there. Adding or removing one node
only moves the keys whose walk meets that node: about R/N of them, and always to or from
that node.

Ownership is a policy over the replicas: the owner is the first replica that is alive or
suspect (a suspicion alone must not move a key: it may be a slow network, and moving a
key has a cost), and a node that does not see more than half of the members alive owns
nothing (so the minority side of a partition steps down instead of competing).
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = ["Ring", "Placement", "Placed", "has_quorum", "key_token", "vnode_token"]

_PERSON = b"casty.ring.v1"  # blake2b personalisation: changing it moves every key of every cluster


def _token(domain: bytes, *parts: str) -> int:
    """A 64-bit token from length-prefixed parts: ("ab", "c") and ("a", "bc") never collide by construction."""
    h = hashlib.blake2b(digest_size=8, person=_PERSON)
    h.update(domain)
    for part in parts:
        data = part.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(4, "big"))
        h.update(data)
    return int.from_bytes(h.digest(), "big")


def key_token(actor: str, key: str) -> int:
    """The ring position of ``key`` of actor type ``actor`` (the type salts the hash)."""
    return _token(b"k", actor, key)


def vnode_token(actor: str, node: str, index: int) -> int:
    """The ring position of virtual node ``index`` of ``node`` on the ring of actor type ``actor``."""
    return _token(b"v", actor, node, str(index))


def has_quorum(alive: int, members: int) -> bool:
    """True when ``alive`` is more than half of ``members`` (both as one node sees them).

    A node that sees no majority alive may be on the small side of a partition; owning
    keys there would let two nodes run the same key, so it owns none. Zero members has
    no majority.
    """
    if alive < 0 or members < 0 or alive > members:
        raise ValueError(f"need 0 <= alive <= members, got alive={alive}, members={members}")
    return 2 * alive > members


class Ring:
    """The nodes of a cluster as points on one consistent-hash ring per actor type.

    A ring is immutable: membership changes build a new one (``with_node``/``without_node``),
    so a placement answer never mixes two views. The per-type point tables are built on
    first use and kept (types are few; building costs ``len(nodes) * vnodes`` hashes).
    """

    __slots__ = ("_nodes", "_vnodes", "_tables")

    def __init__(self, nodes: Iterable[str], *, vnodes: int = 64) -> None:
        if vnodes < 1:
            raise ValueError(f"vnodes must be at least 1, got {vnodes}")
        self._nodes: tuple[str, ...] = tuple(sorted(set(nodes)))
        self._vnodes = vnodes
        self._tables: dict[str, tuple[list[int], list[str]]] = {}

    @property
    def nodes(self) -> tuple[str, ...]:
        """The distinct nodes, sorted (the order given to the constructor does not matter)."""
        return self._nodes

    @property
    def vnodes(self) -> int:
        return self._vnodes

    def __len__(self) -> int:
        return len(self._nodes)

    def __contains__(self, node: object) -> bool:
        return node in self._nodes

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Ring) and (self._nodes, self._vnodes) == (other._nodes, other._vnodes)

    def __hash__(self) -> int:
        return hash((self._nodes, self._vnodes))

    def __repr__(self) -> str:
        return f"Ring({list(self._nodes)!r}, vnodes={self._vnodes})"

    def with_node(self, node: str) -> Ring:
        return Ring((*self._nodes, node), vnodes=self._vnodes)

    def without_node(self, node: str) -> Ring:
        return Ring((n for n in self._nodes if n != node), vnodes=self._vnodes)

    def _table(self, actor: str) -> tuple[list[int], list[str]]:
        table = self._tables.get(actor)
        if table is None:
            # Ties between equal tokens (astronomically rare) break by node id: still deterministic.
            points = sorted((vnode_token(actor, node, i), node) for node in self._nodes for i in range(self._vnodes))
            table = ([token for token, _ in points], [node for _, node in points])
            self._tables[actor] = table
        return table

    def points(self, actor: str) -> list[tuple[int, str]]:
        """The ring of ``actor`` as sorted ``(token, node)`` points (for views and tests)."""
        tokens, owners = self._table(actor)
        return list(zip(tokens, owners))

    def replicas(self, actor: str, key: str, n: int) -> tuple[str, ...]:
        """The first ``n`` distinct nodes clockwise from the key's token (fewer if the ring has fewer nodes)."""
        if n < 0:
            raise ValueError(f"the number of replicas cannot be negative, got {n}")
        want = min(n, len(self._nodes))
        if want == 0:
            return ()
        tokens, owners = self._table(actor)
        size = len(tokens)
        start = bisect_left(tokens, key_token(actor, key))
        found: list[str] = []
        for step in range(size):
            node = owners[(start + step) % size]
            if node not in found:
                found.append(node)
                if len(found) == want:
                    break
        return tuple(found)


@dataclass(frozen=True, slots=True)
class Placed:
    """What ``system.placement(type, key)`` answers: the owner (None: nobody may run it now) and the replicas."""

    owner: str | None
    replicas: tuple[str, ...]


class Placement:
    """The owner policy over a ring: first replica alive or suspect, and nothing without a quorum.

    ``alive`` is the caller's view of a node: it should answer True for members that are
    alive *or suspect* (``Membership.serving`` does exactly that), False for dead, left,
    removed or unknown ones. ``quorum`` is the caller's ``has_quorum`` verdict; without it
    this node names no owner at all, whatever the ring says.
    """

    __slots__ = ("_ring",)

    def __init__(self, ring: Ring) -> None:
        self._ring = ring

    @property
    def ring(self) -> Ring:
        return self._ring

    def replicas(self, actor: str, key: str, n: int) -> tuple[str, ...]:
        return self._ring.replicas(actor, key, n)

    def owner(
        self,
        actor: str,
        key: str,
        *,
        replicas: int,
        alive: Callable[[str], bool],
        quorum: bool = True,
    ) -> str | None:
        """The first of the key's ``replicas`` nodes for which ``alive`` is true; None if none or no quorum."""
        return self.place(actor, key, replicas=replicas, alive=alive, quorum=quorum).owner

    def place(
        self,
        actor: str,
        key: str,
        *,
        replicas: int,
        alive: Callable[[str], bool],
        quorum: bool = True,
    ) -> Placed:
        """Owner and replicas of a key, as one answer."""
        nodes = self._ring.replicas(actor, key, replicas)
        if not quorum:
            return Placed(None, nodes)
        for node in nodes:
            if alive(node):
                return Placed(node, nodes)
        return Placed(None, nodes)
