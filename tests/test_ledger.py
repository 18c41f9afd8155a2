"""The occurrence ledger (sim.ledger): exact classifications on hand-built traces and on real scenario runs."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from casty._core.schedules import catch_up
from sim import scenarios
from sim.checks import explain_occurrences
from sim.ledger import Entry, counts, ledger, misses, table
from sim.trace import Trace

START = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z in µs
S = 1_000_000
A = "app:ticker"


class Build:
    """A trace written by hand: rows at true time t seconds, the node's wall clock START + t (unless given)."""

    def __init__(self) -> None:
        self.trace = Trace()

    def add(self, t: float, node: str, kind: str, wall: int | None = None, **fields: Any) -> Build:
        self.trace.add(round(t * 1e9), node, START + round(t * S) if wall is None else wall, kind, fields)
        return self

    def armed(self, t: float, node: str, due: float, every: float | None, key: str = "k", name: str = "tick") -> Build:
        return self.add(t, node, "schedule.armed", actor=A, key=key, name=name, due_us=START + round(due * S), every_us=None if every is None else round(every * S))

    def fired(self, t: float, node: str, due: float, nxt: float | None, key: str = "k", name: str = "tick") -> Build:
        return self.add(t, node, "schedule.fired", actor=A, key=key, name=name, due_us=START + round(due * S), now_us=START + round(t * S), next_us=None if nxt is None else START + round(nxt * S))

    def caught_up(self, t: float, node: str, due: float, nxt: float, skipped: int, key: str = "k", name: str = "tick") -> Build:
        return self.add(t, node, "schedule.caught_up", actor=A, key=key, name=name, due_us=START + round(due * S), now_us=START + round(t * S), next_us=START + round(nxt * S), skipped=skipped)

    def started(self, t: float, node: str, key: str = "k") -> Build:
        return self.add(t, node, "activation.started", actor=A, key=key, lease=1, behavior=A, recovered=False, restart=0)

    def crash(self, t: float, node: str, key: str = "k", dropped: tuple[str, ...] = ()) -> Build:
        self.add(t, node, "fault.crash", incarnation=1, unsynced_lost=0)
        self.add(t, node, "activation.ended", actor=A, key=key, lease=1, reason="crashed")
        for message in dropped:
            self.add(t, node, "message.dropped", actor=A, key=key, message=message, reason="failed: Unavailable('stopped')")
        return self


def statuses(entries: list[Entry]) -> list[tuple[float | None, str]]:
    return [(None if e.due_us is None else (e.due_us - START) / S, e.status) for e in entries]


# --- persisted schedules, hand-built ------------------------------------------------------------


def test_on_time_late_and_caught_up_with_each_skipped_occurrence_missed() -> None:
    """Firings at 10 (on time), 20.5 (late 0.5 s) and 57 for due 30 (caught up, 2 skipped: 40 and 50 missed by that catch-up)."""
    b = Build().started(0, "n1").armed(0, "n1", 10, 10)
    b.fired(10, "n1", 10, 20).fired(20.5, "n1", 20, 30).fired(57, "n1", 30, 60).caught_up(57, "n1", 30, 60, 2).fired(60, "n1", 60, 70)
    entries = ledger(b.trace)
    assert statuses(entries) == [(10, "on-time"), (20, "late"), (30, "caught-up"), (40, "missed"), (50, "missed"), (60, "on-time")]
    assert entries[1].late_us == 500_000 and entries[1].why == "late by 0.500s"
    assert (entries[2].late_us, entries[2].skipped) == (27 * S, 2)
    assert entries[3].why == entries[4].why == "skipped by the catch-up of due 2026-01-01T00:00:30+00:00 on n1 at t=57.000s"
    assert counts(entries) == {"on-time": 2, "late": 1, "caught-up": 1, "repeated": 0, "missed": 2, "delivered": 0}


def test_tolerance_decides_on_time_or_late() -> None:
    """A firing 50 ms late is on time under the default 100 ms tolerance, late under a 10 ms one."""
    b = Build().started(0, "n1").armed(0, "n1", 10, None).fired(10.05, "n1", 10, None)
    assert statuses(ledger(b.trace)) == [(10, "on-time")]
    assert statuses(ledger(b.trace, tolerance=timedelta(milliseconds=10))) == [(10, "late")]
    with pytest.raises(ValueError, match="tolerance must be a non-negative timedelta"):
        ledger(b.trace, tolerance=timedelta(seconds=-1))


