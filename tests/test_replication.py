"""Replication core: driven with no event loop, by hand or through a small deterministic network.

``pump`` is the by-hand network: zero latency, no loss, frames delivered in send order.
``Net`` is the scheduled one: a heap of (time, order) events; ``Send`` outputs become
deliveries after a per-link latency (fixed, or drawn from a seeded ``random.Random``, which
reorders frames), through msgspec bytes so that every frame proves it can cross a real
network; seeded loss and duplication; directed link cuts (partitions); nodes that are down
(memory kept) or lost (memory gone, never back). ``SetTimer`` becomes a timer firing in
time order (a re-arm replaces, ``CancelTimer`` removes), ``Report`` is recorded with time
and node. While it runs it checks, on every frame a replica takes, that the replica's
promise and stamp never go down, and on every Write sent, that an epoch has one writer and a
stamp one page set. It also records each stamp's parent (the stamp its pages were built
on), so a test can ask whether a state descends from a confirmed write.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import msgspec
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from casty.protocol.key_owner import KeyOwner
from casty.protocol.replica_store import ReplicaStore
from casty.protocol.replication import (
    FRAMES,
    ZERO_EPOCH,
    ZERO_STAMP,
    Ack,
    AcquireTimedOut,
    Acquired,
    Confirmed,
    Epoch,
    WriteFenced as Fenced,
    Level,
    Lost,
    Nack,
    Persisting,
    Prepare,
    Promise,
    Snapshot,
    Stamp,
    Write,
    WriteTimedOut,
    quorum_sizes,
    superseded,
)
from casty.protocol.sansio import CancelTimer, Output, Report, Send, SetTimer, perform

ENTITY = ("tests:counter", "ana")
REPLICAS = ("r1", "r2", "r3")
LATENCY = 0.01
E = TypeVar("E")

_ENCODER = msgspec.msgpack.Encoder()
_ENVELOPE = msgspec.msgpack.Decoder(tuple[str, msgspec.Raw])
_DECODERS: dict[str, msgspec.msgpack.Decoder[Any]] = {cls.__name__: msgspec.msgpack.Decoder(cls) for cls in FRAMES}


def encode(frame: object) -> bytes:
    return _ENCODER.encode((type(frame).__name__, frame))


def decode(data: bytes) -> object:
    tag, raw = _ENVELOPE.decode(data)
    return _DECODERS[tag].decode(raw)


def wire(frame: object) -> object:
    """The frame after a trip through bytes, as a real transport would carry it."""
    return decode(encode(frame))


def reports(outs: Iterable[Output]) -> list[Any]:
    return [out.event for out in outs if isinstance(out, Report)]


def sends(outs: Iterable[Output]) -> list[Send]:
    return [out for out in outs if isinstance(out, Send)]


class Pump:
    """The performer of ``pump``: a frame is answered at once, the owner's answers queued behind the outputs in flight; timers never fire."""

    closed = False

    def __init__(self, owner: KeyOwner, stores: Mapping[str, ReplicaStore], outs: Iterable[Output], now: float, cut: str | None = None) -> None:
        self.owner, self.stores, self.now, self.cut = owner, stores, now, cut
        self.queue: deque[Output] = deque(outs)
        self.got: list[Any] = []

    def send(self, to: str, frame: Any) -> None:
        if to == self.cut:
            return
        for reply in self.stores[to].receive("owner", wire(frame)):
            assert isinstance(reply, Send)
            self.queue.extend(self.owner.receive(to, wire(reply.frame), self.now))

    def report(self, event: Any) -> None:
        self.got.append(event)

    def set_timer(self, name: str, at: float) -> None:
        pass

    def cancel_timer(self, name: str) -> None:
        pass

    def run(self) -> list[Any]:
        while self.queue:
            perform([self.queue.popleft()], self)
        return self.got


def pump(owner: KeyOwner, stores: Mapping[str, ReplicaStore], outs: Iterable[Output], now: float = 0.0) -> list[Any]:
    """Deliver every frame at once, in send order, until none is in flight; returns the owner's reports."""
    return Pump(owner, stores, outs, now).run()


def holding(promised: Epoch, stamp: Stamp, pages: dict[str, bytes]) -> ReplicaStore:
    """A replica that already holds ``pages`` of ENTITY under ``stamp`` and promised ``promised``."""
    store = ReplicaStore()
    store.import_(Snapshot(ENTITY, promised, stamp, pages))
    return store


def held(level: Level = "majority", node: str = "r1") -> tuple[KeyOwner, dict[str, ReplicaStore]]:
    """An owner that acquired ENTITY over three fresh replicas, by hand."""
    stores = {name: ReplicaStore() for name in REPLICAS}
    owner = KeyOwner(ENTITY, node)
    got = pump(owner, stores, owner.acquire(0.0, REPLICAS, level))
    assert [type(event) for event in got] == [Acquired]
    return owner, stores


class _Node:
    """The performer of one node's outputs on a ``Net``: frames onto the heap, timers onto the heap, reports into ``net.reports``."""

    closed = False

    def __init__(self, net: Net, node: str, core: KeyOwner | None) -> None:
        self.net, self.node, self.core = net, node, core

    def send(self, to: str, frame: Any) -> None:
        self.net._send(self.node, to, frame)

    def set_timer(self, name: str, at: float) -> None:
        assert self.core is not None
        net = self.net
        token = next(net._seq)
        net._timers[(self.node, name)] = token
        heapq.heappush(net._heap, (at, token, ("timer", self.node, name, self.core)))

    def cancel_timer(self, name: str) -> None:
        self.net._timers.pop((self.node, name), None)

    def report(self, event: Any) -> None:
        self.net.reports.append((self.net.now, self.node, event))


