"""The cluster views read real scenario traces: what each figure draws is counted against the trace's rows.

Set ``CASTY_VIZ_OUT=/some/dir`` to also keep every figure's PNG there for a look.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

from matplotlib.axes import Axes  # noqa: E402
from matplotlib.collections import LineCollection, PathCollection  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import FancyArrowPatch, Rectangle  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from sim import scenarios  # noqa: E402
from sim.messages import frame_arrows  # noqa: E402
from sim.network import _frame_tag  # noqa: E402
from sim.scenarios import Run  # noqa: E402
from sim.trace import Trace  # noqa: E402
from sim.viz import ownership_chart, spacetime_diagram  # noqa: E402
from sim.viz.data.ownership import epoch_spans  # noqa: E402
from sim.viz.data.spacetime import default_window  # noqa: E402

ACTOR = "sim.scenarios.cluster:cl_ticker"


@pytest.fixture(scope="module")
def repeat() -> Run:
    run = scenarios.run("ownership-repeat", 0)
    assert run.ok, run.failures
    return run


@pytest.fixture(scope="module")
def stale() -> Run:
    run = scenarios.run("stale-owner-fenced", 0)
    assert run.ok, run.failures
    return run


# --- figure inspection ---------------------------------------------------------------------


def only_axes(fig: Figure) -> Axes:
    (ax,) = fig.axes
    return ax


def with_gid(ax: Axes, gid: str) -> list[Any]:
    return [a for a in ax.get_children() if a.get_gid() == gid]


def points(ax: Axes, gid: str) -> list[tuple[float, float]]:
    return [tuple(p) for c in with_gid(ax, gid) if isinstance(c, PathCollection) for p in c.get_offsets()]


def segments(ax: Axes, gid: str) -> int:
    return sum(len(c.get_segments()) for c in with_gid(ax, gid) if isinstance(c, LineCollection))


def rects(ax: Axes, gid: str) -> list[Rectangle]:
    return [a for a in with_gid(ax, gid) if isinstance(a, Rectangle)]


def texts(ax: Axes) -> list[str]:
    return [t.get_text() for t in ax.texts]


def legend(ax: Axes) -> list[str]:
    found = ax.get_legend()
    assert found is not None
    return [t.get_text() for t in found.get_texts()]


def arrows(ax: Axes, tag: str | None = None) -> list[FancyArrowPatch]:
    return [p for p in ax.patches if isinstance(p, FancyArrowPatch) and str(p.get_gid()).startswith("frame:")
            and (tag is None or p.get_gid() == f"frame:{tag}")]


def lane(ax: Axes, node: str) -> int:
    return [t.get_text() for t in ax.get_yticklabels()].index(node)


def save(fig: Figure, name: str, tmp_path: Path) -> None:
    """Render the figure (catches drawing errors); keep it in $CASTY_VIZ_OUT when set."""
    fig.savefig(tmp_path / f"{name}.png", dpi=100)
    out = os.environ.get("CASTY_VIZ_OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        fig.savefig(Path(out) / f"{name}.png", dpi=100)


# --- the network's frame tag ----------------------------------------------------------------


def test_net_rows_name_their_frame(repeat: Run) -> None:
    """Every net.sent/net.delivered row of a cluster run carries its frame's tag; bytes that are not a cluster frame give None."""
    rows = repeat.trace.of("net.sent", "net.delivered")
    assert rows and all(isinstance(r.get("frame"), str) for r in rows)
    assert {"Heartbeat", "Prepare", "Promise", "Write", "Ack", "Deliver", "Reply"} <= {r.get("frame") for r in rows}
    assert _frame_tag(b"\x00not msgpack") is None and _frame_tag(b"") is None


# --- ownership chart ------------------------------------------------------------------------


