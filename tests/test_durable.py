"""Durable actors: write-through and write-behind to a Store, recovery by a new ActorSystem on the same file."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from conftest import START_US, LoopClock, Recorder, run_virtual

from casty import ActorSystem, Askable, Context, MemoryStore, SQLiteStore, Unavailable, actor
from casty.observer import ActivationStarted, ScheduleCaughtUp, ScheduleFired, WriteFailed
from casty.ports import NO_EPOCH, ListsRecords, StoredEpoch, StoredRecord

SECOND = 1_000_000


@dataclass(frozen=True)
class Add(Askable[int]):
    amount: int


@dataclass(frozen=True)
class Get(Askable[int]):
    pass


@dataclass(frozen=True)
class Beat:
    pass


@dataclass(frozen=True)
class StartBeat(Askable[None]):
    every: timedelta


Msg = Add | Get | Beat | StartBeat


async def _handle(ctx: Context[int, Msg]) -> None:
    async for msg in ctx.inbox:
        match msg:
            case Add(amount=amount, reply_to=reply_to):
                reply_to.tell(await ctx.state.update(lambda v: v + amount))
            case Get(reply_to=reply_to):
                reply_to.tell(ctx.state.value)
            case Beat():
                await ctx.state.update(lambda v: v + 1000)
            case StartBeat(every=every, reply_to=reply_to):
                await ctx.schedule("beat", every, every, Beat())
                reply_to.tell(None)


@actor(initial=0, durable="write")
async def ledger(ctx: Context[int, Msg]) -> None:
    """A write-through durable counter; Beat adds 1000 (to tell schedule firings apart)."""
    await _handle(ctx)


@actor(initial=0, durable=timedelta(seconds=5))
async def lazy_ledger(ctx: Context[int, Msg]) -> None:
    """The same counter with write-behind: pages reach the store at most every 5 s."""
    await _handle(ctx)


class Crash(Exception):
    """Raised inside ``async with`` to make the system exit as a crash."""


def test_new_system_on_same_sqlite_file_recovers_state_and_schedules(tmp_path: Path, recorder: Recorder) -> None:
    """After a crash, a new system on the SQLite file resumes the active key with no message, state and schedule intact."""
    path = tmp_path / "casty.sqlite3"

    async def first(clock: LoopClock) -> None:
        store = SQLiteStore(path)
        with pytest.raises(Crash):
            async with ActorSystem(clock=clock, store=store) as system:
                ref = system.ref(ledger, "acct")
                assert await ref.ask(Add(5)) == 5
                await ref.ask(StartBeat(timedelta(minutes=1)))
                await asyncio.sleep(61)  # one beat: 1005
                raise Crash
        store.close()

    async def second(clock: LoopClock) -> int:
        clock.step(timedelta(minutes=10))  # the node was down for ten minutes
        store = SQLiteStore(path)
        async with ActorSystem(clock=clock, store=store, observer=recorder) as system:
            await asyncio.sleep(1)  # nobody sends anything: the @active marker brings the key back
            assert system.activations() == [(ledger.name, "acct")]
            value = await system.ref(ledger, "acct").ask(Get())
        store.close()
        return value

    run_virtual(first)
    assert run_virtual(second) == 2005  # 5 + the first beat + one catch-up beat on recovery
    (started,) = recorder.of(ActivationStarted)
    assert started.recovered
    (fired,) = recorder.of(ScheduleFired)
    assert fired.due_us == START_US + 120 * SECOND
    (caught,) = recorder.of(ScheduleCaughtUp)
    assert caught.skipped == 8  # 3..10 min passed while down; fires once, no burst


def test_idle_key_is_not_resumed_but_keeps_its_state(tmp_path: Path) -> None:
    """A key that went idle (its @active cleared) is not started by a new system, but its state is on disk."""
    path = tmp_path / "casty.sqlite3"

    async def first(clock: LoopClock) -> None:
        store = SQLiteStore(path)
        async with ActorSystem(clock=clock, store=store) as system:
            await system.ref(ledger, "quiet").ask(Add(7))
            await asyncio.sleep(120)
            assert system.activations() == []
        store.close()

    async def second(clock: LoopClock) -> tuple[list[tuple[str, str]], int]:
        store = SQLiteStore(path)
        async with ActorSystem(clock=clock, store=store) as system:
            await asyncio.sleep(1)
            before = system.activations()
            value = await system.ref(ledger, "quiet").ask(Get())
        store.close()
        return before, value

    run_virtual(first)
    assert run_virtual(second) == ([], 7)


def test_a_single_node_writes_on_under_the_epoch_it_found_in_the_store(tmp_path: Path) -> None:
    """A key last saved under a cluster owner's epoch: a single node's next writes carry that epoch, so the store takes them."""
    path = tmp_path / "casty.sqlite3"

    async def first(clock: LoopClock) -> None:
        store = SQLiteStore(path)
        async with ActorSystem(clock=clock, store=store) as system:
            await system.ref(ledger, "moved").ask(Add(7))
        record = await store.load(ledger.name, "moved")
        assert record is not None and record.epoch == (0, "")
        await store.save(ledger.name, "moved", record.version, record.state, epoch=(3, "n1#1"))  # as a cluster owner saved it
        store.close()

    async def second(clock: LoopClock) -> int:
        store = SQLiteStore(path)
        async with ActorSystem(clock=clock, store=store) as system:
            value = await system.ref(ledger, "moved").ask(Add(1))
        store.close()
        return value

    async def third(clock: LoopClock) -> tuple[int, StoredRecord | None]:
        store = SQLiteStore(path)
        async with ActorSystem(clock=clock, store=store) as system:
            value = await system.ref(ledger, "moved").ask(Get())
        record = await store.load(ledger.name, "moved")
        store.close()
        return value, record

    run_virtual(first)
    assert run_virtual(second) == 8
    value, record = run_virtual(third)
    assert value == 8  # the second system's write reached the store: not refused as older than epoch (3, 'n1#1')
    assert record is not None and record.epoch == (3, "n1#1")


@pytest.mark.parametrize("make_store", [MemoryStore, lambda p: SQLiteStore(p / "v.sqlite3")], ids=["memory", "sqlite"])
def test_store_keeps_the_greatest_version(tmp_path: Path, make_store: object) -> None:
    """A late save of an older version never undoes a newer one; drop leaves a tombstone only up to its version."""

    async def main() -> tuple[StoredRecord | None, StoredRecord | None, StoredRecord | None]:
        store = make_store() if make_store is MemoryStore else make_store(tmp_path)  # type: ignore[operator]
        await store.save("t", "k", 2, b"two")
        await store.save("t", "k", 1, b"one")
        kept = await store.load("t", "k")
        await store.drop("t", "k", 1)
        after_old_drop = await store.load("t", "k")
        await store.drop("t", "k", 2)
        return kept, after_old_drop, await store.load("t", "k")

    assert asyncio.run(main()) == ((2, b"two", (0, "")), (2, b"two", (0, "")), (2, b"", (0, "")))


@pytest.mark.parametrize("make_store", [MemoryStore, lambda p: SQLiteStore(p / "e.sqlite3")], ids=["memory", "sqlite"])
def test_store_keeps_the_greatest_epoch_then_version(tmp_path: Path, make_store: object) -> None:
    """A stale owner's save (older epoch, higher version) never overwrites a newer epoch's; its drop deletes nothing newer."""

    async def main() -> list[StoredRecord | None]:
        store = make_store() if make_store is MemoryStore else make_store(tmp_path)  # type: ignore[operator]
        seen: list[StoredRecord | None] = []
        await store.save("t", "k", 5, b"new", epoch=(2, "n2#1"))
        await store.save("t", "k", 9, b"stale", epoch=(1, "n3#1"))  # the fenced owner, confirmed further on its own
        seen.append(await store.load("t", "k"))
        await store.save("t", "k", 5, b"tie", epoch=(2, "n1#9"))  # same round, smaller node: an older epoch
        seen.append(await store.load("t", "k"))
        await store.drop("t", "k", 9, epoch=(1, "n3#1"))
        seen.append(await store.load("t", "k"))
        await store.save("t", "k", 6, b"next", epoch=(2, "n2#1"))
        await store.save("t", "k", 1, b"above", epoch=(3, "n1#2"))  # a newer epoch wins even at a lower version
        seen.append(await store.load("t", "k"))
        await store.drop("t", "k", 1, epoch=(3, "n1#2"))
        seen.append(await store.load("t", "k"))
        return seen

    assert asyncio.run(main()) == [
        (5, b"new", (2, "n2#1")),
        (5, b"new", (2, "n2#1")),
        (5, b"new", (2, "n2#1")),
        (1, b"above", (3, "n1#2")),
        (1, b"", (3, "n1#2")),
    ]


@pytest.mark.parametrize("make_store", [MemoryStore, lambda p: SQLiteStore(p / "d.sqlite3")], ids=["memory", "sqlite"])
def test_a_drop_leaves_a_tombstone_so_a_late_older_save_never_brings_the_key_back(tmp_path: Path, make_store: object) -> None:
    """After a drop of (epoch 2, v6), a fenced owner's late save of (epoch 1, v9) is refused; the key is gone from keys(), a newer save revives it."""

    async def main() -> list[object]:
        store = make_store() if make_store is MemoryStore else make_store(tmp_path)  # type: ignore[operator]
        seen: list[object] = []
        await store.save("t", "k", 5, b"live", epoch=(2, "n2#1"))
        await store.drop("t", "k", 6, epoch=(2, "n2#1"))  # the newest owner deleted the key and let it idle
        await store.save("t", "k", 9, b"stale", epoch=(1, "n3#1"))
        seen.append(await store.load("t", "k"))
        seen.append(list(await store.keys()))
        await store.save("t", "k", 7, b"again", epoch=(2, "n2#1"))
        seen.append(await store.load("t", "k"))
        seen.append(list(await store.keys()))
        return seen

    assert asyncio.run(main()) == [(6, b"", (2, "n2#1")), [], (7, b"again", (2, "n2#1")), [("t", "k")]]


