"""Views read hand-built traces: what each figure draws is counted, not just that it returns a Figure.

Set ``CASTY_VIZ_OUT=/some/dir`` to also keep every scenario's PNG there for a look.
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
from matplotlib.patches import Rectangle  # noqa: E402

from sim.trace import Trace  # noqa: E402
from sim.viz import activation_timeline, catchup_chart  # noqa: E402

START_US = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z
S = 1_000_000  # µs per second
MIN = 60 * S
H = 60 * MIN
D = 24 * H


class World:
    """Builds a trace by hand: true time in µs, each node's wall clock = start + true time + its skew."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, str, int, str, dict[str, Any]]] = []
        self.skew: dict[str, int] = {}

    @property
    def trace(self) -> Trace:
        """The rows in true-time order (scenarios may be written out of order), as a real run records them."""
        trace = Trace()
        for t_us, node, wall_us, kind, fields in sorted(self.rows, key=lambda r: r[0]):
            trace.add(t_us * 1000, node, wall_us, kind, fields)
        return trace

    def wall(self, t_us: int, node: str) -> int:
        return START_US + t_us + self.skew.get(node, 0)

    def add(self, t_us: int, node: str, kind: str, **fields: Any) -> None:
        self.rows.append((t_us, node, self.wall(t_us, node), kind, fields))

    def step(self, t_us: int, node: str, delta_us: int) -> None:
        self.skew[node] = self.skew.get(node, 0) + delta_us
        self.add(t_us, node, "clock.step", delta_us=delta_us)

    def start(self, t_us: int, node: str, key: str, lease: int, actor: str = "reporter", restart: int = 0) -> None:
        self.add(t_us, node, "activation.started", actor=actor, key=key, lease=lease, behavior="run", recovered=False, restart=restart)

    def end(self, t_us: int, node: str, key: str, lease: int, reason: str = "idle", actor: str = "reporter") -> None:
        self.add(t_us, node, "activation.ended", actor=actor, key=key, lease=lease, reason=reason)

    def fail(self, t_us: int, node: str, key: str, lease: int, actor: str = "reporter") -> None:
        self.add(t_us, node, "activation.failed", actor=actor, key=key, lease=lease, error="ValueError('boom')", message="Tick", retry_in=1.0)

    def arm(self, t_us: int, node: str, due_rel: int, every: int | None, key: str = "acme", name: str = "tick") -> None:
        self.add(t_us, node, "schedule.armed", actor="reporter", key=key, name=name, due_us=START_US + due_rel, every_us=every)

    def fire(self, t_us: int, node: str, due_rel: int, every: int, key: str = "acme", name: str = "tick", arm: bool = True) -> int:
        """A firing exactly as casty does it (catch-up, no burst); returns the next due (relative µs)."""
        now = self.wall(t_us, node)
        due = START_US + due_rel
        skipped = max(0, now - due) // every
        nxt = due + every * (skipped + 1)
        common = {"actor": "reporter", "key": key, "name": name}
        self.add(t_us, node, "schedule.fired", **common, due_us=due, now_us=now, next_us=nxt)
        if skipped:
            self.add(t_us, node, "schedule.caught_up", **common, due_us=due, now_us=now, next_us=nxt, skipped=skipped)
        if arm:
            self.add(t_us, node, "schedule.armed", **common, due_us=nxt, every_us=every)
        return nxt - START_US


# --- figure inspection ---------------------------------------------------------------------


def lanes(fig: Figure) -> tuple[Axes, Axes]:
    top, bottom = fig.axes
    return top, bottom


def with_gid(ax: Axes, gid: str) -> list[Any]:
    return [a for a in ax.get_children() if a.get_gid() == gid]


def points(ax: Axes, gid: str) -> int:
    """Markers drawn under ``gid`` (scatter offsets)."""
    return sum(len(c.get_offsets()) for c in with_gid(ax, gid) if isinstance(c, PathCollection))


def lines(ax: Axes, gid: str) -> int:
    """Line segments drawn under ``gid`` (vlines/hlines)."""
    return sum(len(c.get_segments()) for c in with_gid(ax, gid) if isinstance(c, LineCollection))


def patches(ax: Axes, gid: str) -> int:
    return sum(1 for a in with_gid(ax, gid) if isinstance(a, Rectangle))


def legend(ax: Axes) -> list[str]:
    found = ax.get_legend()
    assert found is not None
    return [t.get_text() for t in found.get_texts()]


def texts(ax: Axes) -> list[str]:
    return [t.get_text() for t in ax.texts]


