"""Writes notebooks/00_tour.ipynb from this script (run from the project root), so its source can be reviewed as Python."""
import nbformat as nbf

cells = []
md = lambda s: cells.append(nbf.v4.new_markdown_cell(s.strip()))
code = lambda s: cells.append(nbf.v4.new_code_cell(s.strip()))

md("""
# casty lab, a tour

casty lab runs **one** virtual-actor runtime, `casty`, in two worlds:

* for real, on asyncio, in one process, or as a cluster of processes over TCP (`python -m casty node`: replicated
  keys, owner epochs, handoff; the README's "A real cluster" starts three on one machine);
* inside a **deterministic simulated world**, where several nodes (the same cluster code, over a simulated network)
  run on *virtual time* with their own wall clocks, disks and network, and where we can crash, pause, partition and
  step clocks at will.

The simulator never models the runtime: it only replaces its *ports* (time, disk, network, randomness) and
records what the runtime reports. So when a figure below shows an occurrence skipped or repeated,
**the real runtime skips or repeats it**.

This tour runs the built-in scenarios about **persisted schedules** on one node and looks at what happened.
Every run takes milliseconds, even the ones that simulate days. The chapters after it (listed at the end) teach each
idea in turn, clusters included.
""")

code("""
%matplotlib inline
from datetime import timedelta

from sim import scenarios
from sim.world import World
from sim.viz import activation_timeline, catchup_chart
from sim.viz.data.reports import day_label

for name, s in scenarios.registered().items():
    print(f"{name:<26} {s.description}")
""")

md("""
## 1. The seed program, inside the world

The schedules seed has a tiny program: an actor schedules a one-shot `Tick` 10 ms ahead and answers the
original ask when the tick arrives. Here it runs on node `n1` of a simulated world. A scenario returns its
**trace**: one row per event, with the true (simulated) time, the node, the node's wall clock, a kind and fields.

**Predict first:** what does the ask answer, and at what time (in virtual time) does the tick fire?
""")

code("""
run = scenarios.run("ticker", seed=0)
print("checks hold:", run.ok)
for row in run.trace:
    print(f"{row.t * 1000:8.3f} ms  {row.node}  {row.kind:<20} {dict(row.fields)}")
""")

code("""
fired = run.trace.of("schedule.fired")
armed = run.trace.of("schedule.armed")[0]
assert run.ok and run.world.results == {"answer": 1}                       # the seed's program prints 1
assert len(fired) == 1 and round((fired[0].t - armed.t) * 1000, 3) == 10.0  # one delivery, 10 ms after it was armed
""")

md("""
## 2. A paused node catches up without a burst

A node with a 10-second schedule is **paused** (think: a long GC pause or a frozen VM) from 35 s to 97 s.
Six due times pass while it cannot run. When it resumes, casty delivers **one** late occurrence and moves the
next due to the first grid time after *now*:

`next = due + every * (max(0, now - due) // every + 1)`

The chart has two lanes: deliveries by **true time** and by the **node's wall clock**. The skipped grid times
are the hollow crosses.

**Predict first:** at the resume (97 s), how many deliveries come at once, and how many due times are skipped?
""")

code("""
run = scenarios.run("pause-catch-up", seed=0)
print("checks hold:", run.ok)
caught = run.trace.of("schedule.caught_up")[0]
print("skipped occurrences:", caught.get("skipped"))
catchup_chart(run.trace, schedule="beat")
""")

code("""
fired = [round(r.t) for r in run.trace.of("schedule.fired")]
assert fired == [10, 20, 30, 97, 100, 110, 120, 130, 140], fired     # one late delivery at 97 s, no burst
assert caught.get("skipped") == 5                                       # 40 s was delivered late; 50..90 s skipped
every_us = 10_000_000
missed = (caught.get("now_us") - caught.get("due_us")) // every_us
assert caught.get("next_us") == caught.get("due_us") + every_us * (missed + 1)   # the formula above: next = 100 s
""")

md("""
## 3. Wall clocks jump

Schedules are wall-clock times. Here the node's clock is **stepped back 90 s**, later **forward 200 s**
(what NTP does to a badly drifted machine). After the backward step nothing fires early: the timer wakes,
sees the wall clock is still before the due time and waits more. After the forward step the due times the
jump hid are skipped, once. The dotted lines join the same delivery in both lanes.

**Predict first:** after the step back at 150 s, when does the next minute (wall clock 3:00) fire in true time? After
the step forward at 360 s, how many deliveries at once?
""")

