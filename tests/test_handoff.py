"""Handoff core (``casty.protocol.handoff``), line by line, with no loop: rounds, parts, dumps, resends, late parts.

Each test feeds the ``Handoff`` of one node by hand and reads its outputs. Snapshots are built
with ``ReplicaStore.export`` where it matters that they are real replica records.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from casty.protocol.handoff import (
    SYNC_TIMER,
    Handoff,
    Imported,
    RoundEnded,
    RoundStarted,
    SyncDump,
    SyncRequest,
)
from casty.protocol.replication import Epoch, Snapshot, Stamp
from casty.protocol.limits import MAX_FRAME
from casty.cluster.routing import CLUSTER_WIRE
from casty.protocol.sansio import CancelTimer, Output, Report, Send, SetTimer


def snap(key: str, version: int = 1) -> Snapshot:
    """A replica record of key ``key`` written as ``version`` under epoch (1, "w")."""
    epoch = Epoch(1, "w")
    return Snapshot(("tests:counter", key), epoch, Stamp(epoch, version), {"state": key.encode()})


def reports(outs: Iterable[Output]) -> list[Any]:
    return [out.event for out in outs if isinstance(out, Report)]


def sends(outs: Iterable[Output]) -> list[Send]:
    return [out for out in outs if isinstance(out, Send)]


def timers(outs: Iterable[Output]) -> list[Output]:
    return [out for out in outs if isinstance(out, SetTimer | CancelTimer)]


def dumps_of(outs: Iterable[Output]) -> list[SyncDump]:
    frames = [send.frame for send in sends(outs)]
    assert all(isinstance(frame, SyncDump) for frame in frames)
    return [frame for frame in frames if isinstance(frame, SyncDump)]


def nothing() -> list[Snapshot]:
    return []


def answer(peer: Handoff, asker: str, round_: int, store: list[Snapshot]) -> list[SyncDump]:
    """What ``peer`` sends ``asker`` for its request of ``round_``."""
    return dumps_of(peer.receive(asker, SyncRequest(round_), lambda: store))


def started(node: str = "a", peers: tuple[str, ...] = ("b", "c"), **options: Any) -> Handoff:
    core = Handoff(node, **options)
    core.begin(0.0, peers)
    return core


# ============================================================================ options ======


def test_bad_options_are_refused_with_their_name() -> None:
    """A non-positive resend period or a part size below 1 is a ValueError naming the option."""
    with pytest.raises(ValueError, match="resend_every"):
        Handoff("a", resend_every=0.0)
    with pytest.raises(ValueError, match="part_size"):
        Handoff("a", part_size=0)


def test_frames_cross_the_cluster_wire_unchanged() -> None:
    """SyncRequest and a SyncDump holding snapshots come back equal from the cluster wire's bytes."""
    for frame in (SyncRequest(3), SyncDump(3, 2, 1, 4, True, (snap("k1"), snap("k2", 7)))):
        envelope = CLUSTER_WIRE.decode(CLUSTER_WIRE.encode("r", frame))
        assert envelope.frame == frame


# ============================================================================= rounds ======


def test_before_any_round_the_core_is_vacuously_complete_and_nobody_answered() -> None:
    """A fresh core is at round 0, complete (no peers), and no peer counts as answered or synced."""
    core = Handoff("a")
    assert (core.round, core.peers, core.complete) == (0, (), True)
    assert not core.answered("b") and not core.synced_peer("b")


def test_begin_asks_every_other_peer_once_sorted_and_arms_the_resend() -> None:
    """begin reports RoundStarted over the sorted peers without itself and duplicates, sends each a request, arms 'sync'."""
    core = Handoff("b", resend_every=2.0)
    outs = core.begin(10.0, ["c", "a", "b", "c"])
    assert reports(outs) == [RoundStarted(1, ("a", "c"))]
    assert [(s.to, s.frame) for s in sends(outs)] == [("a", SyncRequest(1)), ("c", SyncRequest(1))]
    assert timers(outs) == [SetTimer(SYNC_TIMER, 12.0)]
    assert core.round == 1 and not core.complete


