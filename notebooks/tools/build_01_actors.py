"""Writes notebooks/01_actors.ipynb from this script (run from the project root), so its source can be reviewed as Python.

Chapter 01 of the course: actors and mailboxes. Every claim is taken from the actor-model seed and gets a sentence,
a question to answer before running, a run on virtual time, a picture and an assert cell that checks the claim
against the run's trace (so the text, the picture and the code cannot disagree).
"""
import nbformat as nbf

cells = []
md = lambda s: cells.append(nbf.v4.new_markdown_cell(s.strip()))
code = lambda s: cells.append(nbf.v4.new_code_cell(s.strip()))

md("""
# 01 · Actors and mailboxes

*About 10 minutes. Chapter 00 (the tour) showed what the simulated world is; this chapter starts the course.*

An **actor** is a piece of code that only talks through messages: when it receives one, it may send messages to
actors it knows, change its own state, and decide how to handle the next message. casty has **virtual actors**:
you never create or destroy them. You name one by its **type** and a **key**, send it a message, and the runtime
makes sure some code is running for it (an **activation**) when the message arrives.

Each section below takes one sentence from the casty documentation (the *claim*), asks you to **predict** what will
happen, runs it (on one simulated node, on virtual time: every run is instant and the same every time), draws it,
and ends with an `assert` cell that checks the claim against the run's **trace**, the list of what the runtime
reported. If an assert cell fails, the claim does not hold.

The setup cell defines `run(main, until=...)`: a world with one node `n1`, where `main(system, world)` runs as
client code; and `handling_chart(trace)`, which draws the messages each key handled. Our actors mark the start and
end of handling a message with `ctx.effect("begin", msg=...)` / `ctx.effect("end", msg=...)`: `ctx.effect` is the
runtime's way to record that a body did something, and each call becomes an `effect` row in the trace.
""")

code('''
%matplotlib inline
import asyncio
from dataclasses import dataclass
from datetime import timedelta

from matplotlib.figure import Figure

import sim
from casty import Askable, Context, Ref, actor
from sim.viz import activation_timeline


def run(main, *, until, seed=0):
    """A world with one node n1; main(system, world) runs on it as client code; returns the finished world."""
    world = sim.World(seed=seed)
    world.add_node("n1")
    world.spawn("n1", main, world)
    world.run(until=until)
    world.close()
    return world


def spans(trace, key=None):
    """(start s, end s, message) of every message handled, from the body's begin/end effect rows, per key."""
    out, begun = {}, {}
    for row in trace.of("effect"):
        k, what = row.get("key"), row.get("effect")
        if what == "begin":
            begun[k] = (row.t, row.get("details")["msg"])
        elif what == "end":
            t0, msg = begun.pop(k)
            out.setdefault(k, []).append((t0, row.t, msg))
    return out if key is None else out.get(key, [])


def handling_chart(trace, title):
    """One lane per key: a bar from the moment the body took a message to the moment it was done with it.

    A message handled without waiting (no time passes on virtual time) is a diamond, its name above it.
    """
    by_key = spans(trace)
    end = max((t1 for bars in by_key.values() for _, t1, _ in bars), default=1.0) or 1.0
    colours = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9"]
    fig = Figure(figsize=(10, 1.4 + 0.75 * len(by_key)), layout="constrained")
    ax = fig.add_subplot()
    ax.set_axisbelow(True)
    for y, (key, bars) in enumerate(by_key.items()):
        at_once = {}  # messages handled at once at the same instant share one diamond, named in their order
        for i, (t0, t1, msg) in enumerate(bars):
            colour = colours[i % len(colours)]
            if t1 - t0 < end * 0.01:
                at_once.setdefault(round(t0, 6), (colour, []))[1].append(msg)
            else:
                ax.barh(y, t1 - t0, left=t0, height=0.5, color=colour, edgecolor="white", zorder=2)
                ax.text((t0 + t1) / 2, y, msg, ha="center", va="center", fontsize=9, color="white", zorder=3)
        for t0, (colour, msgs) in at_once.items():
            ax.scatter([t0], [y], marker="D", s=60, color=colour, edgecolors="black", linewidths=0.6, zorder=3)
            ax.text(t0, y - 0.3, " then ".join(msgs), ha="center", va="bottom", fontsize=9)
    ax.set_yticks(range(len(by_key)), [f"key {k!r}" for k in by_key])
    ax.set_ylim(len(by_key) - 0.5, -0.8)
    ax.set_xlim(-end * 0.03, end * 1.05)
    ax.set_xlabel("true time (s)    bar: handling one message, from taking it out of the inbox to being done    "
                  "diamond: handled at once")
    ax.set_title(title, loc="left")
    ax.grid(axis="x", color="#DDDDDD")
    return fig
''')

