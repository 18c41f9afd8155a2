"""Writes notebooks/08_failure_tests.ipynb from this script (run from the project root), so its source can be reviewed as Python.

Chapter 08 of the course: writing failure tests for your own actor. The example is examples/charging.py (a subscription
with a planted charge-before-save bug) and examples/test_daily_charge.py (its tests). The notebook runs the example's
world itself through the public API (sim.World, sim.FaultPlan, sim.faults, sim.checks, sim.testing.fault_plans), runs
pytest once on the example's planted-bug test in a subprocess, and checks every claim against the traces.
"""
import nbformat as nbf

cells = []
md = lambda s: cells.append(nbf.v4.new_markdown_cell(s.strip()))
code = lambda s: cells.append(nbf.v4.new_code_cell(s.strip()))

md("""
# 08 · Writing failure tests

*About 12 minutes. You know worlds, fault plans and checks from the earlier chapters; here you test **your own** actor.*

A failure test runs your actor in a simulated world under faults and checks a rule about what it did. casty lab
gives you two ways to find the faults for you:

* the **pytest plugin**: `@pytest.mark.sim(seeds=200, ...)` runs your test once per seed, each seed on a fresh `world`
  with a fault plan the seed draws; a failing seed's report prints the plan and the command that replays it;
* **Hypothesis**: `sim.testing.fault_plans(...)` is a strategy of fault plans that *shrinks*: from a failing plan of
  fifteen faults it finds the one that matters.

The actor under test is the example in `examples/charging.py`: a subscription that charges its customer at the end of
every period (a day in production, 10 seconds here). The charge goes to a payment service outside the actor system
(it takes the money at once and answers 1 s later) and is recorded with `ctx.effect("charge:<customer>:<period>")`, the
effects ledger that `sim.checks.exactly_once` counts. The example has a **planted bug**: `subscription` charges, *then*
saves the period it charged. `fixed_subscription` saves first.

The setup cell imports the example (its test file's helpers are plain functions) and defines `charges_chart(world)`:
one lane per customer, a dot per charge at the moment the money was taken, labelled with the period it pays for.
""")