class Net:
    """Replica stores and key owners on named nodes, one event heap, seeded faults."""

    def __init__(
        self,
        replicas: Sequence[str] = REPLICAS,
        *,
        seed: int = 0,
        latency: tuple[float, float] = (LATENCY, LATENCY),
        loss: float = 0.0,
        dup: float = 0.0,
    ) -> None:
        self.replicas = tuple(replicas)
        self.stores: dict[str, ReplicaStore] = {name: ReplicaStore() for name in replicas}
        self.owners: dict[str, KeyOwner] = {}
        self.serial: dict[str, int] = {}  # a node's owner life, bumped on every new KeyOwner
        self.now = 0.0
        self.latency = latency
        self.loss = loss
        self.dup = dup
        self.rng = random.Random(seed)
        self.link: dict[tuple[str, str], float] = {}  # fixed latency of a directed link
        self.cut: set[tuple[str, str]] = set()  # directed links that drop frames
        self.down: set[str] = set()  # stopped, memory kept
        self.lost: set[str] = set()  # memory gone, never back
        self.reports: list[tuple[float, str, Any]] = []
        self.parent: dict[Stamp, Stamp] = {}
        self.written: dict[Stamp, dict[str, bytes]] = {}
        self.writers: dict[Epoch, set[tuple[str, int]]] = {}
        self.sent: list[tuple[float, str, str, object]] = []
        self._heap: list[tuple[float, int, tuple[Any, ...]]] = []
        self._seq = itertools.count()
        self._timers: dict[tuple[str, str], int] = {}
        self._last: dict[str, tuple[Epoch, Stamp]] = {}

    # ------------------------------------------------------------- owners ----

    def owner(self, node: str, label: str | None = None, **options: Any) -> KeyOwner:
        """Install a new KeyOwner of ENTITY on ``node`` (epochs name it ``label``, default the node)."""
        core = KeyOwner(ENTITY, label or node, **options)
        self.owners[node] = core
        self.serial[node] = self.serial.get(node, 0) + 1
        return core

    def acquire(
        self,
        node: str,
        level: Level = "majority",
        updates: Mapping[str, bytes | None] | None = None,
        replicas: Sequence[str] | None = None,
    ) -> None:
        core = self.owners[node]
        fixed = dict(updates) if updates is not None else {"@active": core.node.encode()}

        def adopt(found: Stamp, pages: Mapping[str, bytes]) -> Mapping[str, bytes | None]:
            self.parent[Stamp(core.epoch, found.version + 1)] = found
            return fixed

        store = self.stores.get(node)
        after = store.promised(ENTITY) if store is not None else ZERO_EPOCH
        self.perform(node, core.acquire(self.now, replicas or self.replicas, level, updates=adopt, after=after), core)

    def write(self, node: str, updates: Mapping[str, bytes | None], tombstone: bool = False) -> int:
        core = self.owners[node]
        previous = Stamp(core.epoch, core.version) if core.phase == "held" else None
        version, outs = core.write(self.now, updates, tombstone)
        if previous is not None:
            self.parent[Stamp(core.epoch, version)] = previous
        self.perform(node, outs, core)
        return version

    # ------------------------------------------------------------- faults ----

    def partition(self, *groups: Iterable[str]) -> None:
        """Cut every link between nodes of different groups (both ways)."""
        sets = [set(group) for group in groups]
        for i, a in enumerate(sets):
            for b in sets[i + 1 :]:
                for x in a:
                    for y in b:
                        self.cut.add((x, y))
                        self.cut.add((y, x))

    def heal(self) -> None:
        self.cut.clear()

    def crash(self, node: str, *, forget_owner: bool = False) -> None:
        self.down.add(node)
        if forget_owner:
            self.owners.pop(node, None)

    def recover(self, node: str) -> None:
        self.down.discard(node)

    def lose(self, node: str) -> None:
        self.lost.add(node)
        self.stores.pop(node, None)
        self.owners.pop(node, None)

    def dead(self, node: str) -> bool:
        return node in self.down or node in self.lost

    # ------------------------------------------------------------ running ----

    def perform(self, node: str, outs: Iterable[Output], core: KeyOwner | None = None) -> None:
        perform(outs, _Node(self, node, core))

    def _send(self, src: str, dst: str, frame: object) -> None:
        if isinstance(frame, Write):
            stamp = Stamp(frame.epoch, frame.version)
            known = self.written.setdefault(stamp, frame.pages)
            assert known == frame.pages, f"two page sets written as {stamp}"
            self.writers.setdefault(frame.epoch, set()).add((src, self.serial.get(src, 0)))
        self.sent.append((self.now, src, dst, frame))
        if self.dead(src) or self.dead(dst) or (src, dst) in self.cut:
            return
        if src != dst and self.loss and self.rng.random() < self.loss:
            return
        copies = 2 if src != dst and self.dup and self.rng.random() < self.dup else 1
        data = encode(frame)
        for _ in range(copies):
            if src == dst:
                delay = 0.0
            else:
                fixed = self.link.get((src, dst))
                delay = fixed if fixed is not None else self.rng.uniform(*self.latency)
            heapq.heappush(self._heap, (self.now + delay, next(self._seq), ("frame", src, dst, data)))

    def _deliver(self, src: str, dst: str, data: bytes) -> None:
        if self.dead(dst) or (src, dst) in self.cut:
            return
        frame = decode(data)
        if isinstance(frame, Prepare | Write):
            store = self.stores.get(dst)
            if store is None:
                return
            outs = store.receive(src, frame)
            promised, stamp = store.promised(ENTITY), store.stamp(ENTITY)
            last_promised, last_stamp = self._last.get(dst, (ZERO_EPOCH, ZERO_STAMP))
            assert promised >= last_promised, f"{dst}: promise went down {last_promised} -> {promised}"
            assert stamp >= last_stamp, f"{dst}: stamp went down {last_stamp} -> {stamp}"
            assert stamp.epoch <= promised
            self._last[dst] = (promised, stamp)
            self.perform(dst, outs)
        else:
            core = self.owners.get(dst)
            if core is not None:
                self.perform(dst, core.receive(src, frame, self.now), core)

    def step(self) -> bool:
        if not self._heap:
            return False
        at, token, event = heapq.heappop(self._heap)
        self.now = max(self.now, at)
        if event[0] == "frame":
            self._deliver(event[1], event[2], event[3])
        else:
            _, node, name, core = event
            assert isinstance(core, KeyOwner)
            if self._timers.get((node, name)) != token or self.owners.get(node) is not core or self.dead(node):
                return True
            del self._timers[(node, name)]
            self.perform(node, core.timer(name, self.now), core)
        return True

    def run(self, seconds: float) -> None:
        until = self.now + seconds
        while self._heap and self._heap[0][0] <= until:
            self.step()
        self.now = until

    def run_until(self, done: Callable[[], bool], limit: float = 60.0) -> bool:
        until = self.now + limit
        while not done():
            if not self._heap or self._heap[0][0] > until:
                return False
            self.step()
        return True

    # ------------------------------------------------------------ queries ----

    def events(self, kind: type[E], node: str | None = None) -> list[E]:
        return [event for _, at, event in self.reports if isinstance(event, kind) and (node is None or at == node)]

    def reported(self, kind: type, node: str) -> Callable[[], bool]:
        before = len(self.events(kind, node))
        return lambda: len(self.events(kind, node)) > before

    def descends(self, stamp: Stamp, ancestor: Stamp) -> bool:
        """Whether the pages written as ``stamp`` were built, write after write, on those of ``ancestor``."""
        while stamp > ancestor:
            stamp = self.parent[stamp]
        return stamp == ancestor


# =================================================================== basics ======