# ----------------------------------------------------------------------------------------------------------------
md("""
## 1. A type is named by its module and function

> *An async def decorated with `@actor` defines an actor type. `Context[S, M]` declares its state type `S` and message
> type `M`.* … *By default, a type is named by the `module:qualname` of its body.* … *Moving or renaming the function
> changes the type's identity and makes state under the previous name unreachable through the new type.*

Here is a counter: its state is an `int` (starting at 0), its messages are `Add` and `Get`. `Get` is **askable**: it
carries a `reply_to` ref the runtime fills in, and the body answers through it. Below it, `tally` is the very same
code under another function name.

**Predict.** `counter["ana"]` gets `Add(5)` and `Add(2)`. Then someone asks `tally["ana"]` for its value. What does
it answer: 7 or 0?
""")

code('''
@dataclass(frozen=True)
class Add:
    n: int


@dataclass(frozen=True)
class Get(Askable[int]):
    pass


@actor(initial=0)
async def counter(ctx: Context[int, Add | Get]) -> None:
    async for msg in ctx.inbox:
        match msg:
            case Add(n):
                await ctx.state.update(lambda value: value + n)
            case Get(reply_to=reply_to):
                reply_to.tell(ctx.state.value)


@actor(initial=0)
async def tally(ctx: Context[int, Add | Get]) -> None:   # the same body, renamed
    async for msg in ctx.inbox:
        match msg:
            case Add(n):
                await ctx.state.update(lambda value: value + n)
            case Get(reply_to=reply_to):
                reply_to.tell(ctx.state.value)


print("type names:", counter.name, tally.name)


async def main(system, world):
    ana = system.ref(counter, "ana")
    ana.tell(Add(5))
    ana.tell(Add(2))
    world.results["counter ana"] = await ana.ask(Get())
    world.results["tally ana"] = await system.ref(tally, "ana").ask(Get())


w1 = run(main, until=70)   # long enough to see both activations end (idle after a minute)
print(w1.results)
activation_timeline(w1.trace, title="Two types, one key name: two entities")
''')

code('''
# the claim, checked against the trace
assert counter.name == "__main__:counter" and tally.name == "__main__:tally"  # module:qualname (a notebook is __main__)
started = [(r.get("actor"), r.get("key")) for r in w1.trace.of("activation.started")]
assert started == [("__main__:counter", "ana"), ("__main__:tally", "ana")], started
assert w1.results == {"counter ana": 7, "tally ana": 0}   # the renamed type does not see the state saved under the old name
writes = {r.get("actor") for r in w1.trace.of("write.confirmed")}
assert writes == {"__main__:counter", "__main__:tally"}
print("holds: the type is its name; the same code under a new name is a new type with its own state")
''')

md("""
Because a node that meets an unknown type **imports it by that name**, actor definitions belong at module scope, and
every member of a cluster needs the same definitions. A notebook's module is `__main__`, which is fine for one
process and a simulated world in it, not for a real cluster.
""")

# ----------------------------------------------------------------------------------------------------------------
md("""
## 2. A key names an entity; a ref is a value

> *`system.ref(counter, "ana")` and `system.ref(counter, "bia")` address two independent counters. Obtaining the same
> type and key again addresses the same entity, even if its previous activation has ended.*

An **entity** is the pair (type, key). A `Ref` does not point at running code: it is a value that names the entity.

**Predict.** `ana` gets `Add(5)`, `bia` gets `Add(1)`. Both go idle (the default idle time is one minute, so their
activations end at about 60 s). At 100 s we take a **new** ref to `("counter", "ana")` and ask it. Does the new ref
equal the old one? What does it answer?
""")

