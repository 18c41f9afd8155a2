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


# --- a node schedule's tick: ScheduledDeliver and its occurrence -------------------------------------------

def _scheduled(**fields: object) -> dict[str, object]:
    """A ScheduledDeliver body as a peer would send it, ``fields`` overriding a valid one."""
    body: dict[str, object] = {
        "request": 1, "actor": "m:t", "key": "k", "message": b"\x90", "reply_node": None, "reply_request": None,
        "origin": "node-schedule:beat", "schedule": "beat", "due_us": 1_767_225_600_000_000,
        "fired_us": 1_767_225_600_000_100, "skipped": 2,
    }
    body.update(fields)
    return body


def test_a_scheduled_deliver_round_trips_and_a_plain_deliver_keeps_its_bytes() -> None:
    """ScheduledDeliver crosses CLUSTER_WIRE with its four occurrence fields under its own tag; a Deliver's bytes are
    the same map of seven fields as before it existed (no occurrence key), so every other routed message is unchanged."""
    import msgspec

    from casty.cluster.routing import CLUSTER_WIRE, Deliver, ScheduledDeliver

    frame = ScheduledDeliver(7, "m:t", "k", b"\x90", None, None, "node-schedule:beat", schedule="beat",
                             due_us=1_767_225_600_000_000, fired_us=1_767_225_600_000_100, skipped=2)
    data = CLUSTER_WIRE.encode("d", frame)
    decoded = CLUSTER_WIRE.decode(data).frame
    assert type(decoded) is ScheduledDeliver and decoded == frame and isinstance(decoded, Deliver)
    assert msgspec.msgpack.decode(data)[2] == "ScheduledDeliver"
    plain = msgspec.msgpack.decode(CLUSTER_WIRE.encode("d", Deliver(7, "m:t", "k", b"\x90")))
    assert plain[2] == "Deliver" and list(plain[3]) == ["request", "actor", "key", "message", "reply_node", "reply_request", "origin"]


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("schedule", "", "schedule is a non-empty str"),
        ("schedule", 3, "schedule"),
        ("due_us", 2**62, "due_us is an int of µs between"),
        ("due_us", -(2**62), "due_us is an int of µs between"),
        ("fired_us", 2**63 - 1, "fired_us is an int of µs between"),
        ("fired_us", "soon", "fired_us"),
        ("skipped", -1, "skipped is an int from 0"),
        ("skipped", True, "skipped"),
        ("due_us", None, "due_us"),
    ],
)
def test_a_scheduled_deliver_with_an_occurrence_no_firing_makes_is_refused_on_both_ends(field: str, value: object, says: str) -> None:
    """The same limits when a frame is built (InvalidOccurrence) and when a peer's bytes are decoded (WireError
    reason "body", naming the field): an empty schedule, a time that is no UTC datetime, a negative skip, a wrong type."""
    import msgspec

    from casty._core.occurrence import InvalidOccurrence
    from casty.cluster.routing import CLUSTER_WIRE, ScheduledDeliver

    body = _scheduled(**{field: value})
    data = msgspec.msgpack.encode((2, "d", "ScheduledDeliver", body))
    with pytest.raises(WireError) as info:
        CLUSTER_WIRE.decode(data)
    assert info.value.reason == "body" and info.value.tag == "ScheduledDeliver" and says in str(info.value)
    with pytest.raises((InvalidOccurrence, TypeError)) as built:
        ScheduledDeliver(**body)  # type: ignore[arg-type]
    assert says in str(built.value) or field in str(built.value)


def test_a_scheduled_deliver_missing_its_occurrence_is_a_body_error() -> None:
    """A ScheduledDeliver without its occurrence fields (a peer's truncated map) is WireError reason "body"."""
    import msgspec

    from casty.cluster.routing import CLUSTER_WIRE

    body = _scheduled()
    del body["fired_us"]
    with pytest.raises(WireError) as info:
        CLUSTER_WIRE.decode(msgspec.msgpack.encode((2, "d", "ScheduledDeliver", body)))
    assert info.value.reason == "body" and "fired_us" in str(info.value)
