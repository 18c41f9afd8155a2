"""Wider fault plans than the built-in scenarios, through the public API only, as a new user would write them.

A user's actor (``wide_book``: a durable log of acknowledged operations plus a persisted 1 s schedule) runs on
a 3- and a 5-node simulated cluster under ``sim.testing.fault_plans`` of every drawable kind (forged heartbeats
and heals included), up to 8-10 faults over a 120 s window, and under hand-built overlapping plans (a crash
during a partition during a clock step, a restart during a handoff, every replica paused at once). After the
last fault ``sim.faults.heal_all`` heals everything; then:

- safety: ``epochs_only_grow``, ``single_writer_per_epoch``, ``owed_writes_found``, ``never_early``,
  ``no_burst`` (sim.checks), and our own ``acked_ops_kept``: every operation whose ask was answered is in the
  log read back after the heal (disks are kept, ``wipe=False``, and the type is durable, so nothing may go);
- liveness: ``quorum_regained`` (a write asked on every node after ``SETTLE`` s is answered) and
  ``schedule_lives`` (the schedule fires in every ``FIRE_GAP`` s window after ``SETTLE``).

CI runs a few seeds per test (about a minute for the file). The long sweep, a few hundred seeds, one worker::

    WIDE_SEEDS=300 nice .venv/bin/pytest tests/test_wide_plans.py -q -p no:randomly -k sweep
    nice .venv/bin/pytest tests/test_wide_plans.py -q -k sweep --sim-seeds 0:300     # the same through the plugin

A failing seed's report prints its plan and the line that replays it (``--sim-seed N --sim-plan '...'``); pasted, it
fails the same way (checked on seed 5). Measured (the same space, one worker): seeds 0:150 fail on 42 of 150 seeds
with three nodes and 34 of 150 with five, every failure one of the two findings below (a duplicated frame runs an
ask twice; a corrected forward clock step silences a schedule); no acknowledged op lost, no safety check failed,
quorum regained on every seed. Without duplicate and clock-step faults, three nodes over 300 s: seeds 0:60 all pass;
five nodes over 120 s with wiped restarts (owed_writes_found instead of acked_ops_kept): seeds 0:80 all pass.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
import simpy

import sim
from casty import ActorSystem, Askable, Context, actor
from casty.cluster.config import Cluster
from sim.checks import CheckFailed
from sim.faults import ClockStep, Crash, FaultPlan, Partition, Pause, Restart, heal_all
from sim.testing import DRAWABLE_KINDS, fault_plans

# ============================================================================ the user's actor ======


@dataclass(frozen=True)
class Book:
    ops: tuple[int, ...] = ()
    beats: int = 0


@dataclass(frozen=True)
class Add(Askable[int]):
    """Append ``op``; answered once the write is confirmed."""

    op: int


@dataclass(frozen=True)
class Look(Askable[Book]):
    """A confirmed no-op write, then the state: a read that an old owner cannot answer stale."""


@dataclass(frozen=True)
class Arm(Askable[int]):
    every: float


@dataclass(frozen=True)
class Beat:
    pass


@actor(initial=Book(), durable="write")
async def wide_book(ctx: Context[Book, Add | Look | Arm | Beat]) -> None:
    """A durable log of client operations that also counts its own schedule's beats."""
    async for msg in ctx.inbox:
        match msg:
            case Add(op=op, reply_to=reply_to):
                await ctx.state.update(lambda b: Book(b.ops + (op,), b.beats))
                reply_to.tell(op)
            case Look(reply_to=reply_to):
                state = await ctx.state.update(lambda b: b)
                reply_to.tell(state)
            case Arm(every=every, reply_to=reply_to):
                period = timedelta(seconds=every)
                await ctx.schedule("beat", period, period, Beat())
                reply_to.tell(0)
            case Beat():
                await ctx.state.update(lambda b: Book(b.ops, b.beats + 1))


# ============================================================================ the exercise ======

CLUSTER = Cluster(seeds=["n1"], heartbeat=0.2, suspect_after=1, dead_after=1)
NODE_OPTIONS: dict[str, Any] = {"ask_timeout": 2.0, "write_timeout": 1.0}
KEYS = ("acct0", "acct1")
SCHEDULED = "acct0"
CONVERGED = 2.0
FAULTS_FROM = 3.0
SETTLE = 10.0
"""From the heal to the liveness phase: restarted nodes are declared alive (a few heartbeats), wait out the
rejoin grace (write_timeout + 1 s) and pull their replicas (handoff); 10 s covers that more than twice."""
FIRE_GAP = 3.0
"""After SETTLE the 1 s schedule fires at least once in every 3 s window (three periods without a beat: it stopped)."""
LIVE_FOR = 15.0
SEEDS = int(os.environ.get("WIDE_SEEDS", "2"))


