"""Writes notebooks/02_lifecycle.ipynb from this script (run from the project root), so its source can be reviewed as Python.

Chapter 02 of the course: the activation lifecycle (the actor-model seed's table of transitions, leases and
``become``). Each claim: a sentence, a prediction, a run on virtual time, a picture, an assert cell on the trace.
"""
import nbformat as nbf

cells = []
md = lambda s: cells.append(nbf.v4.new_markdown_cell(s.strip()))


def code(source, tags=()):
    cell = nbf.v4.new_code_cell(source.strip())
    if tags:
        cell["metadata"]["tags"] = list(tags)
    cells.append(cell)


md("""
# 02 · The activation lifecycle

*About 12 minutes. Read chapter 01 first.*

A key has no process of its own: an **activation** (a run of the type's body for that key, with its mailbox) exists
only while the runtime needs one. The casty documentation lists what happens at each transition and **what survives
it**:

| transition | what the runtime does | what survives |
|---|---|---|
| first activation | recover the saved state (or start from the initial one), then start the body | that state |
| idle deactivation | end `ctx.inbox` after `idle_after`, let the body return, release the activation | saved state |
| body failure | report it, restart the body after a backoff | last saved state |
| cancelled ask in progress | cancel the body at its current `await`, restart it | writes already done |

Each section checks one row, then two more claims: every write carries the run's **lease**, and `ctx.become` switches
the behaviour of a key. As in chapter 01, every run is one simulated node on virtual time, and every section ends
with an `assert` cell reading the trace. The **activation timeline** draws one bar per run of a key's body (a new
bar after each restart); a red-orange X is a failed run.
""")

code('''
%matplotlib inline
import asyncio
from dataclasses import dataclass
from datetime import timedelta

import sim
from casty import ActorFailed, Askable, Context, Fenced, actor
from matplotlib.figure import Figure

from sim.viz import activation_timeline


def run(main, *, until, seed=0):
    """A world with one node n1; main(system, world) runs on it as client code; returns the finished world."""
    world = sim.World(seed=seed)
    world.add_node("n1")
    world.spawn("n1", main, world)
    world.run(until=until)
    world.close()
    return world


def effects(trace, key=None):
    """(time s, effect, details) of the ctx.effect rows of the trace (of one key)."""
    return [(round(r.t, 4), r.get("effect"), r.get("details")) for r in trace.of("effect")
            if key is None or r.get("key") == key]


SEQUENCE_KINDS = {  # what sequence_chart draws: kind -> (marker colour, words)
    "activation.started": ("#009E73", "run started"),
    "effect": ("#0072B2", "the body's effect"),
    "write.confirmed": ("#56B4E9", "write confirmed"),
    "write.failed": ("#D55E00", "write refused"),
    "activation.failed": ("#D55E00", "run failed"),
    "activation.ended": ("#777777", "run ended"),
}


def sequence_chart(trace, key, title):
    """What the trace says about one key, one row per event in order, for things that happen within an instant."""
    rows = [r for r in trace if r.kind in SEQUENCE_KINDS and r.get("key") == key]
    fig = Figure(figsize=(10, 0.8 + 0.32 * len(rows)), layout="constrained")
    ax = fig.add_subplot()
    for y, r in enumerate(rows):
        colour, words = SEQUENCE_KINDS[r.kind]
        what = r.get("effect") or r.get("reason") or r.get("behavior") or ", ".join(r.get("pages") or ()) or r.get("error") or ""
        details = r.get("details") or ""
        ax.scatter([0], [y], s=50, color=colour, zorder=3)
        ax.text(0.03, y, f"{r.t * 1000:.3f} ms   {words}: {what} {details}", va="center", fontsize=9)
    ax.set_ylim(len(rows) - 0.5, -0.7)
    ax.set_xlim(-0.02, 1)
    ax.axis("off")
    ax.set_title(title, loc="left")
    return fig


@dataclass(frozen=True)
class Add:
    n: int


@dataclass(frozen=True)
class Get(Askable[int]):
    pass
''')

