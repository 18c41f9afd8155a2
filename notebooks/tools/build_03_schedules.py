"""Writes notebooks/03_schedules.ipynb from this script (run from the project root), so its source can be reviewed as Python.

Chapter 03 of the course: persisted schedules and catch-up, on one node (the schedules seed). Each claim: a sentence,
a prediction, a run on virtual time, a picture, an assert cell on the trace.
"""
import nbformat as nbf

cells = []
md = lambda s: cells.append(nbf.v4.new_markdown_cell(s.strip()))
code = lambda s: cells.append(nbf.v4.new_code_cell(s.strip()))

md("""
# 03 · Persisted schedules and catch-up

*About 15 minutes. Read chapters 01 and 02 first.*

> *A schedule sends a message to its actor at a wall-clock time, once or periodically. It is saved with the actor's
> state, so the current owner can resume it after a restart or ownership change.*

`await ctx.schedule(name, delay, interval, message)` creates or replaces the schedule `name` of this key: first due
after `delay`, then every `interval` (`None`: once). It is stored in the key's `@schedules` page (name, message, next
due time, period), written like state. Each firing **tells** the message to the key and **writes the next due time**.

Three views read the trace here:

* the **catch-up chart** of one schedule: the light vertical lines are its nominal due times (the *grid*), a blue dot
  a delivery, in two lanes: true time (what really happened) and the node's wall clock (what the node read; schedules
  are wall-clock times). A hollow red-orange (vermillion) X is an occurrence **skipped** by the catch-up rule;
* the **activation timeline** of chapter 02: one bar per run of a key;
* the **ticks chart**: every periodic delivery the runtime made, one row per schedule or timer, with the node's faults.

Every run is one simulated node on virtual time: a day takes milliseconds.
""")

code('''
%matplotlib inline
import asyncio
from dataclasses import dataclass
from datetime import timedelta

from IPython.display import display
from matplotlib.figure import Figure

import sim
from casty import Askable, Context, Ref, actor
from sim.viz import activation_timeline, catchup_chart, ticks_chart
from sim.viz.data.periodic import periodic_lanes

S = 1_000_000   # microseconds in a second: schedule rows carry wall-clock times in µs since the Unix epoch


def run(main, *, until, faults=None, seed=0, **node):
    """A world with one node n1 (ActorSystem options in **node); main(system, world) runs on it; returns the world."""
    world = sim.World(seed=seed)
    world.add_node("n1", **node)
    world.spawn("n1", main, world)
    if faults is not None:
        world.process(faults(world))
    world.run(until=until)
    world.close()
    return world


def since_start(world, wall_us):
    """A wall-clock time of the node (µs since the epoch) as seconds since the run began (the node's clock is exact here)."""
    return round((wall_us - world.epoch_us) / S, 4)


def fired(world, name):
    """(true time s, due s, wall now s) of every delivery of the schedule `name`, times as seconds since the start."""
    return [(round(r.t, 4), since_start(world, r.get("due_us")), since_start(world, r.get("now_us")))
            for r in world.trace.of("schedule.fired", name=name)]


@dataclass(frozen=True)
class Every(Askable[None]):
    """Create or replace the schedule `name`: first after `delay`, then every `interval` (None: once)."""
    name: str
    delay: timedelta
    interval: timedelta | None


@dataclass(frozen=True)
class Cancel(Askable[bool]):
    name: str


@dataclass(frozen=True)
class Beat:
    name: str


@dataclass(frozen=True)
class Count(Askable[int]):
    pass


async def beats(ctx):
    """The body shared by this chapter's beaters: arm, cancel, count beats."""
    async for msg in ctx.inbox:
        match msg:
            case Every(name, delay, interval, reply_to=reply_to):
                await ctx.schedule(name, delay, interval, Beat(name))
                reply_to.tell(None)
            case Cancel(name, reply_to=reply_to):
                handle = ctx.schedules.get(name)
                if handle is not None:
                    await handle.cancel()
                reply_to.tell(handle is not None)
            case Beat():
                await ctx.state.update(lambda n: n + 1)
            case Count(reply_to=reply_to):
                reply_to.tell(ctx.state.value)


@actor(initial=0)
async def beater(ctx: Context[int, Every | Cancel | Beat | Count]) -> None:
    await beats(ctx)
''')

# ----------------------------------------------------------------------------------------------------------------
md("""
## 1. A one-shot schedule: the seed's program

> *`delay` sets its first due time; `interval=None` makes it a one-shot schedule.* … *It prints 1 after the scheduled
> Tick is processed. The actor continues reading its mailbox after handling Start; it answers that request later
> through the ref carried by Tick.*

This is the program of the schedules documentation, unchanged: `Start` schedules a `Tick` 10 ms ahead, carrying the
ask's reply target; the `Tick` answers it.

**Predict.** What does the ask return, and when (in simulated time)? After it fired, is the schedule still there?
""")

code('''
@dataclass(frozen=True)
class Start(Askable[int]):
    pass


@dataclass(frozen=True)
class Tick:
    reply_to: Ref[int]


@actor(initial=0)
async def ticker(ctx: Context[int, Start | Tick]) -> None:
    async for msg in ctx.inbox:
        match msg:
            case Start(reply_to=reply_to):
                await ctx.schedule("tick", timedelta(milliseconds=10), None, Tick(reply_to))
            case Tick(reply_to):
                total = await ctx.state.update(lambda value: value + 1)
                reply_to.tell(total)


async def main(system, world):
    ticks = system.ref(ticker, "ticks")
    world.results["printed"] = await ticks.ask(Start())
    world.results["at"] = round(world.now, 4)


w1 = run(main, until=1)
print(w1.results)
for row in w1.trace.of("schedule.*"):
    print(f"{row.t:.4f} s  {row.kind:<18} due at {since_start(w1, row.get('due_us')) if row.get('due_us') else ''}"
          f"  {row.get('reason') or ''}")
catchup_chart(w1.trace, schedule="tick", title="ticker['ticks']: one delivery, 10 ms after Start")
''')

