"""Safety checks of the replicated runtime: epochs only grow, one writer per epoch, no confirmed write lost, owed writes found."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..trace import Row
from .base import CheckFailed
from .memory import kept_memory, memory_eras, memory_losses, outages, replica_set

if TYPE_CHECKING:
    from ..world import World


EntityId = tuple[str, str]  # (actor, key)


def _by_entity(rows: Iterable[Row]) -> dict[EntityId, list[Row]]:
    groups: dict[EntityId, list[Row]] = defaultdict(list)
    for row in rows:
        groups[(str(row.get("actor")), str(row.get("key")))].append(row)
    return dict(groups)


def _epoch(row: Row) -> tuple[int, str]:
    return (int(row.get("epoch_round")), str(row.get("epoch_node")))


def _late_acquisitions(world: World) -> set[int]:
    """Indexes (in ``world.trace.rows``) of ``epoch.acquired`` rows recorded after their acquisition really happened.

    A node paused between its write-back reaching a quorum and its activation going on records
    ``epoch.acquired`` only when it resumes: by then a newer owner may have taken the key. Such a
    row is recognised by proof, not by guess: an earlier row of the key has a greater epoch and
    found the late row's write-back version (so it read that write-back: the late acquisition came
    first), and the late row's node was paused while that earlier acquisition happened (its pause
    began before the earlier row and ended before the late one). The ordering checks skip it.

    The proof holds only inside one history of one life (seed 460): the node must not have
    crashed between its pause and the row (a restarted process was not paused in the middle of
    its previous life's acquisition), and the pause must start in the earlier row's memory era
    (``memory_eras``: a key that started over counts its versions from 0 again, so ``found`` in one
    era says nothing of a write-back of another).
    """
    rows = world.trace.rows
    index = {id(row): i for i, row in enumerate(rows)}
    crashes = world.trace.of("fault.crash")
    pauses: list[tuple[str, int, int]] = []  # (node, paused at, resumed at)
    started: dict[str, int] = {}
    for row in world.trace.of("fault.pause", "fault.resume"):
        if row.kind == "fault.pause":
            started[row.node] = row.t_ns
        elif row.get("paused_ns") is not None:
            pauses.append((row.node, row.t_ns - int(row.get("paused_ns")), row.t_ns))
        elif row.node in started:
            pauses.append((row.node, started[row.node], row.t_ns))
    era = memory_eras(world)
    late: set[int] = set()

    def paused_through(actor: str, key: str, row: Row, earlier: Row) -> bool:
        return any(
            node == row.node and began <= earlier.t_ns <= ended <= row.t_ns
            and era(actor, key, began) == era(actor, key, earlier.t_ns)
            and not any(c.node == row.node and began <= c.t_ns <= row.t_ns for c in crashes)
            for node, began, ended in pauses
        )

    for (actor, key), acquired in _by_entity(world.trace.of("epoch.acquired")).items():
        for j, row in enumerate(acquired):
            for earlier in acquired[:j]:
                if (
                    _epoch(earlier) > _epoch(row)
                    and int(earlier.get("found")) >= int(row.get("version"))
                    and paused_through(actor, key, row, earlier)
                ):
                    late.add(index[id(row)])
                    break
    return late


def epochs_only_grow(world: World) -> None:
    """Per (actor, key), the owner epochs ``(epoch_round, epoch_node)`` of ``epoch.acquired`` rows strictly grow in trace order, across all nodes.

    Two acquisitions of the same epoch, or a smaller one after a greater, would mean two owners
    could both believe they hold the key: the epoch is what fences the older one. A row recorded
    late by a paused node (``_late_acquisitions``: proven earlier by a newer owner's ``found``) is skipped.
    """
    late = _late_acquisitions(world)
    era = memory_eras(world)
    index = {id(row): i for i, row in enumerate(world.trace.rows)}
    for (actor, key), all_rows in _by_entity(world.trace.of("epoch.acquired")).items():
        rows = [r for r in all_rows if index[id(r)] not in late]
        for before, after in zip(rows, rows[1:], strict=False):
            if era(actor, key, before.t_ns) != era(actor, key, after.t_ns):
                continue  # a majority of the key's replicas forgot it in between (memory_eras): it started over
            a = (int(before.get("epoch_round")), str(before.get("epoch_node")))
            b = (int(after.get("epoch_round")), str(after.get("epoch_node")))
            if not b > a:
                raise CheckFailed(
                    "epochs_only_grow",
                    f"{actor.split(':')[-1]}[{key}]: epoch {b} acquired on {after.node} at t={after.t:.3f}s "
                    f"is not greater than {a} acquired on {before.node} at t={before.t:.3f}s",
                )


def single_writer_per_epoch(world: World) -> None:
    """Only the holder of a key's newest epoch confirms new writes of it; no version of a key is confirmed twice.

    ``write.confirmed`` rows do not carry the epoch, so the holder is derived from the trace:
    from an ``epoch.acquired`` row of a key (on node M, write-back confirmed as ``version`` w)
    until the next one, M holds the key. A ``write.confirmed`` row of the key on another node N
    is then allowed only with a version below w: such a write reached its quorum before M read
    the replicas (M's ``found`` covers it), its confirmation just surfaced late on N. A version
    >= w confirmed on N would be a write made under an older epoch after the newer one was
    taken: two writers at once. Independently, a (key, version) confirmed on two nodes is two
    histories of the key. Only cluster keys (those with an ``epoch.acquired`` row) are checked;
    rows recorded late by a paused node (``_late_acquisitions``) do not change the holder.
    """
    acquired = _by_entity(world.trace.of("epoch.acquired"))
    late = _late_acquisitions(world)
    era = memory_eras(world)
    index = {id(row): i for i, row in enumerate(world.trace.rows)}
    for (actor, key), rows in _by_entity(world.trace.of("epoch.acquired", "write.confirmed")).items():
        if (actor, key) not in acquired:
            continue
        holder: Row | None = None
        confirmed_by: dict[int, str] = {}
        current = 0
        for row in rows:
            if era(actor, key, row.t_ns) != current:  # the key started over (memory_eras): a new history
                current, holder, confirmed_by = era(actor, key, row.t_ns), None, {}
            if row.kind == "epoch.acquired" and index[id(row)] in late:
                continue  # recorded late (see _late_acquisitions): it held the key before the current holder
            if row.kind == "epoch.acquired":
                holder = row
                continue
            version = int(row.get("version"))
            name = f"{actor.split(':')[-1]}[{key}]"
            if version in confirmed_by and confirmed_by[version] != row.node:
                raise CheckFailed(
                    "single_writer_per_epoch",
                    f"{name}: version {version} confirmed on {confirmed_by[version]} and again on {row.node} (t={row.t:.3f}s)",
                )
            confirmed_by[version] = row.node
            if holder is not None and row.node != holder.node and version >= int(holder.get("version")):
                raise CheckFailed(
                    "single_writer_per_epoch",
                    f"{name}: {row.node} confirmed version {version} at t={row.t:.3f}s while {holder.node} held epoch "
                    f"({holder.get('epoch_round')}, {holder.get('epoch_node')}) since t={holder.t:.3f}s (write-back version {holder.get('version')})",
                )


def no_confirmed_write_lost(world: World) -> None:
    """A new owner starts from every write confirmed before it took the key: its ``found`` version >= the last confirmed version.

    For each ``epoch.acquired`` row of a key, the greatest ``version`` of the key's
    ``write.confirmed`` rows earlier in the trace (on any node) must be <= the acquisition's
    ``found``. It holds as long as a majority of the key's replicas kept their stores (a
    confirmed write is on a write quorum, the new owner reads a read quorum, and the two
    intersect); the check assumes that, so use it in scenarios where no more than a minority
    of the replicas lose their memory (a crash of one node of three). Rows recorded late by a
    paused node (``_late_acquisitions``) are skipped: the writes before their row came after them.
    """
    late = _late_acquisitions(world)
    index = {id(row): i for i, row in enumerate(world.trace.rows)}
    for (actor, key), rows in _by_entity(world.trace.of("epoch.acquired", "write.confirmed")).items():
        last: Row | None = None
        for row in rows:
            if row.kind == "epoch.acquired" and index[id(row)] in late:
                continue  # recorded late (see _late_acquisitions): the writes before its row came after it
            if row.kind == "write.confirmed":
                if last is None or int(row.get("version")) > int(last.get("version")):
                    last = row
            elif last is not None and int(row.get("found")) < int(last.get("version")):
                raise CheckFailed(
                    "no_confirmed_write_lost",
                    f"{actor.split(':')[-1]}[{key}]: {row.node} acquired the key at t={row.t:.3f}s from version {row.get('found')}, "
                    f"but version {last.get('version')} was confirmed on {last.node} at t={last.t:.3f}s",
                )


def owed_writes_found(world: World) -> None:
    """A new owner starts from every write it owes: its ``found`` version >= every confirmed version still owed.

    ``no_confirmed_write_lost`` without its assumption: a confirmed write (``write.confirmed``
    row at time c) is owed by an acquisition at time a iff a majority of the key's replica set
    was up at c and kept its memory over (c, a] (``kept_memory``, ``memory_losses``, ``outages``). The replica sets come
    from ``replica_set`` (recorded, or the converged ring's) and the durable types from
    ``world.results["durable"]`` (actor names); a key with no replica set is not checked. Rows recorded late by a paused node (``_late_acquisitions``) are skipped.

    The acks come before the row: at c, within a round trip, unless the owner was paused. A
    paused owner's loop holds the acks that arrived meanwhile and confirms the write when it
    resumes, so a write confirmed by a node that resumed since its acquisition of the key may
    have been acked as early as that acquisition (its writes come after it): the memory it is
    owed from is then kept from the acquisition on, not from c (swarm seed 227: n3 acquired,
    wrote and froze at 23.99 s; its two replicas acked and then crashed, and the row came at
    its resume, 31.15 s).
    """
    durable = set(world.results.get("durable", ()))
    late = _late_acquisitions(world)
    down = outages(world.trace)
    resumed: dict[str, list[int]] = defaultdict(list)
    for resume in world.trace.of("fault.resume"):
        resumed[resume.node].append(resume.t_ns)
    index = {id(row): i for i, row in enumerate(world.trace.rows)}
    for (actor, key), rows in _by_entity(world.trace.of("epoch.acquired", "write.confirmed")).items():
        members = replica_set(world, actor, key)
        if not members:
            continue
        is_durable = actor in durable
        confirmed: list[tuple[Row, int]] = []  # (row, the earliest its acks may have come)
        acquired_at: dict[str, int] = {}  # node -> its latest acquisition of the key
        for row in rows:
            if row.kind == "write.confirmed":
                since = acquired_at.get(row.node, row.t_ns)
                paused = any(since < t <= row.t_ns for t in resumed.get(row.node, ()))
                confirmed.append((row, since if paused else row.t_ns))
                continue
            acquired_at[row.node] = row.t_ns
            if index[id(row)] in late:
                continue
            owed = [
                c
                for c, since in confirmed
                if kept_memory(members, memory_losses(world.trace, durable=is_durable, of=(actor, key), version=int(c.get("version")) if is_durable else 0), since, row.t_ns, down)
            ]
            top = max(owed, key=lambda c: int(c.get("version")), default=None)
            if top is not None and int(row.get("found")) < int(top.get("version")):
                raise CheckFailed(
                    "owed_writes_found",
                    f"{actor.split(':')[-1]}[{key}]: {row.node} acquired the key at t={row.t:.3f}s from version {row.get('found')}, "
                    f"but version {top.get('version')} confirmed on {top.node} at t={top.t:.3f}s is owed (a majority of "
                    f"{'+'.join(members)} kept its memory since)",
                )