@pytest.mark.parametrize("make_store", [MemoryStore, lambda p: SQLiteStore(p / "r.sqlite3")], ids=["memory", "sqlite"])
def test_records_list_every_record_tombstones_included_sorted(tmp_path: Path, make_store: object) -> None:
    """records() (casty.ports.ListsRecords, the disk rule) lists live records and tombstones, by (actor, key); keys() only the live."""

    async def main() -> tuple[object, object, bool]:
        store = make_store() if make_store is MemoryStore else make_store(tmp_path)  # type: ignore[operator]
        await store.save("t", "b", 3, b"bee", epoch=(2, "n2#1"))
        await store.save("t", "a", 1, b"ay", epoch=(1, "n1#1"))
        await store.drop("t", "a", 2, epoch=(1, "n1#1"))
        await store.save("s", "z", 4, b"zed")
        return list(await store.records()), list(await store.keys()), isinstance(store, ListsRecords)

    records, keys, lists = asyncio.run(main())
    assert records == [("s", "z", (4, b"zed", (0, ""))), ("t", "a", (2, b"", (1, "n1#1"))), ("t", "b", (3, b"bee", (2, "n2#1")))]
    assert keys == [("s", "z"), ("t", "b")]
    assert lists is True


@dataclass(frozen=True)
class Wipe(Askable[int]):
    pass


