"""Probes of durable acquisitions: a durable key comes back above its heir's epoch (rule 7), a thawed acquisition's lower Prepare is refused."""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from datetime import timedelta
from typing import Any

import simpy

from casty import ActorSystem, MemoryStore

from ...checks import epochs_only_grow
from ...world import World
from .. import scenario
from . import Read, kept_tally, patient_tally
from .kit import CLUSTER, CLUSTER_CHECKS, CONVERGED, DECLARED_DEAD, NODES, _adds, _ask, _expect, _key_owned_by, _on_a_key, _outcome, _placed


# ========================================================== durable acquisitions ======


def _kept_tally_back(world: World) -> None:
    """The probe's premise held (the key changed owner after its last save), and the count came back from the store."""
    check = "kept_tally_back"
    key = world.results.get("key")
    rounds = [int(r.get("epoch_round")) for r in world.trace.of("epoch.acquired") if r.get("key") == key]
    _expect(check, world.results.get("before") == [1, 2], f"the counts before: {world.results.get('before')}")
    _expect(check, len(rounds) >= 3, f"the key was acquired {len(rounds)} time(s): it must change owner after its last save, then come back")
    _expect(check, world.results.get("after") == 2, f"after every node restarted the key answered {world.results.get('after')!r}, not its stored 2")


@scenario(
    "durable-owner-unsaved",
    "3 nodes, one store: a durable key's owner crashes after its last save, the heir takes the key and writes nothing; every node restarts: the key comes back above the heir's epoch",
    until=timedelta(seconds=16),
    checks=(_kept_tally_back, epochs_only_grow),
)
def durable_owner_unsaved(world: World) -> None:
    database = MemoryStore()  # the cluster's one database, outside every node
    for name in NODES:
        world.add_node(name, cluster=CLUSTER, store=database, ask_timeout=2.0, write_timeout=1.0)

    def script(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(CONVERGED)
        key = world.results["key"] = _key_owned_by(world, "n1", "du", kept_tally)
        _adds(world, "n1", key, 2, "before", kept_tally)  # acquired at round 1; both counts saved under it
        yield world.timeout(1.0)
        world.crash("n1")  # the heir resumes the @active key under a newer epoch; nothing saves it
        yield world.timeout(DECLARED_DEAD + 2.0)
        for name in NODES[1:]:
            world.crash(name)
        yield world.timeout(1.0)
        for name in NODES:
            world.restart(name)
        yield world.timeout(5.0)
        _ask(world, "n3", key, Read(), "after", kept_tally)

    world.process(script(world))


def _thawed_prepare_refused(world: World) -> None:
    """Every confirmed Add is in the count the last acquisition read (with the heir's replica in its read quorum); none was taken back."""
    check = "thawed_prepare_refused"
    _expect(check, world.results.get("crossed") is not None, "the heir never prepared while the owner was frozen")
    answers = [a for name in ("first", "second", "third") for a in (world.results.get(name) or [])]
    counted = sorted(a for a in answers if isinstance(a, int))
    unknown = len(answers) - len(counted)  # a timed-out Add may or may not have counted
    final = world.results.get("final")
    _expect(check, counted == list(range(1, len(counted) + 1)), f"the Adds answered {answers}")
    _expect(check, isinstance(final, int) and len(counted) <= final <= len(counted) + unknown, f"the last owner read {final!r} after the Adds {answers}")


@scenario(
    "thawed-acquisition",
    "3 nodes: a new key's owner freezes while it prepares its first epoch; the heir prepares a newer one, whose write-back reaches only its own replica; the thawed owner's resent Prepare, lower, must be refused, and no count is taken back later",
    until=timedelta(seconds=14),
    checks=(_thawed_prepare_refused, *CLUSTER_CHECKS),
)
def thawed_acquisition(world: World) -> None:
    """Rule 1 of replication with live nodes only: a frozen acquisition resends its Prepare at the thaw.

    The step-down rule spares an activation still acquiring, because the promises it waits
    for are given after the thaw: if it wins them, no newer epoch exists. That holds only if
    a replica never promises below a promise it gave. Here the owner n2 freezes 0.1 ms after
    sending its first Prepare (the promises never reach it: one-way cuts), for 3.5 s. The heir
    takes the key: both other replicas promise its newer epoch, its write-back reaches only
    its own replica (a one-way cut), and it gives up. The owner thaws (the acquisitions of
    this type wait 5 s, so its own is still on), and its overdue resend of the lower Prepare
    reaches both replicas. A replica that promises it lets the owner acquire below the heir's
    epoch and confirm six Adds; the heir's replica acks them without taking their pages (its
    stamp, of the newer epoch, is newer), and the next acquisition that reads it finds the
    heir's empty write-back: the count is 0. Refused, the owner acquires above the heir.
    """
    def script(world: World, key: str) -> Generator[simpy.Event, Any, None]:
        owner, replicas = _placed(world, key, patient_tally)
        assert owner == "n2" and len(replicas) == 3
        heir, other = replicas[1], replicas[2]
        rows = world.trace.rows
        scanned = len(rows)
        _adds(world, owner, key, 3, "first", patient_tally)  # the key's first acquisition starts now
        while world.now < CONVERGED + 1.0:
            yield world.timeout(0.0001)
            sent = any(r.node == owner and r.kind == "net.sent" and r.get("frame") == "Prepare" for r in rows[scanned:])
            scanned = len(rows)
            if sent:
                break
        world.pause(owner)  # its Prepares are on their way; the promises will not reach it
        world.partition([heir, other], [owner], oneway=True)
        yield world.timeout(DECLARED_DEAD + 0.3)
        _adds(world, heir, key, 1, "heir", patient_tally)  # the owner is dead to the heir: it acquires
        scanned = len(rows)
        while world.now < CONVERGED + DECLARED_DEAD + 1.5:
            yield world.timeout(0.0001)
            promised = any(r.node == other and r.kind == "net.sent" and r.get("frame") == "Promise" and r.get("dst") == heir for r in rows[scanned:])
            scanned = len(rows)
            if promised:
                world.partition([heir], [other], oneway=True)  # the heir's write-back reaches only its own replica
                world.results["crossed"] = world.env.now
                break
        yield world.timeout(0.5)
        world.reconnect([other], [owner], oneway=True)
        world.resume(owner)
        yield world.timeout(0.5)
        _adds(world, owner, key, 2, "second", patient_tally)
        yield world.timeout(1.5)
        world.heal()
        yield world.timeout(1.0)
        _adds(world, owner, key, 2, "third", patient_tally)
        yield world.timeout(1.0)

        async def release(system: ActorSystem) -> str:
            try:
                await system.release(patient_tally, key)
            except asyncio.CancelledError:
                return "release raised CancelledError"
            return "released"

        world.pause(other)  # the next acquisition's read quorum: the owner's replica and the heir's
        task = world.spawn(owner, release)
        task.add_done_callback(lambda t: world.results.__setitem__("released", _outcome(t)))
        yield world.timeout(0.1)
        _ask(world, heir, key, Read(), "final", patient_tally)
        yield world.timeout(0.3)
        world.resume(other)

    _on_a_key(world, "n2", "thaw", script, actor_type=patient_tally)