def test_repeat_across_owners_names_the_crash_and_the_new_owner() -> None:
    """Due 10 fired on n3, n3 crashes, n2 acquires the key and fires due 10 again: repeated, with both causes."""
    b = Build().started(0, "n3").armed(0, "n3", 10, 10).fired(10, "n3", 10, 20).crash(10.5, "n3")
    b.add(12, "n2", "epoch.acquired", actor=A, key="k", epoch_round=2, epoch_node="n2#0", version=3, found=2)
    b.started(12, "n2").fired(12, "n2", 10, 20).fired(20, "n2", 20, 30)
    entries = ledger(b.trace)
    assert statuses(entries) == [(10, "repeated"), (20, "on-time")]
    assert entries[0].why == (
        "fired 2 times (n3 at t=10.000s, n2 at t=12.000s); fault.crash of n3 at t=10.500s; owner changed: epoch.acquired on n2 at t=12.000s"
    )
    assert [a.node for a in entries[0].attempts] == ["n3", "n2"]


def test_message_dropped_when_its_node_crashes_is_lost_in_flight() -> None:
    """Fired at 20, the node crashes at 20.2 and the Tick is dropped: due 20 is missed, lost in flight (ownership-miss's shape)."""
    b = Build().started(0, "n3").armed(0, "n3", 10, 10).fired(10, "n3", 10, 20).fired(20, "n3", 20, 30).crash(20.2, "n3", dropped=("Tick",))
    b.started(22, "n1").armed(22, "n1", 30, 10).fired(30, "n1", 30, 40)
    entries = ledger(b.trace)
    assert statuses(entries) == [(10, "on-time"), (20, "missed"), (30, "on-time")]
    assert entries[1].why == "lost in flight: fired on n3 at t=20.000s, dropped (fault.crash of n3 at t=20.200s): failed: Unavailable('stopped')"
    assert entries[1].attempts[0].lost == entries[1].why
    assert [(e.due_us or 0) - START for e in misses(entries)] == [20 * S]


def test_drops_at_an_end_go_to_the_newest_firings_of_that_life() -> None:
    """Three firings queued in one life, two drops at the crash: the two newest are lost, the oldest delivered (FIFO)."""
    b = Build().started(0, "n1").armed(0, "n1", 1, 1).fired(1, "n1", 1, 2).fired(2, "n1", 2, 3).fired(3, "n1", 3, 4).crash(3.5, "n1", dropped=("Tick", "Tick"))
    assert statuses(ledger(b.trace)) == [(1, "on-time"), (2, "missed"), (3, "missed")]


def test_a_failed_handler_loses_the_message_in_the_body() -> None:
    """A free body's failure drops the newest firing (10, not the handled 9); after the restart the failure drops the oldest held one (11, not 12)."""
    b = Build().started(0, "n1").armed(0, "n1", 9, 1).fired(9, "n1", 9, 10).fired(10, "n1", 10, 11)

    def fail(t: float) -> None:
        b.add(t, "n1", "message.dropped", actor=A, key="k", message="Tick", reason="failed: Unavailable('no quorum')")
        b.add(t, "n1", "activation.failed", actor=A, key="k", lease=1, error="Unavailable('no quorum')", message="Tick", retry_in=0.1)

    fail(11)
    b.fired(11, "n1", 11, 12).add(11.1, "n1", "activation.started", actor=A, key="k", lease=2, behavior=A, recovered=True, restart=1)
    b.fired(12, "n1", 12, 13)
    fail(12.1)
    entries = ledger(b.trace)
    assert statuses(entries) == [(9, "on-time"), (10, "missed"), (11, "missed"), (12, "on-time")]
    assert entries[2].why == "its handler failed: fired on n1 at t=11.000s, dropped at t=12.100s: failed: Unavailable('no quorum')"


def test_a_drop_not_at_an_end_of_life_is_not_a_loss() -> None:
    """A message dropped while the activation goes on (an ask cancelled while queued) does not make a firing lost."""
    b = Build().started(0, "n1").armed(0, "n1", 1, None).fired(1, "n1", 1, None)
    b.add(1.5, "n1", "message.dropped", actor=A, key="k", message="Tick", reason="ask cancelled while queued")
    assert statuses(ledger(b.trace)) == [(1, "on-time")]


def test_messages_map_keeps_other_types_from_counting_as_losses() -> None:
    """With messages={'tick': 'Tick'}, a Get dropped at the crash is not taken for the tick's firing."""
    b = Build().started(0, "n1").armed(0, "n1", 1, None).fired(1, "n1", 1, None).crash(1.5, "n1", dropped=("Get",))
    assert statuses(ledger(b.trace)) == [(1, "missed")]  # without the map: any message of the key may be the firing's
    assert statuses(ledger(b.trace, messages={"tick": "Tick"})) == [(1, "on-time")]