# ----------------------------------------------------------------------------------------------------------------
md("""
## 1. First activation: a ref starts the key

> *Obtaining a ref through `system.ref` creates and starts the key.* … *An activation must acquire its saved state
> before its body begins.*

`counter` records `ctx.effect("body started", state=...)` as the first thing its body does.

**Predict.** The client only calls `system.ref(counter, "fresh")` and sends **nothing**. Does the body run? And for
`system.ref(counter, "hundred", initial=100)`, what state does its body start with?
""")

code('''
@actor(initial=0)
async def counter(ctx: Context[int, Add | Get]) -> None:
    ctx.effect("body started", state=ctx.state.value)
    async for msg in ctx.inbox:
        match msg:
            case Add(n):
                await ctx.state.update(lambda value: value + n)
            case Get(reply_to=reply_to):
                reply_to.tell(ctx.state.value)


async def main(system, world):
    system.ref(counter, "fresh")                   # no message
    system.ref(counter, "hundred", initial=100)


w1 = run(main, until=70)
for row in w1.trace:
    if row.kind != "node.started":
        print(f"{row.t:9.4f} s  {row.kind:<19} {row.get('key')}  {row.get('pages') or row.get('details') or row.get('reason') or ''}")
activation_timeline(w1.trace, title="system.ref alone started both keys; a minute later they went idle")
''')

code('''
for key, initial in (("fresh", 0), ("hundred", 100)):
    kinds = [r.kind for r in w1.trace if r.get("key") == key]
    assert kinds == ["write.confirmed", "activation.started", "effect", "activation.ended"], kinds
    write = w1.trace.of("write.confirmed", key=key)[0]
    assert write.get("pages") == ("@active", "state")      # the state is written back (with the @active marker) ...
    assert write.t <= w1.trace.of("activation.started", key=key)[0].t   # ... before the body begins
    assert effects(w1.trace, key)[0][1:] == ("body started", {"state": initial})
print("holds: a ref alone activates the key; its state is in place before the body's first line")
''')

# ----------------------------------------------------------------------------------------------------------------
md("""
## 2. Idle deactivation: the inbox ends, the state stays

> *End `ctx.inbox` after `idle_after`, let the body return and release the activation.* … *The default idle interval
> is one minute. Local variables belong to a particular run of the body. They are recreated on restart* … *Values
> that must survive those transitions belong in `ctx.state`.*

`visits` counts messages twice: in a local variable `seen` and in its state. After the `async for` it records
`ctx.effect("inbox ended")`: the code after the loop runs when the key goes idle.

**Predict.** Messages arrive at 0 s and 30 s; the next at 150 s. When does the first activation end? At 150 s, what
are `seen` and the state?
""")

code('''
@dataclass(frozen=True)
class Visit(Askable[tuple[int, int]]):
    pass


@actor(initial=0)
async def visits(ctx: Context[int, Visit]) -> None:
    seen = 0                                        # a local variable: belongs to this run only
    async for msg in ctx.inbox:
        seen += 1
        total = await ctx.state.update(lambda n: n + 1)
        msg.reply_to.tell((seen, total))
    ctx.effect("inbox ended", seen=seen)


async def main(system, world):
    ref = system.ref(visits, "v")
    answers = []
    for at in (0, 30, 150):
        await asyncio.sleep(at - world.now)
        answers.append(await ref.ask(Visit()))
    world.results["(seen, state)"] = answers


w2 = run(main, until=220)
print(w2.results)
activation_timeline(w2.trace, title="visits['v']: idle a minute after the last message (at 1.5 min), back at 2.5 min")
''')

code('''
runs = [(round(r.t), r.get("recovered")) for r in w2.trace.of("activation.started")]
ends = [(round(r.t), r.get("reason")) for r in w2.trace.of("activation.ended")]
assert runs == [(0, False), (150, True)], runs
assert ends == [(90, "idle"), (210, "idle")], ends          # one minute after the last message
print(effects(w2.trace))
ended = effects(w2.trace)[0]
assert (round(ended[0]), ended[1], ended[2]) == (90, "inbox ended", {"seen": 2})   # the code after the loop ran
assert w2.results["(seen, state)"] == [(1, 1), (2, 2), (1, 3)]   # seen restarted at 1; the state went on
print("holds: idle after one minute, the code after the loop ran; the local variable did not survive, the state did")
''')

