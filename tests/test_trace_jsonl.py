"""Trace files: a simulated run's JSON lines round trip, real nodes' files merge into one trace, bad lines are named.

The real-node files here are written by hand in the shape ``python -m casty node --trace``
writes (``casty._core.factlog``); ``tests/test_node_trace.py`` runs real processes.
"""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from casty.clock import ManualClock
from casty._core.factlog import FactLog
from sim import scenarios
from sim.trace import Trace
from sim.tracefile import TraceFileError

T0 = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z in µs


def line(by: str, wall_us: int, kind: str, /, **fields: Any) -> str:
    """One line as a node writes it: ``by`` recorded it; ``fields`` may have a ``node`` of their own."""
    return json.dumps({"node": by, "wall_us": wall_us, "kind": kind, "fields": fields}) + "\n"


def write(path: Path, *lines: str) -> Path:
    path.write_text("".join(lines), encoding="utf-8")
    return path


def two_nodes(tmp_path: Path) -> tuple[Path, Path]:
    """n1 founds, takes k at epoch (1, n1), is killed; n2 sees it dead, takes k at (2, n2) with what n1 wrote, leaves."""
    a = write(
        tmp_path / "a.jsonl",
        line("n1", T0, "ready", node="n1", incarnation=7, actors=["app:tally"]),
        line("n1", T0 + 1_000, "member.changed", node="n1", status="alive", incarnation=7),
        line("n1", T0 + 500_000, "epoch.acquired", actor="app:tally", key="k", epoch_round=1, epoch_node="n1", version=1, found=0),
        line("n1", T0 + 500_100, "activation.started", actor="app:tally", key="k", lease=1, behavior="tally", recovered=False, restart=0),
        line("n1", T0 + 600_000, "write.confirmed", actor="app:tally", key="k", lease=1, version=2, pages=["state"]),
    )
    b = write(
        tmp_path / "b.jsonl",
        line("n2", T0 + 200_000, "ready", node="n2", incarnation=9, actors=["app:tally"]),
        line("n2", T0 + 250_000, "member.changed", node="n1", status="alive", incarnation=7),
        line("n2", T0 + 1_700_000, "member.changed", node="n1", status="dead", incarnation=7),
        line("n2", T0 + 1_800_000, "epoch.acquired", actor="app:tally", key="k", epoch_round=2, epoch_node="n2", version=3, found=2),
        line("n2", T0 + 2_000_000, "stopped", node="n2", orderly=True),
    )
    return a, b


def test_real_nodes_files_merge_by_wall_time_keeping_node_ids(tmp_path: Path) -> None:
    """Two nodes' files become one trace in time order: t_ns from the earliest wall time, the recording node kept, seq renumbered."""
    a, b = two_nodes(tmp_path)
    trace = Trace.from_jsonl(b, a)
    assert [(r.seq, r.t_ns, r.node, r.kind) for r in trace] == [
        (0, 0, "n1", "node.started"),
        (1, 1_000_000, "n1", "member.changed"),
        (2, 200_000_000, "n2", "node.started"),
        (3, 250_000_000, "n2", "member.changed"),
        (4, 500_000_000, "n1", "epoch.acquired"),
        (5, 500_100_000, "n1", "activation.started"),
        (6, 600_000_000, "n1", "write.confirmed"),
        (7, 600_000_000, "n1", "fault.crash"),
        (8, 1_700_000_000, "n2", "member.changed"),
        (9, 1_800_000_000, "n2", "epoch.acquired"),
        (10, 2_000_000_000, "n2", "node.stopped"),
    ]
    assert trace[1].get("node") == "n1" and trace[8].get("node") == "n1" and trace[8].node == "n2"  # the member, apart from who saw it
    assert trace[7].fields == {"incarnation": 1, "inferred": "the file ends without a stopped fact"}
    assert dict(trace[0].fields) == {"node": "n1", "incarnation": 1, "member_incarnation": 7, "actors": ["app:tally"]}
    assert trace[9].wall_us == T0 + 1_800_000
    assert [(r.node, r.get("epoch_round"), r.get("found")) for r in trace.of("epoch.acquired", key="k")] == [("n1", 1, 0), ("n2", 2, 2)]


def test_a_loaded_trace_counts_its_rows_by_kind(tmp_path: Path) -> None:
    """Trace.counts of a trace loaded from files counts every loaded row by kind (it read {} before)."""
    trace = Trace.from_jsonl(*two_nodes(tmp_path))
    assert trace.counts == {"node.started": 2, "member.changed": 3, "epoch.acquired": 2, "activation.started": 1,
                            "write.confirmed": 1, "fault.crash": 1, "node.stopped": 1}


def test_a_merged_real_trace_draws_the_ownership_spans(tmp_path: Path) -> None:
    """The ownership chart's spans of a real trace: n1's epoch ends at its inferred crash, n2's runs to the end."""
    from sim.viz.data.ownership import epoch_spans

    trace = Trace.from_jsonl(*two_nodes(tmp_path))
    assert [(s.node, s.epoch_round, s.incarnation, s.start_ns, s.end_ns, s.found) for s in epoch_spans(trace, "app:tally", "k")] == [
        ("n1", 1, 1, 500_000_000, 600_000_000, 0),
        ("n2", 2, 1, 1_800_000_000, 2_000_000_000, 2),
    ]