@actor(initial=0, durable="write", idle_after=1.0)
async def wiped_ledger(ctx: Context[int, Add | Wipe]) -> None:
    """Add adds; Wipe deletes the state (and answers 0); idle after 1 s, so a deleted key is dropped from the store."""
    async for msg in ctx.inbox:
        if isinstance(msg, Add):
            msg.reply_to.tell(await ctx.state.update(lambda v: v + msg.amount))
        else:
            await ctx.state.delete()
            msg.reply_to.tell(0)


def test_a_deleted_key_starts_again_above_its_tombstone(tmp_path: Path) -> None:
    """A deleted, idle key leaves a tombstone; a new system starts it from initial and its writes reach the store above it."""
    path = tmp_path / "casty.sqlite3"

    async def first(clock: LoopClock) -> StoredRecord | None:
        store = SQLiteStore(path)
        async with ActorSystem(clock=clock, store=store) as system:
            ref = system.ref(wiped_ledger, "w")
            await ref.ask(Add(4))
            await ref.ask(Wipe())
            await asyncio.sleep(5)  # idle: @active cleared, no page left, the key is dropped
        record = await store.load(wiped_ledger.name, "w")
        keys = list(await store.keys())
        store.close()
        assert keys == []
        return record

    async def second(clock: LoopClock) -> tuple[int, StoredRecord | None]:
        store = SQLiteStore(path)
        async with ActorSystem(clock=clock, store=store) as system:
            value = await system.ref(wiped_ledger, "w").ask(Add(2))
        record = await store.load(wiped_ledger.name, "w")
        store.close()
        return value, record

    tombstone = run_virtual(first)
    assert tombstone == (4, b"", (0, ""))  # activate, Add, Wipe, deactivate
    value, record = run_virtual(second)
    assert value == 2
    assert record is not None and (record.version, record.epoch) == (6, (0, ""))  # activate 5, Add 6 (a stop keeps @active)