code('''
async def main(system, world):
    ana, bia = system.ref(counter, "ana"), system.ref(counter, "bia")
    ana.tell(Add(5))
    bia.tell(Add(1))
    world.results["first"] = (await ana.ask(Get()), await bia.ask(Get()))
    await asyncio.sleep(100)                       # both keys go idle meanwhile
    again = system.ref(counter, "ana")
    world.results["same ref"] = again == ana
    world.results["repr"] = repr(again)
    world.results["after idle"] = await again.ask(Get())


w2 = run(main, until=170)
print(w2.results)
activation_timeline(w2.trace, title="counter: keys ana and bia, idle after a minute; ana comes back at 100 s (1.7 min)")
''')

code('''
ana_runs = [(round(r.t), r.get("recovered")) for r in w2.trace.of("activation.started", key="ana")]
ends = [(r.get("key"), round(r.t), r.get("reason")) for r in w2.trace.of("activation.ended")]
assert w2.results["first"] == (5, 1)                   # two independent counters
assert w2.results["same ref"] is True                  # equal values: they name the same entity
assert ends == [("ana", 60, "idle"), ("bia", 60, "idle"), ("ana", 160, "idle")], ends
assert ana_runs == [(0, False), (100, True)], ana_runs # a second activation, recovered from the saved state
assert w2.results["after idle"] == 5                   # the same entity, though its first activation ended
print("holds:", w2.results["repr"], "reached the same counter after its activation ended")
''')

# ----------------------------------------------------------------------------------------------------------------
md("""
## 3. `tell` returns at once; `ask` waits for the answer

`ref.tell(msg)` puts the message on its way and returns `None` straight away: the sender does not wait, and is not
told whether the message was handled. `await ref.ask(msg)` sends an askable message and waits until the body
answers through `msg.reply_to` (or raises `TimeoutError` after the ask timeout, 10 s by default).

**Predict.** A body takes 2 s to handle `Add` (it awaits something slow). The client tells it `Add(1)`, then asks
`Get()`. At what time does `tell` return, and at what time does the `ask` return, and with which value?
""")

code('''
@actor(initial=0)
async def slow_counter(ctx: Context[int, Add | Get]) -> None:
    async for msg in ctx.inbox:
        match msg:
            case Add(n):
                ctx.effect("begin", msg=f"Add({n})")
                await asyncio.sleep(2)              # a slow call to something outside
                await ctx.state.update(lambda value: value + n)
                ctx.effect("end", msg=f"Add({n})")
            case Get(reply_to=reply_to):
                ctx.effect("begin", msg="Get")
                reply_to.tell(ctx.state.value)
                ctx.effect("end", msg="Get")


async def main(system, world):
    c = system.ref(slow_counter, "c")
    before = world.now
    returned = c.tell(Add(1))
    world.results["tell"] = (returned, world.now - before)   # how long tell took, in virtual time
    answer = await c.ask(Get())
    world.results["ask"] = (answer, round(world.now, 3))


w3 = run(main, until=5)
print(w3.results)
handling_chart(w3.trace, "slow_counter['c']: the tell returned at 0 s; the ask waited behind Add")
''')

code('''
assert w3.results["tell"] == (None, 0.0)              # tell returned None, at once (no time passed)
bars = [(round(a, 3), round(b, 3), m) for a, b, m in spans(w3.trace, "c")]
assert [m for _, _, m in bars] == ["Add(1)", "Get"], bars
assert w3.results["ask"] == (1, bars[1][1])            # the ask returned when Get was answered, after Add
assert bars[1][0] >= bars[0][1]
print("holds: tell returned None at once; the ask returned", w3.results["ask"][0], "at", w3.results["ask"][1], "s")
''')