def test_a_round_without_peers_ends_at_once_with_no_request_and_no_timer() -> None:
    """A node alone on the ring starts and ends its round in the same call: nothing to ask, no timer."""
    core = Handoff("a")
    outs = core.begin(0.0, ["a"])
    assert reports(outs) == [RoundStarted(1, ()), RoundEnded(1, (), ())]
    assert sends(outs) == [] and timers(outs) == []
    assert core.complete


def test_a_complete_answer_counts_and_the_last_one_ends_the_round_with_the_synced_peers() -> None:
    """Each peer's one-part answer counts it answered; the last ends the round, naming those that were synced."""
    core = started()
    outs = core.receive("b", SyncDump(1, 1, 0, 1, True, (snap("k"),)), nothing)
    assert reports(outs) == [Imported("b", (snap("k"),))]
    assert core.answered("b") and core.synced_peer("b") and not core.complete
    outs = core.receive("c", SyncDump(1, 5, 0, 1, False, ()), nothing)
    assert reports(outs) == [RoundEnded(1, ("b", "c"), ("b",))]
    assert core.answered("c") and not core.synced_peer("c") and core.complete
    assert CancelTimer(SYNC_TIMER) in outs


def test_round_ended_is_reported_once_however_many_parts_come_after() -> None:
    """Once the round ended, duplicated and late parts of it are imported but never end it again."""
    core = started(peers=("b",))
    first = core.receive("b", SyncDump(1, 1, 0, 1, True, (snap("k"),)), nothing)
    assert [type(e) for e in reports(first)] == [Imported, RoundEnded]
    for _ in range(2):
        again = core.receive("b", SyncDump(1, 1, 0, 1, True, (snap("k"),)), nothing)
        assert reports(again) == [Imported("b", (snap("k"),))]
        assert timers(again) == []
    later = core.receive("b", SyncDump(1, 2, 0, 1, True, ()), nothing)
    assert later == []


# ============================================================================== parts ======


def test_an_answer_is_split_into_numbered_parts_of_part_size_keys() -> None:
    """Five snapshots with part_size 2 go as parts 0, 1, 2 of 3 of one dump, in order, to the asker, echoing its round."""
    peer = Handoff("b", part_size=2)
    store = [snap(f"k{i}") for i in range(5)]
    parts = answer(peer, "a", 7, store)
    assert [(p.round, p.dump, p.part, p.parts) for p in parts] == [(7, 1, 0, 3), (7, 1, 1, 3), (7, 1, 2, 3)]
    assert [s for p in parts for s in p.snapshots] == store


def test_an_answer_is_also_split_by_bytes_so_that_every_part_fits_a_frame() -> None:
    """Ten keys of 1 MiB each (far fewer than part_size) go as ten parts of one key each, every part's frame under MAX_FRAME, in order."""
    epoch = Epoch(1, "w")
    store = [Snapshot(("tests:blob", f"k{i}"), epoch, Stamp(epoch, 1), {"state": bytes(1 << 20)}) for i in range(10)]
    parts = answer(Handoff("b"), "a", 1, store)
    assert [(p.part, p.parts, len(p.snapshots)) for p in parts] == [(i, 10, 1) for i in range(10)]
    assert [s for p in parts for s in p.snapshots] == store
    assert max(len(CLUSTER_WIRE.encode("r", p)) for p in parts) < MAX_FRAME