def test_ownership_repeat(repeat: Run, tmp_path: Path) -> None:
    """ownership-repeat: n3's epoch ends at its crash, n2's runs to the end; one repeat on n2 joined to n3's firing of the same due."""
    trace = repeat.trace
    key = str(repeat.world.results["key"])
    fig = ownership_chart(trace, actor="cl_ticker", key=key)
    save(fig, "ownership_repeat", tmp_path)
    ax = only_axes(fig)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["n1", "n2", "n3"]
    epochs = rects(ax, "epoch")
    assert len(epochs) == 2
    crash_s = trace.of("fault.crash")[0].t
    n3_bar, n2_bar = sorted(epochs, key=lambda r: r.get_x())
    assert n3_bar.get_y() < lane(ax, "n3") < n3_bar.get_y() + n3_bar.get_height()
    assert n2_bar.get_y() < lane(ax, "n2") < n2_bar.get_y() + n2_bar.get_height()
    assert n3_bar.get_x() + n3_bar.get_width() == pytest.approx(crash_s)
    assert n2_bar.get_x() + n2_bar.get_width() == pytest.approx(trace.rows[-1].t)
    assert {"epoch (1, n3#1)\nfound nothing", "epoch (2, n2#1)\nfound v3"} <= set(texts(ax))
    # firings: one dot per first delivery of a due, one diamond for the repeat, on n2's lane after the crash
    fired = trace.of("schedule.fired", key=key)
    repeats = points(ax, "schedule.repeat")
    assert len(points(ax, "schedule.fired")) + len(repeats) == len(fired)
    assert len(repeats) == 1 and repeats[0][0] > crash_s and round(repeats[0][1]) == lane(ax, "n2")
    assert len(with_gid(ax, "repeat.link")) == 1 and "repeat" in texts(ax)
    # every confirmed write is a tick, by page; the crash, the down span and the one-way partition
    confirmed = trace.of("write.confirmed", key=key)
    assert segments(ax, "write.state") + segments(ax, "write.schedules") == len(confirmed)
    assert segments(ax, "write.schedules") == sum(1 for r in confirmed if "state" not in r.get("pages"))
    assert segments(ax, "crash") == 1 and len(rects(ax, "down")) == 1 and "crash" in texts(ax)
    assert any("partition n3 -/-> n1 n2 (never healed)" in t for t in texts(ax))
    title = ax.get_title(loc="left")
    assert title.startswith(f'cl_ticker["{key}"]: n3 took epoch (1, n3#1) at 2.0 s; owner n3 crashed at 12.0 s; n2 took (2, n2#1) at 13.8 s')
    assert "1 firing repeated" in title
    assert {"due fired again (repeat)", "crash", "network partition\n(until healed)"} <= set(legend(ax))


def test_ownership_stale_owner(stale: Run, tmp_path: Path) -> None:
    """stale-owner-fenced: cut off, n3 steps down with its quorum (lost) before n1 takes epoch 2, so nothing is stale
    and no write is fenced; at the heal n1 hands the key back to n3 at once (the majority does not doubt itself)."""
    trace = stale.trace
    key = str(stale.world.results["key"])
    fig = ownership_chart(trace, key=key)  # the actor is found from the key
    save(fig, "ownership_stale", tmp_path)
    ax = only_axes(fig)
    spans = epoch_spans(trace, ACTOR, key)
    assert [(s.node, s.epoch_round, s.ended_by) for s in spans] == [("n3", 1, "lost"), ("n1", 2, "handoff"), ("n3", 2, "end of trace")]
    takeover = trace.of("epoch.acquired", key=key)[1]
    assert spans[0].end_ns < takeover.t_ns and spans[0].superseded_ns is None  # stepped down before the newer epoch
    assert rects(ax, "stale") == [] and "stale: fenced" not in texts(ax)
    assert trace.of("write.failed", key=key, reason="fenced") == [] and points(ax, "write.fenced") == []
    heal = trace.of("fault.heal")[0]
    assert spans[1].end_ns - heal.t_ns < 10_000_000 and spans[2].start_ns - spans[1].end_ns < 10_000_000
    (band,) = with_gid(ax, "partition")  # from the partition to the heal, across every lane
    x0, x1 = band.get_window_extent().transformed(ax.transData.inverted()).intervalx
    assert (x0, x1) == (pytest.approx(trace.of("fault.partition")[0].t), pytest.approx(heal.t))
    assert "partition n3 | n1 n2" in texts(ax)
    title = " ".join(ax.get_title(loc="left").split())  # the story is wrapped: compare it unwrapped
    assert ("owner n3 cut off at 3.0 s; n3's run ended (lost: stepped down) at 3.8 s; n1 took (2, n1#1) at 4.8 s; "
            "n1's run ended (handed off) at 7.2 s; n3 took (2, n3#1) at 7.2 s") in title


