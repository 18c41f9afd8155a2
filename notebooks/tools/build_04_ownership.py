"""Writes notebooks/04_ownership.ipynb from this script (run from the project root), so its source can be reviewed as Python."""
import nbformat as nbf

cells = []
md = lambda s: cells.append(nbf.v4.new_markdown_cell(s.strip()))
code = lambda s: cells.append(nbf.v4.new_code_cell(s.strip()))

md("""
# 04 Ownership and epochs: who owns a key, and what a failure does to it

Three casty nodes, `n1`, `n2` and `n3`, run in the simulated world. Each key of an actor type (say `cl_ticker["t3"]`)
lives on **one node at a time**, its **owner**. Its state is also kept by **3 replicas** (here every node is a replica
of every key), and a write counts only when a **quorum** (2 of the 3) has accepted it.

Five words carry this chapter:

* **Epoch.** Before a node may run a key, it asks the replicas for a new **owner epoch**, a pair `(round, node)`:
  it sends `Prepare`, and each replica that has promised nothing newer answers `Promise` with the newest state it holds.
  With a quorum of promises the node is the owner; it starts the key from the newest state it was given
  (`found v3`: version 3 of the key's state). Epochs compare by round first, then by node id. Each node life has a
  number, so `(2, n1#1)` is round 2 won by `n1` in its first life (`n1#2` would be `n1` after a restart).
* **Fencing.** Every write carries the owner's epoch. A replica that has promised a *newer* epoch refuses it
  (`Nack`): the write is **fenced**. So an old owner that does not know it was replaced cannot overwrite the new owner.
* **Stepping down.** An owner that can no longer reach a quorum of the cluster (it suspects the others) ends its run of
  the key at once (*lost*), before anyone else may take it: an owner cut off stops, rather than waiting to be fenced.
* **Schedule occurrence.** A persisted schedule stores its next due time in the key's `@schedules` page, replicated like
  the state. Firing an occurrence means: tell the actor its message, and write the *next* due time. Whether that write
  reached a quorum before a crash decides what the next owner does: fire the occurrence **again** (a repeat) or not at
  all (if the message was never handled, the occurrence is **lost**).
* **Durable.** Replicas keep pages in memory. If every replica loses its memory at once, a plain key is gone; a
  `durable` type also writes every page to a store outside the nodes, and comes back from it.

Every run below is a real casty cluster on virtual time: the runtime is not modelled, only its clock, network and
disk are simulated. Same seed, same run. After each picture, an `assert` cell checks what the text says against the
run's trace, so the text and the picture cannot drift apart.

Two views read the run's trace:

* the **ownership chart** of one key: one lane per node, a coloured bar while the node holds the key's epoch (hatched
  when it is *stale*: a newer epoch exists), confirmed writes as ticks above it (black: state, blue: next due), fenced
  writes as red-orange X's, failed writes as hollow red-orange circles (writes of one instant share one mark, with a count), schedule
  firings as dots under it (orange diamond: the same due fired again), faults on the lanes, and "run ended: ..." where
  a run ended for a reason no other mark shows;
* the **space-time diagram** of a few milliseconds: one vertical line per node, time running down, one arrow per
  message from when it was sent to when it arrived (purple: epoch, blue: writes, red-orange: refusals, green: handoff, orange:
  client calls, grey: heartbeats; dashed: answers; a red-orange X: the message never arrived), and what each node did at
  that moment.

Both leave out the runtime's own keys (the cron claim keys of chapter 06) unless you name them.
""")

code("""
%matplotlib inline
import time

from sim import scenarios
from sim.viz import ownership_chart, spacetime_diagram
from sim.viz.data.ownership import epoch_spans
from sim.messages import frame_arrows

LAB = ["stale-owner-fenced", "newer-promise-fences", "ownership-repeat", "ownership-miss", "all-replicas-lost"]
for name in LAB:
    print(f"{name:<21} {scenarios.registered()[name].description}")

runs = {}
started = time.perf_counter()
for name in LAB:
    runs[name] = scenarios.run(name, seed=0)
    print(f"{name:<21} checks hold: {runs[name].ok}")
print(f"{len(LAB)} simulated runs in {time.perf_counter() - started:.1f} s of real time")


def frames_in(trace, start, duration, tag=None, src=None):
    \"\"\"The frames the space-time diagram draws in [start, start + duration] (seconds), optionally of one tag or sender.\"\"\"
    return [a for a in frame_arrows(trace, round(start * 1e9), round((start + duration) * 1e9))
            if (tag is None or a.tag == tag) and (src is None or a.src == src)]
""")