def test_a_restart_in_the_same_file_is_a_crash_then_a_restart(tmp_path: Path) -> None:
    """A second life in one file after no stopped: a crash at the first life's last line, a restart where the next life begins."""
    path = write(
        tmp_path / "n1.jsonl",
        line("n1", T0, "ready", node="n1", incarnation=1),
        line("n1", T0 + 10, "activation.started", actor="a:b", key="k", lease=1, behavior="b", recovered=False, restart=0),
        line("n1", T0 + 89, "member.changed", node="n1", status="alive", incarnation=2),  # a starting node sees itself first
        line("n1", T0 + 90, "ready", node="n1", incarnation=2),
        line("n1", T0 + 95, "stopped", node="n1", orderly=False),
        line("n1", T0 + 99, "ready", node="n1", incarnation=3),
        line("n1", T0 + 100, "stopped", node="n1", orderly=True),
    )
    trace = Trace.from_jsonl(path)
    assert [(r.t_ns, r.kind, r.get("incarnation")) for r in trace] == [
        (0, "node.started", 1), (10_000, "activation.started", None), (10_000, "fault.crash", 1), (89_000, "fault.restart", 2),
        (89_000, "member.changed", 2), (90_000, "node.started", 2), (95_000, "fault.crash", 2), (99_000, "fault.restart", 3), (99_000, "node.started", 3),
        (100_000, "node.stopped", 3),
    ]


def test_a_torn_last_line_is_left_out_and_listed(tmp_path: Path) -> None:
    """A last line without its newline that is not JSON (a kill mid-write) is skipped and named in trace.torn."""
    path = tmp_path / "n1.jsonl"
    path.write_text(line("n1", T0, "ready", node="n1", incarnation=1) + '{"node": "n1", "wall_us": 17672', encoding="utf-8")
    trace = Trace.from_jsonl(path)
    assert [r.kind for r in trace] == ["node.started", "fault.crash"]
    assert trace.torn == [(str(path), 2)]


@pytest.mark.parametrize(
    ("text", "where", "problem"),
    [
        ('{"node": "n1", "wall_us": 1, "kind": "x", "fields": {}}\nnot json\n{}\n', 2, "not JSON (Expecting value: line 1 column 1 (char 0))"),
        ('{"node": "n1", "wall_us": 1, "fields": {}}\n', 1, "missing 'kind' (a row has node, wall_us, kind, fields)"),
        ('{"node": "n1"}\n', 1, "missing 'wall_us', 'kind', 'fields' (a row has node, wall_us, kind, fields)"),
        ('[1, 2]\n', 1, "not a JSON object: [1, 2]"),
        ('{"node": "", "wall_us": 1, "kind": "x", "fields": {}}\n', 1, "'node' must be a non-empty string, got \"\""),
        ('{"node": "n1", "wall_us": "soon", "kind": "x", "fields": {}}\n', 1,
         "'wall_us' must be an integer (µs since the epoch) or null, got \"soon\""),
        ('{"node": "n1", "wall_us": 1.5, "kind": "x", "fields": {}}\n', 1, "'wall_us' must be an integer (µs since the epoch) or null, got 1.5"),
        ('{"node": "n1", "wall_us": 1, "kind": "x", "fields": []}\n', 1, "'fields' must be a JSON object, got []"),
        ('{"node": "n1", "wall_us": null, "kind": "x", "fields": {}}\n', 1, "a row without 't_ns' (a real node's) needs its 'wall_us'"),
        ('{"node": "n1", "wall_us": 1, "kind": "x", "fields": {}, "t_ns": -1}\n', 1, "'t_ns' must be a non-negative integer, got -1"),
        ('{"node": "n1", "wall_us": 1, "kind": "x", "fields": {}, "t_ns": 5}\n{"node": "n1", "wall_us": 2, "kind": "y", "fields": {}}\n', 2,
         "no 't_ns', though other rows of this file have one"),
    ],
)
def test_a_bad_line_is_a_typed_error_naming_the_file_and_line(tmp_path: Path, text: str, where: int, problem: str) -> None:
    """Each bad line raises TraceFileError with the file, the 1-based line and what is wrong."""
    path = tmp_path / "bad.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TraceFileError) as caught:
        Trace.from_jsonl(path)
    assert (caught.value.path, caught.value.line, caught.value.problem) == (str(path), where, problem)
    assert str(caught.value) == f"{path}:{where}: {problem}"


