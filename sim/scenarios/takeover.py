"""``skewed-takeover``: a key's owner crashes and the node that takes its schedule over has a wrong clock.

A persisted schedule's dues are wall-clock times, written to the key's replicas with every
firing. Each owner fires a due when *its own* wall clock reaches it (never early on that
clock), so when the key moves to a node whose clock is off, the occurrences move in true
time with it:

- ``skewed-takeover``: the next owner's clock is ``SKEW`` ahead. Its first firing is late
  (the old owner's death had to be detected) and catches up: the dues its clock has already
  passed are skipped. Every later firing comes ``SKEW`` early in true time.
- ``skewed-takeover-behind``: the next owner's clock is ``SKEW`` behind. Nothing is skipped
  at the takeover, but every occurrence comes ``SKEW`` late in true time.

In both, the crashed owner comes back, the ring's owner again. The heir ends its activation
as soon as it sees it (``activation.ended``, reason ``handoff``), and the owner resumes the
key after its rejoin grace and handoff round; nothing runs the key in between. With the
heir's clock behind, the returning owner finds the dues it wrote in its past and skips them;
with the heir's clock ahead, the returning owner waits for the next due the fast clock
wrote (a gap in true time, nothing skipped). A due fired twice (the old and the new owner
overlapping) is allowed and must be explained, but is not required: since the handoff ends
the heir's activation at once, these runs have none (``ownership-repeat`` and
``cluster-random`` have them).

The checks say what must hold: every firing is on time, or off by exactly its node's clock
offset, or late because its node had just taken the key (or catches up); every repeated or
missed occurrence is explained (``repeats_and_misses_explained``); and each variant shows
the kinds it promises (ahead: late, skipped, early; behind: late, skipped by the returning owner).
"""

from __future__ import annotations

from collections.abc import Generator
from datetime import timedelta
from typing import Any

import simpy

from casty.protocol.placement import Ring

from ..checks import Occurrence, explain_occurrences, never_early, repeats_and_misses_explained
from ..trace import Row
from ..world import World
from . import scenario
from .cluster import CLUSTER, CLUSTER_CHECKS, CONVERGED, NODES, Arm, Get, _ask, _expect, cl_ticker

SKEW = 3.25  # seconds; not a whole number of periods, so early and late firings are off the true-time grid
EVERY = 1.0
OWNER, HEIR = "n3", "n1"  # the key's first two replicas: n3 owns it, n1 takes it over
CRASH_AT, RESTART_AT, HANDBACK_AT = 8.0, 13.0, 16.0
UNTIL = 25.0
TOLERANCE_NS = 10_000_000  # 10 ms: how far off a firing may be and still count as on (its node's) time


def _key() -> str:
    """The first ``skew<i>`` key whose replicas, on the full ring, are (n3, n1, ...): n1 is the heir."""
    ring = Ring(NODES, vnodes=CLUSTER.vnodes)
    return next(k for k in (f"skew{i}" for i in range(1000)) if ring.replicas(cl_ticker.name, k, 2) == (OWNER, HEIR))


def _setup(world: World, skew: float) -> None:
    key = world.results["key"] = _key()
    world.results["skew"] = skew
    for name in NODES:
        offset = timedelta(seconds=skew) if name == HEIR else timedelta(0)
        world.add_node(name, cluster=CLUSTER, ask_timeout=2.0, write_timeout=1.0, offset=offset)

    def script(world: World) -> Generator[simpy.Event, Any, None]:
        yield world.timeout(CONVERGED)
        _ask(world, "n2", cl_ticker, key, Arm(EVERY), "armed")
        yield world.timeout(CRASH_AT - world.now)
        world.crash(OWNER)
        yield world.timeout(RESTART_AT - world.now)
        world.restart(OWNER)
        yield world.timeout(HANDBACK_AT - world.now)
        _ask(world, "n2", cl_ticker, key, Get(), "handback")  # routed to n3, the ring's owner again (resumed by then)

    world.process(script(world))


# ============================================================================ checks =====


def timing(world: World, row: Row) -> str:
    """How a ``schedule.fired`` row fired against true time: ``"on time"``, ``"early"`` or ``"late"``.

    A due is a wall-clock time; a perfect clock reaches it at true time ``due - epoch``.
    """
    deviation = row.t_ns - (int(row.get("due_us")) - world.epoch_us) * 1000
    if abs(deviation) <= TOLERANCE_NS:
        return "on time"
    return "early" if deviation < 0 else "late"


