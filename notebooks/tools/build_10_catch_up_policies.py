"""Writes notebooks/10_catch_up_policies.ipynb from this script (run from the project root), so its source can be reviewed as Python."""
import nbformat as nbf

cells = []
md = lambda s: cells.append(nbf.v4.new_markdown_cell(s.strip()))
code = lambda s: cells.append(nbf.v4.new_code_cell(s.strip()))

md("""
# 10 · The policy lab: what a late schedule does, by choice

A persisted schedule (`ctx.schedule`) that could not fire on time (its node was paused, its wall clock jumped)
has to decide what to do with the occurrences it missed. The seeds fix one rule; casty lets you choose it with
`catch_up=`:

* `Skip()` (the default, the seeds' rule): one late delivery, of the oldest overdue due, then the grid resumes at
  the first due after now. Nothing bursts; the skipped count is visible.
* `FireAll(limit=n)`: replay the missed occurrences in order, at most the `n` newest (the older ones are skipped).
* `DropLate(grace=g)`: deliver an occurrence only if it is at most `g` late (Quartz's "do nothing", Kubernetes
  CronJob's starting deadline); a firing with nothing within the grace delivers nothing. The grid is kept.
* `FixedDelay()`: the next due is the firing plus the interval: the schedule leaves its grid.

Here the **same seed and the same fault plan** run under each policy, on one node, with a schedule every 10 s:
the node is **paused** from 35 s to 95 s, its wall clock **steps forward** 35 s at 127 s and **back** 60 s at 157 s.
Each run is classified by the occurrence ledger (`sim.ledger`): every due on the schedule's grid is on time, late,
caught up (and how many it skipped), repeated or missed, with why. Before each claim, predict; the `assert` cell
after it checks the claim on the run's trace.

Sections 8 and 9 run the four policies under a **crash and restart** and a **change of owner** in a cluster,
section 10 the same rules on a node schedule (`misfire=`), and section 7 zoned crons across DST. The full matrix
(4 policies x 5 faults x one node and a cluster, exact values) is `tests/test_catchup_faults.py`.
""")

code("""
%matplotlib inline
from dataclasses import dataclass
from datetime import timedelta

from matplotlib.figure import Figure

from casty import Askable, Context, DropLate, FireAll, FixedDelay, Skip, actor
from sim.ledger import counts, ledger
from sim.viz import ledger_chart, ledger_table
from sim.world import World

EVERY = timedelta(seconds=10)


@dataclass(frozen=True)
class Start(Askable[None]):
    policy: object


@dataclass(frozen=True)
class Tick:
    pass


@actor(initial=0)
async def lab_ticker(ctx: Context[int, Start | Tick]) -> None:
    \"\"\"Arms one schedule, every 10 s from 10 s, under the policy it is given; counts its ticks.\"\"\"
    async for msg in ctx.inbox:
        match msg:
            case Start(policy=policy, reply_to=reply_to):
                await ctx.schedule("tick", EVERY, EVERY, Tick(), catch_up=policy)
                reply_to.tell(None)
            case Tick():
                await ctx.state.update(lambda n: n + 1)


def run(policy, seed=0):
    \"\"\"One node, one schedule under `policy`, the lab's fault plan; returns the finished world.\"\"\"
    world = World(seed)
    world.add_node("n1")

    async def main(system):
        await system.ref(lab_ticker, "k").ask(Start(policy))

    world.spawn("n1", main)

    def faults(world):
        yield world.timeout(35)
        world.pause("n1")  # stop the world for 60 s: dues 40 ... 90 pass while nothing runs
        yield world.timeout(60)
        world.resume("n1")
        yield world.timeout(32)  # t = 127 s
        world.step_clock("n1", timedelta(seconds=35))  # the wall clock jumps over dues 130 ... 160
        yield world.timeout(30)  # t = 157 s
        world.step_clock("n1", timedelta(seconds=-60))  # and back: dues it already passed come round again

    world.process(faults(world))
    world.run(until=timedelta(seconds=240))
    return world


POLICIES = {"Skip()": Skip(), "FireAll(limit=3)": FireAll(limit=3), "DropLate(grace=2 s)": DropLate(grace=timedelta(seconds=2)), "FixedDelay()": FixedDelay()}
runs = {name: run(policy) for name, policy in POLICIES.items()}
ledgers = {name: [e for e in ledger(world.trace) if e.source == "schedule"] for name, world in runs.items()}


def s(world, us):
    \"\"\"A wall time in µs as seconds after the world's start.\"\"\"
    return round((int(us) - world.epoch_us) / 1e6, 1)


def fired(world):
    \"\"\"Each delivery: (true time s, due s).\"\"\"
    return [(round(r.t, 1), s(world, r.get("due_us"))) for r in world.trace.of("schedule.fired")]


for name, entries in ledgers.items():
    print(f"{name:20} {counts(entries)}")
""")