# ----------------------------------------------------------------------------------------------------------------
md("""
## 4. A ref travels in a message or in state

> *A ref can travel in a message or in actor state. It names a logical target rather than holding a pointer to the
> actor body.*

A chat `room` keeps its members' refs **in its state** (a tuple of refs, saved like any state); a `Join` message
**carries** a ref. When someone posts, the room tells every member.

**Predict.** Readers `a` and `b` join, then someone posts "hello". The room then goes idle (its activation ends at
60 s), and at 100 s someone posts "again": the room starts again from its saved state. Does `b` get "again"?
""")

code('''
@dataclass(frozen=True)
class Note:
    text: str


@dataclass(frozen=True)
class Join:
    member: Ref[Note]                  # a ref inside a message


@dataclass(frozen=True)
class Post:
    text: str


@dataclass(frozen=True)
class Seen(Askable[tuple[str, ...]]):
    pass


@actor(initial=())
async def room(ctx: Context[tuple[Ref[Note], ...], Join | Post]) -> None:   # refs inside the state
    async for msg in ctx.inbox:
        match msg:
            case Join(member):
                await ctx.state.update(lambda members: members + (member,))
            case Post(text):
                for member in ctx.state.value:
                    member.tell(Note(text))


@actor(initial=())
async def reader(ctx: Context[tuple[str, ...], Note | Seen]) -> None:
    async for msg in ctx.inbox:
        match msg:
            case Note(text):
                await ctx.state.update(lambda seen: seen + (text,))
            case Seen(reply_to=reply_to):
                reply_to.tell(ctx.state.value)


async def main(system, world):
    hall = system.ref(room, "hall")
    a, b = system.ref(reader, "a"), system.ref(reader, "b")
    hall.tell(Join(a))
    hall.tell(Join(b))
    hall.tell(Post("hello"))
    await asyncio.sleep(100)           # the room goes idle at 60 s; its state keeps the two refs
    hall.tell(Post("again"))
    await asyncio.sleep(1)
    world.results["a"], world.results["b"] = await a.ask(Seen()), await b.ask(Seen())


w4 = run(main, until=170)
print(w4.results)
activation_timeline(w4.trace, title="room 'hall' idle at 1 min; its second run (from 100 s, 1.7 min) told the members saved in its state")
''')

code('''
hall_runs = [(round(r.t), r.get("recovered")) for r in w4.trace.of("activation.started", key="hall")]
assert hall_runs == [(0, False), (100, True)], hall_runs   # "again" was posted to a new run of the room
assert w4.results == {"a": ("hello", "again"), "b": ("hello", "again")}
print("holds: the refs saved in the room's state reached a and b from a later activation")
''')

# ----------------------------------------------------------------------------------------------------------------
md("""
## 5. One mailbox reader: one message at a time

> *An activation reads one message at a time. Reading the next item from `ctx.inbox` marks the end of handling the
> previous message. An await between those reads delays the next message for that activation; messages accumulate in
> its mailbox while other actors continue running.*

A `worker` takes 1 s per job (an `await asyncio.sleep(1)` standing for a slow call).

**Predict.** At time 0 the client tells key `a` three jobs and key `b` one job. When is `a`'s third job done? When is
`b`'s job done: at 1 s or at 4 s?
""")

code('''
@dataclass(frozen=True)
class Job:
    name: str


@actor(initial=0)
async def worker(ctx: Context[int, Job]) -> None:
    async for msg in ctx.inbox:
        ctx.effect("begin", msg=msg.name)
        await asyncio.sleep(1)
        ctx.effect("end", msg=msg.name)


async def main(system, world):
    a, b = system.ref(worker, "a"), system.ref(worker, "b")
    for name in ("a1", "a2", "a3"):
        a.tell(Job(name))
    b.tell(Job("b1"))


w5 = run(main, until=5)
handling_chart(w5.trace, "worker: key a handles its jobs one after the other; key b is not held up")
''')

code('''
a_bars = [(round(t0, 3), round(t1, 3), m) for t0, t1, m in spans(w5.trace, "a")]
b_bars = [(round(t0, 3), round(t1, 3), m) for t0, t1, m in spans(w5.trace, "b")]
print("a:", a_bars, "\\nb:", b_bars)
assert [m for *_, m in a_bars] == ["a1", "a2", "a3"]                        # in the order told
assert all(prev[1] <= nxt[0] for prev, nxt in zip(a_bars, a_bars[1:]))     # never two at once on one key
assert a_bars[2][1] - a_bars[0][0] >= 3.0                                  # the third waited for the first two
assert b_bars[0][1] < a_bars[1][0] + 1.0 and b_bars[0][1] - b_bars[0][0] < 1.01  # b ran beside a, done at ~1 s
print("holds: one message at a time per key; other keys keep running")
''')

