"""Each catch-up policy of ``ctx.schedule`` under each fault, on one node and in a cluster, with exact deliveries.

A ``policy_ticker`` key schedules ``tick`` every 10 s (first due 10 s after it is armed) with
the policy under test; its body logs ``ctx.occurrence`` of every Tick it handles, so a test
sees what reached the body: which due, fired when, with how many skipped. Due times are
given as offsets (s) from the schedule's creation, fired times as offsets too.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

import sim
from casty import (
    ActorFailed,
    ActorSystem,
    Askable,
    Cluster,
    Context,
    DropLate,
    FireAll,
    FixedDelay,
    InvalidCatchUp,
    Occurrence,
    Skip,
    actor,
)
from casty.clock import to_us
from casty._core.schedules import decode_schedules

EVERY = 10.0


@dataclass(frozen=True)
class Arm(Askable[int]):
    """Schedule ``tick`` every 10 s under the policy named ``policy`` (in POLICIES or BAD: a message crosses the wire)."""

    policy: str


@dataclass(frozen=True)
class Tick:
    pass


@dataclass(frozen=True)
class Peek(Askable["Occurrence | None"]):
    """Answers ``ctx.occurrence`` while handling an ask (None)."""


LOG: list[tuple[Any, Occurrence]] = []  # (system, occurrence) of every Tick a body handled, in order


def _body() -> Any:
    async def body(ctx: Context[int, Arm | Tick | Peek]) -> None:
        async for msg in ctx.inbox:
            if isinstance(msg, Arm):
                policy = POLICIES[msg.policy] if msg.policy in POLICIES else BAD[msg.policy]
                await ctx.schedule("tick", timedelta(seconds=EVERY), timedelta(seconds=EVERY), Tick(), catch_up=policy)
                msg.reply_to.tell(ctx.system.clock.now_us())
            elif isinstance(msg, Tick):
                occurrence = ctx.occurrence
                assert occurrence is not None
                LOG.append((ctx.system, occurrence))
                await ctx.state.update(lambda n: n + 1)
            else:
                msg.reply_to.tell(ctx.occurrence)

    return body


@actor(initial=0)
async def policy_ticker(ctx: Context[int, Arm | Tick | Peek]) -> None:
    """Schedules ticks under a policy and logs each handled occurrence."""
    await _body()(ctx)


@actor(initial=0, durable="write")
async def durable_ticker(ctx: Context[int, Arm | Tick | Peek]) -> None:
    """policy_ticker whose pages go through to the node's disk (survives a crash)."""
    await _body()(ctx)


@pytest.fixture(autouse=True)
def _clear_log() -> None:
    LOG.clear()


def _created(world: sim.World) -> int:
    """The schedule's creation wall time (µs): its first due less the 10 s delay."""
    return int(world.trace.of("schedule.armed")[0].get("due_us")) - int(EVERY * 1_000_000)


def _rows(created_us: int) -> list[tuple[float, float, int]]:
    """The log as (due offset s, fired offset s, skipped), offsets from the schedule's creation, rounded to ms."""
    return [
        (round((to_us(o.due) - created_us) / 1e6, 3), round((to_us(o.fired_at) - created_us) / 1e6, 3), o.skipped)
        for _, o in LOG
    ]


def _one_node(policy: str, fault: str) -> tuple[sim.World, int]:
    """One node n1, a key armed at t≈0 under ``policy``, ``fault`` applied, run to 100 s."""
    world = sim.World(0)
    world.add_node("n1", store="memory")
    kind = durable_ticker if fault == "crash" else policy_ticker
    created: list[int] = []

    async def arm(system: ActorSystem) -> None:
        created.append(await system.ref(kind, "k").ask(Arm(policy)))

    world.spawn("n1", arm)
    if fault == "pause":  # paused across the dues 30..60: resumes at 62
        world.run(until=25.0)
        world.pause("n1")
        world.run(until=62.0)
        world.resume("n1")
    elif fault == "back":  # wall clock 25 s back at 35 s: due 40 comes at true 65
        world.run(until=35.0)
        world.step_clock("n1", timedelta(seconds=-25))
    elif fault == "forward":  # wall clock 35 s forward at 32 s: dues 40, 50, 60 are in the past at once
        world.run(until=32.0)
        world.step_clock("n1", timedelta(seconds=35))
    elif fault == "crash":  # down across the dues 30..60; back at 62, the key asked at once
        world.run(until=25.0)
        world.crash("n1")
        world.run(until=62.0)
        world.restart("n1")

        async def wake(system: ActorSystem) -> None:
            await system.ref(kind, "k").ask(Peek())

        world.spawn("n1", wake)
    world.run(until=100.0)
    return world, _created(world)


