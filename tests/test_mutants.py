"""The mutation harness: patches land on a copy only, stale and broken mutants are named as such, a real one is caught."""

from __future__ import annotations

import hashlib
import sys
import time
from pathlib import Path

import pytest

from sim import mutants
from sim.mutants import MUTANTS, Baseline, Edit, Mutant, Stale, apply_mutant, copy_runtime, hunt, import_error, stale_edits

ROOT = Path(__file__).resolve().parent.parent
CLAIMS = "casty/protocol/tick_claim.py"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_every_mutant_snippet_is_in_the_tree(mutant: Mutant) -> None:
    """Each mutant's snippets occur exactly once in today's files: a refactor that moves one fails here, not silently."""
    assert stale_edits(mutant) == []


def test_mutant_names_are_unique_and_every_mutant_has_a_rule_and_a_target() -> None:
    """Names are unique (``--only`` picks by name); each mutant says the rule it breaks and a cheap scenario to try first."""
    names = [m.name for m in MUTANTS]
    assert len(names) == len(set(names))
    assert [m.name for m in MUTANTS if not m.rule or not m.targets or not m.edits] == []


def test_patch_applies_to_the_copy_and_never_to_the_tree(tmp_path: Path) -> None:
    """A mutant rewrites its snippet in the copy only (which still imports, from itself); the working tree's file keeps its bytes."""
    mutant = next(m for m in MUTANTS if m.name == "claim-last-writer-wins")
    before = _digest(ROOT / CLAIMS)
    copy = copy_runtime(tmp_path / "tree")
    assert sorted(p.name for p in copy.iterdir()) == ["casty", "sim"]
    assert list(copy.rglob("__pycache__")) == []
    apply_mutant(mutant, copy)
    patched = (copy / CLAIMS).read_text(encoding="utf-8")
    original = (ROOT / CLAIMS).read_text(encoding="utf-8")
    edit = mutant.edits[0]
    assert edit.snippet not in patched
    assert patched == original.replace(edit.snippet, edit.replacement, 1)
    assert _digest(ROOT / CLAIMS) == before
    error, names = import_error(copy)  # the copy imports, from itself (import_error checks where casty and sim came from)
    assert error is None and "cron-single-fire" in names


def test_stale_snippet_raises_and_writes_nothing(tmp_path: Path) -> None:
    """A snippet missing (or present twice) makes the mutant Stale, naming the file and the count; no file of the copy changes."""
    copy = copy_runtime(tmp_path / "tree")
    before = _digest(copy / CLAIMS)
    moved = Mutant("moved", "a rule", (Edit(CLAIMS, "    return REFUSED_NOT_HERE\n", ""),), ("ticker",))
    twice = Mutant("twice", "a rule", (Edit(CLAIMS, "import", "#"),), ("ticker",))
    assert stale_edits(moved, copy) == [f"{CLAIMS}: snippet 'return REFUSED_NOT_HERE' found 0 times (expected once)"]
    with pytest.raises(Stale, match="moved: casty/protocol/tick_claim.py: snippet 'return REFUSED_NOT_HERE' found 0 times"):
        apply_mutant(moved, copy)
    with pytest.raises(Stale, match="twice: casty/protocol/tick_claim.py: snippet 'import' found [0-9]+ times"):
        apply_mutant(twice, copy)
    assert _digest(copy / CLAIMS) == before


def test_hunt_reports_a_stale_mutant_as_stale(tmp_path: Path) -> None:
    """``hunt`` on a mutant whose code moved answers STALE, never caught or passed, and runs no scenario."""
    moved = Mutant("moved", "a rule", (Edit(CLAIMS, "no such line\n", ""),), ("ticker",))
    outcome = hunt(moved, baseline=Baseline(tmp_path, "unused"), seeds=range(3), available=["ticker"])
    assert (outcome.status, outcome.caught_by, outcome.tried) == ("STALE", "STALE", {})
    assert outcome.detail == f"moved: {CLAIMS}: snippet 'no such line' found 0 times (expected once)"