# ----------------------------------------------------------------------------------------------------------------
md("""
## 3. Body failure: report, back off, restart from the last saved state

> *Body failure: report the failure and restart the body after backoff.* What survives: *last saved state*.

The asker gets `ActorFailed`; the message that failed is dropped; the next run starts after a **backoff** that doubles
with each consecutive failure (100 ms, 200 ms, 400 ms, … up to 10 s) and starts again from 100 ms once a message is
handled without failing. `fragile` adds 1 to its state, then raises on `Boom`.

**Predict.** Three `Boom`s in a row, then a `Get`, then one more `Boom`. What does `Get` answer (did the `+1` before
each raise count)? How long is each backoff?
""")

code('''
@dataclass(frozen=True)
class Boom(Askable[int]):
    pass


@actor(initial=0)
async def fragile(ctx: Context[int, Boom | Get]) -> None:
    async for msg in ctx.inbox:
        match msg:
            case Boom():
                await ctx.state.update(lambda n: n + 1)     # saved before the raise
                raise KeyError("boom")
            case Get(reply_to=reply_to):
                reply_to.tell(ctx.state.value)


async def main(system, world):
    ref = system.ref(fragile, "f")
    log = []
    for msg in (Boom(), Boom(), Boom(), Get(), Boom()):
        try:
            log.append((type(msg).__name__, await ref.ask(msg)))
        except ActorFailed as failure:
            log.append((type(msg).__name__, f"ActorFailed: {failure.error!r}"))
    world.results["log"] = log


w3 = run(main, until=3)
for line in w3.results["log"]:
    print(line)
activation_timeline(w3.trace, title="fragile['f']: four runs failed at once (X); the gaps are the backoffs 0.1, 0.2, 0.4 s, then 0.1 s again")
''')

code('''
failed = [(round(r.t, 4), r.get("retry_in")) for r in w3.trace.of("activation.failed")]
starts = [round(r.t, 4) for r in w3.trace.of("activation.started")]
print("failed at (s, retry in s):", failed, "\\nruns started at:", starts)
assert [retry for _, retry in failed] == [0.1, 0.2, 0.4, 0.1]      # doubling, back to 0.1 after a handled message
for (t, retry), restart in zip(failed, starts[1:]):
    assert abs(restart - (t + retry)) < 1e-3                      # each run starts after its backoff
assert w3.results["log"][3] == ("Get", 3)                          # the saves before the three raises survived
assert [m for m, a in w3.results["log"] if str(a).startswith("ActorFailed")] == ["Boom"] * 4
assert [r.get("reason") for r in w3.trace.of("message.dropped")] == ["failed: KeyError('boom')"] * 4
print("holds: each failure reported and backed off; each run restarted from the last saved state")
''')

# ----------------------------------------------------------------------------------------------------------------
md("""
## 4. A cancelled ask cancels the body where it waits

> *Cancelled ask in progress: cancel the body at its current await and restart it for subsequent work.* What
> survives: *writes and effects already completed*.

`slow` saves 100, then awaits 5 s before answering. The client gives up after 0.3 s (`asyncio.timeout`).

**Predict.** Does the line after the 5 s `await` ever run? What state does the next run see: 0 or 100?
""")

code('''
@dataclass(frozen=True)
class Work(Askable[str]):
    pass


@actor(initial=0)
async def slow(ctx: Context[int, Work | Get]) -> None:
    ctx.effect("run started", state=ctx.state.value)
    async for msg in ctx.inbox:
        match msg:
            case Work(reply_to=reply_to):
                await ctx.state.set(100)                 # done before the wait
                await asyncio.sleep(5)
                ctx.effect("after the wait")             # never reached if the ask is cancelled
                reply_to.tell("done")
            case Get(reply_to=reply_to):
                reply_to.tell(ctx.state.value)


async def main(system, world):
    ref = system.ref(slow, "s")
    try:
        async with asyncio.timeout(0.3):
            await ref.ask(Work())
    except TimeoutError:
        world.results["gave up at"] = round(world.now, 4)
    world.results["state after"] = await ref.ask(Get())
    await asyncio.sleep(2)
    world.note("n1", f"Get answers {await ref.ask(Get())}: the new run goes on")


w4 = run(main, until=10)
print(w4.results)
print(effects(w4.trace))
activation_timeline(w4.trace, title="slow['s']: the run ended at the cancelled ask (0.3 s) and started again")
''')

