"""Probe scenarios: fault scripts aimed at one rule each, so that breaking the rule fails a seed.

Each of these was written because a planted bug (a mutant of ``sim.mutants``) survived the
built-in scenarios aimed at its area and ``cluster-random``: nothing in their fault plans
made the rule matter. The scripts are
ordinary scenarios with ordinary checks (what must hold for any correct runtime), aimed at
the instant where the rule matters:

* ``stale-run-fenced``: a body's background task outlives its run; its late write must be
  refused (the activation lease).
* ``node-pause-catch-up``: a node schedule's node is paused across several ticks; it must
  deliver once and skip the rest (catch-up for node schedules).
* ``delete-and-return``: a deleted key stays deleted across a change of owner although one
  replica missed the delete (a tombstone's stamp orders it).
* ``restart-stale-replica``: a replica restarts empty while another is stale and the third
  is slow; its blank promise must not make a quorum with the stale one (handoff readiness).
* ``restart-under-stale-owner``: a replica restarts empty while a cut-off owner still
  writes under its old epoch; until it is ready it must not ack that epoch (readiness).
* ``replayed-prepare``: a stale owner's Prepare delivered again after the takeover must not
  lower the majority's promise (rule 1 of replication).
* ``write-back-before-reads``: an heir that adopted a write held by two replicas of five
  answers no read before its write-back is on a quorum (replication rule 2).
* ``superseded-holder-told``: a stray Prepare reaches two replicas but not the holder's own;
  the replicas that promised tell the holder (replication rule 9), which ends its run at once
  instead of failing its next write Unavailable.
* ``long-partition``: two nodes of five cut off for longer than ``remove_after`` must not
  remove the majority and go on as a cluster of two (the membership quorum).
* ``durable-owner-unsaved``: a durable key's heir acquires it and writes nothing, then every
  node restarts; the key must come back above the heir's epoch (replication rule 7: the
  write-back is saved under the new epoch before the key is held).

Two later rules of the runtime took the ground from under some of these: the step-down rule
(an owner that lost its quorum or was ``Doubted`` ends its runs, so a stale owner no longer
writes under its old epoch) and the catch-up resend (an idle owner resends its newest write
to replicas that have not acked it, so a replica cut off for a moment is soon current
again). ``replayed-prepare`` and ``restart-stale-replica`` then no longer showed rule 1 and
blank promises, nor ``restart-under-stale-owner`` readiness. Their successors:

* ``behind-replica-at-restart``: the owner crashes while a replica is cut off (no resend
  reaches it), restarts empty and reads while the up-to-date replica is paused: a blank
  promise must not make a quorum with the behind copy, nor may a replica be ready before
  its sync round was answered.
* ``held-back-write-at-restart``: the same, and a write of an old epoch, held back by the
  network, reaches the restarted replica as it opens: not promised since it came back, it
  must not make the replica count as filled.
* ``frozen-owner-resend``: an owner with a lagging replica freezes just before its catch-up
  resend; the heir takes the key and counts on; the lagging replica restarts empty and
  opens as the owner thaws, while the heir is slow. The resend of the old epoch leaves
  before the step-down rule ends the run (the thawed owner's timers fire in deadline
  order): the empty replica must not count as filled by it.
* ``thawed-acquisition``: a new key's owner freezes while it prepares; the heir prepares a
  newer epoch, whose write-back reaches only its own replica; the thawed owner's acquisition
  (spared by the step-down rule) resends its lower Prepare: it must be refused (a promise
  never goes down), or a later read quorum with the heir's replica takes every count back.
* ``crossing-prepares``: a higher Prepare reaches two replicas just before a new key's owner
  prepares a lower epoch; the higher candidate's write-back comes late: the lower Prepare
  must be refused (a promise never goes down).

This package keeps the probes' message types and actors (their names, ``sim.scenarios.probes:tally``
and so on, are in every trace and choose every placement: they must not move); the shared clients
and constants are in ``kit``; the scripts live by theme (``runtime``, ``handoff``, ``quorum``,
``replication``, ``durable``, ``view``), imported below in the order ``python -m sim list`` shows them.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from casty import Askable, Context, actor
from casty.errors import Fenced


@dataclass(frozen=True)
class Add(Askable[int]):
    """Count one; the answer is the count once the write is confirmed."""


@dataclass(frozen=True)
class Read(Askable[int]):
    pass


@dataclass(frozen=True)
class Forget(Askable[None]):
    """Delete the key's state (``ctx.state.delete``)."""


@dataclass(frozen=True)
class Outlive(Askable[None]):
    """Start a write that waits ``after`` s, answer, then fail this run (the write outlives it)."""

    after: float


TallyMessage = Add | Read | Forget | Outlive

_BACKGROUND: set[asyncio.Task[None]] = set()  # keeps the outliving writes referenced until they end


@actor(initial=0)
async def tally(ctx: Context[int, TallyMessage]) -> None:
    """A counter that can forget itself, and that can leave a late write behind a failed run."""
    await _tally(ctx)


@actor(initial=0, replicas=5)
async def tally5(ctx: Context[int, TallyMessage]) -> None:
    """``tally`` with five replicas (write quorum 3): room for a write held by two replicas, unconfirmed."""
    await _tally(ctx)


async def _tally(ctx: Context[int, TallyMessage]) -> None:
    async for msg in ctx.inbox:
        if isinstance(msg, Add):
            msg.reply_to.tell(await ctx.state.update(lambda n: n + 1))
        elif isinstance(msg, Read):
            msg.reply_to.tell(ctx.state.value)
        elif isinstance(msg, Forget):
            await ctx.state.delete()
            msg.reply_to.tell(None)
        else:
            task = asyncio.get_running_loop().create_task(_late_write(ctx, msg.after))
            _BACKGROUND.add(task)
            task.add_done_callback(_BACKGROUND.discard)
            msg.reply_to.tell(None)
            raise RuntimeError("this run ends here; the write it started has not happened yet")


async def _late_write(ctx: Context[int, TallyMessage], after: float) -> None:
    await asyncio.sleep(after)
    try:
        await ctx.state.set(-1)
    except Fenced:
        pass


@actor(initial=0, durable="write", idle_after=60.0)
async def kept_tally(ctx: Context[int, TallyMessage]) -> None:
    """``tally``, durable: every confirmed write is saved to the cluster's store; it stays active a minute."""
    await _tally(ctx)


@actor(initial=0, write_timeout=5.0)
async def patient_tally(ctx: Context[int, TallyMessage]) -> None:
    """``tally`` whose acquisitions and writes wait 5 s for their quorums (the system's are 1 s here)."""
    await _tally(ctx)


# Importing a theme registers its scenarios: this order is the order they had in one module.
from . import runtime as runtime  # noqa: E402
from . import handoff as handoff  # noqa: E402
from . import quorum as quorum  # noqa: E402
from . import replication as replication  # noqa: E402
from . import durable as durable  # noqa: E402
from . import view as view  # noqa: E402
