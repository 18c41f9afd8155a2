"""Probes of handoff readiness: a replica that restarts empty is not ready (nor its blank promise a quorum) before its sync round was answered."""

from __future__ import annotations

from collections.abc import Generator
from datetime import timedelta
from typing import Any

import simpy

from ...world import World
from .. import scenario
from . import Read, tally
from .kit import CLUSTER_CHECKS, DECLARED_DEAD, _adds, _ask, _expect, _ints, _on_a_key, _placed


# ============================================================== handoff readiness ======


def _read_after_restart_is_current(world: World) -> None:
    """The restarted owner read the count every confirmed Add had reached, not the stale replica's."""
    check = "read_after_restart_is_current"
    counted = [*_ints(world.results.get("first")), *_ints(world.results.get("second"))]
    _expect(check, counted == [1, 2, 3, 4, 5, 6], f"the counts before the restart: {world.results.get('first')} {world.results.get('second')}")
    _expect(check, bool(world.trace.of("fault.pause")), "the slow replica was never paused (the restarted node's replica never opened)")
    after = world.results.get("after")
    _expect(check, after == 6, f"the restarted owner read {after}, expected 6 (the last confirmed count)")


@scenario(
    "restart-stale-replica",
    "3 nodes: a replica misses the last writes, the owner restarts empty, the up-to-date replica is slow: the owner reads the current count",
    until=timedelta(seconds=14),
    checks=(_read_after_restart_is_current, *CLUSTER_CHECKS),
)
def restart_stale_replica(world: World) -> None:
    def script(world: World, key: str) -> Generator[simpy.Event, Any, None]:
        owner, replicas = _placed(world, key)
        assert owner == "n2" and len(replicas) == 3
        current, stale = replicas[1], replicas[2]
        _adds(world, current, key, 3, "first")
        yield world.timeout(0.5)
        world.partition([stale], [current, owner])  # shorter than suspect_after: nobody's view changes
        yield world.timeout(0.05)
        _adds(world, current, key, 3, "second")
        yield world.timeout(0.5)
        world.heal()
        yield world.timeout(0.4)
        world.crash(owner)
        yield world.timeout(0.2)
        world.restart(owner)
        restarted = world.now
        rows = world.trace.rows
        scanned = len(rows)
        while world.now < restarted + 6.0:  # the restarted replica opens after its rejoin grace
            yield world.timeout(0.001)
            opened = any(r.kind == "handoff.started" and r.node == owner for r in rows[scanned:])
            scanned = len(rows)
            if opened:
                world.pause(current)  # its promise and its sync answer are late
                _ask(world, owner, key, Read(), "after")
                yield world.timeout(0.8)  # shorter than suspect_after
                world.resume(current)
                break

    _on_a_key(world, "n2", "stale", script)


def _restarted_owner_reads_current(world: World) -> None:
    """The owner came back empty and read the count of every confirmed Add, not the behind replica's."""
    check = "restarted_owner_reads_current"
    counted = [*_ints(world.results.get("first")), *_ints(world.results.get("second"))]
    _expect(check, counted == [1, 2, 3, 4, 5, 6], f"the counts before the crash: {world.results.get('first')} {world.results.get('second')}")
    _expect(check, bool(world.trace.of("fault.pause")), "the up-to-date replica was never paused (the restarted node's replica never opened)")
    after = world.results.get("after")
    _expect(check, after == 6, f"the restarted owner read {after}, expected 6 (the last confirmed count)")


@scenario(
    "behind-replica-at-restart",
    "3 nodes: the owner crashes while a replica is cut off (so nothing catches it up), restarts empty, and reads while the up-to-date replica is slow: it reads the current count",
    until=timedelta(seconds=14),
    checks=(_restarted_owner_reads_current, *CLUSTER_CHECKS),
)
def behind_replica_at_restart(world: World) -> None:
    """Readiness, with the catch-up resend out of the way.

    ``restart-stale-replica`` heals its cut before the owner crashes, and the owner's catch-up
    resend (rule 5) brings the cut-off replica up to date in that gap: its restart then meets
    no stale copy. Here the owner crashes while the cut is on, so the replica stays three
    writes behind; the restarted (empty, not ready) owner asks while the one up-to-date
    replica is paused for less than ``suspect_after``. A blank promise counted, or a replica
    ready before its sync round was answered, makes a quorum of the empty copy and the
    behind one: the read is 3, not 6.
    """
    _behind_at_restart(world, held_back_write=False)