def test_ownership_says_why_a_run_ended_and_counts_writes_of_one_instant(stale: Run) -> None:
    """Each run that ended with no other mark says why at its end (n3 lost at 3.8 s, n1 handed off at 7.2 s), and the five
    writes n3 failed at its step-down, one mark, carry their count."""
    trace = stale.trace
    ax = only_axes(ownership_chart(trace, key=str(stale.world.results["key"])))
    ended = sorted((round(float(a.xy[0]), 1), a.get_text()) for a in ax.texts if a.get_text().startswith("run ended"))
    assert ended == [(3.8, "run ended: lost (stepped down)"), (7.2, "run ended: handed off")]
    failed = trace.of("write.failed", key=str(stale.world.results["key"]))
    assert len(failed) == 5 and len({r.t_ns for r in failed}) == 1
    assert len(points(ax, "write.failed")) == 5 and "×5" in texts(ax)


def test_ownership_a_run_ended_by_a_fenced_write_says_fenced() -> None:
    """newer-promise-fences: n3's write is fenced and its run ends lost in the same instant: the chart says fenced, not stepped down."""
    run = scenarios.run("newer-promise-fences", 0)
    ax = only_axes(ownership_chart(run.trace))
    assert [a.get_text() for a in ax.texts if a.get_text().startswith("run ended")] == ["run ended: lost (fenced)"]
    assert "n3's run ended (lost: fenced) at 3.5 s; n3 took (3, n3#1) at 3.5 s" in " ".join(ax.get_title(loc="left").split())


def test_ownership_chooses_a_key_and_names_the_known_ones(repeat: Run) -> None:
    """Without a key the chart picks the key whose owner changed; an unknown key is a ValueError listing the keys that exist."""
    key = str(repeat.world.results["key"])
    assert f'cl_ticker["{key}"]' in only_axes(ownership_chart(repeat.trace)).get_title(loc="left")
    with pytest.raises(ValueError, match=rf"key='nope'.*cl_ticker\[\"{key}\"\]"):
        ownership_chart(repeat.trace, key="nope")
    with pytest.raises(ValueError, match="keys with an owner epoch: none"):
        ownership_chart(Trace())


def test_ownership_into_given_axes(repeat: Run) -> None:
    """Given an Axes, the chart draws into its figure."""
    fig = Figure()
    ax = fig.add_subplot()
    assert ownership_chart(repeat.trace, ax=ax) is fig and len(rects(ax, "epoch")) == 2


# --- space-time diagram ---------------------------------------------------------------------