def test_small_keys_share_a_part_up_to_part_bytes() -> None:
    """With part_bytes 110, keys of 51 bytes of pages (PAGE_OVERHEAD included) go two to a part; a key over part_bytes goes alone."""
    epoch = Epoch(1, "w")
    small = [Snapshot(("t", f"k{i}"), epoch, Stamp(epoch, 1), {"state": bytes(30)}) for i in range(4)]
    big = Snapshot(("t", "big"), epoch, Stamp(epoch, 1), {"state": bytes(500)})
    parts = answer(Handoff("b", part_bytes=110), "a", 1, [small[0], small[1], big, small[2], small[3]])
    assert [[s.entity[1] for s in p.snapshots] for p in parts] == [["k0", "k1"], ["big"], ["k2", "k3"]]
    with pytest.raises(ValueError, match="part_bytes"):
        Handoff("a", part_bytes=0)


def test_an_empty_store_answers_with_one_empty_part() -> None:
    """A peer holding nothing still answers: one part of one, with no snapshots, so the asker can count it."""
    parts = answer(Handoff("b"), "a", 1, [])
    assert [(p.part, p.parts, p.snapshots) for p in parts] == [(0, 1, ())]


def test_every_answer_gets_the_next_dump_number() -> None:
    """Two requests (from anyone, any round) get dumps 1 and 2: parts of different answers are told apart."""
    peer = Handoff("b")
    assert [p.dump for p in answer(peer, "a", 1, [])] == [1]
    assert [p.dump for p in answer(peer, "c", 9, [])] == [2]


def test_the_synced_flag_is_the_answerers_own_round_being_complete() -> None:
    """Before any round, and while its round waits for peers, a node answers synced=False; once complete, True."""
    peer = Handoff("b")
    assert [p.synced for p in answer(peer, "a", 1, [])] == [False]  # round 0: never synced
    peer.begin(0.0, ["a", "c"])
    assert [p.synced for p in answer(peer, "a", 1, [])] == [False]
    peer.receive("a", SyncDump(1, 1, 0, 1, False, ()), nothing)
    peer.receive("c", SyncDump(1, 1, 0, 1, False, ()), nothing)
    assert peer.complete
    assert [p.synced for p in answer(peer, "a", 1, [])] == [True]
    peer.begin(1.0, ["a", "c", "d"])  # the ring changed: not synced again until the new round completes
    assert [p.synced for p in answer(peer, "a", 1, [])] == [False]


def test_an_answer_counts_only_when_every_part_of_one_dump_arrived_in_any_order() -> None:
    """Parts 2, 0, 1 of a dump count the peer answered at the third, each imported as it arrives."""
    core = started(peers=("b",))
    peer = Handoff("b", part_size=1)
    parts = answer(peer, "a", 1, [snap("k0"), snap("k1"), snap("k2")])
    for frame in (parts[2], parts[0]):
        outs = core.receive("b", frame, nothing)
        assert reports(outs) == [Imported("b", frame.snapshots)]
        assert not core.answered("b")
    outs = core.receive("b", parts[1], nothing)
    assert reports(outs) == [Imported("b", parts[1].snapshots), RoundEnded(1, ("b",), ())]
    assert core.answered("b")


def test_a_duplicated_part_does_not_count_twice() -> None:
    """Part 0 of 2 received twice is still one part: the peer has not answered until part 1 comes."""
    core = started(peers=("b",))
    part0 = SyncDump(1, 1, 0, 2, True, (snap("k0"),))
    core.receive("b", part0, nothing)
    core.receive("b", part0, nothing)
    assert not core.answered("b")
    core.receive("b", SyncDump(1, 1, 1, 2, True, (snap("k1"),)), nothing)
    assert core.answered("b")


def test_parts_of_two_different_dumps_do_not_make_one_answer() -> None:
    """Part 0 of dump 1 and part 1 of dump 2 (two pictures of the store) are not an answer; part 1 of dump 1 completes it."""
    core = started(peers=("b",))
    core.receive("b", SyncDump(1, 1, 0, 2, True, (snap("k0"),)), nothing)
    core.receive("b", SyncDump(1, 2, 1, 2, True, (snap("k1"),)), nothing)
    assert not core.answered("b")
    core.receive("b", SyncDump(1, 1, 1, 2, True, (snap("k1"),)), nothing)
    assert core.answered("b") and core.complete


