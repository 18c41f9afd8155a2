"""Writes notebooks/06_node_schedules.ipynb from this script (run from the project root), so its source can be reviewed as Python."""
import nbformat as nbf

cells = []
md = lambda s: cells.append(nbf.v4.new_markdown_cell(s.strip()))
code = lambda s: cells.append(nbf.v4.new_code_cell(s.strip()))

md("""
# 06 · Node schedules and cron

Chapter 03 was about **actor schedules** (`ctx.schedule`): saved in the key's state, resumed by whoever owns
the key next. casty also has the other kind, from the GoAkt "grain scheduling" seed: **node schedules**.
Any code holding a system registers one for any key:

```python
await system.schedule_once(Remind(), ref, timedelta(minutes=10), reference="remind")
await system.schedule(Refresh(), ref, timedelta(minutes=1), reference="refresh")
await system.schedule_cron(Generate(), ref, "0 0 9 * * ?", reference="generate")   # Quartz: sec min hour ...
system.pause_schedule("refresh"); system.resume_schedule("refresh"); system.cancel_schedule("refresh")
system.list_schedules()
```

A node schedule lives **in the registering node's memory**, not in the key's state. That one fact explains most of
this chapter: what a restart does, what a failing handler does, and why a cron in a cluster needs a claim per tick
while an interval does not. As in every chapter: predict first, then run, look, and let the `assert` cell check
the claim against the trace.

The picture is `ticks_chart(trace)`: one row per (node, schedule), a blue dot per tick told, and the marks of what
went wrong: a tick lost (a red-orange X, labelled), a tick told whose handler failed (a black square under its dot: a
dead letter), a claim lost to another node (a hollow grey circle), a claim won and never told (an orange diamond).
A cancelled schedule ends in a black bar labelled *cancelled*; a pause is hatched.
""")

code("""
%matplotlib inline
import asyncio
from dataclasses import dataclass
from datetime import timedelta

import casty
import sim
from casty import Askable, Context, actor
from sim import scenarios
from sim.viz import activation_timeline, catchup_chart, ticks_chart
from sim.viz.data.periodic import periodic_lanes
from sim.viz.data.ticks import tick_rows  # the rows the chart draws, by (node, schedule)


@dataclass(frozen=True)
class Tick:
    what: str


@dataclass(frozen=True)
class Seen(Askable[list]):
    \"\"\"The ticks this key has handled, in order.\"\"\"


@actor(initial=[])
async def inbox(ctx: Context[list, Tick | Seen]) -> None:
    \"\"\"Keeps every Tick it receives (what, and the node's wall clock in s since the start).\"\"\"
    async for msg in ctx.inbox:
        match msg:
            case Tick(what=what):
                await ctx.state.update(lambda seen: [*seen, what])
            case Seen(reply_to=reply_to):
                reply_to.tell(ctx.state.value)
""")

md("""
## 1. The API, its references and its errors

A **reference** names one schedule on the node; it is how you pause, resume or cancel it later. The seed lists
the errors. **Predict** which of these calls fail, and with which error:

1. a second `schedule(...)` under the live reference `"every-10s"`;
2. `pause_schedule("every-10s")` twice;
3. `cancel_schedule("once")` after that one-shot has fired;
4. `schedule_cron(..., "0 0 25 * * ?")` (hour 25);
5. `resume_schedule("nobody")`.
""")

