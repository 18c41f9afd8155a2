"""Probe scenarios: fault scripts aimed at one rule each, so that breaking the rule fails a seed.

Each of these was written because a planted bug (a mutant of ``sim.mutants``) survived the
built-in scenarios aimed at its area and ``cluster-random``: nothing in their fault plans
made the rule matter. The scripts are
ordinary scenarios with ordinary checks (what must hold for any correct runtime), aimed at
the instant where the rule matters:

* ``stale-run-fenced``: a body's background task outlives its run; its late write must be
  refused (the activation lease).
* ``node-pause-catch-up``: a node schedule's node is paused across several ticks; it must
  deliver once and skip the rest (catch-up for node schedules).
* ``delete-and-return``: a deleted key stays deleted across a change of owner although one
  replica missed the delete (a tombstone's stamp orders it).
* ``restart-stale-replica``: a replica restarts empty while another is stale and the third
  is slow; its blank promise must not make a quorum with the stale one (handoff readiness).
* ``restart-under-stale-owner``: a replica restarts empty while a cut-off owner still
  writes under its old epoch; until it is ready it must not ack that epoch (readiness).
* ``replayed-prepare``: a stale owner's Prepare delivered again after the takeover must not
  lower the majority's promise (rule 1 of replication).
* ``write-back-before-reads``: an heir that adopted a write held by two replicas of five
  answers no read before its write-back is on a quorum (replication rule 2).
* ``long-partition``: two nodes of five cut off for longer than ``remove_after`` must not
  remove the majority and go on as a cluster of two (the membership quorum).
* ``durable-owner-unsaved``: a durable key's heir acquires it and writes nothing, then every
  node restarts; the key must come back above the heir's epoch (replication rule 7: the
  write-back is saved under the new epoch before the key is held).

Two later rules of the runtime took the ground from under some of these: the step-down rule
(an owner that lost its quorum or was ``Doubted`` ends its runs, so a stale owner no longer
writes under its old epoch) and the catch-up resend (an idle owner resends its newest write
to replicas that have not acked it, so a replica cut off for a moment is soon current
again). ``replayed-prepare`` and ``restart-stale-replica`` then no longer showed rule 1 and
blank promises, nor ``restart-under-stale-owner`` readiness. Their successors:

* ``behind-replica-at-restart``: the owner crashes while a replica is cut off (no resend
  reaches it), restarts empty and reads while the up-to-date replica is paused: a blank
  promise must not make a quorum with the behind copy, nor may a replica be ready before
  its sync round was answered.
* ``held-back-write-at-restart``: the same, and a write of an old epoch, held back by the
  network, reaches the restarted replica as it opens: not promised since it came back, it
  must not make the replica count as filled.
* ``frozen-owner-resend``: an owner with a lagging replica freezes just before its catch-up
  resend; the heir takes the key and counts on; the lagging replica restarts empty and
  opens as the owner thaws, while the heir is slow. The resend of the old epoch leaves
  before the step-down rule ends the run (the thawed owner's timers fire in deadline
  order): the empty replica must not count as filled by it.
* ``thawed-acquisition``: a new key's owner freezes while it prepares; the heir prepares a
  newer epoch, whose write-back reaches only its own replica; the thawed owner's acquisition
  (spared by the step-down rule) resends its lower Prepare: it must be refused (a promise
  never goes down), or a later read quorum with the heir's replica takes every count back.
* ``crossing-prepares``: a higher Prepare reaches two replicas just before a new key's owner
  prepares a lower epoch; the higher candidate's write-back comes late: the lower Prepare
  must be refused (a promise never goes down).
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import simpy

from casty import ActorSystem, Askable, Context, MemoryStore, actor
from casty.cluster.config import Cluster
from casty.protocol.placement import Ring
from casty.errors import Fenced

from ..checks import CheckFailed, epochs_only_grow, no_confirmed_write_lost, single_writer_per_epoch
from ..world import World
from . import scenario

NODES = ("n1", "n2", "n3")
CLUSTER = Cluster(seeds=["n1"], heartbeat=0.2, suspect_after=1, dead_after=1)
CONVERGED = 2.0
DECLARED_DEAD = 0.2 + 1 + 1 + 0.5  # silence, suspect_after, dead_after, slack
CLUSTER_CHECKS = (epochs_only_grow, single_writer_per_epoch, no_confirmed_write_lost)


def _expect(check: str, condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(check, message)


# =========================================================================== actors ======


@dataclass(frozen=True)
class Add(Askable[int]):
    """Count one; the answer is the count once the write is confirmed."""


@dataclass(frozen=True)
class Read(Askable[int]):
    pass


@dataclass(frozen=True)
class Forget(Askable[None]):
    """Delete the key's state (``ctx.state.delete``)."""


