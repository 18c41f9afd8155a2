"""Rolling restart: every node of the cluster restarted in turn under client load; no confirmed write is lost.

A rolling restart is what operators do for an upgrade: one node at a time goes down (a crash
or an orderly stop), comes back a few seconds later as a new incarnation with the same disk
and an *empty* replica, and the next node goes only once the previous one has rejoined. The
replicas are in memory, so the only thing that carries a confirmed write across the roll is
the quorum: a write confirmed on W replicas must still be on one of them when the next owner
reads R. The handoff (``casty.protocol.handoff``) is what makes that true: the restarted node
stays out of the protocol for its rejoin grace (its peers tell it of its previous life),
pulls every other node's store, and answers blank (never
counted in a read quorum) until it is ready for a key.

When the roll goes on: once the restarted node's sync round has ended (its ``handoff.ended``
row) and every live node's latest sync round has ended too (an orderly stop and the return
change the ring, and a node new to a key's replicas pulls it), plus ``SETTLE``. By then the
restarted node holds every write confirmed before the peers answered it (they were on a
quorum of the others) and has acked every write since it opened, so each confirmed write is
on all the live replicas of its key again, and taking one more node down leaves a quorum of
them. Going earlier (a fixed gap shorter than the grace) would stack two losses of memory on
one key: nothing could be owed then.

Throughout, clients on random live nodes send confirmed increments to a few counters
(``cl_counter``), and one key (``cl_ticker``) keeps a persisted 1 s schedule that must keep
firing across every owner change the roll causes.

Two variants: ``rolling-restart`` (5 nodes) and ``rolling-restart-3`` (3 nodes). The order of
the nodes, which kind of stop comes first (crash and orderly stop then alternate), how long
each node stays down and the client load are drawn from the seed.
"""

from __future__ import annotations

from collections.abc import Generator
from datetime import timedelta
from typing import Any

import simpy

from casty.cluster.config import Cluster

from ..checks import Check, never_early, no_burst, occurrences_accounted_for
from ..trace import Row
from ..world import World
from . import scenario
from .cluster import CLUSTER_CHECKS, CONVERGED, Arm, _ask, _confirm, _expect, _fired, _read_final, cl_counter, cl_ticker, confirmed_counts_kept

COUNTERS = ("c0", "c1", "c2", "c3")
TICKER_KEY = "sched"
TICK_EVERY = 1.0
WRITE_TIMEOUT = 1.0
HEARTBEAT, SUSPECT_AFTER, DEAD_AFTER = 0.2, 1.0, 1.0
GRACE = WRITE_TIMEOUT + 1.0  # Cluster.rejoin_grace left at its default: the system's write_timeout + 1 s
ROLL_START = CONVERGED + 3.0  # the load and the schedule run for 3 s before the first node goes down
DOWN = (1.0, 4.0)  # s a node stays down (uniform)
REJOIN_LIMIT = 15.0  # s to wait for a restarted node's handoff before the roll goes on anyway (and the check fails)
SETTLE = 0.5  # s between a node's rejoin and the next node's stop: a few heartbeats, so every member has seen it alive
LOAD_TAIL = 3.0  # s of load after the last node rejoined
QUIET = 8.0  # s of quiet before the final reads: the last owners' writes and sweeps are over
GAP_BOUND = TICK_EVERY + SUSPECT_AFTER + DEAD_AFTER + GRACE + 0.5
"""The longest a schedule may go without a firing (true time between two firings), 5.5 s. The worst case is its owner
crashing just before a firing (one period since the last) and restarting just before its peers declare it dead
(``suspect_after`` + ``dead_after`` after they last heard it): nobody took the key over, the owner is alive again
and still the key's owner, but it resumes the key only once its replica has opened (after the rejoin grace, when it
learned of its previous life) and pulled the key's ``@active``; plus 0.5 s for the sync round, the acquisition and
its write-back (a few ms here). Every other path is shorter: a crash detected first hands the key over at about
``suspect_after`` + ``dead_after``; an orderly stop hands it over at once; a restarted owner takes the key back from
the interim owner (which ends it at once) within the grace plus the sync. Measured over seeds 0-199: at most 4.68 s
on 5 nodes (seed 76: 0.99 s since the last firing + 1.68 s down + 2.0 s grace + 0.01 s) and 4.73 s on 3 nodes (seed
41: 0.99 + 1.73 + 2.0 + 0.01), both this worst case; medians 3.1 s and 2.8 s."""


