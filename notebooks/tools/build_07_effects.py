"""Writes notebooks/07_effects.ipynb from this script (run from the project root), so its source can be reviewed as Python."""
import nbformat as nbf

cells = []
md = lambda s: cells.append(nbf.v4.new_markdown_cell(s.strip()))
code = lambda s: cells.append(nbf.v4.new_code_cell(s.strip()))

md("""
# 07 · External effects: omitted or repeated, never both ruled out

casty confirms **state** writes by quorum and fences stale owners. It cannot do the same for what a body does
**outside** the actor system: an email, a payment, a report uploaded to a service. The schedules seed:

> *Schedule storage and external effects are separate operations. A quorum-confirmed schedule or checkpoint does
> not transactionally commit a database update, email or HTTP request made by the body.*

> *For a daily report, the actor can record the last completed or reserved day in state. Saving the day before
> building the report prevents a retry from rebuilding that day's report, but a crash between the save and the
> build can omit it. Building first and saving afterward permits a repeated build after a crash. [...] use an
> idempotency key when the external service supports one.*

This chapter runs that daily report and **counts** what happened outside with the **effects ledger**: a body calls
`ctx.effect(key, **details)` at the moment the outside action happens; in the simulator each call is an `effect`
row of the trace, and three checks count them per effect key:

```python
sim.checks.exactly_once(world, "report:build-first", expected=[...])
sim.checks.at_most_once(world, "report:save-first")        # an omission is allowed, a repeat is not
sim.checks.at_least_once(world, "report:build-first", expected=[...])  # a repeat is allowed, an omission is not
```

The **effect key is the action's identity** (like an idempotency key): two rows with the same key are the same
action done twice. Predict, run, look, and let the `assert` cells check.
""")

code("""
%matplotlib inline
import asyncio
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import sim
from casty import Askable, Context, actor
from sim.checks import CheckFailed, at_least_once, at_most_once, effects, exactly_once
from sim.viz import activation_timeline

DAY_US = 86_400 * 1_000_000
BUILD_S = 30.0  # building a report takes 30 s at the outside service


@dataclass(frozen=True)
class Midnight:
    \"\"\"Told by the daily schedule.\"\"\"


@dataclass(frozen=True)
class Arm(Askable[None]):
    \"\"\"Schedule the report for every midnight (UTC, on the node's wall clock).\"\"\"


def date_of(day):
    \"\"\"A day number (whole days since the epoch) as its ISO date: the report's name.\"\"\"
    return datetime.fromtimestamp(day * 86_400, tz=timezone.utc).date().isoformat()


async def arm(ctx, msg):
    until_midnight = timedelta(microseconds=DAY_US - ctx.system.clock.now_us() % DAY_US)
    await ctx.schedule("daily", until_midnight, timedelta(days=1), Midnight())
    msg.reply_to.tell(None)


def days_due(ctx):
    \"\"\"The days still to report: after the checkpoint (yesterday for a new key) up to yesterday.\"\"\"
    yesterday = ctx.system.clock.now_us() // DAY_US - 1
    return range(yesterday if ctx.state.value < 0 else ctx.state.value + 1, yesterday + 1)


async def build(ctx, day):
    \"\"\"30 s of work outside; once done the report exists: the effect.\"\"\"
    await asyncio.sleep(BUILD_S)
    ctx.effect(f"report:{ctx.key}:{date_of(day)}", day=date_of(day))


@actor(initial=-1, durable="write")
async def save_first(ctx: Context[int, Midnight | Arm]) -> None:
    \"\"\"Checkpoint BEFORE building: state says the day is done while its report is being built.\"\"\"
    async for msg in ctx.inbox:
        match msg:
            case Arm():
                await arm(ctx, msg)
            case Midnight():
                for day in days_due(ctx):
                    await ctx.state.set(day)
                    await build(ctx, day)


@actor(initial=-1, durable="write")
async def build_first(ctx: Context[int, Midnight | Arm]) -> None:
    \"\"\"Checkpoint AFTER building: the day is marked done once its report exists.\"\"\"
    async for msg in ctx.inbox:
        match msg:
            case Arm():
                await arm(ctx, msg)
            case Midnight():
                for day in days_due(ctx):
                    await build(ctx, day)
                    await ctx.state.set(day)
""")