code('''
armed = w1.trace.of("schedule.armed", name="tick")
assert [(r.get("every_us"), since_start(w1, r.get("due_us"))) for r in armed] == [(None, 0.0102)]   # once, 10 ms on
assert fired(w1, "tick") == [(0.0102, 0.0102, 0.0102)]                      # delivered at its due time, once
assert [r.get("reason") for r in w1.trace.of("schedule.cancelled")] == ["done"]   # a one-shot is gone once fired
assert w1.results == {"printed": 1, "at": fired(w1, "tick")[0][0]}   # the Tick answered the ask, 10 ms after Start
print("holds: prints 1, 10 ms later; the one-shot removed itself")
''')

# ----------------------------------------------------------------------------------------------------------------
md("""
## 2. An interval schedule stays on its grid

> *A `timedelta` interval repeats it.* … *Intervals follow the stored due time.*

**Predict.** `Every("beat", delay=5 s, interval=10 s)` at time 0. How many deliveries by 60 s, at which times?
""")

code('''
async def main(system, world):
    await system.ref(beater, "b").ask(Every("beat", timedelta(seconds=5), timedelta(seconds=10)))


w2 = run(main, until=60)
print(fired(w2, "beat"))
catchup_chart(w2.trace, schedule="beat", title="beater['b']: every 10 s from 5 s, each delivery on its grid line")
''')

code('''
assert fired(w2, "beat") == [(t + 0.0002, t + 0.0002, t + 0.0002) for t in (5, 15, 25, 35, 45, 55)]
nexts = [since_start(w2, r.get("next_us")) for r in w2.trace.of("schedule.fired")]
assert nexts == [t + 10.0002 for t in (5, 15, 25, 35, 45, 55)]             # each firing stores the next due
assert not w2.trace.of("schedule.caught_up")
print("holds: six deliveries, every 10 s from 5 s, each at its due time")
''')

# ----------------------------------------------------------------------------------------------------------------
md("""
## 3. Replace and cancel

> *A name identifies one schedule within one actor. Scheduling under an existing name replaces it.
> `ctx.schedules` maps names to handles; `await handle.cancel()` removes the corresponding schedule.* … *Creating,
> replacing or cancelling a schedule writes this page through the same state protocol as application state.*

The same `beat` every 10 s from 5 s; at 32 s the key is told `Every("beat", 4 s, 3 s)`; at 50 s `Cancel("beat")`.
Neither the replace nor the cancel delivers anything (each writes the `@schedules` page), so the chart marks them
with a line across both lanes: dashed where the schedule was replaced, solid where it was cancelled.

**Predict.** (a) Does the old 35 s occurrence still come after the replacement? (b) After the cancel at 50 s, how
many more beats? What does `Count` answer at 70 s?
""")

code('''
async def main(system, world):
    ref = system.ref(beater, "r")
    await ref.ask(Every("beat", timedelta(seconds=5), timedelta(seconds=10)))
    await asyncio.sleep(32 - world.now)
    await ref.ask(Every("beat", timedelta(seconds=4), timedelta(seconds=3)))    # same name: replaces
    await asyncio.sleep(50 - world.now)
    world.results["cancelled"] = await ref.ask(Cancel("beat"))
    await asyncio.sleep(70 - world.now)
    world.results["count"] = await ref.ask(Count())


def mark_changes(fig, world, name):
    """On both lanes of a catch-up chart, a labelled line where the schedule `name` was replaced or cancelled (its schedule.cancelled rows).

    The chart draws deliveries and the grid; the replace and the cancel write the @schedules page and fire nothing,
    so without these lines the picture would not show the two moments the text is about. Returns what it drew.
    """
    ax_t, ax_w = fig.axes[:2]   # the true-time lane, the wall-clock lane
    drawn = []
    for r in world.trace.of("schedule.cancelled", name=name):
        replaced = r.get("reason") == "replaced"
        text = f"replaced at {r.t:.0f} s" if replaced else f"cancelled at {r.t:.0f} s"
        for ax, x in ((ax_t, r.t), (ax_w, since_start(world, r.wall_us))):
            ax.axvline(x, color="#222222", lw=1.6, ls="--" if replaced else "-", zorder=4, gid=f"schedule.{r.get('reason')}")
        ax_t.annotate(text, (r.t, 0), xytext=(4 if replaced else -4, 14), textcoords="offset points", ha="left" if replaced else "right",
                      fontsize=8.5, fontweight="bold", color="#222222")   # the cancel's label left of its line: the lane ends there
        drawn.append((round(r.t), r.get("reason"), text))
    return drawn


w3 = run(main, until=75)
print(w3.results, [round(t) for t, *_ in fired(w3, "beat")])
fig3 = catchup_chart(w3.trace, schedule="beat", title="beater['r']: replaced at 32 s (every 3 s from 36 s), cancelled at 50 s")
changes = mark_changes(fig3, w3, "beat")
fig3
''')

code('''
times = [round(t, 1) for t, *_ in fired(w3, "beat")]
cancels = [(round(r.t), r.get("reason")) for r in w3.trace.of("schedule.cancelled")]
# (a) replaced: the old grid (next: 35 s) is gone, the new one starts at 32 + 4 = 36 s
assert cancels[0] == (32, "replaced"), cancels
assert times[:3] == [5.0, 15.0, 25.0] and 35.0 not in times, times
assert times[3:] == [36.0, 39.0, 42.0, 45.0, 48.0], times
# (b) cancelled: nothing after 50 s
assert cancels[1] == (50, "cancelled") and w3.results == {"cancelled": True, "count": 8}, (cancels, w3.results)
# the picture marks both moments, at the trace's times (dashed: replaced, solid: cancelled)
assert changes == [(32, "replaced", "replaced at 32 s"), (50, "cancelled", "cancelled at 50 s")], changes
assert all(t < 50 for t in times)
# creating, replacing and cancelling each wrote the @schedules page, like a state write (and so did every firing)
page_writes = [round(r.t, 1) for r in w3.trace.of("write.confirmed") if "@schedules" in r.get("pages")]
assert {0.0, 32.0, 50.0} <= set(page_writes) and set(page_writes) - {0.0, 32.0, 50.0} == set(times), page_writes
print("holds: the replacement took the old schedule's place; the cancel removed it")
''')