# =================================================================== the roll =====


class _Rounds:
    """Reads the trace as it grows: per node, in its current incarnation, the last sync round begun and whether it ended."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.scanned = 0
        self.started: dict[str, int] = {}
        self.ended: dict[str, int] = {}

    def scan(self) -> None:
        rows = self.world.trace.rows
        while self.scanned < len(rows):
            row = rows[self.scanned]
            self.scanned += 1
            if row.kind == "node.started":
                self.started.pop(row.node, None)
                self.ended.pop(row.node, None)
            elif row.kind == "handoff.started":
                self.started[row.node] = int(row.get("round"))
            elif row.kind == "handoff.ended":
                self.ended[row.node] = int(row.get("round"))

    def rejoined(self, node: str) -> bool:
        """``node`` (restarted) has ended a sync round in this incarnation, and no node up has a round still going."""
        if node not in self.ended:
            return False
        up = [n for n, member in self.world.nodes.items() if member.status == "up"]
        return all(self.started.get(n) == self.ended.get(n) for n in up)


def _roll(world: World, order: list[str], first_kind: str, downs: list[float]) -> Generator[simpy.Event, Any, None]:
    """Take each node of ``order`` down (crash and orderly stop alternate), restart it, wait until it has rejoined."""
    rounds = _Rounds(world)
    roll: list[dict[str, Any]] = world.results.setdefault("roll", [])
    yield world.timeout(ROLL_START - world.now)
    kinds = ("crash", "stop") if first_kind == "crash" else ("stop", "crash")
    for i, (node, down) in enumerate(zip(order, downs, strict=True)):
        kind = kinds[i % 2]
        entry: dict[str, Any] = {"node": node, "kind": kind, "down": world.now}
        roll.append(entry)
        if kind == "crash":
            world.crash(node)
        else:
            world.stop(node)
        yield world.timeout(down)
        entry["up"] = world.now
        world.restart(node)
        deadline = world.now + REJOIN_LIMIT
        while True:
            yield world.timeout(0.01)
            rounds.scan()
            if rounds.rejoined(node):
                entry["rejoined"] = world.now
                break
            if world.now >= deadline:
                world.note(node, "did not rejoin in time; the roll goes on", limit=REJOIN_LIMIT)
                break
        yield world.timeout(SETTLE)
    world.results["roll_end"] = world.now


def _setup(world: World, nodes: tuple[str, ...]) -> None:
    """The nodes, the roll (drawn from the seed), the client load, the schedule and the final reads."""
    cluster = Cluster(seeds=list(nodes[:2]), heartbeat=HEARTBEAT, suspect_after=SUSPECT_AFTER, dead_after=DEAD_AFTER)
    for name in nodes:
        world.add_node(name, cluster=cluster, ask_timeout=2.0, write_timeout=WRITE_TIMEOUT)
    plan = world.rng("plan", "roll")
    order = list(nodes)
    plan.shuffle(order)
    first_kind = plan.choice(("crash", "stop"))
    downs = [plan.uniform(*DOWN) for _ in order]
    world.results["plan"] = {"order": order, "first": first_kind, "downs": downs}
    load = world.rng("plan", "load")
    roll = world.process(_roll(world, order, first_kind, downs))

    def up() -> list[str]:
        return [n for n in nodes if world.node(n).status == "up"]

    def clients(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(CONVERGED)
        _ask(world, load.choice(up()), cl_ticker, TICKER_KEY, Arm(TICK_EVERY), "armed")
        sent = 0
        while not roll.triggered or world.now < float(world.results["roll_end"]) + LOAD_TAIL:
            yield world.timeout(load.uniform(0.05, 0.3))
            _confirm(world, load.choice(up()), load.choice(COUNTERS), f"incr:{sent}")
            sent += 1
        world.results["sent"] = sent
        yield world.timeout(QUIET)
        world.results["read_at"] = world.now
        for key in COUNTERS:
            _read_final(world, key)

    world.process(clients(world))


# ==================================================================== checks =====


def _roll_rows(world: World) -> list[dict[str, Any]]:
    roll = world.results.get("roll")
    _expect("rolling", isinstance(roll, list) and bool(roll), "the roll never started")
    assert isinstance(roll, list)
    return roll


def _every_node_restarted_once(world: World) -> None:
    """The roll took every node exactly once, one at a time: each went down (crash or orderly stop), came back as
    incarnation 2, and rejoined (its sync round ended) before the next node went down; both kinds of stop were used."""
    check = "every_node_restarted_once"
    roll = _roll_rows(world)
    nodes = sorted(world.nodes)
    _expect(check, sorted(e["node"] for e in roll) == nodes, f"the roll took {[e['node'] for e in roll]}, not every node once")
    _expect(check, {e["kind"] for e in roll} == {"crash", "stop"} or len(roll) < 2, f"only {roll[0]['kind']}es were used")
    for e in roll:
        _expect(check, "rejoined" in e, f"{e['node']} ({e['kind']} at t={e['down']:.3f}s) did not rejoin within {REJOIN_LIMIT} s of its restart")
    for before, after in zip(roll, roll[1:], strict=False):
        _expect(check, after["down"] > before["rejoined"], f"{after['node']} went down at t={after['down']:.3f}s, before {before['node']} rejoined")
    for name in nodes:
        downs = world.trace.of("fault.crash", "node.stopped", node=name)
        restarts = world.trace.of("fault.restart", node=name)
        _expect(check, len(downs) == 1 and len(restarts) == 1, f"{name}: {len(downs)} stop(s) and {len(restarts)} restart(s), expected one each")
        _expect(check, restarts[0].get("incarnation") == 2 and restarts[0].t_ns > downs[0].t_ns, f"{name}: the restart is not its second incarnation after the stop")
    _expect(check, "roll_end" in world.results and "read_at" in world.results, "the roll or the final reads did not happen in the run's time")


def _restarted_nodes_handed_off(world: World) -> None:
    """Each restarted node's handoff is in the trace: its replica opened (``handoff.started`` reason ``opened``) in its
    new incarnation no sooner than the rejoin grace after the restart (its peers remembered its previous life, after a
    crash as after an orderly stop, and told it: ``Heartbeat.previous``), the round asked every other node of the ring
    and ended, and the node then held keys it had pulled (its memory had been empty).

    Before ``Heartbeat.previous`` (main, efa8309) this check failed on seed 0: the restarted node learned of its
    previous life only if the first heartbeat it heard still carried the old record, and its seed, which had merged
    the new incarnation from the node's hello, often spoke first (over seeds 0-199, 551 of 1000 restarts on 5 nodes and
    377 of 600 on 3 opened 0.002-0.2 s after the restart). The seconds from restart to opening are kept in
    ``world.results["open_delays"]``."""
    check = "restarted_nodes_handed_off"
    delays: dict[str, float] = world.results.setdefault("open_delays", {})
    for e in _roll_rows(world):
        node = e["node"]
        restart = world.trace.of("fault.restart", node=node)[0]
        started = [r for r in world.trace.of("handoff.started", node=node, reason="opened") if r.t_ns > restart.t_ns]
        _expect(check, bool(started), f"{node}: no handoff.started (opened) after its restart at t={restart.t:.3f}s")
        opened = started[0]
        delays[node] = opened.t - restart.t
        _expect(check, opened.t - restart.t >= GRACE - 1e-6, f"{node}: its replica opened {opened.t - restart.t:.3f}s after its restart ({e['kind']}), inside the {GRACE}s rejoin grace")
        others = sorted(n for n in world.nodes if n != node)
        _expect(check, sorted(opened.get("peers")) == others, f"{node}: the opening round asked {opened.get('peers')}, not every other node {others}")
        ended = [r for r in world.trace.of("handoff.ended", node=node) if r.t_ns >= opened.t_ns]
        _expect(check, bool(ended), f"{node}: the sync round opened at t={opened.t:.3f}s never ended")
        _expect(check, int(ended[0].get("keys")) > 0, f"{node}: its first sync round after the restart ended holding no key")


def _schedule_kept_firing(world: World) -> None:
    """The ticker's schedule fired across the whole roll: its first firing within a period or so of the arm, its last
    after the roll ended, and no two consecutive firings further apart (true time) than ``GAP_BOUND``."""
    check = "schedule_kept_firing"
    fired = sorted(_fired(world, TICKER_KEY), key=lambda r: r.t_ns)
    _expect(check, bool(fired), "the schedule never fired")
    roll_end = world.results.get("roll_end")
    _expect(check, isinstance(roll_end, float) and fired[-1].t > roll_end, f"no firing after the roll ended (t={roll_end})")
    _expect(check, fired[0].t <= CONVERGED + TICK_EVERY + 1.0, f"the first firing came only at t={fired[0].t:.3f}s")
    worst: tuple[float, Row, Row] | None = None
    for before, after in zip(fired, fired[1:], strict=False):
        gap = after.t - before.t
        if worst is None or gap > worst[0]:
            worst = (gap, before, after)
    world.results["longest_gap"] = worst[0] if worst else 0.0
    if worst is not None:
        gap, before, after = worst
        _expect(check, gap <= GAP_BOUND, f"no firing for {gap:.3f}s between t={before.t:.3f}s on {before.node} and t={after.t:.3f}s on {after.node} (bound {GAP_BOUND}s)")


def _confirmed_increments_kept(world: World) -> None:
    """No confirmed increment is lost across the roll: per counter, the confirmed answers are distinct counts and the
    final count (read with ``Settle``, a confirmed write, after the quiet time) is >= their number and their greatest.

    The load is real: increments were confirmed while each node was down or rejoining."""
    check = "confirmed_increments_kept"
    confirmed_counts_kept(world, COUNTERS, check)
    counter = cl_counter.name
    writes = [r.t for r in world.trace.of("write.confirmed", actor=counter)]
    for e in _roll_rows(world):
        during = [t for t in writes if e["down"] <= t <= e.get("rejoined", e["down"])]
        _expect(check, bool(during), f"no increment was confirmed while {e['node']} was down or rejoining")


ROLLING_CHECKS: tuple[Check, ...] = (
    _confirmed_increments_kept,
    _every_node_restarted_once,
    _restarted_nodes_handed_off,
    _schedule_kept_firing,
    never_early,
    no_burst,
    occurrences_accounted_for,
    *CLUSTER_CHECKS,
)


@scenario(
    "rolling-restart",
    "5 nodes restarted one at a time (crash and orderly stop alternating) under client increments and a schedule; each rejoins by handoff before the next goes; no confirmed increment lost, the schedule keeps firing",
    until=timedelta(seconds=60),
    checks=ROLLING_CHECKS,
)
def rolling_restart(world: World) -> None:
    _setup(world, ("n1", "n2", "n3", "n4", "n5"))


@scenario(
    "rolling-restart-3",
    "rolling-restart on 3 nodes: every node is one of every key's replicas, so each restart empties a replica of every key",
    until=timedelta(seconds=50),
    checks=ROLLING_CHECKS,
)
def rolling_restart_3(world: World) -> None:
    _setup(world, ("n1", "n2", "n3"))
