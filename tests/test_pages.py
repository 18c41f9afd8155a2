"""The page writers' seam: what a writer may ask of its activation (``PagesOwner``), and how a group of writes settles."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

from casty import observer as ev
from casty._core.activation import Activation
from casty._core.pages import STATE_PAGES, PagesOwner
from casty.cluster.replicated_pages import _Awaited, _settle, _Staged, _Waiter
from casty.errors import Fenced


def _owner_members() -> tuple[list[str], list[str]]:
    attributes = list(PagesOwner.__annotations__)
    methods = [name for name, value in vars(PagesOwner).items() if inspect.isfunction(value) and not name.startswith("_")]
    return attributes, methods


def test_pages_owner_names_only_public_members_that_activation_has() -> None:
    """Every member of PagesOwner is public, an attribute is one of Activation's slots, a method one of its methods."""
    attributes, methods = _owner_members()
    assert attributes == [
        "system", "type", "behavior", "key", "entity", "lease", "closed", "pages", "state_value", "state_version",
    ]
    assert methods == ["check_lease", "adopt", "encode_initial", "decode_state", "write_state", "lose_ownership"]
    for name in attributes:
        assert name in Activation.__slots__, name
    for name in methods:
        assert callable(getattr(Activation, name)), name


class _Node:
    """The little of a node a settling ``_Staged`` reads: its observer."""

    def __init__(self) -> None:
        self.events: list[ev.Event] = []

    def observer(self, event: ev.Event) -> None:
        self.events.append(event)

    def emit(self, cls: type[ev.Event], *fields: Any) -> None:
        self.observer(cls(*fields))


class _Type:
    name = "counter"


class _Owner:
    """A stand-in activation: the PagesOwner attributes a settlement reads and writes."""

    def __init__(self) -> None:
        self.system = _Node()
        self.type = _Type()
        self.key = "k"
        self.state_value: Any = 0
        self.state_version = 0


def _group(loop: asyncio.AbstractEventLoop, owner: Any, order: list[str]) -> tuple[list[_Waiter], list[asyncio.Future[Any]]]:
    first: asyncio.Future[Any] = loop.create_future()
    staged: asyncio.Future[Any] = loop.create_future()
    last: asyncio.Future[Any] = loop.create_future()
    for name, future in (("first", first), ("staged", staged), ("last", last)):
        future.add_done_callback(lambda _f, name=name: order.append(name))
    waiters: list[_Waiter] = [
        _Awaited(first), _Staged(owner, 7, "state.set", STATE_PAGES, staged, 42), _Awaited(last),
    ]
    return waiters, [first, staged, last]


def test_a_confirmed_group_settles_its_waiters_in_the_order_they_were_staged() -> None:
    """A coroutine's write, a state write and another coroutine's write: settled in that order, each its own way."""
    loop = asyncio.new_event_loop()
    try:
        owner = _Owner()
        order: list[str] = []
        waiters, (first, staged, last) = _group(loop, owner, order)
        pages = {"@state": b"*"}
        _settle(waiters, 5, pages, None)
        loop.run_until_complete(asyncio.sleep(0))
        assert order == ["first", "staged", "last"]
        assert first.result() == (5, pages)
        assert last.result() == (5, pages)
        assert staged.result() is None
        assert (owner.state_value, owner.state_version) == (42, 5)
        assert owner.system.events == [ev.WriteConfirmed("counter", "k", 7, 5, STATE_PAGES)]
    finally:
        loop.close()


def test_a_failed_group_fails_every_waiter_and_reports_only_the_staged_one() -> None:
    """Fenced: each future gets the error (in staged order); only the _Staged reports WriteFailed, the state stays."""
    loop = asyncio.new_event_loop()
    try:
        owner = _Owner()
        order: list[str] = []
        waiters, futures = _group(loop, owner, order)
        error = Fenced("counter['k']: write 5 fenced")
        _settle(waiters, 5, {}, error)
        loop.run_until_complete(asyncio.sleep(0))
        assert order == ["first", "staged", "last"]
        for future in futures:
            with pytest.raises(Fenced):
                future.result()
        assert (owner.state_value, owner.state_version) == (0, 0)
        assert owner.system.events == [ev.WriteFailed("counter", "k", 7, "state.set", "fenced")]
    finally:
        loop.close()


def test_a_settled_future_is_left_alone() -> None:
    """A waiter whose future is already done (its task cancelled it) is skipped, the others still settle."""
    loop = asyncio.new_event_loop()
    try:
        owner = _Owner()
        order: list[str] = []
        waiters, (first, _staged, last) = _group(loop, owner, order)
        first.cancel()
        _settle(waiters, 3, {}, None)
        loop.run_until_complete(asyncio.sleep(0))
        assert order == ["first", "staged", "last"]
        assert first.cancelled()
        assert last.result() == (3, {})
    finally:
        loop.close()