md("""
## 1. A cut-off owner steps down

`n3` owns the key and runs its schedule (every 200 ms). At 3 s the network splits `n3` from `n1` and `n2`; it heals
at 7.2 s.

**Predict first.** Cut off, does `n3` keep running the key until somebody else takes it over? Is there a moment when
two nodes run the key? A moment when none does?
""")

code("""
run = runs["stale-owner-fenced"]
key = run.world.results["key"]
print("count read on the majority side during the split:", run.world.results["majority"])
print("count read from n3 after the heal:              ", run.world.results["final"])
ownership_chart(run.trace, key=key)
""")

md("""
What the chart shows:

* During the split, `n3` keeps firing, but its writes cannot reach a quorum. After 0.8 s of silence it **suspects**
  both peers: it has lost its quorum, so it **steps down**. Its run ends *lost*, the writes it had in flight fail
  (the hollow circle, ×5) and the `Tick`s queued for the key are dropped.
* One second later `n1` and `n2` declare `n3` dead, and `n1` wins epoch `(2, n1#1)` from the two replicas it can
  reach. It starts from the newest confirmed version (`found v6`) and goes on counting. Its first firing is a late
  catch-up: one delivery, the dues it missed are skipped (counted), and one of them (orange diamond) is a due `n3` had
  already fired during the split, whose next-due write never counted.
* From the step-down to the takeover **nobody owns the key**: that second is the price of never having two owners at
  once. Nothing is stale and no write is fenced.
* At the heal, `n3` is the key's owner on the ring again: `n1` **hands the key off** and `n3` wins `(2, n3#1)`. Same
  round as `n1`'s, and newer, because a tie in the round is broken by the node id. It starts from `n1`'s count, not
  its own.
""")

code("""
actor = "sim.scenarios.cluster:cl_ticker"
trace = run.trace
spans = epoch_spans(trace, actor, key)
assert [(s.node, s.epoch_round, s.ended_by) for s in spans] == [("n3", 1, "lost"), ("n1", 2, "handoff"), ("n3", 2, "end of trace")]
cut = trace.of("fault.partition")[0]
stepped_down, taken = spans[0].end_ns, spans[1].start_ns
assert cut.t_ns < stepped_down < taken                          # n3 stopped before n1 started: never two owners
assert all(s.superseded_ns is None for s in spans)              # so nothing is ever stale
assert trace.of("write.failed", key=key, reason="fenced") == []  # and no write is fenced
failed = trace.of("write.failed", key=key)
assert {r.t_ns for r in failed} == {stepped_down} and len(failed) == 5   # the ×5: every write in flight, at the step-down
confirmed_before_cut = [r for r in trace.of("write.confirmed", key=key) if r.t_ns < cut.t_ns]
assert spans[1].found == confirmed_before_cut[-1].get("version") == 6   # n1 found the last version confirmed before the cut
assert spans[2].found > spans[1].found and run.world.results["final"] >= run.world.results["majority"]
print(f"n3 stepped down at {stepped_down / 1e9:.2f} s, n1 took over at {taken / 1e9:.2f} s: "
      f"{(taken - stepped_down) / 1e9:.2f} s with no owner; n3 back at {spans[2].start_ns / 1e9:.2f} s from v{spans[2].found}")
""")

md("""
The moment `n1` takes over, message by message: `n1` sends `Prepare` to both replicas, but the one to `n3` is cut by
the partition (red-orange X). `n2` answers `Promise`; one promise plus `n1`'s own replica is a quorum, so `n1` holds epoch 2,
activates the key from the replicas (*recovered*) and writes with `Write`/`Ack`.
""")

code("""
spacetime_diagram(run.trace)   # by default: the first change of owner
""")

code("""
takeover = trace.of("epoch.acquired", key=key)[1]
window = frames_in(trace, takeover.t - 0.010, 0.012)
prepares = [a for a in window if a.tag == "Prepare" and a.src == "n1"]
assert sorted((a.dst, a.dropped) for a in prepares) == [("n2", None), ("n3", "partition")]
assert [(a.src, a.dst) for a in window if a.tag == "Promise"] == [("n2", "n1")]
""")