@scenario(
    "held-back-write-at-restart",
    "as behind-replica-at-restart, and a write of an old epoch held back by the network reaches the restarted owner as it opens: it must not count as caught up",
    until=timedelta(seconds=14),
    checks=(_restarted_owner_reads_current, *CLUSTER_CHECKS),
)
def held_back_write_at_restart(world: World) -> None:
    """Readiness: a replica not ready takes only writes of an epoch it promised since it came back.

    The restarted owner's replica, empty and not ready, receives a ``Write`` that the network
    held back since before the key's first write: the write-back of an acquisition of round 1
    by an older life of another node, which found nothing (pages ``{}``, version 1), below the
    key's epochs. Taking it would count the replica as filled (ready) with that empty state,
    and its promise would then make a read quorum with the replica three writes behind while
    the up-to-date one is slow: the read is 3, not 6. Refused (no answer), the replica stays
    blank until its sync round is answered.
    """
    _behind_at_restart(world, held_back_write=True)


def _behind_at_restart(world: World, *, held_back_write: bool) -> None:
    from casty.cluster.driver import REPLICATION_CHANNEL
    from casty.protocol.replication import Epoch, Write
    from casty.cluster.routing import CLUSTER_WIRE

    def script(world: World, key: str) -> Generator[simpy.Event, Any, None]:
        owner, replicas = _placed(world, key)
        assert owner == "n2" and len(replicas) == 3
        current, behind = replicas[1], replicas[2]
        _adds(world, current, key, 3, "first")
        yield world.timeout(0.5)
        world.partition([behind], [current, owner])  # shorter than suspect_after: nobody's view changes
        yield world.timeout(0.05)
        _adds(world, current, key, 3, "second")
        yield world.timeout(0.4)
        world.crash(owner)  # while the cut is on: no resend of the owner ever reaches the behind replica
        yield world.timeout(0.1)
        world.heal()
        yield world.timeout(0.1)
        world.restart(owner)
        restarted = world.now
        rows = world.trace.rows
        scanned = len(rows)
        while world.now < restarted + 6.0:  # the restarted replica opens after its rejoin grace
            yield world.timeout(0.001)
            opened = any(r.kind == "handoff.started" and r.node == owner for r in rows[scanned:])
            scanned = len(rows)
            if opened:
                world.pause(current)  # its promise and its sync answer are late
                if held_back_write:
                    old = Write((tally.name, key), Epoch(1, "n1#0"), 1, {})  # below every epoch of the key (n1#0 < n2#...)
                    world.network.inject("n1", owner, CLUSTER_WIRE.encode(REPLICATION_CHANNEL, old))
                    world.note(owner, "a Write of epoch (1, n1#0), version 1, held back by the network, is on its way")
                    world.results["held_back"] = world.env.now
                    yield world.timeout(0.01)  # it arrives before the read's own Prepare (whose epoch is newer)
                _ask(world, owner, key, Read(), "after")
                yield world.timeout(0.8)  # shorter than suspect_after
                world.resume(current)
                break

    _on_a_key(world, "n2", "behind", script)


def _frozen_owner_resend_refused(world: World) -> None:
    """The heir's Adds, confirmed while the owner was frozen, are in what the thawed owner reads: its stale resend filled no empty replica."""
    check = "frozen_owner_resend_refused"
    before, during = world.results.get("before"), world.results.get("during")
    _expect(check, before == [1, 2, 3] and during == [4, 5, 6], f"the counts before and during the freeze: {before} {during}")
    _expect(check, isinstance(world.results.get("frozen"), list), "the owner was never frozen (its catch-up resends were not seen)")
    _expect(check, len(world.trace.of("fault.resume")) == 2, "the lagging replica never opened while the owner was frozen")
    after = world.results.get("after")
    _expect(check, after == 6, f"the thawed owner read {after}, expected 6 (the heir's last confirmed count)")


