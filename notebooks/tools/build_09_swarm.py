"""Writes notebooks/09_swarm.ipynb from this script (run from the project root), so its source can be reviewed as Python.

Chapter 09 of the course: swarm testing. Fault mixes drawn per seed (sim.faults.FaultMix.draw, generate), the
invariants of the swarm scenario (sim/scenarios/swarm.py), a planted bug in a tiny actor defined in the notebook found
by a short sweep, and sim.sweep over a few swarm seeds. Every claim gets a prediction, a run, a picture and an assert.
A swarm seed costs about a second: the notebook runs three of them.
"""
import nbformat as nbf

cells = []
md = lambda s: cells.append(nbf.v4.new_markdown_cell(s.strip()))
code = lambda s: cells.append(nbf.v4.new_code_cell(s.strip()))

md("""
# 09 · Swarm testing

*About 12 minutes. Chapter 08 tested one actor under crashes; here every seed draws **which** faults it uses.*

A random test with every kind of fault on at once tends to drown a bug: a bug that needs three crashes in a row is
never reached when partitions, clock steps and lost frames keep interrupting the crashes. **Swarm testing** gives each
seed its own *mix*: some seeds are crash storms, some only clock steps, some flapping links. Across many seeds every
combination gets its turn.

This chapter shows the pieces of casty lab's swarm: the mixes (`sim.faults.FaultMix.draw`), the plans drawn from a mix
(`sim.faults.generate`), the invariants the `swarm` scenario checks, a planted bug found by a short sweep of a scenario
written here, and `sim.sweep` over a few seeds of the real swarm.
""")

code('''
%matplotlib inline
import random
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta

from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

import sim
from casty import Askable, Context, actor
from sim.faults import GENERATED_KINDS, FaultMix, FaultPlan, generate, heal_all
from sim.viz import activation_timeline, cluster_graph, frame_at

CRASH, RESTART = "#D55E00", "#009E73"
''')

# ----------------------------------------------------------------------------------------------------------------
md("""
## 1. Each seed draws its own mix

`FaultMix.draw(rng, nodes)` picks, for one seed: which kinds are on (1 to all eleven, crash more often than not), how
many faults per 10 s, how many nodes a crash or pause takes at once, whether a majority may go down, whether the seed
nodes may, how often a restart wipes the disk, and how often a pause, partition or clock step is *long* (past the
failure detector, minutes back in time).

**Predict.** Out of 200 seeds, how many mixes have crashes on? Will any seed have every kind on?
""")

code('''
mixes = {seed: FaultMix.draw(random.Random(seed), 5) for seed in range(200)}
for seed in range(4):
    print(f"seed {seed}: {mixes[seed]}")
with_crash = sum("crash" in m.kinds for m in mixes.values())
print(f"crash on in {with_crash} of 200 mixes; all {len(GENERATED_KINDS)} kinds on in "
      f"{sum(len(m.kinds) == len(GENERATED_KINDS) for m in mixes.values())}; one kind only in "
      f"{sum(len(m.kinds) == 1 for m in mixes.values())}")


def mix_chart(mixes, title):
    """One column per seed, one row per fault kind: a filled cell where the seed's mix has that kind on."""
    seeds = list(mixes)
    fig = Figure(figsize=(11, 3.6), layout="constrained")
    ax = fig.add_subplot()
    for x, seed in enumerate(seeds):
        for y, kind in enumerate(GENERATED_KINDS):
            on = kind in mixes[seed].kinds
            ax.add_patch(Rectangle((x - 0.45, y - 0.4), 0.9, 0.8,
                                   color=(CRASH if kind == "crash" else "#0072B2") if on else "#EEEEEE"))
        ax.text(x, len(GENERATED_KINDS) - 0.2, f"{mixes[seed].rate:g}", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(seeds)), [str(s) for s in seeds], fontsize=8)
    ax.set_yticks(range(len(GENERATED_KINDS)), GENERATED_KINDS, fontsize=8)
    ax.set_xlim(-0.6, len(seeds) - 0.4)
    ax.set_ylim(len(GENERATED_KINDS) + 0.4, -0.6)
    ax.set_xlabel("seed    (number above a column: that mix's faults per 10 s)")
    ax.set_title(title, loc="left")
    return fig


mix_chart({s: mixes[s] for s in range(24)}, "Fault kinds on in the mixes of seeds 0-23 (filled: on; crash in red-orange)")
''')