# ----------------------------------------------------------------------------------------------------------------
md("""
## 6. `ctx.to_self`: keep reading while slow work runs

> *Concurrency comes from independent keys and work whose results return as messages. `ctx.to_self` and `ctx.ask`
> allow the body to continue reading while other asynchronous work is pending.*

`ctx.to_self(awaitable, mapper)` runs the awaitable beside the body and delivers its result, through `mapper`, as a
new message to this key. A `lookup` key answers `Find` this way (the slow part is 3 s), and answers `Ping` at once.

**Predict.** The client asks `Find("x")` and, at the same moment, `Ping()`. Which answer comes first, and when?
""")

code('''
@dataclass(frozen=True)
class Find(Askable[str]):
    what: str


@dataclass(frozen=True)
class Found:
    text: str
    reply_to: Ref[str]


@dataclass(frozen=True)
class Ping(Askable[str]):
    pass


async def slow_search(what: str) -> str:
    await asyncio.sleep(3)
    return f"{what}: found"


@actor(initial=0)
async def lookup(ctx: Context[int, Find | Found | Ping]) -> None:
    async for msg in ctx.inbox:
        match msg:
            case Find(what, reply_to=reply_to):
                ctx.effect("begin", msg="Find")
                ctx.to_self(slow_search(what), lambda text, r=reply_to: Found(text, r))
                ctx.effect("end", msg="Find")       # done with Find: the search goes on beside the body
            case Found(text, reply_to):
                ctx.effect("begin", msg="Found")
                reply_to.tell(text)
                ctx.effect("end", msg="Found")
            case Ping(reply_to=reply_to):
                ctx.effect("begin", msg="Ping")
                reply_to.tell("pong")
                ctx.effect("end", msg="Ping")


async def main(system, world):
    ref = system.ref(lookup, "l")
    answers = []

    async def ask(msg):
        answers.append((await ref.ask(msg), round(world.now, 3)))

    await asyncio.gather(ask(Find("x")), ask(Ping()))
    world.results["answers"] = answers


w6 = run(main, until=5)
print(w6.results)
handling_chart(w6.trace, "lookup['l']: Ping is answered while the search for Find runs beside the body")
''')

code('''
answers = w6.results["answers"]
assert [a for a, _ in answers] == ["pong", "x: found"], answers   # Ping first
assert answers[0][1] < 0.01 and answers[1][1] >= 3.0, answers     # Ping at ~0 s, Find after the 3 s search
order = [m for *_, m in spans(w6.trace, "l")]
assert order == ["Find", "Ping", "Found"], order                   # the result came back as a message
print("holds: the body kept reading; the search's result arrived as the message Found")
''')

# ----------------------------------------------------------------------------------------------------------------
md("""
## 7. `ctx.ask`: ask another key without blocking the inbox

`ctx.ask(target, msg, mapper)` is `to_self` for an ask: the reply comes back, mapped, as a message. A `front` key
asks a `back` key that takes 2 s to answer; meanwhile `front` keeps counting `Ping`s. (An `await target.ask(...)`
inside the body would hold `front`'s inbox for those 2 s.)

**Predict.** The client asks `front` for a `Quote`, then sends it three `Ping`s at 0.5 s intervals. Are the Pings
handled before the quote's answer arrives?
""")