def test_hunt_reports_a_mutant_that_does_not_import_as_invalid(tmp_path: Path) -> None:
    """A patch that leaves a syntax error is INVALID (the copy does not import), not caught."""
    broken = Mutant(
        "broken", "a rule",
        (Edit(CLAIMS, "    if winner is not None:\n        return None, winner\n", "    if winner is not None\n"),),
        ("cron-single-fire",),
    )
    outcome = hunt(broken, baseline=Baseline(tmp_path, "unused"), seeds=range(3), available=["cron-single-fire"])
    assert outcome.status == "INVALID"
    assert outcome.detail.startswith("does not import: SyntaxError")
    assert outcome.tried == {}


def test_a_harmless_patch_is_not_caught_and_says_what_was_tried(tmp_path: Path) -> None:
    """A patch that changes no behaviour survives every seed: NOT CAUGHT within 2 seeds of the scenario tried."""
    base = copy_runtime(tmp_path / "base")
    harmless = Mutant("harmless", "none", (Edit("casty/_core/schedules.py", "def catch_up(due_us", "def catch_up(  due_us"),), ("ticker",))
    outcome = hunt(harmless, baseline=Baseline(base, sys.executable), seeds=range(2), available=["ticker"], scenarios=["ticker"])
    assert (outcome.status, outcome.tried) == ("NOT CAUGHT", {"ticker": 2})
    assert outcome.caught_by == "NOT CAUGHT within 2 seeds of ticker (2)"


def test_cron_claim_mutant_is_caught_on_the_first_seed_of_cron_single_fire(tmp_path: Path) -> None:
    """Breaking first-writer-wins makes every node win a tick: cron-single-fire fails at seed 0 (2 workers agree on the seed)."""
    base = copy_runtime(tmp_path / "base")
    mutant = next(m for m in MUTANTS if m.name == "claim-last-writer-wins")
    outcome = hunt(mutant, baseline=Baseline(base, sys.executable), seeds=range(2), available=["cron-single-fire"], workers=2)
    assert (outcome.status, outcome.scenario, outcome.seed) == ("CAUGHT", "cron-single-fire", 0)
    assert outcome.caught_by == "cron-single-fire seed 0"
    assert outcome.detail.startswith("cron_single_fire: tick ") and "3 winners" in outcome.detail
    lines = mutants.format_table([outcome])
    assert lines[0].split()[:4] == ["mutant", "caught", "by", "seed"]
    assert lines[2].split()[:3] == ["claim-last-writer-wins", "cron-single-fire", "0"]


def test_a_seed_that_also_fails_unpatched_is_passed_over(tmp_path: Path) -> None:
    """A failing seed the baseline also fails (``accept`` refuses it) is skipped; the first accepted failing seed is reported."""
    copy = copy_runtime(tmp_path / "tree")
    apply_mutant(next(m for m in MUTANTS if m.name == "clock-activates"), copy)
    verdict, _passed, out_of_time = mutants._first_failure(
        copy, "clock-does-not-activate", [0, 1, 2], 2, None, sys.executable, lambda v: v[0] != 0
    )
    assert verdict is not None and out_of_time is False
    seed, failures, error = verdict
    assert (seed, error) == (1, None)
    assert failures[0] == "stays_inactive: the clock started the key at t=10.0s"


def test_a_spent_budget_stops_the_search(tmp_path: Path) -> None:
    """With its deadline already past, a search reports no failure, no seed run, and that the budget ran out."""
    copy = copy_runtime(tmp_path / "tree")
    assert mutants._first_failure(copy, "ticker", [0, 1], 1, time.monotonic() - 1.0, sys.executable, lambda _v: True) == (None, 0, True)


# The four mutants that escaped 200 seeds of their old probes once the step-down rule and the
# catch-up resend made those probes' situations unreachable, each with the probe written for
# it since and the first failure it gives (exact: the probes are deterministic scripts).
RESTARTED_READ_3 = "restarted_owner_reads_current: the restarted owner read 3, expected 6 (the last confirmed count)"
SINCE_STEP_DOWN = [
    ("r1-promise-below", "thawed-acquisition", "thawed_prepare_refused: the last owner read 0 after the Adds ['TimeoutError', 1, 2, 3, 4, 5, 6]"),
    ("blank-promise-counts", "behind-replica-at-restart", RESTARTED_READ_3),
    ("ready-at-once", "behind-replica-at-restart", RESTARTED_READ_3),
    ("unready-accepts-any-write", "frozen-owner-resend", "frozen_owner_resend_refused: the thawed owner read 3, expected 6 (the heir's last confirmed count)"),
]


