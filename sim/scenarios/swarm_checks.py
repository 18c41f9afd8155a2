"""The swarm's checks, and its registration as the ``swarm`` scenario (``sim.scenarios.swarm`` holds the shape).

The setup, its actors, messages and constants stay in ``sim.scenarios.swarm`` (actor and message type names are
``module:qualname`` and appear in every trace: they do not move); this module reads what a run left behind
(``world.trace``, ``world.results``) against what the module docstring there says is owed, and registers the
scenario with them, so ``sim.scenarios`` loads it here, at the swarm's place in the ``list`` order.
"""

from __future__ import annotations

from datetime import timedelta

from ..checks import (
    CheckFailed,
    epochs_only_grow,
    kept_memory,
    memory_losses,
    never_early,
    no_burst,
    outages,
    owed_writes_found,
    repeats_and_misses_explained,
    replica_set,
    single_writer_per_epoch,
)
from ..world import World
from . import scenario
from .swarm import (
    BEAT,
    BEAT_LATE_US,
    COUNTERS,
    CRON_PERIOD_US,
    CRON_REFERENCE,
    DURABLE_COUNTERS,
    ERASED_MARGIN,
    FIRE_GAP,
    LATE,
    LIVE_FROM,
    LIVE_OPS_END,
    LOGS,
    OP_BOUND,
    READ_AT,
    SCHEDULED,
    UNTIL,
    WIDE_COUNTERS,
    Erase,
    Note,
    _counter,
    sw_log,
    sw_ticker,
    swarm,
)