def save(fig: Figure, name: str, tmp_path: Path) -> None:
    """Render the figure (catches drawing errors); keep it in $CASTY_VIZ_OUT when set."""
    fig.savefig(tmp_path / f"{name}.png", dpi=100)
    out = os.environ.get("CASTY_VIZ_OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        fig.savefig(Path(out) / f"{name}.png", dpi=100)


# --- scenarios ------------------------------------------------------------------------------


def on_time() -> Trace:
    """n1 runs a 10 s schedule for 105 s, every firing on time."""
    w = World()
    w.start(200_000, "n1", "acme", 1)
    w.arm(300_000, "n1", 10 * S, 10 * S)
    due = 10 * S
    while due <= 100 * S:
        due = w.fire(due, "n1", due, 10 * S)
    w.add(105 * S, "n1", "note", text="run ends")
    return w.trace


def paused() -> Trace:
    """A 1 min schedule; n1 is paused from 7.5 to 12.2 min, so 4 occurrences are skipped at resume."""
    w = World()
    w.start(1 * S, "n1", "acme", 1)
    w.arm(1 * S, "n1", 1 * MIN, 1 * MIN)
    due = 1 * MIN
    while due < 8 * MIN:
        due = w.fire(due, "n1", due, 1 * MIN)
    w.add(7 * MIN + 30 * S, "n1", "fault.pause")
    w.add(12 * MIN + 12 * S, "n1", "fault.resume")
    due = w.fire(12 * MIN + 12 * S, "n1", due, 1 * MIN)
    while due <= 30 * MIN:
        due = w.fire(due, "n1", due, 1 * MIN)
    w.add(30 * MIN + 20 * S, "n1", "note", text="end")
    return w.trace


def crash_repeat() -> Trace:
    """A daily report: n1 crashes after building day 3 before saving the next due; n2 takes over and repeats day 3."""
    w = World()
    w.start(1 * S, "n1", "acme", 1)
    w.arm(1 * S, "n1", 1 * D, 1 * D, name="daily-report")
    for day in (1, 2, 3):
        w.fire(day * D, "n1", day * D, 1 * D, name="daily-report", arm=day < 3)
        w.add(day * D + 5 * MIN, "n1", "report.built", day=day, key="acme")
    w.add(3 * D + 10 * MIN, "n1", "note", text="n1 crashes after building day 3, before saving the next due")
    w.add(3 * D + 10 * MIN, "n1", "fault.crash")
    w.start(3 * D + 1 * H, "n2", "acme", 2)
    w.arm(3 * D + 1 * H, "n2", 3 * D, 1 * D, name="daily-report")  # the saved due: day 3 again
    due = w.fire(3 * D + 1 * H, "n2", 3 * D, 1 * D, name="daily-report")
    w.add(3 * D + 1 * H + 5 * MIN, "n2", "report.built", day=3, key="acme")
    w.add(3 * D + 4 * H, "n1", "fault.restart", incarnation=2)
    while due <= 6 * D:
        day = due // D
        due = w.fire(due, "n2", due, 1 * D, name="daily-report")
        w.add(day * D + 5 * MIN, "n2", "report.built", day=day, key="acme")
    w.add(6 * D + 6 * H, "n2", "note", text="end of the week")
    return w.trace


def clock_step() -> Trace:
    """An hourly schedule; n1's clock jumps +2.5 h at 4.5 h (2 skipped) and -1 h at 9 h (the timer re-arms)."""
    w = World()
    w.start(1 * S, "n1", "acme", 1)
    w.arm(1 * S, "n1", 1 * H, 1 * H)
    for hour in range(1, 5):
        w.fire(hour * H, "n1", hour * H, 1 * H)
    w.step(4 * H + 30 * MIN, "n1", 150 * MIN)
    # the loop timer for wall 5 h still runs at true 5 h: the wall clock reads 7.5 h
    nxt = w.fire(5 * H, "n1", 5 * H, 1 * H)  # next due 8 h on the wall: true 5.5 h
    while nxt <= 11 * H:
        nxt = w.fire(nxt - w.skew["n1"], "n1", nxt, 1 * H)
    w.step(9 * H, "n1", -1 * H)  # the timer for wall 12 h runs at true 9.5 h, but the clock reads 11 h
    w.arm(9 * H + 30 * MIN, "n1", 12 * H, 1 * H)  # so it re-arms and fires at true 10.5 h
    nxt = w.fire(10 * H + 30 * MIN, "n1", 12 * H, 1 * H)
    w.fire(11 * H + 30 * MIN, "n1", nxt, 1 * H)
    w.add(12 * H, "n1", "note", text="end")
    return w.trace


def cluster() -> Trace:
    """Three nodes, six keys: n1 crashes at 40 s and restarts at 55 s, n2 is paused 20-32 s, bob fails twice on n2."""
    w = World()
    w.start(1 * S, "n1", "alice", 1)
    w.start(2 * S, "n1", "carol", 2)
    w.start(2 * S, "n2", "bob", 3)
    w.start(3 * S, "n3", "dave", 4)
    w.start(4 * S, "n3", "erin", 5)
    w.end(14 * S, "n3", "erin", 5)
    w.fail(12 * S, "n2", "bob", 3)
    w.start(13 * S, "n2", "bob", 6, restart=1)
    w.fail(17 * S, "n2", "bob", 6)
    w.start(19 * S, "n2", "bob", 7, restart=2)
    w.add(20 * S, "n2", "fault.pause")
    w.add(32 * S, "n2", "fault.resume")
    w.end(30 * S, "n1", "carol", 2)
    w.start(35 * S, "n1", "frank", 8)
    w.add(40 * S, "n1", "fault.crash")
    w.start(42 * S, "n3", "alice", 9)
    w.start(43 * S, "n2", "frank", 10)
    w.add(55 * S, "n1", "fault.restart", incarnation=2)
    w.start(58 * S, "n1", "carol", 11)
    w.end(70 * S, "n1", "carol", 11, reason="idle")
    w.step(45 * S, "n3", 3 * S)
    w.end(75 * S, "n2", "bob", 7)
    w.add(40 * S, "n1", "note", text="crash n1: alice and frank move")
    w.add(80 * S, "n3", "note", text="end")
    return w.trace


# --- catch-up chart -------------------------------------------------------------------------


def test_catchup_on_time(tmp_path: Path) -> None:
    """An on-time 10 s schedule: 10 blue deliveries on the 10 s grid in both lanes, no skip, repeat or skew."""
    fig = catchup_chart(on_time())
    save(fig, "catchup_on_time", tmp_path)
    top, wall = lanes(fig)
    for ax in (top, wall):
        assert points(ax, "delivered") == 10
        assert points(ax, "repeat") == points(ax, "skipped") == 0
        assert lines(ax, "lateness") == 0
        assert lines(ax, "grid") >= 10  # 10 s .. the end of the run
    assert top.get_xlabel() == "true time since start (s)"
    assert wall.get_xlabel() == "node wall clock, s after 2026-01-01 00:00:00 UTC"
    assert legend(top) == ["nominal due (every 10 s)", "delivered"]
    assert [a for a in fig.get_children() if a.get_gid() == "skew"] == []
    assert "10 deliveries, 0 skipped, 0 repeated" in top.get_title(loc="left")
    assert (top.get_ylabel(), wall.get_ylabel()) == ("true time", "node wall clock")


def test_catchup_pause_skips(tmp_path: Path) -> None:
    """A 4.7 min pause of a 1 min schedule: one late delivery and 4 hollow red skips on the wall lane, x in minutes."""
    fig = catchup_chart(paused(), schedule="tick")
    save(fig, "catchup_pause", tmp_path)
    top, wall = lanes(fig)
    assert top.get_xlabel() == "true time since start (min)"
    assert points(wall, "skipped") == 4 and points(top, "skipped") == 0
    assert "skipped 4" in texts(wall)
    assert "paused" in texts(top)
    assert patches(top, "paused") == patches(wall, "paused") == 1
    assert lines(top, "lateness") == lines(wall, "lateness") == 1  # the delivery at resume, 4.2 min late
    assert points(top, "delivered") == 26  # minutes 1..7, then 8 (late), then 13..30
    assert legend(top) == ["nominal due (every 1 min)", "delivered", "lateness (due to delivery)", "skipped (caught up)", "paused"]


def test_catchup_repeat_after_crash(tmp_path: Path) -> None:
    """Day 3 delivered on n1, n1 crashes, n2 delivers day 3 again: one orange repeat, the report built twice, x in days."""
    fig = catchup_chart(crash_repeat())
    save(fig, "catchup_repeat", tmp_path)
    top, wall = lanes(fig)
    assert top.get_xlabel() == "true time since start (d)"
    assert [t.get_text() for t in top.get_yticklabels()] == ["n1", "n2"]
    assert points(top, "repeat") == points(wall, "repeat") == 1
    assert points(top, "delivered") == 6  # days 1..6 once each
    assert "repeat" in texts(top)
    assert points(top, "report.built") == 7 and "report Jan 04 again" in texts(top)
    assert lines(top, "crash") == 1 and patches(top, "down") == 1 and points(top, "restart") == 1
    assert {"crash", "restart #2"} <= set(texts(top))
    assert "repeat (due delivered again)" in legend(top) and "report built" in legend(top)
    assert "Schedule 'daily-report' of reporter[\"acme\"] (every 1 d)" in top.get_title(loc="left")


def test_catchup_clock_step(tmp_path: Path) -> None:
    """A +2.5 h clock step skips 2 hourly occurrences on the wall lane and the lanes disagree; a -1 h step skips none."""
    fig = catchup_chart(clock_step(), key="acme", schedule="tick", actor="reporter")
    save(fig, "catchup_clock_step", tmp_path)
    top, wall = lanes(fig)
    assert top.get_xlabel() == "true time since start (h)"
    assert points(wall, "skipped") == 2 and "skipped 2" in texts(wall)
    assert lines(top, "clock.step") == 2
    assert {"clock +2.5 h", "clock -1 h"} <= set(texts(top))
    assert {"clock jumps +2.5 h", "clock jumps -1 h"} <= set(texts(wall))
    skew = [a for a in fig.get_children() if a.get_gid() == "skew"]
    assert len(skew) == points(top, "delivered") - 4  # every delivery after the first step
    assert "clock step" in legend(top) and "same delivery\n(true vs wall clock)" in legend(top)


def test_catchup_dense(tmp_path: Path) -> None:
    """A 1 s schedule over 50 min: no grey wash of grid lines, and 1200 skips become one red stretch, not 1200 X's."""
    w = World()
    w.start(0, "n1", "acme", 1)
    w.arm(0, "n1", 1 * S, 1 * S)
    due = 1 * S
    while due < 10 * MIN:
        due = w.fire(due, "n1", due, 1 * S)
    w.add(10 * MIN, "n1", "fault.pause")
    w.add(30 * MIN, "n1", "fault.resume")
    due = w.fire(30 * MIN, "n1", due, 1 * S)
    while due < 50 * MIN:
        due = w.fire(due, "n1", due, 1 * S)
    fig = catchup_chart(w.trace)
    save(fig, "catchup_dense", tmp_path)
    top, wall = lanes(fig)
    assert lines(top, "grid") == lines(wall, "grid") == 0
    assert legend(top)[0] == "nominal due (every 1 s)\ntoo dense to draw"
    assert lines(wall, "skipped.range") == 1 and points(wall, "skipped") == 2  # an X at each end
    assert "skipped 1200" in texts(wall)
    assert points(top, "delivered") == 599 + 1 + 1199  # 1..599 s, the late one at 30 min, 1801..2999 s


def test_catchup_errors_and_partial() -> None:
    """An unknown schedule or an empty trace raises ValueError naming what exists; an armed-only schedule still draws its grid."""
    with pytest.raises(ValueError, match="no schedule rows in this trace"):
        catchup_chart(Trace())
    with pytest.raises(ValueError, match=r"schedule='nope'.*reporter\[\"acme\"\] 'tick'"):
        catchup_chart(on_time(), schedule="nope")
    w = World()
    w.arm(0, "n1", 5 * S, 5 * S)
    w.add(30 * S, "n1", "note", text="never fired")
    fig = catchup_chart(w.trace)
    top, _ = lanes(fig)
    assert points(top, "delivered") == 0 and lines(top, "grid") == 6
    assert "0 deliveries" in top.get_title(loc="left")


def test_catchup_into_given_axes() -> None:
    """Given one Axes, the chart splits it into the two lanes of the same figure."""
    fig = Figure()
    ax = fig.add_subplot(2, 1, 2)
    assert catchup_chart(on_time(), ax=ax) is fig
    assert len(fig.axes) == 2 and points(fig.axes[0], "delivered") == 10


# --- activation timeline --------------------------------------------------------------------


def test_timeline_cluster(tmp_path: Path) -> None:
    """Three nodes: one bar per run, bob's 2 failures as red X's, n1's crash line and restart, n2's hatched pause."""
    fig = activation_timeline(cluster())
    save(fig, "timeline_cluster", tmp_path)
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_yticklabels()] == ["n1", "n2", "n3"]
    bars = [p for p in ax.patches if str(p.get_gid()).startswith("activation:")]
    assert len(bars) == 11
    assert sum(p.get_gid() == 'activation:"bob"' for p in bars) == 3
    assert len({p.get_facecolor() for p in bars}) == 6  # one colour per key, the same on every node
    assert points(ax, "failed") == 2
    assert lines(ax, "crash") == 1 and points(ax, "restart") == 1 and patches(ax, "down") == 1
    assert patches(ax, "paused") == 1 and lines(ax, "clock.step") == 1
    assert {"crash", "restart #2", "paused", "clock +3 s"} <= set(texts(ax))
    assert ax.get_xlabel() == "true time since start (s)"
    assert legend(ax) == ['"alice"', '"carol"', '"bob"', '"dave"', '"erin"', '"frank"', "activation failed", "crash",
                          "down (crash to restart)", "restart", "paused", "clock step"]
    # frank's run on n1 ends at the crash (40 s), alice's at the crash too
    n1_ends = sorted(p.get_x() + p.get_width() for p in bars if p.get_gid() in ('activation:"frank"', 'activation:"alice"') and p.get_y() < 3)
    assert n1_ends == [40.0, 40.0]