def test_mailbox_full_at_the_firing_is_lost_before_the_mailbox() -> None:
    """A message.dropped (mailbox full) right before the firing at its instant: that occurrence is missed."""
    b = Build().started(0, "n1").armed(0, "n1", 1, None)
    b.add(1, "n1", "message.dropped", actor=A, key="k", message="Tick", reason="app:ticker['k']: mailbox full (4 messages)")
    b.fired(1, "n1", 1, None)
    (entry,) = ledger(b.trace)
    assert (entry.status, entry.why) == ("missed", "lost before the mailbox: app:ticker['k']: mailbox full (4 messages)")


def _burst_failing_on(named: bool) -> Build:
    """FireAll(3) at 62 s tells 40, 50, 60 (30 skipped); the body fails at 63 s on 50 (its drop names it if ``named``), restarts, handles 60."""
    b = Build().started(0, "n1").armed(0, "n1", 10, 10).fired(10, "n1", 10, 20).fired(20, "n1", 20, 30)
    b.fired(62, "n1", 40, 70).fired(62, "n1", 50, 70).fired(62, "n1", 60, 70).caught_up(62, "n1", 40, 70, 1)
    occurrence: dict[str, Any] = {"schedule": "tick", "due_us": START + 50 * S} if named else {}
    b.add(63, "n1", "message.dropped", actor=A, key="k", message="Tick", reason="failed: RuntimeError('boom')", **occurrence)
    b.add(63, "n1", "activation.failed", actor=A, key="k", lease=1, error="RuntimeError('boom')", message="Tick", retry_in=0.1)
    b.add(63.1, "n1", "activation.started", actor=A, key="k", lease=2, behavior=A, recovered=True, restart=1)
    return b.fired(70, "n1", 70, 80)


def test_a_drop_that_names_its_occurrence_goes_to_that_firing() -> None:
    """The FireAll burst 40, 50, 60 and a failure on 50: named (schedule, due_us), 50 is missed and 60 late; unnamed, the inference takes 60."""
    entries = ledger(_burst_failing_on(named=True).trace)
    assert statuses(entries) == [(10, "on-time"), (20, "on-time"), (30, "missed"), (40, "caught-up"), (50, "missed"), (60, "late"), (70, "on-time")]
    assert entries[4].why == "its handler failed: fired on n1 at t=62.000s, dropped at t=63.000s: failed: RuntimeError('boom')"
    lost_at = entries[4].attempts[0].lost_at
    assert lost_at is not None and (lost_at.get("schedule"), lost_at.get("due_us")) == ("tick", START + 50 * S)
    assert statuses(ledger(_burst_failing_on(named=False).trace))[4:6] == [(50, "late"), (60, "missed")]  # the old row: mailbox order only


def test_named_drops_at_a_crash_and_a_full_mailbox_are_exact() -> None:
    """A crash drops 60 (named) of 40, 50, 60: only 60 is lost, not the newest two; a full mailbox drops 40 and 50 of a burst before their rows."""
    b = Build().started(0, "n1").armed(0, "n1", 40, 10)
    b.fired(40, "n1", 40, 50).fired(50, "n1", 50, 60).fired(60, "n1", 60, 70).add(60.5, "n1", "fault.crash", incarnation=1, unsynced_lost=0)
    b.add(60.5, "n1", "activation.ended", actor=A, key="k", lease=1, reason="crashed")
    b.add(60.5, "n1", "message.dropped", actor=A, key="k", message="Tick", reason="failed: Unavailable('stopped')", schedule="tick", due_us=START + 60 * S)
    b.add(60.5, "n1", "message.dropped", actor=A, key="k", message="Get", reason="failed: Unavailable('stopped')")  # no firing's: the trace names them
    entries = ledger(b.trace)
    assert statuses(entries) == [(40, "on-time"), (50, "on-time"), (60, "missed")]
    assert entries[2].why == "lost in flight: fired on n1 at t=60.000s, dropped (fault.crash of n1 at t=60.500s): failed: Unavailable('stopped')"
    full = Build().started(0, "n1").armed(0, "n1", 10, 10).fired(10, "n1", 10, 20)
    for due in (40, 50):
        full.add(62, "n1", "message.dropped", actor=A, key="k", message="Tick", reason="mailbox full (1 messages)", schedule="tick", due_us=START + due * S)
    full.fired(62, "n1", 40, 70).fired(62, "n1", 50, 70).fired(62, "n1", 60, 70).caught_up(62, "n1", 40, 70, 2)
    entries = ledger(full.trace)
    assert statuses(entries)[3:] == [(40, "missed"), (50, "missed"), (60, "late")]
    assert entries[3].why == entries[4].why == "lost before the mailbox: mailbox full (1 messages)"