code("""
run = scenarios.run("clock-step", seed=0)
print("checks hold:", run.ok)
catchup_chart(run.trace, schedule="minute")
""")

code("""
fired = run.trace.of("schedule.fired")
assert all(r.wall_us >= r.get("due_us") for r in fired)                 # never early on the node's clock
assert [round(r.t) for r in fired][:4] == [60, 120, 270, 330]           # wall 3:00 came at 270 s of true time
(caught,) = run.trace.of("schedule.caught_up")
assert round(caught.t) == 360 and caught.get("skipped") == 2           # the jump hid 3 dues: one delivered, 2 skipped
assert sum(1 for r in fired if r.t_ns == caught.t_ns) == 1             # once, not a burst
""")

md("""
## 4. The clock alone never starts a key

A key with a schedule (the key `"dormant"` of the type `beater`: the chart's legend lists keys, not states) is
**released** (deactivated as if idle). Nine due times pass and nobody runs the key:
a stored schedule is data, not an independent activation service. When a message finally arrives, the key
starts and the missed time fires **once**, immediately.

**Predict first:** does the key start by itself at its first due time? When the message comes at 95 s, how many
deliveries?
""")

code("""
run = scenarios.run("clock-does-not-activate", seed=0)
print("checks hold:", run.ok)
activation_timeline(run.trace)
""")

code("""
runs = [(r.kind, round(r.t)) for r in run.trace.of("activation.started", "activation.ended")]
assert runs == [("activation.started", 0), ("activation.ended", 0), ("activation.started", 95)], runs   # nothing in between
fired = [round(r.t) for r in run.trace.of("schedule.fired")]
assert fired[:2] == [95, 100] and run.trace.of("schedule.caught_up")[0].get("skipped") == 8   # 9 dues passed: one delivery
""")

md("""
## 5. Crash and restart on a durable store

`durable="write"` writes every page through to the node's disk (here a SQLite database behind a simulated
disk). The node crashes at 125 s and restarts 5 minutes later. Nobody sends a message: the key's `@active`
marker on disk brings it back, its `@schedules` page re-arms the timer, and the downtime's missed due
times are skipped once.

**Predict first:** does the key come back at the restart with no message? How many deliveries at the restart?
""")

code("""
run = scenarios.run("durable-restart", seed=0)
print("checks hold:", run.ok)
catchup_chart(run.trace, schedule="minute")
""")

code("""
restart = run.trace.of("fault.restart")[0]
back = run.trace.of("activation.started")[-1]
assert round(restart.t) == 425 and 0 <= back.t - restart.t < 0.01 and back.get("recovered")   # back at the restart (the disk read: ~1 ms)
(caught,) = run.trace.of("schedule.caught_up")
assert caught.t_ns == back.t_ns and caught.get("skipped") == 4        # 5 minutes missed: one late delivery, 4 skipped
""")

md("""
## 6. A timer is not a schedule

Three kinds of periodic work tick the same key every 10 s: a persisted **actor schedule** (`ctx.schedule`, stored in
the key's `@schedules` page), an **activation timer** (`ctx.timer`, held by the running activation: the "grain
timer" kind) and a **node schedule** (`system.schedule`, held in the node's memory). The node crashes at 65 s and
restarts 15 s later.

**Predict first:** which of the three tick after the restart?

The picture has one lane per periodic thing, labelled by its kind and the key as `type["key"]`
(`timer  counted["k"] / volatile` is the timer `volatile` of the key `"k"`), each firing marked as the occurrence
ledger classifies it (on time, late, caught up, missed).
""")

code("""
run = scenarios.run("timers-vs-schedules", seed=0)
print("checks hold:", run.ok)
catchup_chart(run.trace, lanes="all", title="n1 crashes at 65 s and restarts at 80 s: only the actor schedule ticks on")
""")