def test_a_part_index_out_of_range_is_imported_but_never_counted() -> None:
    """A part numbered -1 or >= parts is still data (imported) but makes no answer, even with parts=1."""
    core = started(peers=("b",))
    for bad in (SyncDump(1, 1, 1, 1, True, (snap("k"),)), SyncDump(1, 1, -1, 1, True, (snap("k"),))):
        assert reports(core.receive("b", bad, nothing)) == [Imported("b", (snap("k"),))]
    assert not core.answered("b")


def test_stray_parts_are_imported_but_not_counted() -> None:
    """A dump from a node not asked this round, or echoing another round, is imported and changes no answer."""
    core = started(peers=("b", "c"))
    stranger = core.receive("z", SyncDump(1, 1, 0, 1, True, (snap("k"),)), nothing)
    assert reports(stranger) == [Imported("z", (snap("k"),))]
    future = core.receive("b", SyncDump(2, 1, 0, 1, True, (snap("k"),)), nothing)
    assert reports(future) == [Imported("b", (snap("k"),))]
    assert not core.answered("z") and not core.answered("b")


def test_an_empty_part_reports_no_import() -> None:
    """A part with no snapshots reports nothing to import (only the answer, if it completes one)."""
    core = started(peers=("b", "c"))
    assert core.receive("b", SyncDump(1, 1, 0, 1, False, ()), nothing) == []
    assert core.answered("b")


def test_frames_of_other_protocols_are_ignored() -> None:
    """A frame that is neither a request nor a dump gives no output and does not call export."""

    def export() -> list[Snapshot]:
        raise AssertionError("export called")

    assert Handoff("a").receive("b", snap("k"), export) == []


def test_export_is_called_only_to_answer_a_request() -> None:
    """export() runs once per SyncRequest, and not for a dump."""
    calls: list[int] = []

    def export() -> list[Snapshot]:
        calls.append(1)
        return [snap("k")]

    core = started(peers=("b",))
    core.receive("b", SyncDump(1, 1, 0, 1, True, ()), export)
    assert calls == []
    core.receive("b", SyncRequest(4), export)
    assert calls == [1]


# ============================================================================ resends ======


def test_the_resend_asks_again_only_the_peers_that_have_not_answered_and_rearms() -> None:
    """When 'sync' fires, the peers still silent get the current round's request again and the timer is set again."""
    core = Handoff("a", resend_every=1.0)
    core.begin(0.0, ["b", "c", "d"])
    core.receive("c", SyncDump(1, 1, 0, 1, True, ()), nothing)
    outs = core.timer(SYNC_TIMER, 1.0)
    assert [(s.to, s.frame) for s in sends(outs)] == [("b", SyncRequest(1)), ("d", SyncRequest(1))]
    assert timers(outs) == [SetTimer(SYNC_TIMER, 2.0)]


def test_a_timer_that_is_not_armed_or_not_ours_does_nothing() -> None:
    """Another timer's name, a second firing without a re-arm, and a firing after completion give no output."""
    core = Handoff("a", resend_every=1.0)
    core.begin(0.0, ["b"])
    assert core.timer("other", 1.0) == []
    core.receive("b", SyncDump(1, 1, 0, 1, True, ()), nothing)  # completes: the timer is cancelled
    assert core.timer(SYNC_TIMER, 1.0) == []
    idle = Handoff("a")
    assert idle.timer(SYNC_TIMER, 5.0) == []


def test_the_timer_is_cancelled_when_the_round_ends() -> None:
    """The answer that completes the round cancels the armed resend timer (one CancelTimer, once)."""
    core = started(peers=("b",))
    outs = core.receive("b", SyncDump(1, 1, 0, 1, True, ()), nothing)
    assert timers(outs) == [CancelTimer(SYNC_TIMER)]


# ======================================================================= ring changes ======