md("""
## 1. The four ledgers side by side

One lane per policy, a mark per occurrence at its due time. The faults are the bands behind the marks, placed on
the same axis (the node's wall clock, where the dues are): hatched grey the pause (dues 40 ... 90 fell in it),
yellow the forward step (the wall times 127 ... 162 the clock jumped over), blue the backward step (the wall times
132 ... 192 the clock reads twice). The axis is seconds since the run's start, as in every chart of the course: the
due at 40 s is drawn at 40, the pause from 35 s at 35. **Predict:** which policy has no red-orange X at all? Which one shows a run of late
(orange) marks right after the pause?
""")

code("""
fig = Figure(figsize=(11, 8.5), layout="constrained")
axes = fig.subplots(len(runs), 1, sharex=True)
for ax, (name, entries) in zip(axes, ledgers.items()):
    c = counts(entries)
    ledger_chart(entries, ax=ax, faults=runs[name].trace, start_us=runs[name].epoch_us, until_s=240, unit="s",
                 title=f"{name}: {c['on-time']} on time, {c['late']} late, {c['caught-up']} caught up, {c['missed']} missed")
fig
""")

code("""
skip_ax = axes[0]  # the chart's own artists: the pause band and the dues where the text says
pause = next(p for p in skip_ax.patches if p.get_gid() == "fault|paused|n1")
dues = sorted(round(float(x)) for c in skip_ax.collections for x, _ in c.get_offsets())
assert round(pause.get_x()) == 35 and round(pause.get_x() + pause.get_width()) == 95
assert dues[:4] == [10, 20, 30, 40] and 40 in dues
assert [ax.get_xlabel() for ax in axes[:-1]] == ["", "", ""] and axes[-1].get_xlabel().startswith("due time on the schedules' wall clocks (s since the run's start")
""")

md("""
## 2. `Skip`: one late delivery, the rest skipped and counted

At the resume (95 s) the oldest overdue due (40 s) is delivered once, 55 s late, and the five after it are
skipped; the grid resumes at 100 s. The forward step does the same: due 130 delivered, 3 skipped.
""")

code("""
skip = runs["Skip()"]
assert fired(skip)[3:5] == [(95.0, 40.0), (100.0, 100.0)]
assert [(s(skip, r.get("due_us")), r.get("skipped")) for r in skip.trace.of("schedule.caught_up")] == [(40.0, 5), (130.0, 3)]
assert counts(ledgers["Skip()"])["missed"] == 8
""")

md("""
## 3. `FireAll(limit=3)`: the three newest, in order, at once

At the resume the three newest overdue dues (70, 80, 90 s) are delivered in order at the same instant; the three
older (40, 50, 60 s) are beyond the limit and missed. A burst, bounded, by choice.
""")

code("""
fire_all = runs["FireAll(limit=3)"]
assert [f for f in fired(fire_all) if f[0] == 95.0] == [(95.0, 70.0), (95.0, 80.0), (95.0, 90.0)]
missed = [s(fire_all, e.due_us) for e in ledgers["FireAll(limit=3)"] if e.status == "missed"]
assert missed == [40.0, 50.0, 60.0, 130.0]
assert all(e.why.startswith("skipped by the catch-up of due") for e in ledgers["FireAll(limit=3)"] if e.status == "missed")
""")

md("""
## 4. `DropLate(grace=2 s)`: too late is not delivered, the grid is kept

At the resume every overdue due is more than 2 s late: nothing is delivered (a `schedule.dropped` row says which,
six dues), and 100 s fires on time. After the forward step the newest due (160 s) is exactly 2 s late: delivered.
""")