code('''
ended = [(round(r.t, 4), r.get("reason")) for r in w4.trace.of("activation.ended")]
assert ended[0] == (w4.results["gave up at"], "cancelled"), ended       # the body was cancelled at its await
assert [r.get("restart") for r in w4.trace.of("activation.started")] == [0, 1]
assert [e for _, e, _ in effects(w4.trace)] == ["run started", "run started"]   # never "after the wait"
assert effects(w4.trace)[1][2] == {"state": 100}                         # the write done before the wait survived
assert w4.results["state after"] == 100
assert [r.get("reason") for r in w4.trace.of("message.dropped")] == ["ask cancelled"]
print("holds: cancelled at the await, restarted; the completed write survived")
''')

# ----------------------------------------------------------------------------------------------------------------
md("""
## 5. Every write carries the run's lease

> *An activation has an internal lease identifier. Every state write carries it, allowing the node to refuse a write
> from an activation that a newer activation has replaced.*

Each run of a body gets a new lease. Here a body starts a plain asyncio task that keeps its `ctx` and writes 2 s
later; meanwhile a `Boom` fails that run and a new run replaces it. (Don't do this in real code: it is exactly the
"zombie" the lease is there to stop.)

**Predict.** The late write comes from the replaced run. Is it saved, or refused? What does `Get` answer at 3 s?
""")

code('''
@dataclass(frozen=True)
class Later:
    value: int


async def write_later(ctx, value):
    await asyncio.sleep(2)
    try:
        await ctx.state.set(value)
        ctx.effect("late write", result="saved")
    except Fenced as refused:
        ctx.effect("late write", result=f"Fenced: {refused}")


@actor(initial=0)
async def leased(ctx: Context[int, Later | Boom | Get]) -> None:
    async for msg in ctx.inbox:
        match msg:
            case Later(value):
                await ctx.state.set(1)
                asyncio.get_running_loop().create_task(write_later(ctx, value))   # outlives its run
            case Boom():
                raise KeyError("boom")
            case Get(reply_to=reply_to):
                reply_to.tell(ctx.state.value)


async def main(system, world):
    ref = system.ref(leased, "z")
    ref.tell(Later(666))
    await asyncio.sleep(0.5)
    try:
        await ref.ask(Boom())
    except ActorFailed:
        pass
    await asyncio.sleep(2.5)
    world.results["state at 3 s"] = await ref.ask(Get())


w5 = run(main, until=4)
print(w5.results)
for row in w5.trace.of("write.confirmed", "write.failed", "activation.started"):
    print(f"{row.t:7.4f} s  {row.kind:<19} lease {row.get('lease')}  {row.get('reason') or row.get('pages') or ''}")
print(effects(w5.trace))
activation_timeline(w5.trace, title="leased['z']: lease 1 failed at 0.5 s; lease 2 holds the key when lease 1's late write comes")
''')

code('''
leases = [r.get("lease") for r in w5.trace.of("activation.started")]
assert len(leases) == 2 and leases[0] < leases[1]                       # each run its own lease
refused = w5.trace.of("write.failed")
assert [(r.get("lease"), r.get("reason"), r.get("operation")) for r in refused] == [(leases[0], "fenced", "state.set")]
assert round(refused[0].t, 4) == 2.0002                                  # the late write, 2 s after Later
assert all(r.get("lease") == leases[0] for r in w5.trace.of("write.confirmed") if r.t < 0.5)
assert w5.results["state at 3 s"] == 1                                   # 666 was never saved
assert effects(w5.trace)[0][2]["result"].startswith("Fenced")
print("holds: the replaced run's write carried its old lease and was refused")
''')

# ----------------------------------------------------------------------------------------------------------------
md("""
## 6. `become`: a state machine, one actor function per state

> *`await ctx.become(other, state)` changes the behavior associated with the key. The replacement type must accept
> the same messages. Its state can have a different type* … *The entity's original identity and its refs stay the
> same. The runtime records the replacement behavior in the reserved `@behavior` state page and preserves
> schedules. The replacement begins when the previous run reaches its next inbox read; code after become can still
> execute, but the previous context no longer owns state writes.*

A door: `closed` (state: how many times it was knocked on, an `int`) and `opened` (state: who opened it, a `str`).
`Open` makes `closed` become `opened`; right after `become`, the old body tries one more write. Before becoming,
`closed` also sets a **schedule** to remind the key in 10 s.

**Predict.** After `Open`, the same ref gets `Knock`. Which function answers? Is the old body's write after
`become` saved? Does the reminder (set by `closed`) still arrive, and who handles it?
""")