def test_timeline_key_filter_and_empty(tmp_path: Path) -> None:
    """``keys`` keeps only those bars (faults stay); an empty trace gives a labelled empty chart, not an error."""
    fig = activation_timeline(cluster(), keys=["bob"])
    (ax,) = fig.axes
    assert {p.get_gid() for p in ax.patches if str(p.get_gid()).startswith("activation:")} == {'activation:"bob"'}
    assert lines(ax, "crash") == 1
    empty = activation_timeline(Trace())
    save(empty, "timeline_empty", tmp_path)
    assert "no activations" in " ".join(texts(empty.axes[0]))


def test_timeline_many_keys(tmp_path: Path) -> None:
    """Five nodes and twenty keys stay readable: no key legend, hatches once colours run out, minutes on x."""
    w = World()
    for i in range(20):
        node = f"n{i % 5 + 1}"
        w.start(i * 20 * S, node, f"user-{i:02d}", i + 1)
        w.end(i * 20 * S + (4 + i % 4) * MIN, node, f"user-{i:02d}", i + 1)
    w.add(3 * MIN, "n3", "fault.crash")
    w.add(3 * MIN + 50 * S, "n3", "fault.restart", incarnation=2)
    fig = activation_timeline(w.trace, title="twenty keys")
    save(fig, "timeline_many", tmp_path)
    (ax,) = fig.axes
    assert ax.get_xlabel() == "true time since start (min)"
    assert ax.get_title(loc="left") == "twenty keys"
    assert not any(name.startswith("user-") for name in legend(ax))
    bars = [p for p in ax.patches if str(p.get_gid()).startswith("activation:")]
    assert len(bars) == 20 and any(p.get_hatch() for p in bars)


