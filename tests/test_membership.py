"""Membership core: driven with no event loop, by hand or by a tiny deterministic in-test network.

``Net`` below is the whole harness: a heap of (time, order) events; ``Send`` outputs become
deliveries ``latency`` later (through msgspec bytes, so every frame proves it can cross a
real network), ``SetTimer`` outputs become timer firings in time order (a re-arm replaces,
``CancelTimer`` removes), and ``Report`` outputs are recorded with the time and the node.
Faults: crash (a node stops producing outputs and receiving), partitions, seeded loss.
"""

from __future__ import annotations

import heapq
import os
import random
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from casty.protocol.gossip import CHECK_TIMER, HEARTBEAT_TIMER, Membership
from casty.protocol.membership import (
    FRAMES,
    DigestEntry,
    Heartbeat,
    Leaving,
    MemberChanged,
    MembershipConfig,
    ViewLearned,
    Doubted,
)
from casty.protocol.placement import Placement, Ring
from casty.protocol.sansio import CancelTimer, Output, Report, Send, SetTimer, perform

CONFIG = MembershipConfig(heartbeat=1.0, suspect_after=5.0, dead_after=5.0, remove_after=60.0)
LATENCY = 0.01

_ENCODER = msgspec.msgpack.Encoder()
_ENVELOPE = msgspec.msgpack.Decoder(tuple[str, msgspec.Raw])
_DECODERS: dict[str, msgspec.msgpack.Decoder[Any]] = {cls.__name__: msgspec.msgpack.Decoder(cls) for cls in FRAMES}


def wire(frame: object) -> object:
    """The frame after a trip through bytes, as a real transport would carry it."""
    tag, raw = _ENVELOPE.decode(_ENCODER.encode((type(frame).__name__, frame)))
    return _DECODERS[tag].decode(raw)


class _Node:
    """The performer of one node's outputs on a ``Net`` (nothing while the node is down)."""

    def __init__(self, net: Net, node: str) -> None:
        self.net, self.node = net, node

    @property
    def closed(self) -> bool:
        return self.node in self.net.down

    def report(self, event: Any) -> None:
        net = self.net
        if isinstance(event, ViewLearned):
            net.learned.append((net.now, self.node, event))
        elif isinstance(event, Doubted):
            net.doubts.append((net.now, self.node, event))
        else:
            net.reports.append((net.now, self.node, event))

    def send(self, to: str, frame: Any) -> None:
        net = self.net
        net.frames += 1
        if net.connected(self.node, to) and not (net.loss and net.rng.random() < net.loss):
            net._push(net.now + net.latency, "frame", to, (self.node, wire(frame)))

    def set_timer(self, name: str, at: float) -> None:
        net = self.net
        net.timer_names.add(name)
        net._order += 1
        net._armed[(self.node, name)] = net._order
        net._push(max(at, net.now), "timer", self.node, (net._life[self.node], name, net._order))

    def cancel_timer(self, name: str) -> None:
        self.net._armed.pop((self.node, name), None)


class Net:
    """N membership cores, a fixed-latency network and timers, all on one deterministic event heap."""

    def __init__(
        self, config: MembershipConfig = CONFIG, *, latency: float = LATENCY, loss: float = 0.0, seed: int = 0
    ) -> None:
        self.config = config
        self.latency = latency
        self.loss = loss
        self.rng = random.Random(seed)
        self.now = 0.0
        self.cores: dict[str, Membership] = {}
        self.down: set[str] = set()
        self.groups: list[frozenset[str]] | None = None
        self.reports: list[tuple[float, str, MemberChanged]] = []
        self.learned: list[tuple[float, str, ViewLearned]] = []
        self.doubts: list[tuple[float, str, Doubted]] = []
        self.timer_names: set[str] = set()
        self.frames = 0
        self._heap: list[tuple[float, int, str, str, Any]] = []
        self._order = 0
        self._armed: dict[tuple[str, str], int] = {}
        self._life: dict[str, int] = {}

    # --- faults and lifecycle ------------------------------------------------------------

    def add(self, node: str, seeds: Sequence[str] = ("n1",), incarnation: int = 0) -> Membership:
        core = Membership(node, incarnation, seeds, self.config)
        self.cores[node] = core
        self.down.discard(node)
        self._life[node] = self._life.get(node, 0) + 1
        self.apply(node, core.start(self.now))
        return core

    def crash(self, node: str) -> None:
        self.down.add(node)
        for key in [k for k in self._armed if k[0] == node]:
            del self._armed[key]

    def leave(self, node: str) -> None:
        self.apply(node, self.cores[node].leave(self.now))

    def partition(self, *groups: Iterable[str]) -> None:
        self.groups = [frozenset(g) for g in groups]

    def heal(self) -> None:
        self.groups = None

    def connected(self, a: str, b: str) -> bool:
        return self.groups is None or any(a in g and b in g for g in self.groups)

    # --- the event loop of the harness ---------------------------------------------------

    def _push(self, at: float, kind: str, node: str, payload: Any) -> None:
        self._order += 1
        heapq.heappush(self._heap, (at, self._order, kind, node, payload))

    def apply(self, node: str, outputs: list[Output]) -> None:
        perform(outputs, _Node(self, node))

    def run(self, until: float) -> None:
        while self._heap and self._heap[0][0] <= until:
            at, _, kind, node, payload = heapq.heappop(self._heap)
            self.now = at
            if node in self.down:
                continue
            if kind == "frame":
                src, frame = payload
                if self.connected(src, node):
                    self.apply(node, self.cores[node].receive(src, frame, at))
            else:
                life, name, token = payload
                if life == self._life[node] and self._armed.get((node, name)) == token:
                    del self._armed[(node, name)]
                    self.apply(node, self.cores[node].timer(name, at))
        self.now = until

    # --- what the nodes think ------------------------------------------------------------

    def view(self, node: str) -> dict[str, tuple[int, str]]:
        return {m.node: (m.incarnation, m.status) for m in self.cores[node].members()}

    def about(self, observer: str, subject: str) -> list[tuple[float, str, int]]:
        """(time, status, incarnation) of every report ``observer`` made about ``subject``; times to the µs."""
        return [(round(t, 6), e.status, e.incarnation) for t, n, e in self.reports if n == observer and e.node == subject]


def cluster(n: int, **kwargs: Any) -> Net:
    """n nodes started at t=0, n1 the only seed (a founder), joined after a few heartbeats."""
    net = Net(**kwargs)
    net.add("n1", seeds=())
    for i in range(2, n + 1):
        net.add(f"n{i}")
    net.run(3.0)
    return net


def all_alive(net: Net, nodes: Iterable[str]) -> dict[str, tuple[int, str]]:
    return {node: (net.cores[node].incarnation, "alive") for node in nodes}


# --- whole-cluster scenarios ------------------------------------------------------------


def test_three_nodes_join_through_one_seed() -> None:
    """Three nodes that only know seed n1 all see each other alive within two heartbeats, and have a quorum once the listen window (3 s) is over."""
    net = Net()
    net.add("n1", seeds=())
    net.add("n2")
    net.add("n3")
    net.run(2.1)
    for node in ("n1", "n2", "n3"):
        assert net.view(node) == {"n1": (0, "alive"), "n2": (0, "alive"), "n3": (0, "alive")}
        assert not net.cores[node].has_quorum()
        assert net.about(node, node) == [(0.0, "alive", 0)]
    net.run(3.0)
    assert all(net.cores[node].has_quorum() for node in ("n1", "n2", "n3"))
    assert [(t, n, e.alive, e.members) for t, n, e in net.learned] == [(3.0, "n1", 3, 3), (3.0, "n2", 3, 3), (3.0, "n3", 3, 3)]
    assert [e.status for _, _, e in net.reports] == ["alive"] * 9  # nobody was ever suspected


def test_crash_becomes_suspect_then_dead_on_every_survivor() -> None:
    """A crashed node is suspect suspect_after after its last heartbeat, dead dead_after later, on each survivor."""
    net = cluster(3)
    net.run(10.5)
    net.crash("n3")  # its last heartbeat left at t=10.0 and arrived at 10.01
    net.run(30.0)
    for node in ("n1", "n2"):
        assert net.about(node, "n3")[1:] == [
            (15.01, "suspect", 0),
            (20.01, "dead", 0),
        ]
        assert net.view(node)["n3"] == (0, "dead")
        assert net.cores[node].has_quorum()  # 2 of 3 alive
        assert net.cores[node].ring_nodes() == ("n1", "n2", "n3")  # dead stays on the ring until removed
        assert not net.cores[node].serving("n3")


