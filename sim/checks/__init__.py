"""Checks over traces: what must hold in every run, each failure explained.

A check reads a finished world (its trace and results) and raises ``CheckFailed`` with a
message a student can act on: which row, which rule, what was expected. Checks never look
inside the runtime: if a property cannot be seen in the trace, the trace is missing a row.

This package is the public face (``sim.checks.never_early``, ``from sim.checks import CheckFailed``);
each family of checks has a module: ``base`` (``Check``, ``CheckFailed``, ``run_checks``), ``schedules``
(occurrences accounted for, no burst, never early), ``memory`` (what a node remembers: replica sets,
memory eras and losses, outages), ``safety`` (epochs, single writer, confirmed and owed writes),
``occurrences`` (repeats and misses explained) and, from ``sim.effects``, the effects ledger's checks.
"""

from __future__ import annotations

from ..effects import at_least_once as at_least_once, at_most_once as at_most_once, effects as effects, exactly_once as exactly_once  # the effects ledger's checks (sim/effects.py)
from .base import Check, CheckFailed, run_checks
from .memory import kept_memory, memory_eras, memory_losses, outages, replica_set
from .occurrences import EXPLAINING_FAULTS, NEAR_NS, OFFSET_TOLERANCE_US, Occurrence, explain_occurrences, repeats_and_misses_explained
from .safety import EntityId, _late_acquisitions, epochs_only_grow, no_confirmed_write_lost, owed_writes_found, single_writer_per_epoch
from .schedules import ScheduleId, never_early, no_burst, occurrences_accounted_for, schedule_occurrences

# a failure prints as sim.checks.CheckFailed, the name a user imports, not the module that happens to define it
CheckFailed.__module__ = __name__
Occurrence.__module__ = __name__

__all__ = [
    "Check",
    "CheckFailed",
    "run_checks",
    "schedule_occurrences",
    "occurrences_accounted_for",
    "no_burst",
    "never_early",
    "epochs_only_grow",
    "single_writer_per_epoch",
    "no_confirmed_write_lost",
    "memory_losses",
    "kept_memory",
    "owed_writes_found",
    "memory_eras",
    "outages",
    "replica_set",
    "Occurrence",
    "explain_occurrences",
    "repeats_and_misses_explained",
]
