"""The Perfetto/Chrome export: a validator of the Trace Event format, and the export checked with it.

``problems(doc)`` is this file's own validator. It checks what a viewer needs to draw a
file right: the fields each phase requires, timestamps (µs) never going back on a track,
every ``B`` closed by an ``E`` of the same track and name (stricter than the format, which
lets ``E`` omit its name: a nameless ``E`` closing another key's ``B`` is how spans went
wrong), spans on one track nested (a child ends before its parent), ``X`` durations >= 0,
and flows whose ids pair one start with one end, not ending before they start.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from sim import scenarios
from sim.perfetto import perfetto_events
from sim.trace import Row, Trace

EPS = 1e-3  # µs: one nanosecond of slack for float timestamps
PHASES = set("BEXiIMstfCbenR")


def problems(doc: Any) -> list[str]:
    """Everything wrong with a Trace Event document (JSON object form), one line each; [] when it is valid."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("traceEvents"), list):
        return ["the document is not an object with a traceEvents list"]
    out: list[str] = []
    processes: set[Any] = set()
    threads: set[tuple[Any, Any]] = set()
    used: set[tuple[Any, Any]] = set()
    last_ts: dict[tuple[Any, Any], float] = {}
    stacks: dict[tuple[Any, Any], list[tuple[str, str, float | None]]] = {}  # (phase, name, end or None for B)
    flows: dict[tuple[str, Any], dict[str, list[float]]] = {}
    for i, e in enumerate(doc["traceEvents"]):
        where = f"event {i}"
        if not isinstance(e, Mapping):
            out.append(f"{where}: not an object")
            continue
        ph = e.get("ph")
        if ph not in PHASES:
            out.append(f"{where}: unknown phase {ph!r}")
            continue
        where = f"event {i} ({ph} {e.get('name', '')!s})"
        if type(e.get("pid")) is not int:
            out.append(f"{where}: pid must be an integer, got {e.get('pid')!r}")
            continue
        if ph == "M":
            name, args = e.get("name"), e.get("args")
            if not isinstance(args, Mapping):
                out.append(f"{where}: metadata without args")
            elif name == "process_name" and isinstance(args.get("name"), str):
                processes.add(e["pid"])
            elif name == "thread_name" and isinstance(args.get("name"), str) and type(e.get("tid")) is int:
                threads.add((e["pid"], e["tid"]))
            continue
        ts = e.get("ts")
        if isinstance(ts, bool) or not isinstance(ts, (int, float)) or ts < 0:
            out.append(f"{where}: ts must be a number of µs >= 0, got {ts!r}")
            continue
        scoped = e.get("s", "t") if ph in "iI" else "t"
        if scoped not in ("t", "p", "g"):
            out.append(f"{where}: instant scope must be t, p or g, got {scoped!r}")
            continue
        if scoped != "t":
            continue
        if type(e.get("tid")) is not int:
            out.append(f"{where}: tid must be an integer, got {e.get('tid')!r}")
            continue
        track = (e["pid"], e["tid"])
        used.add(track)
        if ts < last_ts.get(track, 0.0) - EPS:
            out.append(f"{where}: ts {ts} goes back on track {track} (last {last_ts[track]})")
        last_ts[track] = max(ts, last_ts.get(track, 0.0))
        if ph in "BXisf" and not isinstance(e.get("name"), str):
            out.append(f"{where}: {ph} needs a name")
        stack = stacks.setdefault(track, [])
        while stack and stack[-1][2] is not None and stack[-1][2] <= ts + EPS:  # spans of X that are over by now
            stack.pop()
        if ph == "X":
            dur = e.get("dur")
            if isinstance(dur, bool) or not isinstance(dur, (int, float)) or dur < 0:
                out.append(f"{where}: X needs dur >= 0, got {dur!r}")
                continue
            end = ts + dur
            if stack and stack[-1][2] is not None and end > stack[-1][2] + EPS:
                out.append(f"{where}: [{ts}, {end}] overlaps {stack[-1][1]!r}, which ends at {stack[-1][2]}: not nested on {track}")
            stack.append(("X", str(e.get("name")), end))
        elif ph == "B":
            stack.append(("B", str(e.get("name")), None))
        elif ph == "E":
            if not stack:
                out.append(f"{where}: E at {ts} closes nothing on {track}")
            elif stack[-1][0] != "B":
                out.append(f"{where}: E at {ts} inside {stack[-1][1]!r} (an X still running) on {track}")
            elif e.get("name") != stack[-1][1]:
                out.append(f"{where}: E named {e.get('name')!r} closes B {stack[-1][1]!r} on {track}")
                stack.pop()
            else:
                stack.pop()
        if "bind_id" in e:
            if ph not in "XBbn":
                out.append(f"{where}: bind_id on a {ph} event binds no slice")
            ends = [d for d in ("flow_out", "flow_in") if e.get(d) is True]
            if not ends:
                out.append(f"{where}: bind_id without flow_out or flow_in")
            for direction in ends:
                flows.setdefault(("v2", e["bind_id"]), {}).setdefault(direction, []).append(ts)
        if ph in "sf":
            if "id" not in e:
                out.append(f"{where}: flow {ph} without id")
            else:
                flows.setdefault(("v1", (e["id"], e.get("cat"), e.get("name"))), {}).setdefault(ph, []).append(ts)
    for track, stack in stacks.items():
        for phase, name, _ in stack:
            if phase == "B":
                out.append(f"B {name!r} on {track} is never closed")
    for (form, ident), found in sorted(flows.items(), key=repr):
        start, finish = ("flow_out", "flow_in") if form == "v2" else ("s", "f")
        a, b = found.get(start, []), found.get(finish, [])
        if len(a) != 1 or len(b) != 1:
            out.append(f"flow {ident!r}: {len(a)} start(s) and {len(b)} end(s), want one of each")
        elif b[0] < a[0] - EPS:
            out.append(f"flow {ident!r} ends at {b[0]} before it starts at {a[0]}")
    for pid in sorted({pid for pid, _ in used} - processes):
        out.append(f"process {pid} has no process_name")
    for track in sorted(used - threads):
        out.append(f"track {track} has no thread_name")
    return out