def test_orderly_leave_is_left_at_once_never_suspect_or_dead() -> None:
    """A leaving node is marked left one latency later on every member, and never suspected afterwards."""
    net = cluster(3)
    net.run(10.5)
    net.leave("n3")
    net.run(69.0)
    for node in ("n1", "n2"):
        assert net.about(node, "n3")[1:] == [(10.51, "left", 0)]
        assert net.cores[node].quorum_counts() == (2, 2)  # a left node no longer counts
        assert net.cores[node].ring_nodes() == ("n1", "n2")
    assert net.about("n3", "n3")[-1] == (10.5, "left", 0)
    net.run(80.0)
    for node in ("n1", "n2"):
        assert net.about(node, "n3")[-1] == (70.51, "removed", 0)


def test_dead_member_removed_after_remove_after() -> None:
    """A dead member is removed remove_after after it was declared dead, and leaves the quorum count."""
    net = cluster(3)
    net.run(10.5)
    net.crash("n3")
    net.run(79.0)
    assert net.cores["n1"].status("n3") == "dead"
    net.run(81.0)
    for node in ("n1", "n2"):
        assert net.about(node, "n3")[-1] == (80.01, "removed", 0)
        assert [m.node for m in net.cores[node].members()] == ["n1", "n2"]
        member = net.cores[node].member("n3")
        assert member is not None and member.status == "removed"  # a tombstone remains
        assert net.cores[node].quorum_counts() == (2, 2)


def test_minority_side_of_a_2_3_partition_has_no_quorum() -> None:
    """In a 2|3 partition the two lose quorum once they suspect the three; the three keep it."""
    net = cluster(5)
    net.run(10.5)
    assert all(core.has_quorum() for core in net.cores.values())
    net.partition({"n1", "n2", "n3"}, {"n4", "n5"})
    net.run(16.0)  # past suspect_after: suspect members no longer count as alive
    assert [net.cores[n].has_quorum() for n in ("n1", "n2", "n3", "n4", "n5")] == [True, True, True, False, False]
    assert net.cores["n4"].quorum_counts() == (2, 5)
    net.run(30.0)
    assert [net.cores[n].has_quorum() for n in ("n1", "n2", "n3", "n4", "n5")] == [True, True, True, False, False]
    # A placement answer on the minority names no owner; on the majority, an alive replica.
    for node in ("n4", "n5"):
        core = net.cores[node]
        placement = Placement(Ring(core.ring_nodes()))
        assert placement.owner("a:A", "k", replicas=3, alive=core.serving, quorum=core.has_quorum()) is None
    core = net.cores["n1"]
    owner = Placement(Ring(core.ring_nodes())).owner("a:A", "k", replicas=3, alive=core.serving, quorum=core.has_quorum())
    assert owner in ("n1", "n2", "n3")


def test_minority_never_removes_and_heals_after_the_majority_removed_it() -> None:
    """Without quorum dead members are kept (no majority by forgetting); after a long partition all rejoin alive."""
    net = cluster(5)
    net.run(10.5)
    net.partition({"n1", "n2", "n3"}, {"n4", "n5"})
    net.run(200.0)
    for node in ("n1", "n2", "n3"):
        assert [m.node for m in net.cores[node].members()] == ["n1", "n2", "n3"]
    for node in ("n4", "n5"):
        assert {n: s for n, (_, s) in net.view(node).items()} == {
            "n1": "dead", "n2": "dead", "n3": "dead", "n4": "alive", "n5": "alive"
        }
        assert not net.cores[node].has_quorum()
    net.heal()
    net.run(210.0)
    expected = all_alive(net, ["n1", "n2", "n3", "n4", "n5"])
    for node in expected:
        assert net.view(node) == expected
        assert net.cores[node].has_quorum()
    assert net.cores["n4"].incarnation > 0 and net.cores["n1"].incarnation > 0  # both sides refuted


def test_a_verdict_keeps_its_seq_so_no_one_who_heard_the_node_since_adopts_it() -> None:
    """After a heal, no node adopts a partition-time dead/suspect verdict about a member it has heard directly since."""
    net = cluster(5)
    net.run(10.5)
    names = sorted(net.cores)
    # Each node's own seq at the cut: no verdict made during the partition can rest on fresher evidence.
    evidence = {m.node: m.seq for node in names for m in net.cores[node].members() if m.node == node}
    net.partition({"n1", "n2"}, {"n3", "n4", "n5"})
    net.run(40.5)  # the verdicts: each side holds the other dead
    for node in names:
        other = ("n3", "n4", "n5") if node in ("n1", "n2") else ("n1", "n2")
        assert {m: net.view(node)[m] for m in other} == dict.fromkeys(other, (0, "dead"))
    heal = net.now
    heard: dict[tuple[str, str], tuple[int, int]] = {}  # (observer, subject): its last heartbeat received directly
    offered: list[tuple[str, str, str]] = []  # (observer, subject, status): verdicts shown to a third party
    adopted: list[tuple[str, str, str]] = []
    fresh_seq: list[DigestEntry] = []  # verdicts gossiped with a seq newer than the one they were made on

    def watch(observer: str, core: Membership) -> None:
        receive = core.receive

        def spy(src: str, frame: object, now: float) -> list[Output]:
            stale: list[tuple[str, str]] = []
            if isinstance(frame, Heartbeat):
                heard[(observer, src)] = (frame.incarnation, frame.seq)
                for subject, incarnation, status, seq in frame.digest:
                    if status not in ("suspect", "dead"):
                        continue
                    if seq > evidence[subject]:
                        fresh_seq.append((subject, incarnation, status, seq))
                    mine = core.member(subject)
                    since = heard.get((observer, subject), (-1, -1)) > (incarnation, evidence[subject])
                    if since and mine is not None and (mine.incarnation, mine.status) == (incarnation, "alive"):
                        stale.append((subject, status))  # we hold it alive and heard it after the verdict
            out = receive(src, frame, now)
            for subject, status in stale:
                offered.append((observer, subject, status))
                if core.status(subject) != "alive":
                    adopted.append((observer, subject, status))
            return out

        core.receive = spy  # type: ignore[method-assign]

    for node in names:
        watch(node, net.cores[node])
    net.heal()
    net.run(45.0)
    assert offered and adopted == []  # third parties were shown the stale verdicts, and none adopted one
    assert fresh_seq == []
    assert [(n, e.node, e.incarnation, e.status) for t, n, e in net.reports if t > heal and e.status != "alive"] == []
    expected = all_alive(net, names)
    assert all(net.view(node) == expected for node in names)
    assert all(net.cores[node].incarnation == 1 for node in names)  # each refuted its side's verdict once


def test_suspected_node_refutes_after_healing() -> None:
    """A node cut off long enough to be suspected (not dead) refutes with a higher incarnation once healed."""
    net = cluster(3)
    net.run(10.5)
    net.partition({"n1", "n2"}, {"n3"})
    net.run(17.0)
    assert net.view("n1")["n3"] == (0, "suspect")
    net.heal()
    net.run(25.0)
    assert net.cores["n3"].incarnation == 1
    for node in ("n1", "n2"):
        statuses = [(s, inc) for _, s, inc in net.about(node, "n3")]
        assert statuses == [("alive", 0), ("suspect", 0), ("alive", 1)]
        assert net.view(node)["n3"] == (1, "alive")
    assert all(s not in ("dead", "removed") for _, _, e in net.reports for s in [e.status])