md("""
(Note the **45 s** beat in the list: it is the new grid's 36 + 3 × 3, not the old grid's 35 + 10.)
""")

# ----------------------------------------------------------------------------------------------------------------
md("""
## 4. A schedule keeps its key alive

> *An actor with schedules does not idle out while waiting for its next occurrence.*

Two keys of a type that idles after **5 s**. `"with"` has a schedule every 30 s (much longer than 5 s), `"without"` has
none. At 70 s, `"with"`'s schedule is cancelled.

**Predict.** Does `"with"` go idle between its occurrences (at 5 s, 35 s, …)? When does each key's activation end?
""")

code('''
@actor(initial=0, idle_after=timedelta(seconds=5))
async def sleepy(ctx: Context[int, Every | Cancel | Beat | Count]) -> None:
    await beats(ctx)


async def main(system, world):
    await system.ref(sleepy, "with").ask(Every("beat", timedelta(seconds=30), timedelta(seconds=30)))
    await system.ref(sleepy, "without").ask(Count())
    await asyncio.sleep(70 - world.now)
    await system.ref(sleepy, "with").ask(Cancel("beat"))


w4 = run(main, until=90)
activation_timeline(w4.trace, title="sleepy (idle after 5 s): 'with' stays active while it has a schedule")
''')

code('''
ends = [(r.get("key"), round(r.t), r.get("reason")) for r in w4.trace.of("activation.ended")]
starts = [r.get("key") for r in w4.trace.of("activation.started")]
assert starts == ["with", "without"], starts                       # one activation each, no restart
assert ends == [("without", 5, "idle"), ("with", 75, "idle")], ends  # 'with': idle only 5 s after the cancel
assert [round(t) for t, *_ in fired(w4, "beat")] == [30, 60]
print("holds: a 30 s schedule kept a 5 s-idle key active for 70 s; without it the key idled at once")
''')

# ----------------------------------------------------------------------------------------------------------------
md("""
## 5. The clock alone does not start a key

> *A stored schedule is nevertheless not an independent activation service: an inactive key starts through a ref,
> a message or recovery of its active marker. The clock alone does not start an inactive key.* … *A time that passed
> while no node ran the key fires once, immediately, on reactivation.*

A key with a 10 s schedule is **released** at 12 s (`system.release`: deactivated as if it were idle). At 95 s the
client asks it `Count()`.

**Predict.** How many beats between 12 s and 95 s? What happens at 95 s: nothing, one beat, or the eight missed
beats in a burst? When is the next beat after that?
""")

code('''
async def main(system, world):
    ref = system.ref(beater, "asleep")
    await ref.ask(Every("beat", timedelta(seconds=10), timedelta(seconds=10)))
    await asyncio.sleep(12 - world.now)
    await system.release(beater, "asleep")
    await asyncio.sleep(95 - world.now)
    await ref.ask(Count())                 # a message: this starts the key
    await asyncio.sleep(1)
    world.results["count at 96 s"] = await ref.ask(Count())


w5 = run(main, until=115)
print(w5.results, [round(t) for t, *_ in fired(w5, "beat")])
display(activation_timeline(w5.trace, title="beater['asleep']: released at 12 s, started again only by the ask at 95 s"))
catchup_chart(w5.trace, schedule="beat", title="beater['asleep']: nothing while inactive; one late beat at 95 s, then back on the grid")
''')

code('''
times = [round(t, 3) for t, *_ in fired(w5, "beat")]
runs = [round(r.t) for r in w5.trace.of("activation.started")]
assert runs == [0, 95], runs                                        # no activation between 12 s and 95 s
assert not [t for t in times if 12 < t < 95], times                  # so no beat either
caught = w5.trace.of("schedule.caught_up")
assert len(caught) == 1 and round(caught[0].t) == 95 and caught[0].get("skipped") == 7   # 20..90 s: 8 dues, 1 fired, 7 skipped
assert [round(t) for t in times] == [10, 95, 100, 110], times    # one immediate beat, then the grid again
assert w5.results["count at 96 s"] == 2                              # the 10 s beat and the late one
print("holds: the clock did not start the key; at reactivation the missed time fired once")
''')

# ----------------------------------------------------------------------------------------------------------------
md("""
## 6. A paused node: one late delivery, no burst

> *If execution resumes late, the runtime advances to the first interval after the current time rather than
> emitting every missed occurrence in a burst.*

The rule: a firing at wall time `now` of a due `due` sets `next = due + every * (max(0, now - due) // every + 1)`.
The node is **paused** (a stop-the-world pause: a long GC, a frozen VM) from 35 s to 97 s under a 10 s schedule.

**Predict.** At 97 s, how many beats are delivered? Which due is the next one?
""")

code('''
async def main(system, world):
    await system.ref(beater, "paused").ask(Every("beat", timedelta(seconds=10), timedelta(seconds=10)))


def faults(world):
    yield world.timeout(35)
    world.pause("n1")
    yield world.timeout(62)
    world.resume("n1")


w6 = run(main, until=118, faults=faults)
catchup_chart(w6.trace, schedule="beat", title="beater['paused']: paused 35-97 s; one late delivery, five skipped")
''')

