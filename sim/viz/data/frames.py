"""Frames: what a finished run looked like at one true time ``t``, read from its trace alone.

The explorer (``sim.viz.explorer``) draws frames; this module only computes them, so a frame can be
checked with exact values in a test and the drawing can change without touching what it shows.

A frame at ``t`` holds:

* every node's **status** (``up``, ``paused``, ``down``: from ``node.started``, ``fault.crash``,
  ``fault.pause``/``fault.resume``, ``node.stopped``), its life number (1, then 2 after a restart),
  and the verdicts other nodes hold about it (``member.changed``: ``n1`` thinks ``n3`` is
  ``dead``). A node's own status and what the others believe differ during a partition or a
  pause: that gap is what failure detection is about, so both are kept;
* the **cut links** (``fault.partition`` cuts ``a -> b`` and back unless one-way;
  ``fault.reconnect`` undoes one cut; ``fault.heal`` every cut), as directed pairs;
* one key's **owner** (the node holding the newest owner epoch whose hold is not over: the
  ownership chart's ``epoch_spans``), the nodes still running it under an older epoch
  (**stale**), the newest **epoch** acquired so far, and its **replicas**: the ring walk of
  ``casty.protocol.placement`` over every node of the run (the nodes that hold the key's state
  when all are members; a dead node is still a replica, a quorum of them suffices);
* the **events** of the window ``(t - window, t]`` in words, one sentence per row, repeats
  folded (``n1: confirmed a write of t3 (x4)``), and the network traffic of the window counted,
  not listed (a heartbeat every 200 ms per link would drown every other sentence).

Keys of the runtime's own types (modules under ``casty.``, such as the cron claim keys) are
internal: never chosen by default, listed only on request.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from casty.protocol.placement import Ring

from sim.trace import Row, Trace
from sim.viz.data.keys import is_internal, key_label, short_type  # one rule for every view: the runtime's own types (cron claims)
from sim.viz.data.ownership import EpochSpan, epoch_spans

__all__ = ["Frame", "MemberState", "change_times", "frame_at", "frame_times", "keys_of", "describe", "short_actor", "is_internal"]

_NET_KINDS = ("net.sent", "net.delivered", "net.dropped")
_WORLD_WIDE = ("fault.partition", "fault.reconnect", "fault.heal")


@dataclass(frozen=True, slots=True)
class MemberState:
    """One node at ``t``: its own status, its life (1 = first incarnation) and the others' non-alive verdicts."""

    node: str
    status: str  # "up", "paused" or "down"
    life: int
    verdicts: tuple[tuple[str, str], ...] = ()  # (observer, "suspect"|"dead"|...), only the ones that are not "alive"


@dataclass(frozen=True, slots=True)
class Frame:
    """The run at true time ``t_ns`` (see the module docstring for where each field comes from)."""

    t_ns: int
    members: tuple[MemberState, ...]
    cuts: tuple[tuple[str, str], ...]  # directed links that drop every frame, sorted
    actor: str | None
    key: str | None
    owner: str | None
    epoch: str | None  # the newest epoch acquired so far, "(round, node#life)"
    stale: tuple[str, ...]  # nodes running the key under an epoch a newer one superseded
    replicas: tuple[str, ...]
    events: tuple[str, ...]

    @property
    def t(self) -> float:
        return self.t_ns / 1e9

    def member(self, node: str) -> MemberState:
        for state in self.members:
            if state.node == node:
                return state
        raise KeyError(f"no node {node!r} in this frame; nodes: {', '.join(m.node for m in self.members)}")


short_actor = short_type
"""``sim.scenarios.cluster:cl_ticker`` -> ``cl_ticker`` (``sim.viz.data.keys.short_type``, kept under its old name)."""


def keys_of(trace: Trace, *, internal: bool = False) -> list[tuple[str, str]]:
    """Every (actor, key) with an owner epoch, the most changed first (ties: first acquired first)."""
    counts: Counter[tuple[str, str]] = Counter()
    order: dict[tuple[str, str], int] = {}
    for row in trace.of("epoch.acquired"):
        entity = (str(row.get("actor")), str(row.get("key")))
        if not internal and is_internal(entity[0]):
            continue
        counts[entity] += 1
        order.setdefault(entity, len(order))
    return sorted(counts, key=lambda e: (-counts[e], order[e]))


def _resolve(trace: Trace, actor: str | None, key: str | None) -> tuple[str, str] | None:
    """The key a frame follows. One read of the epochs serves the default, the search and the error: the keys without
    the internal ones are the full list filtered (filtering keeps the order: most changed first, then first acquired)."""
    every = keys_of(trace, internal=True)
    if actor is None and key is None:
        return next((entity for entity in every if not is_internal(entity[0])), None)
    for entity in every:
        if (key is None or entity[1] == key) and (actor is None or actor in (entity[0], short_actor(entity[0]))):
            return entity
    names = ", ".join(key_label(a, k) for a, k in every) or "none"
    raise ValueError(f"no owner epoch for actor={actor!r} key={key!r} in this trace; keys with one: {names}")


