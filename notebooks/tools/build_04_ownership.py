"""Writes notebooks/04_ownership.ipynb from this script (run from the project root), so its source can be reviewed as Python."""
import nbformat as nbf

cells = []
md = lambda s: cells.append(nbf.v4.new_markdown_cell(s.strip()))
code = lambda s: cells.append(nbf.v4.new_code_cell(s.strip()))

md("""
# Cluster lab: who owns a key, and what a failure does to it

Three casty nodes, `n1`, `n2` and `n3`, run in the simulated world. Each key of an actor type (say `cl_ticker["t3"]`)
lives on **one node at a time**, its **owner**. Its state is also kept by **3 replicas** (here every node is a replica
of every key), and a write counts only when a **quorum** (2 of the 3) has accepted it.

Four words carry this lab:

* **Epoch.** Before a node may run a key, it asks the replicas for a new **owner epoch**, a pair `(round, node)`:
  it sends `Prepare`, and each replica that has promised nothing newer answers `Promise` with the newest state it holds.
  With a quorum of promises the node is the owner; it starts the key from the newest state it was given
  (`found v3`: version 3 of the key's state). Each node life has a number, so `(2, n1#1)` is round 2 won by `n1`
  in its first life (`n1#2` would be `n1` after a restart).
* **Fencing.** Every write carries the owner's epoch. A replica that has promised a *newer* epoch refuses it
  (`Nack`): the write is **fenced**. So an old owner that does not know it was replaced cannot overwrite the new owner.
* **Schedule occurrence.** A persisted schedule stores its next due time in the key's `@schedules` page, replicated like
  the state. Firing an occurrence means: tell the actor its message, and write the *next* due time. Whether that write
  reached a quorum before a crash decides what the next owner does: fire the occurrence **again** (a repeat) or not at
  all (if the message was never handled, the occurrence is **lost**).
* **Durable.** Replicas keep pages in memory. If every replica loses its memory at once, a plain key is gone; a
  `durable` type also writes every page to a store outside the nodes, and comes back from it.

Every run below is a real casty cluster on virtual time: the runtime is not modelled, only its clock, network and
disk are simulated. Same seed, same run.

Two views read the run's trace:

* the **ownership chart** of one key: one lane per node, a coloured bar while the node holds the key's epoch (hatched
  when it is *stale*: a newer epoch exists), confirmed writes as ticks above it (black: state, blue: next due), fenced
  writes as red X's, schedule firings as dots under it (orange diamond: the same due fired again), faults on the lanes;
* the **space-time diagram** of a few milliseconds: one vertical line per node, time running down, one arrow per
  message from when it was sent to when it arrived (purple: epoch, blue: writes, red: refusals, green: handoff, orange:
  client calls, grey: heartbeats; dashed: answers), and what each node did at that moment.
""")

code("""
%matplotlib inline
import time

from sim import scenarios
from sim.viz import ownership_chart, spacetime_diagram

LAB = ["stale-owner-fenced", "ownership-repeat", "ownership-miss", "all-replicas-lost"]
for name in LAB:
    print(f"{name:<20} {scenarios.registered()[name].description}")

runs = {}
started = time.perf_counter()
for name in LAB:
    runs[name] = scenarios.run(name, seed=0)
    print(f"{name:<20} checks hold: {runs[name].ok}")
print(f"4 simulated runs in {time.perf_counter() - started:.1f} s of real time")
""")

md("""
## 1. A stale owner is fenced

`n3` owns the key and runs its schedule (every 200 ms). At 3 s the network splits `n3` from `n1` and `n2`.

* `n3` does not know it is alone: it keeps firing, but its writes cannot reach a quorum (hollow red circles: *no
  quorum*), so none of them counts.
* `n1` and `n2` stop hearing `n3`, declare it dead, and `n1` wins epoch `(2, n1#1)` from the two replicas it can reach.
  It starts from the newest confirmed version (`found v6`) and goes on counting.
* From that moment `n3`'s epoch is **stale** (hatched). When the network heals, `n3`'s next writes reach replicas that
  promised epoch 2: they are refused (**fenced**, red X's), and `n3`'s activation ends as *lost*.
* Later, `n3` is the key's owner on the ring again and wins epoch `(3, n3#1)`, starting from `n1`'s count, not its own.

The orange diamonds are due times fired twice: `n3` fired them during the split (with no effect: their writes never
counted) and `n1` fired them again.
""")

code("""
run = runs["stale-owner-fenced"]
key = run.world.results["key"]
print("count read on the majority side during the split:", run.world.results["majority"])
print("count read from n3 after the heal:              ", run.world.results["final"])
ownership_chart(run.trace, key=key)
""")

md("""
The moment `n1` takes over, message by message: `n1` sends `Prepare` to both replicas, but the one to `n3` is cut by
the partition (red X). `n2` answers `Promise`; one promise plus `n1`'s own replica is a quorum, so `n1` holds epoch 2,
activates the key from the replicas (*recovered*) and writes with `Write`/`Ack`.
""")