code('''
caught = w6.trace.of("schedule.caught_up")
assert len(caught) == 1
row = caught[0]
due, now, every, nxt = row.get("due_us"), row.get("now_us"), 10 * S, row.get("next_us")
assert nxt == due + every * (max(0, now - due) // every + 1)            # the rule, on the trace's numbers
assert (since_start(w6, due), round(since_start(w6, now)), since_start(w6, nxt), row.get("skipped")) == (40.0002, 97, 100.0002, 5)
at_resume = [t for t, *_ in fired(w6, "beat") if round(t) == 97]
assert len(at_resume) == 1                                              # one delivery, not a burst of six
print("holds: the 40 s due was delivered once at 97 s; 50..90 s were skipped; next at 100 s")
''')

# ----------------------------------------------------------------------------------------------------------------
md("""
## 7. Timers and `merge` tickers vanish with the activation

> *A timer inside a body's TaskGroup instead belongs to that run. It disappears when the body ends and has no stored
> schedule to recover. `ctx.merge` with a ticker can serve that per-run use case; `ctx.schedule` records work that
> should follow saved actor state.*

One key, three kinds of periodic work, each every 10 s: a persisted **schedule** (`ctx.schedule`), an activation
**timer** (`ctx.timer`: volatile, ends with the activation) and a **merge ticker** (`ctx.merge` of an async
generator). The type is `durable="write"`, so its pages are on the node's disk and its `@active` marker brings it
back after a restart. The node crashes at 65 s and restarts at 80 s. Each beat is recorded with `ctx.effect`.

The first picture is `catchup_chart(trace, lanes="all")`: one lane per periodic thing the runtime fires, each
occurrence marked as the occurrence ledger classifies it (on time, caught up, missed); the second shows what the body
handled, the merged ticker included.

**Predict.** After the restart, which of the three keep beating?
""")

code('''
@dataclass(frozen=True)
class ArmAll(Askable[None]):
    pass


async def ticker_stream():
    while True:
        await asyncio.sleep(10)
        yield Beat("merge")


@actor(initial=0, durable="write")
async def three(ctx: Context[int, ArmAll | Beat]) -> None:
    async for msg in ctx.inbox:
        match msg:
            case ArmAll(reply_to=reply_to):
                await ctx.schedule("schedule", timedelta(seconds=10), timedelta(seconds=10), Beat("schedule"))
                ctx.timer("timer", timedelta(seconds=10), timedelta(seconds=10), Beat("timer"))
                ctx.merge(ticker_stream())
                reply_to.tell(None)
            case Beat(source):
                ctx.effect("beat", source=source)


async def main(system, world):
    await system.ref(three, "k").ask(ArmAll())


def faults(world):
    yield world.timeout(65)
    world.crash("n1")
    yield world.timeout(15)
    world.restart("n1")


w7 = run(main, until=115, faults=faults)

SOURCES = ("schedule", "timer", "merge")


def beats_chart(trace, title):
    """One lane per kind of periodic work: a dot per beat the body handled; the node's crash and restart as lines."""
    fig = Figure(figsize=(10, 2.4), layout="constrained")
    ax = fig.add_subplot()
    colours = {"schedule": "#0072B2", "timer": "#E69F00", "merge": "#009E73"}
    for y, source in enumerate(SOURCES):
        xs = [r.t for r in trace.of("effect") if r.get("details")["source"] == source]
        ax.scatter(xs, [y] * len(xs), s=50, color=colours[source], zorder=3)
    for r in trace.of("fault.crash"):
        ax.axvline(r.t, color="#D55E00", lw=2)
        ax.text(r.t, -0.6, " crash", color="#D55E00", fontsize=9, va="center")
    for r in trace.of("fault.restart"):
        ax.axvline(r.t, color="#009E73", lw=2, ls="--")
        ax.text(r.t, -0.6, " restart", color="#009E73", fontsize=9, va="center")
    down = [(c.t, s.t) for c, s in zip(trace.of("fault.crash"), trace.of("fault.restart"))]
    for a, b in down:
        ax.axvspan(a, b, color="#D9D9D9", zorder=0)
    ax.set_yticks(range(len(SOURCES)), ["ctx.schedule (persisted)", "ctx.timer (this activation)", "ctx.merge (this run)"])
    ax.set_ylim(len(SOURCES) - 0.5, -0.9)
    ax.set_xlabel("true time (s) · a dot: one beat handled by the body · grey: the node is down")
    ax.set_title(title, loc="left")
    ax.grid(axis="x", color="#DDDDDD")
    return fig


display(catchup_chart(w7.trace, lanes="all", title="What the runtime fired, as the occurrence ledger reads it (a merged stream is the body's own, not in this view)"))
beats_chart(w7.trace, "What the body handled: after the restart only the persisted schedule beats")
''')

code('''
crash = w7.trace.of("fault.crash")[0].t
by_source = {s: [round(r.t) for r in w7.trace.of("effect") if r.get("details")["source"] == s] for s in SOURCES}
print(by_source)
assert all(by_source[s][:6] == [10, 20, 30, 40, 50, 60] for s in SOURCES)   # all three beat before the crash
assert [t for t in by_source["timer"] if t > crash] == []                   # the timer ended with the activation
assert [t for t in by_source["merge"] if t > crash] == []                   # so did the merged ticker
assert [t for t in by_source["schedule"] if t > crash] == [80, 90, 100, 110, 120, 130][: len(by_source["schedule"]) - 6]
assert len(by_source["schedule"]) > 6                                       # the schedule came back with the key
lanes_after = {lane.label: [o.cls for o in lane.occurrences if o.at_ns > crash * 1e9] for lane in periodic_lanes(w7.trace)}
schedule_after = lanes_after['schedule  three["k"] / schedule']
assert (schedule_after.count("caught up"), schedule_after.count("missed")) == (1, 1)  # 70 s late at the restart, 80 s skipped
assert lanes_after['timer  three["k"] / timer'] == []                              # the timer's lane ends at the crash
assert [r.get("reason") for r in w7.trace.of("timer.cancelled")] == ["ended"]
assert [round(r.t) for r in w7.trace.of("activation.started")] == [0, 80]  # back by its @active marker, no message
assert [(round(r.t), r.get("skipped")) for r in w7.trace.of("schedule.caught_up")] == [(80, 1)]   # 70 s and 80 s: one beat
print("holds: the timer and the merged ticker belonged to the run that died; the schedule was stored and resumed")
''')