def frame_times(trace: Trace, step: float) -> list[int]:
    """The frame times of a scrub, in ns: 0, step, 2 step, ... up to the last row (included)."""
    if not step > 0:
        raise ValueError(f"step must be > 0 seconds, got {step!r}")
    step_ns = round(step * 1e9)
    end = trace.end_ns
    times = list(range(0, end + 1, step_ns))
    if times[-1] < end:
        times.append(times[-1] + step_ns)
    return times


def change_times(trace: Trace, actor: str | None, key: str | None) -> tuple[int, ...]:
    """The instants things changed, for the explorer's filmstrip: every fault and clock change, and the epoch
    acquisitions and run ends of ``actor``/``key`` (none when either is None); in trace order, one per such row
    (an instant may repeat)."""
    return tuple(
        row.t_ns
        for row in trace.rows
        if row.kind.startswith(("fault.", "clock."))
        or ((str(row.get("actor")), str(row.get("key"))) == (actor, key) and row.kind in ("epoch.acquired", "activation.ended"))
    )


def _nodes(trace: Trace) -> list[str]:
    started = list(dict.fromkeys(r.node for r in trace.of("node.started")))
    return started or [n for n in trace.nodes() if n != "network"]


def _members(rows: Sequence[Row], nodes: list[str]) -> tuple[MemberState, ...]:
    status = {n: "down" for n in nodes}
    life = {n: 0 for n in nodes}
    views: dict[str, dict[str, str]] = {n: {} for n in nodes}
    for row in rows:
        kind = row.kind
        if row.node not in status:
            continue
        if kind == "node.started":
            status[row.node] = "up"
            life[row.node] += 1
        elif kind in ("fault.crash", "node.stopped"):
            status[row.node] = "down"
        elif kind == "fault.pause":
            status[row.node] = "paused"
        elif kind == "fault.resume":
            status[row.node] = "up"
        elif kind == "member.changed":
            about = str(row.get("node"))
            if about != row.node and about in views:
                views[about][row.node] = str(row.get("status"))
    out = []
    for n in nodes:
        verdicts = tuple((observer, seen) for observer, seen in sorted(views[n].items()) if seen != "alive" and status[observer] != "down")
        out.append(MemberState(n, status[n], max(life[n], 1), verdicts))
    return tuple(out)


def _cuts(rows: Sequence[Row]) -> tuple[tuple[str, str], ...]:
    cut: set[tuple[str, str]] = set()
    for row in rows:
        if row.kind in ("fault.partition", "fault.reconnect"):
            a = [str(n) for n in row.get("from") or ()]
            b = [str(n) for n in row.get("to") or ()]
            links = {(u, v) for u in a for v in b}
            if not row.get("oneway"):
                links |= {(v, u) for u, v in links}
            if row.kind == "fault.partition":
                cut |= links
            else:
                cut -= links
        elif row.kind == "fault.heal":
            cut.clear()
    return tuple(sorted(cut))


def _ownership(spans: list[EpochSpan], t_ns: int) -> tuple[str | None, str | None, tuple[str, ...]]:
    """(owner, newest epoch acquired by t, stale holders) at ``t_ns``."""
    started = [s for s in spans if s.start_ns <= t_ns]
    if not started:
        return None, None, ()
    newest = started[-1]
    holding = [s for s in started if s.end_ns > t_ns or s.ended_by == "end of trace"]
    owner = next((s.node for s in reversed(holding) if s.superseded_ns is None or s.superseded_ns > t_ns), None)
    stale = tuple(sorted({s.node for s in holding if s.superseded_ns is not None and s.superseded_ns <= t_ns} - {owner}))
    return owner, newest.name, stale


def _entity(row: Row) -> str:
    return key_label(row.get("actor"), row.get("key"))