code("""
def api_tour():
    world = sim.World(seed=0)
    world.add_node("n1")
    outcome = world.results

    async def client(system):
        ref = system.ref(inbox, "k")
        outcome["once"] = await system.schedule_once(Tick("once"), ref, timedelta(seconds=5), reference="once")
        outcome["interval"] = await system.schedule(Tick("every 10 s"), ref, timedelta(seconds=10), reference="every-10s")
        outcome["cron"] = await system.schedule_cron(Tick("cron"), ref, "0/15 * * * * ?", reference="quarter-minute")
        outcome["listed"] = sorted((s.reference, s.kind) for s in system.list_schedules())
        attempts = {
            "1 same reference": system.schedule(Tick("again"), ref, timedelta(seconds=3), reference="every-10s"),
            "4 hour 25": system.schedule_cron(Tick("x"), ref, "0 0 25 * * ?", reference="bad-cron"),
        }
        for name, attempt in attempts.items():
            try:
                await attempt
                outcome[name] = "accepted"
            except casty.CastyError as exc:
                outcome[name] = type(exc).__name__
        await asyncio.sleep(32)
        system.pause_schedule("every-10s")
        for name, call in (("2 pause twice", lambda: system.pause_schedule("every-10s")),
                           ("3 cancel a fired one-shot", lambda: system.cancel_schedule("once")),
                           ("5 resume unknown", lambda: system.resume_schedule("nobody"))):
            try:
                call()
                outcome[name] = "accepted"
            except casty.CastyError as exc:
                outcome[name] = type(exc).__name__
        await asyncio.sleep(25)
        system.resume_schedule("every-10s")  # a new grid: one interval after the resume, no catch-up
        await asyncio.sleep(30)
        system.cancel_schedule("every-10s")
        system.cancel_schedule("quarter-minute")
        outcome["seen"] = await ref.ask(Seen())

    world.spawn("n1", client)
    world.run(until=100)
    world.close()
    return world


api = api_tour()
for name in sorted(k for k in api.results if k[0].isdigit()):
    print(f"{name:<28} {api.results[name]}")
print("listed:", api.results["listed"])
ticks_chart(api.trace, title="Three node schedules on n1; 'every-10s' paused at 32 s, resumed at 57 s, cancelled at 87 s")
""")

md("""
Each row is one schedule. The one-shot ticks once at 5 s and is gone (so cancelling it later names a reference
that no longer exists). The interval ticks at 10, 20, 30 s; paused at 32 s it is silent, and the resume **does
not catch up**: it starts a new grid one interval after the resume (67, 77 s). The cron ticks at every quarter
minute of the wall clock.
""")

code("""
r = api.results
assert (r["1 same reference"], r["2 pause twice"], r["3 cancel a fired one-shot"], r["4 hour 25"], r["5 resume unknown"]) == (
    "ScheduleReferenceInUse", "ScheduleStateError", "ScheduleReferenceNotFound", "InvalidCronExpression", "ScheduleReferenceNotFound")
assert r["listed"] == [("every-10s", "interval"), ("once", "once"), ("quarter-minute", "cron")]
told = {ref: [round(row.t, 3) for row in api.trace.of("node_schedule.fired", reference=ref)] for ref in ("once", "every-10s", "quarter-minute")}
assert told == {"once": [5.0], "every-10s": [10.0, 20.0, 30.0, 67.0, 77.0], "quarter-minute": [15.0, 30.0, 45.0, 60.0, 75.0]}, told
assert r["seen"].count("every 10 s") == 5 and r["seen"].count("once") == 1
print("errors as the seed lists them; resume starts a new grid at 57 + 10 s:", told["every-10s"])
""")

md("""
The seed lists two more errors: *ErrSchedulerNotStarted: the actor system, and with it the scheduler, is not
started* and *ErrInvalidGrainIdentity: the identity fails validation, for example an empty name*. **Predict:** what
does `list_schedules()` raise on a system that was never started, and `system.ref(inbox, "")` on a running one?
""")

code("""
not_started = casty.ActorSystem()          # built, never started (no `async with`)
errors = {}
for name, call in (("list on a system not started", not_started.list_schedules),
                   ("cancel on a system not started", lambda: not_started.cancel_schedule("every-10s"))):
    try:
        call()
        errors[name] = "accepted"
    except casty.CastyError as exc:
        errors[name] = type(exc).__name__

empty = sim.World(seed=0)
empty.add_node("n1")


async def empty_key(system):
    try:
        system.ref(inbox, "")
        empty.results["empty key"] = "accepted"
    except casty.CastyError as exc:
        empty.results["empty key"] = type(exc).__name__


empty.spawn("n1", empty_key)
empty.run(until=1)
empty.close()
errors["a ref to an empty key"] = empty.results["empty key"]
for name, error in errors.items():
    print(f"{name:<32} {error}")
""")

code("""
assert errors == {"list on a system not started": "SchedulerNotStarted", "cancel on a system not started": "SchedulerNotStarted",
                  "a ref to an empty key": "InvalidIdentity"}
assert issubclass(casty.SchedulerNotStarted, casty.NotStarted) and issubclass(casty.InvalidIdentity, ValueError)
print("the seed's error list, each one a typed casty error")
""")

