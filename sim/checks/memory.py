"""What a node remembers of a key: its replica set, the eras of its memory, when it lost unsynced or all state.

Why a module of its own: the safety checks (``sim.checks.safety``) ask these questions of the trace
(was a node's memory of this key wiped between two acquisitions? was it down?) and so does a reader
of a finding; the answers are cached per trace, as several checks ask the same one.
"""

from __future__ import annotations

import functools
import weakref
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from casty.protocol.placement import Ring

from ..trace import Row, Trace

if TYPE_CHECKING:
    from ..world import World


def memory_eras(world: World) -> Callable[[str, str, int], int]:
    """For keys with a replica set (``replica_set``), the era of a row: how many times, before its time, fewer than
    a majority of the key's replicas still held its latest confirmed state (``_forgotten_at``).

    Once a majority of a key's replicas forgot it, nothing of its history is owed (no read quorum meets a copy):
    the next owner may rightly start it over, at round 1 and version 0. The ordering checks compare rows within an
    era only. Two approximations, stated: a replica up at a write is taken to hold it (it may have missed it: an
    era could then be missed), and a restarted one to hold nothing until the next write (a handoff may have
    refilled it: an era could be found the runtime did not need). Keys without a replica set are all one era.
    """
    results: dict[str, object] = getattr(world, "results", {})  # a bare (trace-only) world has no results: one era
    if not results.get("replicas") and not results.get("ring"):
        return lambda actor, key, t_ns: 0
    durable = set(world.results.get("durable", ()))
    bounds: dict[tuple[str, str], list[int]] = {}

    def edges_of(actor: str, key: str) -> list[int]:
        return _forgotten_at(world.trace, replica_set(world, actor, key), actor in durable, (actor, key))

    def era(actor: str, key: str, t_ns: int) -> int:
        edges = bounds.get((actor, key))
        if edges is None:
            edges = bounds[(actor, key)] = edges_of(actor, key)
        return sum(1 for edge in edges if edge < t_ns)

    return era


def _forgotten_at(trace: Trace, members: list[str], durable: bool, of: tuple[str, str]) -> list[int]:
    """The times at which fewer than a majority of ``members`` still held the key's latest confirmed state.

    Walks the key's confirmed writes and the members' crashes and restarts in time order. A
    confirmed write is held by every member up at that moment (a down node acknowledged
    nothing; an up one is assumed to have it: the check then finds fewer eras, never more
    than the runtime allows). A crash takes the node out of the holders, except, for a
    durable type, a crash its disk came through (``memory_losses``) on a node that had itself
    confirmed the latest version (only an owner saves a durable key, and only what it
    confirmed). A restarted node holds nothing until the next write. When the holders fall
    below a majority, the key is forgotten: a new era starts, held by the members up then.
    A restarted node's sync round (``handoff.ended``) that had a holder among its peers pulled
    that holder's copy: it holds again. One that ended with none of them opened the node empty:
    once such nodes are a majority, a read quorum can meet no holder (seed 9: the holder was
    paused and off their ring), so the key is forgotten there too and a new era starts.
    """
    if not members:
        return []
    majority = len(members) // 2 + 1
    kept_crashes = set()
    if durable:
        lost = memory_losses(trace, durable=True, of=of)
        every = memory_losses(trace, durable=False)
        kept_crashes = {(n, t) for n in members for t in every.get(n, []) if t not in lost.get(n, [])}
    confirmed = _confirmed_by_node(trace, of)
    events: list[tuple[int, int, str, str, int]] = []  # (t, order, kind, node, version)
    for node, writes in confirmed.items():
        events += [(t, 1, "write", node, v) for t, v in writes]
    for row in trace.of("fault.crash", "fault.restart"):
        if row.node in members:
            events.append((row.t_ns, 0, row.kind, row.node, 0))
    rounds: dict[int, frozenset[str]] = {}  # event index -> the peers of a member's sync round that ended
    for row in trace.of("handoff.ended"):
        if row.node in members:
            rounds[len(events)] = frozenset(str(peer) for peer in row.get("peers") or ())
            events.append((row.t_ns, 2, row.kind, row.node, len(events)))
    events.sort()
    up = set(members)
    holders = set(members)
    opened_empty: set[str] = set()  # up, not holders, and a sync round of theirs ended without a holder
    latest = 0
    mine: dict[str, int] = {}
    edges: list[int] = []
    for t, _order, kind, node, version in events:
        if kind == "write":
            latest = max(latest, version)
            mine[node] = max(mine.get(node, 0), version)
            holders = set(up)
            opened_empty.clear()
        elif kind == "fault.crash":
            up.discard(node)
            opened_empty.discard(node)
            if not ((node, t) in kept_crashes and mine.get(node, -1) >= latest):
                holders.discard(node)
            if len(holders) < majority:
                edges.append(t)
                holders = set(up)
                opened_empty.clear()
        elif kind == "fault.restart":
            up.add(node)
        elif node in up and node not in holders:
            if rounds[version] & holders:
                holders.add(node)
                opened_empty.discard(node)
            else:
                opened_empty.add(node)
                if len(opened_empty) >= majority:
                    edges.append(t)
                    holders = set(up)
                    opened_empty.clear()
    return edges