md("""
## 2. A write is fenced

Since an owner cut off steps down, a partition no longer leaves an old owner writing. To see the fence itself, the
`newer-promise-fences` run makes `n1` and `n2` promise a newer epoch `(2, n1#0)` behind the owner's back: the
`Prepare` of an acquisition whose owner vanished, delivered to both replicas at 3 s. `n3` does not know.

**Predict first.** What do the replicas answer to `n3`'s next write, made under epoch 1? What does the client whose
`Add` made that write get? And the `Add` after it?
""")

code("""
run = runs["newer-promise-fences"]
key = run.world.results["key"]
print("answers before the promise:", run.world.results["before"], "| after:", run.world.results["after"],
      "| final read:", run.world.results["final"])
ownership_chart(run.trace, key=key)
""")

md("""
Both replicas had promised `(2, n1#0)`, newer than `n3`'s `(1, n3#1)`: they answer `Nack`, the write is **fenced**
(red-orange X), `n3`'s run ends *lost*, and the client's `Add` fails with `Unavailable` (it was not counted). In the
diagram below, the first `Nack` is enough: `n3` learns at once that a newer epoch exists, and for the `Add`s still
queued it prepares a round above the promise (purple `Prepare`). Both replicas answer `Promise`; `n3` writes the newest
state back under the new epoch (`Write`/`Ack`) and wins `(3, n3#1)`, finding `v4`. No count was lost, and none was
made twice. (The `Nack` from `n2` to `n1` is a replica's rule *Supersede*: its promise rose above `n1`'s `(2, n1#0)`,
so it tells `n1` at once. The shaded end of the diagram only shows where the frames sent in the window arrive.)
""")

code("""
fenced = run.trace.of("write.failed", key=key, reason="fenced")
spacetime_diagram(run.trace, start=fenced[0].t - 0.004, duration=0.0095)   # the fence .. the new epoch, 5.5 ms later
""")

code("""
trace = run.trace
spans = epoch_spans(trace, "sim.scenarios.probes:tally", key)
assert [(s.node, s.epoch_round, s.ended_by) for s in spans] == [("n3", 1, "lost"), ("n3", 3, "end of trace")]
assert len(fenced) == 1 and fenced[0].node == "n3" and fenced[0].t_ns == spans[0].end_ns   # fenced, and the run ends there
promised_round = run.world.results["promised"][1]
assert spans[0].epoch_round < promised_round < spans[1].epoch_round                      # 1 < 2 < 3
window = frames_in(trace, fenced[0].t - 0.004, 0.0095)                                   # what the diagram draws
nacks = [a for a in window if a.tag == "Nack" and a.dst == "n3"]
assert sorted((a.src, a.dst) for a in nacks) == [("n1", "n3"), ("n2", "n3")]              # both replicas refused
prepares = sorted(a.dst for a in window if a.tag == "Prepare" and a.src == "n3")
assert prepares == sorted(a.src for a in window if a.tag == "Promise" and a.dst == "n3") == ["n1", "n2"]   # each answered
won = trace.of("epoch.acquired", key=key)[-1]
assert won.node == "n3" and won.get("epoch_round") == 3 and won.get("found") == 4
assert fenced[0].t_ns < won.t_ns <= fenced[0].t_ns + 5_500_000                            # in the window: won 5 ms later
assert [(a.src, a.dst) for a in window if a.tag == "Nack" and a.dst != "n3"] == [("n2", "n1")]   # Supersede: n2 tells n1
assert run.world.results["before"] == [1, 2] and run.world.results["after"] == ["Unavailable", 4, 5]
assert run.world.results["final"] == 5
""")

md("""
## 3. An occurrence repeats

The owner `n3` fires an occurrence of a 5-second schedule and crashes in the same instant. 50 ms before, its outgoing
messages were cut (a one-way partition), so that nothing it sends could reach a replica anyway. The replicas still say
*this occurrence is due*. `n2` takes the key over (about 1.8 s later: the time to declare `n3` dead) and, reading the
replicas, fires the same due time **again**.

**Predict first.** Will the new owner fire the occurrence `n3` fired just before it crashed? What would have to be
different for it not to?
""")