def _up(world: sim.World) -> list[str]:
    return [n for n, node in world.nodes.items() if node.status == "up"]


def _ask(world: sim.World, node: str, key: str, message: Any, done: Any) -> None:
    target = world.results.get("actor", wide_book)

    async def client(system: ActorSystem) -> Any:
        try:
            return await system.ref(target, key).ask(message)
        except Exception as exc:  # a failed ask is not acknowledged: it may or may not have happened
            return exc

    task = world.spawn(node, client)
    task.add_done_callback(lambda t: None if t.cancelled() else done(t.result()))


def _load(world: sim.World, heal_at: float) -> Generator[simpy.Event, Any, None]:
    """Arm the schedule, then every 0.3 s one Add on the next node that is up, until the heal."""
    yield world.timeout(CONVERGED)
    world.process(_arm(world, heal_at))
    yield world.timeout(FAULTS_FROM - CONVERGED - 0.5)
    op = 0
    while world.now < heal_at:
        up = _up(world)
        if up:
            node, key = up[op % len(up)], KEYS[op % len(KEYS)]
            asked = world.now

            def acked(result: Any, op: int = op, key: str = key, node: str = node, asked: float = asked) -> None:
                if result == op:
                    world.results["acked"].append((op, key, node, asked, world.now))

            _ask(world, node, key, Add(op), acked)
            op += 1
        yield world.timeout(0.3)


def _arm(world: sim.World, heal_at: float) -> Generator[simpy.Event, Any, None]:
    """Arm the schedule, asking again every 2.5 s (from the next node up) until one Arm is answered: a user's retry."""
    attempt = 0
    while world.results.get("armed") != 0 and world.now < heal_at:
        up = _up(world)
        if up:
            _ask(world, up[attempt % len(up)], SCHEDULED, Arm(1.0), lambda r: world.results.__setitem__("armed", r))
        attempt += 1
        yield world.timeout(2.5)


def exercise(world: sim.World, heal_at: float, actor: Any = wide_book) -> None:
    """Load under the world's plan until ``heal_at``, heal every fault, then the liveness phase and the final reads."""
    world.results.update(acked=[], live={}, final={}, durable=[actor.name], heal_at=heal_at, actor=actor)
    world.process(_load(world, heal_at))
    world.run(until=heal_at)
    heal_all(world)
    live_from = heal_at + SETTLE
    world.run(until=live_from)
    for i, node in enumerate(world.nodes):  # quorum regained: a write asked on every node is answered
        _ask(world, node, KEYS[i % len(KEYS)], Add(-1 - i), lambda r, node=node: world.results["live"].__setitem__(node, r))
    world.run(until=live_from + LIVE_FOR)
    for key in KEYS:
        _ask(world, "n1", key, Look(), lambda r, key=key: world.results["final"].__setitem__(key, r))
    world.run(until=live_from + LIVE_FOR + 4.0)


def acked_ops_kept(world: sim.World) -> None:
    """Every Add whose ask was answered is in its key's log read back (a confirmed Look) after the heal."""
    final = world.results["final"]
    for key in KEYS:
        book = final.get(key)
        if not isinstance(book, Book):
            raise CheckFailed("acked_ops_kept", f"{key}: the final Look was not answered after the heal: {book!r}")
        lost = [(op, node, round(asked, 3), round(at, 3)) for op, k, node, asked, at in world.results["acked"] if k == key and op not in book.ops]
        if lost:
            raise CheckFailed("acked_ops_kept", f"{key}: {len(lost)} acknowledged op(s) missing after the heal, first (op, asked on, asked at, acked at): {lost[:5]}")


def ops_at_most_once(world: sim.World) -> None:
    """No Add is applied twice (delivery is at most once: REFERENCE.md "Guarantees"; a client asks each op once)."""
    for key, book in world.results["final"].items():
        if isinstance(book, Book) and len(set(book.ops)) != len(book.ops):
            twice = sorted({o for o in book.ops if book.ops.count(o) > 1})
            raise CheckFailed("ops_at_most_once", f"{key}: {len(twice)} op(s) applied more than once, first: {twice[:6]}")