code('''
assert all(1 <= len(m.kinds) <= len(GENERATED_KINDS) and set(m.kinds) <= set(GENERATED_KINDS) for m in mixes.values())
assert with_crash > 100 and with_crash < 200            # crash more often than not, but not always
assert any(len(m.kinds) == 1 for m in mixes.values())    # some seeds hammer one kind only
assert len({str(m) for m in mixes.values()}) == 200      # and no two seeds share a mix
assert str(FaultMix.draw(random.Random(7), 5)) == str(mixes[7])  # a seed is one mix, every time
''')

# ----------------------------------------------------------------------------------------------------------------
md("""
## 2. A mix becomes a plan

`generate(mix, rng, nodes, duration, start=...)` draws the plan: faults arrive at the mix's rate; a crash takes 1 to
`max_at_once` free nodes and restarts them 0.3-10 s later; every fault is over by `start + duration`. Here are two mixes
of five nodes over the swarm's safety phase, 3 s to 33 s: one crash storm, one with clock steps only. We apply each plan
to five bare nodes and draw what happened to them (`activation_timeline` draws crashes, restarts, pauses and clock steps
even when no key ran).

**Predict.** In the crash storm, can a majority of the five be down at once? (The mix below says `majority=yes`.)
""")

code('''
NODES = ("n1", "n2", "n3", "n4", "n5")
storm = FaultMix(kinds=("crash",), rate=6.0, max_at_once=3, majority=True)
steps = FaultMix(kinds=("clock_step",), rate=3.0, long=0.5)
plans = {mix: generate(mix, random.Random(3), NODES, 30.0, start=3.0) for mix in (storm, steps)}


def applied(plan):
    """Five bare nodes, the plan scheduled and healed at 33 s, run to 35 s."""
    world = sim.World(0)
    for name in NODES:
        world.add_node(name)
    plan.apply(world)
    world.run(until=33.0)
    heal_all(world)
    world.run(until=35.0)
    world.close()
    return world


worlds = {mix: applied(plan) for mix, plan in plans.items()}
for mix, plan in plans.items():
    print(f"{mix}\\n  {len(plan)} faults: {str(plan)[:150]} ...")


def most_down(world):
    """The most nodes down at one instant (crash to restart), from the trace."""
    down, most = set(), 0
    for row in world.trace.rows:
        if row.kind == "fault.crash":
            down.add(row.node)
        elif row.kind == "fault.restart":
            down.discard(row.node)
        most = max(most, len(down))
    return most


print("most nodes down at once in the storm:", most_down(worlds[storm]))
activation_timeline(worlds[storm].trace, title=f"The crash storm's plan on five nodes ({len(plans[storm])} faults)")
''')

code('''
activation_timeline(worlds[steps].trace, title=f"The clock-step mix's plan on five nodes ({len(plans[steps])} faults)")
''')

code('''
for mix, plan in plans.items():
    assert 3.0 <= min(f.at for f in plan.faults) and plan.end <= 33.0
assert {type(f).__name__ for f in plans[storm].faults} <= {"Crash", "Restart"}
assert {type(f).__name__ for f in plans[steps].faults} == {"ClockStep"}
assert len(worlds[storm].trace.of("fault.crash")) == sum(type(f).__name__ == "Crash" for f in plans[storm].faults)
assert most_down(worlds[storm]) >= 3   # a majority of five down at once: the mix allows it
assert len(worlds[steps].trace.of("clock.step")) >= len(plans[steps])
''')

# ----------------------------------------------------------------------------------------------------------------
md("""
## 3. The invariants: what must hold whatever the mix

A swarm seed passes only if every check of the `swarm` scenario holds on its trace. The safety checks hold *during*
the faults (a confirmed write is not lost while a majority of its replicas kept their memory, one writer per epoch,
nothing early, no burst); at 33 s every fault is healed, and the liveness checks then ask what a healed cluster owes
(every operation answered within 2 s, every schedule firing again, every cron tick told exactly once). Each check reads
only the finished trace:
""")

code('''
swarm = sim.scenarios.registered()["swarm"]
for check in swarm.checks:
    print(f"{check.__name__:<28} {(check.__doc__ or '').strip().splitlines()[0][:110]}")
''')