code("""
run = runs["ownership-repeat"]
key = run.world.results["key"]
ownership_chart(run.trace, key=key)
""")

md("""
The orange diamond is the repeat; the dashed arrow joins it to the first firing of the same due. This is
**at-least-once** delivery across owners: the only way to never repeat would be to write the next due before telling
the actor, and then a crash in between loses the occurrence instead. An actor whose schedule must not act twice should
remember in its state what it already did (chapter 07 does it with the daily report).

Zoom on the firing: the crash comes in the same instant, **before `n3` sends anything**. No `Write` of the next due
leaves `n3` (the diagram counts 0 protocol frames), and both writes it had begun fail as *unavailable*. `n3`'s
heartbeats a few milliseconds earlier end in red-orange X's: the cut, which would have dropped the writes too. The `Tick` it
had told its actor is dropped with the node.
""")

code("""
fired = [r for r in run.trace.of("schedule.fired", key=key) if r.node == "n3"][-1]
spacetime_diagram(run.trace, start=fired.t - 0.0075, duration=0.0095)
""")

code("""
trace = run.trace
crash = trace.of("fault.crash")[0]
assert crash.node == "n3" and crash.t_ns == fired.t_ns                     # the crash is in the firing's instant
zoom = frames_in(trace, fired.t - 0.0075, 0.0095)
assert [a for a in zoom if a.tag != "Heartbeat"] == []                    # "0 protocol frames": no Write left n3
assert {a.dropped for a in zoom if a.src == "n3"} == {"partition"}         # n3's heartbeats: cut
failed = [r for r in trace.of("write.failed", key=key) if r.t_ns == crash.t_ns]
assert sorted((r.get("operation"), r.get("reason")) for r in failed) == [("schedule.fire", "unavailable"), ("state.set", "unavailable")]
again = [r for r in trace.of("schedule.fired", key=key) if r.get("due_us") == fired.get("due_us")]
assert [r.node for r in again] == ["n3", "n2"]                             # the same due, fired by both owners
assert [m.get("message") for m in trace.of("message.dropped", key=key)] == ["Tick"]
""")

code("""
spacetime_diagram(run.trace)   # n2's takeover: n3 is down, so its Prepare and Write never find a receiver
""")

md("""
## 4. An occurrence is lost

The same schedule on a slower actor: handling a `Tick` takes 0.5 s before it counts.

**Predict first.** This time the owner dies 0.2 s *after* the firing, once its next-due write is confirmed, while the
`Tick` is still being handled. Does the next owner fire that occurrence again?
""")

code("""
run = runs["ownership-miss"]
key = run.world.results["key"]
ownership_chart(run.trace, key=key)
""")

md("""
The firing's next-due write **was** confirmed (the blue tick at 12 s), and the node died 0.2 s later: no state write
(no black tick) follows. The next owner `n1` reads the replicas, which say *next due: 17 s*, so it does not fire 12 s
again. The occurrence fired once, on a node that died before acting on it: it is **lost**.

Repeat or loss is decided by one question: *was the next due confirmed before the crash?*
""")

code("""
fired = [r for r in run.trace.of("schedule.fired", key=key) if r.node == "n3"][-1]
spacetime_diagram(run.trace, start=fired.t - 0.001, duration=0.0045)   # the firing: the next due is confirmed (Write/Ack)
""")

code("""
trace = run.trace
crash = trace.of("fault.crash")[0]
writes = [r for r in trace.of("write.confirmed", key=key, node="n3") if fired.t_ns <= r.t_ns < crash.t_ns]
assert [tuple(r.get("pages")) for r in writes] == [("@schedules",)]         # the next due, and no state write
assert round((crash.t_ns - fired.t_ns) / 1e6) == 200                        # the crash 0.2 s after the firing
heir = [r for r in trace.of("schedule.fired", key=key) if r.t_ns > crash.t_ns]
assert heir[0].node == "n1" and heir[0].get("due_us") == fired.get("next_us")   # n1's first firing is the next due
assert all(r.get("due_us") != fired.get("due_us") for r in heir)                 # 12 s is never fired again
""")