md("""
## 2. A tick reactivates an idle key; a short interval keeps it alive

Unlike an actor schedule (chapter 03: the clock alone does not start a key), a node schedule's tick is a plain
`tell` from outside the key: *a grain that passivated since the previous tick is activated again by the delivery*,
and *an interval shorter than the grain's deactivation timeout keeps the grain alive*. Two keys idle out after 15 s
without a message; `sparse` gets a tick every 35 s, `dense` every 10 s.

**Predict:** over 130 s, how many activations does each key have?
""")

code("""
@actor(initial=0, idle_after=timedelta(seconds=15))
async def idler(ctx: Context[int, Tick]) -> None:
    \"\"\"Counts ticks; idles out 15 s after its last message.\"\"\"
    async for msg in ctx.inbox:
        await ctx.state.update(lambda n: n + 1)


lively = sim.World(seed=0)
lively.add_node("n1")


async def register_two(system):
    await system.schedule(Tick("t"), system.ref(idler, "sparse"), timedelta(seconds=35), reference="every-35s")
    await system.schedule(Tick("t"), system.ref(idler, "dense"), timedelta(seconds=10), reference="every-10s")


lively.spawn("n1", register_two)
lively.run(until=130)
lively.close()
activation_timeline(lively.trace, title="idle_after = 15 s: every 35 s tick starts 'sparse' again; ticks every 10 s keep 'dense' alive")
""")

code("""
starts = {key: [round(r.t) for r in lively.trace.of("activation.started", key=key)] for key in ("sparse", "dense")}
idled = {key: [round(r.t) for r in lively.trace.of("activation.ended", key=key) if r.get("reason") == "idle"] for key in ("sparse", "dense")}
assert starts == {"sparse": [0, 35, 70, 105], "dense": [0]}, starts  # each sparse tick reactivates the key
assert idled == {"sparse": [15, 50, 85, 120], "dense": []}, idled  # 15 s after each tick it idles out; dense never does
print("activations:", starts, "| idled out:", idled)
""")

md("""
## 3. A failing handler is a dead letter; a tick that cannot be handed over is lost

The seed separates two failures. A handler that **raises** on a scheduled message: the failure is recorded as a
**dead letter** naming the schedule, nothing is retried. A tick that cannot even be **handed over** (here: the
key's mailbox holds one message and is full, because the handler takes 25 s and ticks come every 10 s): that tick
is **lost**, nobody is told, and the schedule keeps firing. (The tick that finds a place waits: ticks of a slow handler queue in
its mailbox.)

**Predict:** over 60 s, with ticks every 10 s, how many dead letters for the failing key? How many ticks lost for
the slow key, and which? (The slow key handles the 10 s tick until 35 s; one message may wait meanwhile.)
""")

code("""
@actor(initial=0)
async def fragile(ctx: Context[int, Tick]) -> None:
    \"\"\"Fails on every tick.\"\"\"
    async for msg in ctx.inbox:
        raise RuntimeError(f"cannot handle {msg.what}")


@actor(initial=0, mailbox=1)
async def slow(ctx: Context[int, Tick]) -> None:
    \"\"\"Takes 25 s per tick; its mailbox holds one waiting message.\"\"\"
    async for msg in ctx.inbox:
        await asyncio.sleep(25)
        await ctx.state.update(lambda n: n + 1)


failures = sim.World(seed=0)
failures.add_node("n1")


async def register(system):
    await system.schedule(Tick("t"), system.ref(fragile, "f"), timedelta(seconds=10), reference="to-fragile")
    await system.schedule(Tick("t"), system.ref(slow, "s"), timedelta(seconds=10), reference="to-slow")


failures.spawn("n1", register)
failures.run(until=65)
failures.close()
dead = failures.trace.of("dead_letter")
lost = failures.trace.of("node_schedule.tick_lost")
print(f"dead letters: {len(dead)}, e.g. {dict(dead[0].fields) if dead else None}")
print(f"ticks lost:   {len(lost)}, e.g. reason {lost[0].get('reason') if lost else None!r}")
ticks_chart(failures.trace, title="Every 10 s: to-fragile's ticks are told and fail (dead letters); to-slow loses 2 ticks to its full mailbox")
""")