md("""
## 1. Two checkpoints, one crash each

Two nodes with durable stores (SQLite behind a simulated disk); node `save` runs the key `save-first`, node `build`
the key `build-first`. The world starts on **1 January 2026 at 23:30** so the first midnight comes quickly. The
reports of 1 January are built normally. At the **second midnight** (the report of 2 January):

* `save` crashes 10 s into the build: its checkpoint already says "2 January done";
* `build` crashes just after its report exists, before its checkpoint is saved.

Both restart about 10 minutes later (the durable key comes back by itself), and the run goes on past the third midnight.

**Predict:** which reports exist for each key at the end? Is any day missing? Any built twice?
""")

code("""
START = datetime(2026, 1, 1, 23, 30, tzinfo=timezone.utc)
SECOND_MIDNIGHT = 24.5 * 3600  # true seconds from the start: 2026-01-03 00:00 UTC
DATES = ["2026-01-01", "2026-01-02", "2026-01-03"]


def daily_reports(keys):
    \"\"\"A world with one node per key (`{node: (actor type, key, crash s after the second midnight)}`), run to the third.\"\"\"
    world = sim.World(seed=0, start=START)

    async def arm_key(system, actor_type, key):
        await system.ref(actor_type, key).ask(Arm())

    for node, (actor_type, key, _) in keys.items():
        world.add_node(node, store="sqlite")
        world.spawn(node, arm_key, actor_type, key)

    def faults(world):
        for node, (_, _, after) in sorted(keys.items(), key=lambda item: item[1][2]):
            yield world.timeout(SECOND_MIDNIGHT + after - world.now)
            world.crash(node)
        yield world.timeout(SECOND_MIDNIGHT + 630 - world.now)
        for node in keys:
            world.restart(node)  # a durable key comes back by itself: its @active marker is on the disk

    world.process(faults(world))
    world.run(until=SECOND_MIDNIGHT + 86_400 + 120)
    world.close()
    return world


SAVE_CRASH = 10.0  # 10 s into the build of 2 January: the checkpoint is saved, the report not built
BUILD_CRASH = BUILD_S + 0.0001  # the report of 2 January exists; its checkpoint is not saved yet
world = daily_reports({"save": (save_first, "save-first", SAVE_CRASH), "build": (build_first, "build-first", BUILD_CRASH)})
for key, rows in effects(world, "report").items():
    print(f"{key:<32} built {len(rows)}x at", ", ".join(f"{row.t / 3600:.2f} h" for row in rows))
activation_timeline(world.trace, title="Daily reports: 'save' and 'build' crash at the second midnight (the report of Jan 02)")
""")

md("""
Read the stars: each is a report that **exists** outside (an `effect` row), labelled with the day it covers. On
`save`, 2 January is a hollow red-orange star, **omitted**: its checkpoint said the day was done before the report existed,
so after the restart nobody builds it. On `build`, 2 January appears **again** at the third midnight: the report
existed, but the checkpoint still said 1 January, so the next run built it once more, then 3 January.
""")

code("""
assert list(effects(world, "report:save-first")) == ["report:save-first:2026-01-01", "report:save-first:2026-01-03"]
at_most_once(world, "report:save-first")  # save-first never repeats ...
try:
    at_least_once(world, "report:save-first", expected=[f"report:save-first:{d}" for d in DATES])
    raise AssertionError("save-first should have omitted a day")
except CheckFailed as failure:
    print("save-first :", failure)  # ... but omits 2 January
    assert str(failure) == "at_least_once: report:save-first:2026-01-02 happened 0 times (want at least 1)"

at_least_once(world, "report:build-first", expected=[f"report:build-first:{d}" for d in DATES])  # build-first never omits ...
try:
    at_most_once(world, "report:build-first")
    raise AssertionError("build-first should have repeated a day")
except CheckFailed as failure:
    print("build-first:", failure)  # ... but builds 2 January twice
    assert str(failure).startswith("at_most_once: report:build-first:2026-01-02 happened 2 times")
""")