def replica_set(world: World, actor: str, key: str) -> list[str]:
    """The replica set a scenario recorded for ``actor/key`` (``results["replicas"]``), else the one its converged ring
    gives (``results["ring"]``: ``{"nodes": [...], "replicas": n}``, placed by ``casty.protocol.placement.Ring``), else []."""
    recorded: dict[str, list[str]] = world.results.get("replicas", {})
    members = recorded.get(f"{actor}/{key}")
    if members:
        return list(members)
    ring = world.results.get("ring")
    if not ring:
        return []
    return list(_ring_replicas(tuple(ring["nodes"]), int(ring["replicas"]), actor, key))


@functools.lru_cache(maxsize=4096)
def _ring_replicas(nodes: tuple[str, ...], count: int, actor: str, key: str) -> tuple[str, ...]:
    return _ring(nodes).replicas(actor, key, count)


@functools.lru_cache(maxsize=16)
def _ring(nodes: tuple[str, ...]) -> Ring:
    return Ring(nodes)


_FOREVER = 2**62
_LOSSES: weakref.WeakKeyDictionary[Trace, dict[tuple[bool, tuple[str, str] | None, int, int], dict[str, list[int]]]] = weakref.WeakKeyDictionary()
_CONFIRMED: weakref.WeakKeyDictionary[Trace, dict[tuple[tuple[str, str], int], dict[str, list[tuple[int, int]]]]] = weakref.WeakKeyDictionary()


def memory_losses(trace: Trace, *, durable: bool, of: tuple[str, str] | None = None, version: int = 0) -> dict[str, list[int]]:
    """Per node, the true times (ns) at which it lost its memory of a key's replica, as the trace shows them.

    For an in-memory type every ``fault.crash`` is a loss: its replica store was RAM. For a
    durable type a crash is a loss only if its disk did not come through it: the crash row
    lost unsynced writes (``unsynced_lost`` > 0), or the next ``fault.restart`` of the node
    came with a new disk (``wiped``), or it never restarted; a restart with its disk keeps
    what the node saved. ``of=(actor, key)`` says what the node saved of that key: an owner
    saves a durable key's confirmed writes to its own disk, a replica keeps its copy in
    memory only, so a crash with its disk keeps the key (at ``version`` or later) only on a
    node that had confirmed such a write of it (a ``write.confirmed`` row on that node
    before the crash). Computed once per trace, length and arguments (the checks share it).
    """
    cache = _LOSSES.setdefault(trace, {})
    cache_key = (durable, of, version, len(trace.rows))
    found = cache.get(cache_key)
    if found is None:
        found = cache[cache_key] = _memory_losses(trace, durable=durable, of=of, version=version)
    return found