code("""
assert len(dead) == 6 and {d.get("origin") for d in dead} == {"node-schedule:to-fragile"}  # one per tick, none retried
assert len(failures.trace.of("node_schedule.fired", reference="to-fragile")) == 6
slow_told = failures.trace.of("node_schedule.fired", reference="to-slow")
assert [round(x.t) for x in lost] == [30, 50] and all("MailboxFull" in x.get("reason") for x in lost), [(x.t, x.get("reason")) for x in lost]
assert len(slow_told) + len(lost) == 6  # the interval kept firing after every loss
handled = [round(r.t) for r in failures.trace.of("write.confirmed", key="s") if tuple(r.get("pages")) == ("state",)]
assert handled == [35, 60]  # the 20 s tick queued in the mailbox behind the 10 s one: handled at 60 s, after 25 s more
print(f"6 dead letters from 'to-fragile'; 'to-slow': {len(slow_told)} told, {len(lost)} lost (mailbox full), none retried")
""")

md("""
## 4. A node restart loses node schedules (and timers); an actor schedule survives

One key, three kinds of periodic work, each every 10 s: a persisted **actor schedule** (`ctx.schedule`), an
**activation timer** (`ctx.timer`) and a **node schedule** (`system.schedule`, registered by `n1`). The key is
durable. `n1` crashes at 65 s and restarts at 80 s.

**Predict:** which lanes go on after the restart?

The picture is `catchup_chart(trace, lanes="all")`: one lane per periodic thing, labelled by its kind and the key
as `type["key"]` (`timer  counted["k"] / volatile` is the timer `volatile` of the key `k`), each occurrence marked as
the occurrence ledger classifies it (on time, late, caught up and how many it skipped, missed).
""")

code("""
restart = scenarios.run("timers-vs-schedules", seed=0)
print("checks hold:", restart.ok)
print("beats by source before the crash:", restart.world.results["before"])
print("beats by source after the restart:", restart.world.results["after"])
catchup_chart(restart.trace, lanes="all", title="timers-vs-schedules: n1 crashes at 65 s, restarts at 80 s; only the actor schedule ticks on")
""")

code("""
crash_t = restart.trace.of("fault.crash")[0].t
after = {source: sum(1 for row in rows if row.kind.endswith("fired") and row.t > crash_t)
         for (node, source), rows in tick_rows(restart.trace).items()}
assert after == {"counted[k] · actor schedule 'persisted'": 12, "node schedule 'node-beat'": 0, "counted[k] · timer 'volatile'": 0}, after
assert restart.world.results["before"] == {"schedule": 6, "timer": 6, "node": 6}
assert restart.world.results["after"] == {"schedule": 16, "timer": 6, "node": 6}
lanes_after = {lane.label: [o.cls for o in lane.occurrences if o.at_ns > crash_t * 1e9] for lane in periodic_lanes(restart.trace)}
assert lanes_after['schedule  counted["k"] / persisted'].count("caught up") == 1  # the downtime's due, delivered late at the restart
assert lanes_after['timer  counted["k"] / volatile'] == [] and lanes_after['node schedule  n1 / node-beat → counted["k"]'] == []
print("after the restart:", after)
""")

md("""
The seed's table says *node restart: both lost* for grain timers and grain schedules. The actor schedule is
different in kind: it is part of the key's saved state, so the key's `@active` marker brings the key back and its
`@schedules` page re-arms the timer (the downtime's due is skipped once).

## 5. Paused node: one late tick, no burst

A node schedule every 10 s, and the node **paused** from 25 s to 85 s (a long GC pause, a frozen VM).

**Predict:** at the resume, how many ticks are told at once?
""")

code("""
paused = scenarios.run("node-pause-catch-up", seed=0)
print("checks hold:", paused.ok)
ticks_chart(paused.trace, title="node-pause-catch-up: n1 paused 25-85 s; one late tick at the resume, the missed ones skipped")
""")

code("""
told = [round(row.t) for row in paused.trace.of("node_schedule.fired")]
(caught,) = paused.trace.of("node_schedule.caught_up")
assert told == [10, 20, 85, 90, 100, 110, 120] and caught.get("skipped") == 5, (told, caught.get("skipped"))
print("told at", told, "| skipped at the resume:", caught.get("skipped"))
""")