def doc(*events: dict[str, Any]) -> dict[str, Any]:
    """A document with one named process and tracks 1 and 2 named, then ``events``."""
    meta = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "n1"}}] + [
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": t, "args": {"name": f"t{t}"}} for t in (1, 2)
    ]
    return {"traceEvents": meta + list(events)}


def x(name: str, ts: float, dur: float, tid: int = 1, **more: Any) -> dict[str, Any]:
    return {"ph": "X", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, **more}


def b(name: str, ts: float, tid: int = 1) -> dict[str, Any]:
    return {"ph": "B", "name": name, "pid": 1, "tid": tid, "ts": ts}


def e(name: str | None, ts: float, tid: int = 1) -> dict[str, Any]:
    return {"ph": "E", "pid": 1, "tid": tid, "ts": ts} | ({"name": name} if name is not None else {})


# --- the validator -------------------------------------------------------------------------


def test_validator_accepts_nested_spans_matched_pairs_and_paired_flows() -> None:
    """Nested X spans, a B/E pair of one name, an instant and a v2 flow between two tracks: no problem."""
    ok = doc(x("run", 0, 10), x("inner", 2, 3), b("held", 20), e("held", 25),
             {"ph": "i", "s": "t", "name": "mark", "pid": 1, "tid": 1, "ts": 30},
             x("send", 31, 0, bind_id=7, flow_out=True), x("recv", 32, 0, tid=2, bind_id=7, flow_in=True))
    assert problems(ok) == []


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        # the old export: two keys on one track, each E closing the innermost B, whichever key it was
        ([b("a[k1]", 1), b("b[k2]", 2), e("a[k1]", 3), e("b[k2]", 4)],
         ["event 5 (E a[k1]): E named 'a[k1]' closes B 'b[k2]' on (1, 1)",
          "event 6 (E b[k2]): E named 'b[k2]' closes B 'a[k1]' on (1, 1)"]),
        # and a crash, which ended the run without an activation.ended: the B stays open
        ([b("a[k1]", 1)], ["B 'a[k1]' on (1, 1) is never closed"]),
        ([e("a[k1]", 1)], ["event 3 (E a[k1]): E at 1 closes nothing on (1, 1)"]),
        ([x("a", 0, 10), x("b", 5, 10)], ["event 4 (X b): [5, 15] overlaps 'a', which ends at 10: not nested on (1, 1)"]),
        ([x("a", 0, -1)], ["event 3 (X a): X needs dur >= 0, got -1"]),
        ([x("a", 5, 1), x("b", 4, 1)], ["event 4 (X b): ts 4 goes back on track (1, 1) (last 5)"]),
        ([{"ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": 1}], ["event 3 (X ): X needs a name"]),
        ([{"ph": "X", "name": "a", "tid": 1, "ts": 0, "dur": 1}], ["event 3 (X a): pid must be an integer, got None"]),
        ([{"ph": "X", "name": "a", "pid": 1, "tid": 1, "dur": 1}], ["event 3 (X a): ts must be a number of µs >= 0, got None"]),
        ([x("a", 0, 1, tid=9)], ["track (1, 9) has no thread_name"]),
        ([x("send", 0, 0, bind_id=3, flow_out=True)], ["flow 3: 1 start(s) and 0 end(s), want one of each"]),
        ([x("recv", 0, 0, bind_id=3, flow_in=True), x("send", 5, 0, tid=2, bind_id=3, flow_out=True)],
         ["flow 3 ends at 0 before it starts at 5"]),
        ([{"ph": "i", "name": "a", "pid": 1, "tid": 1, "ts": 0, "bind_id": 1, "flow_out": True}, x("r", 1, 0, bind_id=1, flow_in=True)],
         ["event 3 (i a): bind_id on a i event binds no slice"]),
        ([{"ph": "s", "name": "m", "cat": "net", "pid": 1, "tid": 1, "ts": 0, "id": 4}], ["flow (4, 'net', 'm'): 1 start(s) and 0 end(s), want one of each"]),
    ],
)
def test_validator_names_each_broken_rule(events: list[dict[str, Any]], expected: list[str]) -> None:
    """Each rule broken on purpose gives exactly its problem line (crossed B/E, open B, overlap, negative dur, ...)."""
    assert problems(doc(*events)) == expected


