"""The ticks chart: the three kinds of periodic work side by side, and a cron tick's claims per node.

Each test runs a registered scenario (virtual time, well under a second) and reads the drawn
marks back by their gid, so the chart is checked against the trace it was drawn from.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from datetime import timedelta

os.environ.setdefault("MPLBACKEND", "Agg")

from matplotlib.axes import Axes  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.collections import LineCollection, PathCollection  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from casty import ActorSystem, Context, actor  # noqa: E402
from sim import World, scenarios  # noqa: E402
from sim.viz import ticks_chart  # noqa: E402
from sim.viz.data.ticks import tick_rows  # noqa: E402
from sim.trace import Trace  # noqa: E402


def _points(ax: Axes, gid: str, y: int | None = None) -> int:
    """Markers drawn under ``gid`` (on row ``y`` when given)."""
    return sum(
        sum(1 for _, py in np.asarray(c.get_offsets()) if y is None or py == y)
        for c in ax.collections
        if c.get_gid() == gid and isinstance(c, PathCollection)
    )


def _rows(ax: Axes) -> list[str]:
    return [t.get_text() for t in ax.get_yticklabels()]


def test_after_a_crash_only_the_persisted_schedule_ticks_on() -> None:
    """timers-vs-schedules: rows schedule/timer of key "k" (quoted: a key, not a state), then the node schedule, on n1, told 16/6/6 (the trace's counts), one 'skipped 1' label."""
    trace = scenarios.run("timers-vs-schedules", seed=0).trace
    ax = ticks_chart(trace).axes[0]
    assert _rows(ax) == ["n1  counted[\"k\"] · actor schedule 'persisted'", "n1  counted[\"k\"] · timer 'volatile'", "n1  node schedule 'node-beat'"]
    assert [_points(ax, "told", y) for y in range(3)] == [len(trace.of("schedule.fired")), 6, 6] == [18, 6, 6]
    assert [t.get_text() for t in ax.texts] == ["skipped 1"]
    assert ax.get_title(loc="left") == "Periodic deliveries: 30 told"


def test_a_winner_that_dies_before_recording_its_claim_is_marked_on_its_row() -> None:
    """cron-claim-winner-crash: one orange 'won a claim, never told' on n1 (named by the losers), 8 told, 16 claims lost."""
    trace = scenarios.run("cron-claim-winner-crash", seed=0).trace
    ax = ticks_chart(trace).axes[0]
    assert _rows(ax)[0].startswith("n1") and _points(ax, "untold", 0) == 1 and _points(ax, "untold") == 1
    assert (_points(ax, "told"), _points(ax, "lost")) == (8, 14)
    assert ax.get_title(loc="left") == "Periodic deliveries: 8 told, 1 claimed and never told"


def test_claim_keys_own_schedules_are_hidden_unless_asked_for() -> None:
    """cron-single-fire: the claim keys' expiry schedules (9 fired) are rows only with internal=True."""
    trace = scenarios.run("cron-single-fire", seed=0).trace
    assert sorted(tick_rows(trace)) == [(n, "node schedule 'report-every-5s'") for n in ("n1", "n2", "n3")]
    internal = tick_rows(trace, internal=True)
    assert sum(len(v) for (n, s), v in internal.items() if "· actor schedule" in s) == 9


@dataclass(frozen=True)
class _Tick:
    what: str


@actor(initial=0)
async def _fragile(ctx: Context[int, _Tick]) -> None:
    """Fails on every tick."""
    async for msg in ctx.inbox:
        raise RuntimeError(f"cannot handle {msg.what}")


def test_dead_letters_and_a_pause_are_drawn_on_the_schedule_s_row() -> None:
    """Every 10 s to a failing key, paused 25-45 s (resumed on a new grid: 55 s): 3 told, 3 dead-letter marks, one hatched pause, counted in the title."""
    world = World(seed=0)
    world.add_node("n1")

    async def client(system: ActorSystem) -> None:
        await system.schedule(_Tick("t"), system.ref(_fragile, "f"), timedelta(seconds=10), reference="to-fragile")
        await asyncio.sleep(25)
        system.pause_schedule("to-fragile")
        await asyncio.sleep(20)
        system.resume_schedule("to-fragile")

    world.spawn("n1", client)
    world.run(until=61)
    world.close()
    ax = ticks_chart(world.trace).axes[0]
    assert _rows(ax) == ["n1  node schedule 'to-fragile'"]
    assert (_points(ax, "told"), _points(ax, "dead")) == (3, 3) == (len(world.trace.of("node_schedule.fired")), len(world.trace.of("dead_letter")))
    (pause,) = [p for p in ax.patches if p.get_gid() == "schedule.paused" and isinstance(p, Rectangle)]
    assert (round(pause.get_x()), round(pause.get_width())) == (25, 20)
    assert ax.get_title(loc="left") == "Periodic deliveries: 3 told, 3 dead letters"


@actor(initial=0, mailbox=1)
async def _slow(ctx: Context[int, _Tick]) -> None:
    """Takes 25 s per tick; its mailbox holds one waiting message."""
    async for msg in ctx.inbox:
        await asyncio.sleep(25)


def _failing_and_slow() -> Trace:
    """Course 06 section 3: every 10 s to a key that raises (6 dead letters) and to one whose mailbox is full at 30 s and 50 s (2 ticks lost)."""
    world = World(seed=0)
    world.add_node("n1")

    async def client(system: ActorSystem) -> None:
        await system.schedule(_Tick("t"), system.ref(_fragile, "f"), timedelta(seconds=10), reference="to-fragile")
        await system.schedule(_Tick("t"), system.ref(_slow, "s"), timedelta(seconds=10), reference="to-slow")

    world.spawn("n1", client)
    world.run(until=65)
    world.close()
    return world.trace


def test_a_lost_tick_and_a_dead_letter_differ_in_shape_and_colour_and_the_legend_names_each() -> None:
    """6 dead letters and 2 lost ticks: the two marks share neither marker path nor colour, on the chart and in the legend, each named."""
    trace = _failing_and_slow()
    ax = ticks_chart(trace).axes[0]
    assert (_points(ax, "dead"), _points(ax, "failed")) == (6, 2) == (len(trace.of("dead_letter")), len(trace.of("node_schedule.tick_lost")))
    (dead,) = [c for c in ax.collections if c.get_gid() == "dead"]
    lost = [c for c in ax.collections if c.get_gid() == "failed"][0]
    shapes = [np.asarray(c.get_paths()[0].vertices) for c in (dead, lost)]
    assert shapes[0].shape != shapes[1].shape or not np.allclose(shapes[0], shapes[1])  # another marker path
    assert not np.allclose(dead.get_facecolor()[0], lost.get_facecolor()[0])
    drawn = ax.get_legend()
    assert drawn is not None
    legend = {t.get_text(): h for t, h in zip(drawn.get_texts(), drawn.legend_handles)}
    assert "tick lost (not handed over)" in legend and "told, handler failed: dead letter" in legend, sorted(legend)
    a, b = legend["tick lost (not handed over)"], legend["told, handler failed: dead letter"]
    assert isinstance(a, Line2D) and isinstance(b, Line2D)
    assert (a.get_marker(), b.get_marker()) == ("X", "s") and a.get_color() != b.get_color()


def test_the_axis_fits_the_ticks_when_the_run_goes_on_long_after_and_says_so() -> None:
    """cron-single-fire runs to 110 s for its claims to expire; the ticks end with the cancel at 45 s: the axis stops near 45 s, the label names the run's end, each row marks its cancel."""
    trace = scenarios.run("cron-single-fire", seed=0).trace
    ax = ticks_chart(trace).axes[0]
    cancels = trace.of("node_schedule.cancelled", reason="cancelled")
    last = max(r.t for r in cancels)
    assert len(cancels) == 3 and 44 < last < 46 and trace.rows[-1].t > 100
    assert last < ax.get_xlim()[1] < last * 1.1
    assert "the run ends at 109.8 s, nothing on these rows after 45 s" in ax.get_xlabel(), ax.get_xlabel()
    assert sum(len(c.get_segments()) for c in ax.collections if c.get_gid() == "cancelled" and isinstance(c, LineCollection)) == 3
    assert [t.get_text() for t in ax.texts].count("cancelled") == 3


def test_a_run_whose_rows_reach_its_end_keeps_the_whole_axis() -> None:
    """timers-vs-schedules: the persisted schedule ticks to the end, so the axis still runs to the trace's end and the label is the plain one."""
    trace = scenarios.run("timers-vs-schedules", seed=0).trace
    ax = ticks_chart(trace).axes[0]
    assert ax.get_xlim()[1] >= trace.rows[-1].t / 60 and ax.get_xlabel() == "true time since start (min)"  # 190 s: drawn in minutes


@dataclass(frozen=True)
class _Start:
    every_s: int


@actor(initial=0)
async def _beating(ctx: Context[int, _Start | _Tick]) -> None:
    """Arms a timer and a schedule, both named 'beat', on its own key."""
    async for msg in ctx.inbox:
        if isinstance(msg, _Start):
            ctx.timer("beat", timedelta(seconds=msg.every_s), timedelta(seconds=msg.every_s), _Tick("timer"))
            await ctx.schedule("beat", timedelta(seconds=msg.every_s), timedelta(seconds=msg.every_s), _Tick("schedule"))


def test_a_timer_or_schedule_name_on_two_keys_gives_each_key_its_row() -> None:
    """Keys a (every 2 s) and b (every 5 s) on n1, each with a timer and a schedule 'beat': four rows 'key · source', 10/4 told each."""
    world = World(seed=0)
    world.add_node("n1")

    async def client(system: ActorSystem) -> None:
        system.ref(_beating, "a").tell(_Start(2))
        system.ref(_beating, "b").tell(_Start(5))

    world.spawn("n1", client)
    world.run(until=21)
    world.close()
    ax = ticks_chart(world.trace).axes[0]
    assert _rows(ax) == ["n1  _beating[\"a\"] · actor schedule 'beat'", "n1  _beating[\"a\"] · timer 'beat'",
                         "n1  _beating[\"b\"] · actor schedule 'beat'", "n1  _beating[\"b\"] · timer 'beat'"]  # a key named as a key
    assert [_points(ax, "told", y) for y in range(4)] == [10, 10, 4, 4]
    assert sorted(tick_rows(world.trace)) == [("n1", "_beating[a] · actor schedule 'beat'"), ("n1", "_beating[a] · timer 'beat'"),
                                              ("n1", "_beating[b] · actor schedule 'beat'"), ("n1", "_beating[b] · timer 'beat'")]


# --- the catch-up chart's lanes: every periodic thing of a run, one lane each ------------------------------------

from sim.trace import Trace  # noqa: E402
from sim.viz import catchup_chart  # noqa: E402


@dataclass(frozen=True)
class _Arm:
    """Arms a persisted schedule 'daily' and a timer 'tick' on the key that receives it."""


@actor(initial=0)
async def _reporter(ctx: Context[int, _Arm | _Tick]) -> None:
    """A key with a persisted schedule (every 10 s) and an activation timer (every 4 s)."""
    async for msg in ctx.inbox:
        if isinstance(msg, _Arm):
            await ctx.schedule("daily", timedelta(seconds=10), timedelta(seconds=10), _Tick("schedule"))
            ctx.timer("tick", timedelta(seconds=4), timedelta(seconds=4), _Tick("timer"))


def three_kinds() -> Trace:
    """Key ana: schedule 'daily' (10 s) and timer 'tick' (4 s); n1's node schedule 'report' (10 s, from 5 s); n1 paused 32-61 s, run to 80 s."""
    world = World(seed=0)
    world.add_node("n1")

    async def client(system: ActorSystem) -> None:
        system.ref(_reporter, "ana").tell(_Arm())
        await asyncio.sleep(5)
        await system.schedule(_Tick("node"), system.ref(_reporter, "ana"), timedelta(seconds=10), reference="report")

    def faults(world: World):  # type: ignore[no-untyped-def]
        yield world.timeout(32)
        world.pause("n1")
        yield world.timeout(29)
        world.resume("n1")

    world.spawn("n1", client)
    world.process(faults(world))
    world.run(until=80)
    world.close()
    return world.trace


def _marks(ax: Axes, cls: str, lane: str) -> int:
    return _points(ax, f"{cls}|{lane}")


def test_the_catchup_chart_draws_a_lane_per_schedule_timer_and_node_schedule() -> None:
    """three_kinds: lanes 'schedule _reporter["ana"] / daily', 'timer ... / tick', 'node schedule n1 / report → ...', marked by the ledger, the pause hatched on all three."""
    trace = three_kinds()
    ax = catchup_chart(trace, lanes="all").axes[0]
    schedule, timer, node = 'schedule  _reporter["ana"] / daily', 'timer  _reporter["ana"] / tick', "node schedule  n1 / report → _reporter[\"ana\"]"
    assert _rows(ax) == [schedule, timer, node]
    from sim.viz.data.periodic import periodic_lanes  # here, not at the top: before the lanes existed only these tests failed

    lanes = {lane.label: lane for lane in periodic_lanes(trace)}
    for name in (schedule, node):  # every occurrence the ledger classified is one mark of its class on its lane
        drawn = {cls: _marks(ax, cls, name) for cls in ("on time", "late", "caught up", "repeated", "missed")}
        assert drawn == {cls: sum(o.cls == cls for o in lanes[name].occurrences) for cls in drawn}
    assert _marks(ax, "timer", timer) == len(trace.of("timer.fired"))
    assert _marks(ax, "caught up", schedule) == 1 and _marks(ax, "caught up", node) == 1  # each catches up once at the resume
    assert _marks(ax, "missed", schedule) >= 1 and _marks(ax, "missed", node) >= 1
    assert sum(p.get_gid() == "paused" for p in ax.patches) == 3
    assert ax.get_title(loc="left").startswith("Every periodic thing: 1 schedule, 1 timer, 1 node schedule\n")


def test_the_catchup_lanes_hide_claim_keys_unless_asked_for() -> None:
    """cron-single-fire: one cron lane with 9 on-time ticks and 16 lost claims; internal=True adds the 9 claim keys' expiry schedules, greyed, after it."""
    trace = scenarios.run("cron-single-fire", seed=0).trace
    ax = catchup_chart(trace, lanes="all").axes[0]
    cron = 'cron  report-every-5s → pinged["report"]  (one node of the cluster tells each tick)'
    assert _rows(ax) == [cron]
    assert (_marks(ax, "on time", cron), _marks(ax, "lost claim", cron)) == (9, 16)
    loud = catchup_chart(trace, lanes="all", internal=True).axes[0]
    rows = _rows(loud)
    assert rows[0] == cron and len(rows) == 10
    assert all(r.startswith('schedule  schedule_fire["') and r.endswith("/ expire  (internal)") for r in rows[1:])
    assert len(set(rows[1:])) == 9  # each claim key its own label (the tick at the end of the key is kept)
    assert "9 of the runtime's own keys" in loud.get_title(loc="left")


def test_catchup_chart_refuses_an_unknown_lanes_value_naming_it() -> None:
    """lanes= takes 'one' (the default, one schedule's two clocks) or 'all'; anything else is a ValueError naming what it got."""
    import pytest

    with pytest.raises(ValueError, match="lanes must be 'one' or 'all', got 'every'"):
        catchup_chart(Trace(), lanes="every")  # type: ignore[arg-type]
    assert _rows(catchup_chart(Trace(), lanes="all").axes[0]) == []  # an empty trace: no lane, a sentence says so


def test_a_lane_run_by_two_nodes_shows_the_crash_not_a_down_band_and_where_it_fired_again() -> None:
    """ownership-repeat: the key's lane has one repeated mark '×2' with 'again on n2' at its second firing, n3's crash labelled, no down band."""
    trace = scenarios.run("ownership-repeat", seed=0).trace
    ax = catchup_chart(trace, lanes="all").axes[0]
    (lane,) = _rows(ax)
    assert _marks(ax, "repeated", lane) == 1 and _points(ax, f"repeated.again|{lane}") == 1
    texts = [t.get_text() for t in ax.texts]
    assert {"×2", "again on n2", "n3 crash", "on n3"} <= set(texts)
    assert not [p for p in ax.patches if p.get_gid() == "down"]