code('''
%matplotlib inline
import inspect
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import find, settings
from matplotlib.figure import Figure

import sim
from sim.checks import exactly_once
from sim.faults import Crash, FaultPlan, Pause
from sim.pytest_plugin import SimSpec
from sim.testing import fault_plans
from sim.viz import activation_timeline

ROOT = next(p for p in (Path.cwd(), *Path.cwd().parents) if (p / "examples" / "charging.py").is_file())
sys.path.insert(0, str(ROOT / "examples"))
from charging import PAYMENT_REPLY, fixed_subscription, subscription  # noqa: E402
import test_daily_charge as example  # noqa: E402

CRASH, RESTART, HEAL = "#D55E00", "#009E73", "#777777"


def charges(world):
    """Per effect key, the true times it was charged (the effects ledger)."""
    out = {}
    for row in world.trace.of("effect"):
        out.setdefault(row.get("effect"), []).append(row.t)
    return out


def charge_windows(world):
    """(charged at, ended at, saved?) of every charge: from the money taken to the save of the key's state, or to the
    crash that came first (then the period was charged and never saved)."""
    crashes = [c.t for c in world.trace.of("fault.crash")]
    out = []
    for row in world.trace.of("effect"):
        saved = next((w.t for w in world.trace.of("write.confirmed", key=row.get("key"))
                      if w.t > row.t and "state" in w.get("pages")), float("inf"))
        crash = next((c for c in crashes if row.t < c < saved), None)
        out.append((row.t, saved, True) if crash is None else (row.t, crash, False))
    return out


def crashes_in_a_window(world):
    """The crashes that fell after a charge was taken and before it was saved."""
    return sorted({end for _, end, saved in charge_windows(world) if not saved})


def period_label(effect_key):
    """charge:alice:2026-01-01T00:00:40Z -> 00:40 (the period's start, minutes:seconds)."""
    return effect_key.rsplit("T", 1)[1][3:8]


def charges_chart(world, title):
    """One lane per customer: a dot per charge (when the money was taken), labelled with the period it pays for.

    A period charged twice is red, and its second charge is joined to its first. Crashes, restarts and the heal are the
    vertical lines, read from the trace."""
    customers = list(example.CUSTOMERS)
    fig = Figure(figsize=(11, 2.6), layout="constrained")
    ax = fig.add_subplot()
    for y, customer in enumerate(customers):
        ax.axhspan(y - 0.38, y + 0.38, color="#F4F4F4", zorder=0)
        for key, times in charges(world).items():
            if key.split(":")[1] != customer:
                continue
            twice = len(times) > 1
            colour = "#CC0000" if twice else "#0072B2"
            for i, t in enumerate(times):
                ax.scatter([t], [y], s=70 if twice else 45, color=colour, zorder=3, edgecolors="black" if twice else "none")
                label = period_label(key) + (" again" if i else "")
                ax.annotate(label, (t, y), xytext=(0, 9 if i % 2 == 0 else -16), textcoords="offset points",
                            ha="center", fontsize=8, color=colour, fontweight="bold" if twice else "normal",
                            bbox=dict(boxstyle="square,pad=0.1", facecolor="#F4F4F4", edgecolor="none"), zorder=4)
            if twice:
                ax.annotate("", (times[1], y), xytext=(times[0], y), zorder=2,
                            arrowprops=dict(arrowstyle="->", color="#CC0000", connectionstyle="arc3,rad=-0.35"))
    for kind, colour, style, word in (("fault.crash", CRASH, "-", "crash"), ("fault.restart", RESTART, "-", "restart"),
                                      ("fault.heal", HEAL, "--", "heal")):
        for i, row in enumerate(world.trace.of(kind)):
            ax.axvline(row.t, color=colour, linestyle=style, linewidth=1.4, zorder=1, label=word if i == 0 else None)
    ax.set_yticks(range(len(customers)), [f"customer {c!r}" for c in customers])
    ax.set_ylim(len(customers) - 0.5, -0.75)
    ax.set_xlim(0, 92)
    ax.set_xlabel("true time (s)    dot: a charge, labelled with the period it pays for (mm:ss of its start); "
                  "red: that period charged twice")
    ax.set_title(title, loc="left")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    ax.grid(axis="x", color="#E4E4E4")
    return fig
''')

# ----------------------------------------------------------------------------------------------------------------
md("""
## 1. The test is a plain function of a world

A failure test has two parts: what the world does (`a_minute_of_billing`: subscribe two customers, run the faults' minute,
heal everything, run 30 s more) and the rule (`never_twice`: no period charged twice, and the periods after the heal
charged, so that "never twice" cannot pass by charging nothing). Both are ordinary functions in
`examples/test_daily_charge.py`:
""")

code('''
print(inspect.getsource(example.a_minute_of_billing))
print(inspect.getsource(example.never_twice))
''')

md("""
**Predict.** With no faults at all, the run lasts 90 s and each customer pays every 10 s. How many charges does the
ledger hold, and does the buggy `subscription` pass `never_twice`?
""")

code('''
def billed(plan, kind=subscription, seed=0):
    """The example's minute of billing on one node n1 (SQLite behind a simulated disk) under `plan`."""
    world = sim.World(seed)
    world.add_node("n1", store="sqlite")
    plan.apply(world)
    example.a_minute_of_billing(world, kind)
    world.close()
    return world


quiet = billed(FaultPlan())
example.never_twice(quiet)  # raises sim.CheckFailed if the rule does not hold
print(len(quiet.trace.of("effect")), "charges;", "each period once:", all(len(t) == 1 for t in charges(quiet).values()))
charges_chart(quiet, "No faults: every period charged once, for each customer")
''')