def test_a_named_drop_of_a_node_schedule_tick_names_its_reference_and_tick() -> None:
    """A node schedule's misfire=FireAll burst 40, 50 and a failure on 40 named (reference, tick): 40 is missed, 50 late (not the newest)."""
    b = _node_interval(Build().started(0, "n1"))
    for tick in (40, 50):
        node_row(b, 57, "n1", "node_schedule.fired", tick, next_us=START + 60 * S)
    node_row(b, 57, "n1", "node_schedule.caught_up", 40, next_us=START + 60 * S, skipped=2)
    b.add(57.5, "n1", "message.dropped", actor=A, key="k", message="Beat", reason="failed: RuntimeError('boom')", schedule="beats", due_us=START + 40 * S)
    b.add(57.5, "n1", "activation.failed", actor=A, key="k", lease=1, error="RuntimeError('boom')", message="Beat", retry_in=0.1)
    entries = ledger(b.trace)
    assert statuses(entries) == [(10, "on-time"), (20, "missed"), (30, "missed"), (40, "missed"), (50, "late")]
    assert entries[3].why == "its handler failed: fired on n1 at t=57.000s, dropped at t=57.500s: failed: RuntimeError('boom')"


def test_due_passed_over_by_a_rearm_is_missed() -> None:
    """An owner resumes the key armed for 40 after the firing at 20 (whose next due was 30): due 30 is missed, passed over."""
    b = Build().started(0, "n1").armed(0, "n1", 10, 10).fired(10, "n1", 10, 20).fired(20, "n1", 20, 30)
    b.started(35, "n2").armed(35, "n2", 40, 10).fired(40, "n2", 40, 50)
    entries = ledger(b.trace)
    assert statuses(entries) == [(10, "on-time"), (20, "on-time"), (30, "missed"), (40, "on-time")]
    assert entries[2].why == "passed over: the schedule was armed for 2026-01-01T00:00:40+00:00 on n2 at t=35.000s"


def test_internal_keys_are_left_out() -> None:
    """Schedules of the runtime's own types (cron claim records, actor 'casty.…') are not in the ledger."""
    b = Build()
    b.add(1, "n1", "schedule.armed", actor="casty.cluster.claims:schedule_fire", key="c", name="expire", due_us=START + 60 * S, every_us=None)
    assert ledger(b.trace) == []


# --- node schedules and cluster cron, hand-built ------------------------------------------------------


def node_row(b: Build, t: float, node: str, kind: str, tick: float | None = None, **fields: Any) -> Build:
    base: dict[str, Any] = {"reference": "beats", "actor": A, "key": "k", "schedule_kind": fields.pop("schedule_kind", "interval")}
    if tick is not None:
        base["tick_us"] = START + round(tick * S)
        base["now_us"] = START + round(t * S)
    return b.add(t, node, kind, **base, **fields)


def test_node_schedule_caught_up_paused_and_tick_lost() -> None:
    """A node interval schedule: on time, a lost tick, paused over two ticks (resumed at 50), caught up over one."""
    b = Build()
    node_row(b, 0, "n1", "node_schedule.registered", due_us=START + 10 * S, every_us=10 * S, expression=None)
    node_row(b, 10, "n1", "node_schedule.fired", 10, next_us=START + 20 * S)
    node_row(b, 20, "n1", "node_schedule.tick_lost", 20, next_us=START + 30 * S, reason="UnknownActor: gone")
    node_row(b, 25, "n1", "node_schedule.paused")
    node_row(b, 45, "n1", "node_schedule.resumed", due_us=START + 55 * S)
    node_row(b, 55, "n1", "node_schedule.fired", 55, next_us=START + 65 * S)
    node_row(b, 76, "n1", "node_schedule.fired", 65, next_us=START + 85 * S)
    node_row(b, 76, "n1", "node_schedule.caught_up", 65, next_us=START + 85 * S, skipped=1)
    node_row(b, 85, "n1", "node_schedule.fired", 85, next_us=START + 95 * S)
    entries = ledger(b.trace)
    assert statuses(entries) == [(10, "on-time"), (20, "missed"), (30, "missed"), (40, "missed"), (55, "on-time"), (65, "caught-up"), (75, "missed"), (85, "on-time")]
    assert {e.source for e in entries} == {"node-schedule"} and entries[0].node == "n1"
    assert [e.why for e in entries if e.status == "missed"] == [
        "tick lost on n1 at t=20.000s: UnknownActor: gone",
        "paused on n1 at t=25.000s",
        "paused on n1 at t=25.000s",
        "skipped by the catch-up of tick 2026-01-01T00:01:05+00:00",
    ]