code("""
drop = runs["DropLate(grace=2 s)"]
(dropped,) = drop.trace.of("schedule.dropped")
assert (round(dropped.t, 1), s(drop, dropped.get("due_us")), dropped.get("skipped"), s(drop, dropped.get("next_us"))) == (95.0, 90.0, 6, 100.0)
assert not [f for f in fired(drop) if f[0] == 95.0]
assert (100.0, 100.0) in fired(drop) and (127.0, 160.0) in fired(drop)
assert [e.why.split(" on ")[0] for e in ledgers["DropLate(grace=2 s)"] if e.status == "missed"][:6] == ["dropped late by its DropLate policy"] * 6
""")

md("""
## 5. `FixedDelay`: off the grid, nothing missed

The resume delivers 40 s late once and the next due is the firing plus 10 s (105 s): the schedule now ticks at
105, 115, ... The ledger starts a new grid there, so no occurrence is missed: the missed ones never became due.
""")

code("""
fixed = runs["FixedDelay()"]
assert fired(fixed)[3:6] == [(95.0, 40.0), (105.0, 105.0), (115.0, 115.0)]
assert counts(ledgers["FixedDelay()"])["missed"] == 0
assert not fixed.trace.of("schedule.caught_up")
""")

md("""
## 6. A clock stepped back: no policy fires early or twice

After the backward step (157 s) the wall clock shows times it already passed. Each policy waits for its next due
on the wall clock: no delivery is early on its node's clock, and no due is delivered twice.
""")

code("""
for name, world in runs.items():
    rows = world.trace.of("schedule.fired")
    assert all(int(r.get("now_us")) >= int(r.get("due_us")) for r in rows), name
    assert counts(ledgers[name])["repeated"] == 0, name
ledger_table(ledgers["DropLate(grace=2 s)"])[:8]
""")

md("""
## 7. Daylight saving time: a daily 02:30 job in Europe/Berlin

A node cron `30 2 * * *` with `tz="Europe/Berlin"` (scenarios `cron-dst-spring` and `cron-dst-fall`). On
29 March 2026 the clocks go from 02:00 to 03:00: 02:30 does not exist that day, and by casty's written rule the job
has **no occurrence** then (nothing is missed: there is nothing due). On 25 October 02:00-03:00 happens twice: the
job fires **once**, at the first pass (02:30 CEST = 00:30 UTC), not again an hour later. **Predict:** how many
occurrences does each ledger have, and at what UTC times?
""")

code("""
from datetime import datetime, timezone

from sim import scenarios


def utc(us):
    return datetime.fromtimestamp(int(us) / 1e6, tz=timezone.utc).strftime("%d %b %H:%M")


dst = {name: scenarios.run(name, 0) for name in ("cron-dst-spring", "cron-dst-fall")}
dst_ledgers = {name: [e for e in ledger(r.trace) if e.due_us is not None] for name, r in dst.items()}
fig = Figure(figsize=(11, 3.6), layout="constrained")
from sim.viz.data.ledger import Fault

# the spring gap day, 29 March (Berlin midnight to midnight), drawn as a band: the cron has no occurrence there
gap_day = Fault("dst gap", "29 Mar", int(datetime(2026, 3, 28, 23, tzinfo=timezone.utc).timestamp() * 1e6), int(datetime(2026, 3, 29, 22, tzinfo=timezone.utc).timestamp() * 1e6))
for ax, (name, entries) in zip(fig.subplots(2, 1), dst_ledgers.items()):
    ledger_chart(entries, ax=ax, title=f"{name}: " + ", ".join(utc(e.due_us) + " UTC" for e in entries), faults=[gap_day] if "spring" in name else [])
fig
""")

code("""
spring, fall = dst_ledgers["cron-dst-spring"], dst_ledgers["cron-dst-fall"]
assert [utc(e.due_us) for e in spring] == ["28 Mar 01:30", "30 Mar 00:30", "31 Mar 00:30"]  # no 29 March: the gap day
assert not [e for e in spring if gap_day.start_us <= e.due_us < gap_day.end_us]  # the band (Berlin's 29 March) holds no mark
assert all(e.status == "on-time" for e in spring + fall)
assert [utc(e.due_us) for e in fall if utc(e.due_us).startswith("25 Oct")] == ["25 Oct 00:30"]  # once, the first pass
assert [utc(e.due_us) for e in fall] == ["24 Oct 00:30", "25 Oct 00:30", "26 Oct 01:30", "27 Oct 01:30"]
""")