md("""
**Predict.** Swarm seed 0 draws a cluster size, a mix and a plan. Does the runtime pass all twelve checks on it?
The pictures are the cluster graph (`sim.viz.cluster_graph` of `sim.viz.frame_at`) at 12 s, in the middle of the faults,
and at 45 s, in the liveness phase: the members and their status, the cut links (a red dashed line is cut both ways,
a purple dashed arrow one way only, in the arrow's direction), and the owner and replicas of the key whose owner
changed most (`sw_beat[beat-n4]`: nobody holds it at 12 s, one of its three replicas, n3, is down).
""")

code('''
run0 = sim.scenarios.run("swarm", seed=0)
print("nodes:", run0.world.results["nodes"])
print("mix:  ", run0.world.results["mix"])
print("plan: ", len(run0.world.results["plan"]), "faults;", "checks hold:", run0.ok)
during, healed = frame_at(run0.trace, 12.0), frame_at(run0.trace, 45.0)
fig = Figure(figsize=(12, 4.8))
for i, (frame, words) in enumerate(((during, "at 12 s, under the faults"), (healed, "at 45 s, healed"))):
    ax = fig.add_axes((0.01 + 0.5 * i, 0.03, 0.48, 0.82))
    cluster_graph(frame, ax=ax, title=f"swarm seed 0 {words}")
fig
''')

code('''
assert run0.ok and len(swarm.checks) == 12
assert len(run0.world.results["nodes"]) == 6 and len(run0.world.results["plan"]) > 10
assert run0.trace.of("fault.heal") and max(r.t for r in run0.trace.of("fault.heal")) >= 33.0
assert {m.node for m in during.members if m.status == "down"} == {"n3", "n4"}   # the two down discs at 12 s
assert during.cuts == (("n2", "n4"),) and during.owner is None and during.key == "beat-n4"
assert set(during.replicas) == {"n1", "n3", "n5"} and [n for n in during.replicas if n in {"n3", "n4"}] == ["n3"]  # one replica down
assert all(m.status == "up" for m in healed.members) and not healed.cuts         # every fault healed by 45 s
''')

# ----------------------------------------------------------------------------------------------------------------
md("""
## 4. A planted bug, found by a sweep

Now a bug of our own. `hasty_counter` counts `Add`s and **confirms before it saves**: it answers the new count at once
and writes it to the (durable) state only every fifth time. `counter` saves every count, then confirms it. The rule a
client can rely on: *a count, once confirmed, is never confirmed again* (unless a restart wiped the disk that held it).

Our scenario `counter-swarm` (registered with `@sim.scenario`, like the built-in ones) runs one node under a mix drawn
by the seed, a client asking `Add` every 50 ms, and the rule as its check. `sim.sweep` runs it for each seed.

**Predict.** Which seeds will find the bug: all of them, or only those whose mix has a certain kind on?
""")

code('''
@dataclass(frozen=True)
class Add(Askable[int]):
    pass


@actor(initial=0, durable="write")
async def hasty_counter(ctx: Context[int, Add]) -> None:
    """Confirms each count at once, saves only every fifth: the planted bug."""
    count = ctx.state.value
    async for msg in ctx.inbox:
        count += 1
        msg.reply_to.tell(count)
        if count % 5 == 0:
            await ctx.state.set(count)


@actor(initial=0, durable="write")
async def counter(ctx: Context[int, Add]) -> None:
    """Saves each count, then confirms it."""
    async for msg in ctx.inbox:
        await ctx.state.set(ctx.state.value + 1)
        msg.reply_to.tell(ctx.state.value)


HEAL_AT = 20.0
KIND = {"type": hasty_counter}  # which actor the scenario runs (the sweeps below switch it)


def no_count_confirmed_twice(world):
    """A confirmed count is never confirmed again, unless a wiping restart came between the two."""
    wipes = [r.t for r in world.trace.of("fault.restart") if r.get("wiped")]
    seen = {}
    for t, count in world.results["answers"]:
        seen.setdefault((sum(w <= t for w in wipes), count), []).append(t)
    twice = sorted((ts[0], count) for (_, count), ts in seen.items() if len(ts) > 1)
    if twice:
        first = twice[0]
        raise sim.CheckFailed("no_count_confirmed_twice", f"{len(twice)} counts confirmed twice; the first, {first[1]}, "
                              f"at {first[0]:g} s and again at {seen[(sum(w <= first[0] for w in wipes), first[1])][1]:g} s")


@sim.scenario("counter-swarm", "one node, a fault mix per seed, a client adding every 50 ms: no count confirmed twice",
              until=timedelta(seconds=HEAL_AT + 3), checks=(no_count_confirmed_twice,), tags=("fault-plan",))
def counter_swarm(world):
    world.add_node("n1")  # its disk is a MemoryStore: it survives a crash, a wiping restart empties it
    rng = world.rng("counter-swarm", "faults")
    mix = FaultMix.draw(rng, 1)
    plan = world.given_plan or generate(mix, rng, ["n1"], HEAL_AT - 1.0, start=1.0)
    world.results.update(plan=plan, mix=str(mix), answers=[])
    plan.apply(world)
    kind = KIND["type"]

    def client(world):
        while world.now < HEAL_AT + 2:
            yield world.timeout(0.05)
            if world.node("n1").status == "up":
                async def add(system):
                    try:
                        world.results["answers"].append((world.now, await system.ref(kind, "c").ask(Add())))
                    except Exception:
                        pass  # an ask the crash cut off: never confirmed
                world.spawn("n1", add)

    def heal(world):
        yield world.timeout(HEAL_AT)
        heal_all(world)

    world.process(client(world))
    world.process(heal(world))


SEEDS = range(16)
found = sim.sweep("counter-swarm", SEEDS, progress=False)
bad = [r.seed for r in found if not r.ok]
print("seeds that caught hasty_counter:", bad)
for r in found:
    if not r.ok:
        print(f"  seed {r.seed}: {r.failures[0][:110]}\\n    plan: {r.plan[:110]} ...")
        break
''')