code('''
@dataclass(frozen=True)
class Quote(Askable[int]):
    pass


@dataclass(frozen=True)
class Price(Askable[int]):
    pass


@dataclass(frozen=True)
class Priced:
    value: int
    reply_to: Ref[int]


@actor(initial=0)
async def back(ctx: Context[int, Price]) -> None:
    async for msg in ctx.inbox:
        ctx.effect("begin", msg="Price")
        await asyncio.sleep(2)
        msg.reply_to.tell(42)
        ctx.effect("end", msg="Price")


@actor(initial=0)
async def front(ctx: Context[int, Quote | Priced | Ping]) -> None:
    async for msg in ctx.inbox:
        match msg:
            case Quote(reply_to=reply_to):
                ctx.effect("begin", msg="Quote")
                ctx.ask(ctx.system.ref(back, "prices"), Price(), lambda v, r=reply_to: Priced(v, r))
                ctx.effect("end", msg="Quote")
            case Priced(value, reply_to):
                ctx.effect("begin", msg="Priced")
                reply_to.tell(value)
                ctx.effect("end", msg="Priced")
            case Ping(reply_to=reply_to):
                ctx.effect("begin", msg="Ping")
                reply_to.tell("pong")
                ctx.effect("end", msg="Ping")


async def main(system, world):
    f = system.ref(front, "f")
    quote = asyncio.ensure_future(f.ask(Quote()))
    for _ in range(3):
        await asyncio.sleep(0.5)
        await f.ask(Ping())
    world.results["quote"] = (await quote, round(world.now, 3))


w7 = run(main, until=5)
print(w7.results)
handling_chart(w7.trace, "front['f'] keeps answering Pings while back['prices'] works on the Price")
''')

code('''
front_order = [(m, round(t0, 3)) for t0, _, m in spans(w7.trace, "f")]
print(front_order)
assert [m for m, _ in front_order] == ["Quote", "Ping", "Ping", "Ping", "Priced"], front_order
assert w7.results["quote"][0] == 42 and w7.results["quote"][1] >= 2.0
price = spans(w7.trace, "prices")[0]
assert all(price[0] < t < price[1] for m, t in front_order if m == "Ping")   # Pings handled while back was busy
print("holds: front read three Pings while its ask to back was pending")
''')

# ----------------------------------------------------------------------------------------------------------------
md("""
## 8. `ctx.merge`: a stream as messages

> *A body may also run a TaskGroup or consume an asynchronous stream.*

`ctx.merge(stream)` delivers every item of an async iterable into the key's own inbox, mixed with the other messages,
still one at a time. Here a `listener` merges a feed that yields a reading every 2 s.

**Predict.** The client asks `Ping` at 3 s. Is it handled between two readings, or does it wait until the feed ends?
""")

code('''
@dataclass(frozen=True)
class Reading:
    value: int


@dataclass(frozen=True)
class Listen(Askable[None]):
    pass


async def feed():
    for value in range(1, 4):
        await asyncio.sleep(2)
        yield Reading(value)


@actor(initial=0)
async def listener(ctx: Context[int, Listen | Reading | Ping]) -> None:
    async for msg in ctx.inbox:
        match msg:
            case Listen(reply_to=reply_to):
                ctx.merge(feed())
                reply_to.tell(None)
            case Reading(value):
                ctx.effect("begin", msg=f"Reading {value}")
                await asyncio.sleep(0.5)
                await ctx.state.update(lambda total: total + value)
                ctx.effect("end", msg=f"Reading {value}")
            case Ping(reply_to=reply_to):
                ctx.effect("begin", msg="Ping")
                reply_to.tell("pong")
                ctx.effect("end", msg="Ping")


async def main(system, world):
    ref = system.ref(listener, "s")
    await ref.ask(Listen())
    await asyncio.sleep(3)
    await ref.ask(Ping())


w8 = run(main, until=8)
handling_chart(w8.trace, "listener['s']: the feed's readings and the client's Ping, one at a time")
''')

code('''
order = [(m, round(t0, 3)) for t0, _, m in spans(w8.trace, "s")]
print(order)
assert [m for m, _ in order] == ["Reading 1", "Ping", "Reading 2", "Reading 3"], order
assert [t for _, t in order] == [2.0, 3.0, 4.0, 6.0], order
bars = spans(w8.trace, "s")
assert all(a[1] <= b[0] for a, b in zip(bars, bars[1:]))   # still one message at a time
print("holds: the stream's items arrived as messages, in between the others")
''')