def test_a_ring_change_mid_round_starts_over_and_late_parts_of_the_old_round_do_not_count() -> None:
    """begin during a round: round+1, answers reset; a part of the old round is imported but counts nobody."""
    core = started(peers=("b", "c"))
    core.receive("b", SyncDump(1, 1, 0, 1, True, ()), nothing)
    assert core.answered("b")
    outs = core.begin(3.0, ["b", "c", "d"])
    assert reports(outs) == [RoundStarted(2, ("b", "c", "d"))]
    assert [(s.to, s.frame) for s in sends(outs)] == [(p, SyncRequest(2)) for p in ("b", "c", "d")]
    assert timers(outs) == []  # the resend timer of round 1 is still armed and serves round 2
    assert not core.answered("b") and not core.complete
    late = core.receive("c", SyncDump(1, 2, 0, 1, True, (snap("k"),)), nothing)
    assert reports(late) == [Imported("c", (snap("k"),))]
    assert not core.answered("c")
    resend = core.timer(SYNC_TIMER, 3.5)
    assert {(s.to, s.frame) for s in sends(resend)} == {(p, SyncRequest(2)) for p in ("b", "c", "d")}


def test_parts_begun_in_the_old_round_do_not_complete_an_answer_in_the_new_one() -> None:
    """Part 0 of a dump taken for round 1 and part 1 of the same dump relabelled round 2 do not combine."""
    core = started(peers=("b",))
    core.receive("b", SyncDump(1, 1, 0, 2, True, ()), nothing)
    core.begin(1.0, ["b"])
    core.receive("b", SyncDump(2, 1, 1, 2, True, ()), nothing)
    assert not core.answered("b")


def test_a_ring_change_after_the_round_ended_starts_a_round_that_ends_again() -> None:
    """A completed round, then begin: RoundStarted 2 with a fresh timer; its answers end it with RoundEnded 2."""
    core = started(peers=("b",))
    core.receive("b", SyncDump(1, 1, 0, 1, True, ()), nothing)
    outs = core.begin(5.0, ["b", "c"])
    assert timers(outs) == [SetTimer(SYNC_TIMER, 6.0)]
    core.receive("b", SyncDump(2, 2, 0, 1, False, ()), nothing)
    ended = core.receive("c", SyncDump(2, 1, 0, 1, True, ()), nothing)
    assert RoundEnded(2, ("b", "c"), ("c",)) in reports(ended)


def test_two_cores_sync_each_other_over_bytes() -> None:
    """Two cores asking each other through the cluster wire: each imports the other's whole store and ends its round once."""
    a, b = Handoff("a", part_size=2), Handoff("b", part_size=2)
    stores = {"a": [snap("x")], "b": [snap(f"k{i}") for i in range(3)]}
    cores = {"a": a, "b": b}
    queue: list[tuple[str, Send]] = [("a", s) for s in sends(a.begin(0.0, ["b"]))] + [("b", s) for s in sends(b.begin(0.0, ["a"]))]
    imported: dict[str, list[Snapshot]] = {"a": [], "b": []}
    ended: dict[str, list[RoundEnded]] = {"a": [], "b": []}
    while queue:
        src, send = queue.pop(0)
        frame = CLUSTER_WIRE.decode(CLUSTER_WIRE.encode("r", send.frame)).frame
        to = send.to
        outs = cores[to].receive(src, frame, stores[to].copy)
        for event in reports(outs):
            if isinstance(event, Imported):
                imported[to].extend(event.snapshots)
            elif isinstance(event, RoundEnded):
                ended[to].append(event)
        queue.extend((to, s) for s in sends(outs))
    assert imported == {"a": stores["b"], "b": stores["a"]}
    assert [e.round for e in ended["a"]] == [1] and [e.round for e in ended["b"]] == [1]


# ===================================================================== adversarial ======
# Interleavings that break (or bypass) the handoff's safety argument. Each demonstrated hole is
# a strict xfail: it fails today for the reason given, and turns into an error (XPASS) once fixed,
# so whoever fixes it flips the mark. The mechanisms and proposed fixes are in the reason strings.