md("""
## 8. A crash and a restart: the persisted policy decides at recovery

The same four policies on a **durable** key (its `@schedules` page is on the node's disk). The node **crashes** at
35 s and **restarts** at 95 s, the key asked at once: the recovered schedule finds the dues 40 ... 90 in the past
and fires under the policy it was written with. **Predict:** which policy delivers three ticks at the restart, which
none, and which one's later dues stop being multiples of 10?
""")

code("""
@dataclass(frozen=True)
class Arm(Askable[None]):
    policy: str  # a name in POLICIES ("": only wake the key); a policy value does not cross the wire as a message field


@actor(initial=0, durable="write")
async def lab_durable(ctx: Context[int, Arm | Tick]) -> None:
    \"\"\"Arms one schedule, every 10 s from 10 s, under the named policy; its pages go through to the disk.\"\"\"
    async for msg in ctx.inbox:
        match msg:
            case Arm(policy=policy, reply_to=reply_to):
                if policy:
                    await ctx.schedule("tick", EVERY, EVERY, Tick(), catch_up=POLICIES[policy])
                reply_to.tell(None)
            case Tick():
                await ctx.state.update(lambda n: n + 1)


def run_crash(policy, seed=0):
    \"\"\"One node, the durable key under `policy`; crashed at 35 s, restarted at 95 s and the key asked at once.\"\"\"
    world = World(seed)
    world.add_node("n1")

    async def arm(system, name):
        await system.ref(lab_durable, "k").ask(Arm(name))

    world.spawn("n1", arm, policy)
    world.run(until=35.0)
    world.crash("n1")
    world.run(until=95.0)
    world.restart("n1")
    world.spawn("n1", arm, "")
    world.run(until=140.0)
    return world


def lanes(runs, source, title):
    \"\"\"The four ledgers of `runs` (one lane each, the faults behind the marks) and the ledgers themselves.\"\"\"
    found = {name: [e for e in ledger(w.trace) if e.source == source] for name, w in runs.items()}
    fig = Figure(figsize=(11, 8.5), layout="constrained")
    until = max([w.now for w in runs.values()] + [s(runs[name], e.due_us) for name, entries in found.items() for e in entries])
    for ax, (name, entries) in zip(fig.subplots(len(runs), 1, sharex=True), found.items()):  # one axis, in s since the run's start
        c = counts(entries)
        ledger_chart(entries, ax=ax, faults=runs[name].trace, start_us=runs[name].epoch_us, until_s=until, unit="s",
                     title=f"{title} · {name}: {c['on-time']} on time, {c['late']} late, {c['caught-up']} caught up, {c['missed']} missed")
    return fig, found


def shape(world, entries):
    \"\"\"Each ledger entry as (due s after the start, status, skipped).\"\"\"
    return [(s(world, e.due_us), e.status, e.skipped) for e in entries]


crashed = {name: run_crash(name) for name in POLICIES}
fig, crash_ledgers = lanes(crashed, "schedule", "crash 35 s, restart 95 s")
fig
""")

code("""
on = lambda *dues: [(float(d), "on-time", 0) for d in dues]
missed = lambda *dues: [(float(d), "missed", 0) for d in dues]
expected_crash = {
    "Skip()": on(10, 20, 30) + [(40.0, "caught-up", 5)] + missed(50, 60, 70, 80, 90) + on(100, 110, 120, 130),
    "FireAll(limit=3)": on(10, 20, 30) + missed(40, 50, 60) + [(70.0, "caught-up", 3), (80.0, "late", 0), (90.0, "late", 0)] + on(100, 110, 120, 130),
    "DropLate(grace=2 s)": on(10, 20, 30) + missed(40, 50, 60, 70, 80, 90) + on(100, 110, 120, 130),  # 90 is 5 s late
    "FixedDelay()": on(10, 20, 30) + [(40.0, "late", 0)] + on(105, 115, 125, 135),  # off the grid from the restart
}
for name, world in crashed.items():
    assert shape(world, crash_ledgers[name]) == expected_crash[name], name
    assert {r.node for r in world.trace.of("schedule.fired")} == {"n1"}
assert {e.why.split(" on ")[0] for e in crash_ledgers["DropLate(grace=2 s)"] if e.status == "missed"} == {"dropped late by its DropLate policy"}
""")