@dataclass(frozen=True)
class Outlive(Askable[None]):
    """Start a write that waits ``after`` s, answer, then fail this run (the write outlives it)."""

    after: float


TallyMessage = Add | Read | Forget | Outlive

_BACKGROUND: set[asyncio.Task[None]] = set()  # keeps the outliving writes referenced until they end


@actor(initial=0)
async def tally(ctx: Context[int, TallyMessage]) -> None:
    """A counter that can forget itself, and that can leave a late write behind a failed run."""
    await _tally(ctx)


@actor(initial=0, replicas=5)
async def tally5(ctx: Context[int, TallyMessage]) -> None:
    """``tally`` with five replicas (write quorum 3): room for a write held by two replicas, unconfirmed."""
    await _tally(ctx)


async def _tally(ctx: Context[int, TallyMessage]) -> None:
    async for msg in ctx.inbox:
        if isinstance(msg, Add):
            msg.reply_to.tell(await ctx.state.update(lambda n: n + 1))
        elif isinstance(msg, Read):
            msg.reply_to.tell(ctx.state.value)
        elif isinstance(msg, Forget):
            await ctx.state.delete()
            msg.reply_to.tell(None)
        else:
            task = asyncio.get_running_loop().create_task(_late_write(ctx, msg.after))
            _BACKGROUND.add(task)
            task.add_done_callback(_BACKGROUND.discard)
            msg.reply_to.tell(None)
            raise RuntimeError("this run ends here; the write it started has not happened yet")


async def _late_write(ctx: Context[int, TallyMessage], after: float) -> None:
    await asyncio.sleep(after)
    try:
        await ctx.state.set(-1)
    except Fenced:
        pass


def _ask(world: World, node: str, key: str, message: Any, result: str, actor_type: Any = tally) -> None:
    """Ask ``actor_type[key]`` from ``node`` in the background; the answer (or the exception's name) lands in ``world.results[result]``."""

    async def client(system: ActorSystem) -> Any:
        try:
            return await system.ref(actor_type, key).ask(message)
        except Exception as exc:
            return type(exc).__name__

    task = world.spawn(node, client)
    task.add_done_callback(lambda t: world.results.__setitem__(result, _outcome(t)))


def _outcome(task: Any) -> Any:
    """A client task's result; ``"cancelled"`` if its node crashed under it."""
    return "cancelled" if task.cancelled() else task.result()


def _adds(world: World, node: str, key: str, count: int, result: str, actor_type: Any = tally) -> None:
    """``count`` Adds one after the other from ``node``; ``world.results[result]`` gets the list of answers."""

    async def client(system: ActorSystem) -> list[Any]:
        answers: list[Any] = []
        for _ in range(count):
            try:
                answers.append(await system.ref(actor_type, key).ask(Add()))
            except Exception as exc:
                answers.append(type(exc).__name__)
        return answers

    task = world.spawn(node, client)
    task.add_done_callback(lambda t: world.results.__setitem__(result, _outcome(t)))


def _nodes(world: World, cluster: Cluster = CLUSTER, nodes: tuple[str, ...] = NODES) -> None:
    for name in nodes:
        world.add_node(name, cluster=cluster, ask_timeout=2.0, write_timeout=1.0)


def _placed(world: World, key: str, actor_type: Any = tally) -> tuple[str | None, tuple[str, ...]]:
    placed = world.system("n1").placement(actor_type, key)
    return placed.owner, placed.replicas