md("""
## 6. In a cluster, an interval is node-local

The seed: *ScheduleGrain and ScheduleGrainOnce stay node-local. The same schedule registered on several nodes
delivers once per node per tick, all to the single activation of the grain.* Three nodes register the same
interval (every 5 s, same reference) for one key.

**Predict:** per tick, how many times is the key told?
""")

code("""
per_node = scenarios.run("interval-per-node", seed=0)
print("checks hold:", per_node.ok, "| pings counted by the key:", per_node.world.results["pings"])
ticks_chart(per_node.trace, title="interval-per-node: each of n1, n2, n3 tells every tick: 3 deliveries per tick")
""")

code("""
fired = per_node.trace.of("node_schedule.fired")
per_node_told = {name: sum(1 for row in fired if row.node == name) for name in ("n1", "n2", "n3")}
assert per_node_told == {"n1": 6, "n2": 6, "n3": 6}  # each node runs its own trigger (its own grid, from its registration)
assert not per_node.trace.of("node_schedule.claim_won", "node_schedule.claim_lost")  # no claim: intervals are node-local
assert sum(per_node.world.results["pings"].values()) == len(fired) == 18  # the one key counted every delivery
print(f"every 5 s period told once by each node: {per_node_told}, {len(fired)} deliveries to one key")
""")

md("""
## 7. A cron in a cluster: one claim per tick

A cron is different: *ScheduleGrainWithCron delivers exactly once per tick across the cluster. Every node that
registers the schedule runs its own cron trigger; before delivery each node races to claim the tick, and only the
winner tells.* The claim is a put-if-absent of the key `schedule-fire::<reference>@<tick in UTC>` (itself a replicated
casty key), so a reference is required (`ScheduleReferenceRequired` without one). The three nodes' clocks are skewed
by up to 2 s, so they reach each tick at different true times.

**Predict:** which node wins the claims? Always the same one?

(The nodes cancel the cron at 45 s; the scenario runs on to 110 s so that every claim key expires, 1 min after its
tick, which its second check reads. Nothing happens on the schedule's rows after the cancel, so the chart's axis
stops there and its label says where the run ended.)
""")

code("""
cron = scenarios.run("cron-single-fire", seed=0)
print("checks hold:", cron.ok, "| pings counted by the key:", cron.world.results["pings"])
ticks_chart(cron.trace, title="cron-single-fire: every tick claimed by all three nodes, won by one (filled), told once")
""")

code("""
won = cron.trace.of("node_schedule.claim_won")
lost_claims = cron.trace.of("node_schedule.claim_lost")
told = cron.trace.of("node_schedule.fired")
ticks = sorted({row.get("tick_us") for row in won + lost_claims})
assert all(sum(1 for row in told if row.get("tick_us") == tick) == 1 for tick in ticks)  # each tick told exactly once
assert {row.node for row in won} == {"n3"} and {row.get("winner") for row in lost_claims} == {"n3"}
offsets = {row.node: row.wall_us - cron.world.epoch_us - row.t_ns // 1000 for row in cron.trace.of("node.started")}  # wall - true
assert max(offsets, key=offsets.get) == "n3"  # the node whose clock is furthest ahead reaches each tick first
assert all(row.t_ns // 1000 < int(row.get("tick_us")) - cron.world.epoch_us for row in told)  # so each tick is told early in true time
from datetime import datetime, timezone
for row in won + lost_claims:  # each claim is keyed on the reference and the tick, named in UTC whatever the node's clock
    utc = datetime.fromtimestamp(row.get("tick_us") / 1e6, tz=timezone.utc).isoformat()
    assert row.get("claim") == f"schedule-fire::report-every-5s@{utc}", row.get("claim")
print(f"{len(ticks)} ticks, each told once; every claim won by n3, the node whose clock runs furthest ahead")

# and a cron in cluster mode without a reference is refused at once: the claim is keyed on the reference
from sim.scenarios.cluster import CLUSTER  # the cluster scenarios' settings

lone = sim.World(seed=0)
lone.add_node("n1", cluster=CLUSTER)


async def no_reference(system):
    try:
        await system.schedule_cron(Tick("cron"), system.ref(inbox, "k"), "0/5 * * * * ?")
        lone.results["no reference"] = "accepted"
    except casty.CastyError as exc:
        lone.results["no reference"] = type(exc).__name__


lone.spawn("n1", no_reference)
lone.run(until=1)
lone.close()
assert lone.results["no reference"] == "ScheduleReferenceRequired"
print("schedule_cron without reference= in cluster mode:", lone.results["no reference"])
""")

