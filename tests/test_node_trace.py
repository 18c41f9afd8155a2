"""A real three-process TCP cluster recorded with ``--trace``, loaded as one trace, drawn by the simulator's views.

Three ``python -m casty node`` processes on 127.0.0.1 host ``tests.cluster_app`` with
``--trace FILE`` each (short membership timings, as in ``test_cluster_tcp_failover``). The
client increments a key owned by the first node for half a second, the owner is killed
with SIGKILL, a survivor takes the key over, the client increments for another half
second, and the survivors leave with SIGTERM. ``Trace.from_jsonl`` merges the three files; the test checks
who owned the key at which epoch from the merged trace alone, and draws the ownership chart,
the activation timeline and the space-time diagram of the takeover to PNG. Set
``CASTY_FIGURES=DIR`` to keep the PNGs there.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text

from casty.cluster.client import ClusterClient
from casty.cluster.node import FACTS
from sim.messages import frame_arrows
from sim.trace import Trace
from sim.viz.data.ownership import epoch_spans
from sim.viz.ownership import ownership_chart
from sim.viz.spacetime import spacetime_diagram
from sim.viz.timeline import activation_timeline
from tests.nodes import Node, free_ports, reap, run, until
from tests.nodes import spawn as spawn_node
from tests.test_trace_export import problems

TYPE = "tests.cluster_app:tally"
RECORDED = ",".join(sorted(FACTS | {"write.confirmed", "handoff.started", "handoff.ended", "net.sent", "net.delivered"}))
NODE_ARGS = ["--heartbeat", "0.2", "--suspect-after", "1", "--dead-after", "1", "--ask-timeout", "2", "--write-timeout", "2",
             "--module", "tests.cluster_app", "--facts", RECORDED]
GUARD = 30.0


def save(fig: Figure, name: str, tmp_path: Path) -> Path:
    keep = os.environ.get("CASTY_FIGURES")
    folder = Path(keep) if keep else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    fig.savefig(path, dpi=110)
    return path


async def increments(client: ClusterClient, key: str, seconds: float) -> list[int]:
    """``Inc`` asks one after the other for ``seconds`` (at least three): the counts they returned."""
    loop = asyncio.get_running_loop()
    stop = loop.time() + seconds
    counts: list[int] = []
    while len(counts) < 3 or loop.time() < stop:
        counts.append(await client.ask(TYPE, key, "Inc", timeout=3.0))
    return counts


def test_a_killed_owner_and_its_successor_read_from_three_nodes_trace_files(tmp_path: Path) -> None:
    """kill -9 of a key's owner, recorded by --trace on three real nodes: the merged trace names both owners, their epochs and the crash."""
    files = [tmp_path / f"node{i}.jsonl" for i in range(3)]

    async def body() -> tuple[str, str, list[str]]:
        ports = free_ports(3)
        nodes: list[Node] = []
        for port, path in zip(ports, files):
            nodes.append(await spawn_node(port, [ports[0]] if nodes else [], *NODE_ARGS, "--trace", str(path)))
        ids = [n.name for n in nodes]
        try:
            await until(lambda: all(n.status(i) == "alive" for n in nodes for i in ids), "all see three alive", nodes, 10.0)
            await asyncio.sleep(0.7)  # the listen window (three heartbeats) before anyone counts a quorum
            owner = nodes[0]
            async with ClusterClient([n.name for n in nodes[1:]], timeout=3.0) as client:
                owned = [k for k in (f"k{i}" for i in range(50)) if (await client.placement(TYPE, k))["owner"] == owner.name]
                assert owned, "no key of 50 is owned by the first node"
                key = owned[0]
                counts = await increments(client, key, 0.5)  # half a second of writes, so the figures show the owner's span
                owner.proc.send_signal(signal.SIGKILL)  # between two asks: none is in flight
                assert await owner.proc.wait() == -signal.SIGKILL
                await until(lambda: any(n.of("epoch.acquired", key=key) for n in nodes[1:]), "a survivor took the key", nodes, 8.0)
                counts += await increments(client, key, 0.5)
                assert counts == list(range(1, len(counts) + 1)), counts  # no confirmed increment lost or repeated
            for n in nodes[1:]:
                n.proc.send_signal(signal.SIGTERM)
            for n in nodes[1:]:
                assert await asyncio.wait_for(n.proc.wait(), 5.0) == 0, n.describe()
            return key, owner.name, ids
        finally:
            await reap(nodes)

    key, owner, ids = run(body, GUARD)
    trace = Trace.from_jsonl(*files)
    assert trace.torn == [] and trace.time_axis == "wall-clock time"
    assert sorted(trace.nodes()) == sorted(ids)

    # Who owned the key at which epoch: the first node, then one survivor at a greater round, from what the first wrote.
    acquired = trace.of("epoch.acquired", key=key)
    assert [r.node for r in acquired][0] == owner and len(acquired) == 2, [(r.node, r.fields) for r in acquired]
    first, second = acquired
    successor = second.node
    assert successor in ids[1:] and str(second.get("epoch_node")).split("#")[0] == successor  # node#incarnation
    assert second.get("epoch_round") > first.get("epoch_round")
    writes = [r.get("version") for r in trace.of("write.confirmed", node=owner, key=key)]
    assert writes == sorted(writes) and len(writes) >= 3  # one per increment before the kill
    assert second.get("found") == writes[-1]  # the successor read the last version the dead owner confirmed
    assert [r.get("version") for r in trace.of("write.confirmed", node=successor, key=key)][-1] > writes[-1]

    # The kill is read from the files: the owner's life ends in an inferred crash at its last line; the others stopped.
    (crash,) = trace.of("fault.crash")
    assert crash.node == owner and crash.get("inferred") == "the file ends without a stopped fact"
    assert crash.t_ns == max(r.t_ns for r in trace if r.node == owner) and crash.t_ns < second.t_ns
    assert sorted(r.node for r in trace.of("node.stopped")) == sorted(ids[1:])
    dead = [r for r in trace.of("member.changed", status="dead") if r.get("node") == owner and r.node == successor]
    assert dead and crash.t_ns < dead[0].t_ns <= second.t_ns

    # The ownership chart's spans: the owner's epoch ends at its crash, the successor's runs until it stops.
    spans = epoch_spans(trace, TYPE, key)
    assert [(s.node, s.epoch_round, s.incarnation, s.start_ns) for s in spans] == [
        (owner, first.get("epoch_round"), 1, first.t_ns), (successor, second.get("epoch_round"), 1, second.t_ns)]
    assert spans[0].end_ns == crash.t_ns

    # Frames pair by CRC: every recorded delivery has its sender's row, and the successor's Prepares went out after the crash.
    arrows = frame_arrows(trace)
    assert sum(1 for a in arrows if a.arrived_ns is not None) == len(trace.of("net.delivered"))
    assert any(a.tag == "Prepare" and a.src == successor and crash.t_ns < a.sent_ns <= second.t_ns for a in arrows)
    assert any(a.tag == "Heartbeat" for a in arrows)

    # The same run in Perfetto: a valid file, an activation span per run of the key, an arrow per received frame.
    trace.to_perfetto(tmp_path / "real.json")
    document = json.loads((tmp_path / "real.json").read_text())
    assert problems(document) == []
    runs = [(ev["ts"], ev["args"]["ended"]) for ev in document["traceEvents"] if ev["ph"] == "X" and ev.get("cat") == "activation"]
    started = trace.of("activation.started", key=key)
    (ended,) = trace.of("activation.ended", key=key)  # the successor's run, at its leave; the owner's ended in the kill
    assert [r.node for r in started] == [owner, successor] and ended.node == successor
    assert runs == [(started[0].t_ns / 1000, "crash"), (started[1].t_ns / 1000, ended.get("reason"))]
    assert sum(1 for ev in document["traceEvents"] if ev.get("flow_in")) == len(trace.of("net.delivered"))

    figure = ownership_chart(trace, TYPE, key)
    assert figure.axes[0].get_xlabel() == "wall-clock time since start (s)"
    renderer = FigureCanvasAgg(figure).get_renderer()  # type: ignore[no-untyped-call]
    figure.draw(renderer)
    ax = figure.axes[0]
    (title,) = [t for t in ax.get_children() if isinstance(t, Text) and t.get_text() == ax.get_title(loc="left")]
    assert title.get_window_extent(renderer).x1 <= figure.bbox.x1, "the title (long HOST:PORT node ids) runs off the figure"
    chart = save(figure, "real_ownership", tmp_path)
    timeline = save(activation_timeline(trace), "real_timeline", tmp_path)
    prepare = min(a.sent_ns for a in arrows if a.tag == "Prepare" and a.src == successor and a.sent_ns > crash.t_ns)
    window = save(spacetime_diagram(trace, (prepare - 2_000_000) / 1e9, (second.t_ns - prepare) / 1e9 + 0.02), "real_spacetime", tmp_path)
    assert all(p.stat().st_size > 10_000 for p in (chart, timeline, window))
