"""Probes of the replication rules: a promise never goes down (rule 1), an heir's write-back is on a quorum before it answers reads (rule 2), a replica whose promise rose tells the older epoch's holder (rule 9)."""

from __future__ import annotations

from collections.abc import Generator
from datetime import timedelta
from typing import Any

import simpy

from ...world import World
from .. import scenario
from . import Add, Read, tally, tally5
from .kit import CLUSTER, CLUSTER_CHECKS, DECLARED_DEAD, FIVE, _adds, _ask, _expect, _ints, _on_a_key, _paced_adds, _placed


# ======================================================================= promises ======


def _replayed_prepare_refused(world: World) -> None:
    """The stale owner's replayed Prepare did not lower the majority's promise: it confirmed nothing more under its old epoch, and every confirmed Add counted once."""
    check = "replayed_prepare_refused"
    key = str(world.results.get("key"))
    replay = world.results.get("replayed")
    _expect(check, isinstance(replay, list) and len(replay) == 4, f"the stale owner's Prepare was not replayed: {replay!r}")
    assert isinstance(replay, list)
    at_ns = int(replay[0])
    back = [r.t_ns for r in world.trace.of("epoch.acquired", node="n3", key=key) if r.t_ns > at_ns]  # n3 owns it again, newer
    until_ns = back[0] if back else world.trace.rows[-1].t_ns + 1
    stale = [r for r in world.trace.of("write.confirmed", node="n3", key=key) if at_ns < r.t_ns < until_ns]
    _expect(check, not stale, f"n3 confirmed {len(stale)} write(s) under its old epoch after its Prepare was replayed")
    answers = [*_ints(world.results.get("before")), *_ints(world.results.get("majority")), *_ints(world.results.get("minority"))]
    final = world.results.get("final")
    _expect(check, bool(_ints(world.results.get("majority"))), "the majority confirmed nothing")
    _expect(check, sorted(answers) == list(range(1, len(answers) + 1)) and final == len(answers), f"final count {final!r} after the confirmed Adds {sorted(answers)}")


@scenario(
    "replayed-prepare",
    "3 nodes: a key's owner is cut off and the majority takes the key over; the network then delivers the old owner's Prepare again: refused",
    until=timedelta(seconds=14),
    checks=(_replayed_prepare_refused, *CLUSTER_CHECKS),
)
def replayed_prepare(world: World) -> None:
    from casty.cluster.driver import REPLICATION_CHANNEL
    from casty.protocol.replication import Epoch, Prepare
    from casty.cluster.routing import CLUSTER_WIRE

    def script(world: World, key: str) -> Generator[simpy.Event, Any, None]:
        _adds(world, "n1", key, 2, "before")
        yield world.timeout(1.0)
        first = [r for r in world.trace.of("epoch.acquired", key=key) if r.node == "n3"]
        if not first:
            return  # the check says the replay never happened
        world.partition(["n3"], ["n1", "n2"])
        _paced_adds(world, "n3", key, 8.0, "minority")  # n3 keeps writing under its old epoch
        yield world.timeout(DECLARED_DEAD)
        _adds(world, "n1", key, 3, "majority")  # the majority's owner acquires a newer epoch
        yield world.timeout(1.0)
        old = Epoch(int(first[0].get("epoch_round")), str(first[0].get("epoch_node")))
        frame = CLUSTER_WIRE.encode(REPLICATION_CHANNEL, Prepare((tally.name, key), old))
        for replica in ("n1", "n2"):  # a duplicate of n3's Prepare, held back by the network until now
            world.network.inject("n3", replica, frame)
        world.results["replayed"] = [world.env.now, old.round, old.node, len(frame)]
        yield world.timeout(0.5)
        world.heal()
        yield world.timeout(4.0)
        _ask(world, "n1", key, Read(), "final")

    _on_a_key(world, "n3", "replay", script)


