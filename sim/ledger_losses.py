"""Which firings' messages died in their mailbox: the occurrence ledger's "lost in flight".

A firing (``schedule.fired``, ``node_schedule.fired``) says its message was queued; whether the
body handled it is told only by its absence from the drops. ``Losses`` reads every
``message.dropped`` row of a key's life on the firing's node and, when a drop is a firing's,
says which firing and why: lost in flight (the activation ended, the node crashed, stopped
or restarted), its handler failed (``activation.failed``), or lost before the mailbox (it was
full). ``sim.ledger`` turns each into a ``missed`` occurrence.

Today's runtime names the firing: the drop of a schedule's message carries ``schedule`` (a
persisted schedule's name, a node schedule's reference) and ``due_us`` (its due, a node
schedule's tick), and goes to that firing exactly: the newest of that occurrence queued
before it, else one right after it at its instant (its mailbox was full). In a trace with
such rows an unnamed drop is another message's, never a firing's. A node schedule's tick told
to a key another node owns crosses the wire with its occurrence (``casty._core.occurrence``),
so its drop on the owner (its handler failed there, the owner crashed or lost the key with it
queued, no owner took it) names it too, in another node's rows than its firing: a named drop
no firing of its own node's life explains goes to the newest firing of that reference and
tick on another node (same actor and key) before it. A tick lost on the way (the frame died
with the link or the owner before it arrived) leaves no row at all: it counts as delivered.

A trace whose drops do not name their firing (recorded before the rows had the fields) is
read by inference: a drop counts when, at its instant, the key's activation on the firing
node ends (activation ended, the node crashed, stopped or restarted) or its body fails
(``activation.failed``). A mailbox is FIFO and survives a body's restart, not a new
activation, so the drops at an end go to the newest firings the mailbox may still hold (the
older ones were handled), and the drop of a failure to the message in the body: the oldest
of those the mailbox held when the body last restarted, else the newest (a free body handles
a firing as it comes; the ones before it were handled). A drop right before a firing at its
instant (mailbox full) is that firing's. Without ``messages`` (schedule name -> message type
name) any dropped message of the key can be taken for a firing's; with it, only that type.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from itertools import takewhile
from typing import Any

from .trace import Row, Trace

__all__ = ["NODE_ENDS", "Losses", "at", "internal"]

NODE_ENDS = ("fault.crash", "node.stopped", "fault.restart")
"""The rows that end every activation of their node."""
_ENDS_OF_LIFE = ("activation.ended", "activation.failed")
_FIRED = ("schedule.fired", "node_schedule.fired")


def internal(actor: Any) -> bool:
    """The runtime's own types (cron claim records and their expiry schedules): not the user's."""
    return str(actor).startswith("casty.")


def at(row: Row) -> str:
    """Where and when a row happened, as the ledger's texts say it."""
    return f"{row.node} at t={row.t:.3f}s"