code('''
@dataclass(frozen=True)
class Knock(Askable[str]):
    pass


@dataclass(frozen=True)
class Open(Askable[str]):
    who: str


@dataclass(frozen=True)
class Remind:
    pass


Door = Knock | Open | Remind


@actor(initial=0)
async def closed(ctx: Context[int, Door]) -> None:
    async for msg in ctx.inbox:
        match msg:
            case Knock(reply_to=reply_to):
                knocks = await ctx.state.update(lambda n: n + 1)
                reply_to.tell(f"closed: knocked {knocks} times")
            case Open(who, reply_to=reply_to):
                await ctx.schedule("remind", timedelta(seconds=10), None, Remind())
                await ctx.become(opened, who)
                ctx.effect("after become", note="the old body still runs until its next inbox read")
                try:
                    await ctx.state.set(-1)
                    ctx.effect("old write", result="saved")
                except Fenced:
                    ctx.effect("old write", result="refused: Fenced")
                reply_to.tell("opening")
            case Remind():
                ctx.effect("reminded", by="closed")


@actor(initial="")
async def opened(ctx: Context[str, Door]) -> None:
    async for msg in ctx.inbox:
        match msg:
            case Knock(reply_to=reply_to):
                reply_to.tell(f"open: {ctx.state.value} is here")
            case Open(reply_to=reply_to):
                reply_to.tell("already open")
            case Remind():
                ctx.effect("reminded", by="opened", state=ctx.state.value)


async def main(system, world):
    door = system.ref(closed, "front")
    world.results["knock 1"] = await door.ask(Knock())
    world.results["open"] = await door.ask(Open("ana"))
    world.results["knock 2"] = await door.ask(Knock())
    world.results["same ref"] = door == system.ref(closed, "front")
    await asyncio.sleep(15)


w6 = run(main, until=20)
for k, v in w6.results.items():
    print(f"{k:<9} {v}")
for row in w6.trace.of("activation.started", "activation.ended", "write.confirmed", "write.failed", "effect", "schedule.fired"):
    print(f"{row.t:8.4f} s  {row.kind:<19} {row.get('behavior') or row.get('pages') or row.get('reason') or row.get('effect') or row.get('name')}"
          f"  {row.get('details') or ''}")
activation_timeline(w6.trace, title="closed['front']: a new run at become (its behaviour: opened), the same key")
''')

code('''
behaviours = [(r.get("behavior"), r.get("restart")) for r in w6.trace.of("activation.started")]
assert behaviours == [("__main__:closed", 0), ("__main__:opened", 1)], behaviours   # the same key, a new behaviour
assert all(r.get("actor") == "__main__:closed" and r.get("key") == "front" for r in w6.trace.of("activation.started"))
assert w6.results["knock 2"] == "open: ana is here" and w6.results["same ref"]   # same ref; state of another type
assert any("@behavior" in r.get("pages") for r in w6.trace.of("write.confirmed"))   # recorded in @behavior
done = [(e, d) for _, e, d in effects(w6.trace, "front")]
assert done[:2] == [("after become", {"note": "the old body still runs until its next inbox read"}),
                    ("old write", {"result": "refused: Fenced"})], done   # code after become ran; its write refused
assert [(r.get("reason"), r.get("operation")) for r in w6.trace.of("write.failed")] == [("fenced", "state.set")]
fired = w6.trace.of("schedule.fired", name="remind")
assert len(fired) == 1 and done[2] == ("reminded", {"by": "opened", "state": "ana"})   # the schedule survived become
print("holds: same key and ref, new behaviour and state type, @behavior written, schedule kept, old context fenced")
''')

