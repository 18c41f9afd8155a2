"""Checker power, measured by mutation: break one rule of the runtime, see which sweep notices.

A sweep that passes says little unless it fails on a broken runtime. Each ``Mutant`` here is
a small declarative patch that breaks one rule the runtime relies on: ``(file, exact source
snippet, its replacement)`` edits plus the rule it breaks and the scenarios most likely to
notice. ``python -m sim mutants`` applies one mutant at a time to a *copy* of the runtime
(``casty/`` and ``sim/`` copied to a temporary directory; the working tree is never touched),
runs the built-in scenarios on that copy in subprocesses (``PYTHONPATH`` = the copy), and
stops a scenario at its first failing seed. It prints one row per mutant: the rule, the
scenario and the first seed that caught it, and the first failure's text.

    python -m sim mutants                       # every mutant, 200 seeds per scenario, 1 worker
    python -m sim mutants --list                # the catalogue, and whether each snippet is still there
    python -m sim mutants --only r3-write-below-promise,claim-last-writer-wins --seeds 50 --workers 2
    python -m sim mutants --scenarios cluster-random,swarm --budget 300   # at most 300 s per mutant
    python -m sim mutants --rev HEAD            # copy the runtime from a commit instead of the working tree

Verdicts:

* ``CAUGHT``: a seed of a scenario failed (a check failed or the run raised) on the mutant,
  and the same scenario and seed pass on an unpatched copy made the same way (a seed that
  fails without the mutant proves nothing about it: the search goes on past it).
* ``NOT CAUGHT within N seeds``: no scenario tried failed (or the time budget ran out first).
* ``STALE``: a snippet is not in its file exactly once (the code moved): the mutant tests
  nothing until its snippet is updated. Never reported as caught or as passed.
  ``tests/test_mutants.py`` fails on a stale mutant, so a refactor cannot disable one quietly.
* ``INVALID``: the patched copy does not import (a syntax error, a missing name), or the
  first failure is a ``NameError``-like error: the patch is broken, not the rule.

The runtime is copied once when the run starts (from the working tree, or from commit
``--rev``): that snapshot is the unpatched baseline, and each mutant patches a fresh copy of
it, so edits made to the tree during a run do not mix into it. ``sim/scenarios/probes/``
holds scenarios written for the mutants that no other scenario caught.

This module is the table of mutants and the command; how a mutant is tried (patching a copy,
the worker subprocesses, the hunt) is ``sim.mutant_harness``, whose names it re-exports.

Scenarios are tried in order: the mutant's own targeted (cheap) ones first, then the
general ones (``cluster-random``, then ``swarm`` where it exists); ``--scenarios`` replaces
that list. Names the copy does not register are skipped. Seeds run in ``--workers``
subprocesses (at most 2): worker ``i`` takes seeds ``i, i + workers, ...``, and a scenario is
over once a failing seed is known and every smaller seed has passed, so the seed reported is
the first failing one whatever the number of workers.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from collections.abc import Sequence

from .mutant_harness import (  # the harness; names kept here for the callers of sim.mutants
    GENERAL_SCENARIOS,
    INVALID_ERRORS as INVALID_ERRORS,
    MAX_WORKERS as MAX_WORKERS,
    PACKAGES as PACKAGES,
    ROOT as ROOT,
    Baseline as Baseline,
    Edit,
    Mutant,
    Outcome,
    Stale,
    _first_failure as _first_failure,
    apply_mutant,
    copy_runtime,
    format_table,
    hunt,
    import_error,
    scratch_dir,
    stale_edits,
)

__all__ = [
    "Edit",
    "Mutant",
    "MUTANTS",
    "GENERAL_SCENARIOS",
    "Stale",
    "Outcome",
    "stale_edits",
    "apply_mutant",
    "copy_runtime",
    "import_error",
    "hunt",
    "format_table",
    "main",
]

def _one(file: str, snippet: str, replacement: str) -> tuple[Edit, ...]:
    return (Edit(file, snippet, replacement),)


REPLICA_STORE = "casty/protocol/replica_store.py"  # replication rules 1, 3, 6 and readiness: the replica side
KEY_OWNER = "casty/protocol/key_owner.py"  # replication rules 2, 4, 5, 7: the owner side
ACTIVATION = "casty/_core/activation.py"
ACTIVATION_SCHEDULES = "casty/_core/activation_schedules.py"
CATCHUP = "casty/_core/catchup.py"  # the catch-up policies' rules (decide, decide_on_grid)
MEMBERSHIP = "casty/protocol/gossip.py"  # the membership state machine (its rules: casty/protocol/membership.py)

MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "r1-promise-below",
        "replication 1: a replica promises only an epoch >= its promise (here: any epoch, and the promise may go down)",
        _one(
            REPLICA_STORE,
            "        if frame.epoch < record.promised:\n"
            "            return Nack(frame.entity, frame.epoch, None, record.promised)\n"
            "        record.promised = frame.epoch\n",
            "        record.promised = frame.epoch\n",
        ),
        ("thawed-acquisition", "crossing-prepares", "replayed-prepare", "stale-owner-fenced", "ownership-repeat"),
    ),
    Mutant(
        "r2-adopt-first-promise",
        "replication 2: acquire adopts the newest stamp of the read quorum (here: the first replica's, in ring order)",
        _one(
            KEY_OWNER,
            "if promise is not None and (best is None or promise.stamp > best.stamp):",
            "if promise is not None and best is None:",
        ),
        ("behind-replica-at-restart", "restart-stale-replica", "stale-owner-fenced", "ownership-repeat"),
    ),
    Mutant(
        "r2-acquired-before-write-back",
        "replication 2: Acquired only once the write-back reached the write quorum (here: on the first ack)",
        _one(
            KEY_OWNER,
            "                return []  # the write-back's quorum was counted: the store's save is awaited\n"
            "            if self._holders(self.version) is None:\n"
            "                return []\n",
            "                return []  # the write-back's quorum was counted: the store's save is awaited\n",
        ),
        ("write-back-before-reads", "stale-owner-fenced", "ownership-repeat"),
    ),
    Mutant(
        "r3-write-below-promise",
        "replication 3: a write is accepted only with epoch >= the promise (here: any epoch)",
        _one(
            REPLICA_STORE,
            "        if epoch < record.promised:\n"
            "            return Nack(entity, epoch, frame.version, record.promised)\n"
            "        if not filling:\n",
            "        if not filling:\n",
        ),
        ("newer-promise-fences", "stale-owner-fenced", "ownership-repeat", "rolling-restart-3"),
    ),
    Mutant(
        "r4-confirm-on-one-ack",
        "replication 4: Confirmed once a write quorum acked (here: once any one replica did, the owner's own)",
        (
            Edit(
                KEY_OWNER,
                "        if held < self._write_quorum:\n            return out\n",
                "        if held < 1:\n            return out\n",
            ),
            Edit(
                KEY_OWNER,
                "return tuple(holders) if len(holders) >= self._write_quorum else None",
                "return tuple(holders) if len(holders) >= 1 else None",
            ),
        ),
        ("stale-owner-fenced", "ownership-repeat", "rolling-restart-3"),
    ),
    Mutant(
        "r5-nack-does-not-fence",
        "replication 5: a Nack naming a newer epoch ends the owner (here: it is ignored, the owner goes on)",
        _one(
            KEY_OWNER,
            "            if frame.promised > self.epoch:\n                return self._lose(frame.promised)\n",
            "            if frame.promised > self.epoch:\n                pass\n",
        ),
        ("newer-promise-fences", "stale-owner-fenced", "ownership-repeat", "rolling-restart-3"),
    ),
    Mutant(
        "r6-tombstone-unordered",
        "replication 6: a tombstone keeps its stamp, so older pages never come back (here: it resets the stamp to zero)",
        _one(
            REPLICA_STORE,
            "        version = frame.version\n        held = record.epoch\n",
            "        version = frame.version\n"
            "        if not frame.pages:  # mutant: a tombstone forgets its stamp\n"
            "            record.epoch, record.version, record.pages = ZERO_EPOCH, 0, {}\n"
            "            return Ack(entity, epoch, version)\n"
            "        held = record.epoch\n",
        ),
        ("delete-and-return", "cron-single-fire"),
    ),
    Mutant(
        "r7-held-before-saved",
        "replication 7: a durable key is held only once its write-back is saved under the new epoch (here: at the write-back quorum)",
        _one(
            KEY_OWNER,
            "            if not self._persist:\n                return self._hold()\n",
            "            if True:  # mutant: the store never hears of the epoch before the key is held\n"
            "                return self._hold()\n",
        ),
        ("durable-owner-unsaved", "all-replicas-lost", "swarm"),
    ),
    Mutant(
        "r9-supersede-silent",
        "replication 9: a replica whose promise rises over another node's epoch tells that node (here: nobody is told,"
        " so a holder whose own replica missed the newer Prepare learns only when its next write is fenced)",
        _one(
            "casty/protocol/replication.py",
            "    if not promised > previous:\n        return None\n",
            "    if True:  # mutant: nobody is ever told\n        return None\n",
        ),
        ("superseded-holder-told",),
    ),
    Mutant(
        "quorum-any-alive",
        "membership quorum: a node owns keys only while it sees more than half of the members alive (here: always)",
        _one("casty/protocol/placement.py", "    return 2 * alive > members\n", "    return alive > 0\n"),
        ("long-partition", "stale-owner-fenced", "rolling-restart-3"),
    ),
    Mutant(
        "blank-promise-counts",
        "handoff readiness: a blank promise (replica not ready) does not count toward the read quorum (here: it does)",
        _one(
            KEY_OWNER,
            "        if frame.blank:\n            # Not ready:",
            "        if False:\n            # Not ready:",
        ),
        ("behind-replica-at-restart", "restart-stale-replica", "rolling-restart-3", "rolling-restart", "ownership-repeat"),
    ),
    Mutant(
        "ready-at-once",
        "handoff readiness: a replica is ready once the other replicas answered its sync round (here: at once)",
        _one(
            "casty/cluster/replicas.py",
            "        if all(answered(peer) for peer in others):\n",
            "        if True:\n",
        ),
        ("behind-replica-at-restart", "restart-stale-replica", "rolling-restart-3", "rolling-restart", "ownership-repeat"),
    ),
    Mutant(
        "unready-accepts-any-write",
        "handoff readiness: a replica not ready accepts only writes of an epoch it promised since it came back (here: any)",
        _one(
            REPLICA_STORE,
            "        if filling and self._blank_promises.get(entity) != epoch:\n            return None\n",
            "",
        ),
        ("frozen-owner-resend", "held-back-write-at-restart", "restart-under-stale-owner", "restart-stale-replica", "rolling-restart-3"),
    ),
    Mutant(
        "no-rejoin-grace",
        "rejoin grace: a node that had a previous life stays out of the protocol for the grace (here: it joins at once)",
        _one(
            "casty/cluster/runtime.py",
            "if (heard and core.previous_life is None) or self.system.loop.time() >= self._started_at + self._grace:",
            "if heard or self.system.loop.time() >= self._started_at + self._grace:",
        ),
        ("rolling-restart-3", "rolling-restart", "ownership-repeat"),
    ),
    Mutant(
        "lease-not-checked",
        "activation lease: a write from a replaced run (an older lease) is refused as Fenced (here: only a closed activation's)",
        _one(
            ACTIVATION,
            "        if self.closed or (lease is not None and lease != self.lease):\n"
            "            shown = self.lease if lease is None else lease\n",
            "        if self.closed:\n            shown = self.lease if lease is None else lease\n",
        ),
        ("stale-run-fenced", "stale-owner-fenced", "ownership-repeat"),
    ),
    Mutant(
        "catch-up-burst",
        "catch-up (actor schedules): a late firing delivers once and skips to the next grid time (here: no skip, a burst)",
        _one(
            ACTIVATION_SCHEDULES,
            "            next_us, skipped = catch_up(due, every, now)  # the first grid time after now: no burst\n",
            "            next_us, skipped = due + every, 0\n",
        ),
        ("pause-catch-up", "clock-step", "durable-restart"),
    ),
    Mutant(
        "catch-up-burst-node",
        "catch-up (schedules.catch_up, node schedules): skip the grid times missed (here: none skipped, a burst)",
        _one(
            "casty/_core/schedules.py",
            "    skipped = max(0, now_us - due_us) // every_us\n",
            "    skipped = 0\n",
        ),
        ("node-pause-catch-up", "timers-vs-schedules", "interval-per-node"),
    ),
    Mutant(
        "claim-last-writer-wins",
        "cron claim: the first claim of a tick wins, later ones get the recorded winner (here: every claimant wins)",
        _one(
            "casty/protocol/tick_claim.py",
            "    if winner is not None:\n        return None, winner\n",
            "",
        ),
        ("cron-single-fire",),
    ),
    Mutant(
        "clock-activates",
        "the clock alone does not activate: a released key's schedule waits for a message (here: its timer re-activates it)",
        (
            Edit(
                ACTIVATION,
                "        for armed in self._schedules.values():\n"
                "            if armed.timer is not None:\n"
                "                self.system.timers.cancel(armed.timer)\n"
                "                armed.timer = None\n",
                "",
            ),
            Edit(
                ACTIVATION_SCHEDULES,
                "        armed.timer = None\n        if not armed.live or self.closed:\n            return\n",
                "        armed.timer = None\n"
                "        if not armed.live:\n"
                "            return\n"
                "        if self.closed:  # mutant: the due time activates the key again\n"
                "            from .mailbox import Envelope\n"
                "            self.system.activate(self.type, self.key, self.type.initial).deliver(Envelope(armed.message))\n"
                "            return\n",
            ),
        ),
        ("clock-does-not-activate",),
    ),
    Mutant(
        "learn-without-knowing",
        "learning the view (2): a restarted node with other seeds learns only after hearing a member that learned the view,"
        " or every other seed (here: whoever it heard will do)",
        _one(
            MEMBERSHIP,
            "        if self.seeds and not knowing and not all(seed in alive for seed in self.seeds):\n"
            "            return None  # (2)",
            "        if False:\n"
            "            return None  # (2)",
        ),
        ("seed-restart-unheard-seed", "cluster-double-restart"),
    ),
    Mutant(
        "unknowing-voters",
        "learning the view (5): only members that learned the view vote for the members taken onto the ring"
        " (here: every member heard votes, its silence counted as a removal)",
        _one(MEMBERSHIP, "        voters = knowing or informants  # (5)", "        voters = informants  # (5)"),
        ("restart-beside-paused", "cluster-double-restart"),
    ),
    Mutant(
        "disk-view-ignored",
        "the remembered view: a node with a disk counts its remembered members (dead, not removed) until heard"
        " (here: the disk's list is read and dropped)",
        _one(
            MEMBERSHIP,
            '                self._records[node] = _Record(incarnation, "dead", 0, now, now, 0)\n'
            "                self._rumours.pop(node, None)\n"
            '                events.append(MemberChanged(node, incarnation, "dead"))\n',
            "                pass  # mutant: the remembered member is forgotten\n",
        ),
        ("seeds-restart-with-disks", "cluster-double-restart"),
    ),
    Mutant(
        "fire-all-no-limit",
        "catch-up FireAll(limit=n): at most n occurrences in one burst (here: every missed one)",
        _one(CATCHUP, "        count = min(missed + 1, policy.limit)\n", "        count = missed + 1\n"),
        ("catch-up-policies",),
    ),
    Mutant(
        "fire-all-oldest",
        "catch-up FireAll(limit=n): past the limit the n most recent are delivered (here: the n oldest)",
        _one(
            CATCHUP,
            "        return Decision(due_us + every_us * (missed + 1 - count), count, every_us, after_now, missed + 1 - count)\n",
            "        return Decision(due_us, count, every_us, after_now, missed + 1 - count)\n",
        ),
        ("catch-up-policies",),
    ),
    Mutant(
        "fire-all-reversed",
        "catch-up FireAll: a burst is delivered in due order (here: newest first)",
        _one(
            ACTIVATION_SCHEDULES,
            "        for occurrence_us in dues:\n            envelope = ScheduledEnvelope(",
            "        for occurrence_us in reversed(dues):\n            envelope = ScheduledEnvelope(",
        ),
        ("catch-up-policies",),
    ),
    Mutant(
        "cron-fire-all-oldest",
        "catch-up FireAll on a cron grid (node misfire=): the n most recent missed ticks (here: the n oldest)",
        _one(CATCHUP, "        kept = occurrences[-policy.limit :]\n", "        kept = occurrences[: policy.limit]\n"),
        ("catch-up-policies",),
    ),
    Mutant(
        "drop-late-grace-ignored",
        "catch-up DropLate(grace): a firing later than the grace delivers nothing (here: it is delivered anyway)",
        _one(
            CATCHUP,
            "        latest = due_us + every_us * missed\n        if now_us - latest <= policy.grace_us:\n",
            "        latest = due_us + every_us * missed\n        if True:\n",
        ),
        ("catch-up-policies",),
    ),
    Mutant(
        "drop-late-grace-from-oldest",
        "catch-up DropLate(grace): lateness is measured from the newest missed due (here: from the oldest)",
        _one(
            CATCHUP,
            "        latest = due_us + every_us * missed\n        if now_us - latest <= policy.grace_us:\n",
            "        latest = due_us + every_us * missed\n        if now_us - due_us <= policy.grace_us:\n",
        ),
        ("catch-up-policies",),
    ),
    Mutant(
        "fixed-delay-on-grid",
        "catch-up FixedDelay: the next due is the firing plus the interval (here: the grid's next time, as Skip)",
        _one(
            CATCHUP,
            "        return Decision(due_us, 1, every_us, now_us + every_us, 0)\n",
            "        return Decision(due_us, 1, every_us, after_now, 0)\n",
        ),
        ("catch-up-policies",),
    ),
)
"""The catalogue. Names are stable (``--only`` and the tests use them)."""


# ====================================================================== CLI =====


def _seed_range(text: str) -> range:
    start, sep, stop = text.partition(":")
    try:
        seeds = range(int(start or 0), int(stop)) if sep else range(int(start))
    except ValueError:
        raise argparse.ArgumentTypeError(f"seeds must be a count (200) or start:stop (0:200), got {text!r}") from None
    if len(seeds) == 0:
        raise argparse.ArgumentTypeError(f"no seeds in {text!r}")
    return seeds


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m sim mutants``: exit 0 when every mutant chosen was caught, 1 otherwise, 2 on bad arguments."""
    parser = argparse.ArgumentParser(prog="python -m sim mutants", description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--only", type=_names, default=None, help="comma-separated mutant names (default: all)")
    parser.add_argument("--seeds", type=_seed_range, default=range(200), help="seeds per scenario: a count or start:stop (default 200)")
    parser.add_argument("--scenarios", type=_names, default=None, help="scenarios to try, in order (default: the mutant's, then cluster-random, swarm)")
    parser.add_argument("--workers", type=int, default=1, help=f"worker processes (1 to {MAX_WORKERS}; default 1)")
    parser.add_argument("--budget", type=float, default=1800.0, help="seconds at most per mutant, so a mutant that hangs a run cannot stall the table (default 1800)")
    parser.add_argument("--rev", default=None, help="copy the runtime from this git revision instead of the working tree")
    parser.add_argument("--list", action="store_true", help="print the mutants and whether each snippet is present; run nothing")
    args = parser.parse_args(list(argv) if argv is not None else None)
    # A terminated harness still kills its workers and removes its copies (the finally blocks run).
    signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(143))

    if not 1 <= args.workers <= MAX_WORKERS:
        parser.error(f"--workers must be 1 to {MAX_WORKERS}, got {args.workers}")
    known = {mutant.name: mutant for mutant in MUTANTS}
    if args.only is not None:
        unknown = [name for name in args.only if name not in known]
        if unknown:
            parser.error(f"no mutant named {', '.join(unknown)}; try one of: {', '.join(known)}")
        chosen = [known[name] for name in args.only]
    else:
        chosen = list(MUTANTS)

    if args.list:
        stale = 0
        for mutant in chosen:
            problems = stale_edits(mutant)
            stale += bool(problems)
            state = "STALE: " + "; ".join(problems) if problems else "ok"
            print(f"{mutant.name:<30} {state}\n    {mutant.rule}\n    targets: {', '.join(mutant.targets) or '-'}")
        return 1 if stale else 0

    if args.rev is not None:  # one commit for the baseline and every mutant, even if the branch moves meanwhile
        resolved = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", f"{args.rev}^{{commit}}"], capture_output=True, text=True)
        if resolved.returncode != 0:
            parser.error(f"--rev {args.rev}: {resolved.stderr.strip()}")
        args.rev = resolved.stdout.strip()
        print(f"runtime from commit {args.rev}", file=sys.stderr)
    outcomes: list[Outcome] = []
    with scratch_dir() as scratch:
        # One snapshot of the runtime, taken now: it is the baseline, and every mutant's copy is
        # made from it, so a tree that others edit during the run cannot mix two versions.
        base = copy_runtime(scratch / "baseline", rev=args.rev)
        error, available = import_error(base)
        if error is not None:
            print(f"the unpatched runtime does not import: {error}", file=sys.stderr)
            return 2
        if args.scenarios is not None:
            missing = [name for name in args.scenarios if name not in available]
            if missing:
                parser.error(f"no scenario {', '.join(missing)} in this runtime")
        baseline = Baseline(base, sys.executable)
        for mutant in chosen:
            outcome = hunt(
                mutant, baseline=baseline, seeds=args.seeds, scenarios=args.scenarios, available=available,
                workers=args.workers, budget=args.budget, source=base,  # every mutant from the same snapshot
                progress=lambda text: print(f"  ... {text}", file=sys.stderr, flush=True),
            )
            print(f"{mutant.name}: {outcome.caught_by} ({outcome.seconds:.0f} s) {outcome.detail[:120]}", file=sys.stderr, flush=True)
            outcomes.append(outcome)
    for line in format_table(outcomes):
        print(line)
    caught = sum(1 for o in outcomes if o.status == "CAUGHT")
    print(f"mutants={len(outcomes)} caught={caught} not_caught={sum(1 for o in outcomes if o.status == 'NOT CAUGHT')} "
          f"stale={sum(1 for o in outcomes if o.status == 'STALE')} invalid={sum(1 for o in outcomes if o.status == 'INVALID')}")
    return 0 if caught == len(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