def cron_rows(b: Build, tick: float, winner: str | None, nodes: tuple[str, ...] = ("n1", "n2", "n3"), told: bool = True) -> None:
    claim = f"schedule-fire::beats@{tick}"
    for node in nodes:
        t = tick + 0.01
        if node == winner:
            node_row(b, t, node, "node_schedule.claim_won", tick, schedule_kind="cron", claim=claim, ttl_us=60 * S)
            if told:
                node_row(b, t, node, "node_schedule.fired", tick, schedule_kind="cron", next_us=START + round((tick + 5) * S))
        elif winner is not None:
            node_row(b, t, node, "node_schedule.claim_lost", tick, schedule_kind="cron", claim=claim, winner=winner)
        else:
            node_row(b, t, node, "node_schedule.claim_skipped", tick, schedule_kind="cron", claim=claim, reason="older than its TTL")


def test_cluster_cron_claims_winner_crash_and_skipped_claims() -> None:
    """Cluster cron every 5 s: tick 5 claimed by n1 (n2, n3 lost), tick 10 claimed by n1 which crashed, tick 15 skipped by all, tick 20 by n2."""
    b = Build()
    for node in ("n1", "n2", "n3"):
        node_row(b, 0, node, "node_schedule.registered", schedule_kind="cron", due_us=START + 5 * S, every_us=None, expression="*/5 * * * * ?")
    cron_rows(b, 5, "n1")
    b.add(9.9, "n1", "fault.crash", incarnation=1, unsynced_lost=0)
    cron_rows(b, 10, "n1", told=False)
    cron_rows(b, 15, None, nodes=("n2", "n3"))
    cron_rows(b, 20, "n2", nodes=("n2", "n3"))
    entries = ledger(b.trace)
    assert statuses(entries) == [(5, "on-time"), (10, "missed"), (15, "missed"), (20, "on-time")]
    assert [(e.source, e.node, e.claimed, e.lost_claims) for e in entries] == [
        ("cron", None, "n1", ("n2", "n3")),
        ("cron", None, "n1", ("n2", "n3")),
        ("cron", None, None, ()),
        ("cron", None, "n2", ("n3",)),
    ]
    assert entries[1].why == "claimed by n1, which never told it: fault.crash of n1 at t=9.900s"
    assert entries[2].why == "claim skipped: on n2 at t=15.010s: older than its TTL; on n3 at t=15.010s: older than its TTL"
    assert table(entries)[1] == {
        "source": "cron", "schedule": "ticker[k]/beats", "due": "2026-01-01T00:00:10+00:00", "status": "missed", "late_s": 0.0,
        "skipped": 0, "firings": 0, "claimed": "n1", "lost_claims": ["n2", "n3"], "why": entries[1].why,
    }


def test_timer_firings_are_delivered_without_a_due() -> None:
    """An activation timer's firing carries no due time: listed as delivered, due None."""
    b = Build().add(3, "n1", "timer.fired", actor=A, key="k", name="volatile", keep_alive=True)
    (entry,) = ledger(b.trace)
    assert (entry.source, entry.name, entry.due_us, entry.status) == ("timer", "volatile", None, "delivered")


# --- real runs -------------------------------------------------------------------------------------------


def test_ownership_miss_the_firing_that_died_with_its_node_is_missed() -> None:
    """ownership-miss seed 0: due 12.006534 s fired on n3, whose crash dropped the Tick: missed (lost in flight); the rest on time."""
    run = scenarios.run("ownership-miss", 0)
    entries = ledger(run.trace)
    assert [((e.due_us or 0) - START, e.status) for e in entries] == [
        (7_006_534, "on-time"), (12_006_534, "missed"), (17_006_534, "on-time"), (22_006_534, "on-time"),
    ]
    assert entries[1].why.startswith("lost in flight: fired on n3 at t=12.007s, dropped (fault.crash of n3 at t=12.207s): failed: Unavailable(")
    assert [a.node for a in entries[2].attempts] == ["n1"]
    (attempt,) = entries[1].attempts
    assert attempt.lost_at is not None and (attempt.lost_at.kind, attempt.lost_at.node, attempt.lost_at.t_ns) == ("message.dropped", "n3", 12_206_600_000)
    assert run.trace.rows[attempt.lost_at.seq - 2].kind == "fault.crash"  # the end that explains it, just before the drop


def test_ownership_repeat_the_refired_occurrence_is_repeated() -> None:
    """ownership-repeat seed 0: due 12.006534 s fired on n3 (lost at its crash) and again on n2 after it took the key: repeated."""
    entries = ledger(scenarios.run("ownership-repeat", 0).trace)
    assert [((e.due_us or 0) - START, e.status) for e in entries] == [
        (7_006_534, "on-time"), (12_006_534, "repeated"), (17_006_534, "on-time"), (22_006_534, "on-time"),
    ]
    repeat = entries[1]
    assert [(a.node, a.lost is not None) for a in repeat.attempts] == [("n3", True), ("n2", False)]
    assert "owner changed: epoch.acquired on n2 at t=13.809s" in repeat.why