def _expect(check: str, condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(check, message)


def _losses(world: World, key: str, version: int) -> dict[str, list[int]]:
    return memory_losses(world.trace, durable=key in DURABLE_COUNTERS, of=(_counter(key).name, key), version=version)


def _version_at(versions: list[tuple[int, int]], answered: float) -> int:
    """The version of the latest confirmed write of a key at or before an answer (the write the answer reports)."""
    at = round(answered * 1e9)
    return max((v for t, v in versions if t <= at), default=0)


def _replicas_of(world: World, actor_name: str, key: str) -> list[str]:
    replicas = replica_set(world, actor_name, key)
    _expect("swarm", bool(replicas), f"no replica set recorded for {actor_name}/{key}")
    return replicas


def owed_increments_kept(world: World) -> None:
    """Every owed client-confirmed increment is in the final count: per counter, the confirmed counts still owed at the
    final read (a majority of the key's replicas kept their memory from the answer to the read) are distinct, and the
    final count is >= the greatest of them and >= their number; and no read is taken back: an owed count a read
    (``Get``, answered from the owner's memory) answered is <= the final count."""
    check = "owed_increments_kept"
    read_ns = round(READ_AT * 1e9)
    for key in COUNTERS + WIDE_COUNTERS + DURABLE_COUNTERS:
        final = world.results.get(f"final:{key}")
        _expect(check, isinstance(final, int), f"{key}: the final count was not read: {final!r}")
        assert isinstance(final, int)
        actor_name = _counter(key).name
        replicas = _replicas_of(world, actor_name, key)
        down = outages(world.trace)
        versions = sorted((r.t_ns, int(r.get("version"))) for r in world.trace.of("write.confirmed", actor=actor_name, key=key))
        owed = [
            (answered, count)
            for _phase, k, _node, _asked, answered, count in world.results["ops"]
            if k == key and isinstance(count, int) and kept_memory(replicas, _losses(world, key, _version_at(versions, answered)), round(answered * 1e9), read_ns, down)
        ]
        counts = sorted(c for _, c in owed)
        _expect(check, len(set(counts)) == len(counts), f"{key}: one count was confirmed twice: {counts}")
        _expect(check, final >= max(counts, default=0), f"{key}: final count {final} < owed confirmed count {max(counts, default=0)}")
        _expect(check, final >= len(counts), f"{key}: final count {final} < {len(counts)} owed confirmed increments")
        for _phase, k, node, _asked, answered, seen, _message in world.results["reads"]:
            if k == key and isinstance(seen, int) and seen > final:
                if kept_memory(replicas, _losses(world, key, _version_at(versions, answered)), round(answered * 1e9), read_ns, down):
                    raise CheckFailed(check, f"{key}: a read on {node} answered {seen} at t={answered:.6f}s, the final count is {final}: the read was taken back")


def deleted_stays_deleted(world: World) -> None:
    """A deleted log never comes back, and a failed run's late write never lands: once a delete of a log is confirmed,
    no answer to an operation asked after it holds a note confirmed before the delete was asked (``ERASED_MARGIN``
    before it, for frames the network held back), while the delete is owed (a majority of the log's replicas kept
    their memory from its confirmation to the ask, as for a write); no answer ever holds ``LATE``."""
    check = "deleted_stays_deleted"
    logs = world.results["logs"]
    losses = memory_losses(world.trace, durable=False)
    down = outages(world.trace)
    for key in LOGS:
        replicas = _replicas_of(world, sw_log.name, key)
        ops = [op for op in logs if op[1] == key]
        for _phase, _k, node, asked, answered, seen, message in ops:
            if isinstance(seen, tuple) and LATE in seen:
                raise CheckFailed(check, f"{key}: {type(message).__name__} on {node} at t={asked:.3f}s saw the late write of a failed run: {seen}")
        erased = [(asked, answered) for _p, _k, _n, asked, answered, seen, message in ops if isinstance(message, Erase) and seen == 0]
        for erase_asked, erase_answered in erased:
            before = {m.op for _p, _k, _n, _a, answered, seen, m in ops if isinstance(m, Note) and isinstance(seen, tuple) and answered < erase_asked - ERASED_MARGIN}
            for _phase, _k, node, asked, _answered, seen, message in ops:
                if asked > erase_answered and isinstance(seen, tuple):
                    back = sorted(before.intersection(seen))
                    if back and not kept_memory(replicas, losses, round(erase_answered * 1e9), round(asked * 1e9), down):
                        continue  # a majority of the log's replicas forgot the delete: a replica that missed it may be all that is left
                    _expect(check, not back, f"{key}: deleted at t={erase_answered:.3f}s, then {type(message).__name__} on {node} at t={asked:.3f}s saw notes {back} again: {seen}")


def node_schedules_keep_time(world: World) -> None:
    """Node schedules (the cron and every node's ``BEAT`` interval): never early on the node's clock; an interval tick
    late by a period or more catches up (its next tick is after now: no burst); no two ticks of one schedule at one
    instant on one node; in the liveness phase every interval tick is told within ``BEAT_LATE_US`` of its due time
    and every node's beat fires in every ``FIRE_GAP`` s window."""
    check = "node_schedules_keep_time"
    seen: set[tuple[str, str, int]] = set()
    beats: dict[str, list[float]] = {}
    live_ns = round(LIVE_FROM * 1e9)
    for row in world.trace.of("node_schedule.fired"):
        reference, now_us, tick_us = str(row.get("reference")), int(row.get("now_us")), int(row.get("tick_us"))
        _expect(check, now_us >= tick_us, f"{reference} on {row.node} told its tick {tick_us} early, at wall {now_us}")
        ident = (row.node, reference, row.t_ns)
        _expect(check, ident not in seen, f"{reference} on {row.node} told two ticks at t={row.t:.6f}s (a burst)")
        seen.add(ident)
        if row.get("schedule_kind") != "interval":
            continue
        after = row.get("next_us")
        _expect(check, after is None or int(after) > now_us, f"{reference} on {row.node} at t={row.t:.6f}s: next tick {after} is not after now {now_us} (no catch-up)")
        if row.t_ns >= live_ns:
            _expect(check, now_us - tick_us <= BEAT_LATE_US, f"{reference} on {row.node} at t={row.t:.3f}s told {(now_us - tick_us) / 1e6:.3f}s late with no fault left")
            if reference == BEAT:
                beats.setdefault(row.node, []).append(row.t)
    for node in world.results["nodes"]:
        edges = [LIVE_FROM, *beats.get(node, []), UNTIL]
        gaps = [(a, b) for a, b in zip(edges, edges[1:], strict=False) if b - a > FIRE_GAP]
        _expect(check, not gaps, f"{BEAT} on {node} did not fire from t={gaps[0][0]:.3f}s to t={gaps[0][1]:.3f}s" if gaps else "")


def operations_live(world: World) -> None:
    """In the liveness phase every client operation (increments, reads, log operations) is answered within
    ``OP_BOUND`` s, and the final reads succeed."""
    check = "operations_live"
    for _phase, key, node, asked, answered, outcome, message in (op for op in world.results["reads"] + world.results["logs"] if op[0] == "live"):
        _expect(check, not isinstance(outcome, str), f"{type(message).__name__} of {key} from {node} at t={asked:.3f}s failed: {outcome}")
        _expect(check, answered - asked <= OP_BOUND, f"{type(message).__name__} of {key} from {node} at t={asked:.3f}s took {answered - asked:.3f}s > {OP_BOUND:g}s")
    live = [op for op in world.results["ops"] if op[0] == "live"]
    expected = int((LIVE_OPS_END - LIVE_FROM) / 0.25)
    _expect(check, len(live) >= expected - 1, f"only {len(live)} of ~{expected} liveness operations finished")
    for _phase, key, node, asked, answered, outcome in live:
        _expect(check, isinstance(outcome, int), f"{key} from {node} at t={asked:.3f}s failed: {outcome}")
        _expect(check, answered - asked <= OP_BOUND, f"{key} from {node} at t={asked:.3f}s took {answered - asked:.3f}s > {OP_BOUND:g}s")


def schedules_live(world: World) -> None:
    """Every owed scheduled key fires in every ``FIRE_GAP`` s window of the liveness phase (an arming is owed if a
    majority of the key's replicas kept their memory from its confirmation to the liveness phase)."""
    check = "schedules_live"
    losses = memory_losses(world.trace, durable=False)
    live_ns = round(LIVE_FROM * 1e9)
    for key in SCHEDULED:
        armed = world.results["armed"].get(key)
        _expect(check, armed is not None and isinstance(armed[1], int), f"{key} was not armed: {armed!r}")
        assert armed is not None
        if not kept_memory(_replicas_of(world, sw_ticker.name, key), losses, round(armed[0] * 1e9), live_ns, outages(world.trace)):
            continue  # a majority of its replicas forgot: the schedule is not owed
        fired = sorted(r.t for r in world.trace.of("schedule.fired", actor=sw_ticker.name, key=key) if r.t >= LIVE_FROM)
        edges = [LIVE_FROM, *fired, UNTIL]
        gaps = [(a, b) for a, b in zip(edges, edges[1:], strict=False) if b - a > FIRE_GAP]
        _expect(check, not gaps, f"{key} did not fire from t={gaps[0][0]:.3f}s to t={gaps[0][1]:.3f}s (owed, every 1 s)" if gaps else "")


def cron_live(world: World) -> None:
    """Every cron tick of the liveness phase is told exactly once, cluster-wide."""
    check = "cron_live"
    start_us = world.epoch_us + round(LIVE_FROM * 1e6)
    end_us = world.epoch_us + round((UNTIL - 2.0) * 1e6)
    told: dict[int, list[str]] = {}
    for row in world.trace.of("node_schedule.fired", reference=CRON_REFERENCE):
        told.setdefault(int(row.get("tick_us")), []).append(row.node)
    first = start_us + (-start_us) % CRON_PERIOD_US
    for tick in range(first, end_us, CRON_PERIOD_US):
        nodes = told.get(tick, [])
        _expect(check, len(nodes) == 1, f"cron tick at t={(tick - world.epoch_us) / 1e6:.1f}s told {len(nodes)} time(s) {nodes}")


def _kept_rows(kind: str) -> bool:
    """Every row but the per-frame ``net.sent`` and ``net.delivered`` (counted only): no check reads them, and they are
    most of a swarm trace (a seed runs about twice as fast without them). Dropped frames stay rows."""
    return kind not in ("net.sent", "net.delivered")


SWARM_CHECKS = (
    epochs_only_grow,
    single_writer_per_epoch,
    owed_writes_found,
    never_early,
    no_burst,
    repeats_and_misses_explained,
    owed_increments_kept,
    deleted_stays_deleted,
    node_schedules_keep_time,
    operations_live,
    schedules_live,
    cron_live,
)


scenario(
    "swarm",
    "3-7 nodes (5 most often): a fault mix and plan drawn per seed (crashes of majorities, wipes, long pauses, clock steps back, flapping links, forged frames), then every fault healed: no owed write lost, every operation and schedule live again",
    until=timedelta(seconds=UNTIL),
    checks=SWARM_CHECKS,
    tags=("fault-plan",),
    keep=_kept_rows,
)(swarm)