md("""
## 5. Every replica loses its memory

Two keys have a schedule every second: `plain` (a `cl_ticker`, kept only in the replicas' memory, owned by `n3`) and
`kept` (a `durable="write"` type, which also writes every confirmed page to the cluster's store, owned by `n1`).
First `kept`'s owner `n1` crashes alone at 3.5 s and comes back at 4.5 s with empty memory. Then, at 8 s, **all three
nodes** crash, and restart at 11 s with empty memory.

**Predict first.** After the full restart, what does a `Get` of `plain` answer? Does `kept`'s schedule go on by itself?
With which epoch round, and how many late firings (in one delivery, or a burst)?
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
* `plain` lived only in the replicas' memory: after the full restart no node knows it. Its schedule never fires again,
  and the `Get` at 19 s wins a new epoch that **found nothing**: the count starts over at 0. (`(1, n3#2)` is newer than
  `(1, n3#1)`: `n3#2` is a later life of `n3`.)
* `kept`, after `n1`'s lone crash, is still held by the two other replicas: `n1#2` wins `(2, n1#2)` from them
  (`found v3`), with one **late firing** that skips (and counts) the dues missed while it was down.
* After the full restart, `n1` finds `kept` in the store and resumes it **without any message**. Its epoch **jumps to
  round 3**: the store kept the pages written under round 2, and a new epoch must be above every epoch the key had.
  Its first firing is again one late delivery, skipping the dues missed while the cluster was down: **two late
  firings in all, one after each outage, never a burst**.
""")

code("""
trace = run.trace
assert run.world.results["after:plain"] == 0
plain = epoch_spans(trace, "sim.scenarios.cluster:cl_ticker", "plain")
assert [(s.node, s.epoch_round, s.incarnation, s.found) for s in plain] == [("n3", 1, 1, 0), ("n3", 1, 2, 0)]
restart = max(r.t_ns for r in trace.of("fault.restart"))
assert [r for r in trace.of("schedule.fired", key="plain") if r.t_ns > restart] == []   # plain's schedule is gone
kept = epoch_spans(trace, "sim.scenarios.replicas_lost:kept_ticker", "kept")
assert [(s.node, s.epoch_round, s.incarnation) for s in kept] == [("n1", 1, 1), ("n1", 2, 2), ("n1", 3, 3)]
assert kept[2].found > kept[1].found > 0 and run.world.results["after:kept"] >= run.world.results["before:kept"]
late = trace.of("schedule.caught_up", key="kept")
assert len(late) == 2 and [r.t_ns for r in late] == [kept[1].start_ns, kept[2].start_ns]   # one late firing per outage
every_us = 1_000_000                                                                     # the schedule: every second
for r in late:   # the catch-up rule: the dues that passed are counted as skipped, the next due is the first after now
    skipped = (r.get("now_us") - r.get("due_us")) // every_us
    assert r.get("skipped") == skipped >= 1 and r.get("next_us") == r.get("due_us") + every_us * (skipped + 1)
fired = [r.t_ns for r in trace.of("schedule.fired", key="kept")]
assert all(b - a > every_us * 1000 // 2 for a, b in zip(fired, fired[1:]))                # never a burst
print("kept's late firings:", [(round(r.t, 2), f"{r.get('skipped')} skipped") for r in late])
""")

md("""
The full restart, message by message: each node starts a **handoff** round (green), asking its peers for the replicas
they hold (`SyncRequest` / `SyncDump`); until a node has them, its replica is not *ready* and is not counted in any
quorum (a replica that is not ready answers a `Prepare` with a *blank* promise, which does not count). That is why
`n1`'s first attempts to prepare `kept` after the restart (purple, where they fall in the window) do not win: it
prepares again about every half second, and wins round 3 only once every replica's handoff round is done.
""")

code("""
handoff = [r for r in trace.of("handoff.started") if r.t_ns > restart]
spacetime_diagram(trace, start=handoff[0].t - 0.0005, duration=0.006)
""")

code("""
window = frames_in(trace, handoff[0].t - 0.0005, 0.006)
ended = {r.node: r.t_ns for r in trace.of("handoff.ended") if r.t_ns > restart}
assert sorted(r.node for r in handoff) == ["n1", "n2", "n3"] and len(ended) == 3
assert {a.tag for a in window} >= {"SyncRequest", "SyncDump"}
assert all(r.get("keys") == 1 for r in trace.of("handoff.ended") if r.t_ns > restart)   # each pulled kept's pages
attempts = sorted({r.t_ns for r in trace.of("net.sent", node="n1") if r.get("frame") == "Prepare" and restart < r.t_ns < kept[2].start_ns})
assert len(attempts) >= 2                                        # the first attempts did not win
assert all(400 <= (b - a) / 1e6 <= 700 for a, b in zip(attempts, attempts[1:]))   # again about every half second
assert kept[2].start_ns > max(ended.values())                     # won once every replica was ready
print(f"n1 prepared kept {len(attempts)} times after the restart; handoff rounds done by {max(ended.values()) / 1e9:.3f} s, "
      f"round 3 won at {kept[2].start_ns / 1e9:.3f} s")
""")