def _fenced_by_a_newer_promise(world: World) -> None:
    """A newer epoch promised behind the running owner's back fenced its next write (Unavailable, the run lost); the next Add acquired the key afresh; every confirmed Add counted once."""
    check = "fenced_by_a_newer_promise"
    key = str(world.results.get("key"))
    promised = world.results.get("promised")
    _expect(check, isinstance(promised, list) and len(promised) == 3, f"no newer epoch was promised: {promised!r}")
    assert isinstance(promised, list)
    at_ns = int(promised[0])
    fenced = [r for r in world.trace.of("write.failed", node="n3", key=key, reason="fenced") if r.t_ns > at_ns]
    _expect(check, len(fenced) == 1, f"{len(fenced)} fenced writes on n3 after the newer promise, expected its stale run's one")
    lost = [r for r in world.trace.of("activation.ended", node="n3", key=key, reason="lost") if r.t_ns > at_ns]
    _expect(check, len(lost) == 1, f"n3's stale run did not end as lost once: {len(lost)}")
    again = [r for r in world.trace.of("epoch.acquired", key=key) if r.t_ns > at_ns]
    _expect(check, bool(again) and (int(again[0].get("epoch_round")), str(again[0].get("epoch_node"))) > (int(promised[1]), str(promised[2])), "the key was not acquired again above the promised epoch")
    before, after = world.results.get("before"), world.results.get("after")
    # the fenced Add fails with Unavailable: its outcome is unknown (the owner's own replica took it), so it may count
    _expect(check, _ints(before) == [1, 2] and isinstance(after, list) and after[:1] == ["Unavailable"], f"answers: before {before!r}, after {after!r}")
    counted = _ints(after)
    _expect(check, counted in ([3, 4], [4, 5]) and world.results.get("final") == counted[-1], f"final count {world.results.get('final')!r} after the Adds {after!r}")


@scenario(
    "newer-promise-fences",
    "3 nodes: while a key's owner runs, its two other replicas promise a newer epoch (an acquisition whose owner vanished) and their notices to it are lost; the owner's next write is fenced, its run ends lost, the next Add acquires afresh",
    until=timedelta(seconds=10),
    checks=(_fenced_by_a_newer_promise, *CLUSTER_CHECKS),
)
def newer_promise_fences(world: World) -> None:
    """The fence itself, with no fault the owner could notice: the step-down rule ends stale runs before a
    partition's majority takes their keys, so only a promise the owner cannot see leaves a run to fence.
    Rule 9 has the promising replicas tell the owner at once; a one-way cut n1+n2 -> n3 while the
    Prepare lands loses those notices (their Nacks), so the owner still learns only at its next write."""
    from casty.cluster.driver import REPLICATION_CHANNEL
    from casty.protocol.replication import Epoch, Prepare
    from casty.cluster.routing import CLUSTER_WIRE

    def script(world: World, key: str) -> Generator[simpy.Event, Any, None]:
        _adds(world, "n3", key, 2, "before")
        yield world.timeout(1.0)
        first = [r for r in world.trace.of("epoch.acquired", key=key) if r.node == "n3"]
        if not first:
            return  # the check says no newer epoch was promised
        newer = Epoch(int(first[0].get("epoch_round")) + 1, "n1#0")
        frame = CLUSTER_WIRE.encode(REPLICATION_CHANNEL, Prepare((tally.name, key), newer))
        world.partition(["n1", "n2"], ["n3"], oneway=True)  # the replicas' rule-9 notices to n3 are lost
        for replica in ("n1", "n2"):  # an acquisition by an owner that vanished: its Prepare reached the replicas
            world.network.inject("n1", replica, frame)
        world.results["promised"] = [world.env.now, newer.round, newer.node]
        yield world.timeout(0.05)  # the Prepare lands (~1.5 ms) and the Nacks to n3 are dropped
        world.reconnect(["n1", "n2"], ["n3"], oneway=True)
        yield world.timeout(0.45)
        _adds(world, "n3", key, 3, "after")
        yield world.timeout(4.0)
        _ask(world, "n1", key, Read(), "final")

    _on_a_key(world, "n3", "promised", script)