# the expected (due offset, skipped) of each handled Tick, by policy, for the pause, the crash and the forward step;
# fired offsets are checked apart (each fault's late firing comes at its own time)
LATE = {
    "skip": [(10.0, 0), (20.0, 0), (30.0, 3), (70.0, 0), (80.0, 0), (90.0, 0)],
    "fire-all-2": [(10.0, 0), (20.0, 0), (50.0, 2), (60.0, 2), (70.0, 0), (80.0, 0), (90.0, 0)],
    "fire-all-10": [(10.0, 0), (20.0, 0), (30.0, 0), (40.0, 0), (50.0, 0), (60.0, 0), (70.0, 0), (80.0, 0), (90.0, 0)],
    "drop-late-5": [(10.0, 0), (20.0, 0), (60.0, 3), (70.0, 0), (80.0, 0), (90.0, 0)],
    "drop-late-1": [(10.0, 0), (20.0, 0), (70.0, 0), (80.0, 0), (90.0, 0)],
}
POLICIES: dict[str, Any] = {
    "skip": Skip(),
    "fire-all-2": FireAll(limit=2),
    "fire-all-10": FireAll(limit=10),
    "drop-late-5": DropLate(grace=timedelta(seconds=5)),
    "drop-late-1": DropLate(grace=timedelta(seconds=1)),
}
EXTRA: dict[str, Any] = {"fixed-delay": FixedDelay(), "fire-all-3": FireAll(limit=3)}
BAD: dict[str, Any] = {"a string": "skip", "the class": Skip, "an int": 3, "None": None, **EXTRA}


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_pause_on_one_node_delivers_what_the_policy_says(name: str) -> None:
    """Paused 25-62 s across the dues 30-60: each policy delivers exactly its occurrences, the late ones at 62 s."""
    world, created = _one_node(name, "pause")
    rows = _rows(created)
    assert [(d, s) for d, _, s in rows] == LATE[name]
    late = [f for d, f, _ in rows if 30.0 <= d <= 60.0]
    assert all(abs(f - 62.0) < 0.01 for f in late), rows
    assert all(abs(f - d) < 0.01 for d, f, _ in rows if d < 30.0 or d > 60.0), rows
    dropped = world.trace.of("schedule.dropped")
    assert len(dropped) == (1 if name == "drop-late-1" else 0)
    if dropped:
        assert (round((dropped[0].get("due_us") - created) / 1e6, 3), dropped[0].get("skipped")) == (60.0, 4)
    world.close()


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_crash_and_restart_on_one_node_delivers_what_the_policy_says(name: str) -> None:
    """Down 25-62 s, the durable key woken at 62 s: its recovered schedule fires under its persisted policy."""
    world, created = _one_node(name, "crash")
    rows = _rows(created)
    assert [(d, s) for d, _, s in rows] == LATE[name]
    late = [f for d, f, _ in rows if 30.0 <= d <= 60.0]
    assert all(62.0 <= f < 62.5 for f in late), rows
    world.close()


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_clock_forward_on_one_node_delivers_what_the_policy_says(name: str) -> None:
    """Wall clock +35 s at 32 s (wall 67): the dues 40-60 passed at once; fired within a wall re-check (1 s)."""
    world, created = _one_node(name, "forward")
    rows = _rows(created)
    # the due 30 fired on time; the step hides 40, 50, 60: the same shapes as a pause, one grid time later
    expected = {
        "skip": [(10.0, 0), (20.0, 0), (30.0, 0), (40.0, 2), (70.0, 0), (80.0, 0), (90.0, 0), (100.0, 0), (110.0, 0), (120.0, 0), (130.0, 0)],
        "fire-all-2": [(10.0, 0), (20.0, 0), (30.0, 0), (50.0, 1), (60.0, 1)] + [(t, 0) for t in (70.0, 80.0, 90.0, 100.0, 110.0, 120.0, 130.0)],
        "fire-all-10": [(t, 0) for t in (10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0, 110.0, 120.0, 130.0)],
        # noticed at wall 67-68 s: the latest due, 60, is 7-8 s late, past a 5 s grace: dropped as well
        "drop-late-5": [(10.0, 0), (20.0, 0), (30.0, 0)] + [(t, 0) for t in (70.0, 80.0, 90.0, 100.0, 110.0, 120.0, 130.0)],
        "drop-late-1": [(10.0, 0), (20.0, 0), (30.0, 0)] + [(t, 0) for t in (70.0, 80.0, 90.0, 100.0, 110.0, 120.0, 130.0)],
    }[name]
    assert [(d, s) for d, _, s in rows] == expected
    late = [f for d, f, _ in rows if 40.0 <= d <= 60.0]
    assert all(67.0 <= f <= 68.0 for f in late), rows
    world.close()


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_clock_back_on_one_node_never_fires_early_and_skips_nothing(name: str) -> None:
    """Wall clock -25 s at 35 s: every policy waits for the due 40 on the wall clock, fires each due on time, skips none."""
    world, created = _one_node(name, "back")
    rows = _rows(created)
    # true 100 s is wall 75 s after the step: the dues 10..70 all came, each on time on the wall clock
    assert [(d, s) for d, _, s in rows] == [(t, 0) for t in (10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0)]
    assert all(0.0 <= f - d < 1.01 for d, f, _ in rows), rows
    world.close()