md("""
### Scrub it, then break it yourself

The **explorer** replays the stale-owner run frame by frame: press play or drag the slider (it draws when you let go).
At each time `t` it shows the **cluster graph** (green: up, orange: paused, grey: down; a red dashed line is a link
cut both ways, a purple dashed arrow a link cut one way, in the arrow's direction; the thick ring is the key's owner; under each node, what the others believe about it), the **events** of that
step in words, and the ownership chart **up to t** (the future is veiled).

Then pick a node and press a fault button: the explorer **forks** the run, the same seed with exactly one more fault
at `t`, and shows the fork beside the original. **Predict first:** if you pause `n3` at 2.5 s for 2 s, who owns the
key at 5 s? (In a page exported without a kernel, you see a few pre-rendered frames instead.)
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
## 6. Two activations at once: the old owner has not stepped down yet

> *During a cluster ownership change, two nodes can briefly have activations of the same logical key.* … *Replication
> fences writes.*

In section 1 there was never a moment with two owners: `n3`, cut off, **suspected** its peers after 0.8 s and stepped
down, a second before they declared it dead. That order holds only while every node notices a silence as fast as the
others. Here `n3` is a node configured slower than its peers: it suspects after 6 s (theirs: 0.8 s) and waits 6 s
for a write's quorum (theirs: 1 s). The schedule fires every 500 ms. At 3 s `n3` is cut off; at 5.5 s its link to `n1`
comes back (the link to `n2` at 6.5 s).

**Predict first.** Between `n2`'s takeover and 5.5 s, how many nodes run the key? Both fire the schedule: which
count wins, `n3`'s or `n2`'s? What happens to the writes `n3` made in that time when its link to `n1` comes back?
""")

code("""
from casty import Cluster
from sim.world import World
from sim.scenarios.cluster import CLUSTER, Arm, cl_ticker

SLOW = Cluster(seeds=["n1"], heartbeat=0.2, suspect_after=6, dead_after=1)   # n3 trusts silence much longer than its peers


def slow_detector_split(seed=0):
    world = World(seed)
    for name in ("n1", "n2", "n3"):
        slow = name == "n3"
        world.add_node(name, cluster=SLOW if slow else CLUSTER, ask_timeout=2.0, write_timeout=6.0 if slow else 1.0)

    def script(world):
        yield world.timeout(2.0)                                                # membership converges
        key = next(k for k in (f"t{i}" for i in range(100)) if world.system("n1").placement(cl_ticker, k).owner == "n3")
        world.results["key"] = key

        async def arm(system):
            return await system.ref(cl_ticker, key).ask(Arm(0.5))

        world.spawn("n1", arm)
        yield world.timeout(1.0)
        world.partition(["n3"], ["n1", "n2"])
        yield world.timeout(2.5)
        world.reconnect(["n3"], ["n1"])
        yield world.timeout(1.0)
        world.heal()

    world.process(script(world))
    world.run(until=12)
    world.close()
    return world


double = slow_detector_split()
key = double.results["key"]
ownership_chart(double.trace, key=key)
""")

md("""
What the chart shows:

* At 4.8 s `n1` and `n2` declare `n3` dead and `n2` wins `(2, n2#1)` from the two replicas it reaches. `n3` has not
  noticed anything: its run goes on (the hatched stretch of its bar: a newer epoch exists). For 0.7 s **two nodes run
  the key**, and both fire the same dues (5.0 s and 5.5 s: the orange diamonds on `n3`'s lane). The mailbox rule (one
  message at a time) holds on each node, not across the two: nothing orders `n3`'s `Tick`s against `n2`'s.
* Only `n2`'s writes count (its ticks above the bar). Every write `n3` made meanwhile waits for a quorum it cannot
  reach. At 5.5 s they reach `n1`, which has promised `n2`'s newer epoch: all 7 are **fenced** (×7), and `n3`'s run
  ends *lost*, before any of them counted.
* Then the ring gives the key back to `n3`, which prepares a newer round `(3, n3#1)`, starting from `n2`'s count, not
  from its own.

With the nodes configured alike (section 1) this overlap does not happen. A process frozen across the takeover (a
long pause) holds its activation through it too, but casty notices the freeze at the resume, before running
anything (`member.doubted`: *frozen: the heartbeat came due 4.000 s late*), and steps down. Either way, the fence is
what keeps the count right, not the timing.
""")