md("""
## 9. A change of owner: the next owner catches up under the persisted policy

Three nodes; the key's owner, n3, **crashes** at 27 s for good. n1 takes the key 1.8 s later, but n1's wall clock
runs **37 s ahead** of n3's: at the takeover the dues 32 ... 62 (on n3's grid) are already past on n1's clock. The
policy travels with the key's `@schedules` page. The pale red-orange band is n3's down time read on n3's clock (it stays down to
the end); the dues after 62 s are n1's, on n1's clock. **Predict:** under `DropLate(grace=2 s)`, is the newest due
(62 s, 3.8 s late on n1's clock) delivered? Which lane leaves the grid?

(`FixedDelay`'s lane has one more late mark near the end: at 88.8 s true n3 is removed from the ring, the ring
handoff ends n1's run and n1 acquires the key again 0.5 s later; the next due is 10 s after that late firing.)
""")

code("""
from casty import Cluster

CLUSTER = Cluster(seeds=["n1"], heartbeat=0.2, suspect_after=1, dead_after=1)


def run_owner(policy, seed=0):
    \"\"\"Three nodes (n1, n2 37 s ahead of n3); a key owned by n3 armed at 2 s under `policy`; n3 crashes at 27 s.\"\"\"
    world = World(seed)
    for name in ("n1", "n2", "n3"):
        world.add_node(name, cluster=CLUSTER, ask_timeout=2.0, write_timeout=1.0, offset=timedelta(seconds=0 if name == "n3" else 37))
    world.run(until=2.0)
    placement = world.system("n1").placement
    key = next(k for k in (f"k{i}" for i in range(500)) if placement(lab_durable, k).owner == "n3")

    async def arm(system):
        await system.ref(lab_durable, key).ask(Arm(policy))

    world.spawn("n1", arm)
    world.run(until=27.0)
    world.crash("n3")
    world.run(until=102.0)
    return world


moved = {name: run_owner(name) for name in POLICIES}
fig, owner_ledgers = lanes(moved, "schedule", "n3 crashes at 27 s, n1 (37 s ahead) takes over")
fig
""")

code("""
expected = {
    "Skip()": on(12, 22) + [(32.0, "caught-up", 3)] + missed(42, 52, 62) + on(72, 82, 92, 102, 112, 122, 132),
    "FireAll(limit=3)": on(12, 22) + missed(32) + [(42.0, "caught-up", 1), (52.0, "late", 0), (62.0, "late", 0)] + on(72, 82, 92, 102, 112, 122, 132),
    "DropLate(grace=2 s)": on(12, 22) + missed(32, 42, 52, 62) + on(72, 82, 92, 102, 112, 122, 132),  # 62 is 3.8 s late
}
for name, want in expected.items():
    assert shape(moved[name], owner_ledgers[name]) == want, name
fixed = shape(moved["FixedDelay()"], owner_ledgers["FixedDelay()"])
assert fixed[:4] == on(12, 22) + [(32.0, "late", 0), (75.8, "on-time", 0)]  # the takeover at 65.8 s on n1's clock, +10 s
assert fixed[-2:] == [(125.8, "late", 0), (136.3, "on-time", 0)]  # re-acquired 0.5 s late after the ring handoff: +10 s from there
assert counts(owner_ledgers["FixedDelay()"])["missed"] == 0
for name, world in moved.items():
    nodes = [r.node for r in world.trace.of("schedule.fired")]
    assert nodes[:2] == ["n3", "n3"] and set(nodes[2:]) == {"n1"}, name
""")

md("""
## 10. Node schedules: the same rules as `misfire=`

A node schedule (`system.schedule(message, ref, interval, misfire=...)`) is held by its node, not persisted, and
takes the same four policies. Here a 10 s node schedule ticks a key while its node is **paused** from 35 s to 95 s.
**Predict:** do the four lanes look like section 8's?
""")

