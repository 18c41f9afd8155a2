"""Writes notebooks/05_skew.ipynb from this script (run from the project root), so its source can be reviewed as Python."""
import nbformat as nbf

cells = []
md = lambda s: cells.append(nbf.v4.new_markdown_cell(s.strip()))
code = lambda s: cells.append(nbf.v4.new_code_cell(s.strip()))

md("""
# 05 · Clock skew: whose clock is a due time on?

A persisted schedule stores its next due as a **wall-clock time** (microseconds since the Unix epoch) in the
key's `@schedules` page. Whoever owns the key fires a due when **its own** wall clock reaches it. The schedules
seed says what follows:

> *Different nodes must have synchronized wall clocks for these due times to have consistent meaning.*

In this chapter you take a running schedule (every second) from one owner to another whose clock is right, ahead
or behind; then you step a clock back and forward the way NTP does, and let a clock drift. Every run is a
simulated world on virtual time: seconds of simulated cluster take a fraction of a second here.

Before each run, **write down your prediction**. The `assert` cell after each picture checks the claim
against the run's trace, so what the text says and what the figure shows come from the same rows.

Two views are used throughout:

* `clock_chart(trace)`: each node's wall clock **minus** true time. A flat line at 0 is a good clock, a flat
  line elsewhere a skewed one, a vertical jump a step, a slope drift. Nodes whose clocks agree share one line,
  named for all of them (`n2, n3`, with `(exact)` when they read true time at the end); a line that agrees
  with another for part of the run only is dashed. Every step (a triangle) and every start of drift (a ring)
  is labelled with its node, its amount and its true time (`n1 stepped -90 s at 2.5 min`, `n1 drifts
  +20 000 ppm (+20 ms/s) from 0 min`), also when the node shares its line with others.
* `catchup_chart(trace, schedule=...)`: the schedule's deliveries by true time (top) and by the node's wall
  clock (bottom), over the nominal grid. A dotted line joins the two positions of one delivery when the
  clocks disagree.
""")

code("""
%matplotlib inline
import asyncio
from datetime import timedelta

import sim
from sim import scenarios
from sim.scenarios.cluster import CLUSTER, Arm, cl_ticker  # the cluster scenarios' settings and their ticker actor
from sim.scenarios.single import Every, beater
from sim.viz import catchup_chart, clock_chart

TOLERANCE = 0.010  # s: a delivery within 10 ms of its due counts as on time


def timing(world, key):
    \"\"\"Each delivery of `key`'s schedule: (true time, node, how far from its due in true time, s).\"\"\"
    out = []
    for row in world.trace.of("schedule.fired"):
        if row.get("key") == key:
            due_true = (int(row.get("due_us")) - world.epoch_us) / 1e6  # where a perfect clock reaches the due
            out.append((row.t, row.node, row.t - due_true))
    return out


def kinds(deliveries):
    \"\"\"How many deliveries were on time, early or late (in true time).\"\"\"
    counts = {"on time": 0, "early": 0, "late": 0}
    for _, _, off in deliveries:
        counts["on time" if abs(off) <= TOLERANCE else ("early" if off < 0 else "late")] += 1
    return counts
""")

md("""
## 1. Synchronized clocks: a takeover moves nothing in time

Three nodes, every clock exact. Node `n3` owns a key with a schedule every second; it **crashes at 8 s** and
comes back at 13 s. Its replica `n1` takes the key over: it reads the `@schedules` page (the next due, written
with the last firing) and arms a timer for it.

**Predict:** while `n1` runs the key, are its deliveries on time, early or late? Is any second lost? And when
`n3` takes the key back?
""")

code("""
KEY = scenarios.run("skewed-takeover", seed=0).world.results["key"]  # the key whose replicas are n3, then n1


def takeover(skew_s):
    \"\"\"The skewed-takeover world, with n1's clock `skew_s` seconds off (0: synchronized).\"\"\"
    world = sim.World(seed=0)
    for name in ("n1", "n2", "n3"):
        offset = timedelta(seconds=skew_s) if name == "n1" else timedelta(0)
        world.add_node(name, cluster=CLUSTER, ask_timeout=2.0, write_timeout=1.0, offset=offset)

    async def arm(system):
        await asyncio.sleep(2.0)  # the three nodes have formed the cluster
        await system.ref(cl_ticker, KEY).ask(Arm(1.0))  # a Tick every second

    world.spawn("n2", arm)

    def faults(world):
        yield world.timeout(8)
        world.crash("n3")
        yield world.timeout(5)
        world.restart("n3")

    world.process(faults(world))
    world.run(until=25)
    world.close()
    return world


synced = takeover(0.0)
print("deliveries:", kinds(timing(synced, KEY)))
catchup_chart(synced.trace, key=KEY, title="Synchronized clocks: n3 crashes at 8 s, n1 takes the schedule over")
""")

