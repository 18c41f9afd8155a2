"""The cluster's wire codec and asyncio driver: frames as bytes, cores on a loop, membership in the simulated world.

The wire tests prove every protocol frame crosses as bytes and that decoding is closed to
anything unregistered. The driver tests run a scripted core on a real asyncio loop (virtual
time) to pin down timers, loop-back and rejection. The world tests run the real
``MembershipService`` on five simulated nodes, each on its own ``VirtualLoop`` and
``SimEndpoint``: the very objects a TCP transport will drive, with exact virtual times.
"""

from __future__ import annotations

import asyncio
import gc
import os
import pickle
import random
import subprocess
import sys
import weakref
from pathlib import Path
from collections.abc import Iterable
from typing import Any

import msgspec
import pytest

from casty.protocol import membership, replication
from casty.cluster.driver import (
    MEMBERSHIP_CHANNEL,
    CoreDriver,
    Dispatcher,
    FrameRejected,
    MembershipService,
)
from casty.protocol.membership import Heartbeat, Leaving, MemberChanged, MembershipConfig
from casty.protocol.replication import Ack, Epoch, Nack, Prepare, Promise, Snapshot, Stamp, Write
from casty.protocol.sansio import CancelTimer, Output, Report, Send, SetTimer
from casty.protocol.wire import WIRE_VERSION, Envelope, Wire, WireError
from casty.observer import Event
from sim.network import Latency, LinkModel
from sim.world import World
from tests.conftest import run_virtual

ALL_FRAMES = (*membership.FRAMES, *replication.FRAMES)
WIRE = Wire(ALL_FRAMES)
_RAW = msgspec.msgpack.Encoder()

# ================================================================================= wire ====

E1 = Epoch(3, "n1#2")
E2 = Epoch(4, "n2#1")
SAMPLES: list[object] = [
    Heartbeat("n1", 2, 17, (("n1", 2, "alive", 17), ("n2", 0, "suspect", 9)), answer=True),
    Heartbeat("n2", 0, 1, ()),
    Leaving("n3", 1, 42),
    Prepare(("app:Counter", "k1"), E1),
    Promise(("app:Counter", "k1"), E1, Stamp(E2, 7), {"@state": b"\x00\x01", "@active": b""}),
    Write(("app:Counter", "k1"), E2, 8, {"@state": b"\xff" * 300}),
    Ack(("app:Counter", "k1"), E2, 8),
    Nack(("app:Counter", "k1"), E1, None, E2),
    Nack(("app:Counter", "k1"), E1, 5, E2),
    Snapshot(("app:Counter", "k2"), E2, Stamp(E1, 1), {}),
]


def test_every_frame_class_of_membership_and_replication_round_trips() -> None:
    """Each registered frame class comes back equal, with Epoch/Stamp as NamedTuples and tuples as tuples."""
    assert {type(s) for s in SAMPLES} == set(ALL_FRAMES), "a frame class has no sample"
    for sample in SAMPLES:
        data = WIRE.encode("x", sample)
        assert isinstance(data, bytes)
        envelope = WIRE.decode(data)
        assert envelope == Envelope("x", sample)
        frame = envelope.frame
        assert type(frame) is type(sample)
        for name in ("epoch", "promised", "stamp"):
            value = getattr(frame, name, None)
            if value is not None:
                assert type(value) is type(getattr(sample, name))
        if isinstance(frame, (Promise, Snapshot)):
            assert type(frame.stamp) is Stamp and type(frame.stamp.epoch) is Epoch
        if isinstance(frame, Heartbeat):
            assert type(frame.digest) is tuple and all(type(e) is tuple for e in frame.digest)
        if hasattr(frame, "entity"):
            assert type(frame.entity) is tuple