class Losses:
    """Which firings' messages died in their mailbox: ``lost`` (fired row seq -> why) and ``dropped`` (-> its drop row)."""

    def __init__(self, trace: Trace, messages: Mapping[str, str] | None = None) -> None:
        self.lost: dict[int, str] = {}  # fired row seq -> why
        self.dropped: dict[int, Row] = {}  # fired row seq -> the message.dropped row
        lives: dict[tuple[str, str, str], list[Row]] = defaultdict(list)  # (actor, key, node) -> starts, firings, drops, ends
        node_ends: dict[str, list[Row]] = defaultdict(list)
        self.named = False  # whether the trace's drops name their occurrence (then an unnamed one is no firing's)
        for row in trace.rows:
            if row.kind == "message.dropped" and row.get("due_us") is not None:
                self.named = True
            if row.kind in NODE_ENDS:
                node_ends[row.node].append(row)
            elif row.kind in _FIRED or row.kind in _ENDS_OF_LIFE or row.kind in ("activation.started", "message.dropped"):
                actor, key = row.get("actor"), row.get("key")
                if actor is not None and not internal(actor):
                    lives[(str(actor), str(key), row.node)].append(row)
        self._strays: list[tuple[Row, bool, list[Row]]] = []  # named drops no firing of their node's life explains
        for (_, _, node), rows in lives.items():
            self._attribute(rows, node_ends.get(node, []), messages)
        if self._strays:
            self._remote(lives)

    def _remote(self, lives: Mapping[tuple[str, str, str], list[Row]]) -> None:
        """Each stray named drop goes to the newest earlier ``node_schedule.fired`` of its reference and tick, to the
        same key, on another node (the tick crossed the wire with its occurrence), not yet taken by another drop."""
        for drop, failed, ends in sorted(self._strays, key=lambda stray: stray[0].seq):
            actor, key, node = str(drop.get("actor")), str(drop.get("key")), drop.node
            wanted = (drop.get("schedule"), drop.get("due_us"))
            firings = [
                r
                for (a, k, n), rows in lives.items()
                if (a, k) == (actor, key) and n != node
                for r in rows
                if r.kind == "node_schedule.fired" and r.seq < drop.seq and r.seq not in self.lost
                and (r.get("reference"), r.get("tick_us")) == wanted
            ]
            if not firings:
                continue
            fired = max(firings, key=lambda r: r.seq)
            self.dropped[fired.seq] = drop
            where = f"fired on {at(fired)}, dropped on {at(drop)}"
            if failed:
                self.lost[fired.seq] = f"its handler failed: {where}: {drop.get('reason')}"
            else:
                end = next((e for e in ends if e.t_ns == drop.t_ns), None)
                how = f" ({end.kind} of {at(end)})" if end is not None else ""
                self.lost[fired.seq] = f"lost in flight: {where}{how}: {drop.get('reason')}"

    def _attribute(self, rows: list[Row], node_ends: list[Row], messages: Mapping[str, str] | None) -> None:
        failed_at = {r.t_ns for r in rows if r.kind == "activation.failed"}
        ends_at = {r.t_ns for r in rows if r.kind == "activation.ended"} | {r.t_ns for r in node_ends}
        pending: list[Row] = []  # the firings the key's mailbox may still hold, oldest first
        queued: list[Row] = []  # those it held when its body restarted after a failure
        for index, row in enumerate(rows):
            if row.kind == "activation.started":
                if not row.get("restart"):
                    pending, queued = [], []  # a new activation, a new mailbox
                else:
                    queued = list(pending)  # a restarted body takes these first, oldest first
            elif self._fired(row):
                pending.append(row)
            elif row.kind != "message.dropped" or (self.named and row.get("due_us") is None):
                continue  # not a drop, or another message's (the trace names the drops of firings)
            else:
                failed = row.t_ns in failed_at and row.t_ns not in ends_at
                if row.get("due_us") is not None:
                    candidate = self._named(rows, index, pending)
                else:
                    candidate = self._inferred(rows, index, pending, queued, messages, row.t_ns in ends_at, failed)
                if candidate is None:
                    if row.get("due_us") is not None:
                        self._strays.append((row, failed, node_ends))  # perhaps a tick another node told (see _remote)
                    continue
                self.dropped[candidate.seq] = row
                if candidate.seq > row.seq:  # the firing's row follows its drop: its mailbox was full
                    self.lost[candidate.seq] = f"lost before the mailbox: {row.get('reason')}"
                elif failed:
                    self.lost[candidate.seq] = f"its handler failed: fired on {at(candidate)}, dropped at t={row.t:.3f}s: {row.get('reason')}"
                    pending = pending[pending.index(candidate) + 1 :]  # FIFO: the older ones were handled before it
                    queued = [c for c in queued if c in pending]
                else:
                    end = next((e for e in node_ends if e.t_ns == row.t_ns), None)
                    how = f" ({end.kind} of {at(end)})" if end is not None else ""
                    self.lost[candidate.seq] = f"lost in flight: fired on {at(candidate)}, dropped{how}: {row.get('reason')}"

    def _named(self, rows: list[Row], index: int, pending: list[Row]) -> Row | None:
        """The firing the drop ``rows[index]`` names: the newest of that occurrence still queued, else one right after it."""
        drop = rows[index]
        wanted = (drop.get("schedule"), drop.get("due_us"))

        def names(fired: Row) -> bool:
            schedule = (fired.get("name"), fired.get("due_us")) if fired.kind == "schedule.fired" else (fired.get("reference"), fired.get("tick_us"))
            return fired.seq not in self.lost and schedule == wanted

        earlier = [c for c in pending if names(c)]
        if earlier:
            return earlier[-1]
        later = takewhile(lambda r: r.t_ns == drop.t_ns, rows[index + 1 :])  # a full mailbox: the firing's row follows its drop
        return next((r for r in later if self._fired(r) and names(r)), None)

    def _inferred(
        self, rows: list[Row], index: int, pending: list[Row], queued: list[Row], messages: Mapping[str, str] | None, at_end: bool, failed: bool
    ) -> Row | None:
        """The firing an unnamed drop is taken for (the module docstring's inference), or None."""
        drop = rows[index]
        following = rows[index + 1] if index + 1 < len(rows) else None
        if following is not None and following.t_ns == drop.t_ns and self._fired(following):
            if self._matches(following, drop, messages) and "mailbox full" in str(drop.get("reason")):
                return following
        live = [c for c in pending if c.seq not in self.lost and self._matches(c, drop, messages)]
        if not live or not (at_end or failed):
            return None
        # at an end everything still held dies: the newest; a failed body's message is the oldest of
        # those held at its last restart, else the newest (a body that was free handles a firing as it comes)
        waiting = [c for c in queued if c in live] if failed else []
        return waiting[0] if waiting else live[-1]

    @staticmethod
    def _fired(row: Row) -> bool:
        return row.kind in _FIRED

    @staticmethod
    def _matches(fired: Row, dropped: Row, messages: Mapping[str, str] | None) -> bool:
        if messages is None:
            return True
        name = str(fired.get("name") if fired.kind == "schedule.fired" else fired.get("reference"))
        wanted = messages.get(name)
        return wanted is None or wanted == dropped.get("message")