md("""
The top lane shows the gap: between the crash and the moment `n1` is sure `n3` is dead (about 1.8 s of failure
detection) nobody fires. `n1`'s first firing is **late** and catches up: the seconds that passed meanwhile are
the hollow crosses, skipped once (no burst). When `n3` is back it takes the key again, and its first firing
is late too (its rejoin and handoff take about a second). Every other delivery sits on the grid in both lanes.
""")

code("""
synced_runs = timing(synced, KEY)
late = [(t, node, off) for t, node, off in synced_runs if off > TOLERANCE]
firsts = [d for i, d in enumerate(synced_runs) if i == 0 or d[1] != synced_runs[i - 1][1]]  # first delivery of each owner
assert kinds(synced_runs)["early"] == 0, "with synchronized clocks nothing fires early"
assert [node for _, node, _ in late] == ["n1", "n3"] and all(d in firsts for d in late), late  # late only at a change of owner
assert 1.5 < late[0][0] - 8.0 < 2.0  # n1's first firing: the crash at 8 s plus failure detection
skipped = synced.trace.of("schedule.caught_up", key=KEY)
assert [(r.node, r.get("skipped")) for r in skipped] == [("n1", 1), ("n3", 1)]  # each new owner skips the one second it missed
print(f"late only at the two changes of owner: n1 at {late[0][0]:.2f} s, n3 at {late[1][0]:.2f} s, each skipping 1 s; "
      f"the other {len(synced_runs) - 2} on time")
""")

md("""
## 2. The heir's clock is 3.25 s ahead

The same run, but `n1`'s wall clock reads 3.25 s **more** than true time (a badly synchronized VM).
Look at the clock chart first: `n1` is a flat line at +3.25 s, `n2` and `n3` lie together on 0.

**Predict:** after the takeover, when do the deliveries come in true time? How many seconds does the catch-up skip
this time, compared with section 1?
""")

code("""
ahead = scenarios.run("skewed-takeover", seed=0)
print("checks hold:", ahead.ok, "| deliveries:", kinds(timing(ahead.world, KEY)))
clock_chart(ahead.trace, title="skewed-takeover: n1's wall clock is 3.25 s ahead of true time (n2 and n3 exact, on 0)")
""")

code("""
catchup_chart(ahead.trace, key=KEY, title="skewed-takeover: the heir n1 (clock +3.25 s) fires every due 3.25 s early in true time")
""")

md("""
`n1` fires each due when **its** clock reaches it, which happens 3.25 s before true time does: the dotted lines
lean back. Its catch-up skips more seconds than in section 1, because its clock has already passed 3.25 s more
of the grid. Nothing fires early **on the node's own clock** (bottom lane): the runtime's "never early" is a
promise about the owner's wall clock, and it holds. When `n3` is back and owns the key again, the dues `n1` wrote
are 3.25 s in `n3`'s future: `n3` waits for them (a gap in true time, nothing skipped), then it is on time again.
""")

code("""
ahead_runs = timing(ahead.world, KEY)
early = [(t, node, off) for t, node, off in ahead_runs if off < -TOLERANCE]
assert early and all(node == "n1" and abs(off + 3.25) <= TOLERANCE for _, node, off in early), early  # early by the skew, on n1
assert all(int(r.get("now_us")) >= int(r.get("due_us")) for r in ahead.trace.of("schedule.fired"))  # never early on its own clock
caught_ahead = ahead.trace.of("schedule.caught_up", key=KEY)
assert [(r.node, r.get("skipped")) for r in caught_ahead] == [("n1", 5)]  # synchronized: 1; and n3 skips nothing at the hand-back
print(f"{len(early)} deliveries 3.25 s early, all on n1; n1's catch-up skipped {caught_ahead[0].get('skipped')} (synchronized: 1)")
""")

md("""
## 3. The heir's clock is 3.25 s behind

**Predict:** now `n1`'s clock is 3.25 s **behind**. Early or late? And when `n3` takes the key back, what happens
to the dues `n1` wrote?
""")

code("""
behind = scenarios.run("skewed-takeover-behind", seed=0)
print("checks hold:", behind.ok, "| deliveries:", kinds(timing(behind.world, KEY)))
catchup_chart(behind.trace, key=KEY, title="skewed-takeover-behind: n1 (clock -3.25 s) fires every due 3.25 s late; n3 skips at the hand-back")
""")