def test_fixed_delay_leaves_the_grid_after_a_pause() -> None:
    """FixedDelay: the late due 30 fires at 62 s, then every 10 s from the firing (72, 82, 92), nothing skipped."""
    world, created = _one_node("fixed-delay", "pause")
    rows = _rows(created)
    assert [d for d, _, _ in rows] == [10.0, 20.0, 30.0, 72.0, 82.0, 92.0]
    assert all(s == 0 for _, _, s in rows)
    assert not world.trace.of("schedule.caught_up")
    world.close()


def test_fixed_delay_after_a_crash_resumes_from_the_recovered_firing() -> None:
    """FixedDelay persisted: after the restart the recovered due 30 fires once at ~62 s and the next is 10 s after it."""
    world, created = _one_node("fixed-delay", "crash")
    rows = _rows(created)
    assert [d for d, _, _ in rows][:3] == [10.0, 20.0, 30.0]
    fired_late = rows[2][1]
    assert 62.0 <= fired_late < 62.5
    assert [round(d - fired_late, 3) for d, _, _ in rows[3:]] == [10.0, 20.0, 30.0]
    world.close()


# --- in a cluster: the owner changes -------------------------------------------------------------

NODES = ("n1", "n2", "n3")
CLUSTER = Cluster(seeds=["n1"], heartbeat=0.2, suspect_after=1, dead_after=1)