code("""
@actor(initial=0)
async def lab_target(ctx: Context[int, Tick]) -> None:
    \"\"\"Counts the ticks a node schedule tells it.\"\"\"
    async for _ in ctx.inbox:
        await ctx.state.update(lambda n: n + 1)


def run_node(policy, seed=0):
    \"\"\"One node; a node schedule every 10 s under `misfire=policy`; the node paused from 35 s to 95 s.\"\"\"
    world = World(seed)
    world.add_node("n1")

    async def main(system):
        await system.schedule(Tick(), system.ref(lab_target, "k"), EVERY, reference="beat", misfire=policy)

    world.spawn("n1", main)
    world.run(until=35.0)
    world.pause("n1")
    world.run(until=95.0)
    world.resume("n1")
    world.run(until=140.0)
    return world


ticked = {name: run_node(policy) for name, policy in POLICIES.items()}
fig, node_ledgers = lanes(ticked, "node-schedule", "node schedule, paused 35-95 s")
fig
""")

code("""
for name, world in ticked.items():
    assert shape(world, node_ledgers[name]) == expected_crash[name], name  # the same shapes as the crash's
assert {e.why.split(" on ")[0] for e in node_ledgers["DropLate(grace=2 s)"] if e.status == "missed"} == {"dropped late by its DropLate policy"}
assert node_ledgers["Skip()"][3].why == "late by 55.000s, skipped the next 5"
assert node_ledgers["FireAll(limit=3)"][6].why == "late by 25.000s, skipped the 3 before it"
""")

md("""
**Try it:** give `DropLate` a grace of 10 s, or `FireAll` a limit of 10, and run the cells again. Which lane changes,
and where? Then change the fault plan in `run` (a longer pause, a bigger step) and predict each lane first.
""")

md("""
## 11. Every kind in one run, one lane each

The scenario `catch-up-policies` runs five persisted schedules (Skip, FireAll(3), DropLate(1 s), DropLate(5 s),
FixedDelay) and two node schedules (`misfire=FireAll(limit=2)`, an interval and a cron) in **one** run, on one node
**paused** from 25 s to 62 s. `catchup_chart(trace, lanes="all")` draws every periodic thing of a run as a lane
(schedules and timers by key, then node schedules, then cron ticks), each occurrence marked by the ledger's class,
along true time. A lane's label says its kind, then the key as `type["key"]`: `schedule  policy_key["skip"] / tick`
is the schedule `tick` of the key `skip`. **Predict:** at the resume (62 s), which lanes fire more than once, and which not at all?
""")

code("""
from sim import scenarios
from sim.viz import catchup_chart
from sim.viz.data.periodic import periodic_lanes

together = scenarios.run("catch-up-policies", 0)
assert together.ok, together.failures
catchup_chart(together.trace, lanes="all", title="catch-up-policies: five schedules and two node schedules, n1 paused 25-62 s")
""")

code("""
by_label = {lane.label: [o.cls for o in lane.occurrences if o.firings_ns and 60e9 <= o.at_ns <= 63e9] for lane in periodic_lanes(together.trace)}
at_resume = {label.split("  ")[1]: classes for label, classes in by_label.items()}
assert at_resume['policy_key["skip"] / tick'] == ["caught up"]  # one late delivery, three skipped
assert at_resume['policy_key["fire-all-3"] / tick'] == ["caught up", "late", "late"]  # the 3 newest, the oldest skipped
assert at_resume['policy_key["drop-late-1"] / tick'] == []  # nothing within 1 s of its due: nothing delivered
assert at_resume['policy_key["fixed-delay"] / tick'] == ["late"]  # one late, then a new grid from the firing
assert sorted(len(c) for label, c in at_resume.items() if label.startswith("n1 /")) == [2, 2]  # FireAll(limit=2) on both node schedules
""")

md("""
**Try it:** add `internal=True`; in a cluster run with a cron (`scenarios.run("cron-single-fire", 0)`) the runtime's
own claim keys appear as grey lanes after the program's. They are hidden by default: they are bookkeeping, not
schedules you wrote.
""")

for i, cell in enumerate(cells):
    cell["id"] = f"policy-lab-{i:02d}"  # stable ids: rebuilding gives the same file
nb = nbf.v4.new_notebook()
nb["cells"] = cells
nb["metadata"]["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
nb["metadata"]["language_info"] = {"name": "python"}
nbf.write(nb, "notebooks/10_catch_up_policies.ipynb")
print("wrote notebooks/10_catch_up_policies.ipynb")