code("""
behind_runs = timing(behind.world, KEY)
assert kinds(behind_runs)["early"] == 0  # a slow clock never fires early in true time
on_n1 = [off for _, node, off in behind_runs if node == "n1"]
assert on_n1 and all(off > 3.25 - TOLERANCE for off in on_n1), on_n1  # every n1 delivery at least 3.25 s late
handback = behind.trace.of("schedule.caught_up", key=KEY)
assert [r.node for r in handback] == ["n3"] and handback[0].get("skipped") >= 1  # n3 finds n1's dues in its past
print(f"n1: {len(on_n1)} deliveries, each >= 3.25 s late; n3 skipped {handback[0].get('skipped')} at the hand-back")
""")

md("""
## 4. A clock stepped back, then forward

One node, a schedule every minute. At 150 s NTP steps its clock **back 90 s**; at 360 s **forward 200 s**.

**Predict:** after the step back, does the minute due at wall 3:00 fire at once (its timer was set for that
true time), 90 s later, or twice? After the step forward, how many minutes are delivered, and how many skipped?
""")

code("""
stepped = scenarios.run("clock-step", seed=0)
print("checks hold:", stepped.ok)
clock_chart(stepped.trace, title="clock-step: n1's clock stepped -90 s at 2.5 min, +200 s at 6 min")
""")

code("""
catchup_chart(stepped.trace, schedule="minute")
""")

code("""
fired = stepped.trace.of("schedule.fired")
assert all(int(r.get("now_us")) >= int(r.get("due_us")) for r in fired)  # never early on the node's clock, even after the step back
dues = [int(r.get("due_us")) for r in fired]
assert len(dues) == len(set(dues)), "no minute delivered twice"
(caught,) = stepped.trace.of("schedule.caught_up")
first_after_forward = next(r for r in fired if r.t > 360)
assert caught.get("skipped") == 2 and caught.t == first_after_forward.t  # one late delivery for 3 passed minutes, 2 skipped
print(f"{len(fired)} deliveries, none early, none twice; the forward step: 1 late delivery, {caught.get('skipped')} skipped")
""")

md("""
After the step back the timer wakes at the true time it was set for, reads a wall clock that is still 90 s
short of the due, and **waits again**: the minute comes 90 s late in true time, never early. After the step
forward three minutes have passed at once: one is delivered, late, and two are skipped (the catch-up rule
`next = due + every * (max(0, now - due) // every + 1)`).
""")

md("""
## 5. Drift

A clock that runs fast gains a little every second (NTP corrects this slowly in real life). Here `n1` drifts
**+20 000 ppm** (20 ms per second, far worse than any real crystal, so it shows) from the start, with a schedule
every 10 s.

**Predict:** what does the clock chart look like? In true time, how far apart are two deliveries?
""")

code("""
world = sim.World(seed=0)
world.add_node("n1", drift_ppm=20_000)


async def arm(system):
    await system.ref(beater, "drifting").ask(Every("beat", timedelta(seconds=10), timedelta(seconds=10)))


world.spawn("n1", arm)
world.run(until=300)
world.close()
clock_chart(world.trace, title="n1 drifts +20 000 ppm: its clock gains 20 ms every second")
""")

code("""
catchup_chart(world.trace, schedule="beat", title="Drift: every 10 s on n1's clock is about 9.8 s of true time")
""")

code("""
beats = world.trace.of("schedule.fired")
gaps = [b.t - a.t for a, b in zip(beats, beats[1:])]
assert all(abs(gap - 10 / 1.02) < 0.025 for gap in gaps), gaps  # 10 wall seconds = 9.80 true seconds (timers wake within 20 ms)
assert all(0 <= int(r.get("now_us")) - int(r.get("due_us")) < 25_000 for r in beats)  # on its own clock: never early, < 25 ms late
drift_s = (beats[-1].wall_us - world.epoch_us) / 1e6 - beats[-1].t
print(f"{len(beats)} deliveries {gaps[0]:.3f} s apart in true time; by {beats[-1].t:.0f} s the clock is {drift_s:+.2f} s off")
""")

md("""
## What to take away

* A due is a wall-clock time, and each owner reads **its own** clock: a takeover by a skewed node moves every
  occurrence by the skew (early or late in true time), and changes how much a catch-up skips.
* "Never early" holds on the owner's clock, through steps back; forward steps and skew turn into skipped
  occurrences, once, never a burst.
* So the seed's requirement is real: keep the nodes' clocks synchronized (NTP, slewing rather than stepping),
  or accept occurrences off by the skew at every change of owner.

**Try it:** call `takeover(0.5)` and `takeover(-10.0)` and look at the catch-up chart again. At which skew does
the hand-back to `n3` start skipping dues?
""")

for i, cell in enumerate(cells):
    cell["id"] = f"skew-{i:02d}"  # stable ids: rebuilding gives the same file
nb = nbf.v4.new_notebook()
nb["cells"] = cells
nb["metadata"]["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
nb["metadata"]["language_info"] = {"name": "python"}
nbf.write(nb, "notebooks/05_skew.ipynb")
print("wrote notebooks/05_skew.ipynb")