def _superseded_holder_told(world: World) -> None:
    """The holder whose own replica missed a newer Prepare was told by the replicas that promised it (rule 9): its run ended
    lost within TOLD_WITHIN of the Prepare, before its next write; a newer epoch was acquired within RESUME_EVERY +
    write_timeout; no write failed (Unavailable or fenced) after it; every confirmed Add counted once."""
    from casty.cluster.runtime import RESUME_EVERY

    check = "superseded_holder_told"
    key = str(world.results.get("key"))
    strayed = world.results.get("strayed")
    _expect(check, isinstance(strayed, list) and len(strayed) == 3, f"no stray Prepare was sent: {strayed!r}")
    assert isinstance(strayed, list)
    at_ns = int(strayed[0])
    newer = (int(strayed[1]), str(strayed[2]))
    lost = [r.t_ns for r in world.trace.of("activation.ended", node="n3", key=key, reason="lost") if r.t_ns > at_ns]
    _expect(check, len(lost) == 1, f"n3's run did not end as lost once after the stray Prepare: {len(lost)}")
    waited = (lost[0] - at_ns) / 1e9
    _expect(check, waited <= TOLD_WITHIN, f"n3's run ended lost {waited:.3f} s after the stray Prepare, not within {TOLD_WITHIN} s")
    writes = [r.t_ns for r in world.trace.rows if r.t_ns > at_ns and r.node == "n3" and r.kind.startswith("write.") and r.get("key") == key]
    _expect(check, not writes or lost[0] < writes[0], f"n3 learnt only at its next write ({writes[:1]} ns, lost at {lost[0]} ns)")
    again = [r for r in world.trace.of("epoch.acquired", key=key) if r.t_ns > at_ns]
    within = RESUME_EVERY + WRITE_TIMEOUT
    _expect(check, bool(again) and (int(again[0].get("epoch_round")), str(again[0].get("epoch_node"))) > newer, f"the key was not acquired again above the stray epoch {newer}")
    took = (again[0].t_ns - at_ns) / 1e9
    _expect(check, took <= within, f"the key was acquired again {took:.3f} s after the stray Prepare, not within RESUME_EVERY + write_timeout = {within} s")
    failed = [(r.node, r.get("reason")) for r in world.trace.of("write.failed", key=key) if r.t_ns > at_ns]
    _expect(check, not failed, f"writes failed after the stray Prepare: {failed}")
    before, after = world.results.get("before"), world.results.get("after")
    refused = [a for a in after if not isinstance(a, int)] if isinstance(after, list) else [after]
    _expect(check, _ints(before) == [1, 2] and bool(_ints(after)) and not refused, f"answers: before {before!r}, after {after!r}")
    answers = [*_ints(before), *_ints(after)]
    final = world.results.get("final")
    _expect(check, answers == list(range(1, len(answers) + 1)) and final == len(answers), f"final count {final!r} after the Adds {answers}")


TOLD_WITHIN = 0.1
"""How soon after the stray Prepare the holder's run must end: the Prepare's and the Nack's latencies (~3 ms) with room."""
WRITE_TIMEOUT = 1.0  # the probes' nodes (kit._nodes)


@scenario(
    "superseded-holder-told",
    "3 nodes: a stray Prepare from n2 of a newer epoch reaches n1's and n2's replicas but not the holder n3's; they tell n3 (rule 9): its run ends lost at once, the key is acquired afresh, and the client's next Adds are answered, none Unavailable",
    until=timedelta(seconds=8),
    checks=(_superseded_holder_told, *CLUSTER_CHECKS),
)
def superseded_holder_told(world: World) -> None:
    """Rule 9 of replication, which ``newer-promise-fences`` cuts away. A view that named n2 the key's owner for an
    instant sends its Prepare to the three replicas; the one to n3 is lost (a one-way cut n2 -> n3 for 50 ms). n3's own
    replica promised nothing newer, and n3's writes had all been acked, so no resend of rule 5 would tell it: only n1,
    whose promise rose over n3's epoch, does (n2's notice is cut too). Without it n3 learns at the client's next Add,
    which is fenced and answers Unavailable."""
    from casty.cluster.driver import REPLICATION_CHANNEL
    from casty.protocol.replication import Epoch, Prepare
    from casty.cluster.routing import CLUSTER_WIRE

    def script(world: World, key: str) -> Generator[simpy.Event, Any, None]:
        _adds(world, "n3", key, 2, "before")
        yield world.timeout(1.0)
        first = [r for r in world.trace.of("epoch.acquired", key=key) if r.node == "n3"]
        if not first:
            return  # the check says no stray Prepare was sent
        newer = Epoch(int(first[0].get("epoch_round")) + 1, "n2#0")
        frame = CLUSTER_WIRE.encode(REPLICATION_CHANNEL, Prepare((tally.name, key), newer))
        world.partition(["n2"], ["n3"], oneway=True)  # n2's Prepare to n3 (and n2's own notice) is lost
        for replica in ("n1", "n2"):
            world.network.inject("n2", replica, frame)
        world.results["strayed"] = [world.env.now, newer.round, newer.node]
        yield world.timeout(0.05)
        world.reconnect(["n2"], ["n3"], oneway=True)
        yield world.timeout(0.25)
        _paced_adds(world, "n3", key, 3.0, "after")  # the client keeps using the key
        yield world.timeout(4.0)
        _ask(world, "n1", key, Read(), "final")

    _on_a_key(world, "n3", "told", script)