import asyncio  # noqa: E402
from collections.abc import Callable  # noqa: E402

from casty.cluster.config import Cluster  # noqa: E402
from casty.cluster.driver import Dispatcher  # noqa: E402
from casty.protocol.gossip import Membership  # noqa: E402
from casty.protocol.membership import Heartbeat  # noqa: E402
from casty.protocol.placement import Ring  # noqa: E402
from casty.cluster.replicas import ReplicationService  # noqa: E402
from casty.protocol.replication import Entity, Prepare, Promise  # noqa: E402
from sim.checks import no_confirmed_write_lost, run_checks  # noqa: E402
from sim.network import Latency  # noqa: E402
from sim.scenarios.cluster import CLUSTER, Arm, _ask, cl_ticker  # noqa: E402
from sim.world import World  # noqa: E402


def _join_key() -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """A cl_ticker key whose replicas move from (B, A, C) on n1..n3 to (n4, B, A) when n4 joins; C is not the seed n1."""
    old, new = Ring(("n1", "n2", "n3")), Ring(("n1", "n2", "n3", "n4"))
    for i in range(2000):
        key = f"join{i}"
        s1, s2 = old.replicas(cl_ticker.name, key, 3), new.replicas(cl_ticker.name, key, 3)
        if s2 == ("n4", s1[0], s1[1]) and s1[2] != "n1":
            return key, s1, s2
    raise AssertionError("no such key among join0..join1999")


def test_a_joining_node_misses_writes_the_old_replica_set_confirms_after_its_pull() -> None:
    """n4 joins and pulls; B's writes confirmed on {B, C} after n4's pull are in n4's first acquisition (answers count only from peers that know n4, and those have ended their old-set activations)."""
    key, (b, a, _c), _new = _join_key()
    world = World(0)
    for name in ("n1", "n2", "n3"):
        world.add_node(name, cluster=CLUSTER, ask_timeout=2.0, write_timeout=1.0)

    def script(world: World) -> Any:
        yield world.timeout(2.0)
        _ask(world, "n1", cl_ticker, key, Arm(0.05), "armed")  # B owns the key and writes every 50 ms
        yield world.timeout(1.0)
        world.partition([b], [a], oneway=True)  # A misses B's writes from now on (a lossy link)
        world.network.link(b, "n4", latency=Latency(0.2, 0.0))  # B's frames to the newcomer are slow
        yield world.timeout(0.5)
        world.add_node("n4", cluster=CLUSTER, ask_timeout=2.0, write_timeout=1.0)
        yield world.timeout(1.5)
        world.heal()  # until the link heals, A and B cannot both answer each other's pull: the key waits, safely

    world.process(script(world))
    world.run(until=8.0)
    assert [r.node for r in world.trace.of("epoch.acquired", key=key)] == [b, "n4"]
    assert run_checks([no_confirmed_write_lost], world) == []


def test_a_restarted_node_learns_of_its_previous_life_from_its_seed() -> None:
    """Regression (was a grace bypass, fixed on main by Heartbeat.previous): Membership cores: n3's new life heartbeats its seed n1 (which knew n3's old life); n1's heartbeat back tells it of that life."""
    seed = Membership("n1", 1, ())
    seed.start(0.0)
    old = Membership("n3", 100, ("n1",))
    for out in old.start(0.0):
        if isinstance(out, Send):
            for probe in seed.receive("n3", out.frame, 0.0):  # a candidate: n3 must prove its round trip
                if isinstance(probe, Send):
                    for answer in old.receive("n1", probe.frame, 0.01):
                        if isinstance(answer, Send) and answer.to == "n1":
                            seed.receive("n3", answer.frame, 0.02)
    assert seed.member("n3") is not None
    new = Membership("n3", 200, ("n1",))
    for out in new.start(5.0):
        if isinstance(out, Send):
            seed.receive("n3", out.frame, 5.0)
    back = [out.frame for out in seed.timer("heartbeat", 5.2) if isinstance(out, Send) and out.to == "n3"]
    assert back and isinstance(back[0], Heartbeat)
    new.receive("n1", back[0], 5.21)
    assert new.joined
    assert new.previous_life == 100