def test_quorum_sizes_per_level() -> None:
    """Quorums follow the reference: majority R//2+1 both ways; all writes R, reads 1; one reads and writes 1."""
    assert [quorum_sizes("majority", r) for r in (1, 2, 3, 4, 5)] == [(1, 1), (2, 2), (2, 2), (3, 3), (3, 3)]
    assert [quorum_sizes("all", r) for r in (1, 3, 5)] == [(1, 1), (1, 3), (1, 5)]
    assert [quorum_sizes("one", r) for r in (1, 3, 5)] == [(1, 1), (1, 1), (1, 1)]
    with pytest.raises(ValueError):
        quorum_sizes("quorum", 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        quorum_sizes("majority", 0)


def test_epochs_order_by_round_then_node_and_stamps_by_epoch_then_version() -> None:
    """Epochs compare round first and node only to break ties; a newer epoch's stamp beats any version of an older one."""
    assert Epoch(2, "a") > Epoch(1, "z") > Epoch(1, "a") > ZERO_EPOCH
    assert Stamp(Epoch(2, "a"), 1) > Stamp(Epoch(1, "z"), 99) > Stamp(Epoch(1, "z"), 98) > ZERO_STAMP


def test_every_frame_crosses_msgspec_unchanged() -> None:
    """Frames are plain msgspec-encodable data: each one survives a trip through bytes intact."""
    epoch, stamp = Epoch(3, "n1#2"), Stamp(Epoch(2, "n2"), 7)
    frames = [
        Prepare(ENTITY, epoch),
        Promise(ENTITY, epoch, stamp, {"@state": b"\x01", "@active": b""}),
        Write(ENTITY, epoch, 8, {"@state": b"\x02"}),
        Ack(ENTITY, epoch, 8),
        Nack(ENTITY, epoch, None, Epoch(4, "n3")),
        Nack(ENTITY, epoch, 8, Epoch(4, "n3")),
        Snapshot(ENTITY, epoch, stamp, {}),
    ]
    for frame in frames:
        back = wire(frame)
        assert back == frame and type(back) is type(frame)
    assert isinstance(wire(frames[1]), Promise) and type(wire(frames[1]).stamp.epoch) is Epoch  # type: ignore[attr-defined]


def test_misuse_is_refused_loudly() -> None:
    """Writing before Acquired, a tombstone with updates, repeated replicas, or acquiring twice are programming errors."""
    owner = KeyOwner(ENTITY, "r1")
    with pytest.raises(RuntimeError):
        owner.write(0.0, {"s": b"1"})
    with pytest.raises(ValueError):
        owner.acquire(0.0, ("r1", "r1", "r2"))
    owner.acquire(0.0, REPLICAS)
    with pytest.raises(RuntimeError):
        owner.acquire(0.0, REPLICAS)
    owner, _ = held()
    with pytest.raises(ValueError):
        owner.write(0.0, {"s": b"1"}, tombstone=True)


# ================================================================= acquiring =====


def test_acquire_majority_adopts_the_newest_state_and_reports_only_after_the_write_back() -> None:
    """Three replicas, majority: Prepare to all; the newest (epoch, version) among the promises wins, even with a lower version; Acquired waits for the write-back quorum."""
    older = Stamp(Epoch(1, "x"), 7)  # an old owner's leftovers: high version, old epoch
    newer = Stamp(Epoch(2, "y"), 3)
    stores = {
        "r1": holding(older.epoch, older, {"s": b"old", "gone": b"1"}),
        "r2": holding(newer.epoch, newer, {"s": b"new"}),
        "r3": ReplicaStore(),
    }
    owner = KeyOwner(ENTITY, "r1")
    outs = owner.acquire(10.0, REPLICAS, "majority", updates={"@active": b"r1"}, after=stores["r1"].promised(ENTITY))
    epoch = Epoch(2, "r1")  # one round above the local replica's promise, yet below (2, "y"): "r1" < "y" breaks the tie
    assert owner.epoch == epoch
    assert [(s.to, s.frame) for s in sends(outs)] == [(r, Prepare(ENTITY, epoch)) for r in REPLICAS]
    assert SetTimer("acquire", 15.0) in outs
    # r2 promised (2, "y") > (2, "r1"): it refuses, and that alone loses the round
    refusal = stores["r2"].on_prepare(Prepare(ENTITY, epoch))
    assert refusal == Nack(ENTITY, epoch, None, Epoch(2, "y"))
    assert reports(owner.receive("r2", refusal, 10.1)) == [Lost(ENTITY, epoch, Epoch(2, "y"))]
    # the next round is above everything seen
    outs = owner.acquire(11.0, REPLICAS, "majority", updates={"@active": b"r1"})
    epoch = Epoch(3, "r1")
    assert owner.epoch == epoch
    promise_1 = stores["r1"].on_prepare(Prepare(ENTITY, epoch))
    promise_2 = stores["r2"].on_prepare(Prepare(ENTITY, epoch))
    assert promise_1 == Promise(ENTITY, epoch, older, {"s": b"old", "gone": b"1"})
    assert owner.receive("r1", promise_1, 11.1) == []  # one promise is not a majority of three
    outs = owner.receive("r2", promise_2, 11.2)
    write_back = Write(ENTITY, epoch, newer.version + 1, {"s": b"new", "@active": b"r1"})
    assert [(s.to, s.frame) for s in sends(outs)] == [(r, write_back) for r in REPLICAS]
    assert reports(outs) == []  # promises alone are not ownership
    assert owner.receive("r1", stores["r1"].on_write(write_back), 11.3) == []
    outs = owner.receive("r3", stores["r3"].on_write(write_back), 11.4)
    assert reports(outs) == [Acquired(ENTITY, epoch, 4, {"s": b"new", "@active": b"r1"}, newer, False)]
    assert CancelTimer("acquire") in outs
    # the replicas that took the write-back hold the adopted state under the new epoch
    for name in ("r1", "r3"):
        assert stores[name].stamp(ENTITY) == Stamp(epoch, 4)
        assert stores[name].pages(ENTITY) == {"s": b"new", "@active": b"r1"}


def test_acquire_through_the_network_with_a_slow_replica() -> None:
    """On a network, the two fast replicas decide; the slow one still ends up with the written-back state."""
    net = Net()
    net.stores["r1"].import_(Snapshot(ENTITY, Epoch(1, "x"), Stamp(Epoch(1, "x"), 2), {"s": b"older"}))
    net.stores["r2"].import_(Snapshot(ENTITY, Epoch(1, "y"), Stamp(Epoch(1, "y"), 1), {"s": b"newer"}))
    net.link[("r1", "r3")] = net.link[("r3", "r1")] = 1.0
    net.owner("r1")
    net.acquire("r1")
    assert net.run_until(net.reported(Acquired, "r1"))
    (acquired,) = net.events(Acquired, "r1")
    assert acquired.found == Stamp(Epoch(1, "y"), 1) and acquired.pages == {"s": b"newer", "@active": b"r1"}
    assert net.now < 0.1  # decided by r1 and r2 without waiting for r3
    net.run(3.0)
    assert net.stores["r3"].stamp(ENTITY) == Stamp(acquired.epoch, acquired.version)


def test_a_promise_showing_writes_under_our_own_epoch_gives_it_up() -> None:
    """A restarted node that mints an epoch its previous life already used notices the pages under it, and moves to a higher round."""
    mine = Epoch(1, "r1")
    stores = {name: holding(mine, Stamp(mine, 2), {"s": b"previous life"}) for name in REPLICAS}
    owner = KeyOwner(ENTITY, "r1")
    got = pump(owner, stores, owner.acquire(0.0, REPLICAS))
    assert got == [Lost(ENTITY, mine, mine)]
    got = pump(owner, stores, owner.acquire(1.0, REPLICAS))
    assert [type(e) for e in got] == [Acquired] and owner.epoch == Epoch(2, "r1")
    assert got[0].pages == {"s": b"previous life"}


def test_acquire_timeout_and_late_stale_timers() -> None:
    """Without a quorum the acquire times out at its deadline; a timer call before a deadline, or for finished work, does nothing."""
    owner = KeyOwner(ENTITY, "r1", acquire_timeout=2.0, resend_every=None)
    owner.acquire(0.0, REPLICAS)
    assert owner.timer("acquire", 1.0) == []
    assert owner.timer("write", 3.0) == []
    assert reports(owner.timer("acquire", 2.0)) == [AcquireTimedOut(ENTITY, Epoch(1, "r1"))]
    assert owner.phase == "idle"
    assert owner.timer("acquire", 9.0) == []
    owner.acquire(10.0, REPLICAS)
    assert owner.epoch == Epoch(2, "r1")  # never the same epoch twice


def test_a_durable_acquisition_holds_the_key_only_once_the_driver_saved_its_write_back() -> None:
    """Rule 7: with persist=True the write-back quorum reports Persisting, writes are refused, and only persisted(epoch) reports Acquired."""
    stores = {name: ReplicaStore() for name in REPLICAS}
    owner = KeyOwner(ENTITY, "r1", resend_every=None)
    outs = owner.acquire(0.0, REPLICAS, updates={"@active": b"r1"}, after=Epoch(3, "x"), floor=5, persist=True)
    epoch = Epoch(4, "r1")
    assert pump(owner, stores, outs) == [Persisting(ENTITY, epoch, 6, {"@active": b"r1"})]
    assert owner.phase == "persisting"
    with pytest.raises(RuntimeError, match="write while persisting"):
        owner.write(0.1, {"s": b"too soon"})
    assert owner.persisted(Epoch(3, "r1")) == []  # not the epoch being persisted
    outs = owner.persisted(epoch)
    assert outs == [CancelTimer("acquire"), Report(Acquired(ENTITY, epoch, 6, {"@active": b"r1"}, ZERO_STAMP, False))]
    assert (owner.phase, owner.persisted(epoch)) == ("held", [])
    version, outs = owner.write(0.2, {"s": b"1"})
    assert version == 7 and [type(event) for event in pump(owner, stores, outs)] == [Confirmed]


def test_a_durable_acquisition_times_out_or_is_lost_while_its_save_is_awaited() -> None:
    """Rule 7: the acquire timeout covers the save, and a newer promise still fences a persisting owner; a late persisted() holds nothing."""
    stores = {name: ReplicaStore() for name in REPLICAS}
    owner = KeyOwner(ENTITY, "r1", acquire_timeout=2.0, resend_every=None)
    assert [type(e) for e in pump(owner, stores, owner.acquire(0.0, REPLICAS, persist=True))] == [Persisting]
    assert owner.timer("acquire", 1.0) == []
    assert reports(owner.timer("acquire", 2.0)) == [AcquireTimedOut(ENTITY, Epoch(1, "r1"))]
    assert owner.phase == "idle" and owner.persisted(Epoch(1, "r1")) == []
    assert [type(e) for e in pump(owner, stores, owner.acquire(3.0, REPLICAS, persist=True))] == [Persisting]
    newer = Epoch(9, "r2")
    stores["r2"].on_prepare(Prepare(ENTITY, newer))
    refusal = stores["r2"].on_write(Write(ENTITY, Epoch(2, "r1"), 2, {}))
    assert refusal == Nack(ENTITY, Epoch(2, "r1"), 2, newer)
    outs = owner.receive("r2", refusal, 3.5)
    assert CancelTimer("acquire") in outs and reports(outs) == [Lost(ENTITY, Epoch(2, "r1"), newer)]
    assert (owner.persisted(Epoch(2, "r1")), owner.phase) == ([], "lost")


# ============================================================ fencing =====


def test_a_second_owner_fences_the_first() -> None:
    """A higher epoch on a majority fences the old owner: its next write is Fenced, it is Lost, epochs only grow, one writer per epoch."""
    net = Net()
    net.owner("r1")
    net.owner("r2")
    net.acquire("r1")
    assert net.run_until(net.reported(Acquired, "r1"))
    first = net.owners["r1"].epoch
    v = net.write("r1", {"s": b"1"})
    assert net.run_until(net.reported(Confirmed, "r1"))
    net.acquire("r2")
    assert net.run_until(net.reported(Acquired, "r2"))
    (taken,) = net.events(Acquired, "r2")
    second = taken.epoch
    assert second > first
    assert taken.found == Stamp(first, v) and taken.pages["s"] == b"1"  # the confirmed write came along
    stale = net.write("r1", {"s": b"stale"})
    assert net.run_until(net.reported(Lost, "r1"))
    assert net.events(Fenced, "r1") == [Fenced(ENTITY, first, stale, second)]
    assert net.events(Lost, "r1") == [Lost(ENTITY, first, second)]
    assert [c.version for c in net.events(Confirmed, "r1")] == [v]
    # once lost, writes are fenced on the spot, without frames
    count = len(net.sent)
    again = net.write("r1", {"s": b"again"})
    assert net.events(Fenced, "r1")[-1] == Fenced(ENTITY, first, again, second) and len(net.sent) == count
    fresh = net.write("r2", {"s": b"2"})
    assert net.run_until(net.reported(Confirmed, "r2"))
    assert net.events(Confirmed, "r2")[-1].version == fresh
    net.run(1.0)
    for name in REPLICAS:
        assert net.stores[name].stamp(ENTITY) == Stamp(second, fresh)
        assert net.stores[name].pages(ENTITY)["s"] == b"2"
    assert all(len(writers) == 1 for writers in net.writers.values())
    confirmers: dict[Epoch, set[str]] = {}
    for _, node, event in net.reports:
        if isinstance(event, Confirmed):
            confirmers.setdefault(event.epoch, set()).add(node)
    assert confirmers == {first: {"r1"}, second: {"r2"}}


def test_superseded_names_the_older_epochs_node_only_when_another_node_must_hear_it() -> None:
    """Rule 9: a promise that moved above another node's epoch names that node (its life suffix dropped); no move, this node, the sender or no epoch names nobody."""
    old, new = Epoch(3, "n3#1"), Epoch(4, "n2#0")
    assert superseded(old, new, "n2", "n1") == "n3"  # n1's replica promised n2's round over n3's
    assert superseded(old, new, "n2", "n2") == "n3"  # the sender's own replica too
    assert superseded(Epoch(3, "r1"), Epoch(4, "r2"), "r2", "r3") == "r1"  # an epoch with no life suffix names its node
    assert superseded(old, old, "n3", "n1") is None  # a duplicated Prepare: the promise did not move
    assert superseded(new, new, "n3", "n1") is None  # refused: the store kept its newer promise
    assert superseded(ZERO_EPOCH, new, "n2", "n1") is None  # nobody held a promise before
    assert superseded(old, new, "n3", "n1") is None  # the older epoch's node sent the newer Prepare itself
    assert superseded(old, new, "n2", "n3") is None  # this node: its driver fences its own owner (_fence_older_owner)


_EPOCHS = st.builds(Epoch, st.integers(0, 4), st.sampled_from(["", "r1", "r2#0", "r2#1", "r3"]))


@given(st.lists(st.tuples(st.sampled_from(REPLICAS), _EPOCHS), max_size=12), st.sampled_from(REPLICAS))
def test_superseded_follows_every_rise_of_a_replicas_promise(prepares: list[tuple[str, Epoch]], here: str) -> None:
    """Rule 9 over any run of Prepares at one replica: a node is named exactly when the promise rose above a real epoch of a node that is neither here nor the sender, and it is that epoch's node."""
    store = ReplicaStore()
    for sender, epoch in prepares:
        previous = store.promised(ENTITY)
        store.receive(sender, Prepare(ENTITY, epoch))
        promised = store.promised(ENTITY)
        told = superseded(previous, promised, sender, here)
        holder = previous.node.partition("#")[0]
        rose = promised > previous and promised == epoch
        assert told == (holder if rose and holder not in ("", sender, here) else None)


def test_a_holder_that_hears_rule_9s_nack_ends_at_once_without_a_write() -> None:
    """Rule 9 with rule 5: r2's acquisition promised by r2's and r3's replicas, not r1's; the Nack superseded names goes to r1, whose held owner is Lost at once, sending nothing."""
    owner, stores = held()
    first = owner.epoch
    newer = Epoch(first.round + 1, "r2")
    told: list[tuple[str, Nack]] = []
    for name in ("r2", "r3"):  # r1's replica never hears the Prepare
        previous = stores[name].promised(ENTITY)
        stores[name].receive("r2", Prepare(ENTITY, newer))
        target = superseded(previous, stores[name].promised(ENTITY), "r2", name)
        if target is not None:
            told.append((target, Nack(ENTITY, previous, None, stores[name].promised(ENTITY))))
    assert told == [("r1", Nack(ENTITY, first, None, newer)), ("r1", Nack(ENTITY, first, None, newer))]
    assert stores["r1"].promised(ENTITY) == first
    outs = owner.receive("r3", told[1][1], 1.0)
    assert reports(outs) == [Lost(ENTITY, first, newer)] and sends(outs) == []
    assert owner.phase == "lost" and reports(owner.receive("r2", told[0][1], 1.0)) == []  # the second notice changes nothing


def test_a_partitioned_old_owner_times_out_then_is_refused_after_the_heal() -> None:
    """An owner cut off with one replica never reaches a quorum (WriteTimedOut); after the heal the replicas refuse its epoch."""
    net = Net()
    net.owner("r1")
    net.owner("r3")
    net.acquire("r1")
    assert net.run_until(net.reported(Acquired, "r1"))
    old = net.owners["r1"].epoch
    kept = net.write("r1", {"s": b"kept"})
    assert net.run_until(net.reported(Confirmed, "r1"))
    net.partition({"r1"}, {"r2", "r3"})
    lonely = net.write("r1", {"s": b"lonely"})
    net.acquire("r3")
    assert net.run_until(net.reported(Acquired, "r3"))
    new = net.owners["r3"].epoch
    assert new > old and net.events(Acquired, "r3")[0].pages["s"] == b"kept"
    assert net.run_until(net.reported(WriteTimedOut, "r1"))
    assert net.events(WriteTimedOut, "r1") == [WriteTimedOut(ENTITY, old, lonely)]
    assert net.stores["r1"].stamp(ENTITY) == Stamp(old, lonely)  # r1 alone took it: not confirmed
    later = net.write("r3", {"s": b"new owner"})
    assert net.run_until(net.reported(Confirmed, "r3"))
    net.write("r1", {"s": b"still trying"})
    net.run(6.0)
    assert [type(e) for e in net.events(WriteTimedOut, "r1")] == [WriteTimedOut, WriteTimedOut]
    net.heal()
    after_heal = net.write("r1", {"s": b"after heal"})
    assert net.run_until(net.reported(Lost, "r1"))
    assert net.events(Fenced, "r1") == [Fenced(ENTITY, old, after_heal, new)]
    assert not any(c.epoch == old and c.version > kept for c in net.events(Confirmed))
    final = net.write("r3", {"s": b"final"})
    assert net.run_until(net.reported(Confirmed, "r3"))
    net.run(1.0)
    for name in REPLICAS:  # r1's unconfirmed leftovers are overwritten by the new epoch
        assert net.stores[name].stamp(ENTITY) == Stamp(new, final)
        assert net.stores[name].pages(ENTITY)["s"] == b"final"
    net.owner("r2")
    net.acquire("r2")
    assert net.run_until(net.reported(Acquired, "r2"))
    (last,) = net.events(Acquired, "r2")
    assert net.descends(last.found, Stamp(new, later)) and last.pages["s"] == b"final"


def test_an_old_owner_is_refused_by_epoch_once_a_majority_promised_the_new_one() -> None:
    """With links cut unevenly, the old owner still reaches one replica that promised the new epoch: refused at once, during and after the partition."""
    net = Net()
    old_owner, new_owner = net.owner("a"), net.owner("b")
    net.acquire("a")
    assert net.run_until(net.reported(Acquired, "a"))
    old = old_owner.epoch
    net.cut |= {("a", "r3"), ("r3", "a"), ("b", "r1"), ("r1", "b")}  # a sees r1, r2; b sees r2, r3
    net.acquire("b")
    assert net.run_until(net.reported(Acquired, "b"))
    new = new_owner.epoch
    assert new > old
    refused = net.write("a", {"s": b"old"})
    assert net.run_until(net.reported(Lost, "a"))
    assert net.events(Fenced, "a") == [Fenced(ENTITY, old, refused, new)]
    assert net.events(Confirmed, "a") == []
    net.heal()
    net.write("b", {"s": b"new"})
    assert net.run_until(net.reported(Confirmed, "b"))
    net.run(1.0)
    # every replica now refuses the old epoch, whatever frame of it shows up again
    stale = [frame for _, src, _, frame in net.sent if src == "a" and isinstance(frame, Write)]
    assert stale
    for name in REPLICAS:
        for frame in stale:
            assert isinstance(frame, Write)
            answer = net.stores[name].on_write(frame)
            assert answer == Nack(ENTITY, old, frame.version, new)
        assert net.stores[name].on_prepare(Prepare(ENTITY, old)) == Nack(ENTITY, old, None, new)
        assert net.stores[name].pages(ENTITY)["s"] == b"new"


# ============================================================ write levels =====


@pytest.mark.parametrize(("level", "needed"), [("one", 1), ("majority", 2), ("all", 3)])
def test_each_level_confirms_after_its_write_quorum_of_acks(level: Level, needed: int) -> None:
    """one, majority and all confirm a write after exactly 1, 2 and 3 acks of three replicas."""
    owner, stores = held(level)
    version, outs = owner.write(1.0, {"s": b"1"})
    assert version == 2  # the write-back took version 1
    frames = sends(outs)
    assert [s.to for s in frames] == list(REPLICAS)
    for count, send in enumerate(frames, 1):
        assert isinstance(send.frame, Write)
        got = reports(owner.receive(send.to, stores[send.to].on_write(send.frame), 1.1))
        if count == needed:
            assert got == [Confirmed(ENTITY, owner.epoch, version, REPLICAS[:count])]
        else:
            assert got == []


def test_all_times_out_with_one_replica_down_while_majority_does_not() -> None:
    """With one replica of three down, `all` writes and acquires time out (Unavailable); majority ones still confirm."""
    net = Net()
    net.owner("r1", write_timeout=2.0)
    net.acquire("r1", "all")
    assert net.run_until(net.reported(Acquired, "r1"))
    net.crash("r3")
    version = net.write("r1", {"s": b"1"})
    assert net.run_until(net.reported(WriteTimedOut, "r1"))
    assert net.events(WriteTimedOut, "r1") == [WriteTimedOut(ENTITY, net.owners["r1"].epoch, version)]
    assert net.events(Confirmed, "r1") == [] and net.now == pytest.approx(2.0 + LATENCY * 2, abs=0.1)
    net.owner("r2", write_timeout=2.0)
    net.acquire("r2", "all")  # one promise is a read quorum, but the write-back needs all three
    assert net.run_until(net.reported(AcquireTimedOut, "r2"))
    assert net.events(Acquired, "r2") == []
    other = Net()
    other.owner("r1")
    other.acquire("r1", "majority")
    assert other.run_until(other.reported(Acquired, "r1"))
    other.crash("r3")
    other.write("r1", {"s": b"1"})
    assert other.run_until(other.reported(Confirmed, "r1"))


def test_lost_frames_are_sent_again_before_the_timeout() -> None:
    """A write whose frames to the other replicas were lost is resent to them and confirmed before its timeout."""
    net = Net()
    net.owner("r1", resend_every=0.5)
    net.acquire("r1")
    assert net.run_until(net.reported(Acquired, "r1"))
    start = net.now
    net.partition({"r1"}, {"r2", "r3"})
    net.write("r1", {"s": b"1"})
    net.run(0.1)
    net.heal()
    assert net.run_until(net.reported(Confirmed, "r1"))
    assert 0.5 <= net.now - start < 1.0
    assert net.events(WriteTimedOut, "r1") == []


def test_pipelined_writes_confirm_in_version_order() -> None:
    """Several writes in flight confirm in version order; an ack of a later version also covers the earlier ones."""
    owner, stores = held()
    v1, outs1 = owner.write(1.0, {"a": b"1"})
    v2, outs2 = owner.write(1.0, {"b": b"2"})
    w2 = sends(outs2)[0].frame
    assert isinstance(w2, Write) and w2.pages == {"a": b"1", "b": b"2"}  # whole page sets, built on the previous write
    assert reports(owner.receive("r1", stores["r1"].on_write(w2), 1.1)) == []
    got = reports(owner.receive("r2", stores["r2"].on_write(w2), 1.2))
    assert got == [Confirmed(ENTITY, owner.epoch, v1, ("r1", "r2")), Confirmed(ENTITY, owner.epoch, v2, ("r1", "r2"))]
    w1 = sends(outs1)[0].frame
    assert isinstance(w1, Write)
    assert stores["r1"].on_write(w1) == Ack(ENTITY, owner.epoch, v1)  # the late older write is acked, not applied
    assert stores["r1"].pages(ENTITY) == {"a": b"1", "b": b"2"}
    assert owner.receive("r1", Ack(ENTITY, owner.epoch, v1), 1.3) == []


# ================================================================ tombstones =====


def test_a_tombstone_hides_older_pages_from_a_later_acquire() -> None:
    """A delete is a stamped empty page set: a replica that missed it cannot bring the old pages back."""
    net = Net()
    net.owner("r1")
    net.acquire("r1")
    assert net.run_until(net.reported(Acquired, "r1"))
    net.write("r1", {"s": b"alive", "@behavior": b"b"})
    assert net.run_until(net.reported(Confirmed, "r1"))
    net.partition({"r3"}, {"r1", "r2"})
    deleted = net.write("r1", {}, tombstone=True)
    assert net.run_until(net.reported(Confirmed, "r1"))
    assert net.stores["r3"].pages(ENTITY)["s"] == b"alive"  # r3 missed the delete
    net.owners["r1"].close()
    net.heal()
    net.crash("r2")  # the next read quorum must be {r1, r3}: the tombstone against the old pages
    net.owner("r3")
    net.acquire("r3", updates={})
    assert net.run_until(net.reported(Acquired, "r3"))
    (acquired,) = net.events(Acquired, "r3")
    assert acquired.found == Stamp(net.owners["r1"].epoch, deleted)
    assert acquired.deleted and acquired.pages == {}
    assert net.stores["r3"].pages(ENTITY) == {}


def test_a_replica_never_resurrects_deleted_pages() -> None:
    """At a replica, an older write arriving after a tombstone is acked but changes nothing."""
    store = ReplicaStore()
    epoch = Epoch(1, "a")
    store.on_write(Write(ENTITY, epoch, 1, {"s": b"1"}))
    store.on_write(Write(ENTITY, epoch, 2, {}))
    assert store.on_write(Write(ENTITY, epoch, 1, {"s": b"1"})) == Ack(ENTITY, epoch, 1)
    assert store.pages(ENTITY) == {} and store.stamp(ENTITY) == Stamp(epoch, 2)


# ======================================================= duplicates, reordering =====


def test_duplicate_and_replayed_frames_get_the_same_answers_at_a_replica() -> None:
    """A replica answers a repeated Prepare or Write the same way and never moves backwards."""
    store = ReplicaStore()
    e1, e2 = Epoch(1, "a"), Epoch(2, "b")
    first = store.on_prepare(Prepare(ENTITY, e1))
    assert store.on_prepare(Prepare(ENTITY, e1)) == first == Promise(ENTITY, e1, ZERO_STAMP, {})
    write = Write(ENTITY, e1, 1, {"s": b"1"})
    assert store.on_write(write) == store.on_write(write) == Ack(ENTITY, e1, 1)
    assert store.stamp(ENTITY) == Stamp(e1, 1)
    assert store.on_write(Write(ENTITY, e2, 2, {"s": b"2"})) == Ack(ENTITY, e2, 2)  # a newer epoch needs no Prepare here
    assert store.promised(ENTITY) == e2
    assert store.on_prepare(Prepare(ENTITY, e1)) == Nack(ENTITY, e1, None, e2)
    assert store.on_write(write) == Nack(ENTITY, e1, 1, e2)
    assert store.pages(ENTITY) == {"s": b"2"}
    assert store.receive("x", Ack(ENTITY, e1, 1)) == []  # not a replica's frame


def test_duplicate_and_stale_frames_do_not_count_twice_at_an_owner() -> None:
    """An owner counts one promise and one ack per replica, ignores older epochs and answers it no longer waits for."""
    stores = {name: ReplicaStore() for name in REPLICAS}
    owner = KeyOwner(ENTITY, "r1")
    owner.acquire(0.0, REPLICAS)
    promise = stores["r1"].on_prepare(Prepare(ENTITY, owner.epoch))
    assert owner.receive("r1", promise, 0.1) == []
    assert owner.receive("r1", promise, 0.2) == []  # the same replica twice is not a majority
    assert owner.receive("r9", stores["r2"].on_prepare(Prepare(ENTITY, owner.epoch)), 0.2) == []  # not a replica
    assert owner.receive("r2", Promise(ENTITY, Epoch(0, "r1"), ZERO_STAMP, {}), 0.2) == []  # another epoch
    assert owner.receive("r2", Promise(("other", "key"), owner.epoch, ZERO_STAMP, {}), 0.2) == []  # another key
    outs = owner.receive("r2", stores["r2"].on_prepare(Prepare(ENTITY, owner.epoch)), 0.3)
    write_back = sends(outs)[0].frame
    assert isinstance(write_back, Write) and all(s.frame == write_back for s in sends(outs))
    assert owner.receive("r3", stores["r3"].on_prepare(Prepare(ENTITY, owner.epoch)), 0.3) == []  # late promise
    ack = stores["r1"].on_write(write_back)
    assert owner.receive("r1", ack, 0.4) == []
    assert owner.receive("r1", ack, 0.5) == []
    assert [type(e) for e in reports(owner.receive("r2", stores["r2"].on_write(write_back), 0.6))] == [Acquired]
    assert owner.receive("r3", stores["r3"].on_write(write_back), 0.7) == [CancelTimer("resend")]  # caught up: no catch-up
    version, outs = owner.write(1.0, {"s": b"1"})
    frame = sends(outs)[0].frame
    assert isinstance(frame, Write)
    for name in ("r1", "r2"):
        owner.receive(name, stores[name].on_write(frame), 1.1)
    assert owner.receive("r2", Ack(ENTITY, owner.epoch, version), 1.2) == []  # no second Confirmed
    assert owner.receive("r3", stores["r3"].on_write(frame), 1.2) == [CancelTimer("resend")]  # caught up: no Confirmed, no catch-up


@pytest.mark.parametrize("seed", range(5))
def test_doubled_and_reordered_frames_change_no_outcome(seed: int) -> None:
    """The same story on a clean network and on one that doubles every frame and reorders them ends the same way."""

    def story(net: Net) -> tuple[list[str], dict[str, tuple[Stamp, dict[str, bytes]]]]:
        net.owner("r1")
        net.owner("r2")
        net.acquire("r1")
        assert net.run_until(net.reported(Acquired, "r1"))
        for i in range(5):
            net.write("r1", {"s": str(i).encode()})
        net.run(1.0)
        net.acquire("r2")
        assert net.run_until(net.reported(Acquired, "r2"))
        net.write("r1", {"s": b"stale"})
        for i in range(3):
            net.write("r2", {"t": str(i).encode()})
        net.run(6.0)
        kinds = [f"{node}:{type(event).__name__}:{getattr(event, 'version', '')}" for _, node, event in net.reports]
        held_state = {name: (store.stamp(ENTITY), store.pages(ENTITY)) for name, store in net.stores.items()}
        return kinds, held_state

    clean = story(Net())
    noisy = story(Net(seed=seed, latency=(0.001, 0.05), dup=1.0))
    assert clean == noisy


# ================================================================== handoff =====


def test_export_and_import_keep_the_newest_stamp_and_the_greater_promise() -> None:
    """Handoff merges never regress: the newest stamp's pages win and the greater promise stays, so fenced epochs stay fenced."""
    source, target = ReplicaStore(), ReplicaStore()
    assert source.export(ENTITY) is None
    e1, e2, e3 = Epoch(1, "a"), Epoch(2, "b"), Epoch(3, "c")
    source.on_write(Write(ENTITY, e2, 5, {"s": b"5"}))
    target.on_write(Write(ENTITY, e1, 9, {"s": b"9"}))
    target.on_prepare(Prepare(ENTITY, e3))
    snapshot = source.export(ENTITY)
    assert snapshot == Snapshot(ENTITY, e2, Stamp(e2, 5), {"s": b"5"}) and wire(snapshot) == snapshot
    assert target.import_(snapshot)
    assert target.stamp(ENTITY) == Stamp(e2, 5) and target.pages(ENTITY) == {"s": b"5"} and target.promised(ENTITY) == e3
    assert not target.import_(Snapshot(ENTITY, e1, Stamp(e1, 9), {"s": b"9"}))  # older: nothing changes
    assert target.pages(ENTITY) == {"s": b"5"}
    fresh = ReplicaStore()
    assert fresh.import_(snapshot) and fresh.on_write(Write(ENTITY, e1, 10, {})) == Nack(ENTITY, e1, 10, e2)
    assert fresh.entities() == [ENTITY]


# ================================================================== property =====

OWNER_HOSTS = (0, 1)  # the competing owners live on the first two replicas


KINDS = ("write",) * 10 + ("acquire",) * 2 + ("delete", "run", "crash", "recover", "recover", "cut", "cut", "heal")


@st.composite
def schedules(draw: st.DrawFn) -> dict[str, Any]:
    """A dense story: mostly writes and competing acquires, some faults, each step followed by a short run."""
    size = draw(st.sampled_from([3, 5]))
    ops: list[tuple[str, Any, float]] = []
    for _ in range(draw(st.integers(20, 80))):
        kind = draw(st.sampled_from(KINDS + (("lose",) if draw(st.integers(0, 15)) == 0 else ())))
        arg: Any
        if kind in ("write", "acquire", "delete"):
            arg = draw(st.sampled_from(OWNER_HOSTS))
        elif kind == "run":
            arg = draw(st.sampled_from([1.0, 6.0]))
        elif kind == "cut":
            arg = (draw(st.integers(0, size - 1)), draw(st.integers(0, size - 1)))
        else:
            arg = draw(st.integers(0, size - 1))
        ops.append((kind, arg, draw(st.sampled_from([0.0, 0.005, 0.03, 0.3]))))
    return {
        "size": size,
        "level": draw(st.sampled_from(["majority", "all"])),
        "seed": draw(st.integers(0, 2**16)),
        "loss": draw(st.sampled_from([0.0, 0.1, 0.3])),
        "dup": draw(st.sampled_from([0.0, 0.2])),
        "ops": ops,
    }


def play(schedule: dict[str, Any]) -> tuple[Net, KeyOwner]:
    """Play a drawn schedule, then quiet the world and let a newcomer ("z") acquire; returns the net and the newcomer."""
    size, level = schedule["size"], schedule["level"]
    names = tuple(f"r{i + 1}" for i in range(size))
    net = Net(names, seed=schedule["seed"], latency=(0.001, 0.05), loss=schedule["loss"], dup=schedule["dup"])
    lives = dict.fromkeys(names, 0)

    def install(node: str) -> None:
        lives[node] += 1
        net.owner(node, f"{node}#{lives[node]}", write_timeout=5.0, resend_every=0.5)

    for index in OWNER_HOSTS:
        install(names[index])
    net.acquire(names[0], level)
    net.run(0.3)
    tokens = itertools.count(1)
    for kind, arg, pause in schedule["ops"]:
        if kind in ("write", "delete"):
            # a message for the key: the drawn owner writes if it holds the key, else the other one
            # does; if neither holds it, the drawn one (re)acquires it, like an activation would
            ready = [names[i] for i in (arg, 1 - arg) if names[i] in net.owners and not net.dead(names[i])]
            writer = next((host for host in ready if net.owners[host].phase == "held"), None)
            if writer is not None:
                core = net.owners[writer]
                if kind == "delete":
                    net.write(writer, {}, tombstone=True)
                else:
                    token = str(next(tokens)).encode()
                    net.write(writer, {"w": token, "log": core.pages.get("log", b"") + b"," + token})
            elif ready and net.owners[ready[0]].phase in ("idle", "lost"):
                net.acquire(ready[0], level)
        elif kind == "acquire":
            host = names[arg]
            owner = net.owners.get(host)
            if owner is not None and not net.dead(host) and owner.phase in ("idle", "lost"):
                net.acquire(host, level)
        elif kind == "run":
            net.run(arg)
        elif kind == "crash":
            net.crash(names[arg], forget_owner=True)
        elif kind == "recover":
            host = names[arg]
            if host in net.down:
                net.recover(host)
                if arg in OWNER_HOSTS:
                    install(host)
        elif kind == "lose":
            net.lose(names[arg])
        elif kind == "cut":
            a, b = names[arg[0]], names[arg[1]]
            if a != b:
                net.cut |= {(a, b), (b, a)}
        else:
            net.heal()
        net.run(pause)

    # Quiet the world, then a newcomer acquires: it must manage whenever enough replicas survive.
    net.heal()
    net.loss = net.dup = 0.0
    for host in sorted(net.down):
        net.recover(host)
    net.run(12.0)
    final = net.owner("z", write_timeout=5.0, resend_every=0.5)
    for _ in range(6):
        if final.phase == "held":
            break
        net.acquire("z", level)
        net.run_until(lambda: final.phase != "preparing" and final.phase != "writing_back", limit=30.0)
    survivors = size - len(net.lost)
    read, write = quorum_sizes(level, size)
    if survivors >= max(read, write):
        assert final.phase == "held", "a quorum of replicas survives, yet no new owner could acquire"
    return net, final


@settings(max_examples=200, deadline=None)
@given(schedules())
def test_no_confirmed_write_is_lost_under_random_faults(schedule: dict[str, Any]) -> None:
    """Under crashes, lost nodes, two competing owners, loss, duplication, reordering and partitions: every Acquired of a newer epoch descends from every confirmed write, one writer per epoch, replicas never go back."""
    # Required while one replica that acked the write survives; checked for every confirmed
    # write, since a lost node never answers again and so cannot make a quorum forget what
    # it acked (see the module notes on amnesia for replicas that come back empty).
    net, final = play(schedule)

    # Checks over the whole run.
    # (pytest --hypothesis-show-statistics shows how much each run exercised)
    event(f"{schedule['level']}: confirmed {min(len(net.events(Confirmed)), 20) // 5 * 5}+, fenced {bool(net.events(Fenced))}")
    assert all(len(writers) == 1 for writers in net.writers.values()), net.writers
    confirmed = net.events(Confirmed)
    acquired = net.events(Acquired)
    pairs = 0
    for c in confirmed:
        stamp = Stamp(c.epoch, c.version)
        for a in acquired:
            if a.epoch > c.epoch:
                pairs += 1
                assert a.found.version >= c.version
                assert net.descends(a.found, stamp), f"{a} does not descend from confirmed {c}"
    event(f"(confirmed, later acquired) pairs checked: {min(pairs, 20) // 10 * 10}+")
    by_epoch: dict[Epoch, list[int]] = {}
    for c in confirmed:
        by_epoch.setdefault(c.epoch, []).append(c.version)
    assert all(versions == sorted(set(versions)) for versions in by_epoch.values())


# ================================================================ readiness ======
# A replica that came back with no memory, or is new to a key's replica set, is not *ready*
# for the key until it pulled the other replicas' copies (casty.protocol.handoff). Until then
# it promises blank and accepts only writes of the epoch it blank-promised.


class Readiness:
    """The ``ready`` predicate of a ReplicaStore, switched per key by the test."""

    def __init__(self, *ready: tuple[str, str]) -> None:
        self.keys = set(ready)

    def __call__(self, entity: tuple[str, str]) -> bool:
        return entity in self.keys


def not_ready(promised: Epoch = ZERO_EPOCH, stamp: Stamp = ZERO_STAMP, pages: dict[str, bytes] | None = None) -> tuple[ReplicaStore, Readiness]:
    """A store not ready for ENTITY, holding ``pages`` under ``stamp`` with ``promised`` (as an import would leave it)."""
    ready = Readiness()
    store = ReplicaStore(ready=ready)
    if promised != ZERO_EPOCH or pages:
        store.import_(Snapshot(ENTITY, promised, stamp, pages or {}))
    return store, ready


def test_a_store_without_a_readiness_predicate_is_always_ready() -> None:
    """ReplicaStore() (no ready=) counts for every key: its promises are never blank."""
    store = ReplicaStore()
    assert store.is_ready(ENTITY) and store.is_ready(("other", "key"))
    promise = store.on_prepare(Prepare(ENTITY, Epoch(1, "o")))
    assert isinstance(promise, Promise) and not promise.blank


def test_a_store_that_is_not_ready_promises_blank_with_what_it_holds() -> None:
    """Not ready: the Prepare is promised (the promise rises) but blank, carrying the stamp and pages it does hold."""
    held_stamp = Stamp(Epoch(2, "x"), 5)
    store, _ready = not_ready(Epoch(2, "x"), held_stamp, {"s": b"imported"})
    epoch = Epoch(3, "o")
    assert store.on_prepare(Prepare(ENTITY, epoch)) == Promise(ENTITY, epoch, held_stamp, {"s": b"imported"}, blank=True)
    assert store.promised(ENTITY) == epoch


def test_a_store_that_is_not_ready_still_refuses_an_older_prepare() -> None:
    """Not ready: a Prepare below its promise is a Nack naming the promise (it did promise that, in this life)."""
    store, _ready = not_ready()
    store.on_prepare(Prepare(ENTITY, Epoch(5, "o")))
    assert store.on_prepare(Prepare(ENTITY, Epoch(4, "p"))) == Nack(ENTITY, Epoch(4, "p"), None, Epoch(5, "o"))


def test_readiness_is_per_key() -> None:
    """A store ready for one key promises it normally and another blank."""
    other = ("tests:counter", "bob")
    ready = Readiness(other)
    store = ReplicaStore(ready=ready)
    blank = store.on_prepare(Prepare(ENTITY, Epoch(1, "o")))
    normal = store.on_prepare(Prepare(other, Epoch(1, "o")))
    assert isinstance(blank, Promise) and blank.blank
    assert isinstance(normal, Promise) and not normal.blank


def test_a_store_that_is_not_ready_accepts_a_write_of_the_epoch_it_blank_promised() -> None:
    """Not ready: after a blank promise of E, a write of E is applied and acked (its owner won a quorum of ready replicas)."""
    store, _ready = not_ready()
    epoch = Epoch(1, "o")
    store.on_prepare(Prepare(ENTITY, epoch))
    assert store.on_write(Write(ENTITY, epoch, 1, {"s": b"1"})) == Ack(ENTITY, epoch, 1)
    assert store.stamp(ENTITY) == Stamp(epoch, 1) and store.pages(ENTITY) == {"s": b"1"}
    assert store.on_write(Write(ENTITY, epoch, 2, {"s": b"2"})) == Ack(ENTITY, epoch, 2)


def test_a_store_that_is_not_ready_silently_refuses_writes_of_epochs_it_did_not_blank_promise() -> None:
    """Not ready: a write of an epoch it never promised since it came back gets no answer at all and changes nothing, older or newer."""
    promised = Epoch(3, "x")
    store, _ready = not_ready(promised, Stamp(promised, 2), {"s": b"imported"})
    for epoch in (Epoch(3, "x"), Epoch(2, "old"), Epoch(9, "new")):  # imported promise, older, newer
        assert store.on_write(Write(ENTITY, epoch, 7, {"s": b"w"})) is None
        assert store.receive("o", Write(ENTITY, epoch, 7, {"s": b"w"})) == []
    assert store.stamp(ENTITY) == Stamp(promised, 2) and store.promised(ENTITY) == promised


def test_only_the_latest_blank_promise_is_writable() -> None:
    """Not ready: blank promises of E1 then E2; a write of E1 gets no answer, a write of E2 is acked."""
    store, _ready = not_ready()
    e1, e2 = Epoch(1, "a"), Epoch(2, "b")
    store.on_prepare(Prepare(ENTITY, e1))
    store.on_prepare(Prepare(ENTITY, e2))
    assert store.on_write(Write(ENTITY, e1, 1, {"s": b"a"})) is None
    assert store.on_write(Write(ENTITY, e2, 1, {"s": b"b"})) == Ack(ENTITY, e2, 1)


def test_once_ready_the_normal_rules_apply_again() -> None:
    """Ready after blank promises: a newer unpromised epoch's write is accepted, an older one is Nacked, promises are no longer blank."""
    store, ready = not_ready()
    e1 = Epoch(1, "a")
    store.on_prepare(Prepare(ENTITY, e1))
    ready.keys.add(ENTITY)
    assert store.on_write(Write(ENTITY, Epoch(2, "b"), 1, {"s": b"b"})) == Ack(ENTITY, Epoch(2, "b"), 1)
    assert store.on_write(Write(ENTITY, e1, 1, {"s": b"a"})) == Nack(ENTITY, e1, 1, Epoch(2, "b"))
    promise = store.on_prepare(Prepare(ENTITY, Epoch(3, "c")))
    assert isinstance(promise, Promise) and not promise.blank


def test_a_store_that_is_not_ready_still_imports() -> None:
    """Handoff imports go in whatever the readiness: the newest stamp and the greater promise win."""
    store, _ready = not_ready()
    stamp = Stamp(Epoch(4, "x"), 9)
    assert store.import_(Snapshot(ENTITY, Epoch(5, "y"), stamp, {"s": b"pulled"}))
    assert (store.promised(ENTITY), store.stamp(ENTITY), store.pages(ENTITY)) == (Epoch(5, "y"), stamp, {"s": b"pulled"})


def test_blank_promises_survive_the_wire() -> None:
    """A blank Promise crosses msgspec with its flag; a Promise without the field decodes as not blank."""
    blank = Promise(ENTITY, Epoch(1, "o"), ZERO_STAMP, {}, blank=True)
    assert wire(blank) == blank
    assert wire(Promise(ENTITY, Epoch(1, "o"), ZERO_STAMP, {})) == Promise(ENTITY, Epoch(1, "o"), ZERO_STAMP, {}, blank=False)


# ------------------------------------------------------------------- owner with blank promises


def blank_promise(stamp: Stamp = ZERO_STAMP, pages: dict[str, bytes] | None = None, epoch: Epoch = Epoch(1, "r1")) -> Promise:
    return Promise(ENTITY, epoch, stamp, pages or {}, blank=True)


def test_a_blank_promise_does_not_count_toward_the_read_quorum() -> None:
    """Majority of three: a blank promise and a ready one are not a quorum; a second ready one is."""
    owner = KeyOwner(ENTITY, "r1")
    owner.acquire(0.0, REPLICAS)
    epoch = owner.epoch
    assert owner.receive("r1", blank_promise(epoch=epoch), 0.1) == []
    assert owner.receive("r2", Promise(ENTITY, epoch, ZERO_STAMP, {}), 0.1) == []
    assert owner.phase == "preparing"
    outs = owner.receive("r3", Promise(ENTITY, epoch, ZERO_STAMP, {}), 0.1)
    assert owner.phase == "writing_back" and len(sends(outs)) == 3


@pytest.mark.parametrize("level", ["all", "one"])
def test_with_a_read_quorum_of_one_a_blank_promise_alone_acquires_nothing(level: Level) -> None:
    """Levels reading one replica: three blank promises still make no quorum; one ready promise does."""
    owner = KeyOwner(ENTITY, "r1")
    owner.acquire(0.0, REPLICAS, level)
    for name in REPLICAS:
        assert owner.receive(name, blank_promise(epoch=owner.epoch), 0.1) == []
    assert owner.phase == "preparing"
    owner.receive("r2", Promise(ENTITY, owner.epoch, ZERO_STAMP, {}), 0.1)
    assert owner.phase == "writing_back"


def test_a_blank_replicas_pages_still_take_part_in_newest_wins() -> None:
    """The newest stamp among ready and blank promises is adopted, even when only a blank replica holds it."""
    owner = KeyOwner(ENTITY, "r1")
    owner.acquire(0.0, REPLICAS, updates={"@active": b"r1"})
    epoch = owner.epoch
    newest = Stamp(Epoch(0, "z"), 9)
    owner.receive("r3", blank_promise(newest, {"s": b"newest"}, epoch), 0.1)
    owner.receive("r1", Promise(ENTITY, epoch, Stamp(Epoch(0, "a"), 2), {"s": b"old"}), 0.1)
    outs = owner.receive("r2", Promise(ENTITY, epoch, ZERO_STAMP, {}), 0.1)
    assert [s.frame for s in sends(outs)] == [Write(ENTITY, epoch, 10, {"s": b"newest", "@active": b"r1"})] * 3


def test_a_blank_replica_is_prepared_again_until_it_answers_ready() -> None:
    """The resend goes to the blank replica (and the silent one) but not to the ready one; its ready answer then counts."""
    owner = KeyOwner(ENTITY, "r1", resend_every=0.5)
    owner.acquire(0.0, REPLICAS)
    epoch = owner.epoch
    owner.receive("r1", Promise(ENTITY, epoch, ZERO_STAMP, {}), 0.1)
    owner.receive("r2", blank_promise(epoch=epoch), 0.1)
    outs = owner.timer("resend", 0.5)
    assert sorted(s.to for s in sends(outs)) == ["r2", "r3"]
    assert all(s.frame == Prepare(ENTITY, epoch) for s in sends(outs))
    owner.receive("r2", blank_promise(epoch=epoch), 0.6)  # still blank: still not counted
    assert owner.phase == "preparing"
    assert sorted(s.to for s in sends(owner.timer("resend", 1.0))) == ["r2", "r3"]
    owner.receive("r2", Promise(ENTITY, epoch, ZERO_STAMP, {}), 1.1)
    assert owner.phase == "writing_back"


def test_a_late_blank_answer_does_not_undo_a_counted_ready_one() -> None:
    """A replica that answered ready and then (a stale frame) blank still counts once, as ready."""
    owner = KeyOwner(ENTITY, "r1")
    owner.acquire(0.0, REPLICAS)
    epoch = owner.epoch
    owner.receive("r2", Promise(ENTITY, epoch, ZERO_STAMP, {}), 0.1)
    owner.receive("r2", blank_promise(epoch=epoch), 0.2)
    assert owner.phase == "preparing"
    owner.receive("r3", Promise(ENTITY, epoch, ZERO_STAMP, {}), 0.3)
    assert owner.phase == "writing_back"


def test_a_blank_promise_showing_our_own_epoch_still_gives_it_up() -> None:
    """Pages under our very epoch, even in a blank promise, mean another life minted it: Lost, not a quorum wait."""
    owner = KeyOwner(ENTITY, "r1")
    owner.acquire(0.0, REPLICAS)
    epoch = owner.epoch
    got = reports(owner.receive("r2", blank_promise(Stamp(epoch, 3), {"s": b"x"}, epoch), 0.1))
    assert got == [Lost(ENTITY, epoch, epoch)]


def test_a_restarted_replica_takes_part_in_the_acquisition_it_blank_promised() -> None:
    """Through real stores: r3 came back empty (not ready); the owner reads r1 and r2, and r3 acks the write-back of its blank-promised epoch."""
    confirmed = Stamp(Epoch(1, "x"), 4)
    stores = {
        "r1": holding(confirmed.epoch, confirmed, {"s": b"4"}),
        "r2": holding(confirmed.epoch, confirmed, {"s": b"4"}),
        "r3": ReplicaStore(ready=Readiness()),
    }
    owner = KeyOwner(ENTITY, "r1")
    got = pump(owner, stores, owner.acquire(0.0, REPLICAS, updates={"@active": b"r1"}, after=confirmed.epoch))
    assert [type(event) for event in got] == [Acquired]
    assert got[0].found == confirmed
    assert stores["r3"].stamp(ENTITY) == Stamp(owner.epoch, 5) and stores["r3"].pages(ENTITY) == {"s": b"4", "@active": b"r1"}


def test_an_empty_replica_that_is_not_ready_cannot_hide_a_confirmed_write() -> None:
    """r1 lost its memory and r3 missed write 4: the owner reaches no quorum from {r1 blank, r3}, then adopts 4 once r2 answers."""
    confirmed = Stamp(Epoch(1, "x"), 4)
    stores = {
        "r1": ReplicaStore(ready=Readiness()),
        "r2": holding(confirmed.epoch, confirmed, {"s": b"4"}),
        "r3": holding(confirmed.epoch, Stamp(confirmed.epoch, 3), {"s": b"3"}),
    }
    owner = KeyOwner(ENTITY, "r3")
    outs = owner.acquire(0.0, REPLICAS, after=confirmed.epoch)
    prepares = {s.to: s.frame for s in sends(outs)}
    for name in ("r1", "r3"):
        (reply,) = stores[name].receive("owner", prepares[name])
        assert isinstance(reply, Send)
        owner.receive(name, reply.frame, 0.1)
    assert owner.phase == "preparing"
    (reply,) = stores["r2"].receive("owner", prepares["r2"])
    assert isinstance(reply, Send)
    owner.receive("r2", reply.frame, 0.2)
    assert owner.phase == "writing_back" and owner.version == 5


def test_one_write_timer_times_out_each_pending_write_at_its_own_deadline() -> None:
    """The write timer is set once; confirmed writes leave it armed; firing times out only writes past their deadline, then re-arms."""
    owner = KeyOwner(ENTITY, "r1", write_timeout=1.0, resend_every=None)
    stores = {name: ReplicaStore() for name in REPLICAS}
    pump(owner, stores, owner.acquire(0.0, REPLICAS))
    v1, outs = owner.write(10.0, {"s": b"1"})
    assert [o for o in outs if isinstance(o, SetTimer)] == [SetTimer("write", 11.0)]
    assert [type(e) for e in pump(owner, stores, outs, 10.0)] == [Confirmed]
    v2, outs = owner.write(10.5, {"s": b"2"})
    assert not [o for o in outs if isinstance(o, SetTimer | CancelTimer)]  # still armed for 11.0
    v3, outs = owner.write(10.7, {"s": b"3"})
    assert owner.timer("write", 10.9) == []  # before the deadline it was armed for: nothing
    assert owner.timer("write", 11.0) == [SetTimer("write", 11.5)]  # v1 confirmed long ago: just re-armed for v2
    assert owner.timer("write", 11.5) == [
        Report(WriteTimedOut(ENTITY, owner.epoch, v2)),
        SetTimer("write", 11.7),
    ]
    assert owner.timer("write", 11.7) == [Report(WriteTimedOut(ENTITY, owner.epoch, v3))]
    assert owner.timer("write", 12.0) == []  # disarmed: nothing pending


def test_the_resend_timer_waits_for_the_oldest_pending_write_to_age() -> None:
    """Armed by an earlier write that got confirmed meanwhile, the resend timer does not resend a younger write: it moves to that write's turn."""
    owner = KeyOwner(ENTITY, "r1", write_timeout=5.0, resend_every=0.5)
    stores = {name: ReplicaStore() for name in REPLICAS}
    pump(owner, stores, owner.acquire(0.0, REPLICAS))
    v1, outs = owner.write(10.0, {"s": b"1"})
    assert SetTimer("resend", 10.5) in outs
    _v2, outs = owner.write(10.4, {"s": b"2"})  # lost on the way
    assert not [o for o in outs if isinstance(o, SetTimer)]  # the resend timer is armed already
    ack = Ack(ENTITY, owner.epoch, v1)
    assert reports(owner.receive("r1", ack, 10.45) + owner.receive("r2", ack, 10.45)) == [
        Confirmed(ENTITY, owner.epoch, v1, ("r1", "r2"))
    ]
    assert owner.timer("resend", 10.5) == [SetTimer("resend", 10.9)]  # v2 is pending but only 0.1 s old
    outs = owner.timer("resend", 10.9)
    assert sorted(s.to for s in sends(outs)) == list(REPLICAS) and SetTimer("resend", 11.4) in outs


def test_the_resend_timer_is_cancelled_once_nothing_is_pending_and_every_replica_acked() -> None:
    """A write confirmed before its resend time keeps the resend timer only until the third replica acks it too."""
    owner = KeyOwner(ENTITY, "r1", write_timeout=5.0, resend_every=0.5)
    stores = {name: ReplicaStore() for name in REPLICAS}
    pump(owner, stores, owner.acquire(0.0, REPLICAS))
    v1, outs = owner.write(10.0, {"s": b"1"})
    ack = Ack(ENTITY, owner.epoch, v1)
    assert reports(owner.receive("r1", ack, 10.01) + owner.receive("r2", ack, 10.01)) == [
        Confirmed(ENTITY, owner.epoch, v1, ("r1", "r2"))
    ]
    assert owner.receive("r3", ack, 10.02) == [CancelTimer("resend")]
    assert owner.timer("resend", 10.5) == []


# ============================================= missed promises, caught up =====


def _pump_except(owner: KeyOwner, stores: Mapping[str, ReplicaStore], outs: Iterable[Output], cut: str, now: float) -> list[Any]:
    """``pump``, with every frame to replica ``cut`` lost (it is partitioned away)."""
    return Pump(owner, stores, outs, now, cut).run()


def test_an_idle_owner_learns_of_a_promise_it_missed_before_its_next_write() -> None:
    """Seed 189's shape: won without r3, which promised a newer epoch of a failed acquisition; after the heal the resend, not a client write, meets the Nack: Lost with nothing Fenced."""
    missed = Epoch(9, "z")  # an acquisition that got r3's promise and no quorum
    stores = {"r1": ReplicaStore(), "r2": ReplicaStore(), "r3": holding(missed, ZERO_STAMP, {})}
    owner = KeyOwner(ENTITY, "r1", write_timeout=5.0, resend_every=0.5)
    outs = owner.acquire(0.0, REPLICAS, after=Epoch(8, "z"), persist=True)
    epoch = Epoch(9, "r1")  # the same round: r1 and r2 never saw round 9
    assert _pump_except(owner, stores, outs, "r3", 0.0) == [Persisting(ENTITY, epoch, 1, {})]
    assert [type(e) for e in _pump_except(owner, stores, owner.persisted(epoch), "r3", 0.1)] == [Acquired]
    version, outs = owner.write(0.2, {"s": b"1"})
    assert _pump_except(owner, stores, outs, "r3", 0.2) == [Confirmed(ENTITY, epoch, version, ("r1", "r2"))]
    # The partition heals; no client write comes. The resend goes on for the replica that never acked:
    outs = owner.timer("resend", 0.7)
    assert [(s.to, s.frame) for s in sends(outs)] == [("r3", Write(ENTITY, epoch, version, {"s": b"1"}))]
    assert pump(owner, stores, outs, 0.7) == [Lost(ENTITY, epoch, missed)]
    assert owner.phase == "lost" and owner._pending == {}


def test_the_catch_up_resend_backs_off_and_stops_once_every_replica_acked() -> None:
    """With nothing pending, a lagging replica is sent the newest write at 0.5, 1, 2, 4 then every 8 s; its ack ends the resends; a new write re-arms at once."""
    stores = {name: ReplicaStore() for name in REPLICAS}
    owner = KeyOwner(ENTITY, "r1", write_timeout=5.0, resend_every=0.5)
    assert [type(e) for e in _pump_except(owner, stores, owner.acquire(0.0, REPLICAS), "r3", 0.0)] == [Acquired]
    version, outs = owner.write(1.0, {"s": b"1"})
    assert [type(e) for e in _pump_except(owner, stores, outs, "r3", 1.0)] == [Confirmed]
    fired = []
    at = 1.5
    for _ in range(6):
        outs = owner.timer("resend", at)
        assert [s.to for s in sends(outs)] == ["r3"]
        (armed,) = [o for o in outs if isinstance(o, SetTimer)]
        fired.append(armed.at - at)
        at = armed.at
    assert fired == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    _v2, outs = owner.write(at - 3.0, {"s": b"2"})  # a write re-arms the resend for its own turn
    assert SetTimer("resend", at - 2.5) in outs
    outs = pump(owner, stores, outs, at - 3.0)  # r3 is back: it acks the write
    assert owner.timer("resend", at - 2.5) == [] and owner.timer("resend", at) == []