code("""
from sim.checks import epochs_only_grow, no_confirmed_write_lost, single_writer_per_epoch

trace = double.trace
actor = "sim.scenarios.cluster:cl_ticker"
spans = epoch_spans(trace, actor, key)
assert [(s.node, s.epoch_round) for s in spans] == [("n3", 1), ("n2", 2), ("n3", 3)]
old, new = spans[0], spans[1]
assert old.ended_by == "lost" and new.ended_by in ("handoff", "lost")   # n2 leaves when n3 comes back (either way)
started = {(r.node, r.get("lease")): r.t_ns for r in trace.of("activation.started", key=key)}
ended = {(r.node, r.get("lease")): r.t_ns for r in trace.of("activation.ended", key=key)}
assert started[("n2", 1)] < ended[("n3", 1)]                         # n2's activation began before n3's ended
assert old.superseded_ns == new.start_ns                             # from then on, n3 ran under a stale epoch
overlap = (new.start_ns, old.end_ns)
fired = [r for r in trace.of("schedule.fired", key=key) if overlap[0] <= r.t_ns <= overlap[1]]
by_due = {}
for r in fired:
    by_due.setdefault(r.get("due_us"), []).append(r.node)
both = [due for due, nodes in by_due.items() if sorted(nodes) == ["n2", "n3"]]
since = lambda due_us: round((due_us - double.epoch_us) / 1e6, 1)   # a due as seconds since the start (exact clocks)
assert [since(due) for due in both] == [5.0, 5.5]                   # two dues fired by both activations
assert round((overlap[1] - overlap[0]) / 1e9, 1) == 0.7              # for 0.7 s
# Fencing: none of n3's writes counted while it was stale; each was refused as fenced, and its run ended there.
stale_writes = [r for r in trace.of("write.confirmed", key=key, node="n3") if overlap[0] <= r.t_ns <= overlap[1]]
assert stale_writes == []
fenced = trace.of("write.failed", key=key, node="n3", reason="fenced")
assert len(fenced) == 7 and {r.t_ns for r in fenced} == {old.end_ns}
assert {r.get("lease") for r in fenced} == {1}                       # all of the old run's
assert trace.of("write.failed", key=key, reason="unavailable") == []
confirmed = [r.get("version") for r in trace.of("write.confirmed", key=key) if "state" in r.get("pages")]
assert confirmed == sorted(set(confirmed))                           # no version confirmed twice, none out of order
assert spans[2].found == max(r.get("version") for r in trace.of("write.confirmed", key=key) if r.t_ns < spans[2].start_ns)
for check in (epochs_only_grow, single_writer_per_epoch, no_confirmed_write_lost):
    check(double)                                                   # the cluster's safety checks hold
print(f"two activations from {overlap[0] / 1e9:.3f} s to {overlap[1] / 1e9:.3f} s; dues fired by both: {len(both)}; "
      f"n3's writes fenced: {len(fenced)}")
""")