def test_wire_layout_is_version_channel_tag_body() -> None:
    """The bytes are a msgpack array [1, channel, tag, {field: value}], tags being the class qualnames unless overridden."""
    data = WIRE.encode("m", Leaving("n3", 1, 42))
    assert msgspec.msgpack.decode(data) == [WIRE_VERSION, "m", "Leaving", {"node": "n3", "incarnation": 1, "seq": 42}]
    assert list(WIRE.tags) == [cls.__qualname__ for cls in ALL_FRAMES]
    short = Wire(ALL_FRAMES, tags={Heartbeat: "m.hb"})
    assert msgspec.msgpack.decode(short.encode("m", SAMPLES[1]))[2] == "m.hb"
    assert short.decode(short.encode("m", SAMPLES[1])).frame == SAMPLES[1]
    with pytest.raises(WireError) as info:  # the default tag is not known to a wire that renamed it
        short.decode(WIRE.encode("m", SAMPLES[1]))
    assert info.value.reason == "tag"


def test_registry_refuses_tag_clashes_and_unregistered_classes() -> None:
    """Two classes with one tag, a non-frame class, or a stray tag override fail when the Wire is built."""

    class Ack:  # noqa: F811 - same qualname as replication.Ack on purpose
        pass

    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Other:
        x: int

    Other.__qualname__ = "Ack"
    with pytest.raises(ValueError, match="both have the tag 'Ack'"):
        Wire((*replication.FRAMES, Other))
    Wire((*replication.FRAMES, Other), tags={Other: "other.ack"})  # an explicit tag resolves it
    with pytest.raises(TypeError, match="frozen dataclass"):
        Wire((Ack,))
    with pytest.raises(ValueError, match="not registered"):
        Wire(membership.FRAMES, tags={Prepare: "r.p"})
    with pytest.raises(WireError) as info:
        Wire(membership.FRAMES).encode("r", SAMPLES[3])
    assert info.value.reason == "encode" and "Prepare" in str(info.value)
    with pytest.raises(WireError, match="channel"):
        WIRE.encode("", SAMPLES[2])


@pytest.mark.parametrize(
    ("data", "reason", "words"),
    [
        (b"", "garbage", "truncated"),
        (b"\xc1", "garbage", "not a cluster frame"),
        (b"hello world", "garbage", "not a cluster frame"),
        (_RAW.encode({"tag": "Heartbeat"}), "garbage", "expected msgpack"),
        (_RAW.encode([WIRE_VERSION, "m", "Heartbeat"]), "garbage", "not a cluster frame"),
        (_RAW.encode([WIRE_VERSION + 1, "m", "Leaving", {}]), "version", f"wire version {WIRE_VERSION + 1}"),
        (_RAW.encode([WIRE_VERSION, "", "Leaving", {}]), "channel", "invalid channel"),
        (_RAW.encode([WIRE_VERSION, "m", "Gossip", {}]), "tag", "unknown frame tag 'Gossip'"),
        (_RAW.encode([WIRE_VERSION, "m", "os:system", ["rm -rf /"]]), "tag", "unknown frame tag 'os:system'"),
        (_RAW.encode([WIRE_VERSION, "m", "Leaving", {"node": 3, "incarnation": 1, "seq": 1}]), "body", "Expected `str`, got `int`"),
        (_RAW.encode([WIRE_VERSION, "m", "Leaving", {"node": "n1"}]), "body", "missing required field"),
        (_RAW.encode([WIRE_VERSION, "r", "Ack", {"entity": ["a"], "epoch": [1, "n"], "version": 1}]), "body", "Ack"),
        (pickle.dumps(Leaving("n3", 1, 42)), "garbage", "not a cluster frame"),
    ],
)
def test_garbage_and_unknown_tags_raise_wire_error(data: bytes, reason: str, words: str) -> None:
    """Bytes that are not a registered frame raise WireError with a reason and a message naming the fault."""
    with pytest.raises(WireError) as info:
        WIRE.decode(data)
    assert info.value.reason == reason
    assert words.lower() in str(info.value).lower()