def test_pause_catch_up_the_late_firing_skips_five() -> None:
    """pause-catch-up seed 0: 10, 20, 30 s on time; 40 s caught up 57 s late skipping 50..90 s (each missed); 100..140 s on time."""
    entries = ledger(scenarios.run("pause-catch-up", 0).trace)
    assert [((e.due_us or 0) - START - 200) // S for e in entries] == list(range(10, 150, 10))
    assert [e.status for e in entries] == ["on-time"] * 3 + ["caught-up"] + ["missed"] * 5 + ["on-time"] * 5
    assert (entries[3].late_us, entries[3].skipped) == (56_999_800, 5)


def test_node_pause_catch_up_the_node_schedule_skips_five() -> None:
    """node-pause-catch-up seed 0: the node schedule's tick 30 s is caught up, 40..80 s missed by that catch-up."""
    entries = ledger(scenarios.run("node-pause-catch-up", 0).trace)
    assert [e.status for e in entries] == ["on-time"] * 2 + ["caught-up"] + ["missed"] * 5 + ["on-time"] * 4
    assert {(e.source, e.node) for e in entries} == {("node-schedule", "n1")}


def test_cron_claim_winner_crash_the_claimed_tick_is_missed() -> None:
    """cron-claim-winner-crash seed 0: tick 25 s was claimed by n1, which crashed before telling it; every other tick on time, told once."""
    entries = ledger(scenarios.run("cron-claim-winner-crash", 0).trace)
    assert [((e.due_us or 0) - START) // S for e in entries] == list(range(5, 50, 5))
    assert [e.status for e in entries] == ["on-time"] * 4 + ["missed"] + ["on-time"] * 4
    missed = entries[4]
    assert (missed.claimed, missed.lost_claims) == ("n1", ("n2", "n3"))
    assert missed.why == "claimed by n1, which never told it: fault.crash of n1 at t=23.510s"
    assert all(len(e.attempts) == 1 for e in entries if e.status == "on-time")


def test_timers_vs_schedules_lists_all_three_sources() -> None:
    """timers-vs-schedules seed 0: the persisted schedule, the node schedule and the activation timer each appear."""
    entries = ledger(scenarios.run("timers-vs-schedules", 0).trace)
    assert sorted({e.source for e in entries}) == ["node-schedule", "schedule", "timer"]
    assert {e.status for e in entries if e.source == "timer"} == {"delivered"}


# --- the ledger against the seeds' catch-up rule, and against sim.checks ---------------------------------


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 20 * S).flatmap(
        lambda every: st.tuples(
            st.just(every), st.lists(st.one_of(st.just(0), st.integers(1, 3), st.integers(0, 6 * every)), min_size=1, max_size=25)
        )
    )
)
def test_property_every_grid_due_is_accounted_for_exactly_once(plan: tuple[int, list[int]]) -> None:
    """A schedule fired by the seeds' rule, each firing some µs after its due: every grid due up to the last next due has one entry, the skipped ones missed by that catch-up."""
    every, delays = plan
    trace = Trace()
    names = {"actor": A, "key": "k", "name": "tick"}
    trace.add(0, "n1", START, "schedule.armed", {**names, "due_us": START + every, "every_us": every})
    due, expected = START + every, []
    for delay in delays:
        now = due + delay
        nxt, skipped = catch_up(due, every, now)
        at = (now - START) * 1000
        trace.add(at, "n1", now, "schedule.fired", {**names, "due_us": due, "now_us": now, "next_us": nxt})
        if skipped:
            trace.add(at, "n1", now, "schedule.caught_up", {**names, "due_us": due, "now_us": now, "next_us": nxt, "skipped": skipped})
        expected.append(("caught-up" if skipped else "late" if delay else "on-time", delay, skipped))
        expected.extend([("missed", 0, 0)] * skipped)
        due = nxt
    entries = ledger(trace, tolerance=timedelta(0))
    assert [e.due_us for e in entries] == list(range(START + every, due, every))
    assert [(e.status, e.late_us, e.skipped) for e in entries] == expected
    assert all(e.why.startswith("skipped by the catch-up of due ") for e in entries if e.status == "missed")