code("""
spacetime_diagram(run.trace)   # by default: the first change of owner
""")

md("""
And why a write is fenced: just after the heal, `n3` (still believing it is the owner) fires and sends `Write` with
epoch 1. Both replicas promised epoch 2, so both answer `Nack`: the write is refused and `n3` learns it lost the key.
""")

code("""
spacetime_diagram(run.trace, start=7.2055, duration=0.0045)
""")

md("""
### Scrub it, then break it yourself

The **explorer** replays the same run frame by frame: press play or drag the slider (it draws when you let go). At
each time `t` it shows the **cluster graph** (green: up, orange: paused, grey: down; a red dashed line is a cut link;
the thick ring is the key's owner; under each node, what the others believe about it), the **events** of that step in
words, and the ownership chart **up to t** (the future is veiled).

Then pick a node and press a fault button: the explorer **forks** the run, the same seed with exactly one more fault
at `t`, and shows the fork beside the original. Predict first: if you pause `n3` at 2.5 s for 2 s, who owns the key
at 5 s? (In a page exported without a kernel, you see a few pre-rendered frames instead.)
""")

code("""
from sim.viz import explorer

lab = explorer(runs["stale-owner-fenced"])
lab
""")

code("""
# The explorer reads the trace: check what the graph shows at 5 s against the trace's own rows.
run = runs["stale-owner-fenced"]
split = lab.frame(5.0)
newest = [r for r in run.trace.of("epoch.acquired") if r.t <= 5.0][-1]
assert split.owner == newest.node == "n1", split.owner            # the majority side took the key over
assert split.cuts == (("n1", "n3"), ("n2", "n3"), ("n3", "n1"), ("n3", "n2")), split.cuts   # n3 is cut off both ways
assert split.member("n3").verdicts == (("n1", "dead"), ("n2", "dead"))   # and the others have declared it dead
assert split.member("n3").status == "up"                           # while n3 itself is running all along
print("at 5 s:", split.owner, "owns", split.key, "under epoch", split.epoch, "| cut links:", len(split.cuts))
""")

md("""
## 2. An occurrence repeats

The owner `n3` fires an occurrence of a 5-second schedule, and crashes right after. Just before, its outgoing messages
were cut, so the write of the **next due time** never reached a replica: the replicas still say *this occurrence is
due*. `n2` takes the key over (after about 1.8 s: the time to declare `n3` dead) and, reading the replicas, fires the
same due time **again** (orange diamond, the dashed arrow joins it to the first firing).

This is **at-least-once** delivery across owners: the only way to never repeat would be to write the next due before
telling the actor, and then a crash in between loses the occurrence instead. An actor whose schedule must not act twice
should remember in its state what it already did (the seed's advice: the last completed day).
""")

code("""
run = runs["ownership-repeat"]
ownership_chart(run.trace, key=run.world.results["key"])
""")

md("""
Zoom on the firing: `n3` fires and sends the two `Write`s of the next due, both dropped by the cut, then crashes in the
same instant. The `Tick` it had told its actor is dropped with the node.
""")

code("""
spacetime_diagram(run.trace, start=12.005, duration=0.004)
""")

code("""
spacetime_diagram(run.trace)   # n2's takeover: n3 is down, so its Prepare and Write never find a receiver
""")

md("""
## 3. An occurrence is lost

The same schedule on a slower actor: handling a `Tick` takes 0.5 s before it counts. This time the firing's next-due
write **was** confirmed (the blue tick at 12 s), and the node dies 0.2 s later, while the `Tick` is still being handled:
no state write (no black tick) follows. The next owner `n1` reads the replicas, which say *next due: 17 s*, so it does
not fire 12 s again. The occurrence fired once, on a node that died before acting on it: it is **lost**.

Repeat or loss is decided by one question: *was the next due confirmed before the crash?*
""")

code("""
run = runs["ownership-miss"]
ownership_chart(run.trace, key=run.world.results["key"])
""")

code("""
spacetime_diagram(run.trace, start=12.0055, duration=0.0045)   # the firing: the next due is confirmed (Write/Ack)
""")

md("""
## 4. Every replica loses its memory

All three nodes crash at 8 s and restart at 11 s with empty memory. Two keys had a schedule every second:

* `plain` (a `cl_ticker`) lived only in the replicas' memory: after the restart no node knows it. Its schedule never
  fires again, and the `Get` at 19 s wins a new epoch that **found nothing**: the count starts over at 0.
* `kept` (a `durable="write"` type) also wrote every confirmed page to the cluster's store. After the restart its owner
  finds it in the store, resumes it without any message, and the schedule goes on (the occurrences missed while the
  cluster was down are skipped: one late firing, no burst).

Note the epoch rounds: `(1, n1#2)` is newer than `(1, n1#1)` because `n1#2` is a later life of `n1`.
""")