code('''
assert len(quiet.trace.of("effect")) == 16 and len(charges(quiet)) == 16
assert sorted(map(len, charges(quiet).values())) == [1] * 16
exactly_once(quiet, "charge", expected=example.charged_after_the_heal(quiet))
''')

md("""
Without faults the bug is invisible: the order of "charge" and "save" only matters if something stops the body
between them. That is what the faults are for.
""")

# ----------------------------------------------------------------------------------------------------------------
md("""
## 2. The marker: one test, one item per seed, one plan per seed

This is the test the example writes for the fixed actor (and, in a string the plugin's own test runs, for the buggy one):

```python
ON_ONE_NODE = dict(nodes=1, faults=("crash",), start=5.0, until=60.0, node_options={"store": "sqlite"})

@pytest.mark.sim(seeds=200, **ON_ONE_NODE)
def test_fixed_subscription_never_charges_twice(world):
    a_minute_of_billing(world, fixed_subscription)
    never_twice(world)
```

`@pytest.mark.sim` parametrizes the test with `sim_seed` (`test_...[seed=0]` ... `[seed=199]`); the `world` fixture is
`sim.World(seed)` with the nodes added (`n1`), and the seed's **fault plan** already scheduled: crashes of `n1` (and
the restarts `sim.faults.generate` gives them), drawn within `[start, until)` from that seed alone. The options
`--sim-seeds A:B`, `--sim-seed N` and `--sim-plan JSON` change the seeds or replay one exact plan.

The plugin's `SimSpec` is what the marker's arguments become; `spec.plan(seed)` is the plan the `world` fixture of that
seed gets, and `spec.build(seed, plan)` the world itself. We use it here to see, outside pytest, exactly what pytest runs.

**Predict.** Is a seed's plan the same every time you ask for it? Do two seeds share a plan?
""")

code('''
spec = SimSpec.of(pytest.mark.sim(seeds=200, **example.ON_ONE_NODE).mark)
for seed in range(4):
    print(f"seed {seed}: {spec.plan(seed)}")
''')

code('''
assert spec.seeds == tuple(range(200)) and spec.names == ("n1",)
assert all(str(spec.plan(s)) == str(spec.plan(s)) for s in range(12))  # a seed is one plan, every time
assert len({str(spec.plan(s)) for s in range(12)}) == 12               # and the seeds differ
for s in range(12):
    for fault in spec.plan(s).faults:
        assert type(fault).__name__ in ("Crash", "Restart") and fault.node == "n1" and 5.0 <= fault.at < 60.0
''')

# ----------------------------------------------------------------------------------------------------------------
md("""
## 3. Run the seeds yourself: which ones double-charge, and why

The plugin's loop is nothing more than this: for each seed, build its world, run the test body, check the rule.

**Predict.** The buggy actor charges, waits for the payment service's answer (1 s), then saves the period. Which seeds
will charge a customer twice: the ones with the most crashes, or the ones with a crash at a particular moment?
""")