def crash_loop() -> Trace:
    """Notebook 08's failing seed: a 10 s schedule on n1, eight crashes each restarted 1.6-8.6 s later, two of them 0.8 s apart at 59.2-60 s."""
    w = World()
    w.start(1 * S, "n1", "acme", 1)
    w.arm(1 * S, "n1", 10 * S, 10 * S)
    faults = [(10.618, 19.254), (23.382, 27.622), (29.229, 32.529), (38.464, 40.086), (42.087, 44.008), (46.515, 48.387),
              (54.906, 57.516), (59.202, 60.0)]
    due = 10 * S
    for inc, (down, up) in enumerate(faults, start=2):
        while due < down * S:
            due = w.fire(due, "n1", due, 10 * S)
        w.add(round(down * S), "n1", "fault.crash")
        w.add(round(up * S), "n1", "fault.restart", incarnation=inc)
    while due <= 80 * S:
        due = w.fire(due, "n1", due, 10 * S)
    return w.trace


def test_catchup_fault_labels_never_overlap(tmp_path: Path) -> None:
    """Notebook 08's report chart: no two texts (labels, ticks, axis labels, title) overlap, and every restart is still named (#2-#9)."""
    fig = catchup_chart(crash_loop())
    save(fig, "catchup_crash_loop", tmp_path)
    fig.savefig(tmp_path / "sized.png", dpi=90)  # the plugin's dpi: the boxes are measured as drawn
    renderer = fig._get_renderer()  # type: ignore[attr-defined]
    top, _ = lanes(fig)
    drawn = [t for ax in fig.axes for t in (*ax.texts, ax.xaxis.label, ax.yaxis.label, ax.title, ax._left_title, *ax.get_xticklabels(), *ax.get_yticklabels())  # type: ignore[attr-defined]
             if t.get_visible() and t.get_text().strip()]
    boxes = [(t.get_text(), t.get_window_extent(renderer).padded(1)) for t in drawn]
    assert [(a, b) for i, (a, box) in enumerate(boxes) for b, other in boxes[i + 1:] if box.overlaps(other)] == []
    named = " ".join(texts(top))
    assert lines(top, "crash") == 8 and points(top, "restart") == 8
    assert all(f"#{i}" in named for i in (2, 3, 8, 9)) and "crashcrash" not in named.replace(" ", "")