def _owner_change(policy: str, fault: str, ahead: float = 0.0) -> tuple[sim.World, int, str]:
    """Three nodes; a key owned by n3 armed at 2 s; ``fault`` on n3 at 25 s (crash: it stays down; pause: 25-62 s).

    ``ahead``: the wall clocks of n1 and n2 run that many seconds ahead of n3's, so the next owner
    finds the key's next due already in the past (an owner change the policy has to catch up)."""
    world = sim.World(0)
    for name in NODES:
        offset = timedelta(seconds=ahead if name != "n3" else 0.0)
        world.add_node(name, cluster=CLUSTER, ask_timeout=2.0, write_timeout=1.0, offset=offset)
    world.run(until=2.0)
    system = world.system("n1")
    key = next(k for k in (f"k{i}" for i in range(500)) if system.placement(policy_ticker, k).owner == "n3")
    created: list[int] = []

    async def arm(system: ActorSystem) -> None:
        created.append(await system.ref(policy_ticker, key).ask(Arm(policy)))

    world.spawn("n1", arm)
    world.run(until=25.0)
    if fault == "crash":
        world.crash("n3")
    else:
        world.pause("n3")
        world.run(until=62.0)
        world.resume("n3")
    world.run(until=100.0)
    return world, _created(world), key


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_owner_crash_in_a_cluster_with_a_prompt_takeover_fires_every_due_on_time(name: str) -> None:
    """n3 (the owner) crashes at 25 s; n2 takes over 1.8 s later, before the due 30: under every policy each due
    10-90 is delivered once, on time, nothing skipped (a catch-up policy changes nothing when nothing is late)."""
    world, created, key = _owner_change(name, "crash")
    assert _rows(created) == [(t, t, 0) for t in (10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0)]
    assert [r.node for r in world.trace.of("schedule.fired")] == ["n3", "n3"] + ["n2"] * 7
    world.close()


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_owner_change_to_a_node_37_s_ahead_catches_up_under_the_persisted_policy(name: str) -> None:
    """n3 crashes at 25 s; the next owner's wall clock is 37 s ahead, so the dues 30-60 are past at its takeover:
    it delivers exactly the occurrences the persisted policy says, all at the takeover, then stays on the grid."""
    world, created, key = _owner_change(name, "crash", ahead=37.0)
    fired_on = [r.node for r in world.trace.of("schedule.fired")]
    assert fired_on[:2] == ["n3", "n3"] and "n3" not in fired_on[2:]
    rows = _rows(created)
    takeover = [f for d, f, _ in rows if 30.0 <= d <= 60.0] or [
        round((int(r.get("now_us")) - created) / 1e6, 3) for r in world.trace.of("schedule.dropped")
    ]
    # one firing: the takeover, 1.8 s after the crash (seed 0), on a clock 37 s ahead: the due 60 is 1.803 s late (rule 9's Nack at the takeover adds 1 ms)
    assert takeover == [takeover[0]] * len(takeover) and round(takeover[0], 3) == 61.803, rows
    expected = {
        "skip": [(30.0, 3)],
        "fire-all-2": [(50.0, 2), (60.0, 2)],
        "fire-all-10": [(30.0, 0), (40.0, 0), (50.0, 0), (60.0, 0)],
        "drop-late-5": [(60.0, 3)],
        "drop-late-1": [],  # 1.802 s > 1 s: a ScheduleDropped skipping 30, 40, 50 and 60
    }[name]
    dropped = [(round((int(r.get("due_us")) - created) / 1e6, 3), r.get("skipped")) for r in world.trace.of("schedule.dropped")]
    assert dropped == ([(60.0, 4)] if name == "drop-late-1" else [])
    # on n3's wall clock 100 s true is 100 s after creation; the new owner is 37 s ahead: grid times to ~135 s
    after = [(d, s) for d, _, s in rows if d > 60.0]
    assert [(d, s) for d, _, s in rows] == [(10.0, 0), (20.0, 0), *expected, *after]
    assert [d for d, _ in after] == [70.0 + 10 * i for i in range(len(after))] and after and after[-1][0] >= 130.0
    assert all(s == 0 for _, s in after)
    world.close()


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_owner_pause_in_a_cluster_moves_the_key_and_back_without_a_repeat(name: str) -> None:
    """n3 (the owner) paused 25-62 s: n2 fires 30-50, n3 fires 60-90 after it rejoins; each due once, on time."""
    world, created, key = _owner_change(name, "pause")
    assert _rows(created) == [(t, t, 0) for t in (10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0)]
    assert [r.node for r in world.trace.of("schedule.fired")] == ["n3", "n3", "n2", "n2", "n2", "n3", "n3", "n3", "n3"]
    world.close()


# --- ctx.occurrence and the typed errors ------------------------------------------------------------


def test_occurrence_is_none_while_handling_an_ask_and_set_for_a_scheduled_tick() -> None:
    """ctx.occurrence: None for an ask; for each Tick the schedule's name, its due, its firing time (UTC), skipped 0."""
    world = sim.World(0)
    world.add_node("n1")
    answers: list[Any] = []

    async def script(system: ActorSystem) -> None:
        answers.append(await system.ref(policy_ticker, "k").ask(Arm("skip")))
        answers.append(await system.ref(policy_ticker, "k").ask(Peek()))

    world.spawn("n1", script)
    world.run(until=25.0)
    created, peeked = answers
    assert peeked is None
    assert [o.schedule for _, o in LOG] == ["tick", "tick"]
    assert [to_us(o.due) - created for _, o in LOG] == [10_000_000, 20_000_000]
    assert all(o.fired_at == o.due and o.skipped == 0 and o.due.utcoffset() == timedelta(0) for _, o in LOG)
    world.close()