@pytest.mark.parametrize("name", ["ownership-miss", "ownership-repeat", "stale-owner-fenced", "pause-catch-up"])
def test_ledger_covers_every_occurrence_explain_occurrences_reports(name: str) -> None:
    """Seed 0: sim.checks.explain_occurrences reports exactly the ledger's repeated and missed schedule entries (the lost in flight among them), each explained."""
    run = scenarios.run(name, 0)
    entries = {(e.actor, e.key, e.name, e.due_us): e for e in ledger(run.trace) if e.source == "schedule"}
    theirs = {(o.actor, o.key, o.name, o.due_us): o for o in explain_occurrences(run.trace)}
    ours = {k for k, e in entries.items() if e.status in ("missed", "repeated")}
    assert set(theirs) == ours
    assert {k: entries[k].status for k in theirs} == {k: {"miss": "missed", "repeat": "repeated"}[o.kind] for k, o in theirs.items()}
    assert all(o.because for o in theirs.values())
    lost = [k for k in ours if entries[k].why.startswith("lost in flight")]
    assert len(lost) == {"ownership-miss": 1, "ownership-repeat": 0, "stale-owner-fenced": 3, "pause-catch-up": 0}[name]


# --- catch-up policies other than Skip (casty's FireAll, DropLate, FixedDelay) ---------------------------------


def test_fire_all_skips_the_oldest_and_tells_the_newest_in_order() -> None:
    """FireAll(limit=2) at 57 s over dues 20-50: 20 and 30 missed by that catch-up (before its due), 40 caught up skipping the 2 before it, 50 late."""
    b = Build().started(0, "n1").armed(0, "n1", 10, 10).fired(10, "n1", 10, 20)
    b.fired(57, "n1", 40, 60).fired(57, "n1", 50, 60).caught_up(57, "n1", 40, 60, 2).fired(60, "n1", 60, 70)
    entries = ledger(b.trace)
    assert statuses(entries) == [(10, "on-time"), (20, "missed"), (30, "missed"), (40, "caught-up"), (50, "late"), (60, "on-time")]
    assert entries[1].why == entries[2].why == "skipped by the catch-up of due 2026-01-01T00:00:40+00:00 on n1 at t=57.000s"
    assert (entries[3].skipped, entries[3].why) == (2, "late by 17.000s, skipped the 2 before it")


def test_drop_late_that_told_nothing_misses_each_dropped_due() -> None:
    """DropLate at 57 s drops dues 20-50 (schedule.dropped, skipped 4, next 60): each is missed, dropped by its policy; 60 on time."""
    b = Build().started(0, "n1").armed(0, "n1", 10, 10).fired(10, "n1", 10, 20)
    b.add(57, "n1", "schedule.dropped", actor=A, key="k", name="tick", due_us=START + 50 * S, now_us=START + 57 * S, next_us=START + 60 * S, skipped=4)
    b.fired(60, "n1", 60, 70)
    entries = ledger(b.trace)
    assert statuses(entries) == [(10, "on-time"), (20, "missed"), (30, "missed"), (40, "missed"), (50, "missed"), (60, "on-time")]
    assert {e.why for e in entries[1:5]} == {"dropped late by its DropLate policy on n1 at t=57.000s (its newest due 2026-01-01T00:00:50+00:00)"}


def test_fixed_delay_moves_the_grid_and_misses_nothing() -> None:
    """FixedDelay: due 20 fired at 25 s sets next 35 (off the grid of 10 s): 10 on time, 20 late, 35 and 45 on time, no miss at 30 or 40."""
    b = Build().started(0, "n1").armed(0, "n1", 10, 10)
    b.fired(10, "n1", 10, 20).fired(25, "n1", 20, 35).fired(35, "n1", 35, 45).fired(45, "n1", 45, 55)
    assert statuses(ledger(b.trace)) == [(10, "on-time"), (20, "late"), (35, "on-time"), (45, "on-time")]


def _node_interval(b: Build) -> Build:
    node_row(b, 0, "n1", "node_schedule.registered", due_us=START + 10 * S, every_us=10 * S, expression=None)
    return node_row(b, 10, "n1", "node_schedule.fired", 10, next_us=START + 20 * S)