@pytest.fixture(scope="module")
def unpatched(tmp_path_factory: pytest.TempPathFactory) -> Baseline:
    """One unpatched copy of the tree for the tests below (the baseline a failure is checked against)."""
    return Baseline(copy_runtime(tmp_path_factory.mktemp("baseline") / "tree"), sys.executable)


@pytest.mark.parametrize(("name", "probe", "failure"), SINCE_STEP_DOWN, ids=[row[0] for row in SINCE_STEP_DOWN])
def test_a_mutant_the_step_down_rule_hid_is_caught_at_seed_0_of_its_new_probe(unpatched: Baseline, name: str, probe: str, failure: str) -> None:
    """Each of the four is CAUGHT by its probe at seed 0 (which the unpatched copy passes), with the probe's own check first."""
    mutant = next(m for m in MUTANTS if m.name == name)
    assert mutant.targets[0] == probe  # tried first, so the table's run reaches it at once
    outcome = hunt(mutant, baseline=unpatched, seeds=range(3), available=[probe], scenarios=[probe], source=unpatched.copy)
    assert (outcome.status, outcome.scenario, outcome.seed, outcome.tried) == ("CAUGHT", probe, 0, {probe: 1})
    assert outcome.detail == failure


# Their second probes: the same rules through frames held back by the network (injected), not live nodes' frames.
HELD_BACK = [
    ("r1-promise-below", "crossing-prepares", "lower_prepare_refused: final count 1 after the Adds [1, 2, 3] ['Unavailable', 1]"),
    ("unready-accepts-any-write", "held-back-write-at-restart", RESTARTED_READ_3),
]


@pytest.mark.parametrize(("name", "probe", "failure"), HELD_BACK, ids=[row[0] for row in HELD_BACK])
def test_a_frame_held_back_by_the_network_catches_the_same_mutant_at_seed_0(unpatched: Baseline, name: str, probe: str, failure: str) -> None:
    """The second probe of r1-promise-below and of unready-accepts-any-write (an injected held-back frame) catches it at seed 0 too."""
    mutant = next(m for m in MUTANTS if m.name == name)
    assert probe in mutant.targets
    outcome = hunt(mutant, baseline=unpatched, seeds=range(3), available=[probe], scenarios=[probe], source=unpatched.copy)
    assert (outcome.status, outcome.scenario, outcome.seed, outcome.detail) == ("CAUGHT", probe, 0, failure)


@pytest.mark.parametrize("probe", sorted({row[1] for row in SINCE_STEP_DOWN + HELD_BACK}))
def test_the_new_probes_pass_more_seeds_on_the_unpatched_runtime(probe: str) -> None:
    """Seeds 1 to 3 of each new probe pass every check on today's runtime (seed 0 is test_scenarios' and the hunt's baseline)."""
    from sim import scenarios

    assert [(seed, [str(f) for f in scenarios.run(probe, seed).failures]) for seed in (1, 2, 3)] == [(1, []), (2, []), (3, [])]


# The three membership rules of the restart work ("Learning the view" (2) and (5), "The remembered
# view"), each with the probe written for it and the probe's first failure (exact: deterministic scripts).
# cluster-double-restart passes seeds 0..29 of all three (every node there keeps its disk, and the
# members that remember the cluster are heard within the window).
NOTHING_READ = "no_read_from_nothing: a restarted node read 0 while n3 held 3 (the members that remember the cluster were paused)"
MEMBERSHIP_RULES = [
    ("learn-without-knowing", "seed-restart-unheard-seed", NOTHING_READ),
    (
        "unknowing-voters",
        "restart-beside-paused",
        "kept_beside_paused: n3 read 0 while n2 and n6, paused, held 3 (replicas ['n6', 'n3', 'n2'])",
    ),
    ("disk-view-ignored", "seeds-restart-with-disks", NOTHING_READ),
]