@pytest.mark.parametrize(
    ("bad", "named"),
    [("a string", "got str 'skip'"), ("the class", "got the class Skip"), ("an int", "got int 3"), ("None", "got NoneType None")],
)
def test_a_non_policy_is_refused_with_a_typed_error(bad: str, named: str) -> None:
    """ctx.schedule(catch_up=<not a policy>) raises InvalidCatchUp naming the schedule and what was given."""
    world = sim.World(0)
    world.add_node("n1")
    errors: list[BaseException] = []

    async def script(system: ActorSystem) -> None:
        try:
            await system.ref(policy_ticker, "k").ask(Arm(bad))
        except Exception as exc:
            errors.append(exc)

    world.spawn("n1", script)
    world.run(until=3.0)
    (error,) = errors  # the body failed on Arm: the asker gets ActorFailed naming the InvalidCatchUp
    assert isinstance(error, ActorFailed) and "failed on Arm: InvalidCatchUp(\"schedule 'tick': catch_up must be" in str(error)
    assert str(error).endswith(f'{named}")'), str(error)
    world.close()


def test_the_policy_is_persisted_and_skip_pages_keep_four_element_rows() -> None:
    """@schedules rows: four elements under Skip (today's bytes), a fifth (version, kind, parameter) otherwise."""
    world = sim.World(0)
    world.add_node("n1")

    async def script(system: ActorSystem) -> None:
        await system.ref(policy_ticker, "a").ask(Arm("skip"))
        await system.ref(policy_ticker, "b").ask(Arm("fire-all-3"))

    world.spawn("n1", script)
    world.run(until=3.0)
    system = world.system("n1")
    (a,) = decode_schedules(system.pages(policy_ticker, "a")["@schedules"])
    (b,) = decode_schedules(system.pages(policy_ticker, "b")["@schedules"])
    assert a.catch_up is None and a.policy() == Skip()
    assert b.catch_up == (1, "fire-all", 3) and b.policy() == FireAll(3)
    import msgspec

    assert len(msgspec.msgpack.decode(system.pages(policy_ticker, "a")["@schedules"])[0]) == 4
    world.close()


def test_checked_policy_raises_invalid_catch_up_and_keeps_a_policy() -> None:
    """The runtime's check: each of the four policies passes as itself, anything else is an InvalidCatchUp (a ValueError)."""
    from casty._core.activation_schedules import checked_policy

    for policy in (Skip(), FireAll(2), DropLate(grace=timedelta(milliseconds=500)), FixedDelay()):
        assert checked_policy("s", policy) is policy
    with pytest.raises(InvalidCatchUp, match=r"^schedule 's': catch_up must be .* got the class FireAll$"):
        checked_policy("s", FireAll)
    assert issubclass(InvalidCatchUp, ValueError)


@dataclass(frozen=True)
class Poke:
    what: str


@dataclass(frozen=True)
class Start(Askable[None]):
    pass


SEEN: list[tuple[str, Occurrence | None]] = []


@actor(initial=0)
async def watcher(ctx: Context[int, Start | Poke]) -> None:
    """Logs ctx.occurrence for each message: a schedule's Poke, a ctx.timer Poke, a told Poke, and the Start ask."""
    async for msg in ctx.inbox:
        if isinstance(msg, Start):
            SEEN.append(("ask", ctx.occurrence))
            await ctx.schedule("every-3", timedelta(seconds=3), timedelta(seconds=3), Poke("schedule"))
            ctx.timer("t", timedelta(seconds=2), timedelta(seconds=2), Poke("timer"))
            msg.reply_to.tell(None)
        else:
            SEEN.append((msg.what, ctx.occurrence))


def test_occurrence_only_for_a_scheduled_message_not_for_a_tell_an_ask_or_a_timer_tick() -> None:
    """ctx.occurrence: an Occurrence while handling the schedule's Poke; None for the ask, a tell and ctx.timer ticks."""
    SEEN.clear()
    world = sim.World(0)
    world.add_node("n1")

    async def script(system: ActorSystem) -> None:
        ref = system.ref(watcher, "w")
        await ref.ask(Start())
        await asyncio.sleep(6.5)
        ref.tell(Poke("tell"))

    world.spawn("n1", script)
    world.run(until=7.0)
    armed = int(world.trace.of("schedule.armed")[0].get("due_us"))
    kinds = [(what, None if o is None else (o.schedule, to_us(o.due) - armed, o.skipped)) for what, o in SEEN]
    assert kinds == [
        ("ask", None),
        ("timer", None),
        ("schedule", ("every-3", 0, 0)),
        ("timer", None),
        ("schedule", ("every-3", 3_000_000, 0)),  # at 6 s, just before the timer's tick of 6 s
        ("timer", None),
        ("tell", None),
    ]
    world.close()


