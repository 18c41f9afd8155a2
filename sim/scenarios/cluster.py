"""Cluster scenarios: three simulated nodes, owner epochs and quorum writes under faults.

Each node is a real ``ActorSystem(cluster=Cluster(...))`` on the simulated network. A key's
owner holds an epoch over the key's replicas; every state write (and every schedule firing's
next-due write) is confirmed by a quorum. The scenarios show what that buys and what it
does not: a stale owner is fenced, and a schedule firing is at-least-once across owners on
one side (repeat) and can be lost on the other (miss).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import simpy

from casty import ActorSystem, Askable, Context, actor
from casty.cluster.config import Cluster
from casty._core.state import SCHEDULES_PAGE, STATE_PAGE

from ..checks import CheckFailed, epochs_only_grow, never_early, no_burst, no_confirmed_write_lost, repeats_and_misses_explained, single_writer_per_epoch
from ..network import Latency
from ..world import World
from . import scenario

NODES = ("n1", "n2", "n3")
CLUSTER = Cluster(seeds=["n1"], heartbeat=0.2, suspect_after=1, dead_after=1)
CONVERGED = 2.0
DECLARED_DEAD = 0.2 + 1 + 1 + 0.5  # silence, suspect_after, dead_after, slack

# =========================================================================== actors ======


@dataclass(frozen=True)
class Arm(Askable[int]):
    every: float


@dataclass(frozen=True)
class Tick:
    pass


@dataclass(frozen=True)
class Get(Askable[int]):
    pass


async def _count_ticks(ctx: Context[int, Arm | Tick | Get], work: float) -> None:
    """Arm schedules a Tick every ``every`` s; each Tick counts one after ``work`` s; Get answers the count."""
    async for msg in ctx.inbox:
        if isinstance(msg, Arm):
            await ctx.schedule("tick", timedelta(seconds=msg.every), timedelta(seconds=msg.every), Tick())
            msg.reply_to.tell(ctx.state.value)
        elif isinstance(msg, Tick):
            if work:
                await asyncio.sleep(work)
            await ctx.state.update(lambda n: n + 1)
        else:
            msg.reply_to.tell(ctx.state.value)


@actor(initial=0)
async def cl_ticker(ctx: Context[int, Arm | Tick | Get]) -> None:
    """Arm schedules a Tick every ``every`` s; each Tick counts one; Get answers the count."""
    await _count_ticks(ctx, work=0.0)


@actor(initial=0)
async def slow_ticker(ctx: Context[int, Arm | Tick | Get]) -> None:
    """cl_ticker whose Tick handler works 0.5 s before it counts (a firing's message sits in the body that long)."""
    await _count_ticks(ctx, work=0.5)


# ========================================================================= helpers ======


def _expect(check: str, condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(check, message)


def _three_nodes(world: World) -> None:
    for name in NODES:
        world.add_node(name, cluster=CLUSTER, ask_timeout=2.0, write_timeout=1.0)


def _owner(world: World, actor_type: Any, key: str) -> str | None:
    return world.system("n1").placement(actor_type, key).owner


def _key_owned_by(world: World, actor_type: Any, node: str, prefix: str) -> str:
    return next(k for k in (f"{prefix}{i}" for i in range(500)) if _owner(world, actor_type, k) == node)


def _ask(world: World, node: str, actor_type: Any, key: str, message: Any, result: str) -> None:
    """Ask from ``node`` in the background; the answer (or the exception's name) lands in ``world.results[result]``."""

    async def client(system: ActorSystem) -> Any:
        try:
            return await system.ref(actor_type, key).ask(message)
        except Exception as exc:
            return type(exc).__name__

    task = world.spawn(node, client)
    task.add_done_callback(lambda t: world.results.__setitem__(result, t.result()))


def _crash_right_after(
    world: World, node: str, kind: str, after_t: float, key: str, delay: float = 0.0
) -> Generator[simpy.Event, Any, None]:
    """Watch the trace (every 0.1 ms) and crash ``node`` ``delay`` s after a ``kind`` row of ``key`` on it appears after ``after_t``."""
    rows = world.trace.rows
    scanned = 0
    while True:
        yield world.timeout(0.0001)
        while scanned < len(rows):
            row = rows[scanned]
            scanned += 1
            if row.kind == kind and row.node == node and row.get("key") == key and row.t > after_t:
                world.results["crashed_after"] = {"t": row.t, "due_us": row.get("due_us")}
                if delay:
                    yield world.timeout(delay)
                world.crash(node)
                return


def _fired(world: World, key: str) -> list[Any]:
    return [r for r in world.trace.of("schedule.fired") if r.get("key") == key]


def _confirmed(world: World, key: str, page: str) -> list[Any]:
    return [r for r in world.trace.of("write.confirmed") if r.get("key") == key and page in (r.get("pages") or ())]


CLUSTER_CHECKS: tuple[Callable[[World], None], ...] = (epochs_only_grow, single_writer_per_epoch, no_confirmed_write_lost)


# ======================================================================= scenarios =====


def _stale_owner_fenced(world: World) -> None:
    """n3 owned key 'stale' and was cut off: the majority took it over under a newer epoch; n3 stepped down (its run ended as lost) when it lost its quorum, before that epoch existed, or else its writes after it were refused as fenced; the majority's count won."""
    check = "stale_owner_fenced"
    key = str(world.results.get("key"))
    actor_name = cl_ticker.name
    partition = world.trace.of("fault.partition")[0]
    heal = world.trace.of("fault.heal")[0]
    acquired = world.trace.of("epoch.acquired", actor=actor_name, key=key)
    _expect(check, bool(acquired) and acquired[0].node == "n3", f"n3 did not own the key first: {[r.node for r in acquired]}")
    takeover = [r for r in acquired if r.node != "n3" and partition.t_ns < r.t_ns < heal.t_ns]
    _expect(check, bool(takeover), "the majority did not take the key over during the partition")
    newer = takeover[0]
    _expect(check, newer.get("found") > 0, f"the majority's owner started from nothing (found {newer.get('found')}), not from n3's confirmed count")
    stale_ticks = [r for r in _fired(world, key) if r.node == "n3" and partition.t_ns < r.t_ns]
    _expect(check, bool(stale_ticks), "n3 did not go on running its body (no firing on n3 after the partition)")
    fenced = world.trace.of("write.failed", node="n3", actor=actor_name, key=key, reason="fenced")
    ended = world.trace.of("activation.ended", node="n3", actor=actor_name, key=key)
    stepped_down = [r for r in ended if r.get("reason") == "lost" and partition.t_ns < r.t_ns < newer.t_ns]
    _expect(check, all(r.t_ns > newer.t_ns for r in fenced), "n3's write was refused as fenced before the newer epoch existed")
    _expect(check, bool(stepped_down) or bool(fenced), "n3 neither stepped down before the newer epoch nor had its writes after it refused as fenced")
    back = [r for r in acquired if r.node == "n3" and r.t_ns > newer.t_ns]  # after the heal the key may move back to n3
    until_ns = back[0].t_ns if back else world.trace.rows[-1].t_ns + 1
    n3_after = [r for r in _confirmed(world, key, STATE_PAGE) if r.node == "n3" and newer.t_ns < r.t_ns < until_ns]
    _expect(check, not n3_after, f"n3 confirmed {len(n3_after)} write(s) under its stale epoch after the majority's")
    if back:  # n3 owns the key again under a newer epoch: it starts from the majority's confirmed count, not its own
        majority_writes = [int(r.get("version")) for r in _confirmed(world, key, STATE_PAGE) if r.node == newer.node and r.t_ns < back[0].t_ns]
        _expect(check, int(back[0].get("found")) >= max(majority_writes, default=0), "n3 took the key back without the majority's writes")
    _expect(
        check,
        bool(stepped_down) or any(r.get("reason") == "lost" and r.t_ns > heal.t_ns for r in ended),
        f"n3's activation did not end as lost (a step-down during the partition, or fenced after the heal): {[r.get('reason') for r in ended]}",
    )
    majority, final = world.results.get("majority"), world.results.get("final")
    _expect(check, isinstance(majority, int) and isinstance(final, int), f"the counts were not read: {majority}, {final}")
    assert isinstance(majority, int) and isinstance(final, int)
    _expect(check, final >= majority, f"the count went back after the heal: {majority} during the partition, {final} after")


@scenario(
    "stale-owner-fenced",
    "3 nodes: a key's owner is partitioned into the minority and ticks until it steps down with its quorum (lost), before the majority's new owner takes the key under a newer epoch (which would fence it); after the heal the majority's count wins",
    until=timedelta(seconds=15),
    checks=(_stale_owner_fenced, *CLUSTER_CHECKS),
)
def stale_owner_fenced(world: World) -> None:
    _three_nodes(world)

    def script(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(CONVERGED)
        key = world.results["key"] = _key_owned_by(world, cl_ticker, "n3", "stale")
        _ask(world, "n1", cl_ticker, key, Arm(0.2), "armed")
        yield world.timeout(1.0)
        world.partition(["n3"], ["n1", "n2"])
        yield world.timeout(DECLARED_DEAD + 1.0)
        _ask(world, "n1", cl_ticker, key, Get(), "majority")
        yield world.timeout(0.5)
        world.heal()
        yield world.timeout(4.0)
        _ask(world, "n3", cl_ticker, key, Get(), "final")

    world.process(script(world))


def _firing_rows(world: World) -> tuple[str, int, Any, list[Any], Any]:
    """The key, the due time of the firing the crash followed, the crash row, the firings of that due, and the crash's firing row."""
    key = str(world.results.get("key"))
    crashed_after = world.results.get("crashed_after")
    if not isinstance(crashed_after, dict):
        raise CheckFailed("ownership", "the owner was never crashed after a firing")
    due = int(crashed_after["due_us"])
    crash = world.trace.of("fault.crash")[0]
    same_due = [r for r in _fired(world, key) if int(r.get("due_us")) == due]
    first = same_due[0] if same_due else None
    return key, due, crash, same_due, first


def _ownership_repeat(world: World) -> None:
    """At-least-once across owners: the owner told the firing's Tick and crashed before the firing's next-due write
    (@schedules) reached a quorum (its outgoing frames were cut 50 ms before the firing, so the write never left the
    node), so the replicas still hold that occurrence as due; the next owner, resuming the key
    from the replicas, fires the same ``due_us`` again. The occurrence is delivered twice, on two nodes."""
    check = "ownership_repeat"
    key, due, crash, same_due, first = _firing_rows(world)
    _expect(check, first is not None and first.node == crash.node and first.t_ns <= crash.t_ns, "the crashed owner did not fire the occurrence before the crash")
    assert first is not None
    between = [r for r in _confirmed(world, key, SCHEDULES_PAGE) if r.node == crash.node and first.t_ns <= r.t_ns]
    _expect(check, not between, f"the next-due write of the firing at t={first.t:.3f}s was confirmed before the crash: no repeat is due")
    again = [r for r in same_due if r.node != crash.node and r.t_ns > crash.t_ns]
    _expect(check, len(again) == 1, f"due {due} was fired {len(again)} time(s) by the next owner, expected exactly once more")
    _expect(check, again[0].get("next_us") is not None, "the repeat did not advance the schedule")


def _ownership_miss(world: World) -> None:
    """At-most-once for a queued firing: the owner's firing wrote its next due (@schedules confirmed by a quorum) and told
    the Tick, whose handler was still working when the node died; its state write never confirmed. The next owner resumes
    from the confirmed next due, so the occurrence is not fired again: it fired once, on the dead node, and was lost."""
    check = "ownership_miss"
    key, due, crash, same_due, first = _firing_rows(world)
    _expect(check, len(same_due) == 1 and first is not None and first.node == crash.node, f"due {due} fired {len(same_due)} time(s): {[r.node for r in same_due]}")
    assert first is not None
    window = [r for r in _confirmed(world, key, SCHEDULES_PAGE) + _confirmed(world, key, STATE_PAGE) if r.node == crash.node and first.t_ns <= r.t_ns <= crash.t_ns]
    _expect(check, any(SCHEDULES_PAGE in r.get("pages") for r in window), "the firing's next-due write was not confirmed before the crash")
    _expect(check, not any(STATE_PAGE in r.get("pages") for r in window), "the Tick's state write was confirmed before the crash: it was handled")
    later = [r for r in _fired(world, key) if r.node != crash.node and r.t_ns > crash.t_ns]
    _expect(check, bool(later), "the next owner never fired the schedule")
    _expect(check, int(later[0].get("due_us")) == int(first.get("next_us")), f"the next owner fired due {later[0].get('due_us')}, not the confirmed next due {first.get('next_us')}")


def _crash_owner_after_a_firing(world: World, actor_type: Any, prefix: str, delay: float) -> Generator[simpy.Event, Any, None]:
    yield world.timeout(CONVERGED)
    key = world.results["key"] = _key_owned_by(world, actor_type, "n3", prefix)
    _ask(world, "n1", actor_type, key, Arm(5.0), "armed")
    yield world.process(_crash_right_after(world, "n3", "schedule.fired", CONVERGED + 6.0, key, delay))


@scenario(
    "ownership-repeat",
    "3 nodes: a scheduled key's owner crashes right after a firing, before its next-due write is confirmed; the next owner fires the same occurrence again",
    until=timedelta(seconds=25),
    checks=(_ownership_repeat, *CLUSTER_CHECKS, repeats_and_misses_explained),
)
def ownership_repeat(world: World) -> None:
    _three_nodes(world)

    def script(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(CONVERGED)
        key = world.results["key"] = _key_owned_by(world, cl_ticker, "n3", "repeat")
        _ask(world, "n1", cl_ticker, key, Arm(5.0), "armed")
        yield world.timeout(CONVERGED + 6.0)
        fired = [r for r in _fired(world, key) if r.node == "n3"]
        # 50 ms before the next firing, n3's outgoing frames start to be dropped: the firing's writes
        # cannot reach a replica, so the crash right after it leaves the replicas with the old next due.
        yield world.timeout(fired[-1].t + 5.0 - 0.05 - world.now)
        world.partition(["n3"], ["n1", "n2"], oneway=True)
        yield world.process(_crash_right_after(world, "n3", "schedule.fired", world.now, key))

    world.process(script(world))


@scenario(
    "ownership-miss",
    "3 nodes: a scheduled key's owner dies while a firing's message is being handled (its next due already confirmed); the next owner does not repeat it: the occurrence is lost",
    until=timedelta(seconds=25),
    checks=(_ownership_miss, *CLUSTER_CHECKS, repeats_and_misses_explained),
)
def ownership_miss(world: World) -> None:
    _three_nodes(world)
    world.process(_crash_owner_after_a_firing(world, slow_ticker, "miss", 0.2))


# ================================================================== cluster-random =====

RANDOM_NODES = ("n1", "n2", "n3", "n4", "n5")
RANDOM_COUNTERS = ("c0", "c1", "c2")
RANDOM_LOAD_END = 40.0  # faults and client increments happen in [CONVERGED, RANDOM_LOAD_END)
RANDOM_READ_AT = 52.0  # everything healed, restarted and resumed by RANDOM_LOAD_END: 12 s of quiet to converge
RANDOM_UNTIL = 58.0
RANDOM_CRASH_GAP = 4.0  # s between a restart and the next crash: the rejoin grace (write_timeout + 1 s) and a handoff


@dataclass(frozen=True)
class Incr(Askable[int]):
    pass


@dataclass(frozen=True)
class Settle(Askable[int]):
    pass


@actor(initial=0)
async def cl_counter(ctx: Context[int, Incr | Settle | Get]) -> None:
    """Incr counts one and answers the new count once its write is confirmed; Settle writes the count unchanged and
    answers it once confirmed (a read that proves the epoch: a stale owner is fenced instead); Get answers from memory."""
    async for msg in ctx.inbox:
        if isinstance(msg, Incr):
            await ctx.state.update(lambda n: n + 1)
        elif isinstance(msg, Settle):
            await ctx.state.update(lambda n: n)
        msg.reply_to.tell(ctx.state.value)


def _random_plan(world: World) -> list[tuple[float, str, dict[str, Any]]]:
    """The fault plan of one seed, drawn from ``world.rng("plan", "faults")``: (time, action, args), sorted.

    Up to two crashes, anywhere in the load, each restarted 1-8 s later (``down``); a second
    crash comes at least ``RANDOM_CRASH_GAP`` s after the first node restarted and, when the
    run gets there, not before that node's first sync round after its restart has ended plus
    1 s (``_crashes``): two overlapping losses of memory can take every copy of a write, which
    no protocol can bring back. Main faults run on their own timeline, one at a time and
    overlapping the crashes freely: partitions of a minority (1 or 2 nodes) from the rest,
    pauses of one node (1-8 s each). Clock steps (±0.5-3 s) and link-loss bursts (5-30 % on
    every link, 0.5-3 s) anywhere. Everything is over by RANDOM_LOAD_END, 12 s before the
    final reads.
    """
    rng = world.rng("plan", "faults")
    plan: list[tuple[float, str, dict[str, Any]]] = []
    t = CONVERGED + rng.uniform(0.5, 10.0)
    for _ in range(rng.choice((0, 1, 1, 2, 2))):
        length = rng.uniform(1.0, 8.0)
        if t + length > RANDOM_LOAD_END - 2.0:
            break
        node = rng.choice(RANDOM_NODES)
        plan.append((t, "crash", {"node": node, "down": length}))
        t += length + RANDOM_CRASH_GAP + rng.uniform(0.0, 8.0)
    t = CONVERGED + rng.uniform(0.5, 4.0)
    while True:
        kind = rng.choice(("partition", "pause"))
        length = rng.uniform(1.0, 8.0)
        if t + length > RANDOM_LOAD_END - 1.0:
            break
        if kind == "pause":
            node = rng.choice(RANDOM_NODES)
            plan += [(t, "pause", {"node": node}), (t + length, "resume", {"node": node})]
        else:
            minority = rng.sample(RANDOM_NODES, rng.choice((1, 2)))
            rest = [n for n in RANDOM_NODES if n not in minority]
            plan += [(t, "partition", {"a": minority, "b": rest}), (t + length, "heal", {})]
        t += length + rng.uniform(0.5, 4.0)
    for _ in range(rng.randint(0, 3)):
        at = rng.uniform(CONVERGED, RANDOM_LOAD_END - 1.0)
        plan.append((at, "step", {"node": rng.choice(RANDOM_NODES), "seconds": rng.choice((-1, 1)) * rng.uniform(0.5, 3.0)}))
    for _ in range(rng.randint(0, 2)):
        at = rng.uniform(CONVERGED, RANDOM_LOAD_END - 4.0)
        length = rng.uniform(0.5, 3.0)
        plan += [(at, "loss", {"p": rng.uniform(0.05, 0.3)}), (at + length, "loss", {"p": 0.0})]
    plan.sort(key=lambda e: e[0])
    return plan


def _crashes(world: World, crashes: list[tuple[float, dict[str, Any]]]) -> Generator[simpy.Event, Any, None]:
    """Crash and restart nodes in turn; each crash after the first waits until the node restarted before it has pulled
    the others' replicas (its ``handoff.ended`` row) and 1 s more. A crash that would then run past the load is skipped."""
    previous: tuple[str, int] | None = None  # (node, index of its fault.restart row)
    for at, args in crashes:
        yield world.timeout(max(0.0, at - world.now))
        if previous is not None:
            node, seen = previous
            rows = world.trace.rows
            while not any(r.kind == "handoff.ended" and r.node == node for r in rows[seen:]):
                seen = len(rows)
                yield world.timeout(0.1)
            yield world.timeout(1.0)
        if world.now + args["down"] > RANDOM_LOAD_END - 2.0:
            world.note(args["node"], "planned crash skipped: the previous restart's handoff ended too late", action="crash")
            return
        if world.node(args["node"]).status == "down":
            return
        world.crash(args["node"])
        yield world.timeout(args["down"])
        world.restart(args["node"])
        previous = (args["node"], len(world.trace.rows))


def _set_loss(world: World, p: float) -> None:
    for u in RANDOM_NODES:
        for v in RANDOM_NODES:
            if u != v:
                world.network.link(u, v, loss=p)
    world.note("network", "loss burst" if p else "loss burst over", loss=p)


def _apply(world: World, action: str, args: dict[str, Any]) -> None:
    """Carry out one planned fault; one that no longer fits the node (a pause of a crashed node) is noted and skipped."""
    status = world.node(args["node"]).status if "node" in args else None
    fits = {"pause": "up", "resume": "paused", "step": None, "crash": None}
    if action in fits and (status == "down" or (fits[action] is not None and status != fits[action])):
        world.note(args["node"], f"planned {action} skipped: the node is {status}", action=action)
        return
    if action == "crash":
        world.crash(args["node"])
    elif action == "restart":
        world.restart(args["node"])
    elif action == "pause":
        world.pause(args["node"])
    elif action == "resume":
        world.resume(args["node"])
    elif action == "partition":
        world.partition(args["a"], args["b"])
    elif action == "heal":
        world.heal()
    elif action == "step":
        world.step_clock(args["node"], timedelta(seconds=args["seconds"]))
    elif action == "loss":
        _set_loss(world, args["p"])


def confirmed_counts_kept(world: World, counters: tuple[str, ...], check: str) -> None:
    """Per counter, fail ``check`` unless every confirmed increment is in the final count.

    Shared by every scenario whose clients record ``confirmed:<key>`` (the counts their confirmed ``Inc`` asks
    returned) and ``final:<key>`` (the count read at the end): the confirmed answers must be distinct counts, and the
    final count must be read and be >= their number and >= the greatest of them. One body, so the scenarios cannot
    drift apart on what "no confirmed increment lost" means.
    """
    for key in counters:
        confirmed = [v for v in world.results.get(f"confirmed:{key}", []) if isinstance(v, int)]
        final = world.results.get(f"final:{key}")
        _expect(check, isinstance(final, int), f"{key}: the final count was not read: {final!r}")
        assert isinstance(final, int)
        _expect(check, len(set(confirmed)) == len(confirmed), f"{key}: one count was confirmed twice: {sorted(confirmed)}")
        _expect(check, final >= len(confirmed), f"{key}: final count {final} < {len(confirmed)} confirmed increments")
        _expect(check, final >= max(confirmed, default=0), f"{key}: final count {final} < confirmed count {max(confirmed, default=0)}")


def _cluster_random_counts(world: World) -> None:
    """Every client-confirmed increment survives: per counter, the confirmed answers are distinct counts, and the
    final count (read from a healthy node after the quiet time) is >= their number and >= the greatest of them.

    The final count is read with ``Settle``, a write of the count unchanged: its answer is confirmed under the owner's
    epoch, so it is the replicas' count. A ``Get`` is answered from the owner's memory and is not a quorum read; an owner
    cut off in a minority ends its run once it loses its quorum (the step-down rule), so after the heal its key starts
    again from the replicas' count (tests/test_cluster_runtime.py,
    test_a_cut_off_owner_steps_down_with_its_quorum_and_reads_the_replicas_count_after_the_heal). The ``Get`` answers are
    kept in ``world.results["get:<key>"]`` for the record; they are not checked (a read inside the step-down window may
    still be the old owner's).

    Claimed under the plan's one restriction: two crashes are never closer than ``RANDOM_CRASH_GAP`` after a restart
    (two overlapping losses of memory can take every copy of a write; then nothing is owed). A restarted node holds
    nothing; its replica stays out of the protocol for the rejoin grace and then answers blank (not counted in any read
    quorum) until it has pulled the other replicas' copies, so it never hides a confirmed write. Pauses, partitions,
    clock steps and loss do not erase a replica's memory. An earlier plan that allowed a crash anywhere, before the
    handoff existed, lost confirmed increments on 8 of 500 seeds: the next owner read {A restarted empty, C stale}.
    """
    confirmed_counts_kept(world, RANDOM_COUNTERS, "cluster_random_counts")


@scenario(
    "cluster-random",
    "5 nodes: a seeded random plan of a crash (+restart), partitions, pauses, clock steps and loss bursts under client increments and a schedule; no confirmed increment is lost",
    until=timedelta(seconds=RANDOM_UNTIL),
    checks=(_cluster_random_counts, never_early, no_burst, *CLUSTER_CHECKS, repeats_and_misses_explained),
)
def cluster_random(world: World) -> None:
    for name in RANDOM_NODES:
        world.add_node(name, cluster=Cluster(seeds=["n1", "n2"], heartbeat=0.2, suspect_after=1, dead_after=1), ask_timeout=2.0, write_timeout=1.0)
    plan = world.results["plan"] = _random_plan(world)
    load = world.rng("plan", "load")

    def faults(world: World) -> Generator[simpy.Event, Any, None]:
        for at, action, args in plan:
            if action == "crash":
                continue
            yield world.timeout(at - world.now)
            _apply(world, action, args)

    world.process(_crashes(world, [(at, args) for at, action, args in plan if action == "crash"]))

    def up() -> list[str]:
        return [n for n in RANDOM_NODES if world.node(n).status == "up"]

    def clients(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(CONVERGED)
        _ask(world, load.choice(up()), cl_ticker, "sched", Arm(1.0), "armed")
        i = 0
        while world.now < RANDOM_LOAD_END:
            yield world.timeout(load.uniform(0.1, 0.5))
            key = load.choice(RANDOM_COUNTERS)
            _confirm(world, load.choice(up()), key, f"incr:{i}")
            i += 1
        yield world.timeout(RANDOM_READ_AT - world.now)
        for key in RANDOM_COUNTERS:
            _read_final(world, key)

    world.process(faults(world))
    world.process(clients(world))


def _confirm(world: World, node: str, key: str, name: str) -> None:
    async def client(system: ActorSystem) -> Any:
        try:
            count = await system.ref(cl_counter, key).ask(Incr())
        except Exception as exc:
            return type(exc).__name__
        world.results.setdefault(f"confirmed:{key}", []).append(count)
        return count

    world.spawn(node, client, name=f"{node}:{name}")


def _read_final(world: World, key: str) -> None:
    async def client(system: ActorSystem) -> Any:
        ref = system.ref(cl_counter, key)
        try:
            world.results[f"get:{key}"] = await ref.ask(Get())
        except Exception as exc:
            world.results[f"get:{key}"] = type(exc).__name__
        last: Any = None
        for _ in range(4):  # a stale owner's Settle is fenced (Unavailable): the next one acquires a newer epoch
            try:
                return await ref.ask(Settle())
            except Exception as exc:
                last = type(exc).__name__
        return last

    task = world.spawn("n1", client)
    task.add_done_callback(lambda t: world.results.__setitem__(f"final:{key}", t.result()))