def test_restart_with_higher_incarnation_replaces_old_record() -> None:
    """A node that restarts with a higher incarnation replaces its old record, alive or already dead."""
    net = cluster(3)
    net.run(10.5)
    net.crash("n3")
    net.run(12.0)
    net.add("n3", incarnation=1)  # back before anyone noticed
    net.run(14.0)
    for node in ("n1", "n2"):
        assert net.view(node)["n3"] == (1, "alive")
    # the seed: a new life proves a round trip first (n1's 12.0 heartbeat reached the new n3, whose probe echoes it)
    assert net.about("n1", "n3")[-1] == (12.02, "alive", 1)
    assert 12.0 < net.about("n2", "n3")[-1][0] <= 13.0 + 2 * LATENCY  # the others: within a heartbeat
    net.crash("n3")
    net.run(40.0)
    assert net.view("n1")["n3"] == (1, "dead")
    net.add("n3", incarnation=2)
    net.run(42.0)
    for node in ("n1", "n2"):
        assert net.view(node)["n3"] == (2, "alive")
    assert net.view("n3") == all_alive(net, ["n1", "n2", "n3"])


def test_a_restarted_node_learns_it_had_a_previous_life() -> None:
    """Whether its hello reaches a peer first or a peer's heartbeat reaches it first, a restarted node learns its previous incarnation; a first start and a refutation do not count."""
    net = cluster(3)
    net.run(10.5)
    assert all(net.cores[n].previous_life is None for n in ("n1", "n2", "n3"))
    net.crash("n3")
    net.run(12.0)
    net.add("n3", incarnation=5)
    net.run(14.0)
    assert net.cores["n3"].previous_life == 0
    # a peer that already replaced the record tells it in Heartbeat.previous
    peer = Membership("p", 0, ["q"], CONFIG)
    peer.start(0.0)
    peer.receive("q", Heartbeat("q", 3, 1, (), heard=(0, 1)), 0.1)
    peer.receive("q", Heartbeat("q", 7, 1, (), heard=(0, 1)), 0.2)  # q restarted (and proved its round trip)
    hello = peer._heartbeat_for("q")
    assert hello.previous == 3
    fresh = Membership("q", 7, ["p"], CONFIG)
    fresh.start(0.0)
    fresh.receive("p", wire(hello), 0.3)
    assert fresh.previous_life == 3
    # a refutation raises the incarnation within one life: not a previous life
    own = Membership("r", 4, ["p"], CONFIG)
    own.start(0.0)
    own.receive("p", Heartbeat("p", 1, 1, (("r", 4, "suspect", 9),), heard=(4, 1)), 0.1)
    assert own.incarnation == 5
    own.receive("p", Heartbeat("p", 1, 2, (), previous=4), 0.2)
    assert own.previous_life is None


def test_restart_with_the_same_incarnation_bumps_it() -> None:
    """A restart that reuses its old incarnation sees its previous life in the gossip and moves past it."""
    net = cluster(3)
    net.run(10.5)
    net.crash("n3")
    net.run(11.0)
    net.add("n3", incarnation=0)
    net.run(14.0)
    assert net.cores["n3"].incarnation == 1
    for node in ("n1", "n2", "n3"):
        assert net.view(node) == all_alive(net, ["n1", "n2", "n3"])
    assert all(e.status == "alive" for _, _, e in net.reports)


def test_simultaneous_changes_are_reported_in_node_order() -> None:
    """Two members crashing together are reported by one check, sorted by node id."""
    net = cluster(5)
    net.run(10.5)
    net.crash("n5")
    net.crash("n4")
    net.run(30.0)
    for node in ("n1", "n2", "n3"):
        changes = [(round(t, 6), e.node, e.status) for t, n, e in net.reports if n == node and e.node in ("n4", "n5")][2:]
        assert changes == [
            (15.01, "n4", "suspect"),
            (15.01, "n5", "suspect"),
            (20.01, "n4", "dead"),
            (20.01, "n5", "dead"),
        ]


def test_only_two_named_timers_whatever_the_size() -> None:
    """However many members and faults, a core only ever arms "heartbeat" and "check"."""
    net = cluster(6)
    net.run(10.5)
    net.crash("n6")
    net.leave("n5")
    net.run(100.0)
    assert net.timer_names == {HEARTBEAT_TIMER, CHECK_TIMER}


def scenario_reports(seed: int = 7) -> list[tuple[float, str, str, int, str]]:
    """A busy run (joins, loss, crash, partition, heal, leave, restart); its reports, as plain tuples."""
    net = Net(loss=0.1, seed=seed)
    net.add("n1", seeds=())
    for node in ("n2", "n3", "n4", "n5"):
        net.add(node)
    net.run(10.5)
    net.crash("n2")
    net.run(20.0)
    net.partition({"n1", "n3"}, {"n4", "n5"})
    net.run(27.5)
    net.heal()
    net.run(35.0)
    net.leave("n5")
    net.add("n2", incarnation=3)
    net.run(120.0)
    return [(t, n, e.node, e.incarnation, e.status) for t, n, e in net.reports]


def test_two_runs_report_identically() -> None:
    """The same inputs give the same reports, in the same order, at the same times."""
    first = scenario_reports()
    assert first == scenario_reports()
    assert len(first) > 30


def test_same_reports_in_another_process() -> None:
    """Another process with another PYTHONHASHSEED reports exactly the same sequence (no hash-order leaks)."""
    here = Path(__file__).resolve().parent
    code = "import sys; sys.path.insert(0, sys.argv[1]); import test_membership as t; print(repr(t.scenario_reports()))"
    env = {**os.environ, "PYTHONHASHSEED": "987"}
    done = subprocess.run(
        [sys.executable, "-c", code, str(here)],
        cwd=here.parent, env=env, capture_output=True, text=True, check=True, timeout=120,
    )
    assert done.stdout.strip() == repr(scenario_reports())


@settings(max_examples=100, deadline=None)
@given(
    nodes=st.integers(min_value=3, max_value=5),
    loss=st.floats(min_value=0.0, max_value=0.29),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
)
def test_loss_never_kills_a_live_node_and_views_converge(nodes: int, loss: float, seed: int) -> None:
    """Under <30% seeded loss, with suspect_after = 5 heartbeats, no live node is declared dead; healed views agree.

    Why these parameters are safe: every second each node hears from each peer directly
    (lost with p < 0.3) and through every other peer's digest (two hops, lost with
    p < 0.51), so a pair has no fresh evidence for a whole second with p < 0.3 * 0.51 =
    0.15 in a 3-node cluster, and for five seconds in a row with p < 1e-4; and even then
    the suspected node refutes at its next heartbeat, well inside dead_after = 5 s.
    """
    net = Net(loss=loss, seed=seed)
    names = [f"n{i}" for i in range(1, nodes + 1)]
    net.add("n1", seeds=())
    for node in names[1:]:
        net.add(node)
    net.run(60.0)
    net.loss = 0.0
    net.run(70.0)
    assert not [r for r in net.reports if r[2].status in ("dead", "left", "removed")]
    expected = all_alive(net, names)
    for node in names:
        assert net.view(node) == expected
        assert net.cores[node].has_quorum()


# --- one core, line by line -------------------------------------------------------------


def hb(
    node: str,
    seq: int,
    *entries: tuple[str, int, str, int],
    incarnation: int = 0,
    answer: bool = False,
    heard: tuple[int, int] | None = (0, 1),
    learned: bool = False,
) -> Heartbeat:
    """A heartbeat from ``node``; by default it echoes the receiver's first heartbeat at incarnation 0 (a peer that
    has proved its round trip: see "A new member proves a round trip"); ``heard=None`` for a stranger's; ``learned``:
    the sender has learned the view in its life (a live member of the cluster, not one still listening)."""
    return Heartbeat(node, incarnation, seq, tuple(entries), answer, heard=heard, learned=learned)


def joined_core(now: float = 1.0) -> Membership:
    """n1 (a founder) that has heard n2 and n3 (directly) at seq 5, at time ``now``."""
    core = Membership("n1", 0, (), CONFIG)
    core.start(0.0)
    core.receive("n2", hb("n2", 5, ("n2", 0, "alive", 5), ("n3", 0, "alive", 5)), now)
    core.receive("n3", hb("n3", 5, ("n2", 0, "alive", 5), ("n3", 0, "alive", 5)), now)
    return core


def reports(outputs: list[Output]) -> list[tuple[str, int, str]]:
    return [(o.event.node, o.event.incarnation, o.event.status) for o in outputs if isinstance(o, Report) and isinstance(o.event, MemberChanged)]


def test_frames_survive_msgpack() -> None:
    """Every frame is a plain frozen dataclass that msgspec encodes and decodes to an equal value."""
    frames = [hb("n2", 3, ("n1", 0, "alive", 2), ("n3", 4, "dead", 9), answer=True), Leaving("n2", 1, 7)]
    for frame in frames:
        assert wire(frame) == frame