md("""
At 80 s the schedule delivers **one** beat for the dues of 70 s and 80 s, which passed while the node was down: one
delivery and one skipped ("skipped 1" in the first chart), the catch-up rule of section 6; then it is back on its grid.
""")

# ----------------------------------------------------------------------------------------------------------------
md("""
## 8. A timer neither keeps its key alive nor starts it again

> *Grain timers vs grain schedules* … *Passivation: Grain timers: All cancelled on deactivation; never reactivate the
> grain.* … *Passivation clock: Grain timers: A tick does not refresh it unless WithTimerKeepAlive.*

casty's activation timers (`ctx.timer(name, delay, interval, message, keep_alive=False)`) follow these rules. Two keys
of the 5 s-idle type of section 4 each set a timer every 2 s: `"plain"` without `keep_alive`, `"kept"` with it. At
31 s `"kept"` cancels its timer.

**Predict.** Does `"plain"` go idle although its timer ticks every 2 s? After it went idle, does its timer start it
again? When does `"kept"` go idle?
""")

code('''
@dataclass(frozen=True)
class Tick2(Askable[None]):
    keep_alive: bool


@dataclass(frozen=True)
class StopTimer(Askable[None]):
    pass


@actor(initial=0, idle_after=timedelta(seconds=5))
async def timed(ctx: Context[int, Tick2 | StopTimer | Beat]) -> None:
    async for msg in ctx.inbox:
        match msg:
            case Tick2(keep_alive, reply_to=reply_to):
                ctx.timer("beat", timedelta(seconds=2), timedelta(seconds=2), Beat("timer"), keep_alive=keep_alive)
                reply_to.tell(None)
            case StopTimer(reply_to=reply_to):
                ctx.timers["beat"].cancel()
                reply_to.tell(None)
            case Beat():
                ctx.effect("beat", key=ctx.key)


async def main(system, world):
    await system.ref(timed, "plain").ask(Tick2(False))
    await system.ref(timed, "kept").ask(Tick2(True))
    await asyncio.sleep(31 - world.now)
    await system.ref(timed, "kept").ask(StopTimer())


w8 = run(main, until=60)
display(activation_timeline(w8.trace, title="timed (idle after 5 s): 'plain' idles while its timer ticks; 'kept' lives until its timer stops"))
ticks_chart(w8.trace, title="The timer ticks: 'plain' ticked at 2 s and 4 s, then its timer ended with its activation")
''')

code('''
ends = [(r.get("key"), round(r.t), r.get("reason")) for r in w8.trace.of("activation.ended")]
ticks = {k: [round(r.t) for r in w8.trace.of("timer.fired", key=k)] for k in ("plain", "kept")}
print(ends, ticks)
assert ends == [("plain", 5, "idle"), ("kept", 36, "idle")], ends    # plain: 5 s after its last message, ticks or not
assert ticks["plain"] == [2, 4]                                      # it ticked twice, then ended with its activation
assert [r.get("key") for r in w8.trace.of("activation.started")] == ["plain", "kept"]   # and never started a key again
assert ticks["kept"] == list(range(2, 31, 2))                        # keep_alive: each tick refreshed the idle clock
assert [(r.get("key"), r.get("reason")) for r in w8.trace.of("timer.cancelled")] == [("plain", "ended"), ("kept", "cancelled")]
print("holds: a timer tick refreshes the idle clock only with keep_alive, and a timer never restarts its key")
''')

md("""
## 9. A timer's name belongs to its key: the same name replaces it

> *References: Grain timers: Scoped to the grain; a duplicate replaces the timer. Grain schedules: Scoped to the
> node; a duplicate is rejected.*

A node schedule's reference is the node's (chapter 06 shows a second `schedule` under a live reference refused with
`ScheduleReferenceInUse`). A timer's name is the key's own. Keys `"a"` and `"b"` each set a timer `"beat"` every 2 s
at 0 s; at 5 s, `"a"` sets `"beat"` again, every 3 s.

**Predict.** After 5 s, how many timers does `"a"` have? When does it tick? Does `"b"`'s timer of the same name change?
""")

code('''
@dataclass(frozen=True)
class SetBeat(Askable[int]):
    every: float


@actor(initial=0)
async def retimed(ctx: Context[int, SetBeat | Beat]) -> None:
    async for msg in ctx.inbox:
        match msg:
            case SetBeat(every, reply_to=reply_to):
                step = timedelta(seconds=every)
                ctx.timer("beat", step, step, Beat("timer"))
                reply_to.tell(len(ctx.timers))        # how many timers the key has now
            case Beat():
                ctx.effect("beat", key=ctx.key)


async def main(system, world):
    a, b = system.ref(retimed, "a"), system.ref(retimed, "b")
    world.results["timers"] = [await a.ask(SetBeat(2)), await b.ask(SetBeat(2))]
    await asyncio.sleep(5 - world.now)
    world.results["timers"].append(await a.ask(SetBeat(3)))   # the same name again, on key a


w9 = run(main, until=15)
print("timers after each SetBeat:", w9.results["timers"])
ticks_chart(w9.trace, title="retimed: key a sets 'beat' again at 5 s (every 3 s), which replaces it; key b's 'beat' goes on")
''')