md("""
First writer wins, and the first writer is the node whose clock reaches the tick first: with skewed clocks, the
node that is **ahead** wins every tick, and delivers it early in true time (chapter 05).

## 8. The winner crashes between its claim and its tell

The seed: *the winner crashing between claim and tell loses that tick cluster-wide*. Claims are never deleted, so
nobody else may tell it.

**Predict:** `n1` (the clock ahead) wins the claim of the tick at 0:25 and crashes before telling. Does another
node deliver that tick? Do the later ticks arrive?
""")

code("""
crash = scenarios.run("cron-claim-winner-crash", seed=0)
print("checks hold:", crash.ok, "| pings counted by the key:", crash.world.results["pings"])
ticks_chart(crash.trace, title="cron-claim-winner-crash: n1 wins the 0:25 tick and crashes; nobody tells it; n2 takes the later ticks")
""")

code("""
chosen = crash.world.results["chosen_tick_us"]
assert not crash.trace.of("node_schedule.fired", tick_us=chosen)  # the tick is lost cluster-wide
losers = crash.trace.of("node_schedule.claim_lost", tick_us=chosen)
assert sorted(row.node for row in losers) == ["n2", "n3"] and {row.get("winner") for row in losers} == {"n1"}
later = sorted({row.get("tick_us") for row in crash.trace.of("node_schedule.fired") if row.get("tick_us") > chosen})
assert len(later) == 4 and {row.node for row in crash.trace.of("node_schedule.fired") if row.get("tick_us") > chosen} == {"n2"}
print("the 0:25 tick: claimed by n1, lost by n2 and n3 to it, told by nobody; the 4 later ticks told by n2")
""")

md("""
## 9. Cancel stops one node's trigger; a tick already told is not recalled

The seed: *CancelSchedule stops future ticks. A tick that already handed its message to the grain is not
recalled* and *CancelSchedule only stops the trigger on the node where it is called, for cron as for interval
schedules.* Three nodes register the same interval (every 5 s, reference `every-5s`) for one key, whose handler takes
1 s per tick; at 17.2 s, 0.2 s after the 17 s ticks were told, `n1` cancels `every-5s`.

**Predict:** do `n2` and `n3` still tell ticks after 17.2 s? Is the tick `n1` told at 17 s handled, and when?
""")