md("""
### `update` from the old context is refused too

The same door, with the old body's late write written the natural way, `await ctx.state.update(lambda n: n + 1)`.
The claim says the previous context no longer owns state writes. Note the trap: the old context's
`ctx.state.value` already reads the **replacement's** state (the string `"ana"`, in a body whose state type is
`int`). So `update` must refuse *before* it calls the function, or the function would run on a state that is not
its own. (This was a finding of this course: the runtime used to call the function first and the body failed with
its `TypeError`; `tests/test_become_old_context.py` keeps it fixed.)

**Predict.** Does the old body see `Fenced`, or a `TypeError` from `n + 1`?
""")

code('''
@actor(initial=0)
async def closed_u(ctx: Context[int, Door]) -> None:
    async for msg in ctx.inbox:
        match msg:
            case Open(who, reply_to=reply_to):
                await ctx.become(opened, who)
                ctx.effect("old state seen", value=repr(ctx.state.value))
                try:
                    await ctx.state.update(lambda n: n + 1)
                    ctx.effect("old write", result="saved")
                except Fenced:
                    ctx.effect("old write", result="refused: Fenced")
                reply_to.tell("opening")
            case _:
                pass


async def main(system, world):
    try:
        world.results["open"] = await system.ref(closed_u, "back").ask(Open("bia"))
    except ActorFailed as failure:
        world.results["open"] = f"ActorFailed: {failure.error!r}"


w6u = run(main, until=2)
print(w6u.results, effects(w6u.trace))
sequence_chart(w6u.trace, "back", "closed_u['back'], in order: become, the old run's update refused, no run failed")
''')

code('''
assert effects(w6u.trace)[-1][1:] == ("old write", {"result": "refused: Fenced"}), effects(w6u.trace)
assert w6u.results["open"] == "opening", w6u.results
order = [(r.kind, r.get("reason")) for r in w6u.trace.of("write.failed", "activation.failed", "activation.ended") if r.get("key") == "back"]
assert order == [("write.failed", "fenced"), ("activation.ended", "become")], order   # refused, no failure; the run ends at become
print("holds: update from the replaced context is refused as Fenced before its function runs")
''')

md("""
### A replacement must accept the same messages

The replacement *must accept the same messages*: `window` accepts only `Knock`, so becoming it is refused.

**Predict.** Is it refused when `become` is called, or only when a message `window` does not know arrives?
""")

code('''
@actor(initial=0)
async def window(ctx: Context[int, Knock]) -> None:     # accepts fewer messages than closed does
    async for _ in ctx.inbox:
        pass


@actor(initial=0)
async def to_window(ctx: Context[int, Door]) -> None:
    async for _ in ctx.inbox:
        await ctx.become(window, 0)


async def main(system, world):
    try:
        await system.ref(to_window, "w").ask(Knock())
    except ActorFailed as failure:
        world.results["failure"] = f"{type(failure.error).__name__}: {failure.error}"


w7 = run(main, until=1)
print(w7.results["failure"])
sequence_chart(w7.trace, "w", "to_window['w'], in order: become(window) refused, the run failed, no @behavior written")
''')

code('''
assert w7.results["failure"].startswith("SchemaError"), w7.results
assert [r.get("error").split("(")[0] for r in w7.trace.of("activation.failed")] == ["SchemaError"]
assert not any("@behavior" in r.get("pages") for r in w7.trace.of("write.confirmed"))   # nothing recorded
print("holds: refused at become, with SchemaError; no @behavior page was written")
''')

md("""
## What to remember

* A ref alone activates a key; its state is recovered (or initialised) before the body begins.
* Only `ctx.state` survives: local variables live for one run. A run ends when the key is idle (one minute by
  default), when the body fails (restart after a doubling backoff), when an ask in progress is cancelled, or at
  `become`.
* Every run has a lease; a write from a replaced run is refused (`Fenced`). Across nodes, owner epochs do the same
  job (chapter 04).

Next, chapter 03: schedules, which are saved with the state and outlive every run.
""")

for i, cell in enumerate(cells):
    cell["id"] = f"lifecycle-{i:02d}"  # stable ids: rebuilding gives the same file
nb = nbf.v4.new_notebook()
nb["cells"] = cells
nb["metadata"]["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
nb["metadata"]["language_info"] = {"name": "python"}
nbf.write(nb, "notebooks/02_lifecycle.ipynb")
print("wrote notebooks/02_lifecycle.ipynb")