code('''
ticks = {k: [round(r.t) for r in w9.trace.of("timer.fired", key=k)] for k in ("a", "b")}
print(ticks)
assert w9.results["timers"] == [1, 1, 1]                       # one timer per key, also after the duplicate
assert ticks["a"] == [2, 4, 8, 11, 14]                         # every 2 s, then every 3 s from the replacement at 5 s
assert ticks["b"] == [2, 4, 6, 8, 10, 12, 14]                  # the same name on another key: its own timer
print("holds: a duplicate timer name replaces that key's timer; another key's timer of that name is untouched")
''')

md("""
## 10. A failing timer handler: a warning, and the timer goes on

> *Handler failure: Grain timers: Logged as a warning. Grain schedules: Recorded as a deadletter.*

A schedule's failed delivery is a `dead_letter` row naming its receiver (chapter 06, section 3). A timer's is not:
casty logs it as a **warning** on the `casty` logger (the standard `logging` module), and the body fails as for any
other message (section 3 of chapter 02: reported, backed off, restarted from the last saved state). The timer
belongs to the activation, not to the body's run, so the restart does not end it.

`beeper["b"]` sets a timer `"beat"` every second; each beat counts one in the state, and the third one raises.
A `logging.Handler` keeps what the `casty` logger says during the run.

**Predict.** After the failure at 3 s, does the timer still tick? Is anything recorded as a dead letter? What does
the count read at 7.5 s: 7, or 6 (the third beat's count was saved before the raise)?
""")

code('''
import logging


class Kept(logging.Handler):
    """Keeps every record it is given."""

    def __init__(self):
        super().__init__()
        self.records = []

    def emit(self, record):
        self.records.append(record)


@dataclass(frozen=True)
class StartBeats(Askable[None]):
    pass


@actor(initial=0)
async def beeper(ctx: Context[int, StartBeats | Beat | Count]) -> None:
    async for msg in ctx.inbox:
        match msg:
            case StartBeats(reply_to=reply_to):
                ctx.timer("beat", timedelta(seconds=1), timedelta(seconds=1), Beat("timer"))
                reply_to.tell(None)
            case Beat():
                await ctx.state.update(lambda n: n + 1)
                ctx.effect("beat", n=ctx.state.value)
                if ctx.state.value == 3:
                    raise RuntimeError("the third beat fails")
            case Count(reply_to=reply_to):
                reply_to.tell(ctx.state.value)


async def main(system, world):
    ref = system.ref(beeper, "b")
    await ref.ask(StartBeats())
    await asyncio.sleep(7.5 - world.now)
    world.results["count"] = await ref.ask(Count())


kept_log = Kept()
casty_log = logging.getLogger("casty")
casty_log.addHandler(kept_log)
try:
    w10 = run(main, until=8)
finally:
    casty_log.removeHandler(kept_log)
for record in kept_log.records:
    print(f"{record.levelname} {record.name}: {record.getMessage()}")


def timer_failure_chart(trace, records, key, title):
    """The key's runs as bars (one per lease), the timer's ticks as dots with the count each one saved, a failed
    handling as a red-orange X, and under it what the casty logger said; a dead letter would be a black square."""
    fig = Figure(figsize=(11, 2.6), layout="constrained")
    ax = fig.add_subplot()
    starts = trace.of("activation.started", key=key)
    ends = {r.get("lease"): r.t for r in trace.of("activation.failed", key=key) + trace.of("activation.ended", key=key)}
    end = trace.rows[-1].t
    for i, r in enumerate(starts):
        t1 = ends.get(r.get("lease"), end)
        ax.barh(1, t1 - r.t, left=r.t, height=0.35, color=["#0072B2", "#56B4E9"][i % 2], edgecolor="white")
        ax.text((r.t + t1) / 2, 1, f"run {i + 1} (lease {r.get('lease')})", ha="center", va="center", color="white", fontsize=9)
    ticks = [r.t for r in trace.of("timer.fired", key=key)]
    ax.scatter(ticks, [0] * len(ticks), s=50, color="#009E73", zorder=3, label="timer 'beat' fired")
    for row in trace.of("effect", key=key):
        ax.text(row.t, 0.18, f"n={row.get('details')['n']}", ha="center", va="bottom", fontsize=8)
    failed = trace.of("activation.failed", key=key)
    ax.scatter([r.t for r in failed], [0] * len(failed), s=110, marker="X", color="#D55E00", zorder=4,
               label="handler failed (body restarts after backoff)")
    dead = trace.of("dead_letter", key=key)
    ax.scatter([r.t for r in dead], [0] * len(dead), s=60, marker="s", color="black", zorder=4, label=f"dead letter ({len(dead)})")
    for r in failed:
        said = "; ".join(f"{rec.levelname} {rec.name}: {rec.getMessage()}" for rec in records)
        ax.annotate(said, (r.t, 0), xytext=(r.t, -0.55), ha="center", va="top", fontsize=8, color="#D55E00",
                    arrowprops=dict(arrowstyle="-", color="#D55E00", lw=0.8))
    ax.set_yticks([1, 0], ["activation", "timer ticks"])
    ax.set_ylim(-1.0, 1.5)
    ax.set_xlim(0, end * 1.02)
    ax.set_xlabel("true time since start (s)")
    ax.grid(axis="x", color="#EEEEEE")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
    ax.set_title(title, loc="left")
    return fig


timer_failure_chart(w10.trace, kept_log.records, "b",
                    "beeper['b']: the third beat fails at 3 s: a warning, a restart 0.1 s later, and the timer goes on")
''')

md("""
The warning names the key, the timer and the error. In the trace the failure is the body's (`activation.failed`, the
message `Beat`, retry in 0.1 s) and the `Beat` is dropped, as a failing message always is; there is **no dead letter**
(the black square is absent: 0). The count the third beat saved before raising stays (n=3, then 4): the state
write was confirmed before the raise. The timer was not cancelled by the restart: it is held by the activation,
which the failure does not end (an idle deactivation, a crash or a change of owner does: section 7).
""")