# --- node schedules: misfire= and tz= -------------------------------------------------------------


@dataclass(frozen=True)
class Ping:
    pass


@actor(initial=0)
async def pinged(ctx: Context[int, Ping]) -> None:
    """A node schedule's target: counts its pings (and logs ctx.occurrence, None: a node tick is a tell)."""
    async for _ in ctx.inbox:
        SEEN.append(("node", ctx.occurrence))
        await ctx.state.update(lambda n: n + 1)


def _node_ticks(register: Any, *, pause: bool = True) -> sim.World:
    """One node; ``register(system)`` at t≈0; paused 25-62 s; run to 100 s."""
    world = sim.World(0)
    world.add_node("n1")
    world.spawn("n1", register)
    if pause:
        world.run(until=25.0)
        world.pause("n1")
        world.run(until=62.0)
        world.resume("n1")
    world.run(until=100.0)
    return world


def _told(world: sim.World) -> list[tuple[float, int]]:
    """(tick offset s from the first tick less 10 s, skipped of its caught-up row or 0) of every node_schedule.fired."""
    first = int(world.trace.of("node_schedule.registered")[0].get("due_us")) - 10_000_000
    caught = {int(r.get("tick_us")): int(r.get("skipped")) for r in world.trace.of("node_schedule.caught_up")}
    return [
        (round((int(r.get("tick_us")) - first) / 1e6, 3), caught.get(int(r.get("tick_us")), 0))
        for r in world.trace.of("node_schedule.fired")
    ]


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_node_interval_schedule_misfire_under_a_pause(name: str) -> None:
    """schedule(..., misfire=policy) on a node paused 25-62 s tells exactly the ticks the policy says, in order."""

    async def register(system: ActorSystem) -> None:
        await system.schedule(Ping(), system.ref(pinged, "p"), timedelta(seconds=10), misfire=POLICIES[name])

    world = _node_ticks(register)
    # a caught-up row is keyed by the first tick told (Skip: 30; FireAll(2): 50, told with 60 at the same firing)
    expected = {
        "skip": [(10.0, 0), (20.0, 0), (30.0, 3), (70.0, 0), (80.0, 0), (90.0, 0)],
        "fire-all-2": [(10.0, 0), (20.0, 0), (50.0, 2), (60.0, 0), (70.0, 0), (80.0, 0), (90.0, 0)],
        "fire-all-10": [(t, 0) for t in (10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0)],
        "drop-late-5": [(10.0, 0), (20.0, 0), (60.0, 3), (70.0, 0), (80.0, 0), (90.0, 0)],
        "drop-late-1": [(10.0, 0), (20.0, 0), (70.0, 0), (80.0, 0), (90.0, 0)],
    }[name]
    assert _told(world) == expected
    dropped = world.trace.of("node_schedule.dropped")
    assert [int(r.get("skipped")) for r in dropped] == ([4] if name == "drop-late-1" else [])
    world.close()


def test_node_interval_fixed_delay_leaves_the_grid() -> None:
    """misfire=FixedDelay(): the tick of 30 told at 62 s, the next ones 10 s after each telling (72, 82, 92)."""

    async def register(system: ActorSystem) -> None:
        await system.schedule(Ping(), system.ref(pinged, "p"), timedelta(seconds=10), misfire=FixedDelay())

    world = _node_ticks(register)
    assert [t for t, _ in _told(world)] == [10.0, 20.0, 30.0, 72.0, 82.0, 92.0]
    world.close()