code("""
# The frozen case, for comparison: the same cluster with alike nodes, n3 paused from 3 s to 7 s instead of cut off.
def frozen_owner(seed=0):
    world = World(seed)
    for name in ("n1", "n2", "n3"):
        world.add_node(name, cluster=CLUSTER, ask_timeout=2.0, write_timeout=1.0)

    def script(world):
        yield world.timeout(2.0)
        key = next(k for k in (f"t{i}" for i in range(100)) if world.system("n1").placement(cl_ticker, k).owner == "n3")
        world.results["key"] = key

        async def arm(system):
            return await system.ref(cl_ticker, key).ask(Arm(0.5))

        world.spawn("n1", arm)
        yield world.timeout(1.0)
        world.pause("n3")
        yield world.timeout(4.0)
        world.resume("n3")

    world.process(script(world))
    world.run(until=10)
    world.close()
    return world


frozen = frozen_owner()
ftrace, fkey = frozen.trace, frozen.results["key"]
fspans = epoch_spans(ftrace, actor, fkey)
assert [s.node for s in fspans[:2]] == ["n3", "n2"] and fspans[0].ended_by == "lost"
resume = ftrace.of("fault.resume")[0]
assert fspans[1].start_ns < fspans[0].end_ns == resume.t_ns                 # two activations, until the resume instant
assert [r for r in ftrace.of("schedule.fired", key=fkey, node="n3") if fspans[1].start_ns <= r.t_ns <= resume.t_ns] == []
assert [r for r in ftrace.of("write.failed", key=fkey) if r.t_ns == resume.t_ns] == []   # it stepped down before writing
assert any("frozen" in r.get("reason") for r in ftrace.of("member.doubted", node="n3") if r.t_ns == resume.t_ns)
print(f"frozen n3 held its activation {(resume.t_ns - fspans[1].start_ns) / 1e9:.2f} s past n2's takeover, and ran nothing in it")
""")

md("""
## 7. Your turn: predict, then run

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
# The answers for the defaults, read from the trace (change the run above and these lines say what changed).
crash = trace.of("fault.crash")[0]
owner, heir = trace.of("epoch.acquired", key="lab")[:2]
confirmed = [r for r in trace.of("write.confirmed", key="lab") if r.t_ns < crash.t_ns]
assert heir.node != owner.node == crash.node and 1.0 < heir.t - crash.t < 3.0
assert heir.get("found") == confirmed[-1].get("version")           # the heir found the last confirmed version
dues = [r.get("due_us") for r in trace.of("schedule.fired", key="lab")]
print(f"{heir.node} took over {heir.t - crash.t:.1f} s after the crash, found v{heir.get('found')}; "
      f"repeats: {len(dues) - len(set(dues))}; late firings: {len(trace.of('schedule.caught_up', key='lab'))}")
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
    seed_box = widgets.IntSlider(value=0, min=0, max=20, description="seed", continuous_update=False)
    crash_box = widgets.FloatSlider(value=9.5, min=4.0, max=12.0, step=0.05, description="crash at (s)", continuous_update=False)
    every_box = widgets.FloatSlider(value=1.0, min=0.2, max=3.0, step=0.1, description="every (s)", continuous_update=False)

    def show_scenario(scenario, seed):
        display(explore(scenario, seed))

    def show_own(seed, crash_at, every):
        display(ownership_chart(crash_the_owner(seed, crash_at, every), key="lab"))

    display(widgets.HTML("<b>A built-in scenario with another seed</b>"))
    display(widgets.HBox([scenario_box, seed_box]), widgets.interactive_output(show_scenario, {"scenario": scenario_box, "seed": seed_box}))
    display(widgets.HTML("<b>Your cluster: crash the owner</b> (the same seed control)"))
    display(widgets.HBox([crash_box, every_box]),
            widgets.interactive_output(show_own, {"seed": seed_box, "crash_at": crash_box, "every": every_box}))
except ImportError:  # no widgets: one run of each, to edit by hand
    display(explore("ownership-repeat", seed=1))
""")

md("""
### Questions to take away

* Why does the new owner need a **quorum** of promises, not just one replica? (Think of the partition in part 1: could
  both sides have won the same epoch?)
* In part 1 nobody owned the key for a second. What would go wrong if `n3` kept running until it was fenced?
* In part 3, what would have to change in the runtime for the occurrence to be fired at most once? What would it cost?
* In part 5, what would `plain` need to survive? What does `durable="write"` add to every write of `kept`?

Next: chapter 05 (`05_skew.ipynb`) moves the nodes' clocks apart, and shows what that does to a key's schedule when
its owner changes.
""")

for i, cell in enumerate(cells):
    cell["id"] = f"lab-{i:02d}"  # stable ids: rebuilding gives the same file
nb = nbf.v4.new_notebook()
nb["cells"] = cells
nb["metadata"]["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
nb["metadata"]["language_info"] = {"name": "python"}
nbf.write(nb, "notebooks/04_ownership.ipynb")
print("wrote notebooks/04_ownership.ipynb")