code('''
trace = w10.trace
warnings = [(r.levelname, r.name, r.getMessage()) for r in kept_log.records]
assert warnings == [("WARNING", "casty", "__main__:beeper['b']: timer beat: handler failed: RuntimeError('the third beat fails')")]
assert trace.of("dead_letter") == []                                        # a timer's failure is no dead letter
failed = trace.of("activation.failed", key="b")
assert [(round(r.t, 1), r.get("message"), r.get("retry_in")) for r in failed] == [(3.0, "Beat", 0.1)]
assert [(r.get("lease"), r.get("restart")) for r in trace.of("activation.started", key="b")] == [(1, 0), (2, 1)]
ticks = [round(r.t) for r in trace.of("timer.fired", key="b")]
assert ticks == [1, 2, 3, 4, 5, 6, 7]                                       # the timer went on after the restart
assert trace.of("timer.cancelled", key="b") == []                           # and was never cancelled
assert [r.get("details")["n"] for r in trace.of("effect", key="b")] == [1, 2, 3, 4, 5, 6, 7]
assert w10.results["count"] == 7                                            # the third count was saved before the raise
print("holds: a failing timer handler is a warning on the casty logger; the body restarts and the timer keeps ticking")
''')

md("""
## 11. The `@schedules` page, byte by byte

> *The reserved `@schedules` page contains each schedule's name, serialized message, next due time and optional
> period. Due times and periods are encoded in microseconds; due times are measured from the Unix epoch.*

A key's pages are what the replicas (and, for a `durable` type, the store) keep of it: `state`, `@active`, and
`@schedules` once it has a schedule. Here `vault["v"]` is `durable="write"`, so each confirmed write also reaches the
node's store, a `MemoryStore` we hold. It gets an interval schedule `beat` (first after 5 s, every 10 s) and a one-shot
`once` (after 90 s). At 20 s, client code loads the key's record from the store, and we read its bytes with a plain
msgpack decoder: no casty code is involved in the reading.

**Predict.** Which due time does the page hold for `beat` at 20 s: 5 s, 15 s or 25 s? What is stored as the period of
`once`? In what unit is `beat`'s period?
""")

code('''
import datetime as dt

import msgspec
from matplotlib.patches import Rectangle

from casty import MemoryStore


@actor(initial=0, durable="write")
async def vault(ctx: Context[int, Every | Cancel | Beat | Count]) -> None:
    await beats(ctx)


store = MemoryStore()


async def main(system, world):
    ref = system.ref(vault, "v")
    await ref.ask(Every("beat", timedelta(seconds=5), timedelta(seconds=10)))
    await ref.ask(Every("once", timedelta(seconds=90), None))
    await asyncio.sleep(20 - world.now)
    world.results["record"] = await store.load(vault.name, "v")


w11 = run(main, until=21, store=store)
record = w11.results["record"]
pages = msgspec.msgpack.decode(record.state)          # the record: a map of page name -> page bytes
page = pages["@schedules"]
print("pages:", {name: len(data) for name, data in pages.items()}, "bytes")
print("@schedules:", page.hex(" "))
rows = msgspec.msgpack.decode(page)                   # a list of [name, message, due µs, every µs or nil]
for name, message, due_us, every_us in rows:
    when = dt.datetime.fromtimestamp(due_us / S, dt.timezone.utc)
    print(f"{name!r}: message {msgspec.msgpack.decode(message)}, due {due_us} µs = {when:%Y-%m-%d %H:%M:%S.%f} UTC, "
          f"every {every_us!r} µs")


def page_layout(page):
    """(start, end, field, row) of each part of the page: the list header, then per row its header and four fields.

    Each field is cut out by encoding it again: msgpack writes a value the same way each time, so the parts must add
    up to the page exactly (checked below).
    """
    parts, at = [], 0
    rows = msgspec.msgpack.decode(page)

    def take(data, field, row):
        nonlocal at
        assert page[at:at + len(data)] == data, (field, row)
        parts.append((at, at + len(data), field, row))
        at += len(data)

    take(msgspec.msgpack.encode([None] * len(rows))[:-len(rows)], "list of rows", None)
    for i, row in enumerate(rows):
        take(msgspec.msgpack.encode([None] * len(row))[:-len(row)], "row", i)
        for field, value in zip(("name", "message", "due µs", "every µs"), row):
            take(msgspec.msgpack.encode(value), field, i)
    assert at == len(page)
    return parts


def page_chart(page, title):
    """The page's bytes in hex, one strip per schedule row, each field a colour, labelled with its decoded value."""
    colours = {"list of rows": "#BBBBBB", "row": "#DDDDDD", "name": "#56B4E9", "message": "#E69F00",
               "due µs": "#009E73", "every µs": "#CC79A7"}
    rows = msgspec.msgpack.decode(page)
    strips = {}
    for start, end, field, row in page_layout(page):
        strips.setdefault(0 if row is None else row, []).append((start, end, field))
    width = max(end - fields[0][0] for fields in strips.values() for _, end, _ in fields)
    fig = Figure(figsize=(13, 0.8 + 1.5 * len(strips)), layout="constrained")
    ax = fig.add_subplot()
    ys = []
    for n, (row, fields) in enumerate(strips.items()):
        y, first = 1.6 * n, fields[0][0]
        ys.append(y)
        headers = []
        for start, end, field in fields:
            for b in range(start, end):
                ax.add_patch(Rectangle((b - first, y - 0.3), 1, 0.6, facecolor=colours[field], edgecolor="white"))
                ax.text(b - first + 0.5, y, f"{page[b]:02x}", ha="center", va="center", fontsize=6.5, family="monospace")
            if field in ("list of rows", "row"):   # headers: one label above, from the strip's start
                headers.append(f"a list of {len(rows)} rows" if field == "list of rows" else f"row: a list of {len(rows[row])}")
                continue
            value = msgspec.msgpack.decode(page[start:end])
            x, ha, above = (start + end) / 2 - first, "center", field == "every µs"
            if field == "name":
                label = repr(value)
            elif field == "message":
                tag, body = msgspec.msgpack.decode(value)
                label = f"message ({end - start} bytes): [{tag!r}, {body}]"
            elif field == "due µs":
                label = f"due {value} µs = {dt.datetime.fromtimestamp(value / S, dt.timezone.utc):%Y-%m-%d %H:%M:%S.%f} UTC"
            else:
                label = "every: nil (a one-shot)" if value is None else f"every {value} µs = {value / S:g} s"
                x, ha = end - first, "right"
            ax.text(x, y - 0.36 if above else y + 0.36, label, ha=ha, va="bottom" if above else "top", fontsize=8)
        ax.text(0, y - 0.36, " · ".join(headers), ha="left", va="bottom", fontsize=8, color="#555555")
    ax.set_xlim(-0.5, width + 0.5)
    ax.set_ylim(ys[-1] + 0.8, -0.8)
    ax.set_yticks(ys, [f"row {r}: {rows[r][0]!r}" for r in strips])
    ax.set_xlabel("byte (from the start of each row; the first strip begins with the page's list header)")
    ax.set_xticks([])
    ax.set_title(title, loc="left")
    for side in ("top", "right", "bottom"):
        ax.spines[side].set_visible(False)
    return fig


page_chart(page, f"vault['v'] @schedules page at 20 s: {len(page)} bytes, msgpack, {len(rows)} rows")
''')