def _key_owned_by(world: World, node: str, prefix: str, actor_type: Any = tally) -> str:
    return next(k for k in (f"{prefix}{i}" for i in range(500)) if _placed(world, k, actor_type)[0] == node)


def _ints(answers: Any) -> list[int]:
    return [a for a in answers if isinstance(a, int)] if isinstance(answers, list) else []


# ==================================================================== the lease ======


def _late_write_refused(world: World) -> None:
    """The failed run's late write was refused as fenced (its lease is gone); the count is the confirmed one."""
    check = "late_write_refused"
    _expect(check, world.results.get("counted") == [1, 2, 3], f"the counts before: {world.results.get('counted')}")
    late = [r for r in world.trace.of("write.failed", key="k") if r.get("reason") == "fenced"]
    _expect(check, len(late) == 1, f"{len(late)} fenced writes, expected the one late write")
    started = world.trace.of("activation.started", key="k")
    _expect(check, len(started) >= 2 and late[0].get("lease") == started[0].get("lease"), "the fenced write was not the first run's")
    _expect(check, world.results.get("after") == 3, f"the count after the late write is {world.results.get('after')}, expected 3")


@scenario(
    "stale-run-fenced",
    "a body starts a background write and fails; the write comes after the body restarted: refused as fenced (the lease)",
    until=timedelta(seconds=10),
    checks=(_late_write_refused,),
)
def stale_run_fenced(world: World) -> None:
    world.add_node("n1")

    def script(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(0.5)
        _adds(world, "n1", "k", 3, "counted")
        yield world.timeout(0.5)
        _ask(world, "n1", "k", Outlive(1.0), "outlived")
        yield world.timeout(2.0)
        _ask(world, "n1", "k", Read(), "after")

    world.process(script(world))


# ================================================================= node catch-up ======

NODE_EVERY = 10.0
PAUSE_AT = 25.0
PAUSED_FOR = 60.0


def _node_caught_up_once(world: World) -> None:
    """After the pause the node schedule delivered once (skipping the ticks missed, counted), then kept its grid: no burst."""
    check = "node_caught_up_once"
    resume = world.trace.of("fault.resume")[0]
    fired = world.trace.of("node_schedule.fired")
    at_resume = [r for r in fired if r.t_ns == resume.t_ns]
    _expect(check, len(at_resume) == 1, f"{len(at_resume)} ticks delivered at the resume, expected 1")
    instants = [r.t_ns for r in fired]
    _expect(check, len(instants) == len(set(instants)), "two ticks delivered at the same instant")
    caught = [r for r in world.trace.of("node_schedule.caught_up") if r.t_ns >= resume.t_ns]
    _expect(check, len(caught) == 1, f"{len(caught)} catch-ups after the resume, expected 1")
    after = [r for r in fired if r.t_ns > resume.t_ns]
    _expect(check, len(after) >= 3, f"only {len(after)} ticks after the resume")


@scenario(
    "node-pause-catch-up",
    "a node schedule (every 10 s) on a node paused for 60 s: one late delivery at the resume, the missed ticks skipped, no burst",
    until=timedelta(seconds=130),
    checks=(_node_caught_up_once,),
)
def node_pause_catch_up(world: World) -> None:
    world.add_node("n1")

    async def arm(system: ActorSystem) -> str:
        return await system.schedule(Add(), system.ref(tally, "beats"), timedelta(seconds=NODE_EVERY), reference="beats")

    world.spawn("n1", arm)

    def script(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(PAUSE_AT)
        world.pause("n1")
        yield world.timeout(PAUSED_FOR)
        world.resume("n1")

    world.process(script(world))


# ==================================================================== tombstones ======


def _deleted_stays_deleted(world: World) -> None:
    """The key counted to 5, was deleted while one replica was cut off, and its next owner started it from 0 again."""
    check = "deleted_stays_deleted"
    _expect(check, world.results.get("counted") == [1, 2, 3, 4, 5], f"the counts before the delete: {world.results.get('counted')}")
    _expect(check, world.results.get("forgot") is None, f"the delete failed: {world.results.get('forgot')}")
    _expect(check, world.results.get("released") == "released", f"the release failed: {world.results.get('released')}")
    after = world.results.get("after")
    _expect(check, after == 1, f"the first Add after the delete answered {after}, expected 1 (a deleted key starts from 0)")


@scenario(
    "delete-and-return",
    "3 nodes: a key is deleted and released while one replica is cut off, then its owner crashes: the next owner finds it deleted",
    until=timedelta(seconds=12),
    checks=(_deleted_stays_deleted, *CLUSTER_CHECKS),
)
def delete_and_return(world: World) -> None:
    _nodes(world)

    def script(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(CONVERGED)
        key = world.results["key"] = _key_owned_by(world, "n3", "gone")
        owner, replicas = _placed(world, key)
        assert owner == "n3" and len(replicas) == 3
        client = replicas[1]  # on the side of the owner while replicas[2] is cut off
        _adds(world, client, key, 5, "counted")
        yield world.timeout(1.0)
        world.partition([replicas[2]], [n for n in NODES if n != replicas[2]])
        _ask(world, client, key, Forget(), "forgot")

        async def release(system: ActorSystem) -> str:
            await asyncio.sleep(0.1)
            await system.release(tally, key)
            return "released"

        task = world.spawn(owner, release)
        task.add_done_callback(lambda t: world.results.__setitem__("released", t.result() if t.exception() is None else repr(t.exception())))
        yield world.timeout(0.5)
        world.heal()
        yield world.timeout(0.5)
        world.crash(owner)
        yield world.timeout(DECLARED_DEAD + 1.0)
        _ask(world, client, key, Add(), "after")

    world.process(script(world))


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
    _nodes(world)

    def script(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(CONVERGED)
        key = world.results["key"] = _key_owned_by(world, "n2", "stale")
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

    world.process(script(world))


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

    _nodes(world)

    def script(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(CONVERGED)
        key = world.results["key"] = _key_owned_by(world, "n2", "behind")
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

    world.process(script(world))


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
    _nodes(world)

    def script(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(CONVERGED)
        key = world.results["key"] = _key_owned_by(world, "n2", "frozen")
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

    world.process(script(world))


# ============================================================= membership quorum ======

FIVE = ("n1", "n2", "n3", "n4", "n5")
LONG = Cluster(seeds=["n1"], heartbeat=0.2, suspect_after=1, dead_after=1, remove_after=3)
CUT_AT = 3.0
CUT_FOR = 12.0


def _no_increment_lost(world: World) -> None:
    """Every Add that was answered (confirmed) on either side of the long partition is in the final count."""
    check = "no_increment_lost"
    minority = _ints(world.results.get("minority"))
    majority = _ints(world.results.get("majority"))
    final = world.results.get("final")
    _expect(check, isinstance(final, int), f"the final count was not read: {final!r}")
    assert isinstance(final, int)
    confirmed = len(minority) + len(majority) + len(_ints(world.results.get("before")))
    _expect(check, final >= confirmed, f"final count {final} < {confirmed} confirmed Adds ({len(minority)} on the cut-off side)")
    _expect(check, bool(majority), "the majority confirmed nothing during the partition")


@scenario(
    "long-partition",
    "5 nodes: a key's owner and one more node are cut off for 12 s, past remove_after (3 s); they must not go on as a cluster of two",
    until=timedelta(seconds=30),
    checks=(_no_increment_lost, *CLUSTER_CHECKS),
)
def long_partition(world: World) -> None:
    _nodes(world, LONG, FIVE)

    def script(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(CONVERGED)
        key = world.results["key"] = _key_owned_by(world, "n4", "cut")
        _adds(world, "n1", key, 2, "before")
        yield world.timeout(CUT_AT - CONVERGED)
        world.partition(["n4", "n5"], ["n1", "n2", "n3"])
        _paced_adds(world, "n4", key, CUT_FOR, "minority")
        _paced_adds(world, "n1", key, CUT_FOR, "majority")
        yield world.timeout(CUT_FOR)
        world.heal()
        yield world.timeout(8.0)
        _ask(world, "n1", key, Read(), "final")

    world.process(script(world))


def _paced_adds(world: World, node: str, key: str, seconds: float, result: str) -> None:
    """An Add every 0.5 s for ``seconds`` from ``node``; the answers (or the errors' names) in ``world.results[result]``."""

    async def client(system: ActorSystem) -> list[Any]:
        answers: list[Any] = []
        loop = asyncio.get_running_loop()
        end = loop.time() + seconds
        while loop.time() < end:
            try:
                answers.append(await system.ref(tally, key).ask(Add()))
            except Exception as exc:
                answers.append(type(exc).__name__)
            await asyncio.sleep(0.5)
        return answers

    task = world.spawn(node, client)
    task.add_done_callback(lambda t: world.results.__setitem__(result, _outcome(t)))


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

    _nodes(world)

    def script(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(CONVERGED)
        key = world.results["key"] = _key_owned_by(world, "n3", "replay")
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

    world.process(script(world))


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
    "3 nodes: while a key's owner runs, its two other replicas promise a newer epoch (an acquisition whose owner vanished); the owner's next write is fenced, its run ends lost, the next Add acquires afresh",
    until=timedelta(seconds=10),
    checks=(_fenced_by_a_newer_promise, *CLUSTER_CHECKS),
)
def newer_promise_fences(world: World) -> None:
    """The fence itself, with no fault the owner could notice: the step-down rule ends stale runs before a
    partition's majority takes their keys, so only a promise the owner cannot see leaves a run to fence."""
    from casty.cluster.driver import REPLICATION_CHANNEL
    from casty.protocol.replication import Epoch, Prepare
    from casty.cluster.routing import CLUSTER_WIRE

    _nodes(world)

    def script(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(CONVERGED)
        key = world.results["key"] = _key_owned_by(world, "n3", "promised")
        _adds(world, "n3", key, 2, "before")
        yield world.timeout(1.0)
        first = [r for r in world.trace.of("epoch.acquired", key=key) if r.node == "n3"]
        if not first:
            return  # the check says no newer epoch was promised
        newer = Epoch(int(first[0].get("epoch_round")) + 1, "n1#0")
        frame = CLUSTER_WIRE.encode(REPLICATION_CHANNEL, Prepare((tally.name, key), newer))
        for replica in ("n1", "n2"):  # an acquisition by an owner that vanished: its Prepare reached the replicas
            world.network.inject("n1", replica, frame)
        world.results["promised"] = [world.env.now, newer.round, newer.node]
        yield world.timeout(0.5)
        _adds(world, "n3", key, 3, "after")
        yield world.timeout(4.0)
        _ask(world, "n1", key, Read(), "final")

    world.process(script(world))


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

    _nodes(world)

    def script(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(CONVERGED)
        key = world.results["key"] = _key_owned_by(world, "n3", "cross")
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

    world.process(script(world))


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
    _nodes(world)

    def script(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(CONVERGED)
        key = world.results["key"] = _key_owned_by(world, "n3", "old")
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

    world.process(script(world))


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
    _nodes(world, CLUSTER, FIVE)

    def script(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(CONVERGED)
        key = world.results["key"] = _key_owned_by(world, "n1", "wb", tally5)
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

    world.process(script(world))


# ========================================================== durable acquisitions ======


@actor(initial=0, durable="write", idle_after=60.0)
async def kept_tally(ctx: Context[int, TallyMessage]) -> None:
    """``tally``, durable: every confirmed write is saved to the cluster's store; it stays active a minute."""
    await _tally(ctx)


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





@actor(initial=0, write_timeout=5.0)
async def patient_tally(ctx: Context[int, TallyMessage]) -> None:
    """``tally`` whose acquisitions and writes wait 5 s for their quorums (the system's are 1 s here)."""
    await _tally(ctx)



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
    _nodes(world)

    def script(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(CONVERGED)
        key = world.results["key"] = _key_owned_by(world, "n2", "thaw", patient_tally)
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

    world.process(script(world))


# ============================================= learning the view beside paused members ======

SIX = tuple(f"n{i}" for i in range(1, 7))
TWO_SEEDS = Cluster(seeds=["n1", "n2"], heartbeat=0.2, suspect_after=1, dead_after=1)
PAUSED = ("n2", "n6")  # dead to n1 while the others restart, never removed (remove_after is 60 s)
RESTARTED = ("n3", "n4", "n5")
RING_KEYS = tuple(f"ring{i}" for i in range(40))


def _kept_beside_paused(world: World) -> None:
    """A read answered on a restarted node while the key's other replicas (n2 and n6) are paused is the confirmed count."""
    check = "kept_beside_paused"
    confirmed = _ints(world.results.get("before"))
    during = world.results.get("during")
    _expect(check, len(confirmed) == 3, f"the Adds before the faults were not all confirmed: {world.results.get('before')!r}")
    _expect(
        check,
        not isinstance(during, int) or during == max(confirmed),
        f"n3 read {during} while n2 and n6, paused, held {max(confirmed)} (replicas {world.results.get('beside_replicas')})",
    )


def _beside_key(world: World) -> str:
    """A key whose replicas are n2, n6 and a restarted node, and which a ring without n2 and n6 gives to n3, n4, n5 (n3 first)."""
    short = Ring(("n1", *RESTARTED))
    for key in (f"beside{i}" for i in range(2000)):
        replicas = _placed(world, key)[1]
        if set(PAUSED) <= set(replicas) and "n1" not in replicas and short.replicas(tally.name, key, 3)[0] == "n3" and "n1" not in short.replicas(tally.name, key, 3):
            return key
    raise RuntimeError("no key fits the restart-beside-paused plan")


def _rings_agree(world: World) -> None:
    """While n2 and n6 are paused (dead, not removed), every node up gives each key the replica set n1 gives it."""
    check = "rings_agree"
    placements = world.results.get("placements")
    _expect(check, isinstance(placements, dict), f"the placements were not read: {placements!r}")
    assert isinstance(placements, dict)
    reference = placements["n1"]
    for node in RESTARTED:
        differ = [key for key in RING_KEYS if placements[node][key] != reference[key]]
        _expect(
            check,
            not differ,
            f"{node} places {len(differ)} of {len(RING_KEYS)} keys elsewhere than n1 (first: {differ[:1]}"
            f" on {[placements[node][k] for k in differ[:1]]}, n1: {[reference[k] for k in differ[:1]]})",
        )


@scenario(
    "restart-beside-paused",
    "6 nodes: n2 and n6 paused past dead_after, then n3, n4, n5 crash and restart together; their rings must keep n2 and n6",
    until=timedelta(seconds=17),
    checks=(_kept_beside_paused, _rings_agree, *CLUSTER_CHECKS),
)
def restart_beside_paused(world: World) -> None:
    """Swarm seed 679, reduced. n2 and n6 are paused long enough to be dead to n1, which keeps them
    on its ring (dead, not removed). n3, n4 and n5 crash together and restart: each hears n1, which
    learned the view in its life and names n2 and n6, and the other two, still listening, which
    name only whom they heard since they started (their disks were wiped: replaced machines, no remembered view). Only members that learned the view vote for the
    members taken in on learning ("Learning the view", (5)): n1 alone, so n2 and n6 are on every
    restarted ring, as on n1's, and every key has one replica set. Counting the silence of the
    restarted two as votes leaves n2 and n6 off their rings (named by one voter of three), while
    the disk's memory of them gives way: keys whose replicas include n2 or n6 get other replicas
    there, and a replica that holds nothing could accept an owner the others have fenced: a key
    counted to 3 on n2, n6 and a restarted node is read from nothing on n3 (its replicas there are
    all empty), where the whole ring says its replicas are paused (Unavailable).
    """
    _nodes(world, TWO_SEEDS, SIX)

    def script(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(CONVERGED)
        key = _beside_key(world)
        world.results["beside_replicas"] = list(_placed(world, key)[1])  # n2, n6 and a node that restarts wiped
        _adds(world, "n1", key, 3, "before")
        yield world.timeout(1.0)
        for node in PAUSED:
            world.pause(node)
        yield world.timeout(DECLARED_DEAD + 0.5)
        for node in RESTARTED:
            world.crash(node)
        yield world.timeout(1.0)
        for node in RESTARTED:
            world.restart(node, wipe_disk=True)  # replaced machines: they remember nothing
        yield world.timeout(2.5)  # the listen window, the round trips and the sync rounds are long over
        _ask(world, "n3", key, Read(), "during")
        yield world.timeout(2.5)  # the read is answered, or timed out, before n2 and n6 come back
        world.results["placements"] = {
            node: {key: list(world.system(node).placement(tally, key).replicas) for key in RING_KEYS} for node in ("n1", *RESTARTED)
        }
        for node in PAUSED:
            world.resume(node)
        yield world.timeout(4.0)

    world.process(script(world))


# ================================= restarted nodes while the members that remember are paused ======

FIVE_NODES = tuple(f"n{i}" for i in range(1, 6))


def _no_read_from_nothing(world: World) -> None:
    """A read answered while the members that remember the cluster are paused is the last confirmed count."""
    check = "no_read_from_nothing"
    confirmed = _ints(world.results.get("before"))
    during = world.results.get("during")
    _expect(check, len(confirmed) == 3, f"the Adds before the faults were not all confirmed: {world.results.get('before')!r}")
    _expect(
        check,
        not isinstance(during, int) or during == max(confirmed),
        f"a restarted node read {during} while n3 held {max(confirmed)} (the members that remember the cluster were paused)",
    )


def _restart_beside_paused(world: World, crashed: tuple[str, str], paused: tuple[str, ...], wipe: bool) -> None:
    """Count to 3 on a key; pause ``paused``, crash ``crashed`` and restart them 1 s later; read on the first one."""
    _nodes(world, TWO_SEEDS, FIVE_NODES)

    def script(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(CONVERGED)
        key = world.results["key"] = _key_owned_by(world, "n3", "kept")
        _adds(world, "n3", key, 3, "before")
        yield world.timeout(1.0)
        for node in paused:
            world.pause(node)
        for node in crashed:
            world.crash(node)
        yield world.timeout(1.0)
        for node in crashed:
            world.restart(node, wipe_disk=wipe)
        yield world.timeout(1.5)  # the listen window is over: a node that learned now would serve
        _ask(world, crashed[0], key, Read(), "during")
        yield world.timeout(2.5)
        for node in paused:
            world.resume(node)
        yield world.timeout(6.0)
        _ask(world, "n3", key, Read(), "final")

    world.process(script(world))


@scenario(
    "seed-restart-unheard-seed",
    "5 nodes, seeds n1 and n2: n1, n3, n4 paused while n2 and n5 restart with wiped disks; they must not learn a view of two",
    until=timedelta(seconds=18),
    checks=(_no_read_from_nothing, *CLUSTER_CHECKS),
)
def seed_restart_unheard_seed(world: World) -> None:
    """Swarm seed 1563, reduced. n2 (a seed) and n5 crash and restart with wiped disks (replaced
    machines) while n1 (the other seed), n3 and n4, which remember the cluster, are paused. n2 and
    n5 hear only each other, and neither learned the view in its life: "Learning the view" (2)
    keeps them from learning until one hears a member that learned it, or every other seed.
    Without that rule the two take 2 of 2 for the cluster at the end of their window, own the key,
    and n2 reads it from nothing (0, or what it wrote since) while n3 holds 3.
    """
    _restart_beside_paused(world, ("n2", "n5"), ("n1", "n3", "n4"), wipe=True)


@scenario(
    "seeds-restart-with-disks",
    "5 nodes, seeds n1 and n2: both seeds restart with their disks while n3, n4, n5 are paused; they must not found a cluster of two",
    until=timedelta(seconds=18),
    checks=(_no_read_from_nothing, *CLUSTER_CHECKS),
)
def seeds_restart_with_disks(world: World) -> None:
    """Swarm seed 848, reduced. Both seeds crash and restart with their disks while n3, n4 and n5,
    which remember the cluster, are paused. Every other seed is heard, so (2) lets them found a
    cluster; what stops them is "The remembered view": each disk names n3, n4 and n5, held dead
    until heard, so the two count 2 of 5 and own nothing. A node that drops its disk's list
    founds a cluster of two and n1 reads the key from nothing while n3 holds 3.
    """
    _restart_beside_paused(world, ("n1", "n2"), ("n3", "n4", "n5"), wipe=False)