md("""
## 9. A type name from another node: refused, never imported

> *A node that encounters an unfamiliar type imports that name. Definitions therefore belong at module scope, and
> cluster members need the same actor definitions.*

**casty lab departs from this sentence on purpose.** A type name (section 1: `module:qualname`) travels in every
routed message, in every ref inside a message, in a key's `@behavior` page. If a node imported the module such a name
points at, anyone able to send it one frame could make it run the top-level code of any module on its `sys.path`
(`os`, `subprocess`, or a file an attacker left there), and a node's behaviour would depend on what happens to be
installed beside it. So casty never imports a module named by the network: a node hosts the types its own program
imported (`python -m casty node --module myapp.actors`, or an ordinary `import`), and an unknown name is an
`UnknownActor` error naming it. The seed's second sentence still holds, more strictly: every member must import the
same actor definitions at start.

Three nodes run here, and `counter` (section 1) is defined in this notebook, so every node hosts it. A stranger that
speaks the cluster's wire format (`sim.faults.ForgedRef`) sends `n2`, the owner of a `counter` key, two frames:

1. at 4 s, a `Get` for that key whose `reply_to` ref names the type `this:forged`;
2. at 5 s, a `Get` routed to the type `this:forged` itself.

`this` is a real module of Python's standard library: importing it prints *The Zen of Python*. If `n2` imported the
name, the poem would appear under the cell.

**Predict.** What does `n2` do with each frame? Is `this` in `sys.modules` afterwards? Does a client's `Get` to the
same key at 6 s still get its answer (the client told it `Add(5)` before, and tells it `Add(2)` then)?
""")

code('''
import sys

from casty import Cluster
from sim.faults import FaultPlan, ForgedRef

PEERS = Cluster(seeds=["n1"], heartbeat=0.2, suspect_after=1, dead_after=1)
FORGED = "this"                                   # the module a forged name points at
assert FORGED not in sys.modules


def forged_names(seed=0):
    world = sim.World(seed=seed)
    for name in ("n1", "n2", "n3"):
        world.add_node(name, cluster=PEERS)
    world.run(until=2.0)                          # the membership converges
    key = next(k for k in (f"c{i}" for i in range(100)) if world.system("n1").placement(counter, k).owner == "n2")
    got = {"key": key}

    async def client(system, world):
        ref = system.ref(counter, key)
        ref.tell(Add(5))
        await asyncio.sleep(0.5)                                      # a tell is not ordered before a later ask
        got["first"] = await ref.ask(Get())                           # before: the key runs on n2
        got["modules"] = set(sys.modules)
        await asyncio.sleep(6.0 - world.now)
        ref.tell(Add(2))
        await asyncio.sleep(0.5)
        got["after"] = await ref.ask(Get())                           # after both forged frames

    world.spawn("n1", client, world)
    get = f"{Get.__module__}:{Get.__qualname__}"
    FaultPlan.of(
        ForgedRef(at=4.0, node="n2", actor=counter.name, key=key, message=get, module=FORGED),
        ForgedRef(at=5.0, node="n2", actor=f"{FORGED}:forged", key=key, message=get, module=FORGED),
    ).apply(world)
    world.run(until=7.5)
    world.close()
    return world, got


w9, got9 = forged_names()
refused = w9.trace.of("message.dropped", node="n2")
for row in refused:
    print(f"{row.t:.3f} s  n2 refused a message to {row.get('actor')}[{row.get('key')!r}]: {row.get('reason')}")
print("answers to the client's Gets:", got9["first"], got9["after"], "| 'this' imported:", FORGED in sys.modules)


def refusal_chart(trace, title):
    """Lanes n1 (the client's node) and n2 (the key's owner): the client's messages to the key (blue triangles),
    forged frames arriving (purple squares), what n2 refused and why (red-orange X), the answers n2 sent (green dots)."""
    nodes = ["n1", "n2"]
    lane = {n: i for i, n in enumerate(nodes)}
    fig = Figure(figsize=(11, 2.8), layout="constrained")
    ax = fig.add_subplot()
    sent = [r for r in trace.of("net.sent", node="n1") if r.get("frame") == "Deliver" and r.get("dst") == "n2"]
    ax.scatter([r.t for r in sent], [lane["n1"]] * len(sent), marker=">", s=60, color="#0072B2", zorder=3,
               label="the client's Add / Get sent to the key's owner")
    forged = trace.of("fault.forged", node="n2")
    ax.scatter([r.t for r in forged], [lane["n2"]] * len(forged), marker="s", s=70, color="#CC79A7", zorder=3,
               label="a forged frame arrives (from a stranger)")
    dropped = trace.of("message.dropped", node="n2")
    ax.scatter([r.t for r in dropped], [lane["n2"] + 0.22] * len(dropped), marker="X", s=80, color="#D55E00",
               zorder=3, label="refused: UnknownActor, nothing imported")
    for i, r in enumerate(dropped):
        what = "its reply_to ref names" if "UnknownActor" in r.get("reason") else "its target type is"
        ax.text(r.t + (-0.08 if i % 2 == 0 else 0.08), lane["n2"] + 0.32, f"{what}\\n'this:forged': refused",
                ha="right" if i % 2 == 0 else "left", va="top", fontsize=8, color="#D55E00")
    replies = [r for r in trace.of("net.sent", node="n2") if r.get("frame") == "Reply"]
    ax.scatter([r.t for r in replies], [lane["n2"]] * len(replies), s=40, color="#009E73", zorder=3,
               label="n2 answers the client (Reply)")
    ax.set_yticks(range(len(nodes)), ["n1 (client)", "n2 (owner)"])
    ax.set_ylim(len(nodes) - 0.25, -0.5)
    ax.set_xlim(1.5, trace.rows[-1].t + 0.2)
    ax.set_xlabel("true time (s)")
    ax.grid(axis="x", color="#EEEEEE")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
    ax.set_title(title, loc="left")
    return fig


refusal_chart(w9.trace, "Two forged type names at n2: both refused, nothing imported; n2 answers before and after")
''')