def quorum_regained(world: sim.World) -> None:
    """A write asked on every node SETTLE s after the heal is answered (the cluster has a quorum again)."""
    live = world.results["live"]
    bad = {n: (type(r).__name__ if isinstance(r, BaseException) else r) for n, r in ((n, live.get(n, "no answer")) for n in world.nodes) if not isinstance(r, int)}
    if bad:
        raise CheckFailed("quorum_regained", f"writes asked {SETTLE:g} s after the heal were not answered: {bad}")


def schedule_lives(world: sim.World) -> None:
    """The 1 s schedule fires in every FIRE_GAP window from SETTLE s after the heal to the end of the run."""
    if world.results.get("armed") != 0:
        raise CheckFailed("schedule_lives", f"{SCHEDULED}: no Arm was answered before the heal (asked every 2.5 s): {world.results.get('armed')!r}")
    live_from = world.results["heal_at"] + SETTLE
    end = live_from + LIVE_FOR
    fired = sorted(r.t for r in world.trace.of("schedule.fired") if r.get("key") == SCHEDULED and r.t >= live_from - FIRE_GAP)
    t = live_from
    while t + FIRE_GAP <= end:
        if not any(t <= f < t + FIRE_GAP for f in fired):
            last = max((f for f in fired if f < t), default=None)
            raise CheckFailed("schedule_lives", f"{SCHEDULED}: no firing in [{t:.1f}, {t + FIRE_GAP:.1f}) s after the heal at {world.results['heal_at']:g} s (last before: {last})")
        t += 1.0


CHECKS = (
    sim.checks.epochs_only_grow,
    sim.checks.single_writer_per_epoch,
    sim.checks.owed_writes_found,
    sim.checks.never_early,
    sim.checks.no_burst,
    acked_ops_kept,
    ops_at_most_once,
    quorum_regained,
    schedule_lives,
)


def failures(world: sim.World, checks: tuple[Any, ...] = CHECKS) -> list[str]:
    """Every check's failure (all of them, not only the first: a sweep wants to see each kind)."""
    found = []
    for check in checks:
        try:
            check(world)
        except CheckFailed as exc:
            found.append(str(exc))
    return found


def check_all(world: sim.World, checks: tuple[Any, ...] = CHECKS) -> None:
    found = failures(world, checks)
    assert not found, "\n".join(found)


# ============================================================================ running a plan ======


def run_plan(seed: int, nodes: int, plan: FaultPlan, heal_at: float, *extra: Any, actor: Any = wide_book) -> sim.World:
    """A world of ``nodes`` cluster nodes with ``plan`` (and ``extra`` simpy processes) applied, exercised to the end (``with`` it)."""
    world = sim.World(seed)
    for i in range(1, nodes + 1):
        world.add_node(f"n{i}", cluster=CLUSTER, **NODE_OPTIONS)
    plan.apply(world)
    for make in extra:
        world.process(make(world))
    exercise(world, heal_at, actor)
    return world


def _after_row(kind: str, node: str | None, action: Any, *, after: float = 0.0, delay: float = 0.0, nth: int = 1) -> Any:
    """A simpy process maker: when the ``nth`` ``kind`` row (on ``node``, any if None) after ``after`` s appears, wait ``delay`` s, then ``action(world, row)``."""

    def process(world: sim.World) -> Generator[simpy.Event, Any, None]:
        seen, count = 0, 0
        while True:
            yield world.timeout(0.0005)
            rows = world.trace.rows
            while seen < len(rows):
                row = rows[seen]
                seen += 1
                if row.kind == kind and (node is None or row.node == node) and row.t > after:
                    count += 1
                    if count == nth:
                        if delay:
                            yield world.timeout(delay)
                        action(world, row)
                        return

    return process


HEAL = 120.0
MAX_FAULTS = 10


def _space(nodes: int) -> Any:
    """The sweep's space: every drawable kind, up to MAX_FAULTS faults in [FAULTS_FROM, HEAL - 1) s, disks kept."""
    from sim.testing import PlanSpace

    return PlanSpace.of(nodes, duration=HEAL - FAULTS_FROM - 1.0, start=FAULTS_FROM, kinds=DRAWABLE_KINDS, max_faults=MAX_FAULTS, wipe=False)


def _plan_rng(seed: int) -> Any:
    """The stream the pytest plugin draws a seed's plan from (so a seed here is the plugin's seed)."""
    import random

    return random.Random(f"{seed}:pytest:plan")


OWNER3 = "n3"  # acct0's first owner on three nodes (the ring of n1..n3; every seed)
OWNER5 = "n4"  # and on five


# ============================================================================ findings (xfail) ======