def test_node_schedule_misfire_fire_all_drop_late_and_fixed_delay() -> None:
    """Node schedules' misfire=: FireAll skips the oldest (20, 30 before told 40, 50), DropLate's dropped ticks are missed by it, FixedDelay moves the grid."""
    fire_all = _node_interval(Build())
    for tick in (40, 50):
        node_row(fire_all, 57, "n1", "node_schedule.fired", tick, next_us=START + 60 * S)
    node_row(fire_all, 57, "n1", "node_schedule.caught_up", 40, next_us=START + 60 * S, skipped=2)
    node_row(fire_all, 60, "n1", "node_schedule.fired", 60, next_us=START + 70 * S)
    entries = ledger(fire_all.trace)
    assert statuses(entries) == [(10, "on-time"), (20, "missed"), (30, "missed"), (40, "caught-up"), (50, "late"), (60, "on-time")]
    assert entries[1].why == entries[2].why == "skipped by the catch-up of tick 2026-01-01T00:00:40+00:00"
    drop = _node_interval(Build())
    node_row(drop, 57, "n1", "node_schedule.dropped", 50, next_us=START + 60 * S, skipped=4)
    node_row(drop, 60, "n1", "node_schedule.fired", 60, next_us=START + 70 * S)
    entries = ledger(drop.trace)
    assert statuses(entries) == [(10, "on-time"), (20, "missed"), (30, "missed"), (40, "missed"), (50, "missed"), (60, "on-time")]
    assert {e.why for e in entries[1:5]} == {"dropped late by its DropLate policy on n1 at t=57.000s (its newest tick 2026-01-01T00:00:50+00:00)"}
    fixed = _node_interval(Build())
    node_row(fixed, 25, "n1", "node_schedule.fired", 20, next_us=START + 35 * S)
    node_row(fixed, 35, "n1", "node_schedule.fired", 35, next_us=START + 45 * S)
    node_row(fixed, 45, "n1", "node_schedule.fired", 45, next_us=START + 55 * S)
    assert statuses(ledger(fixed.trace)) == [(10, "on-time"), (20, "late"), (35, "on-time"), (45, "on-time")]


def test_caught_up_text_says_whether_the_skipped_ticks_came_before_or_after_the_told_one() -> None:
    """A node catch-up's text: FireAll (40, 50 told at 57 s) and DropLate (50 told, next 60) skipped the ones before; Skip (20 told, next 60) the next ones; a persisted DropLate alike."""
    fire_all = _node_interval(Build())
    for tick in (40, 50):
        node_row(fire_all, 57, "n1", "node_schedule.fired", tick, next_us=START + 60 * S)
    node_row(fire_all, 57, "n1", "node_schedule.caught_up", 40, next_us=START + 60 * S, skipped=2)
    (caught,) = [e for e in ledger(fire_all.trace) if e.status == "caught-up"]
    assert (caught.due_us, caught.skipped, caught.why) == (START + 40 * S, 2, "late by 17.000s, skipped the 2 before it")
    drop = _node_interval(Build())
    node_row(drop, 57, "n1", "node_schedule.fired", 50, next_us=START + 60 * S)
    node_row(drop, 57, "n1", "node_schedule.caught_up", 50, next_us=START + 60 * S, skipped=3)
    (caught,) = [e for e in ledger(drop.trace) if e.status == "caught-up"]
    assert (caught.due_us, caught.skipped, caught.why) == (START + 50 * S, 3, "late by 7.000s, skipped the 3 before it")
    skip = _node_interval(Build())
    node_row(skip, 57, "n1", "node_schedule.fired", 20, next_us=START + 60 * S)
    node_row(skip, 57, "n1", "node_schedule.caught_up", 20, next_us=START + 60 * S, skipped=3)
    (caught,) = [e for e in ledger(skip.trace) if e.status == "caught-up"]
    assert (caught.due_us, caught.skipped, caught.why) == (START + 20 * S, 3, "late by 37.000s, skipped the next 3")
    persisted = Build().started(0, "n1").armed(0, "n1", 10, 10).fired(10, "n1", 10, 20)
    persisted.fired(57, "n1", 50, 60).caught_up(57, "n1", 50, 60, 3)
    (caught,) = [e for e in ledger(persisted.trace) if e.status == "caught-up"]
    assert (caught.due_us, caught.skipped, caught.why) == (START + 50 * S, 3, "late by 7.000s, skipped the 3 before it")


def test_a_catch_up_reads_the_period_armed_when_it_fired_not_a_later_replacements() -> None:
    """A persisted DropLate every 10 s tells 50 at 57 s (3 skipped, next 60), then is replaced by one every 5 s: the caught-up text still says the 3 before it."""
    b = Build().started(0, "n1").armed(0, "n1", 10, 10).fired(10, "n1", 10, 20)
    b.fired(57, "n1", 50, 60).caught_up(57, "n1", 50, 60, 3)
    b.add(65, "n1", "schedule.cancelled", actor=A, key="k", name="tick", reason="replaced")
    b.armed(65, "n1", 70, 5).fired(70, "n1", 70, 75)
    entries = ledger(b.trace)
    assert statuses(entries) == [(10, "on-time"), (20, "missed"), (30, "missed"), (40, "missed"), (50, "caught-up"), (70, "on-time")]
    assert {e.why for e in entries[1:4]} == {"skipped by the catch-up of due 2026-01-01T00:00:50+00:00 on n1 at t=57.000s"}
    assert (entries[4].skipped, entries[4].why) == (3, "late by 7.000s, skipped the 3 before it")