def test_start_hellos_the_seeds_and_arms_the_heartbeat() -> None:
    """start() reports itself alive, sends one heartbeat per seed (never to itself), and arms the heartbeat."""
    core = Membership("n2", 4, ("n1", "n2", "n1", "n3"), CONFIG)
    out = core.start(2.0)
    assert reports(out) == [("n2", 4, "alive")]
    assert [o.to for o in out if isinstance(o, Send)] == ["n1", "n3"]
    assert [o for o in out if isinstance(o, SetTimer)] == [SetTimer(HEARTBEAT_TIMER, 3.0), SetTimer(CHECK_TIMER, 5.0)]  # check: the listen window's end
    with pytest.raises(RuntimeError):
        core.start(2.0)
    with pytest.raises(ValueError):
        core.timer("nope", 3.0)


def test_a_joining_node_has_no_quorum_until_it_hears_a_peer() -> None:
    """A node with other seeds owns nothing while it has heard nobody (it may be a restart, not a founder), nor before its listen window (3 s) ends; a founder alone has a quorum once it has listened."""
    core = Membership("n2", 0, ("n1",), CONFIG)
    core.start(0.0)
    assert core.quorum_counts() == (1, 1) and not core.has_quorum()
    assert reports(core.timer(CHECK_TIMER, 3.0)) == [] and not core.has_quorum() and not core.learned  # listened, heard nobody
    out = core.receive("n1", hb("n1", 9, ("n1", 0, "alive", 9)), 3.5)
    assert core.has_quorum()
    assert reports(out) == [("n1", 0, "alive")]
    assert [o.event for o in out if isinstance(o, Report) and isinstance(o.event, ViewLearned)] == [ViewLearned(2, 2)]
    solo = Membership("solo", 0, (), CONFIG)
    assert not solo.has_quorum()
    solo.start(0.0)
    assert not solo.has_quorum()
    assert [o.event for o in solo.timer(CHECK_TIMER, 3.0) if isinstance(o, Report)] == [ViewLearned(1, 1)]
    assert solo.has_quorum()


def test_unknown_sender_gets_an_immediate_answer_with_the_view() -> None:
    """A heartbeat from an unknown node is answered at once (answer=True), carrying the whole view."""
    core = joined_core()
    out = core.receive("n4", hb("n4", 1, ("n4", 0, "alive", 1)), 1.5)
    sends = [o for o in out if isinstance(o, Send)]
    assert [s.to for s in sends] == ["n4"]
    frame = sends[0].frame
    assert isinstance(frame, Heartbeat) and frame.answer
    assert [e[0] for e in frame.digest] == ["n1", "n2", "n3", "n4"]
    # An answer is never answered back.
    out = core.receive("n5", hb("n5", 1, answer=True), 1.6)
    assert not [o for o in out if isinstance(o, Send)]


def test_check_timer_armed_at_the_earliest_deadline() -> None:
    """"check" is armed for the listen window's end (t=3), then, after hearing a peer at t=1, for t=1+suspect_after; fresher news does not re-arm it."""
    core = Membership("n1", 0, (), CONFIG)
    assert [o for o in core.start(0.0) if isinstance(o, SetTimer)] == [SetTimer(HEARTBEAT_TIMER, 1.0), SetTimer(CHECK_TIMER, 3.0)]
    out = core.receive("n2", hb("n2", 5), 1.0)
    assert not [o for o in out if isinstance(o, (SetTimer, CancelTimer))]  # 3.0 comes first
    out = core.timer(CHECK_TIMER, 3.0)
    assert [o.event for o in out if isinstance(o, Report)] == [ViewLearned(2, 2)]
    assert [o for o in out if isinstance(o, SetTimer)] == [SetTimer(CHECK_TIMER, 6.0)]
    out = core.receive("n2", hb("n2", 6), 2.0)
    assert not [o for o in out if isinstance(o, (SetTimer, CancelTimer))]
    out = core.timer(CHECK_TIMER, 6.0)  # early for the new deadline: nothing changes, it re-arms
    assert reports(out) == [] and [o for o in out if isinstance(o, SetTimer)] == [SetTimer(CHECK_TIMER, 7.0)]
    out = core.timer(CHECK_TIMER, 7.0)
    assert reports(out) == [("n2", 0, "suspect")]
    assert [o for o in out if isinstance(o, SetTimer)] == [SetTimer(CHECK_TIMER, 12.0)]


def test_fresher_gossip_counts_as_hearing() -> None:
    """A greater seq for n3 in n2's digest refreshes n3's last_heard as if n3 had spoken."""
    core = joined_core(1.0)
    core.receive("n2", hb("n2", 6, ("n3", 0, "alive", 8)), 4.0)
    member = core.member("n3")
    assert member is not None and member.last_heard == 4.0 and member.seq == 8
    core.receive("n2", hb("n2", 7, ("n3", 0, "alive", 8)), 5.0)  # the same seq again is no news
    member = core.member("n3")
    assert member is not None and member.last_heard == 4.0


def test_stale_verdicts_are_ignored() -> None:
    """A dead/suspect verdict about n3 based on older evidence than ours is ignored; one as fresh is adopted."""
    core = joined_core()
    out = core.receive("n2", hb("n2", 6, ("n3", 0, "dead", 4)), 2.0)
    assert core.status("n3") == "alive" and reports(out) == []
    out = core.receive("n2", hb("n2", 7, ("n3", 0, "suspect", 5)), 2.1)
    assert core.status("n3") == "suspect" and reports(out) == [("n3", 0, "suspect")]
    # Within one incarnation a status never goes back, however fresh the evidence.
    core.receive("n3", hb("n3", 9), 2.2)
    assert core.status("n3") == "suspect"


def test_higher_incarnation_replaces_whatever_status() -> None:
    """A greater incarnation wins over any status, and a lower one is ignored."""
    core = joined_core()
    core.receive("n2", hb("n2", 6, ("n3", 0, "dead", 5)), 2.0)
    assert core.status("n3") == "dead"
    out = core.receive("n2", hb("n2", 7, ("n3", 1, "alive", 1)), 2.1)
    assert reports(out) == [("n3", 1, "alive")]
    out = core.receive("n2", hb("n2", 8, ("n3", 0, "dead", 99)), 2.2)
    assert core.status("n3") == "alive" and reports(out) == []


def test_a_claim_against_itself_is_refuted_at_once() -> None:
    """Told it is suspect, a node bumps its incarnation, reports it, and heartbeats every member immediately."""
    core = joined_core()
    out = core.receive("n2", hb("n2", 6, ("n1", 0, "suspect", 1)), 2.0)
    assert core.incarnation == 1
    assert reports(out) == [("n1", 1, "alive")]
    sends = [o for o in out if isinstance(o, Send)]
    assert [s.to for s in sends] == ["n2", "n3"]
    assert all(isinstance(s.frame, Heartbeat) and s.frame.incarnation == 1 for s in sends)
    # Its own current record relayed back is not a claim; a greater incarnation (a past life) is.
    core.receive("n2", hb("n2", 7, ("n1", 1, "alive", 1)), 2.1)
    assert core.incarnation == 1
    core.receive("n2", hb("n2", 8, ("n1", 5, "alive", 1)), 2.2)
    assert core.incarnation == 6


def test_leaving_is_left_at_once_and_not_undone_by_late_heartbeats() -> None:
    """Leaving marks the member left; a heartbeat it sent before leaving, arriving late, changes nothing."""
    core = joined_core()
    out = core.receive("n3", Leaving("n3", 0, 6), 2.0)
    assert reports(out) == [("n3", 0, "left")]
    core.receive("n3", hb("n3", 5), 2.1)
    assert core.status("n3") == "left" and core.quorum_counts() == (2, 2)
    assert not core.serving("n3")