def test_a_duplicated_frame_does_not_run_a_message_twice() -> None:
    """A network-duplicated Deliver of an ask to the owner is applied once (REFERENCE.md: at-most-once delivery)."""
    from sim.faults import Duplicate

    plan = FaultPlan.of(Duplicate(at=5.0, p=1.0, duration=5.0, links_of=("n1", "n2", "n3"), delay=0.1))
    with sim.World(0) as world:
        for name in ("n1", "n2", "n3"):
            world.add_node(name, cluster=CLUSTER, **NODE_OPTIONS)
        plan.apply(world)
        acked: list[Any] = []

        def script(world: sim.World) -> Generator[simpy.Event, Any, None]:
            yield world.timeout(3.0)
            assert world.system("n1").placement(wide_book, "acct0").owner == OWNER3
            for i in range(10):
                _ask(world, ("n1", "n2")[i % 2], "acct0", Add(i), acked.append)
                yield world.timeout(0.5)
            _ask(world, OWNER3, "acct0", Look(), lambda r: world.results.__setitem__("final", r))

        world.process(script(world))
        world.run(until=15.0)
        assert acked == list(range(10))
        assert world.results["final"].ops == tuple(range(10))


@pytest.mark.xfail(strict=True, reason=(
    "finding: after a forward clock step on a key's owner is corrected (heal_all steps it back), its persisted 1 s "
    "schedule stays silent for the size of the step. Seed 0, 3 nodes, plan clock_step(n3,+100s)@10, heal at 30: at "
    "10.007 s n3 catches up (skipped=100) and writes next_us = its stepped now + 1 s; heal_all steps n3 back 100 s at 30 s; "
    "no schedule.fired row from 30 s until ~130 s (never_early waits for the stored due). Found by the sweep, 3 nodes, "
    "seed 5 (clock_step(n3,+101.112s)@87.042, heal at 120: no firing after 120 s)"))
def test_a_schedule_fires_again_soon_after_a_forward_step_is_corrected() -> None:
    """A 1 s schedule whose owner's clock jumped forward and was corrected fires within FIRE_GAP windows after the heal."""
    with run_plan(0, 3, FaultPlan.of(ClockStep(at=10.0, node=OWNER3, seconds=100.0)), 30.0) as world:
        assert failures(world, (schedule_lives,)) == []


def test_sweep_seed_8_three_nodes() -> None:
    """The sweep's seed 8 on three nodes (120 s of faults, max 10) passes every check."""
    with run_plan(8, 3, _space(3).draw(_plan_rng(8)), HEAL) as world:
        check_all(world)


# ============================================================================ the sweeps (plugin) ======

_SWEEP = {"until": HEAL, "start": FAULTS_FROM, "cluster": CLUSTER, "node_options": NODE_OPTIONS}


@pytest.mark.sim(seeds=SEEDS, nodes=3, faults=fault_plans(3, duration=HEAL - FAULTS_FROM - 1.0, start=FAULTS_FROM, kinds=DRAWABLE_KINDS, max_faults=MAX_FAULTS, wipe=False), **_SWEEP)
def test_sweep_three_nodes(world: sim.World) -> None:
    """Three nodes, up to 10 faults of every kind over 120 s, disks kept: every safety and liveness check holds after the heal."""
    exercise(world, HEAL)
    check_all(world)


@pytest.mark.sim(seeds=SEEDS, nodes=5, faults=fault_plans(5, duration=HEAL - FAULTS_FROM - 1.0, start=FAULTS_FROM, kinds=DRAWABLE_KINDS, max_faults=MAX_FAULTS, wipe=False), **_SWEEP)
def test_sweep_five_nodes(world: sim.World) -> None:
    """Five nodes, the same space: every safety and liveness check holds after the heal."""
    exercise(world, HEAL)
    check_all(world)


# ============================================================================ hand-built plans ======


def _crash_restart(node: str, down: float, wipe: bool = False) -> Any:
    def act(world: sim.World, row: Any) -> None:
        world.crash(node)

        def later(world: sim.World) -> Generator[simpy.Event, Any, None]:
            yield world.timeout(down)
            world.restart(node, wipe_disk=wipe)

        world.process(later(world))

    return act


