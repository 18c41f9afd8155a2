"""The remembered view on a node's disk (casty/cluster/viewstore.py): the record, its reads, and when it is written."""

from __future__ import annotations

import asyncio

import pytest

from casty import MemoryStore
from casty._core.codec import Codec
from casty.errors import SchemaError
from casty.cluster.viewstore import VIEW_ACTOR, ViewKeeper, decode_view, encode_view
from casty.ports import StoredRecord
from conftest import LoopClock, run_virtual

CODEC = Codec(lambda *args: None)  # type: ignore[arg-type]


class FailingStore(MemoryStore):
    """A MemoryStore whose next ``fail`` saves raise OSError."""

    def __init__(self) -> None:
        super().__init__()
        self.fail = 0

    async def save(self, actor: str, key: str, version: int, state: bytes, *, epoch: tuple[int, str] = (0, "")) -> None:
        if self.fail:
            self.fail -= 1
            raise OSError("disk full")
        await super().save(actor, key, version, state, epoch=epoch)


def test_a_view_round_trips_sorted_and_a_record_that_is_no_view_is_a_schema_error() -> None:
    """encode_view/decode_view give back the life and the members sorted; a page set without 'view', a page that is not
    JSON of the right shape and a negative incarnation are SchemaError; a tombstone remembers nothing."""
    state = encode_view(CODEC, 7, [("n3", 2), ("n2", 0)])
    assert decode_view(CODEC, StoredRecord(12, state)) == decode_view(CODEC, StoredRecord(12, encode_view(CODEC, 7, [("n2", 0), ("n3", 2)])))
    view = decode_view(CODEC, StoredRecord(12, state))
    assert (view.life, view.members, view.version) == (7, (("n2", 0), ("n3", 2)), 12)
    assert decode_view(CODEC, StoredRecord(3, b"")).members == ()
    with pytest.raises(SchemaError, match="has no 'view' page"):
        decode_view(CODEC, StoredRecord(1, CODEC.encode_pages({"state": b"x"})))
    with pytest.raises(SchemaError, match="is not a view"):
        decode_view(CODEC, StoredRecord(1, CODEC.encode_pages({"view": b"[1, 2]"})))
    with pytest.raises(SchemaError, match="wrong types"):
        decode_view(CODEC, StoredRecord(1, CODEC.encode_pages({"view": b'{"life": 1, "members": [["n2", -1]]}'})))


def test_the_keeper_writes_only_when_the_list_changes_each_node_its_own_record_versions_growing_over_lives() -> None:
    """Two nodes on one shared store keep a record each (key = node id); the same list twice is one write; a new life
    reads its previous life's list and writes the next one at a version above both the stored one and its own life;
    two changes before a write ran are one write of the latest."""
    store = MemoryStore()

    async def main(clock: LoopClock) -> list[object]:
        loop = asyncio.get_running_loop()
        first = ViewKeeper(store, CODEC, 100, loop, node="n1")
        other = ViewKeeper(store, CODEC, 100, loop, node="n2")
        assert await first.read() is None
        first.keep([("n2", 1), ("n3", 1)])
        first.keep([("n3", 1), ("n2", 1)])
        other.keep([("n1", 1)])
        await asyncio.sleep(0.01)
        first.keep([("n2", 1), ("n3", 1)])
        await asyncio.sleep(0.01)
        again = ViewKeeper(store, CODEC, 50, loop, node="n1")  # a clock stepped back: its life is below the stored version
        view = await again.read()
        again.keep([("n2", 1), ("n3", 1)])  # not this life's list: written again, under this life
        await asyncio.sleep(0.01)
        again.keep([("n2", 1), ("n3", 3)])
        again.keep([("n2", 1), ("n3", 4)])  # before the write ran: only the latest list is written
        await asyncio.sleep(0.01)
        record = await store.load(VIEW_ACTOR, "n1")
        assert record is not None
        return [first.writes, other.writes, view, again.writes, record.version, decode_view(CODEC, record)]

    first_writes, other_writes, view, again_writes, version, last = run_virtual(main)
    assert (first_writes, other_writes) == (1, 1)
    assert view == decode_view(CODEC, StoredRecord(101, encode_view(CODEC, 100, [("n2", 1), ("n3", 1)])))
    assert (again_writes, version) == (2, 103)
    assert last == decode_view(CODEC, StoredRecord(103, encode_view(CODEC, 50, [("n2", 1), ("n3", 4)])))


def test_a_failed_write_is_logged_and_the_next_change_writes_again(caplog: pytest.LogCaptureFixture) -> None:
    """A save that raises costs the write, not the node: it is logged, and the next keep writes the new list."""
    store = FailingStore()
    store.fail = 1

    async def main(clock: LoopClock) -> tuple[int, StoredRecord | None]:
        loop = asyncio.get_running_loop()
        keeper = ViewKeeper(store, CODEC, 10, loop, node="n1")
        keeper.keep([("n2", 1)])
        await asyncio.sleep(0.01)
        keeper.keep([("n2", 1)])
        await asyncio.sleep(0.01)
        return keeper.writes, await store.load(VIEW_ACTOR, "n1")

    writes, record = run_virtual(main)
    assert writes == 1 and record is not None and decode_view(CODEC, record).members == (("n2", 1),)
    assert "n1: the member list could not be kept on the disk: OSError('disk full')" in caplog.text
