"""The wire codec checks each channel name once, and still refuses every bad one after a good one."""

from __future__ import annotations

import pytest

from casty.protocol import replication
from casty.protocol.replication import Epoch, Prepare
from casty.protocol.wire import MAX_CHANNEL, Wire, WireError


@pytest.mark.parametrize("channel", ["", "x" * (MAX_CHANNEL + 1), ["r"], None, b"r"])
def test_bad_channels_are_refused_after_a_good_one_was_cached(channel: object) -> None:
    """Encoding on "r" first does not let an empty, too long, unhashable or non-str channel through: WireError(reason="channel")."""
    wire = Wire(replication.FRAMES)
    frame = Prepare(("a:t", "k"), Epoch(1, "n1"))
    assert wire.decode(wire.encode("r", frame)).frame == frame
    with pytest.raises(WireError) as info:
        wire.encode(channel, frame)  # type: ignore[arg-type]
    assert info.value.reason == "channel"


def test_a_frame_nested_100k_deep_is_a_wire_error_not_a_recursion_error() -> None:
    """A peer's frame whose body is 100k nested arrays is refused with WireError (reason "garbage"), never a RecursionError out of decode."""
    import msgspec

    wire = Wire(replication.FRAMES)
    header = msgspec.msgpack.decode(wire.encode("r", Prepare(("a:t", "k"), Epoch(1, "n1"))))
    deep = msgspec.msgpack.encode([*header[:3], msgspec.Raw(b"\x91" * 100_000 + b"\xc0")])
    with pytest.raises(WireError) as info:
        wire.decode(deep)
    assert info.value.reason == "garbage"