def test_spacetime_takeover_window(repeat: Run, tmp_path: Path) -> None:
    """The default window is n2's takeover: one arrow per frame sent in it, by tag; frames to the dead n3 end in a red X."""
    trace = repeat.trace
    t0, t1 = default_window(trace)
    takeover = trace.of("epoch.acquired")[1]
    assert t0 < takeover.t_ns < t1 and t1 - t0 < 50_000_000  # tens of ms, not seconds
    fig = spacetime_diagram(trace)
    save(fig, "spacetime_takeover", tmp_path)
    ax = only_axes(fig)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["n1", "n2", "n3"]
    sent = [r for r in trace.of("net.sent") if t0 <= r.t_ns <= t1]
    cut = [r for r in trace.of("net.dropped") if t0 <= r.t_ns <= t1 and r.get("reason") in ("partition", "loss", "unknown node")]
    assert len(arrows(ax)) == len(sent) + len(cut)
    for tag in ("Prepare", "Promise", "Write", "Ack"):
        assert len(arrows(ax, tag)) == sum(1 for r in sent if r.get("frame") == tag), tag
    assert len(arrows(ax, "Prepare")) == 2 and len(arrows(ax, "Promise")) == 1
    arrivals = {(s.node, s.get("dst"), s.t_ns + s.get("delay_ns")) for s in sent}
    no_receiver = [r for r in trace.of("net.dropped") if r.get("reason") == "no receiver" and (r.node, r.get("dst"), r.t_ns) in arrivals]
    assert len(points(ax, "frame.dropped")) == len(no_receiver) > 0
    assert 'epoch (2, n2#1) of cl_ticker["{}"], found v3'.format(repeat.world.results["key"]) in "\n".join(texts(ax))
    assert len(with_gid(ax, "node.down")) == 1  # n3 is down for the whole window
    assert {"epoch: Prepare / Promise", "replication: Write / Ack", "frame dropped", "node down"} <= set(legend(ax))
    quiet = spacetime_diagram(trace, heartbeats=False)
    assert len(arrows(only_axes(quiet))) == len(arrows(ax)) - sum(1 for r in sent if r.get("frame") == "Heartbeat")


def test_spacetime_client_call(repeat: Run, tmp_path: Path) -> None:
    """At 2.0 s the client's Arm crosses as Deliver n1->n3 and its Reply n3->n1, around n3's first epoch (Prepare/Promise/Write/Ack)."""
    fig = spacetime_diagram(repeat.trace, 2.0, 0.012)
    save(fig, "spacetime_client", tmp_path)
    ax = only_axes(fig)
    (deliver,) = arrows(ax, "Deliver")
    (reply,) = arrows(ax, "Reply")
    (x0, _), (x1, _) = deliver._posA_posB  # type: ignore[attr-defined]
    assert (x0, x1) == (0, 2)  # n1 -> n3
    (x0, y0), (x1, y1) = reply._posA_posB  # type: ignore[attr-defined]
    assert (x0, x1) == (2, 0) and y1 > y0  # n3 -> n1, later
    assert len(arrows(ax, "Prepare")) == 2 and len(arrows(ax, "Write")) >= 2
    assert "ms after t = 2.0000 s (true time)" == ax.get_ylabel()


def test_spacetime_pairs_each_frame_with_its_delivery(repeat: Run) -> None:
    """Every paired arrow arrives exactly its sent row's delay later, on the destination the sent row named."""
    trace = repeat.trace
    sent = {(r.node, r.get("dst"), r.t_ns, r.get("delay_ns")) for r in trace.of("net.sent")}
    found = frame_arrows(trace)
    delivered = [a for a in found if a.arrived_ns is not None]
    assert len(delivered) == len(trace.of("net.sent"))
    assert all((a.src, a.dst, a.sent_ns, a.arrived_ns - a.sent_ns) in sent for a in delivered if a.arrived_ns is not None)
    assert len([a for a in found if a.arrived_ns is None]) == sum(1 for r in trace.of("net.dropped") if r.get("reason") == "partition")


def _on_segment(point: tuple[float, float], start: tuple[float, float], end: tuple[float, float]) -> bool:
    """Whether ``point`` (data coordinates) lies on the segment start-end."""
    (px, py), (x0, y0), (x1, y1) = point, start, end
    cross = (x1 - x0) * (py - y0) - (y1 - y0) * (px - x0)
    inside = min(x0, x1) - 1e-9 <= px <= max(x0, x1) + 1e-9 and min(y0, y1) - 1e-9 <= py <= max(y0, y1) + 1e-9
    return abs(cross) < 1e-9 and inside