code("""
run = runs["all-replicas-lost"]
print("plain after the restart:", run.world.results["after:plain"], "| kept before:", run.world.results["before:kept"],
      "after:", run.world.results["after:kept"])
ownership_chart(run.trace, key="plain")
""")

code("""
ownership_chart(run.trace, key="kept")
""")

md("""
The restart, message by message: each node starts a **handoff** round (green), asking its peers for the replicas they
hold (`SyncRequest` / `SyncDump`); until a node has them, its replica is not counted in any quorum. `n1` resumes `kept`
from the store.
""")

code("""
spacetime_diagram(run.trace, start=10.9995, duration=0.009)
""")

md("""
## 5. Your turn: predict, then run

Below, a cluster of your own: a key of `cl_ticker` with a schedule every `every` seconds; its owner crashes at
`crash_at` seconds. Before you run it, **predict**:

1. Which node takes the key over, and roughly when? (Hint: the others declare a node dead after about 2 s of silence.)
2. Will an occurrence be fired twice? Lost? (Hint: where does `crash_at` fall relative to a firing?)
3. What version will the new owner find?

Then change `seed`, `crash_at` and `every`, and check. With a widget toolkit (JupyterLab), the sliders redraw the chart;
headless, the cell draws one run.
""")

code("""
from sim.world import World
from sim.scenarios.cluster import CLUSTER, Arm, cl_ticker

def crash_the_owner(seed=0, crash_at=9.5, every=1.0, until=16.0):
    world = World(seed)
    for name in ("n1", "n2", "n3"):
        world.add_node(name, cluster=CLUSTER, ask_timeout=2.0, write_timeout=1.0)

    async def arm(system):
        return await system.ref(cl_ticker, "lab").ask(Arm(every))

    def script(world):
        yield world.timeout(2.0)                                   # membership converges
        owner = world.system("n1").placement(cl_ticker, "lab").owner
        world.spawn("n1" if owner != "n1" else "n2", arm)          # a client on another node arms the schedule
        yield world.timeout(crash_at - world.now)
        world.crash(owner)

    world.process(script(world))
    world.run(until=until)
    world.close()
    return world.trace

trace = crash_the_owner(seed=0, crash_at=9.5, every=1.0)
ownership_chart(trace, key="lab")
""")

code("""
def explore(scenario="ownership-repeat", seed=0):
    run = scenarios.run(scenario, seed=seed)
    key = run.world.results.get("key") or "kept"
    print(f"{scenario} seed={seed}: checks hold: {run.ok}", *(f"  {f}" for f in run.failures), sep="\\n")
    return ownership_chart(run.trace, key=key)

try:
    import ipywidgets as widgets
    from IPython.display import display

    scenario_box = widgets.Dropdown(options=LAB, value="ownership-repeat", description="scenario")
    seed_box = widgets.IntSlider(value=0, min=0, max=20, description="seed")
    crash_box = widgets.FloatSlider(value=9.5, min=4.0, max=12.0, step=0.05, description="crash at (s)")
    every_box = widgets.FloatSlider(value=1.0, min=0.2, max=3.0, step=0.1, description="every (s)")

    def show_scenario(scenario, seed):
        display(explore(scenario, seed))

    def show_own(seed, crash_at, every):
        display(ownership_chart(crash_the_owner(seed, crash_at, every), key="lab"))

    display(widgets.HTML("<b>A built-in scenario with another seed</b>"))
    display(widgets.HBox([scenario_box, seed_box]), widgets.interactive_output(show_scenario, {"scenario": scenario_box, "seed": seed_box}))
    display(widgets.HTML("<b>Your cluster: crash the owner</b>"))
    display(widgets.HBox([seed_box, crash_box, every_box]),
            widgets.interactive_output(show_own, {"seed": seed_box, "crash_at": crash_box, "every": every_box}))
except ImportError:  # no widgets: one run of each, to edit by hand
    display(explore("ownership-repeat", seed=1))
""")

md("""
### Questions to take away

* Why does the new owner need a **quorum** of promises, not just one replica? (Think of the partition in part 1: could
  both sides have won the same epoch?)
* In part 2, what would have to change in the runtime for the occurrence to be fired at most once? What would it cost?
* In part 4, what would `plain` need to survive? What does `durable="write"` add to every write of `kept`?
""")

for i, cell in enumerate(cells):
    cell["id"] = f"lab-{i:02d}"  # stable ids: rebuilding gives the same file
nb = nbf.v4.new_notebook()
nb["cells"] = cells
nb["metadata"]["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
nb["metadata"]["language_info"] = {"name": "python"}
nbf.write(nb, "notebooks/04_ownership.ipynb")
print("wrote notebooks/04_ownership.ipynb")