# --- the export ----------------------------------------------------------------------------


def export(trace: Trace) -> dict[str, Any]:
    return {"traceEvents": perfetto_events(trace)}


def names(document: dict[str, Any]) -> tuple[dict[int, str], dict[tuple[int, int], str]]:
    """(pid -> process name, (pid, tid) -> track name) from the metadata."""
    events = document["traceEvents"]
    procs = {ev["pid"]: ev["args"]["name"] for ev in events if ev.get("name") == "process_name"}
    tracks = {(ev["pid"], ev["tid"]): ev["args"]["name"] for ev in events if ev.get("name") == "thread_name"}
    return procs, tracks


def spans(document: dict[str, Any], cat: str = "activation") -> list[tuple[str, str, float, float, str]]:
    """The X spans of ``cat`` as (node, track, ts, dur, why it ended), in file order."""
    procs, tracks = names(document)
    return [(procs[ev["pid"]], tracks[(ev["pid"], ev["tid"])], ev["ts"], ev["dur"], ev["args"]["ended"])
            for ev in document["traceEvents"] if ev["ph"] == "X" and ev.get("cat") == cat]


def test_overlapping_keys_get_their_own_tracks_and_a_crash_closes_both() -> None:
    """Two keys active at once on n1 are two tracks; the crash closes both spans at its time, and n1 is down until its restart."""
    trace = Trace()
    trace.add(1_000_000, "n1", 11, "activation.started", {"actor": "m:a", "key": "k1", "lease": 1})
    trace.add(2_000_000, "n1", 12, "activation.started", {"actor": "m:b", "key": "k2", "lease": 2})
    trace.add(3_000_000, "n1", 13, "write.confirmed", {"actor": "m:a", "key": "k1", "lease": 1, "version": 1, "pages": ["s"]})
    trace.add(5_000_000, "n1", 15, "fault.crash", {"incarnation": 1})
    trace.add(8_000_000, "n1", 18, "fault.restart", {"incarnation": 2})
    trace.add(9_000_000, "n1", 19, "activation.started", {"actor": "m:a", "key": "k1", "lease": 3})
    trace.add(9_500_000, "n1", 19, "activation.ended", {"actor": "m:a", "key": "k1", "lease": 3, "reason": "idle"})
    document = export(trace)
    assert problems(document) == []
    assert spans(document) == [("n1", "a[k1]", 1000.0, 4000.0, "crash"), ("n1", "b[k2]", 2000.0, 3000.0, "crash"),
                               ("n1", "a[k1]", 9000.0, 500.0, "idle")]
    assert spans(document, "fault") == [("n1", "node", 5000.0, 3000.0, "restart")]
    (write,) = [ev for ev in document["traceEvents"] if ev.get("name") == "write.confirmed"]
    assert (names(document)[1][(write["pid"], write["tid"])], write["ts"], write["args"]["version"]) == ("a[k1]", 3000.0, 1)