def test_spacetime_names_every_arrow_and_no_text_overlaps() -> None:
    """The handoff after all-replicas-lost (12 protocol frames crossing in 6 ms): every arrow that arrived carries its own
    name, anchored on it; no two texts' boxes overlap; no name sits on a node's line or on another protocol arrow.
    On the base it named a fan-out once (9 names for 12 arrows) and left a SyncRequest on n2's line."""
    trace = scenarios.run("all-replicas-lost", 0).trace
    restart = max(r.t_ns for r in trace.of("fault.restart"))
    start = next(r.t for r in trace.of("handoff.started") if r.t_ns > restart) - 0.0005   # notebook 04's window
    fig = spacetime_diagram(trace, start, 0.006)
    ax = only_axes(fig)
    fig.draw_without_rendering()
    renderer = fig._get_renderer()  # type: ignore[attr-defined]
    frames = [a for a in frame_arrows(trace, round(start * 1e9), round((start + 0.006) * 1e9)) if a.tag != "Heartbeat"]
    assert sorted({a.tag or "" for a in frames}) == ["SyncDump", "SyncRequest"] and all(a.arrived_ns is not None for a in frames)
    assert sum(1 for a in frames if a.tag == "SyncRequest") == 6   # each node asks both others at once
    drawn = [p for p in ax.patches if isinstance(p, FancyArrowPatch) and p.get_gid() in ("frame:SyncRequest", "frame:SyncDump")]
    names = [t for t in ax.texts if t.get_text() in ("SyncRequest", "SyncDump")]
    assert len(drawn) == len(names) == len(frames) == 12
    owners = []
    for name in names:   # each name's anchor lies on exactly one arrow of its tag: a one-to-one naming
        on = [i for i, p in enumerate(drawn) if p.get_gid() == "frame:" + name.get_text() and _on_segment(name.xy, *p._posA_posB)]  # type: ignore[attr-defined]
        assert len(on) == 1, name.get_text()
        owners.append(on[0])
    assert sorted(owners) == list(range(12))
    boxes = [t.get_window_extent(renderer) for t in ax.texts]
    assert len(boxes) == 18   # 12 names + 3 "handoff round" + 3 "handoff done"
    assert [(i, j) for i, b in enumerate(boxes) for j, c in enumerate(boxes) if i < j and b.overlaps(c)] == []
    to_px = ax.transData.transform
    lines = [(to_px(p._posA_posB[0]), to_px(p._posA_posB[1])) for p in drawn]  # type: ignore[attr-defined]
    lines += [(to_px((x, 0.0)), to_px((x, 6.0))) for x in range(3)]   # the node lines
    for name, own in zip(names, owners):
        box = name.get_window_extent(renderer)
        crossed = [k for k, (p, q) in enumerate(lines) if k != own and any(box.contains(*(p + (q - p) * f / 400)) for f in range(401))]
        assert crossed == [], (name.get_text(), crossed)
    assert texts(ax).count("handoff done (1 key)") == 3


def test_spacetime_too_dense_a_window_says_how_many_names_it_left_out() -> None:
    """The same handoff squeezed into a 50 ms window: names that fit nowhere off every text are left out and counted in
    the title (names + left out = arrows), and still no two texts overlap (a leader line's extent aside). (30 ms, once
    too dense, names all 12 since the notes moved off the arrows.)"""
    trace = scenarios.run("all-replicas-lost", 0).trace
    restart = max(r.t_ns for r in trace.of("fault.restart"))
    start = next(r.t for r in trace.of("handoff.started") if r.t_ns > restart) - 0.0005
    fig = spacetime_diagram(trace, start, 0.05)
    ax = only_axes(fig)
    fig.draw_without_rendering()
    renderer = fig._get_renderer()  # type: ignore[attr-defined]
    names = [t for t in ax.texts if t.get_text() in ("SyncRequest", "SyncDump")]
    title = ax.get_title(loc="left")
    left_out = int(title.split("; ")[1].split(" not named")[0])
    assert title.endswith(f"; {left_out} not named (too dense here: zoom in)") and left_out > 0
    assert len(names) + left_out == 12
    boxes = [Text.get_window_extent(t, renderer) for t in ax.texts]
    assert [(i, j) for i, b in enumerate(boxes) for j, c in enumerate(boxes) if i < j and b.overlaps(c)] == []