_WIPED_N2 = FaultPlan.of(Crash(at=10, node="n2"), Restart(at=14, node="n2", wipe=True))
HAND: dict[str, tuple[int, FaultPlan, float, tuple[Any, ...]]] = {
    # a crash during a partition during clock steps: n3 (acct0's owner) cut off alone, n2 down inside the cut (no quorum anywhere)
    "overlap-3": (3, FaultPlan.of(
        ClockStep(at=8, node="n1", seconds=-20), Partition(at=10, a=("n3",), b=("n1", "n2"), duration=15),
        ClockStep(at=12, node="n3", seconds=2.5), Crash(at=14, node="n2"), Restart(at=19, node="n2"), ClockStep(at=30, node="n1", seconds=20)), 40.0, ()),
    "overlap-5": (5, FaultPlan.of(
        ClockStep(at=8, node="n4", seconds=-30), Partition(at=10, a=("n4", "n5"), b=("n1", "n2", "n3"), duration=15),
        ClockStep(at=12, node="n2", seconds=2.5), Crash(at=14, node="n1"), Crash(at=15, node="n3"), Restart(at=20, node="n1"), Restart(at=21, node="n3")), 40.0, ()),
    # restarts during a handoff: n2 comes back wiped at 14 s; the moment its handoff starts, it crashes again (disk kept or
    # wiped), or one of the replicas it pulls from crashes
    "handoff-crash-self": (3, _WIPED_N2, 40.0, (_after_row("handoff.started", "n2", _crash_restart("n2", 1.0), after=12),)),
    "handoff-crash-self-wiped": (3, _WIPED_N2, 40.0, (_after_row("handoff.started", "n2", _crash_restart("n2", 1.0, wipe=True), after=12, delay=0.002),)),
    "handoff-crash-source": (3, _WIPED_N2, 40.0, (_after_row("handoff.started", "n2", _crash_restart(OWNER3, 2.0), after=12),)),
    "handoff-crash-source-5": (5, _WIPED_N2, 40.0, (_after_row("handoff.started", "n2", _crash_restart(OWNER5, 2.0), after=12),)),
    # every replica paused: at once, staggered, and every node of five for 25 s
    "pause-all-3": (3, FaultPlan.of(*(Pause(at=10, node=n, duration=6) for n in ("n1", "n2", "n3"))), 40.0, ()),
    "pause-staggered-3": (3, FaultPlan.of(*(Pause(at=10 + 2 * i, node=n, duration=8) for i, n in enumerate(("n1", "n2", "n3")))), 40.0, ()),
    "pause-all-5-long": (5, FaultPlan.of(*(Pause(at=10 + 0.3 * i, node=f"n{i}", duration=25) for i in range(1, 6))), 60.0, ()),
}


@pytest.mark.parametrize("name", list(HAND))
def test_hand_built_plan(name: str) -> None:
    """Overlapping faults, restarts during a handoff, every replica paused: every check holds after the heal."""
    nodes, plan, heal_at, extra = HAND[name]
    with run_plan(0, nodes, plan, heal_at, *extra) as world:
        if name.startswith("handoff"):  # the aimed crash really fell inside n2's handoff after its wiped restart
            started = [r for r in world.trace.of("handoff.started", node="n2") if r.t > 12]
            assert started and any(r.kind == "fault.crash" and r.t - started[0].t < 0.01 for r in world.trace.of("fault.crash")), name
        check_all(world)


# ============================================================================ the checks catch a planted bug ======


@actor(initial=Book(), durable="write")
async def forgetful_book(ctx: Context[Book, Add | Look | Arm | Beat]) -> None:
    """wide_book with a planted bug: every seventh Add is acknowledged and never written."""
    async for msg in ctx.inbox:
        match msg:
            case Add(op=op, reply_to=reply_to):
                if op % 7 != 3:
                    await ctx.state.update(lambda b: Book(b.ops + (op,), b.beats))
                reply_to.tell(op)
            case Look(reply_to=reply_to):
                reply_to.tell(await ctx.state.update(lambda b: b))
            case Arm(every=every, reply_to=reply_to):
                await ctx.schedule("beat", timedelta(seconds=every), timedelta(seconds=every), Beat())
                reply_to.tell(0)
            case Beat():
                await ctx.state.update(lambda b: Book(b.ops, b.beats + 1))


def test_acked_ops_kept_catches_an_acknowledged_op_never_written() -> None:
    """With no fault at all, acked_ops_kept fails on forgetful_book (ops 10, 24, 38, 52 of acct0 acked, never written) and passes on wide_book."""
    with run_plan(0, 3, FaultPlan(()), 20.0, actor=forgetful_book) as world:
        found = failures(world)
    assert len(found) == 1 and found[0].startswith("acked_ops_kept: acct0: 4 acknowledged op(s) missing") and "[(10, 'n2', 5.5," in found[0], found
    with run_plan(0, 3, FaultPlan(()), 20.0) as world:
        assert failures(world) == []