def test_a_node_that_left_ignores_everything() -> None:
    """After leave() a core sends Leaving to every member, cancels its timers and answers nothing more."""
    core = joined_core()
    out = core.leave(3.0)
    assert reports(out) == [("n1", 0, "left")]
    sends = [(o.to, o.frame) for o in out if isinstance(o, Send)]
    assert sends == [("n2", Leaving("n1", 0, 1)), ("n3", Leaving("n1", 0, 1))]
    assert CancelTimer(HEARTBEAT_TIMER) in out and CancelTimer(CHECK_TIMER) in out
    assert core.receive("n2", hb("n2", 9, ("n1", 0, "dead", 1)), 3.5) == []
    assert core.timer(HEARTBEAT_TIMER, 4.0) == [] and core.incarnation == 0
    assert not core.has_quorum()


def test_a_removed_node_is_told_its_tombstone() -> None:
    """A heartbeat from a removed node at its old incarnation is ignored but answered with its tombstone."""
    core = Membership("n1", 0, (), MembershipConfig(remove_after=1.0, listen=0.0))
    core.start(0.0)
    core.receive("n2", hb("n2", 3), 0.0)
    core.receive("n3", hb("n3", 3), 0.0)
    out = core.receive("n2", hb("n2", 4, ("n3", 0, "dead", 3)), 0.5)
    assert core.status("n3") == "dead" and SetTimer(CHECK_TIMER, 1.5) in out  # remove_after from the verdict
    out = core.timer(CHECK_TIMER, 1.5)
    assert core.status("n3") == "removed" and reports(out) == [("n3", 0, "removed")]
    out = core.receive("n3", hb("n3", 50), 2.0)
    assert core.status("n3") == "removed"
    (answer,) = [o.frame for o in out if isinstance(o, Send)]
    assert isinstance(answer, Heartbeat) and answer.answer and ("n3", 0, "removed", 3) in answer.digest
    assert ("n3", 0, "removed", 3) not in core._broadcast()[0].frame.digest  # tombstones are for their subject only
    out = core.receive("n3", hb("n3", 1, incarnation=1), 2.1)
    assert core.status("n3") == "alive" and reports(out) == [("n3", 1, "alive")]


def test_ignores_spoofed_and_foreign_frames() -> None:
    """A frame whose sender field is not its source, an unknown status, or an unknown frame type changes nothing."""
    core = joined_core()
    assert core.receive("n2", hb("n9", 1), 2.0) == []
    assert core.receive("n2", Leaving("n3", 0, 9), 2.0) == []
    assert core.receive("n2", "hello", 2.0) == []
    core.receive("n2", hb("n2", 6, ("n3", 0, "zombie", 9)), 2.0)
    assert core.status("n3") == "alive" and core.status("n9") is None


def test_config_rejects_non_positive_timings() -> None:
    """Every timing must be positive: a zero heartbeat or suspicion window is a configuration error."""
    for field in ("heartbeat", "suspect_after", "dead_after", "remove_after"):
        with pytest.raises(ValueError):
            MembershipConfig(**{field: 0.0})
    with pytest.raises(ValueError):
        Membership("n1", -1, (), CONFIG)


# --- learning the view, heard directly (issue 10: #1 and #4) ---------------------------------


def five_nodes_with_two_seeds() -> Net:
    """n1..n5 started at t=0 with seeds n1 and n2 (as ``cluster-random``), all joined and learned by t=10."""
    net = Net()
    for i in range(1, 6):
        net.add(f"n{i}", seeds=("n1", "n2"))
    net.run(10.0)
    return net


def test_two_seeds_restarted_together_own_nothing_until_they_heard_the_majority() -> None:
    """Both seeds of five crash and restart together: they hear each other first (2 of 2 alive) but have no quorum until the listen window is over and they heard n3..n5; then 5 of 5."""
    net = five_nodes_with_two_seeds()
    assert all(net.cores[n].has_quorum() for n in net.cores)
    net.crash("n1")
    net.crash("n2")
    net.run(12.5)
    net.add("n1", seeds=("n1", "n2"), incarnation=1)
    net.add("n2", seeds=("n1", "n2"), incarnation=1)
    net.run(12.5 + 2 * LATENCY)  # their hellos crossed; the live members heartbeat on whole seconds: each sees only the other
    for node in ("n1", "n2"):
        assert sorted(net.view(node)) == ["n1", "n2"] and net.cores[node].quorum_counts() == (2, 2)
        assert not net.cores[node].has_quorum()
    net.run(15.4)  # the live members heartbeat them at 13.0 (they hold them alive or suspect): heard, but still listening
    for node in ("n1", "n2"):
        assert net.cores[node].quorum_counts() == (5, 5) and not net.cores[node].has_quorum()
    net.run(15.5)  # start + listen window (3 heartbeats)
    for node in ("n1", "n2"):
        assert net.cores[node].has_quorum()
    assert [(round(t, 6), n, e.alive, e.members) for t, n, e in net.learned if t > 11] == [(15.5, "n1", 5, 5), (15.5, "n2", 5, 5)]


def test_a_restarted_node_counts_the_members_its_peers_hold_dead() -> None:
    """Told of five members (two of them dead) by n3, a restarted n1 that heard n2 and n3 counts 3 alive of 5: a quorum, reported as ViewLearned(3, 5)."""
    core = Membership("n1", 7, ("n2",), CONFIG)
    core.start(0.0)
    core.receive("n2", hb("n2", 1, ("n2", 3, "alive", 1), heard=(7, 1)), 0.1)
    digest = (("n1", 0, "dead", 40), ("n2", 0, "dead", 40), ("n3", 0, "alive", 50), ("n4", 0, "dead", 30), ("n5", 0, "dead", 30))
    out = core.receive("n3", hb("n3", 50, *digest, heard=(7, 1)), 0.5)
    assert [o.to for o in out if isinstance(o, Send)] == ["n3", "n4", "n5"]  # answer n3 (it holds us dead), probe n4, n5
    assert core.rumours() == ("n4", "n5") and core.quorum_counts() == (3, 3)
    assert [m.node for m in core.members()] == ["n1", "n2", "n3"] and core.ring_nodes() == ("n1", "n2", "n3")
    out = core.timer(CHECK_TIMER, 3.0)
    assert [o.event for o in out if isinstance(o, Report)] == [ViewLearned(3, 5)] and core.has_quorum()


def test_a_restarted_node_without_a_majority_of_the_told_view_has_no_quorum() -> None:
    """A restarted n1 that heard only n3 of a cluster of five (n2, n4, n5 held dead by n3) never counts a quorum, whatever the time: 2 of 5."""
    core = Membership("n1", 7, ("n2",), CONFIG)
    core.start(0.0)
    digest = (("n1", 0, "dead", 40), ("n2", 0, "dead", 40), ("n3", 0, "alive", 50), ("n4", 0, "dead", 30), ("n5", 0, "dead", 30))
    core.receive("n3", hb("n3", 50, *digest, heard=(7, 1)), 0.5)
    core.timer(CHECK_TIMER, 3.0)
    core.receive("n3", hb("n3", 51, *digest, heard=(7, 1)), 4.0)
    assert core.quorum_counts() == (2, 2) and not core.learned and not core.has_quorum()


def test_a_node_named_alive_by_a_live_member_must_answer_before_a_first_quorum() -> None:
    """n3 names n4 and n5 alive: n1 (past its window) learns only once both answered its probes, and then counts them."""
    core = Membership("n1", 7, ("n2",), CONFIG)
    core.start(0.0)
    core.receive("n2", hb("n2", 1, incarnation=3, heard=(7, 1)), 0.1)  # restarted too: a newer incarnation than n3 knows
    digest = (("n1", 0, "dead", 40), ("n2", 0, "dead", 40), ("n3", 0, "alive", 50), ("n4", 0, "alive", 50), ("n5", 0, "alive", 50))
    core.receive("n3", hb("n3", 50, *digest, heard=(7, 1)), 0.5)
    core.timer(CHECK_TIMER, 3.0)
    assert not core.learned  # 3 of 5 heard, but two live members it was told of have not answered
    core.receive("n4", hb("n4", 51, answer=True, heard=(7, 1)), 3.1)
    assert not core.learned and core.rumours() == ("n5",)
    out = core.receive("n5", hb("n5", 51, answer=True, heard=(7, 1)), 3.2)
    assert [o.event for o in out if isinstance(o, Report)] == [MemberChanged("n5", 0, "alive"), ViewLearned(5, 5)]
    assert core.has_quorum() and core.quorum_counts() == (5, 5) and core.rumours() == ()