code('''
def seeded(seed, kind=subscription, plan=None):
    """What the plugin does for one seed: the world of `spec` for this seed (or `plan`), the test body, closed."""
    world = spec.build(seed, spec.plan(seed) if plan is None else plan)
    with world:
        example.a_minute_of_billing(world, kind)
    return world


def fails(world):
    try:
        example.never_twice(world)
    except sim.CheckFailed as failure:
        return str(failure)
    return None


SEEDS = range(8)
worlds = {seed: seeded(seed) for seed in SEEDS}
failing = [seed for seed, world in worlds.items() if fails(world)]
print("seeds that charge a period twice:", failing)
print("seed", failing[0], "->", fails(worlds[failing[0]])[:160], "...")


def seeds_chart(worlds, title):
    """One row per seed: n1 down (grey, crash to restart), the 1 s windows between a charge and its save (blue), and
    a red cross where a crash fell inside such a window. A seed whose test failed is labelled in red."""
    fig = Figure(figsize=(11, 0.32 * len(worlds) + 1.3), layout="constrained")
    ax = fig.add_subplot()
    for y, (seed, world) in enumerate(worlds.items()):
        down_at = None
        for row in world.trace.rows:
            if row.kind == "fault.crash":
                down_at = row.t
            elif row.kind == "fault.restart" and down_at is not None:
                ax.barh(y, row.t - down_at, left=down_at, height=0.6, color="#CCCCCC", zorder=1)
                down_at = None
        for charged, end, _ in charge_windows(world):
            ax.barh(y, end - charged, left=charged, height=0.6, color="#56B4E9", zorder=2)
        hits = crashes_in_a_window(world)
        ax.scatter(hits, [y] * len(hits), marker="X", s=80, color="#CC0000", zorder=3)
    ax.set_yticks(range(len(worlds)), [f"seed {s}" + ("  FAILS" if fails(w) else "") for s, w in worlds.items()])
    for tick, world in zip(ax.get_yticklabels(), worlds.values()):
        tick.set_color("#CC0000" if fails(world) else "black")
    ax.set_ylim(len(worlds) - 0.5, -0.5)
    ax.set_xlim(0, 92)
    ax.set_xlabel("true time (s)    grey: n1 down    blue: a charge taken, until it is saved (or a crash comes first)    "
                  "red X: that crash")
    ax.set_title(title, loc="left")
    ax.grid(axis="x", color="#E4E4E4")
    return fig


seeds_chart(worlds, "The buggy subscription under the plans of seeds 0-7")
''')

md("""
The number of crashes does not decide it: a seed fails exactly when one of its crashes falls **between a charge and
the save of that charge** (a red cross). After the restart the state still says the period is not charged, and the
next `Bill` charges it again. The assert cell checks that rule on every seed, from the trace alone, and checks that
`fixed_subscription` survives the very same plans.
""")

code('''
assert failing, "the planted bug must be found in the first seeds"
for seed, world in worlds.items():
    assert bool(fails(world)) == bool(crashes_in_a_window(world)), seed
assert not [seed for seed in SEEDS if fails(seeded(seed, fixed_subscription))]
''')

# ----------------------------------------------------------------------------------------------------------------
md("""
## 4. Reading a failure: the report and its reproduce line

Now the same test through pytest, as you would run it: the example's planted-bug test (`example.PLANTED`, the text the
plugin's own test runs with `pytester`) written to a scratch folder, run with `-x` so pytest stops at the first failing
seed. (`-p no:nbmake` only skips loading the notebook plugin, which this folder does not need.)

**Predict.** Which seed will pytest report first, and with which plan?
""")

code('''
scratch = Path(tempfile.mkdtemp(prefix="casty-08-"))
(scratch / "test_planted.py").write_text(example.PLANTED)
env = dict(os.environ, PYTHONPATH=str(ROOT / "examples"))
done = subprocess.run(
    [sys.executable, "-m", "pytest", "-x", "-q", "--color=no", "-p", "no:cacheprovider", "-p", "no:nbmake",
     f"--basetemp={scratch / 'tmp'}", "test_planted.py"],
    cwd=scratch, env=env, capture_output=True, text=True, timeout=120,
)
out = done.stdout
section = out[out.index("casty sim"):out.index("short test summary")]
print(section.replace(str(scratch), "<scratch>"))
print([line for line in out.splitlines() if line.startswith(("FAILED", "1 failed"))])
''')