code("""
from collections import Counter
from sim.viz.data.periodic import periodic_lanes

before, after = run.world.results["before"], run.world.results["after"]   # beats counted since the start
print("beats before the crash:", before)
print("beats after the restart:", {source: after[source] - before[source] for source in after})
assert before == {"schedule": 6, "timer": 6, "node": 6}
assert after["timer"] == before["timer"] and after["node"] == before["node"]   # the timer and the node schedule: gone
assert after["schedule"] > before["schedule"]                                  # the persisted schedule goes on
crash = run.trace.of("fault.crash")[0].t_ns
lanes = {lane.label: lane.occurrences for lane in periodic_lanes(run.trace)}   # the chart's lanes, by their labels
for label, occurrences in lanes.items():
    print(f"{label:<46} {sum(o.at_ns <= crash for o in occurrences)} before the crash; after it:", dict(Counter(o.cls for o in occurrences if o.at_ns > crash)))
assert [sum(o.at_ns <= crash for o in occ) for occ in lanes.values()] == [6, 6, 6]
assert [o for o in lanes['timer  counted["k"] / volatile'] if o.at_ns > crash] == []
assert [o for o in lanes['node schedule  n1 / node-beat → counted["k"]'] if o.at_ns > crash] == []
assert [o.cls for o in lanes['schedule  counted["k"] / persisted'] if o.at_ns > crash].count("caught up") == 1  # the downtime's due, late
""")

md("""
A `ctx.merge` ticker (an async generator whose items arrive as messages) belongs to the run too: in the
`timer-vs-schedule` run the key `"both"` of `timed_beater` gets a Beat every 10 s from a persisted schedule and one
from a merge ticker, and counts them apart. The ticker is the body's own stream, not a runtime firing, so the
ledger has no lane for it; the picture reads it from the trace instead: each Beat handled is one write of the
key's `state` page alone, and such a write at an instant with no schedule firing is the ticker's Beat.
""")

code("""
import matplotlib.pyplot as plt

run = scenarios.run("timer-vs-schedule", seed=0)
(ticker_before, schedule_before), (ticker_after, schedule_after) = run.world.results["before"], run.world.results["after"]
fired = [r.t for r in run.trace.of("schedule.fired", key="both")]
handled = Counter(round(r.t) for r in run.trace.of("write.confirmed", key="both") if list(r.get("pages")) == ["state"])
at_fire = Counter(round(t) for t in fired)
ticker = sorted(t for t in handled for _ in range(handled[t] - at_fire[t]))   # the Beats with no firing: the ticker's
crash, restart = run.trace.of("fault.crash")[0].t, run.trace.of("fault.restart")[0].t
fig, ax = plt.subplots(figsize=(11, 1.9), layout="constrained")
ax.axvspan(crash, restart, color="#DDDDDD", lw=0)
ax.text(crash + 1, 1.45, "n1 down", fontsize=9, color="#555555", va="center")
ax.scatter(fired, [0] * len(fired), color="#0072B2", s=30)
ax.scatter(ticker, [1] * len(ticker), color="#009E73", s=30)
ax.set_yticks([0, 1], ['ctx.schedule  timed_beater["both"] (persisted)', 'ctx.merge ticker  timed_beater["both"] (this run)'])
ax.set_ylim(1.7, -0.5)
ax.set_xlim(0, run.trace.rows[-1].t + 2)
ax.set_xlabel("true time since start (s)")
ax.spines[["top", "right"]].set_visible(False)
ax.set_title(f"{len(ticker)} ticker Beats, all before the crash; {len(fired)} schedule firings, {sum(t > crash for t in fired)} after it", loc="left", fontsize=10)
plt.show()
""")

code("""
print(f"merge ticker: {ticker_before} beats before the crash, {ticker_after - ticker_before} after the restart")
print(f"schedule:     {schedule_before} beats before the crash, {schedule_after - schedule_before} after the restart")
assert run.ok and ticker_after == ticker_before and schedule_after > schedule_before
assert len(ticker) == ticker_before and all(t < crash for t in ticker)              # the picture's ticker lane is the count
assert sum(t < crash for t in fired) == schedule_before and any(t > restart for t in fired)
""")

md("""
## 7. The daily report: omitted or repeated?

The seed's advice: record the last completed day in state. **Saving before building** means a crash in
between **omits** that day's report; **building before saving** means a crash in between **repeats** it.
Two nodes run the two variants (node `save` saves first, node `build` builds first); each crashes mid-way on the
third night, at the report of Jan 03.

**Predict first:** which node never builds Jan 03's report, and which builds it twice? The chart marks a report built
with a black star, a day missing between two reports with a hollow red-orange star (*omitted*), a day built again with
*again*; the days are dates, the same on the chart and in the printout.
""")