md("""
How to read the bytes: the page is msgpack. `92` opens a list of 2 (the rows), each `94` a list of 4 (a row). `a4`
starts a 4-byte string (the name). `c4 1a` starts 26 raw bytes: the message, itself msgpack, `[type name, fields]`,
so the page keeps the message as the codec wrote it and decodes it only when it fires. `cf` is an unsigned 64-bit
integer (the due time), `ce` a 32-bit one (the period: 10 000 000 µs), `c0` is nil (a one-shot has no period). A
schedule with another catch-up policy than `Skip` (chapter 10) has a fifth field, its policy.

`beat`'s due is **25 s**: the occurrences at 5 s and 15 s fired, and each firing wrote the next due into this page (the
extra 0.9 ms: the key started only once its first pages were written through to the store, and the schedule was
created when its `Every` was handled, just after). casty's own reader of this
page is not public API; what the seed documents, and this cell checks, is the layout.
""")

code('''
trace = w11.trace
assert set(pages) == {"state", "@active", "@schedules"}
assert [row[0] for row in rows] == ["beat", "once"]                      # each schedule's name, in creation order
assert all(len(row) == 4 for row in rows)                                 # name, message, due, period (Skip: no policy)
assert [msgspec.msgpack.decode(row[1]) for row in rows] == [[f"{Beat.__module__}:Beat", {"name": "beat"}],
                                                            [f"{Beat.__module__}:Beat", {"name": "once"}]]
beat_due, once_due = rows[0][2], rows[1][2]
last_beat = trace.of("schedule.fired", name="beat")[-1]
assert beat_due == last_beat.get("next_us")                              # the next due, as the last firing wrote it
assert since_start(w11, beat_due) == since_start(w11, last_beat.get("due_us")) + 10
assert 24 < since_start(w11, beat_due) < 26                               # 25 s: the 5 s and 15 s occurrences have fired
armed_once = trace.of("schedule.armed", name="once")[0]
assert once_due == armed_once.get("due_us") and armed_once.get("every_us") is None
# due times: microseconds since the Unix epoch (this world starts at 2026-01-01 00:00 UTC)
assert dt.datetime.fromtimestamp(beat_due / S, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S") == "2026-01-01 00:00:25"
assert rows[0][3] == 10 * S and rows[1][3] is None                        # the period in µs; nil for the one-shot
assert page[0] == 0x92 and page[1] == 0x94                                # msgpack: a list of 2 rows, a row of 4 fields
assert sum(end - start for start, end, *_ in page_layout(page)) == len(page)   # the fields account for every byte
print("holds: @schedules holds name, serialized message, next due (µs since the Unix epoch) and period (µs or nil)")
''')

md("""
## What to remember

* A schedule is **data in the key's state**: create (`ctx.schedule`), replace (same name), cancel
  (`ctx.schedules[name].cancel()`); a one-shot removes itself after it fires.
* While it has schedules, a key does not idle out; but a key that is not active is **not** started by the clock:
  a ref, a message, or recovery of its `@active` marker starts it, and then a missed time fires once.
* Late is never a burst: one delivery, then `next = due + every * (max(0, now - due) // every + 1)`.
* Timers (`ctx.timer`) and merged tickers (`ctx.merge`) belong to one activation or run: gone after it ends; a
  timer's name is its key's, and setting it again replaces it.
* A timer's failing handler is a warning on the `casty` logger (a schedule's is a dead letter); the body restarts and
  the timer goes on.
* The `@schedules` page is msgpack: per schedule its name, its message's bytes, the next due (µs since the Unix epoch)
  and the period (µs, or nil for a one-shot).

The scenarios behind this chapter also run from the command line: `python -m sim run pause-catch-up --check`,
`clock-does-not-activate`, `timers-vs-schedules`. Next, chapter 04: what a schedule does when the key changes owner in
a cluster.
""")

for i, cell in enumerate(cells):
    cell["id"] = f"schedules-{i:02d}"  # stable ids: rebuilding gives the same file
nb = nbf.v4.new_notebook()
nb["cells"] = cells
nb["metadata"]["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
nb["metadata"]["language_info"] = {"name": "python"}
nbf.write(nb, "notebooks/03_schedules.ipynb")
print("wrote notebooks/03_schedules.ipynb")