@pytest.mark.parametrize(("name", "probe", "failure"), MEMBERSHIP_RULES, ids=[row[0] for row in MEMBERSHIP_RULES])
def test_a_membership_rule_mutant_is_caught_at_seed_0_of_its_probe(unpatched: Baseline, name: str, probe: str, failure: str) -> None:
    """Disabling (2), (5) or the remembered view is CAUGHT by its probe at seed 0 (the unpatched copy passes it), check first."""
    mutant = next(m for m in MUTANTS if m.name == name)
    assert mutant.targets[0] == probe
    outcome = hunt(mutant, baseline=unpatched, seeds=range(3), available=[probe], scenarios=[probe], source=unpatched.copy)
    assert (outcome.status, outcome.scenario, outcome.seed, outcome.tried) == ("CAUGHT", probe, 0, {probe: 1})
    assert outcome.detail == failure


# The swarm seeds where two of these bugs were first seen still catch their mutants (the runtime's fix is the rule).
SWARM_SEEDS = [
    (
        "learn-without-knowing",
        970,
        "epochs_only_grow: sw_beat[beat-n4]: epoch (1, 'n1#1767225622793000') acquired on n1 at t=23.937s"
        " is not greater than (2, 'n3#1767225600000000') acquired on n3 at t=8.846s",
    ),
    ("disk-view-ignored", 848, "deleted_stays_deleted: e1: deleted at t=25.350s, then Look on n4 at t=42.125s saw notes [1, 2, 3] again: (1, 2, 3)"),
]


@pytest.mark.parametrize(("name", "seed", "failure"), SWARM_SEEDS, ids=[row[0] for row in SWARM_SEEDS])
def test_the_swarm_seed_that_found_the_bug_catches_its_mutant(unpatched: Baseline, name: str, seed: int, failure: str) -> None:
    """Swarm seed 970 catches the mutant of (2), seed 848 that of the remembered view (both pass unpatched), with the first failure."""
    mutant = next(m for m in MUTANTS if m.name == name)
    outcome = hunt(mutant, baseline=unpatched, seeds=range(seed, seed + 1), available=["swarm"], scenarios=["swarm"], source=unpatched.copy)
    assert (outcome.status, outcome.scenario, outcome.seed, outcome.detail) == ("CAUGHT", "swarm", seed, failure)


@pytest.mark.parametrize("probe", [row[1] for row in MEMBERSHIP_RULES])
def test_the_membership_probes_pass_more_seeds_on_the_unpatched_runtime(probe: str) -> None:
    """Seeds 1 and 2 of each membership probe pass every check on today's runtime (seed 0 is the hunt's baseline)."""
    from sim import scenarios

    assert [(seed, [str(f) for f in scenarios.run(probe, seed).failures]) for seed in (1, 2)] == [(1, []), (2, [])]


# Replication rule 9 (Supersede), whose probe cuts away only the holder's own copy of the newer Prepare.
SUPERSEDE = "superseded_holder_told: n3's run ended lost 0.303 s after the stray Prepare, not within 0.1 s"


def test_a_silent_supersede_is_caught_at_seed_0_of_its_probe(unpatched: Baseline) -> None:
    """With rule 9 silenced the holder learns only at its next write (0.3 s on): superseded-holder-told fails seed 0, its check first."""
    mutant = next(m for m in MUTANTS if m.name == "r9-supersede-silent")
    assert mutant.targets[0] == "superseded-holder-told"
    probe = mutant.targets[0]
    outcome = hunt(mutant, baseline=unpatched, seeds=range(3), available=[probe], scenarios=[probe], source=unpatched.copy)
    assert (outcome.status, outcome.scenario, outcome.seed, outcome.tried) == ("CAUGHT", probe, 0, {probe: 1})
    assert outcome.detail == SUPERSEDE


def test_the_supersede_probe_passes_more_seeds_on_the_unpatched_runtime() -> None:
    """Seeds 1 to 3 of superseded-holder-told pass every check on today's runtime (seed 0 is test_scenarios' and the hunt's baseline)."""
    from sim import scenarios

    assert [(seed, [str(f) for f in scenarios.run("superseded-holder-told", seed).failures]) for seed in (1, 2, 3)] == [(1, []), (2, []), (3, [])]