def _confirmed_by_node(trace: Trace, of: tuple[str, str]) -> dict[str, list[tuple[int, int]]]:
    """(time, version) of every confirmed write of ``of``, per node, in trace order (cached per trace and length)."""
    cache = _CONFIRMED.setdefault(trace, {})
    cache_key = (of, len(trace.rows))
    found = cache.get(cache_key)
    if found is None:
        found = {}
        for row in trace.of("write.confirmed"):
            if (str(row.get("actor")), str(row.get("key"))) == of:
                found.setdefault(row.node, []).append((row.t_ns, int(row.get("version"))))
        cache[cache_key] = found
    return found


def _memory_losses(trace: Trace, *, durable: bool, of: tuple[str, str] | None, version: int) -> dict[str, list[int]]:
    saved: dict[str, int] = {}  # node -> first time it confirmed a write of `of` at `version` or later (on its disk since)
    if durable and of is not None:
        for node, writes in _confirmed_by_node(trace, of).items():
            first = next((t for t, v in writes if v >= version), None)
            if first is not None:
                saved[node] = first
    losses: dict[str, list[int]] = defaultdict(list)
    pending: dict[str, Row] = {}
    for row in trace.of("fault.crash", "fault.restart"):
        if row.kind == "fault.crash":
            on_disk = of is None or saved.get(row.node, _FOREVER) < row.t_ns
            if not durable or int(row.get("unsynced_lost") or 0) > 0 or not on_disk:
                losses[row.node].append(row.t_ns)
            else:
                pending[row.node] = row
        else:
            crash = pending.pop(row.node, None)
            if crash is not None and row.get("wiped"):
                losses[row.node].append(crash.t_ns)
    for node, crash in pending.items():
        losses[node].append(crash.t_ns)
    return dict(losses)


_OUTAGES: weakref.WeakKeyDictionary[Trace, dict[int, dict[str, list[tuple[int, int]]]]] = weakref.WeakKeyDictionary()


def outages(trace: Trace) -> dict[str, list[tuple[int, int]]]:
    """Per node, the ``[crash, restart)`` intervals (true ns) it was down; one never restarted ends at ``2**62``."""
    cache = _OUTAGES.setdefault(trace, {})
    found = cache.get(len(trace.rows))
    if found is not None:
        return found
    out: dict[str, list[tuple[int, int]]] = defaultdict(list)
    since: dict[str, int] = {}
    for row in trace.of("fault.crash", "fault.restart"):
        if row.kind == "fault.crash":
            since.setdefault(row.node, row.t_ns)
        elif row.node in since:
            out[row.node].append((since.pop(row.node), row.t_ns))
    for node, t in since.items():
        out[node].append((t, _FOREVER))
    cache[len(trace.rows)] = found = dict(out)
    return found


def kept_memory(
    replicas: Iterable[str],
    losses: dict[str, list[int]],
    since_ns: int,
    until_ns: int,
    down: dict[str, list[tuple[int, int]]] | None = None,
) -> bool:
    """Whether a write confirmed at ``since_ns`` is still owed at ``until_ns``: a majority of ``replicas`` were up at
    ``since_ns`` (not inside a ``down`` interval: a down node acknowledged nothing) and lost no memory in
    ``(since_ns, until_ns]``. Then the write quorum that confirmed it meets them, so a copy survived on a replica
    that kept it, and a read quorum (of replicas that did not forget, or synced from those that did not) finds it."""
    members = list(replicas)
    outs = down or {}
    kept = [
        n
        for n in members
        if not any(start <= since_ns < end for start, end in outs.get(n, ()))
        and not any(since_ns < t <= until_ns for t in losses.get(n, ()))
    ]
    return len(kept) >= len(members) // 2 + 1
