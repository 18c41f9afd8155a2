"""casty.protocol.sansio.perform: the one dispatch of every core's outputs, in order, stopping once closed."""

from __future__ import annotations

from typing import Any

import pytest

from casty.protocol.sansio import CancelTimer, Output, Report, Send, SetTimer, perform


class Recorder:
    """A performer that writes down each call, and closes itself after ``close_after`` calls."""

    def __init__(self, close_after: int | None = None) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.close_after = close_after

    @property
    def closed(self) -> bool:
        return self.close_after is not None and len(self.calls) >= self.close_after

    def send(self, to: str, frame: Any) -> None:
        self.calls.append(("send", to, frame))

    def set_timer(self, name: str, at: float) -> None:
        self.calls.append(("set_timer", name, at))

    def cancel_timer(self, name: str) -> None:
        self.calls.append(("cancel_timer", name))

    def report(self, event: Any) -> None:
        self.calls.append(("report", event))


OUTPUTS: list[Output] = [Report("e1"), Send("n2", "f"), SetTimer("t", 1.5), CancelTimer("t"), Send("n3", "g")]


def test_each_output_calls_its_method_in_the_order_given() -> None:
    """Five outputs of the four kinds: one call each, in order, with the output's fields."""
    performer = Recorder()
    perform(OUTPUTS, performer)
    assert performer.calls == [
        ("report", "e1"), ("send", "n2", "f"), ("set_timer", "t", 1.5), ("cancel_timer", "t"), ("send", "n3", "g"),
    ]


def test_outputs_after_the_performer_closed_are_dropped() -> None:
    """A performer closed after two calls gets exactly those two; one closed from the start gets none."""
    two = Recorder(close_after=2)
    perform(OUTPUTS, two)
    assert two.calls == [("report", "e1"), ("send", "n2", "f")]
    none = Recorder(close_after=0)
    perform(OUTPUTS, none)
    assert none.calls == []


def test_anything_but_an_output_is_a_type_error_naming_it() -> None:
    """A core that returns something else is a bug: TypeError with its repr, after the outputs before it were performed."""
    performer = Recorder()
    with pytest.raises(TypeError, match=r"a core returned \('send', 'n2'\), which is not an output"):
        perform([Send("n1", "f"), ("send", "n2")], performer)  # type: ignore[list-item]
    assert performer.calls == [("send", "n1", "f")]