def test_a_whole_cluster_restarted_regains_quorum() -> None:
    """All five nodes crash and restart 0.4 s apart: nobody remembers anything, and once the last one has listened all five hold 5 of 5 with quorum."""
    net = five_nodes_with_two_seeds()
    for i in range(1, 6):
        net.crash(f"n{i}")
    net.run(20.0)
    for i in (3, 5, 1, 4, 2):
        net.add(f"n{i}", seeds=("n1", "n2"), incarnation=1)
        net.run(net.now + 0.4)
    net.run(25.0)
    for node in net.cores:
        assert net.view(node) == all_alive(net, [f"n{i}" for i in range(1, 6)]) and net.cores[node].has_quorum()


def test_a_forged_digest_adds_no_member_and_the_quorum_holds() -> None:
    """One Heartbeat from stranger x (no echo) naming f1 and f2: x is only a candidate, asked once for its round trip; f1 and f2 are not even probed (a candidate's digest counts for nothing); the view and quorum never change, and x is forgotten 10 s later."""
    core = joined_core()
    core.timer(CHECK_TIMER, 3.0)
    assert core.has_quorum()
    forged = hb("x", 1, ("x", 0, "alive", 1), ("f1", 0, "alive", 1), ("f2", 0, "alive", 1), heard=None)
    out = core.receive("x", wire(forged), 3.5)
    assert [(o.to, o.frame.probe, o.frame.answer, o.frame.heard) for o in out if isinstance(o, Send)] == [("x", True, False, (0, 1))]
    assert reports(out) == [] and core.candidates() == ("x",) and core.rumours() == ()
    assert [m.node for m in core.members()] == ["n1", "n2", "n3"] and core.ring_nodes() == ("n1", "n2", "n3")
    assert core.quorum_counts() == (3, 3) and core.has_quorum()
    assert "x" not in core._targets() and [e[0] for e in core._broadcast()[0].frame.digest] == ["n1", "n2", "n3"]
    t = 4.0
    while t < 80.0:  # n2 and n3 keep heartbeating; x, f1, f2 never speak again
        core.receive("n2", hb("n2", int(t * 10)), t)
        core.receive("n3", hb("n3", int(t * 10)), t)
        core.timer(HEARTBEAT_TIMER, t)
        core.timer(CHECK_TIMER, t)
        assert core.has_quorum() and core.quorum_counts() == (3, 3), t
        assert core.candidates() == (("x",) if t < 13.5 else ()), t
        t += 0.5
    assert core.status("x") is None and core.rumours() == () and not [r for r in reports(out) if r[0] != "n1"]


def test_a_stranger_echoing_another_life_or_an_unsent_seq_is_no_member() -> None:
    """An echo proves a round trip only if it names this life's incarnation and a seq it has sent: (5, 1) from before its birth at 7, (7, 9) past its seq, or an echo carried in an answer, all leave x a candidate."""
    core = Membership("n1", 7, (), CONFIG)
    core.start(0.0)
    core.timer(HEARTBEAT_TIMER, 1.0)  # seq 2
    for heard in ((5, 1), (7, 3), (8, 1)):
        out = core.receive("x", hb("x", 1, heard=heard), 1.5)
        assert reports(out) == [] and [o.to for o in out if isinstance(o, Send)] == ["x"]
    assert core.receive("x", hb("x", 2, answer=True, heard=None), 1.6) == []  # a reply is never answered
    assert core.candidates() == ("x",) and core.status("x") is None
    out = core.receive("x", hb("x", 3, answer=True, heard=(7, 2)), 1.7)
    assert reports(out) == [("x", 0, "alive")] and core.candidates() == ()


def test_a_real_joiner_enters_once_it_has_answered_the_probe() -> None:
    """n4, unknown to founder n1, says hello without an echo: n1 asks (a probe echoing n4's seq 1); n4's answer echoes n1's seq, and only then is n4 a member, with its digest merged."""
    core = joined_core()
    out = core.receive("n4", hb("n4", 1, ("n4", 0, "alive", 1), ("n5", 0, "alive", 1), heard=None), 1.5)
    sends = [o for o in out if isinstance(o, Send)]
    assert [(o.to, o.frame.probe, o.frame.heard) for o in sends] == [("n4", True, (0, 1))]
    assert core.status("n4") is None and core.rumours() == ()
    out = core.receive("n4", hb("n4", 2, ("n4", 0, "alive", 2), ("n5", 0, "alive", 1), answer=True, heard=(0, 1)), 1.52)
    assert reports(out) == [("n4", 0, "alive")] and core.candidates() == () and core.rumours() == ("n5",)
    assert [o.to for o in out if isinstance(o, Send)] == ["n5"]  # n5, named by a member now, is probed


def test_a_forged_restart_of_a_member_is_not_adopted() -> None:
    """A heartbeat claiming n2 restarted (incarnation 9, no echo) is not adopted: n1 keeps n2 at 0 and probes n2, whose answer (at its real incarnation 0) is plain evidence; nobody has to refute anything."""
    core = joined_core()
    out = core.receive("n2", hb("n2", 1, ("n3", 0, "dead", 99), incarnation=9, heard=None), 1.5)
    assert reports(out) == [] and core.member("n2") is not None and core.status("n3") == "alive"
    assert [(o.to, o.frame.probe, o.frame.heard) for o in out if isinstance(o, Send)] == [("n2", True, (9, 1))]
    assert (core.member("n2").incarnation, core.incarnation) == (0, 0)  # type: ignore[union-attr]
    out = core.receive("n2", hb("n2", 6, answer=True, heard=(0, 1)), 1.52)
    assert reports(out) == [] and core.member("n2").seq == 6  # type: ignore[union-attr]


def test_a_stranger_cannot_leave_its_way_into_the_view() -> None:
    """A Leaving from a node n1 has never held mints no record (a left member is removed later: a stranger's would be a tombstone it never earned)."""
    core = joined_core()
    assert core.receive("x", Leaving("x", 0, 1), 1.5) == [] and core.status("x") is None


def test_a_normal_join_costs_one_round_trip_more_on_the_side_that_is_asked() -> None:
    """n3 joins at 10.5 (latency 10 ms): it holds n1 at 10.52 and n2 at 10.54, as before the round-trip rule; n1 holds n3 at 10.53 and n2 at 10.55, one round trip (20 ms) later than before (10.51, 10.53): each first proves n3 answers."""
    net = Net()
    net.add("n1", seeds=())
    net.add("n2")
    net.run(10.5)
    net.add("n3")
    net.run(12.0)
    assert [net.about(a, b) for a, b in (("n3", "n1"), ("n3", "n2"), ("n1", "n3"), ("n2", "n3"))] == [
        [(10.52, "alive", 0)], [(10.54, "alive", 0)], [(10.53, "alive", 0)], [(10.55, "alive", 0)]
    ]
    for node in ("n1", "n2", "n3"):
        assert net.view(node) == all_alive(net, ["n1", "n2", "n3"]) and net.cores[node].has_quorum() == (node != "n3")
    net.run(13.5)  # n3's listen window ends at 13.5
    assert net.cores["n3"].has_quorum()


def test_a_digest_about_an_unknown_node_probes_it_and_it_joins_once_it_answers() -> None:
    """n2's digest names n4: n1 probes n4 at once (a heartbeat it answers), and n4 is a member only once its answer arrives."""
    core = joined_core()
    out = core.receive("n2", hb("n2", 6, ("n4", 0, "alive", 3)), 1.5)
    probes = [o for o in out if isinstance(o, Send)]
    assert [p.to for p in probes] == ["n4"] and isinstance(probes[0].frame, Heartbeat) and not probes[0].frame.answer
    assert core.status("n4") is None and reports(out) == []
    assert "n4" in core._targets()  # probed at every heartbeat while the rumour is fresh
    out = core.receive("n4", hb("n4", 4, answer=True), 1.6)
    assert reports(out) == [("n4", 0, "alive")] and core.rumours() == ()