def test_spacetime_bad_window(repeat: Run) -> None:
    """A window without duration is a ValueError; an empty window says so instead of drawing nothing."""
    with pytest.raises(ValueError, match="positive duration"):
        spacetime_diagram(repeat.trace, 3.0, 0.0)
    empty = spacetime_diagram(Trace(), 0.0, 0.1)
    assert "no frames or node events in this window" in texts(only_axes(empty))


def _arrow_hits(box: Any, drawn: list[FancyArrowPatch], to_px: Any) -> list[str]:
    """The frames whose arrow passes through ``box`` (pixels), sampled at 400 points along each arrow."""
    hits = []
    for p in drawn:
        a, b = (to_px(end) for end in p._posA_posB)  # type: ignore[attr-defined]
        if any(box.contains(*(a + (b - a) * f / 400)) for f in range(401)):
            hits.append(str(p.get_gid()))
    return hits


def test_spacetime_notes_cross_no_arrow_and_overlap_no_text(stale: Run) -> None:
    """Notebook 04 §1 (n1's takeover, the default window): no node's note (its epoch, activation and firing, a drop's
    label) lies across an arrow, and no two texts overlap. On the base n1's epoch note lay across its Write and the Ack."""
    fig = spacetime_diagram(stale.trace)
    ax = only_axes(fig)
    fig.draw_without_rendering()
    renderer = fig._get_renderer()  # type: ignore[attr-defined]
    notes = [t for t in ax.texts if not str(t.get_gid()).startswith("name:")]
    epoch = [t for t in notes if t.get_text().startswith("epoch (2, n1#1)")]
    assert len(epoch) == 1 and "fires schedule 'tick'" in epoch[0].get_text()
    drawn = arrows(ax)
    crossed = {t.get_text(): _arrow_hits(Text.get_window_extent(t, renderer), drawn, ax.transData.transform) for t in notes}
    assert {text: hits for text, hits in crossed.items() if hits} == {}
    boxes = [Text.get_window_extent(t, renderer) for t in ax.texts]
    assert [(ax.texts[i].get_text(), ax.texts[j].get_text()) for i, b in enumerate(boxes) for j, c in enumerate(boxes)
            if i < j and b.overlaps(c)] == []


def test_spacetime_fenced_window_shows_each_prepare_answered_and_every_arrow_whole() -> None:
    """Notebook 04 §2 (newer-promise-fences, from 4 ms before the fence to the new epoch): each Prepare drawn has its
    Promise drawn, and every arrow ends inside the axes (a frame sent in the window is drawn to its arrival, past the
    window's end in a shaded band). Its old 5.5 ms window cut both Prepares' answers; a window's last Writes ran off."""
    run = scenarios.run("newer-promise-fences", 0)
    fenced = run.trace.of("write.failed", key=str(run.world.results["key"]), reason="fenced")[0]
    ax = only_axes(spacetime_diagram(run.trace, start=fenced.t - 0.004, duration=0.0095))
    lanes = [t.get_text() for t in ax.get_xticklabels()]

    def ends(tag: str) -> list[tuple[str, str]]:
        return sorted((lanes[round(p._posA_posB[0][0])], lanes[round(p._posA_posB[1][0])]) for p in arrows(ax, tag))  # type: ignore[attr-defined]

    assert ends("Prepare") == [("n3", "n1"), ("n3", "n2")]
    assert ends("Promise") == [("n1", "n3"), ("n2", "n3")]
    bottom, top = ax.get_ylim()
    assert all(top <= p._posA_posB[1][1] <= bottom for p in arrows(ax))  # type: ignore[attr-defined]
    assert bottom > 9.5 and len(with_gid(ax, "after.window")) == 1 and "after the window" in " ".join(legend(ax))
    assert 'epoch (3, n3#1) of tally["promised1"], found v4' in "\n".join(texts(ax))