md("""
How to read it:

* `FAILED test_planted.py::test_never_charged_twice[seed=1]`: the item is the seed; `-k 'seed=1'` picks it again.
* `plan:` the seed's fault plan on one line: `crash(n1)@10.618` is a crash of `n1` at 10.618 s of true time,
  `restart(n1)@19.254` its restart.
* `reproduce:` the command that runs that one seed again with that exact plan (`--sim-plan` is the plan as JSON,
  `sim.FaultPlan.from_json` reads it). The plan is pinned, so the line still reproduces the failure after you change
  how seeds draw plans.
* `trace:` the run's trace as JSON lines (`sim.Trace.from_jsonl`) and for Perfetto; `chart:` a catch-up chart of the
  run's schedule (an ownership chart in a cluster run).

The assert cell checks that pytest's first failing seed is the first one section 3 found, that its plan is that seed's
plan, and that the trace file it wrote is our run of that seed, row for row.
""")

code('''
seed = int(re.search(r"^seed: (\\d+)$", out, re.M).group(1))
plan_line = re.search(r"^plan: (.+)$", out, re.M).group(1)
reproduce = re.search(r"^reproduce: (pytest .+)$", out, re.M).group(1)
trace_file = Path(re.search(r"^trace: (\\S+\\.jsonl) ", out, re.M).group(1))
assert done.returncode == 1 and f"FAILED test_planted.py::test_never_charged_twice[seed={seed}]" in out
assert seed == failing[0] == 1 and plan_line == str(spec.plan(seed))
assert plan_line.startswith("crash(n1)@10.618 restart(n1)@19.254 ") and len(spec.plan(seed)) == 15
assert sim.Trace.from_jsonl(trace_file).digest() == worlds[seed].trace.digest()
''')

md("""
The report's chart is the catch-up chart of the run's schedule (`bill` of `alice`): one delivery per period, the
crashes and the restarts. It says *0 repeated*, and that is true: the schedule told `Bill` once per period. The repeat
is the body's, which charged a period the state did not remember; the effects ledger (section 3's chart, and
`exactly_once`) is where it shows.
""")

code('''
from IPython.display import Image

chart_file = Path(re.search(r"^chart: (\\S+\\.png)$", out, re.M).group(1))
Image(filename=str(chart_file), width=900)
''')

code('''
assert chart_file.stat().st_size > 10_000
assert len(worlds[seed].trace.of("schedule.fired", key="alice")) == 8     # 8 deliveries, none repeated
assert len(charges(worlds[seed])["charge:alice:2026-01-01T00:00:00Z"]) == 2  # the body charged 00:00 twice
''')

md("""
**Predict.** You paste the reproduce line. Does it run the same *trace*, or only the same plan?

The reproduce line names the seed and the plan; the seed also fixes everything else random in the world (latencies,
the order of simultaneous events). So the replay is the same run, row for row: here we replay it from the line itself.
""")

code('''
argv = shlex.split(reproduce)
given_seed = int(argv[argv.index("--sim-seed") + 1])
given_plan = sim.FaultPlan.from_json(argv[argv.index("--sim-plan") + 1])
print(argv[:4], "...")
replayed = seeded(given_seed, plan=given_plan)
print(fails(replayed)[:120], "...")
charges_chart(replayed, f"The reproduce line's run (seed {given_seed}): a crash 0.6 s after the 00:00 charges, "
                        "both charged again after the restart")
''')

code('''
assert given_seed == seed and str(given_plan) == plan_line
assert replayed.trace.digest() == worlds[seed].trace.digest()
assert crashes_in_a_window(replayed) == [10.618] and min(charges(replayed)["charge:alice:2026-01-01T00:00:00Z"]) == 10.0005
assert sorted(k for k, t in charges(replayed).items() if len(t) > 1) == [
    "charge:alice:2026-01-01T00:00:00Z", "charge:bob:2026-01-01T00:00:00Z"]
''')