def test_a_member_the_majority_of_informants_names_is_taken_into_the_view_on_learning() -> None:
    """n4 restarts while n2 is cut off: n1, n3 and n5 (all it hears) name n2 suspect, so on learning n4 takes n2 into its view as suspect and onto its ring (the replica sets agree with the others'); a node named by one informant only is not taken."""
    core = Membership("n4", 9, ("n1", "n2"), CONFIG)
    core.start(0.0)
    for src in ("n1", "n3", "n5"):
        digest = [(n, 0, "alive", 50) for n in ("n1", "n3", "n4", "n5")] + [("n2", 0, "suspect", 40)]
        if src == "n5":
            digest.append(("n6", 0, "dead", 10))
        core.receive(src, hb(src, 50, *digest, heard=(9, 1), learned=True), 0.5)
    assert core.ring_nodes() == ("n1", "n3", "n4", "n5") and core.rumours() == ("n2", "n6")
    out = core.timer(CHECK_TIMER, 3.0)
    assert [o.event for o in out if isinstance(o, Report)] == [MemberChanged("n2", 0, "suspect"), ViewLearned(4, 6)]
    assert core.ring_nodes() == ("n1", "n2", "n3", "n4", "n5") and core.status("n6") is None
    assert core.quorum_counts() == (4, 5) and core.has_quorum()


def test_a_restarted_node_that_hears_only_nodes_that_remember_nothing_does_not_learn() -> None:
    """Swarm seed 1563: n2 (a seed) restarts while every member that holds the view is paused or cut off; it hears only
    n7, restarted too (still listening: it learned nothing), and never seed n1: it does not take {n2, n7} for the
    cluster, however long; members that learned the view (n4, n3, naming seven) are the cluster it learns, once it hears
    four of the seven.

    Before the fix n2 learned ViewLearned(2, 2) at the end of its window and acquired keys at round 1 from nothing
    while n3 held them (epochs_only_grow, single_writer_per_epoch, owed_writes_found)."""
    core = Membership("n2", 9, ("n1", "n2"), CONFIG)
    core.start(0.0)
    core.receive("n7", hb("n7", 2, ("n2", 9, "alive", 1), ("n7", 4, "alive", 2), incarnation=4, heard=(9, 1)), 0.5)
    for t in (3.0, 10.0, 30.0):
        core.receive("n7", hb("n7", int(t), ("n2", 9, "alive", 1), ("n7", 4, "alive", int(t)), incarnation=4, heard=(9, 1)), t)
        out = core.timer(CHECK_TIMER, t)
        assert [o.event for o in out if isinstance(o, Report) and isinstance(o.event, ViewLearned)] == [], t
        assert not core.learned and not core.has_quorum() and core.quorum_counts() == (2, 2), t
    digest = [(n, 0, "dead", 20) for n in ("n1", "n2", "n5", "n6", "n7")] + [("n3", 0, "alive", 40), ("n4", 0, "alive", 40)]
    core.receive("n4", hb("n4", 40, *digest, heard=(9, 1), learned=True), 30.5)
    assert not core.learned and core.quorum_counts() == (3, 3)  # 3 alive of the 7 n4 names: no quorum, nothing learned
    out = core.receive("n3", hb("n3", 40, *digest, heard=(9, 1), learned=True), 30.6)
    assert [o.event for o in out if isinstance(o, Report) and isinstance(o.event, ViewLearned)] == [ViewLearned(4, 7)]
    assert core.ring_nodes() == ("n1", "n2", "n3", "n4", "n5", "n6", "n7") and core.has_quorum()


def test_seeds_that_all_remember_nothing_found_the_cluster_together() -> None:
    """With nobody that learned the view to hear, n3 learns once it has heard every other seed (n1 and n2, both still
    listening): the seeds found the cluster, 3 of 3, as a whole cluster started (or restarted) together does."""
    core = Membership("n3", 0, ("n1", "n2"), CONFIG)
    core.start(0.0)
    core.receive("n1", hb("n1", 2, ("n1", 0, "alive", 2), ("n3", 0, "alive", 1)), 0.1)
    assert core.timer(CHECK_TIMER, 3.0) == [SetTimer(CHECK_TIMER, 5.1)] and not core.learned  # n2 not heard yet
    out = core.receive("n2", hb("n2", 2, ("n2", 0, "alive", 2), ("n3", 0, "alive", 1)), 3.5)
    assert [o.event for o in out if isinstance(o, Report)] == [MemberChanged("n2", 0, "alive"), ViewLearned(3, 3)]
    assert core.has_quorum()


def test_on_learning_only_informants_that_learned_the_view_vouch_for_a_member() -> None:
    """Swarm seed 679: n4 restarts while n2 and n6 are paused (dead to n1); it hears n1, which learned the view and names
    them, and n3 and n5, restarted and still listening, which name neither: n2 and n6 are taken onto its ring (one of
    one voter), so the ring, and every key's replica set, is n1's; a restarted informant's silence proves nothing.

    Before the fix n2 and n6 were named by one informant of three: counted in the quorum (4 of 6) but left off the
    ring, and n4 acquired sw_kept[d0] at round 1 over replicas that held nothing while n2 and n6 held version 5."""
    core = Membership("n4", 9, ("n1", "n2"), CONFIG)
    core.start(0.0)
    full = [(n, 0, "alive", 50) for n in ("n1", "n3", "n4", "n5")] + [("n2", 0, "dead", 40), ("n6", 0, "dead", 40)]
    core.receive("n1", hb("n1", 50, *full, heard=(9, 1), learned=True), 0.5)
    for src in ("n3", "n5"):
        core.receive(src, hb(src, 3, *[(n, 0, "alive", 3) for n in ("n1", "n3", "n4", "n5")], heard=(9, 1)), 0.5)
    out = core.timer(CHECK_TIMER, 3.0)
    assert [o.event for o in out if isinstance(o, Report)] == [
        MemberChanged("n2", 0, "dead"), MemberChanged("n6", 0, "dead"), ViewLearned(4, 6)
    ]
    assert core.ring_nodes() == ("n1", "n2", "n3", "n4", "n5", "n6") and core.quorum_counts() == (4, 6)
    ring = Ring(core.ring_nodes())
    assert ring.replicas("sw_kept", "d0", 3) == Ring(("n1", "n2", "n3", "n4", "n5", "n6")).replicas("sw_kept", "d0", 3)


# --- doubt: when a node learns that others may have stopped hearing it -----------------------


def test_a_heartbeat_due_far_too_late_reports_a_frozen_node() -> None:
    """A heartbeat timer that fires more than suspect_after after its due reports Doubted (frozen); one on time does not."""
    core = Membership("n1", 1, ["n1"], MembershipConfig(heartbeat=1.0, suspect_after=5.0, dead_after=5.0, listen=0))
    core.start(0.0)
    on_time = [o.event for o in core.timer(HEARTBEAT_TIMER, 1.0) if isinstance(o, Report) and isinstance(o.event, Doubted)]
    assert on_time == []
    late = [o.event for o in core.timer(HEARTBEAT_TIMER, 8.5) if isinstance(o, Report) and isinstance(o.event, Doubted)]
    assert late == [Doubted("frozen: the heartbeat came due 6.500 s late")]


def test_the_majority_side_of_a_healed_partition_does_not_doubt_itself() -> None:
    """After a partition long enough for both sides to declare the other dead, only the cut-off node doubts nothing
    either: the verdicts each side hears come from members it held dead, so refuting them is no doubt."""
    net = cluster(3)
    net.run(10.5)
    net.partition({"n1", "n2"}, {"n3"})
    net.run(25.0)
    assert net.view("n1")["n3"][1] == "dead" and net.view("n3")["n1"][1] == "dead"
    net.heal()
    net.run(35.0)
    assert net.view("n1")["n3"][1] == "alive" and net.view("n3")["n1"][1] == "alive"
    assert net.doubts == []


def test_a_claim_of_death_from_a_member_heard_fine_is_a_doubt() -> None:
    """A member this node holds alive says it is dead (a one-way cut: they stopped hearing it): Doubted names that member."""
    net = cluster(3)
    net.run(10.5)
    core = net.cores["n1"]
    me = core.incarnation
    n2 = next(m for m in core.members() if m.node == "n2")
    frame = Heartbeat("n2", n2.incarnation, 999, (("n1", me, "dead", 1),), heard=(me, 1))
    out = core.receive("n2", frame, 10.6)
    doubts = [o.event for o in out if isinstance(o, Report) and isinstance(o.event, Doubted)]
    assert doubts == [Doubted("n2, heard fine until now, held it dead")]
    assert core.incarnation == me + 1