def _lower_prepare_refused(world: World) -> None:
    """The owner's Prepare, below a promise the replicas had given, was refused; the late write-back of that promise's epoch took back no confirmed Add."""
    check = "lower_prepare_refused"
    crossed = world.results.get("crossed")
    _expect(check, isinstance(crossed, list) and len(crossed) == 3, f"no higher Prepare crossed the owner's: {crossed!r}")
    assert isinstance(crossed, list)
    answers = [*_ints(world.results.get("before")), *_ints(world.results.get("after"))]
    final = world.results.get("final")
    _expect(check, sorted(answers) == list(range(1, len(answers) + 1)) and final == len(answers), f"final count {final!r} after the Adds {world.results.get('before')} {world.results.get('after')}")
    key = str(world.results.get("key"))
    higher = (int(crossed[1]), str(crossed[2]))
    acquired = [(int(r.get("epoch_round")), str(r.get("epoch_node"))) for r in world.trace.of("epoch.acquired", key=key)]
    # n3's own replica alone is no read quorum: any acquisition needs n1 or n2, which promised `higher`
    _expect(check, bool(acquired) and acquired[0] > higher, f"the owner acquired {acquired[:1]}, not above the epoch {higher} the replicas had promised")


@scenario(
    "crossing-prepares",
    "3 nodes: another candidate's Prepare of a higher epoch reaches two replicas just before a new key's owner prepares its first, lower one; that candidate's write-back comes 1 s late: the lower Prepare is refused and no count is taken back",
    until=timedelta(seconds=8),
    checks=(_lower_prepare_refused, *CLUSTER_CHECKS),
)
def crossing_prepares(world: World) -> None:
    """Rule 1 of replication: a promise never goes down.

    Two acquisitions of one key cross: a candidate (an older life of n1: epoch ``(2, n1#0)``)
    prepares n1 and n2 first, and the key's owner n3, a few milliseconds later, prepares its
    first epoch ``(1, n3#...)``, lower. That candidate found nothing on the two replicas, so its
    write-back is ``{}`` at version 1; the network holds it back for a second. A replica that
    promised the lower epoch after the higher one lets n3 acquire below ``(2, n1#0)`` and
    confirm Adds there; the late write-back, of a higher epoch, then wins on both replicas and
    the next owner finds the key empty. Refused, n3 acquires above the promise and the late
    write-back is refused in turn. (The replayed stale Prepare of ``replayed-prepare`` no longer
    shows rule 1: the stale owner has stepped down and writes nothing under its old epoch.)
    """
    from casty.cluster.driver import REPLICATION_CHANNEL
    from casty.protocol.replication import Epoch, Prepare, Write
    from casty.cluster.routing import CLUSTER_WIRE

    def script(world: World, key: str) -> Generator[simpy.Event, Any, None]:
        owner, replicas = _placed(world, key)
        assert owner == "n3" and len(replicas) == 3
        higher = Epoch(2, "n1#0")
        entity = (tally.name, key)
        for replica in ("n1", "n2"):
            world.network.inject("n1", replica, CLUSTER_WIRE.encode(REPLICATION_CHANNEL, Prepare(entity, higher)))
            world.note(replica, "a Prepare of epoch (2, n1#0) is on its way")
        world.results["crossed"] = [world.env.now, higher.round, higher.node]
        yield world.timeout(0.05)
        _adds(world, owner, key, 3, "before")  # the key's first acquisition: round 1, below the promise
        yield world.timeout(1.0)
        for replica in ("n1", "n2"):  # the candidate's write-back: what it found (nothing), held back until now
            world.network.inject("n1", replica, CLUSTER_WIRE.encode(REPLICATION_CHANNEL, Write(entity, higher, 1, {})))
            world.note(replica, "the write-back of epoch (2, n1#0), held back by the network, is on its way")
        yield world.timeout(0.5)
        _adds(world, owner, key, 2, "after")
        yield world.timeout(2.0)
        _ask(world, "n1", key, Read(), "final")

    _on_a_key(world, "n3", "cross", script)


def _old_owner_not_confirmed_by_an_empty_replica(world: World) -> None:
    """While the restarted replica was not ready, the old owner's writes got no ack from it: every confirmed Add counted once."""
    check = "old_owner_not_confirmed_by_an_empty_replica"
    _expect(check, bool(world.trace.of("fault.pause")), "the new owner was never paused (the restarted replica never opened)")
    answers = [*_ints(world.results.get("before")), *_ints(world.results.get("majority")), *_ints(world.results.get("old"))]
    final = world.results.get("final")
    _expect(check, bool(_ints(world.results.get("majority"))), "the new owner confirmed nothing")
    _expect(check, sorted(answers) == list(range(1, len(answers) + 1)) and final == len(answers), f"final count {final!r} after the confirmed Adds {sorted(answers)}")