md("""
The picture: the counts the client was told around the crash, for the first seed that caught it. Each dot is one
confirmed count; red dots are a count confirmed twice: once before the crash (never saved) and again after the restart,
which read the last count saved.
""")

code('''
def counts_chart(run, title):
    """The counts the client was told around the first crash after which a count was confirmed again (zoomed in)."""
    answers = run.world.results["answers"]
    first = {}
    for t, count in answers:
        first.setdefault(count, t)
    repeats = [(t, c) for t, c in answers if t > first[c]]
    crash = max(r.t for r in run.trace.of("fault.crash") if r.t < repeats[0][0])
    restart = min(r.t for r in run.trace.of("fault.restart") if r.t > crash)
    lo, hi = crash - 0.4, restart + 0.4
    shown = [(t, c) for t, c in answers if lo <= t <= hi]
    fig = Figure(figsize=(11, 3.4), layout="constrained")
    ax = fig.add_subplot()
    once = [(t, c) for t, c in shown if (t, c) not in repeats and not any(c == rc for _, rc in repeats)]
    ax.scatter(*zip(*once), s=30, color="#0072B2", label="a count confirmed once", zorder=3)
    twice = [(t, c) for t, c in shown if any(c == rc for _, rc in repeats)]
    ax.scatter(*zip(*twice), s=60, color="#CC0000", edgecolors="black", label="a count confirmed twice", zorder=4)
    for t, c in twice:   # the counts rise: above-left of a dot and below-right of it are empty, and off the lines
        again = (t, c) in repeats   # after the restart line: its label goes right of the dot, the first one left of it
        ax.annotate(f"{c}" + (" again" if again else ""), (t, c), xytext=(7, -7) if again else (-7, 7),
                    textcoords="offset points", ha="left" if again else "right", va="top" if again else "bottom",
                    fontsize=9, color="#CC0000", fontweight="bold", gid="count.label")
    ax.axvspan(crash, restart, color="#DDDDDD", zorder=0, label="n1 down (crash to restart)")
    ax.axvline(crash, color=CRASH, linewidth=1.6, label="crash")
    ax.axvline(restart, color=RESTART, linewidth=1.6, label="restart")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("true time (s)    one dot per Add answered (every 50 ms)")
    ax.set_ylabel("count confirmed")
    ax.set_title(title, loc="left")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    ax.grid(color="#E4E4E4")
    return fig


caught = sim.scenarios.run("counter-swarm", seed=bad[0])
chart = counts_chart(caught, f"hasty_counter, seed {bad[0]}: the restart reads the last saved count, so a count "
                             "confirmed before the crash is confirmed again")
chart
''')

md("""
Only seeds whose mix has **crash** on can catch it (a pause, a clock step or a lost frame never takes unsaved memory
away), and not every one of those: a crash that comes right after a save, or a restart that wipes the disk, loses
nothing the rule counts. That is swarm testing's point: the crash-heavy seeds find it, the others show it is not a
clock or network bug. The fixed `counter` passes the very same plans (same seeds, same plans: only the actor changed).
""")