def test_random_and_truncated_bytes_only_ever_raise_wire_error() -> None:
    """Seeded random bytes, and every prefix or bit flip of a real frame, decode or raise WireError, nothing else."""
    rng = random.Random(7)
    good = [WIRE.encode("r", s) for s in SAMPLES]
    cases = [rng.randbytes(rng.randrange(0, 64)) for _ in range(500)]
    for data in good:
        cases.extend(data[:cut] for cut in range(len(data)))
        cases.append(data + b"\x00")  # trailing bytes
        for _ in range(20):
            flipped = bytearray(data)
            flipped[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
            cases.append(bytes(flipped))
    rejected = 0
    for data in cases:
        try:
            envelope = WIRE.decode(data)
        except WireError:
            rejected += 1
        else:
            assert type(envelope.frame) in ALL_FRAMES
    assert rejected > len(cases) // 2


def test_decoding_never_imports() -> None:
    """Tags naming modules (os, subprocess, antigravity, pickle payloads) import nothing: sys.modules is unchanged."""
    wire = Wire(ALL_FRAMES)
    hostile = [
        _RAW.encode([WIRE_VERSION, "m", tag, {}])
        for tag in ("antigravity", "antigravity:fly", "this:s", "os:system", "subprocess:Popen", "builtins:eval", "__import__")
    ]
    hostile.append(pickle.dumps(object()))
    hostile.append(_RAW.encode([WIRE_VERSION, "m", "casty.protocol.membership:Heartbeat", {}]))
    good = [wire.encode("m", s) for s in SAMPLES]
    before = set(sys.modules)
    for data in hostile:
        with pytest.raises(WireError):
            wire.decode(data)
    for data in good:
        wire.decode(data)
    assert set(sys.modules) == before
    assert "antigravity" not in sys.modules and "this" not in sys.modules


# =============================================================================== driver ====


class FakeTransport:
    """A Transport that keeps what it is asked to send."""

    def __init__(self, node: str) -> None:
        self._node = node
        self.handler: Any = None
        self.sent: list[tuple[str, bytes]] = []

    @property
    def node(self) -> str:
        return self._node

    def send(self, destination: str, frame: bytes) -> None:
        self.sent.append((destination, frame))

    def set_handler(self, handler: Any) -> None:
        self.handler = handler

    async def close(self) -> None:
        pass


class ScriptedCore:
    """A core that logs its inputs (with their times) and answers with outputs the test queues."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str, object, float]] = []
        self.next: list[Output] = []

    def receive(self, src: str, frame: object, now: float) -> list[Output]:
        self.log.append(("frame", src, frame, now))
        out, self.next = self.next, []
        return out

    def timer(self, name: str, now: float) -> list[Output]:
        self.log.append(("timer", name, None, now))
        out, self.next = self.next, []
        return out


def test_driver_timers_rearm_past_deadlines_cancel_and_close() -> None:
    """One loop timer per name: re-arming replaces, a past time fires on the next turn, CancelTimer and close() disarm."""

    async def main(_clock: object) -> list[tuple[str, str, object, float]]:
        loop = asyncio.get_running_loop()
        core = ScriptedCore()
        driver = CoreDriver(core, channel="t", transport=FakeTransport("a"), wire=WIRE, on_report=lambda e: None)
        t0 = loop.time()
        driver.perform([SetTimer("x", t0 + 5), SetTimer("y", t0 + 3), SetTimer("x", t0 + 2)])  # x re-armed earlier
        assert driver.timers == ["x", "y"]
        await asyncio.sleep(2.5)
        driver.perform([SetTimer("late", t0 - 100), CancelTimer("y")])
        await asyncio.sleep(0)
        driver.perform([SetTimer("z", loop.time() + 10)])
        driver.close()
        await asyncio.sleep(20)
        assert driver.timers == []
        return [(kind, name, frame, round(now - t0, 9)) for kind, name, frame, now in core.log]

    assert run_virtual(main) == [("timer", "x", None, 2.0), ("timer", "late", None, 2.5)]


def test_driver_sends_bytes_loops_back_to_itself_and_reports() -> None:
    """Send encodes on the driver's channel; a Send to self arrives through the dispatcher as a copy; Report goes to on_report."""

    async def main(_clock: object) -> None:
        transport = FakeTransport("a")
        core = ScriptedCore()
        reports: list[object] = []
        driver = CoreDriver(core, channel="r", transport=transport, wire=WIRE, on_report=reports.append)
        write = Write(("t", "k"), E1, 1, {"p": b"1"})
        driver.perform([Send("b", write), Send("a", write), Report("hello")])
        assert [(to, WIRE.decode(data)) for to, data in transport.sent] == [("b", Envelope("r", write))]
        assert reports == ["hello"] and core.log == []  # the loop-back waits for the next loop turn
        await asyncio.sleep(0)
        ((kind, src, frame, _now),) = core.log
        assert (kind, src, frame) == ("frame", "a", write) and frame is not write  # bytes in between
        transport.handler("b", WIRE.encode("r", SAMPLES[6]))  # a frame from the network
        assert core.log[-1][:3] == ("frame", "b", SAMPLES[6])

    run_virtual(main)


def test_a_dispatcher_dies_with_its_transport_and_lives_while_the_transport_does() -> None:
    """Dispatcher.of keeps neither side alive: dropped with its transport, it is collected; a live transport keeps the same one."""
    kept, dropped = FakeTransport("a"), FakeTransport("b")
    dispatcher = Dispatcher.of(kept, WIRE)
    gone = weakref.ref(Dispatcher.of(dropped, WIRE))
    seen = weakref.ref(dropped)
    del dispatcher, dropped
    gc.collect()
    assert (gone(), seen()) == (None, None)
    assert Dispatcher.of(kept, WIRE) is kept.handler.__self__ and Dispatcher.of(kept, WIRE).transport is kept


def test_dispatcher_routes_by_channel_and_drops_bad_frames_without_raising() -> None:
    """One dispatcher per transport: channels route to their drivers; garbage and unserved channels become FrameRejected."""

    async def main(_clock: object) -> None:
        transport = FakeTransport("a")
        rejected: list[Event] = []
        dispatcher = Dispatcher.of(transport, WIRE, observer=rejected.append)
        m_core, r_core = ScriptedCore(), ScriptedCore()
        CoreDriver(m_core, channel="m", transport=transport, wire=WIRE, on_report=print)
        r_driver = CoreDriver(r_core, channel="r", transport=transport, wire=WIRE, on_report=print)
        assert Dispatcher.of(transport, WIRE) is dispatcher and dispatcher.channels == ["m", "r"]
        with pytest.raises(ValueError, match="another Wire"):
            Dispatcher.of(transport, Wire(ALL_FRAMES))
        with pytest.raises(ValueError, match="served already"):
            CoreDriver(ScriptedCore(), channel="m", transport=transport, wire=WIRE, on_report=print)
        transport.handler("b", WIRE.encode("m", SAMPLES[2]))
        transport.handler("c", WIRE.encode("r", SAMPLES[6]))
        transport.handler("c", b"\x00garbage")
        transport.handler("c", WIRE.encode("q", SAMPLES[6]))
        r_driver.close()
        transport.handler("c", WIRE.encode("r", SAMPLES[6]))
        assert [e[1] for e in m_core.log] == ["b"] and [e[1] for e in r_core.log] == ["c"]
        assert [(e.src, e.channel, e.reason) for e in rejected if isinstance(e, FrameRejected)] == [
            ("c", None, "garbage"),
            ("c", "q", "channel"),
            ("c", "r", "channel"),
        ]
        assert (dispatcher.delivered, dispatcher.rejected) == (2, 3)

    run_virtual(main)


# ======================================================================== the sim world ====

NODES = [f"n{i}" for i in range(1, 6)]
LATENCY = 0.010
CONFIG = MembershipConfig(heartbeat=1.0, suspect_after=5.0, dead_after=5.0, remove_after=60.0)
NS = 1_000_000_000


def ns(seconds: float) -> int:
    return round(seconds * NS)


class Cluster:
    """Five simulated nodes, each with a MembershipService on its own loop and endpoint; changes go to the trace."""

    def __init__(self, seed: int, link: LinkModel | None = None) -> None:
        self.world = World(seed, network=link or LinkModel(latency=Latency(LATENCY, 0.0)))
        self.services: dict[str, MembershipService] = {}
        self.wire = Wire(ALL_FRAMES)  # one per process, shared by every node, as a real process would
        for name in NODES:
            self.world.add_node(name)
            self.start(name)

    def start(self, name: str) -> None:
        """Build the node's service ON its loop (a task of the node), with the node's incarnation."""
        node = self.world.node(name)
        world = self.world

        def observe(event: Event) -> None:
            if isinstance(event, MemberChanged):
                world.record(name, "member.changed", {"member": event.node, "incarnation": event.incarnation, "status": event.status})
            else:
                world.record(name, event.kind, {})

        async def build(_system: object) -> None:
            assert node.endpoint is not None
            self.services[name] = MembershipService(name, node.incarnation, NODES, CONFIG, node.endpoint, self.wire, observe)

        self.world.spawn(name, build)

    def run(self, until: float) -> None:
        self.world.run(until=until)

    def view(self, name: str) -> dict[str, str]:
        return {m.node: m.status for m in self.services[name].members()}

    def changes(self, subject: str, *, observers: Iterable[str] = NODES) -> dict[str, list[tuple[int, int, str]]]:
        """(t_ns, incarnation, status) of each observer's member.changed rows about ``subject``."""
        return {
            name: [(r.t_ns, r.fields["incarnation"], r.fields["status"]) for r in self.world.trace.of("member.changed", node=name, member=subject)]
            for name in observers
        }

    def start_ns(self, name: str) -> int:
        """When the node's service started: its report about itself (the first heartbeat's instant)."""
        return self.world.trace.of("member.changed", node=name, member=name)[0].t_ns


@pytest.fixture
def cluster() -> Iterable[Cluster]:
    c = Cluster(seed=1)
    yield c
    c.world.close()


def test_five_simulated_nodes_converge_to_alive_within_a_heartbeat(cluster: Cluster) -> None:
    """Every node starts its service on its own VirtualLoop; all five see all five alive one latency later, with quorum once the listen window (3 heartbeats) is over."""
    cluster.run(until=0.5)
    t0 = cluster.start_ns("n1")
    assert all(cluster.start_ns(n) == t0 for n in NODES)  # the services start with their systems
    assert t0 < ns(0.01)
    for name in NODES:
        assert cluster.view(name) == dict.fromkeys(NODES, "alive")
        assert not cluster.services[name].has_quorum()  # still listening: it might be back from a crash
    cluster.run(until=3.5)
    for name in NODES:
        assert cluster.services[name].has_quorum()
        assert all(cluster.services[name].serving(n) for n in NODES)
        # every other member became alive when its probe, echoing the hellos that crossed, arrived: two link latencies
        # after the start (a new member proves a round trip: a hello alone is a candidate)
        for subject in NODES:
            if subject != name:
                assert cluster.changes(subject, observers=[name])[name] == [(t0 + 2 * ns(LATENCY), 1, "alive")]
    rows = cluster.world.trace.of("member.changed")
    assert len(rows) == 25 and {r.fields["status"] for r in rows} == {"alive"}
    cluster.run(until=10.0)
    assert len(cluster.world.trace.of("member.changed")) == 25  # and nobody was suspected since
    assert cluster.world.trace.of("frame.rejected") == []


def test_crash_is_suspect_after_then_dead_after_at_exact_virtual_times_and_restart_rejoins(cluster: Cluster) -> None:
    """world.crash(n3): each survivor holds n3 suspect 5 s after its last heartbeat arrived and dead 5 s later; restarted, n3 is back at incarnation 2."""
    cluster.run(until=20.5)
    t0 = cluster.start_ns("n3")
    cluster.world.crash("n3")  # its heartbeats left at t0 + k s; the last at t0 + 20 s, arriving 10 ms later
    last_heard = t0 + ns(20.0) + ns(LATENCY)
    cluster.run(until=34.0)
    survivors = [n for n in NODES if n != "n3"]
    for name, rows in cluster.changes("n3", observers=survivors).items():
        assert rows == [
            (t0 + 2 * ns(LATENCY), 1, "alive"),  # the hellos crossed; the probes echo them
            (last_heard + ns(CONFIG.suspect_after), 1, "suspect"),
            (last_heard + ns(CONFIG.suspect_after + CONFIG.dead_after), 1, "dead"),
        ], name
        assert cluster.view(name)["n3"] == "dead" and not cluster.services[name].serving("n3")
        assert cluster.services[name].has_quorum()  # 4 of 5 alive
        assert cluster.services[name].ring_nodes() == tuple(NODES)  # dead stays on the ring until removed
    assert last_heard + ns(5.0) == ns(25.0102) and last_heard + ns(10.0) == ns(30.0102)

    cluster.world.restart("n3")  # a new loop, a new endpoint; SimNode.incarnation is now 2
    cluster.start("n3")
    cluster.run(until=37.5)  # n3 listens three heartbeats before it counts a quorum
    restart_rows = cluster.world.trace.of("member.changed", node="n3", member="n3")
    assert [(r.fields["incarnation"], r.fields["status"]) for r in restart_rows] == [(1, "alive"), (2, "alive")]
    t1 = restart_rows[-1].t_ns
    for name, rows in cluster.changes("n3", observers=survivors).items():
        assert rows[-1] == (t1 + 2 * ns(LATENCY), 2, "alive"), name  # a greater incarnation replaces the dead record once proved (n3 answers with the echo)
    for name in NODES:
        assert cluster.view(name) == dict.fromkeys(NODES, "alive")
        assert cluster.services[name].has_quorum()


def test_partition_minority_loses_quorum_majority_keeps_it_and_heal_restores_everyone(cluster: Cluster) -> None:
    """partition([n1,n2],[n3,n4,n5]): n1,n2 lose quorum when they suspect the other three; n3..n5 keep it; after heal all are alive."""
    minority, majority = ["n1", "n2"], ["n3", "n4", "n5"]
    cluster.run(until=20.5)
    t0 = cluster.start_ns("n1")
    cluster.world.partition(minority, majority)
    suspect_at = t0 + ns(20.0) + ns(LATENCY) + ns(CONFIG.suspect_after)  # last heartbeat across the cut + 5 s
    cluster.run(until=(suspect_at - 1) / NS)
    assert all(cluster.services[n].has_quorum() for n in NODES)
    cluster.run(until=(suspect_at + 1) / NS)
    assert [n for n in NODES if cluster.services[n].has_quorum()] == majority
    for name in minority:
        assert cluster.view(name) == {"n1": "alive", "n2": "alive", "n3": "suspect", "n4": "suspect", "n5": "suspect"}
    for name in majority:
        assert cluster.view(name) == {"n1": "suspect", "n2": "suspect", "n3": "alive", "n4": "alive", "n5": "alive"}
        assert [r[2] for r in cluster.changes("n1", observers=[name])[name]] == ["alive", "suspect"]
        assert cluster.changes("n1", observers=[name])[name][-1][0] == suspect_at
    cluster.run(until=40.5)  # both sides now hold the other side dead; the quorums stay as they were
    assert [n for n in NODES if cluster.services[n].has_quorum()] == majority
    assert cluster.view("n1")["n3"] == "dead" and cluster.view("n3")["n1"] == "dead"

    heal_ns = cluster.world.env.now
    cluster.world.heal()
    cluster.run(until=43.0)
    for name in NODES:
        assert cluster.view(name) == dict.fromkeys(NODES, "alive"), name
        assert cluster.services[name].has_quorum()
    after = [r for r in cluster.world.trace.of("member.changed") if r.t_ns > heal_ns]
    # At the first heartbeats after the heal (t0 + 41 s, arriving 10 ms later) each node reads the other
    # side's verdict on itself in the digest and refutes it with incarnation 2; the refutations land one
    # latency later, and that is the last change.
    assert max(r.t_ns for r in after) == t0 + ns(41.0) + 2 * ns(LATENCY)
    assert all(cluster.services[n].incarnation == 2 for n in NODES)
    # No false verdict after the heal: the partition's verdicts travel with the seq they were made on,
    # so nobody who has heard their subject since adopts them, not even for an instant.
    assert [(r.node, r.fields["member"], r.fields["status"]) for r in after if r.fields["status"] != "alive"] == []
    last: dict[tuple[str, str], Any] = {}
    for r in after:
        last[(r.node, r.fields["member"])] = r
    assert {k: (v.fields["incarnation"], v.fields["status"]) for k, v in last.items()} == {
        (o, m): (2, "alive") for o in NODES for m in NODES
    }


def _chaotic_run(seed: int) -> tuple[str, World]:
    """Jitter, loss, duplication and reordering; a crash, a partition and a heal; returns the trace digest."""
    link = LinkModel(latency=Latency(0.005, 0.003), loss=0.05, duplicate=0.02, reorder=0.05)
    c = Cluster(seed, link)
    c.run(until=12.3)
    c.world.crash("n5")
    c.run(until=20.0)
    c.world.partition(["n1"], ["n2", "n3", "n4"])
    c.run(until=32.0)
    c.world.heal()
    c.run(until=45.0)
    for name in ("n1", "n2", "n3", "n4"):
        view = c.view(name)
        assert view["n5"] == "dead" and all(view[n] == "alive" for n in ("n1", "n2", "n3", "n4")), (seed, name, view)
    c.world.close()
    return c.world.trace.digest(), c.world


def test_same_seed_same_trace_digest() -> None:
    """Two runs of one seed (lossy, jittery links, crash, partition, heal) give the same trace; another seed does not."""
    digest_a, world_a = _chaotic_run(11)
    digest_b, world_b = _chaotic_run(11)
    assert digest_a == digest_b
    assert len(world_a.trace) == len(world_b.trace) > 1000
    assert world_a.trace.counts.get("net.dropped", 0) > 0  # the links really lost frames
    digest_c, _ = _chaotic_run(12)
    assert digest_c != digest_a


def test_trace_digest_does_not_depend_on_the_hash_seed() -> None:
    """The same seed run in a fresh interpreter with another PYTHONHASHSEED gives the same digest."""
    code = "from tests.test_cluster_driver import _chaotic_run; print(_chaotic_run(11)[0])"
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONHASHSEED": "4242"}
    out = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == _chaotic_run(11)[0]


def test_membership_service_refuses_a_foreign_transport_or_an_incomplete_wire(cluster: Cluster) -> None:
    """A service must use its own node's transport and a Wire that registers the membership frames."""
    node = cluster.world.node("n1")
    assert node.endpoint is not None
    endpoint = node.endpoint
    with pytest.raises(ValueError, match="transport of 'n1'"):
        MembershipService("n2", 1, NODES, CONFIG, endpoint, cluster.wire, print)
    with pytest.raises(ValueError, match="Heartbeat, Leaving"):
        MembershipService("n1", 1, NODES, CONFIG, endpoint, Wire(replication.FRAMES), print)
    assert MEMBERSHIP_CHANNEL == "m"