def test_failure_stop_and_end_of_trace_close_spans() -> None:
    """activation.failed ends a run (its restart is a new span), node.stopped closes what runs, the end of the trace the rest."""
    trace = Trace()
    trace.add(0, "n1", 0, "activation.started", {"actor": "m:a", "key": "k", "lease": 1})
    trace.add(1_000, "n1", 1, "activation.failed", {"actor": "m:a", "key": "k", "lease": 1, "error": "KeyError", "message": None, "retry_in": 0.1})
    trace.add(2_000, "n1", 2, "activation.started", {"actor": "m:a", "key": "k", "lease": 1})
    trace.add(4_000, "n1", 4, "node.stopped", {"incarnation": 1})
    trace.add(5_000, "n2", 5, "activation.started", {"actor": "m:a", "key": "j", "lease": 1})
    trace.add(7_000, "n2", 7, "fault.pause", {})
    trace.add(9_000, "n2", 9, "note", {"text": "the end"})
    document = export(trace)
    assert problems(document) == []
    assert spans(document) == [("n1", "a[k]", 0.0, 1.0, "failed: KeyError"), ("n1", "a[k]", 2.0, 2.0, "stopped"),
                               ("n2", "a[j]", 5.0, 4.0, "end of trace")]
    assert spans(document, "fault") == [("n2", "node", 7.0, 2.0, "end of trace")]


def test_frames_are_flows_from_sender_to_receiver() -> None:
    """A delivered frame is a slice on each node's net track joined by one bind_id; a dropped one has no flow."""
    trace = Trace()
    trace.add(1_000_000, "n1", 1, "net.sent", {"dst": "n2", "size": 10, "delay_ns": 2_000_000, "frame": "Prepare"})
    trace.add(1_500_000, "n1", 1, "net.dropped", {"dst": "n3", "size": 10, "reason": "partition", "frame": "Prepare"})
    trace.add(3_000_000, "n2", 3, "net.delivered", {"src": "n1", "size": 10, "frame": "Prepare"})
    document = export(trace)
    assert problems(document) == []
    procs, tracks = names(document)
    net = [(procs[ev["pid"]], tracks[(ev["pid"], ev["tid"])], ev["name"], ev["ts"], ev.get("bind_id"), ev.get("flow_out"), ev.get("flow_in"))
           for ev in document["traceEvents"] if ev.get("cat") == "net"]
    assert not [ev for ev in document["traceEvents"] if ev.get("name", "").startswith("net.")]  # frames, not instants
    assert net == [("n1", "net", "Prepare to n2", 1000.0, 1, True, None), ("n1", "net", "Prepare to n3", 1500.0, None, None, None),
                   ("n2", "net", "Prepare from n1", 3000.0, 1, None, True)]


def expected_spans(trace: Trace) -> list[tuple[str, str, float, float, str]]:
    """Each activation.started row's span, found by scanning forward for what ends it (an oracle apart from the export)."""
    out = []
    end = trace.end_ns
    for i, start in enumerate(trace.rows):
        if start.kind != "activation.started":
            continue
        why, stop = "end of trace", end
        for row in trace.rows[i + 1:]:
            if row.node != start.node:
                continue
            same = row.get("actor") == start.get("actor") and row.get("key") == start.get("key")
            if same and row.kind == "activation.ended":
                why, stop = str(row.get("reason")), row.t_ns
                break
            if same and row.kind == "activation.failed":
                why, stop = f"failed: {row.get('error')}", row.t_ns
                break
            if row.kind in ("fault.crash", "node.stopped"):
                why, stop = ("crash" if row.kind == "fault.crash" else "stopped"), row.t_ns
                break
        label = f"{str(start.get('actor')).split(':')[-1]}[{start.get('key')}]"
        out.append((start.node, label, start.t_ns / 1000, (stop - start.t_ns) / 1000, why))
    return sorted(out)


@pytest.mark.parametrize("name", ["cluster-random", "swarm"])
def test_a_scenario_export_is_valid_and_every_activation_is_one_closed_span(name: str, tmp_path: Path) -> None:
    """A real scenario's file passes the validator; each activation is one X span from its start row to what ended it, in µs."""
    trace = scenarios.run(name, seed=0).trace
    path = tmp_path / "run.json"
    trace.to_perfetto(path)
    document = json.loads(path.read_text())
    assert problems(document) == []
    got = sorted((n, t.split(" #")[0], ts, dur, why) for n, t, ts, dur, why in spans(document))
    assert got == expected_spans(trace)
    assert len(got) == len(trace.of("activation.started"))
    flows_out = sum(1 for ev in document["traceEvents"] if ev.get("flow_out"))
    delivered = len(trace.of("net.delivered"))
    assert flows_out == delivered  # every delivered frame (none kept in swarm) is one arrow
    crashes = trace.of("fault.crash")
    closed_by_crash = [s for s in got if s[4] == "crash"]
    assert all(any(c.node == s[0] and c.t_ns == round((s[2] + s[3]) * 1000) for c in crashes) for s in closed_by_crash)  # µs floats: sum to the ns
    if name == "swarm":
        assert len(crashes) == 5 and closed_by_crash  # seed 0 crashes nodes with keys running
