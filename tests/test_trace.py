"""The trace: selection, JSON lines round trip, the Perfetto export and the digest."""

from __future__ import annotations

import json
from pathlib import Path

from sim import scenarios
from sim.trace import Trace


def small_trace() -> Trace:
    trace = Trace()
    trace.add(0, "n1", 100, "node.started", {"incarnation": 1})
    trace.add(5, "n1", 105, "activation.started", {"actor": "m:a", "key": "k", "lease": 1})
    trace.add(7, "n2", 300, "schedule.fired", {"actor": "m:a", "key": "k", "name": "t", "due_us": 1, "now_us": 2, "next_us": 3})
    trace.add(9, "n1", 109, "activation.ended", {"actor": "m:a", "key": "k", "lease": 1, "reason": "idle", "pages": ("a", "b")})
    return trace


def test_selection_by_kind_prefix_node_and_fields() -> None:
    """of() selects by exact kind, by prefix ('activation.*'), by node and by field values."""
    trace = small_trace()
    assert [r.kind for r in trace.of("activation.*")] == ["activation.started", "activation.ended"]
    assert [r.node for r in trace.of(node="n2")] == ["n2"]
    assert [r.seq for r in trace.of("activation.ended", reason="idle")] == [3]
    assert trace.nodes() == ["n1", "n2"]


def test_jsonl_round_trip_keeps_rows_and_digest(tmp_path: Path) -> None:
    """Writing and reading JSON lines gives back the same rows, hence the same digest."""
    trace = small_trace()
    trace.to_jsonl(tmp_path / "t.jsonl")
    back = Trace.from_jsonl(tmp_path / "t.jsonl")
    assert [r.as_dict() for r in back] == [r.as_dict() for r in trace]
    assert back.digest() == trace.digest()


def test_digest_changes_with_any_field() -> None:
    """The digest covers every field of every row."""
    a, b = small_trace(), small_trace()
    b.add(10, "n1", 110, "note", {"text": "x"})
    assert a.digest() != b.digest()


def test_perfetto_export_has_a_process_per_node_and_closed_spans(tmp_path: Path) -> None:
    """The Chrome trace-event JSON names one process per node, a track per key, and closes the run the crash ended."""
    result = scenarios.run("durable-restart", seed=0)
    path = tmp_path / "run.json"
    result.trace.to_perfetto(path)
    events = json.loads(path.read_text())["traceEvents"]
    assert [e["args"]["name"] for e in events if e.get("name") == "process_name"] == ["n1"]
    assert [e["args"]["name"] for e in events if e.get("name") == "thread_name"] == ["node", "net", "durable_beater[ledger]"]
    spans = [(e["name"], e["ts"], e["dur"], e["args"]["ended"]) for e in events if e["ph"] == "X"]
    assert spans == [("durable_beater[ledger]", 900.0, 124999100.0, "crash"), ("down", 125000000.0, 300000000.0, "restart"),
                     ("durable_beater[ledger]", 425001100.0, 235000800.0, "end of trace")]
    assert not [e for e in events if e["ph"] in "BE"]
    assert all(e["ts"] >= 0 for e in events if "ts" in e)


def test_counts_without_keeping() -> None:
    """A trace with keep= counts every kind but stores only the kept ones."""
    trace = Trace(keep=lambda kind: kind.startswith("fault."))
    trace.add(0, "n1", 0, "schedule.fired", {})
    trace.add(1, "n1", 0, "fault.crash", {})
    assert [r.kind for r in trace] == ["fault.crash"]
    assert trace.counts == {"schedule.fired": 1, "fault.crash": 1}