@scenario(
    "frozen-owner-resend",
    "3 nodes: an owner with a lagging replica freezes just before its catch-up resend; the heir takes the key and counts on; the lagging replica restarts empty; the owner thaws as it opens, while the heir is slow: its stale resend must not fill the empty replica",
    until=timedelta(seconds=20),
    checks=(_frozen_owner_resend_refused, *CLUSTER_CHECKS),
)
def frozen_owner_resend(world: World) -> None:
    """Readiness against a live node's stale write: a frozen owner's catch-up resend (rule 5) leaves at its thaw.

    The owner n2 writes while one replica is cut off from it, so it keeps resending its
    newest write there (backing off: 0.5, 1, 2, 4 s). It freezes 50 µs before a resend is due
    and just after a heartbeat, for 5.7 s. The heir takes the key under a newer epoch (the
    frozen owner's replica does not hear it: a one-way cut) and confirms three Adds with the
    lagging replica, which then crashes and restarts empty. As it opens, the owner thaws:
    its overdue timers fire in deadline order, so the resend of its old epoch leaves before
    its heartbeat timer reports it frozen and the step-down rule ends its run. The heir is
    paused for 0.3 s, so the empty replica's sync round is not over. Taking the resend (an
    epoch it did not promise since it came back) would count it filled, and the owner's
    next acquisition would make a quorum of its own stale replica and that one: the read is
    3, not 6. Ignored, the acquisition waits for the heir's sync answer.
    """
    def script(world: World, key: str) -> Generator[simpy.Event, Any, None]:
        owner, replicas = _placed(world, key)
        assert owner == "n2" and len(replicas) == 3
        heir, lagging = replicas[1], replicas[2]
        _adds(world, heir, key, 2, "first")
        yield world.timeout(0.5)
        world.partition([lagging], [owner])  # the owner's writes miss it; the catch-up resends are dropped (traced)
        yield world.timeout(0.05)
        _adds(world, heir, key, 1, "third")
        rows = world.trace.rows
        scanned = len(rows)
        resends: list[int] = []
        beat = 0
        due: int | None = None
        while world.now < 30.0:
            yield world.timeout(0.00005 if due is not None else 0.001)
            for r in rows[scanned:]:
                if r.node != owner or r.kind not in ("net.sent", "net.dropped"):
                    continue
                if r.get("frame") == "Heartbeat":
                    beat = r.t_ns
                elif r.kind == "net.dropped" and r.get("frame") == "Write" and r.get("dst") == lagging:
                    resends.append(r.t_ns)
                    due = None
            scanned = len(rows)
            if due is None and len(resends) >= 3:
                due = resends[-1] + min(2 * (resends[-1] - resends[-2]), 8_000_000_000)  # the backoff doubles, up to 8 s
                if due - world.env.now > 250_000_000:
                    yield world.timeout((due - world.env.now - 250_000_000) / 1e9)
                continue
            # freeze just before the resend is due, with the next heartbeat after it (heartbeats every 0.2 s)
            if due is not None and world.env.now >= due - 300_000 and beat + 190_000_000 > due:
                break
        world.results["frozen"] = [world.env.now, due, beat]
        world.results["before"] = [*_ints(world.results.get("first")), *_ints(world.results.get("third"))]
        world.partition([heir], [owner], oneway=True)  # nothing of the heir's epoch reaches the frozen owner's replica
        world.pause(owner)
        yield world.timeout(DECLARED_DEAD + 0.3)
        _adds(world, heir, key, 3, "during")  # the heir acquired the key: 4, 5, 6 on {heir, lagging}
        yield world.timeout(0.5)
        world.crash(lagging)
        yield world.timeout(0.2)
        world.reconnect([owner], [lagging], oneway=True)  # the owner's resend can reach the new life
        world.restart(lagging)
        back = world.now
        scanned = len(rows)
        while world.now < back + 6.0:  # the restarted replica opens after its rejoin grace
            yield world.timeout(0.001)
            opened = any(r.kind == "handoff.started" and r.node == lagging for r in rows[scanned:])
            scanned = len(rows)
            if opened:
                world.pause(heir)  # its sync answer is late
                world.reconnect([lagging], [owner], oneway=True)
                world.resume(owner)
                yield world.timeout(0.05)
                _ask(world, owner, key, Read(), "after")
                yield world.timeout(0.25)
                world.resume(heir)
                break

    _on_a_key(world, "n2", "frozen", script)