def test_a_restarted_node_keeps_its_replica_closed_for_the_grace() -> None:
    """Regression (opened 0.1 s after the restart before Heartbeat.previous): n3 crashes and restarts between two heartbeats of its seeds: its replica opens no sooner than rejoin_grace after the restart."""
    cluster = Cluster(seeds=["n1", "n2"], heartbeat=0.2, suspect_after=1, dead_after=1)
    world = World(0)
    for name in ("n1", "n2", "n3"):
        world.add_node(name, cluster=cluster, ask_timeout=2.0, write_timeout=1.0)
    grace = 1.0 + 1.0  # write_timeout + 1 s, the default rejoin_grace

    def script(world: World) -> Any:
        yield world.timeout(2.0)
        world.crash("n3")
        yield world.timeout(2.1)  # mid-period: no heartbeat of n1 or n2 about n3's old life is in flight
        world.restart("n3")

    world.process(script(world))
    world.run(until=8.0)
    restart = world.trace.of("fault.restart")[0]
    opened = [r for r in world.trace.of("handoff.started", node="n3") if r.t_ns > restart.t_ns and r.get("reason") == "opened"]
    assert opened, "n3 never opened its replica again"
    assert opened[0].t - restart.t >= grace, f"opened {opened[0].t - restart.t:.3f} s after the restart"


def test_a_previous_life_with_a_greater_incarnation_is_still_a_previous_life() -> None:
    """A heartbeat naming this node at a greater incarnation than its own (clock stepped back) sets previous_life."""
    node = Membership("n3", 100, ("n1",))
    node.start(0.0)
    node.receive("n2", Heartbeat("n2", 1, 5, (("n2", 1, "alive", 5), ("n3", 500, "alive", 40)), heard=(100, 1)), 0.1)  # n2 proved its round trip
    assert node.incarnation > 500  # refuted
    assert node.previous_life == 500


class _NoTransport:
    """A transport that drops every frame (the node is cut off), for a ReplicationService alone."""

    node = "a"

    def send(self, destination: str, frame: bytes) -> None:
        pass

    def set_handler(self, handler: Callable[[str, bytes], None]) -> None:
        pass

    async def close(self) -> None:
        pass


def test_readiness_found_alone_on_the_ring_does_not_survive_the_ring_growing() -> None:
    """A node alone on its ring is ready only if it founds the cluster, and what it found ready alone is dropped when the ring grows."""
    entity: Entity = ("tests:counter", "k")
    ring: dict[str, tuple[str, ...]] = {"replicas": ("a",)}

    def replica_set(_entity: Entity) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
        return ring["replicas"], ("a",), ()

    loop = asyncio.new_event_loop()
    try:
        for founder in (False, True):
            ring["replicas"] = ("a",)
            transport = _NoTransport()
            service = ReplicationService(
                "a", 7, transport, CLUSTER_WIRE, Dispatcher(transport, CLUSTER_WIRE), loop,
                replica_set=replica_set, alone_is_ready=founder,
            )
            service.join(())  # the grace passed and nobody was heard: the ring is this node alone
            promise = service.store.on_prepare(Prepare(entity, Epoch(3, "b#1")))  # a Prepare that beat the heartbeats
            assert isinstance(promise, Promise) and promise.blank is not founder
            ring["replicas"] = ("a", "b", "c")
            service.ring_changed(("b", "c"))  # the first heartbeat: b and c are back on the ring
            later = service.store.on_prepare(Prepare(entity, Epoch(4, "c#1")))
            assert isinstance(later, Promise) and later.blank, "an empty replica counted in a read quorum"
            service.close()
    finally:
        loop.close()