code("""
run = scenarios.run("daily-report", seed=0)
print("checks hold:", run.ok)
for row in run.trace.of("effect"):  # each built report is one row of the effects ledger (ctx.effect, chapter 07)
    print(f"night {row.t / 86400:3.1f}  {row.node:<6} built {row.get('effect')} ({day_label(row.get('details')['day'])})")
activation_timeline(run.trace)
""")

code("""
built = {node: [day_label(r.get("details")["day"]) for r in run.trace.of("effect", node=node)] for node in ("save", "build")}
crashed = day_label(run.world.results["crash_day"])
assert crashed == "Jan 03"
assert crashed not in built["save"] and built["save"] == ["Jan 01", "Jan 02", "Jan 04", "Jan 05"]   # omitted
assert built["build"].count(crashed) == 2 and len(set(built["build"])) == 5                         # repeated
print("save first: omitted", crashed, "| build first: built", crashed, "twice")
""")

md("""
## 8. Same seed, same trace

Everything random in the world (latencies, losses, clock noise) comes from streams derived from the seed.
Two runs with the same seed produce the same trace, byte for byte, on any machine: that is what makes a
failure reproducible.

**Predict first:** run the same scenario twice with seed 42: equal digests?
""")

code("""
a = scenarios.run("durable-restart", seed=42).trace.digest()
b = scenarios.run("durable-restart", seed=42).trace.digest()
print(a == b, a[:16])
assert a == b   # the same seed, the same trace
""")

md("""
## 9. Your turn

Build a world yourself. Change the pause length, the interval, or add a clock step, and look again.
""")

code("""
import asyncio
from sim.scenarios.single import Every, beater

world = World(seed=1)
world.add_node("n1")

async def arm(system):
    await system.ref(beater, "mine").ask(Every("beat", timedelta(seconds=5), timedelta(seconds=5)))

world.spawn("n1", arm)

def faults(world):
    yield world.timeout(22)
    world.pause("n1")
    yield world.timeout(33)      # try other lengths
    world.resume("n1")

world.process(faults(world))
world.run(until=90)              # seconds of virtual time
world.close()
catchup_chart(world.trace, schedule="beat")
""")

md("""
## Where to go next

The course, one notebook per chapter, each 5 to 15 minutes (`make lab` opens them; `notebooks/CLAIMS.md` says which
cell checks which claim of the seeds):

| chapter | notebook | what it teaches |
|---|---|---|
| 01 | `01_actors.ipynb` | actor types and keys, refs as values, `tell`/`ask`, one mailbox reader, `to_self`, `ctx.ask`, `merge` |
| 02 | `02_lifecycle.ipynb` | the activation lifecycle: first activation, idle, failure and backoff, cancelled ask, leases, `become` |
| 03 | `03_schedules.ipynb` | persisted schedules and catch-up: one-shot, interval, replace, cancel, a key kept alive, the clock does not activate, pause, timers that vanish |
| 04 | `04_ownership.ipynb` | ownership and epochs in a cluster: stepping down, fencing, repeats and misses, durable keys; the explorer |
| 05 | `05_skew.ipynb` | clock skew: synchronized clocks, a skewed takeover, clock steps and drift |
| 06 | `06_node_schedules.ipynb` | node schedules and cron: the API, dead letters, lost ticks, an interval per node, the claim per tick, the winner crashing |
| 07 | `07_effects.ipynb` | external effects: the daily report's two checkpoints, idempotency keys |
| 08 | `08_failure_tests.ipynb` | writing failure tests: the pytest plugin, fault plans and shrinking |
| 09 | `09_swarm.ipynb` | swarm testing: fault mixes, invariants, a planted bug found |
| 10 | `10_catch_up_policies.ipynb` | catch-up policies side by side (Skip, FireAll, DropLate, FixedDelay), cron across daylight saving time |
""")

for i, cell in enumerate(cells):
    cell["id"] = f"tour-{i:02d}"  # stable ids: rebuilding gives the same file
nb = nbf.v4.new_notebook()
nb["cells"] = cells
nb["metadata"]["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
nb["metadata"]["language_info"] = {"name": "python"}
nbf.write(nb, "notebooks/00_tour.ipynb")
print("wrote notebooks/00_tour.ipynb")