def _timing_explained(world: World, row: Row, fired: list[Row]) -> str | None:
    """Why a firing is early or late, from the trace; None when nothing explains it.

    - its node's clock is off by as much: the node fired when its own wall clock reached the due
      (``now_us == due_us``) and the deviation is minus the node's offset (wall minus true time);
    - or it fired late on its own clock too (``now_us > due_us``) as the first firing of its
      node's activation: the node had just taken the key (``epoch.acquired``), and the firing
      delivered an overdue occurrence (a catch-up, when dues were skipped).
    """
    deviation_us = row.t_ns // 1000 - (int(row.get("due_us")) - world.epoch_us)
    offset_us = (row.wall_us or 0) - (world.epoch_us + row.t_ns // 1000)
    if int(row.get("now_us")) == int(row.get("due_us")) and abs(deviation_us + offset_us) * 1000 <= TOLERANCE_NS:
        return f"{row.node}'s clock is {offset_us / 1e6:+.3f}s off"
    acquired = world.trace.of("epoch.acquired", node=row.node, key=row.get("key"))
    since = [a for a in acquired if a.seq < row.seq]
    if int(row.get("now_us")) > int(row.get("due_us")) and since:
        first_after = next((f for f in fired if f.node == row.node and f.seq > since[-1].seq), None)
        if first_after is row:
            return f"first firing after {row.node} took the key at t={since[-1].t:.3f}s"
    return None


def _skewed_takeover(world: World) -> None:
    """The crashed owner's schedule resumes on the skewed heir, each firing's timing explained, with the kinds of the variant."""
    check = "skewed_takeover"
    key, skew = str(world.results["key"]), float(world.results["skew"])
    fired = [r for r in world.trace.of("schedule.fired") if r.get("key") == key]
    crash = world.trace.of("fault.crash", node=OWNER)
    _expect(check, len(crash) == 1, f"{OWNER} did not crash once: {len(crash)}")
    before = [r for r in fired if r.t_ns < crash[0].t_ns]
    _expect(check, bool(before) and all(r.node == OWNER and timing(world, r) == "on time" for r in before),
            f"before the crash, {OWNER} did not fire every occurrence on time: {[(r.node, timing(world, r)) for r in before]}")
    heir = [r for r in fired if r.node == HEIR and r.t_ns > crash[0].t_ns]
    _expect(check, bool(heir), f"{HEIR} never fired the schedule after {OWNER} crashed")
    kinds: dict[str, int] = {}
    for row in fired:
        how = timing(world, row)
        kinds[how] = kinds.get(how, 0) + 1
        if how != "on time":
            _expect(check, _timing_explained(world, row, fired) is not None,
                    f"due {row.get('due_us')} fired {how} on {row.node} at t={row.t:.3f}s (wall {row.get('now_us')}): "
                    f"neither its clock offset nor a takeover explains it")
    occurrences = explain_occurrences(world.trace)
    repeats = [o for o in occurrences if o.kind == "repeat" and o.key == key]
    misses = [o for o in occurrences if o.kind == "miss" and o.key == key]
    world.results["timing"] = kinds
    world.results["repeats"] = [_brief(o) for o in repeats]
    world.results["misses"] = [_brief(o) for o in misses]
    _expect(check, bool(misses), "no occurrence was skipped")
    if skew > 0:
        steady = heir[1:]
        _expect(check, bool(steady) and all(timing(world, r) == "early" for r in steady),
                f"the heir, {skew:+g}s ahead, did not fire its later occurrences early: {[timing(world, r) for r in steady]}")
        _expect(check, timing(world, heir[0]) == "late" and any(m.at is heir[0] for m in misses),
                "the heir's first firing was not a late catch-up that skipped the dues its clock had passed")
    else:
        _expect(check, all(timing(world, r) == "late" for r in heir),
                f"the heir, {skew:+g}s behind, did not fire every occurrence late: {[timing(world, r) for r in heir]}")
        _expect(check, not any(m.at in heir for m in misses), "the heir, behind, skipped dues at the takeover")
        _expect(check, any(m.at.node == OWNER for m in misses), f"{OWNER}, back, did not skip the dues the heir's slow clock left in its past")


def _brief(occurrence: Occurrence) -> dict[str, Any]:
    return {"due_us": occurrence.due_us, "t": round(occurrence.at.t, 3), "node": occurrence.at.node, "because": list(occurrence.because)}


CHECKS = (_skewed_takeover, never_early, repeats_and_misses_explained, *CLUSTER_CHECKS)


@scenario(
    "skewed-takeover",
    f"3 nodes: a scheduled key's owner crashes; the heir's clock is {SKEW}s ahead: a late catch-up skips dues, then every occurrence comes early until the owner is back",
    until=timedelta(seconds=UNTIL),
    checks=CHECKS,
)
def skewed_takeover(world: World) -> None:
    _setup(world, SKEW)


@scenario(
    "skewed-takeover-behind",
    f"skewed-takeover with the heir's clock {SKEW}s behind: every occurrence comes late; at the hand-back the returning owner skips dues",
    until=timedelta(seconds=UNTIL),
    checks=CHECKS,
)
def skewed_takeover_behind(world: World) -> None:
    _setup(world, -SKEW)