def test_sqlite_database_of_the_old_schema_reads_with_epoch_zero(tmp_path: Path) -> None:
    """A casty_pages table without epoch columns (written before epochs were stored) opens, loads with epoch (0, ''), and takes epoch saves."""
    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(path)
    db.execute(
        "CREATE TABLE casty_pages (actor TEXT NOT NULL, key TEXT NOT NULL, version INTEGER NOT NULL, "
        "state BLOB NOT NULL, PRIMARY KEY (actor, key)) WITHOUT ROWID"
    )
    db.execute("INSERT INTO casty_pages VALUES ('t', 'k', 7, x'01')")
    db.commit()
    db.close()

    async def main() -> tuple[StoredRecord | None, StoredRecord | None, StoredRecord | None]:
        store = SQLiteStore(path)
        old = await store.load("t", "k")
        await store.save("t", "k", 3, b"older", epoch=(0, ""))  # no epoch, lower version: refused as before
        kept = await store.load("t", "k")
        await store.save("t", "k", 8, b"new", epoch=(1, "n1#1"))
        new = await store.load("t", "k")
        store.close()
        return old, kept, new

    assert asyncio.run(main()) == ((7, b"\x01", (0, "")), (7, b"\x01", (0, "")), (8, b"new", (1, "n1#1")))
    reopened = SQLiteStore(path)
    assert asyncio.run(reopened.load("t", "k")) == (8, b"new", (1, "n1#1"))
    reopened.close()


class BrokenStore(MemoryStore):
    """A store whose saves fail while ``broken`` is set (a full disk, a lost database)."""

    def __init__(self) -> None:
        super().__init__()
        self.broken = False

    async def save(self, actor: str, key: str, version: int, state: bytes, *, epoch: StoredEpoch = NO_EPOCH) -> None:
        if self.broken:
            raise OSError("disk full")
        await super().save(actor, key, version, state, epoch=epoch)


def test_failed_durable_write_raises_unavailable_and_node_keeps_running(recorder: Recorder) -> None:
    """A save the store refuses fails the write with Unavailable; the node then serves the next request."""
    store = BrokenStore()

    async def main(clock: LoopClock) -> tuple[str, int]:
        async with ActorSystem(clock=clock, store=store, observer=recorder) as system:
            ref = system.ref(ledger, "broken")
            await ref.ask(Add(1))
            store.broken = True
            with pytest.raises(Unavailable) as caught:
                await ref.ask(Add(1))
            store.broken = False
            return str(caught.value), await ref.ask(Add(10))

    error, value = run_virtual(main)
    assert "disk full" in error
    assert value == 11  # the refused write left no trace: not on disk, not in the node's copy
    assert [w.reason for w in recorder.of(WriteFailed)] == ["unavailable"]


def test_failed_durable_write_is_unavailable_to_the_body() -> None:
    """Inside the body, the refused write raises casty.Unavailable naming the key and the store's error."""
    store = BrokenStore()
    seen: list[object] = []

    async def main(clock: LoopClock) -> None:
        async with ActorSystem(clock=clock, store=store) as system:
            await system.ref(probe_ledger, "p").ask(TryWrite())
            store.broken = True
            seen.append(await system.ref(probe_ledger, "p").ask(TryWrite()))

    run_virtual(main)
    assert seen[0] is not None and seen[0][0] == "Unavailable" and "disk full" in seen[0][1] and "'p'" in seen[0][1]


@dataclass(frozen=True)
class TryWrite(Askable[tuple[str, str] | None]):
    """Answered None, or the class name and text of the exception the write raised (an exception cannot travel)."""