md("""
Neither order gives **exactly once**: the checkpoint (a quorum-confirmed state write) and the report (an action at
another service) are two operations, and a crash can fall between them. You choose which failure your application
can live with: a missing report someone can rebuild by hand, or a duplicate someone must ignore.

## 2. An idempotency key: the service deduplicates

The seed's way out, when the outside service supports it: send an **idempotency key** with the request, and let the
service refuse to do the same key twice. The key must name the action, not the attempt: `report:<key>:<date>`. Below,
the service is a plain Python object outside the world, so it survives every crash of every node. The actor is
`build_first` again (never omits), now calling the service with the key, on a node `idem` that crashes exactly as
`build` did in section 1 (just after the report of 2 January exists, before the checkpoint).

**Predict:** how many requests for 2 January reach the service? How many reports of 2 January exist at the end?
""")

code("""
class ReportService:
    \"\"\"Outside the actor system: builds a report once per idempotency key, answers repeats from its records.\"\"\"

    def __init__(self):
        self.requests = []  # every idempotency key it was sent, in order
        self.done = set()

    async def build(self, ctx, idempotency_key, day):
        self.requests.append(idempotency_key)
        if idempotency_key in self.done:
            return  # already built: the caller's retry costs nothing
        await asyncio.sleep(BUILD_S)
        self.done.add(idempotency_key)
        ctx.effect(idempotency_key, day=day)  # the report now exists, once


service = ReportService()


@actor(initial=-1, durable="write")
async def build_first_idempotent(ctx: Context[int, Midnight | Arm]) -> None:
    \"\"\"Build, then checkpoint; every request carries the idempotency key of the day's report.\"\"\"
    async for msg in ctx.inbox:
        match msg:
            case Arm():
                await arm(ctx, msg)
            case Midnight():
                for day in days_due(ctx):
                    await service.build(ctx, f"report:{ctx.key}:{date_of(day)}", date_of(day))
                    await ctx.state.set(day)


world2 = daily_reports({"idem": (build_first_idempotent, "idempotent", BUILD_CRASH)})
print("requests the service received:", [k.rsplit(":", 1)[1] for k in service.requests])
activation_timeline(world2.trace, title="The crash of section 1's 'build', on 'idem': the retry of Jan 02 reaches the service and builds nothing")
""")

code("""
idempotent = [f"report:idempotent:{d}" for d in DATES]
assert service.requests == ["report:idempotent:2026-01-01", "report:idempotent:2026-01-02",
                            "report:idempotent:2026-01-02", "report:idempotent:2026-01-03"]  # the retry did reach the service
exactly_once(world2, "report:idempotent", expected=idempotent)  # and every report exists exactly once
try:
    exactly_once(world, "report:build-first", expected=[f"report:build-first:{d}" for d in DATES])  # section 1's run
    raise AssertionError("without the key, build-first still repeats")
except CheckFailed as failure:
    print("without the key:", failure)
print("with the key: 4 requests, 3 reports, each exactly once")
""")

md("""
The idempotency key did not stop the retry (the body still asked twice for 2 January); it made the retry
**harmless**, because the service, not casty, remembers what it has done. That is the only place such a memory can
live: the crash fell between two systems, and only the one that did the action knows it was done.

## What to take away

* A confirmed checkpoint or schedule does not commit an email, a payment or a report with it.
* Save first: never twice, maybe never (`at_most_once` holds). Build first: at least once, maybe twice
  (`at_least_once` holds). Exactly once needs the other side's help: an idempotency key that names the action.
* Record every outside action with `ctx.effect(...)` and let `sim.checks` count them: in a scenario's checks, in a
  pytest test with the `world` fixture (chapter 08), or on a real node's `--trace` file.

**Try it:** crash `save` 40 s after the second midnight instead of 10 s (after its build). Does any check fail now? Why?
""")

for i, cell in enumerate(cells):
    cell["id"] = f"effects-{i:02d}"  # stable ids: rebuilding gives the same file
nb = nbf.v4.new_notebook()
nb["cells"] = cells
nb["metadata"]["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
nb["metadata"]["language_info"] = {"name": "python"}
nbf.write(nb, "notebooks/07_effects.ipynb")
print("wrote notebooks/07_effects.ipynb")