code('''
KIND["type"] = counter
held = sim.sweep("counter-swarm", SEEDS, progress=False)
KIND["type"] = hasty_counter
print("seeds that caught counter:", [r.seed for r in held if not r.ok])
''')

code('''
assert bad and all("crash(" in r.plan for r in found if not r.ok)   # only seeds with crashes caught it
assert any("crash(" in r.plan and r.ok for r in found)              # and not every one of those
assert [r.plan for r in held] == [r.plan for r in found]     # the same seeds drew the same plans
assert all(r.ok for r in held)                                # and the fixed counter holds on all of them
times = {}
for t, count in caught.world.results["answers"]:
    times.setdefault(count, []).append(t)
again = [ts[1] for ts in times.values() if len(ts) > 1]      # the second confirmation of each repeated count
assert again and min(again) > caught.trace.of("fault.crash")[0].t   # every repeat comes after a crash
assert (min(c for c, ts in times.items() if len(ts) > 1) - 1) % 5 == 0  # and starts after the last saved count
ax = chart.axes[0]   # the picture: each red label beside its dot, on neither the crash nor the restart line
chart.draw_without_rendering()
lines_px = [ax.transData.transform((line.get_xdata()[0], 0))[0] for line in ax.get_lines()]
for text in (t for t in ax.texts if t.get_gid() == "count.label"):
    box = text.get_window_extent()
    assert not any(box.x0 - 2 <= x <= box.x1 + 2 for x in lines_px), (text.get_text(), box, lines_px)
''')

# ----------------------------------------------------------------------------------------------------------------
md("""
## 5. `sim.sweep` over the real swarm

`sim.sweep(scenario, seeds)` runs a registered scenario with its checks for every seed and returns one `SeedResult` per
seed, in seed order: `ok`, the failures, the trace's digest, the plan on one line, and the commands that reproduce a
seed (`python -m sim run swarm --seed N --check`) and replay its exact plan (`... --plan JSON`). With
`executor=ProcessPoolExecutor(...)` (or a Dask client) the seeds run in parallel; `workers=1` runs them here. From a
terminal, `python -m sim sweep swarm --seeds 0:200 --workers 2` does the same and prints `violations=N` last.

**Predict.** Do seeds 1 and 2 pass every check? Do they run seed 0's plan again?
""")

code('''
swept = sim.sweep("swarm", [1, 2], progress=False)
for r in swept:
    print(f"seed {r.seed}: ok={r.ok} rows={r.rows} digest={r.digest[:12]}  plan: {r.plan[:90]} ...")
print("reproduce:", swept[0].reproduce)
print("replay:   ", swept[0].replay[:100], "...")
''')

code('''
assert [r.seed for r in swept] == [1, 2] and all(r.ok for r in swept)
assert swept[0].reproduce == "python -m sim run swarm --seed 1 --check"
assert sim.FaultPlan.from_json(swept[0].plan_json).to_json() == swept[0].plan_json and str(sim.FaultPlan.from_json(swept[0].plan_json)) == swept[0].plan
assert len({r.plan for r in swept} | {str(run0.world.results["plan"])}) == 3   # three seeds, three plans
''')

md("""
### Your turn

* Change `hasty_counter` to save every count but confirm *before* the save. Does the sweep still find it in 16 seeds?
  (How long does a save take on the simulated disk? How often does a crash land in that window?)
* Sweep `counter-swarm` with `FaultMix(kinds=("crash",), rate=8.0)` in place of `FaultMix.draw`: how many seeds
  catch the bug now? What has the sweep lost?
* In a terminal: `python -m sim sweep swarm --seeds 0:20 --workers 1` (about a second per seed), and `python -m sim
  mutants --list` for the mutants: rules of the runtime broken on purpose, each found (or not) by a sweep.
""")

for i, cell in enumerate(cells):
    cell["id"] = f"swarm-{i:02d}"  # stable ids: rebuilding gives the same file
nb = nbf.v4.new_notebook()
nb["cells"] = cells
nb["metadata"]["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
nb["metadata"]["language_info"] = {"name": "python"}
nbf.write(nb, "notebooks/09_swarm.ipynb")
print("wrote notebooks/09_swarm.ipynb")