def describe(row: Row) -> str | None:
    """One row in words (None for the rows a frame only counts: the network's, confirmed writes of other keys...)."""
    kind, node, get = row.kind, row.node, row.get
    if kind == "node.started":
        life = int(get("incarnation", 1) or 1)
        return f"{node} started" if life == 1 else f"{node} started again (life {life})"
    if kind == "node.stopped":
        return f"{node} stopped (orderly)"
    if kind == "fault.crash":
        lost = int(get("unsynced_lost", 0) or 0)
        return f"{node} CRASHED" + (f" ({lost} unsynced disk writes lost)" if lost else "")
    if kind == "fault.restart":
        return f"{node} restarted" + (" with an empty disk" if get("wiped") else "")
    if kind == "fault.pause":
        return f"{node} PAUSED (runs nothing until resumed)"
    if kind == "fault.resume":
        return f"{node} resumed after {int(get('paused_ns', 0) or 0) / 1e9:g} s"
    if kind == "fault.partition":
        arrow = "->" if get("oneway") else "|"
        return f"network cut: {'+'.join(get('from') or ())} {arrow} {'+'.join(get('to') or ())}"
    if kind == "fault.reconnect":
        return f"network reconnected: {'+'.join(get('from') or ())} and {'+'.join(get('to') or ())}"
    if kind == "fault.heal":
        return "network healed: every link whole"
    if kind == "clock.step":
        return f"{node}'s wall clock stepped {int(get('delta_us', 0) or 0) / 1e6:+g} s"
    if kind == "clock.drift":
        return f"{node}'s wall clock drifts {float(get('drift_ppm', 0.0) or 0.0):+g} ppm"
    if kind == "member.changed":
        about = get("node")
        return None if about == node and get("status") == "alive" else f"{node} sees {about} as {get('status')}"
    if kind == "member.learned":
        return f"{node} learned the view: {get('alive')} of {get('members')} members alive"
    if kind == "epoch.acquired":
        found = int(get("found", 0) or 0)
        what = f"found v{found}" if found else "found nothing"
        return f"{node} won owner epoch round {get('epoch_round')} of {_entity(row)} ({what})"
    if kind == "activation.started":
        return f"{node} activated {_entity(row)}" + (" from the replicas" if get("recovered") else "")
    if kind == "activation.ended":
        return f"{node} ended {_entity(row)}: {get('reason')}"
    if kind == "write.failed":
        return f"{node}: a write of {_entity(row)} failed ({get('reason')})"
    if kind == "write.confirmed":
        return f"{node}: a write of {_entity(row)} confirmed"
    if kind == "schedule.fired":
        return f"{node} fired {_entity(row)}'s schedule '{get('name')}'"
    if kind == "schedule.caught_up":
        return f"{node} caught up {_entity(row)}'s schedule '{get('name')}' ({get('skipped')} due times skipped)"
    if kind == "message.dropped":
        return f"{node} dropped a {get('message')} to {_entity(row)}"
    if kind == "handoff.started":
        return f"{node} started a handoff round with {'+'.join(get('peers') or ())}"
    if kind == "handoff.ended":
        return f"{node} ended its handoff round ({get('keys')} keys synced)"
    if kind == "note":
        return f"{node}: {get('text')}"
    if kind.startswith(("fault.", "node_schedule.")):
        return f"{node}: {kind}"
    return None


def _fold(sentences: Iterable[str]) -> list[str]:
    """Repeats folded into one sentence with a count, in first-seen order (a Counter keeps insertion order)."""
    return [s if n == 1 else f"{s} (x{n})" for s, n in Counter(sentences).items()]


def _events(rows: Sequence[Row], entity: tuple[str, str] | None) -> tuple[str, ...]:
    sentences: list[str] = []
    net: Counter[str] = Counter()
    once: set[tuple[int, str, str]] = set()
    for row in rows:
        if row.kind in _NET_KINDS:
            net[row.kind] += 1
            continue
        if row.kind in _WORLD_WIDE:  # one fault, recorded on every node it touches: told once
            ident = (row.t_ns, row.kind, repr(sorted(row.fields.items())))
            if ident in once:
                continue
            once.add(ident)
        if row.kind in ("write.confirmed", "schedule.fired") and (str(row.get("actor")), str(row.get("key"))) != entity:
            continue
        sentence = describe(row)
        if sentence is not None:
            sentences.append(sentence)
    out = _fold(sentences)
    if net:
        out.append(f"network: {net['net.sent']} frames sent, {net['net.delivered']} delivered, {net['net.dropped']} dropped")
    return tuple(out)


def frame_at(
    trace: Trace,
    t: float,
    *,
    actor: str | None = None,
    key: str | None = None,
    window: float = 0.1,
    replicas: int = 3,
) -> Frame:
    """The frame at true time ``t`` seconds; events from the ``window`` seconds up to ``t`` (at 0: the rows at 0).

    ``actor``/``key`` choose the key (default: the non-internal key whose owner changed most; none
    when the trace has no owner epoch). ``replicas`` is the type's replica count (3 by default, as
    casty's). ``ValueError`` for a key without an owner epoch, a negative ``t`` or a window <= 0.
    """
    if t < 0:
        raise ValueError(f"t must be >= 0 seconds, got {t!r}")
    if not window > 0:
        raise ValueError(f"window must be > 0 seconds, got {window!r}")
    t_ns = round(t * 1e9)
    since_ns = t_ns - round(window * 1e9)
    upto: list[Row] = []  # the rows up to t (the state) and those of the window (the events), in one pass
    recent: list[Row] = []
    for r in trace.rows:
        if r.t_ns <= t_ns:
            upto.append(r)
            if r.t_ns > since_ns or (t_ns == 0 and r.t_ns == 0):
                recent.append(r)
    nodes = _nodes(trace)
    entity = _resolve(trace, actor, key)
    owner: str | None = None
    epoch: str | None = None
    stale: tuple[str, ...] = ()
    placed: tuple[str, ...] = ()
    if entity is not None:
        owner, epoch, stale = _ownership(epoch_spans(trace, *entity), t_ns)
        placed = Ring(nodes).replicas(entity[0], entity[1], min(replicas, len(nodes))) if nodes else ()
    return Frame(
        t_ns=t_ns,
        members=_members(upto, nodes),
        cuts=_cuts(upto),
        actor=entity[0] if entity else None,
        key=entity[1] if entity else None,
        owner=owner,
        epoch=epoch,
        stale=stale,
        replicas=tuple(placed),
        events=_events(recent, entity),
    )