def test_a_missing_file_and_bytes_that_are_not_utf8_are_typed_errors(tmp_path: Path) -> None:
    """A path that cannot be read, or a line that is not UTF-8, is a TraceFileError naming it (ValueError too)."""
    with pytest.raises(TraceFileError, match=r"nope\.jsonl:0: cannot read it: No such file or directory"):
        Trace.from_jsonl(tmp_path / "nope.jsonl")
    raw = tmp_path / "raw.jsonl"
    raw.write_bytes(line("n1", T0, "ready").encode() + b'{"node": "\xff"}\n')
    with pytest.raises(ValueError, match=r"raw\.jsonl:2: not UTF-8 \(invalid start byte\)"):
        Trace.from_jsonl(raw)


def test_a_simulated_file_and_a_real_one_do_not_merge(tmp_path: Path) -> None:
    """True time and wall time cannot share an axis: merging a to_jsonl file with a node's file names the node's file."""
    sim_file = tmp_path / "sim.jsonl"
    trace = Trace()
    trace.add(5, "n1", 100, "node.started", {"incarnation": 1})
    trace.to_jsonl(sim_file)
    real = write(tmp_path / "real.jsonl", line("n9", T0, "ready", incarnation=1))
    with pytest.raises(TraceFileError, match=r"real\.jsonl:1: a real node's file \(no 't_ns'\) cannot be merged with a simulated run's"):
        Trace.from_jsonl(sim_file, real)


def test_a_simulated_run_round_trips_with_member_fields_kept(tmp_path: Path) -> None:
    """A cluster scenario written and read back has the same rows (member.changed keeps its recording node and its member)."""
    trace = scenarios.run("cluster-random", seed=0, until=timedelta(seconds=5)).trace
    trace.to_jsonl(tmp_path / "t.jsonl")
    back = Trace.from_jsonl(tmp_path / "t.jsonl")
    assert [(r.seq, r.t_ns, r.node, r.wall_us, r.kind, dict(r.fields)) for r in back] == [
        (r.seq, r.t_ns, r.node, r.wall_us, r.kind, json.loads(json.dumps(dict(r.fields)))) for r in trace
    ]
    seen = [(r.node, r.get("node")) for r in back.of("member.changed")]
    assert any(a != b for a, b in seen) and seen == [(r.node, r.get("node")) for r in trace.of("member.changed")]


def test_factlog_writes_one_stamped_line_per_fact_that_the_loader_reads(tmp_path: Path) -> None:
    """FactLog appends each fact as one line in the loader's shape (node, the clock's wall_us, kind, fields without event/by)."""
    clock = ManualClock(T0)
    path = tmp_path / "n1.jsonl"
    log = FactLog(str(path), "127.0.0.1:7001", clock)
    log.record({"event": "ready", "node": "127.0.0.1:7001", "incarnation": 5})
    clock.advance(0.25)
    log.record({"event": "member.changed", "node": "127.0.0.1:7002", "status": "alive", "incarnation": 3, "by": "127.0.0.1:7001"})
    log.close()
    assert path.read_text().splitlines() == [
        '{"node":"127.0.0.1:7001","wall_us":1767225600000000,"kind":"ready","fields":{"node":"127.0.0.1:7001","incarnation":5}}',
        '{"node":"127.0.0.1:7001","wall_us":1767225600250000,"kind":"member.changed",'
        '"fields":{"node":"127.0.0.1:7002","status":"alive","incarnation":3}}',
    ]
    again = FactLog(str(path), "127.0.0.1:7001", clock)  # a restarted node appends
    again.record({"event": "stopped", "node": "127.0.0.1:7001", "orderly": True})
    again.close()
    trace = Trace.from_jsonl(path)
    assert [(r.t_ns, r.node, r.kind, r.get("node")) for r in trace] == [
        (0, "127.0.0.1:7001", "node.started", "127.0.0.1:7001"),
        (250_000_000, "127.0.0.1:7001", "member.changed", "127.0.0.1:7002"),
        (250_000_000, "127.0.0.1:7001", "node.stopped", "127.0.0.1:7001"),
    ]
    assert (log.written, again.written, log.lost) == (2, 1, 0)


def test_factlog_counts_a_write_that_fails_and_never_raises(tmp_path: Path) -> None:
    """A write the file refuses (here /dev/full: no space) is counted in lost; record() does not raise."""
    if not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full")
    log = FactLog("/dev/full", "n1", ManualClock(T0))
    log.record({"event": "ready", "node": "n1"})
    log.record({"event": "stopped", "node": "n1"})
    log.close()
    log.record({"event": "late", "node": "n1"})
    assert (log.written, log.lost) == (0, 3)


def test_node_trace_flag_with_a_path_that_cannot_be_opened_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m casty node --trace`` naming a file in a missing directory exits 2 before listening, naming the path."""
    from casty.__main__ import main
    from tests.nodes import free_ports

    (port,) = free_ports(1)
    bad = tmp_path / "no" / "such" / "dir" / "n1.jsonl"
    assert main(["node", "--bind", f"127.0.0.1:{port}", "--trace", str(bad)]) == 2
    captured = capsys.readouterr()
    assert f"--trace: cannot open {str(bad)!r} for appending: No such file or directory" in captured.err
    assert captured.out == ""