@actor(initial=0, durable="write")
async def probe_ledger(ctx: Context[int, TryWrite]) -> None:
    """Answers each TryWrite with None, or with the exception its write raised."""
    async for msg in ctx.inbox:
        try:
            await ctx.state.update(lambda v: v + 1)
            msg.reply_to.tell(None)
        except Unavailable as exc:
            msg.reply_to.tell((type(exc).__name__, str(exc)))


def test_write_behind_reaches_the_store_after_its_interval() -> None:
    """durable=5 s: a write is in the store only after 5 s; an orderly stop flushes the rest."""
    store = MemoryStore()

    async def main(clock: LoopClock) -> tuple[object, object, object]:
        async with ActorSystem(clock=clock, store=store) as system:
            ref = system.ref(lazy_ledger, "wb")
            await ref.ask(Add(3))
            early = await store.load(lazy_ledger.name, "wb")
            await asyncio.sleep(6)
            flushed = await store.load(lazy_ledger.name, "wb")
            await ref.ask(Add(4))
        final = await store.load(lazy_ledger.name, "wb")
        return early, flushed, final

    early, flushed, final = run_virtual(main)
    assert early is None
    assert flushed is not None and final is not None and final[0] > flushed[0]


class SlowStore(MemoryStore):
    """A store whose saves take ``delay`` seconds: a crash can land between a tell and its confirmation."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay

    async def save(self, actor: str, key: str, version: int, state: bytes, *, epoch: StoredEpoch = NO_EPOCH) -> None:
        await asyncio.sleep(self.delay)
        await super().save(actor, key, version, state, epoch=epoch)

    async def keys(self) -> Sequence[tuple[str, str]]:
        return await super().keys()


def test_firing_whose_write_was_not_confirmed_repeats_after_restart(recorder: Recorder) -> None:
    """A crash after a firing's tell but before its write is saved makes the next system fire it again (a repeat)."""
    store = SlowStore(delay=0.5)
    before = Recorder()

    async def first(clock: LoopClock) -> None:
        with pytest.raises(Crash):
            async with ActorSystem(clock=clock, store=store, observer=before) as system:
                ref = system.ref(ledger, "rep")
                await ref.ask(StartBeat(timedelta(seconds=10)))
                await asyncio.sleep(10.2)  # the first beat was told; its next-due write is still in flight
                raise Crash

    async def second(clock: LoopClock) -> None:
        clock.step(timedelta(seconds=20))  # restarted 20 s later (this loop's time starts at 0 again)
        async with ActorSystem(clock=clock, store=store, observer=recorder) as system:
            await asyncio.sleep(1.5)
            assert system.activations() == [(ledger.name, "rep")]

    run_virtual(first)
    run_virtual(second)
    (told,) = before.of(ScheduleFired)
    fired = recorder.of(ScheduleFired)
    assert [f.due_us for f in fired] == [told.due_us]  # the same occurrence, told again


@actor(initial=0, durable="write", write_timeout=timedelta(seconds=2))
async def impatient(ctx: Context[int, TryWrite]) -> None:
    """Answers each TryWrite with None, or with the exception its write raised; writes time out after 2 s."""
    async for msg in ctx.inbox:
        try:
            await ctx.state.update(lambda v: v + 1)
            msg.reply_to.tell(None)
        except Unavailable as exc:
            msg.reply_to.tell((type(exc).__name__, str(exc)))


def test_a_store_slower_than_write_timeout_makes_the_write_unavailable(recorder: Recorder) -> None:
    """A save that takes longer than the type's write_timeout fails with Unavailable after exactly that long."""
    store = SlowStore(delay=0.0)

    async def main(clock: LoopClock) -> tuple[object, float]:
        loop = asyncio.get_running_loop()
        async with ActorSystem(clock=clock, store=store, observer=recorder) as system:
            ref = system.ref(impatient, "slow")
            assert await ref.ask(TryWrite()) is None
            store.delay = 10.0
            started = loop.time()
            answer = await ref.ask(TryWrite())
            return answer, loop.time() - started

    answer, took = run_virtual(main)
    assert answer is not None and answer[0] == "Unavailable" and "write_timeout = 2 s" in answer[1]
    assert took == pytest.approx(2.0)
    assert [w.reason for w in recorder.of(WriteFailed)] == ["unavailable"]
