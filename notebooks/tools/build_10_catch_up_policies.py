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

Not in this lab (yet): a crash and restart and a change of owner (they are in `tests/test_catch_up_policies.py`),
and node schedules' `misfire=` (the same rules, on `schedule`/`schedule_cron`). Zoned crons across DST are in section 7.
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
132 ... 192 the clock reads twice). **Predict:** which policy has no red X at all? Which one shows a run of late
(orange) marks right after the pause?
""")

code("""
fig = Figure(figsize=(11, 8.5), layout="constrained")
axes = fig.subplots(len(runs), 1, sharex=True)
for ax, (name, entries) in zip(axes, ledgers.items()):
    c = counts(entries)
    ledger_chart(entries, ax=ax, faults=runs[name].trace, title=f"{name}: {c['on-time']} on time, {c['late']} late, {c['caught-up']} caught up, {c['missed']} missed")
fig
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
for ax, (name, entries) in zip(fig.subplots(2, 1), dst_ledgers.items()):
    ledger_chart(entries, ax=ax, title=f"{name}: " + ", ".join(utc(e.due_us) + " UTC" for e in entries))
fig
""")

code("""
spring, fall = dst_ledgers["cron-dst-spring"], dst_ledgers["cron-dst-fall"]
assert [utc(e.due_us) for e in spring] == ["28 Mar 01:30", "30 Mar 00:30", "31 Mar 00:30"]  # no 29 March: the gap day
assert all(e.status == "on-time" for e in spring + fall)
assert [utc(e.due_us) for e in fall if utc(e.due_us).startswith("25 Oct")] == ["25 Oct 00:30"]  # once, the first pass
assert [utc(e.due_us) for e in fall] == ["24 Oct 00:30", "25 Oct 00:30", "26 Oct 01:30", "27 Oct 01:30"]
""")

md("""
**Try it:** give `DropLate` a grace of 10 s, or `FireAll` a limit of 10, and run the cells again. Which lane changes,
and where? Then change the fault plan in `run` (a longer pause, a bigger step) and predict each lane first.
""")

for i, cell in enumerate(cells):
    cell["id"] = f"policy-lab-{i:02d}"  # stable ids: rebuilding gives the same file
nb = nbf.v4.new_notebook()
nb["cells"] = cells
nb["metadata"]["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
nb["metadata"]["language_info"] = {"name": "python"}
nbf.write(nb, "notebooks/10_catch_up_policies.ipynb")
print("wrote notebooks/10_catch_up_policies.ipynb")