def test_node_cron_fire_all_replays_the_missed_ticks_of_its_grid() -> None:
    """schedule_cron('0/10 * * * * ?', misfire=FireAll(10)) on a node paused 25-62 s tells 30, 40, 50, 60 at 62 s."""

    async def register(system: ActorSystem) -> None:
        await system.schedule_cron(Ping(), system.ref(pinged, "p"), "0/10 * * * * ?", misfire=FireAll(limit=10))

    world = _node_ticks(register)
    fired = world.trace.of("node_schedule.fired")
    epoch = world.epoch_us
    assert [(int(r.get("tick_us")) - epoch) // 1_000_000 for r in fired] == [10, 20, 30, 40, 50, 60, 70, 80, 90]
    assert [round(r.t, 3) for r in fired if 30 <= (int(r.get("tick_us")) - epoch) // 1_000_000 <= 60] == [62.0] * 4
    world.close()


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ("cron-fixed-delay", "schedule_cron('0/10 * * * * ?'): misfire=FixedDelay() needs an interval"),
        ("interval-not-a-policy", "schedule: misfire must be Skip(), FireAll(limit=...), DropLate(grace=...) or FixedDelay(), got str 'all'"),
        ("once-the-class", "schedule_once: misfire must be Skip(), FireAll(limit=...), DropLate(grace=...) or FixedDelay(), got the class Skip"),
    ],
)
def test_node_schedules_refuse_a_bad_misfire_with_invalid_catch_up(call: str, message: str) -> None:
    """A non-policy misfire=, or FixedDelay on a cron grid, raises InvalidCatchUp naming the call and the value."""
    errors: list[BaseException] = []

    async def register(system: ActorSystem) -> None:
        ref = system.ref(pinged, "p")
        try:
            if call == "cron-fixed-delay":
                await system.schedule_cron(Ping(), ref, "0/10 * * * * ?", misfire=FixedDelay())
            elif call == "interval-not-a-policy":
                await system.schedule(Ping(), ref, timedelta(seconds=1), misfire="all")  # type: ignore[arg-type]
            else:
                await system.schedule_once(Ping(), ref, timedelta(seconds=1), misfire=Skip)  # type: ignore[arg-type]
        except Exception as exc:
            errors.append(exc)

    world = _node_ticks(register, pause=False)
    (error,) = errors
    assert isinstance(error, InvalidCatchUp) and str(error).startswith(message), str(error)
    assert not world.trace.of("node_schedule.registered")
    world.close()


def test_schedule_cron_tz_reads_the_expression_in_that_zone_and_names_it_in_the_trace() -> None:
    """schedule_cron('0 30 2 * * ?', tz='Europe/Berlin'): first tick 02:30 Berlin = 01:30 UTC in winter; the row names the zone."""
    from casty._core.cron import InvalidTimeZone

    errors: list[BaseException] = []

    async def register(system: ActorSystem) -> None:
        await system.schedule_cron(Ping(), system.ref(pinged, "p"), "0 30 2 * * ?", tz="Europe/Berlin", reference="b")
        await system.schedule_cron(Ping(), system.ref(pinged, "p"), "0 30 2 * * ?", reference="u")
        try:
            await system.schedule_cron(Ping(), system.ref(pinged, "p"), "0 30 2 * * ?", tz="Mars/Olympus")
        except InvalidTimeZone as exc:
            errors.append(exc)

    world = _node_ticks(register, pause=False)
    rows = {r.get("reference"): r for r in world.trace.of("node_schedule.registered")}
    assert set(rows) == {"b", "u"}
    epoch = world.epoch_us
    assert (int(rows["b"].get("due_us")) - epoch) // 60_000_000 == 90  # 01:30 UTC, the epoch being a midnight UTC
    assert (int(rows["u"].get("due_us")) - epoch) // 60_000_000 == 150  # 02:30 UTC
    assert rows["b"].get("tz") == "Europe/Berlin" and "tz" not in rows["u"].fields
    assert [str(e) for e in errors] == ["unknown time zone 'Mars/Olympus': " + str(errors[0]).split(": ", 1)[1]]
    world.close()


def test_a_row_with_a_policy_of_a_newer_encoding_decodes_and_is_refused_alone() -> None:
    """A fifth element this node cannot read: the page still decodes, that row's policy() raises InvalidCatchUp."""
    import msgspec

    page = msgspec.msgpack.encode([
        ("old", b"\x01", 5, 10),
        ("new", b"\x02", 7, 10, (2, "jitter", 3, 4)),
        ("mine", b"\x03", 9, 10, (1, "drop-late", 1_500_000)),
    ])
    old, new, mine = decode_schedules(page)
    assert old.policy() == Skip() and mine.policy() == DropLate(grace=timedelta(seconds=1.5))
    with pytest.raises(InvalidCatchUp, match=r"expected None or \(version, kind, parameter\), got \(2, 'jitter', 3, 4\)"):
        new.policy()