code('''
from matplotlib.figure import Figure


@actor(initial=0)
async def worker(ctx: Context[int, Tick]) -> None:
    """Takes 1 s per tick, then records it as handled (an effect row naming the node whose trigger told it)."""
    async for msg in ctx.inbox:
        await asyncio.sleep(1)
        await ctx.state.update(lambda n: n + 1)
        ctx.effect("handled", told_by=msg.what)


def cancel_on_one_node(cancel_at=17.2, until=32):
    """Three nodes, the same interval on each from 2 s; n1 cancels it at cancel_at; each node lists its schedules after."""
    world = sim.World(seed=0)
    for name in ("n1", "n2", "n3"):
        world.add_node(name, cluster=CLUSTER)

    def register(node):
        async def go(system):
            await system.schedule(Tick(node), system.ref(worker, "w"), timedelta(seconds=5), reference="every-5s")
        world.spawn(node, go)

    def cancel_and_list(node, cancel):
        async def go(system):
            if cancel:
                system.cancel_schedule("every-5s")
            world.results[f"listed on {node}"] = [s.reference for s in system.list_schedules()]
        world.spawn(node, go)

    def script(world):
        yield world.timeout(2.0)                       # membership converges
        for name in ("n1", "n2", "n3"):
            register(name)
        yield world.timeout(cancel_at - world.now)
        world.results["cancel_at"] = world.now
        for name in ("n1", "n2", "n3"):
            cancel_and_list(name, cancel=name == "n1")   # cancelled on n1 only

    world.process(script(world))
    world.run(until=until)
    world.close()
    return world


def told_and_handled(trace, cancel_at, title):
    """One lane per node: a dot when its trigger told a tick, a square when the key was done handling that tick."""
    nodes = ["n1", "n2", "n3"]
    fig = Figure(figsize=(10, 2.6), layout="constrained")
    ax = fig.add_subplot()
    for y, node in enumerate(nodes):
        told = [r.t for r in trace.of("node_schedule.fired", node=node)]
        handled = [r.t for r in trace.of("effect") if r.get("details")["told_by"] == node]
        ax.scatter(told, [y] * len(told), s=42, color="#0072B2", zorder=3, label="told by the node's trigger" if y == 0 else None)
        ax.scatter(handled, [y] * len(handled), marker="s", s=36, facecolors="white", edgecolors="#009E73", linewidths=1.5,
                   zorder=3, label="handled by the key\\n(1 s each, one at a time)" if y == 0 else None)
        for t0, t1 in zip(told, handled):
            ax.annotate("", xy=(t1, y), xytext=(t0, y), arrowprops={"arrowstyle": "->", "color": "#999999"}, zorder=2)
    ax.axvline(cancel_at, color="#D55E00", ls="--", lw=1.5)
    ax.text(cancel_at, -0.6, " n1: cancel_schedule", color="#D55E00", fontsize=9, va="bottom")
    ax.set_yticks(range(len(nodes)), [f"{n}  'every-5s'" for n in nodes])
    ax.set_ylim(len(nodes) - 0.5, -0.8)
    ax.set_xlim(0, max(r.t for r in trace.of("effect")) + 2)
    ax.set_xlabel("true time since start (s)")
    ax.set_title(title, loc="left")
    ax.grid(axis="x", color="#DDDDDD")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False, fontsize=9)
    return fig


cancelled = cancel_on_one_node()
cancel_at = cancelled.results["cancel_at"]
print({node: cancelled.results[f"listed on {node}"] for node in ("n1", "n2", "n3")})
told_and_handled(cancelled.trace, cancel_at,
                 "cancelled on n1 at 17.2 s: n1 tells no more, n2 and n3 go on; n1's 17 s tick is still handled (at 20 s)")
''')

code('''
trace = cancelled.trace
told = {node: [round(r.t, 3) for r in trace.of("node_schedule.fired", node=node)] for node in ("n1", "n2", "n3")}
assert told["n1"] == [7.0, 12.0, 17.0] and all(t < cancel_at for t in told["n1"])          # n1's trigger stopped
assert told["n2"] == told["n3"] == [7.0, 12.0, 17.0, 22.0, 27.0]                         # the others' did not
assert [cancelled.results[f"listed on {n}"] for n in ("n1", "n2", "n3")] == [[], ["every-5s"], ["every-5s"]]
handled = {node: [r.t for r in trace.of("effect") if r.get("details")["told_by"] == node] for node in ("n1", "n2", "n3")}
assert {node: len(ts) for node, ts in handled.items()} == {node: len(ts) for node, ts in told.items()}   # every tick told was handled once
assert handled["n1"][-1] > cancel_at + 2                                                  # n1's 17 s tick: handled after the cancel
print(f"n1's last tick, told at {told['n1'][-1]} s, handled at {handled['n1'][-1]:.2f} s: not recalled by the cancel at {cancel_at} s")
''')

md("""
## What to take away

* A node schedule is the registering node's memory: a restart loses it (register it again at boot:
  `World.on_start` in the simulator, your service's startup code in production); a paused node tells one late tick.
* A failing handler leaves a dead letter, a tick that cannot be handed over is lost; neither is retried.
* Interval and one-shot are node-local: registered on three nodes, told three times per tick. A cron is claimed per
  tick and told once, by the node whose clock reaches the tick first; if that node dies between claim and tell, the
  tick is lost for everyone.
* `cancel_schedule` stops the trigger of the node it is called on, and only future ticks: the other nodes' triggers
  go on, and a tick already told is still handled.

**Try it:** in `api_tour`, register `schedule_cron` without `reference=`. On a single node it is accepted. Why would
a cluster refuse it (`ScheduleReferenceRequired`)?
""")

for i, cell in enumerate(cells):
    cell["id"] = f"node-schedules-{i:02d}"  # stable ids: rebuilding gives the same file
nb = nbf.v4.new_notebook()
nb["cells"] = cells
nb["metadata"]["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
nb["metadata"]["language_info"] = {"name": "python"}
nbf.write(nb, "notebooks/06_node_schedules.ipynb")
print("wrote notebooks/06_node_schedules.ipynb")