code('''
trace = w9.trace
key = got9["key"]
assert [round(r.t) for r in trace.of("fault.forged", node="n2")] == [4, 5]
assert [(r.get("actor"), r.get("key")) for r in refused] == [(counter.name, key), ("this:forged", key)]
assert "UnknownActor(\\"actor type 'this:forged' is not hosted here" in refused[0].get("reason")      # a typed error
assert "actor type 'this:forged' is not hosted here" in refused[1].get("reason")
failed = [r for r in trace.of("net.dropped", node="n2") if r.get("frame") == "Failed"]
assert [r.get("dst") for r in failed] == ["mallory", "mallory"]           # n2 answered each frame with a failure
assert {r.get("reason") for r in failed} == {"unknown node"}              # (which the stranger, off the network, never gets)
assert FORGED not in sys.modules                                          # the module was never imported
assert set(sys.modules) - got9["modules"] == set()                        # nor any other, during the forged frames
assert (got9["first"], got9["after"]) == (5, 7)                            # n2 kept serving the key
assert [r for r in trace.of("activation.failed") + trace.of("member.changed") if r.t > 3.5] == []   # nothing failed, nobody left
print("holds (casty's stricter rule): a type name from the network is refused as UnknownActor and never imported")
''')

md("""
## What to remember

* A type is its `module:qualname`; an entity is (type, key); a ref is a value naming an entity, and it can be saved
  in state or sent in a message.
* `tell` does not wait; `ask` waits for the body's answer.
* One message at a time per key. To stay responsive, hand slow work to `ctx.to_self` / `ctx.ask` and let the result
  come back as a message; `ctx.merge` turns a stream into messages.
* A node runs only the types its own program imported: a type name that arrives from the network is refused as
  `UnknownActor` and never imported, so every member imports the same actor definitions at start.

Next, chapter 02: when activations start and end, and what survives a failure.
""")

for i, cell in enumerate(cells):
    cell["id"] = f"actors-{i:02d}"  # stable ids: rebuilding gives the same file
nb = nbf.v4.new_notebook()
nb["cells"] = cells
nb["metadata"]["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
nb["metadata"]["language_info"] = {"name": "python"}
nbf.write(nb, "notebooks/01_actors.ipynb")
print("wrote notebooks/01_actors.ipynb")