# --- the remembered view: what a node's disk says its previous life had learned -------------------------------


def _learned(out: list[Output]) -> list[ViewLearned]:
    return [o.event for o in out if isinstance(o, Report) and isinstance(o.event, ViewLearned)]


def _seed_848(recall: bool) -> Membership:
    """n1 (seed, with n2) back from a crash; it hears n2 and n4, both restarted and still listening, never n3 or n5."""
    core = Membership("n1", 9, ("n1", "n2"), CONFIG, recall=recall)
    core.start(0.0)
    if recall:
        core.recall([("n2", 3), ("n3", 2), ("n4", 5), ("n5", 1)], 0.001)
    for src, incarnation in (("n2", 7), ("n4", 8)):
        core.receive(src, hb(src, 2, (src, incarnation, "alive", 2), ("n1", 9, "alive", 1), incarnation=incarnation, heard=(9, 1)), 0.5)
    return core


def test_seeds_that_remember_five_members_learn_three_of_five_not_a_cluster_of_three() -> None:
    """Swarm seed 848: seeds n1 and n2 and n4 restart while n3 and n5 are paused; n1's disk remembers the five, so it
    learns 3 of 5 with n3 and n5 dead on its ring (each key keeps its replica set); with no disk it founds {n1, n2, n4}."""
    core = _seed_848(recall=True)
    assert _learned(core.timer(CHECK_TIMER, 3.0)) == [ViewLearned(3, 5)]
    assert core.ring_nodes() == ("n1", "n2", "n3", "n4", "n5") and core.quorum_counts() == (3, 5)
    assert (core.status("n3"), core.status("n5")) == ("dead", "dead")
    without = _seed_848(recall=False)
    assert _learned(without.timer(CHECK_TIMER, 3.0)) == [ViewLearned(3, 3)]
    assert without.ring_nodes() == ("n1", "n2", "n4")


def test_a_node_with_a_disk_learns_nothing_before_the_disk_was_read() -> None:
    """With recall=True nothing is learned, window over or not, until ``recall``; an empty recall (nothing on the disk)
    learns as a node without a disk does; a second recall is refused."""
    core = Membership("n3", 0, ("n1", "n2"), CONFIG, recall=True)
    core.start(0.0)
    for src in ("n1", "n2"):
        core.receive(src, hb(src, 2, (src, 0, "alive", 2), ("n3", 0, "alive", 1)), 0.1)
    assert _learned(core.timer(CHECK_TIMER, 3.0)) == [] and not core.learned
    assert _learned(core.recall([], 3.2)) == [ViewLearned(3, 3)]
    with pytest.raises(RuntimeError, match="recalled its view already"):
        core.recall([], 3.3)


def test_a_remembered_member_is_alive_once_heard_of_and_its_no_evidence_verdict_is_news_to_nobody() -> None:
    """A remembered member is dead on no evidence (verdict seq 0, in the digest as such): its heartbeat at that incarnation
    makes it alive at once (no refutation needed); that verdict about a node is adopted by nobody who knows it, and
    about oneself is not refuted (no new incarnation, no doubt)."""
    core = Membership("n1", 9, ("n1", "n2"), CONFIG, recall=True)
    core.start(0.0)
    core.recall([("n2", 3), ("n3", 4)], 0.0)
    assert ("n3", 4, "dead", 0) in core._digest()
    out = core.receive("n3", hb("n3", 7, ("n3", 4, "alive", 7), incarnation=4, heard=(9, 1)), 0.5)
    assert reports(out) == [("n3", 4, "alive")] and core.member("n3") is not None and core.member("n3").seq == 7  # type: ignore[union-attr]
    other = joined_core()
    before = other.incarnation
    out = other.receive("n2", hb("n2", 6, ("n1", 0, "dead", 0), ("n3", 0, "dead", 0)), 1.5)
    assert reports(out) == [] and other.incarnation == before and other.status("n3") == "alive"


def test_the_view_of_members_that_know_the_cluster_replaces_the_disks() -> None:
    """n1 remembers n2..n6; n2, which learned the view, names n1..n5 (n6 was removed while n1 was down) with n3 dead:
    on learning n6 leaves n1's view (reported removed) and n3 is held as n2 tells it (its verdict's seq, not 0)."""
    core = Membership("n1", 9, ("n1", "n2"), CONFIG, recall=True)
    core.start(0.0)
    core.recall([("n2", 3), ("n3", 2), ("n4", 5), ("n5", 1), ("n6", 1)], 0.0)
    digest = [("n2", 3, "alive", 40), ("n3", 2, "dead", 30), ("n4", 5, "alive", 40), ("n5", 1, "alive", 40)]
    core.receive("n2", hb("n2", 40, *digest, incarnation=3, heard=(9, 1), learned=True), 0.5)
    for src, incarnation in (("n4", 5), ("n5", 1)):
        core.receive(src, hb(src, 40, *digest, incarnation=incarnation, heard=(9, 1), learned=True), 0.6)
    out = core.timer(CHECK_TIMER, 3.0)
    assert reports(out) == [("n3", 2, "dead"), ("n6", 1, "removed")] and _learned(out) == [ViewLearned(4, 5)]
    assert core.ring_nodes() == ("n1", "n2", "n3", "n4", "n5") and core.member("n6") is None
    assert ("n3", 2, "dead", 30) in core._digest()


def test_the_remembered_list_is_the_learned_members_and_changes_with_membership_not_with_status() -> None:
    """``remembered()`` is empty until the view is learned, then every other member not removed with its incarnation; a
    member turning suspect leaves it as it was (no write per heartbeat or verdict), a new incarnation changes it."""
    core = Membership("n1", 0, (), CONFIG)
    core.start(0.0)
    assert core.remembered() == ()
    core.receive("n2", hb("n2", 5, ("n2", 0, "alive", 5)), 1.0)
    core.receive("n3", hb("n3", 5, ("n3", 0, "alive", 5)), 1.0)
    core.timer(CHECK_TIMER, 3.0)
    assert core.learned and core.remembered() == (("n2", 0), ("n3", 0))
    core.receive("n2", hb("n2", 9, ("n2", 0, "alive", 9)), 5.5)
    core.timer(CHECK_TIMER, 6.5)
    assert core.status("n3") == "suspect" and core.remembered() == (("n2", 0), ("n3", 0))
    core.receive("n3", hb("n3", 1, ("n3", 2, "alive", 1), incarnation=2), 7.0)
    assert core.remembered() == (("n2", 0), ("n3", 2))


def test_a_life_born_below_its_remembered_previous_life_refutes_and_is_heard_again() -> None:
    """Swarm seed 749: n4 restarts under a wall clock stepped back (incarnation 5, its previous life 9); n1's disk holds it
    dead at 9 on no evidence, which n4 must refute (a previous life's record: 10, with the previous life noted), or n1
    ignores every heartbeat of the lower life and keeps it dead (never an owner) for good; at its own incarnation the
    same verdict is still news to nobody."""
    n1 = Membership("n1", 20, (), CONFIG, recall=True)
    n1.start(0.0)
    n1.recall([("n4", 9)], 0.0)
    n4 = Membership("n4", 5, ("n1",), CONFIG)
    n4.start(0.0)
    n1.receive("n4", wire(n4._heartbeat_for("n1")), 0.01)
    assert n1.member("n4") is not None and (n1.member("n4").incarnation, n1.status("n4")) == (9, "dead")  # type: ignore[union-attr]
    out = n4.receive("n1", wire(n1._heartbeat_for("n4")), 0.02)
    assert ("n4", 9, "dead", 0) in n1._digest()
    assert ("n4", 10, "alive") in reports(out) and n4.incarnation == 10 and n4.previous_life == 9
    n1.receive("n4", wire(n4._heartbeat_for("n1")), 0.03)
    assert (n1.member("n4").incarnation, n1.status("n4")) == (10, "alive")  # type: ignore[union-attr]
    same = Membership("n4", 9, ("n1",), CONFIG)
    same.start(0.0)
    out = same.receive("n1", wire(n1._heartbeat_for("n4", digest=(("n1", 20, "alive", 1), ("n4", 9, "dead", 0)))), 0.04)
    assert same.incarnation == 9 and same.previous_life is None and ("n4", 9, "alive") not in reports(out)