@scenario(
    "restart-under-stale-owner",
    "3 nodes: a cut-off owner keeps writing under its old epoch; a replica of the new owner restarts empty and opens while the new owner is slow: it must not ack the old epoch",
    until=timedelta(seconds=18),
    checks=(_old_owner_not_confirmed_by_an_empty_replica, *CLUSTER_CHECKS),
)
def restart_under_stale_owner(world: World) -> None:
    def script(world: World, key: str) -> Generator[simpy.Event, Any, None]:
        owner, replicas = _placed(world, key)
        assert owner == "n3" and len(replicas) == 3
        newer, restarted = replicas[1], replicas[2]
        _adds(world, newer, key, 2, "before")
        yield world.timeout(1.0)
        world.partition([owner], [newer, restarted])
        _paced_adds(world, owner, key, 10.0, "old")  # the old owner keeps writing under its epoch
        yield world.timeout(DECLARED_DEAD)
        _adds(world, newer, key, 3, "majority")  # the majority's owner acquires a newer epoch, promised by both
        yield world.timeout(0.8)
        world.crash(restarted)  # its promise of the newer epoch is gone with its memory
        yield world.timeout(0.2)
        world.reconnect([owner], [restarted])  # the old owner now reaches the empty replica, not the new owner
        world.restart(restarted)
        back = world.now
        rows = world.trace.rows
        scanned = len(rows)
        while world.now < back + 6.0:  # the restarted replica opens after its rejoin grace
            yield world.timeout(0.001)
            opened = any(r.kind == "handoff.started" and r.node == restarted for r in rows[scanned:])
            scanned = len(rows)
            if opened:
                world.pause(newer)  # its sync answer (with the newer promise) is late
                yield world.timeout(0.8)
                world.resume(newer)
                break
        yield world.timeout(1.0)
        world.heal()
        yield world.timeout(3.0)
        _ask(world, newer, key, Read(), "final")

    _on_a_key(world, "n3", "old", script)


# ==================================================================== write-back ======


def _read_never_taken_back(world: World) -> None:
    """The heir answered a count only once its write-back was on a quorum: a later owner never answers less."""
    check = "read_never_taken_back"
    first, second = world.results.get("first"), world.results.get("second")
    _expect(check, world.results.get("before") == [1, 2, 3], f"the counts before: {world.results.get('before')}")
    _expect(check, isinstance(second, int), f"the last owner did not answer: {second!r}")
    if isinstance(first, int):  # the heir may also have been cut off before it could answer (Unavailable): fine
        assert isinstance(second, int)
        _expect(check, second >= first, f"the heir answered {first}, the next owner then answered {second}: a read was taken back")


@scenario(
    "write-back-before-reads",
    "5 nodes, replicas=5: a write held by two replicas only, its owner crashes; the heir is cut off right after it acquires: what it answered is never taken back",
    until=timedelta(seconds=16),
    checks=(_read_never_taken_back, *CLUSTER_CHECKS),
)
def write_back_before_reads(world: World) -> None:
    def script(world: World, key: str) -> Generator[simpy.Event, Any, None]:
        owner, replicas = _placed(world, key, tally5)
        assert owner == "n1" and len(replicas) == 5
        heir, last = replicas[1], replicas[2]
        others = [n for n in FIVE if n not in (owner, heir)]
        _adds(world, owner, key, 3, "before", tally5)
        yield world.timeout(1.0)
        world.partition([owner], others)  # the next write reaches the heir only: two holders of five, not confirmed
        _ask(world, owner, key, Add(), "unconfirmed", tally5)
        yield world.timeout(0.2)
        world.crash(owner)
        world.heal()
        rows = world.trace.rows
        scanned = len(rows)
        while True:  # the heir resumes the @active key once the owner is declared dead
            yield world.timeout(0.0001)
            acquired = any(r.kind == "epoch.acquired" and r.node == heir and r.get("key") == key for r in rows[scanned:])
            scanned = len(rows)
            if acquired:
                world.partition([heir], [n for n in FIVE if n != heir])  # frames still in flight are lost
                _ask(world, heir, key, Read(), "first", tally5)
                yield world.timeout(0.5)
                world.crash(heir)
                break
        yield world.timeout(DECLARED_DEAD + 1.0)
        _ask(world, last, key, Read(), "second", tally5)

    _on_a_key(world, "n1", "wb", script, cluster=CLUSTER, nodes=FIVE, actor_type=tally5)