# ----------------------------------------------------------------------------------------------------------------
md("""
## 5. Shrinking: from fifteen faults to the one that matters

The failing seed's plan has fifteen faults; only one of them did the damage. `sim.testing.fault_plans(...)` is a
Hypothesis strategy over the same kind of plans, built so that Hypothesis can make a failing plan **simpler** one step
at a time: fewer faults, shorter ones, later ones, on fewer nodes. In a test you write:

```python
@settings(max_examples=60, deadline=None)
@given(plan=fault_plans(1, duration=55.0, start=5.0, kinds=("crash", "pause", "clock_step"), wipe=False))
def test_fixed_subscription_under_hypothesis(plan):
    never_twice(billed(plan, fixed_subscription))     # on a failure Hypothesis prints the shrunk plan
```

Here we call Hypothesis' `find` directly: it searches for a plan that double-charges and returns the simplest it can
reach. We give it the marker's space: crashes of `n1` within [5 s, 60 s), at most four faults (a crash's restart
counts), and `wipe=False`: the node's database outlives a crash.

**Predict.** How many faults will the shrunk plan have, and where in time will it be?
""")

code('''
def double_charges(plan):
    try:
        example.never_twice(billed(plan))
    except sim.CheckFailed:
        return True
    return False


plans = fault_plans(1, duration=55.0, start=5.0, kinds=("crash",), wipe=False)  # the marker's faults: crashes of n1
shrunk = find(plans, double_charges, settings=settings(max_examples=500, database=None, deadline=None, derandomize=True))
print("shrunk plan:", shrunk)
print("one millisecond later:", FaultPlan.of(Crash(at=shrunk.faults[0].at + 0.001, node="n1")), "double-charges:",
      double_charges(FaultPlan.of(Crash(at=shrunk.faults[0].at + 0.001, node="n1"))))
minimal = billed(shrunk)
charges_chart(minimal, f"The shrunk plan: {shrunk}, and the heal restarts n1 at 60 s")
''')

md("""
One crash, with no restart of its own (the heal at 60 s restarts it), at the **last** millisecond of a window: the
charge was taken at x0.0005 s, the payment's answer comes 1 s later and the save takes the disk's 0.5 ms, so a crash at
x1.001 s still beats the save and one millisecond later it does not. Shrinking pushes a fault as late and as short as
it can; which window it ends in is up to the search. The assert cell checks all of that against the shrunk run's trace.
""")

code('''
assert len(shrunk) == 1 and isinstance(shrunk.faults[0], Crash) and shrunk.faults[0].node == "n1"
assert crashes_in_a_window(minimal) == [shrunk.faults[0].at]
cut = [charged for charged, end, saved in charge_windows(minimal) if not saved]
assert [round(shrunk.faults[0].at - charged, 4) for charged in cut] == [1.0005, 1.0005]  # alice's and bob's charge
assert not double_charges(FaultPlan.of(Crash(at=shrunk.faults[0].at + 0.001, node="n1")))
assert double_charges(shrunk)
''')

md("""
### Your turn

* Swap `subscription` for `fixed_subscription` in `double_charges` and run `find` again: what does Hypothesis say?
  (What does `fixed_subscription` do to the period when the crash hits the same millisecond? Look at `exactly_once`
  and the example's docstring: is that outcome better for a customer?)
* Give `find` `kinds=("crash", "pause")`. Can a pause alone double-charge? (Hint: the save has `write_timeout`.)
* In a terminal, from the project root: `pytest examples/test_daily_charge.py -k fixed --sim-seeds 0:50`. To replay
  section 4's reproduce line yourself, write `example.PLANTED` to `test_planted.py` in a folder and run the line there
  with `PYTHONPATH` set to `examples/`.
""")

code('''
import shutil

shutil.rmtree(scratch)  # section 4's scratch folder (the planted test, its trace files and chart)
''')

for i, cell in enumerate(cells):
    cell["id"] = f"failure-tests-{i:02d}"  # stable ids: rebuilding gives the same file
nb = nbf.v4.new_notebook()
nb["cells"] = cells
nb["metadata"]["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
nb["metadata"]["language_info"] = {"name": "python"}
nbf.write(nb, "notebooks/08_failure_tests.ipynb")
print("wrote notebooks/08_failure_tests.ipynb")
