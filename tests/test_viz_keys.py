"""The runtime's own keys (cron claim keys) are left out of every view unless asked for by name (sim/viz/keys.py)."""

from __future__ import annotations

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

from sim import scenarios  # noqa: E402
from sim.scenarios import Run  # noqa: E402
from sim.trace import Row, Trace  # noqa: E402
from sim.viz import activation_timeline, catchup_chart, ownership_chart, spacetime_diagram  # noqa: E402
from sim.viz.data.keys import is_internal  # noqa: E402

CLAIM = "casty.cluster.claims:schedule_fire"


@pytest.fixture(scope="module")
def cron() -> Run:
    run = scenarios.run("cron-single-fire", 0)
    assert run.ok, run.failures
    return run


def test_is_internal_names_the_runtimes_own_types() -> None:
    """A type under the casty package is internal; a program's type (even one named like casty) is not."""
    assert is_internal(CLAIM) and is_internal("casty.anything:x")
    assert not is_internal("sim.scenarios.node_schedules:pinged") and not is_internal("castyapp:x") and not is_internal(None)


def test_ownership_by_default_draws_the_programs_key_not_a_claim_key(cron: Run) -> None:
    """cron-single-fire acquires a claim key per tick (9 epochs) and pinged once: the chart draws pinged unless the claim is named."""
    claims = [r for r in cron.trace.of("epoch.acquired") if r.get("actor") == CLAIM]
    assert len(claims) == 9
    (ax,) = ownership_chart(cron.trace).axes
    assert ax.get_title(loc="left").startswith("pinged[")
    (named,) = ownership_chart(cron.trace, actor=CLAIM, key=str(claims[0].get("key"))).axes
    assert named.get_title(loc="left").startswith(f'schedule_fire["{claims[0].get("key")}"]')


def test_timeline_by_default_has_no_claim_key_bars(cron: Run) -> None:
    """The activation timeline of cron-single-fire draws pinged["report"]'s run only; the claim keys' 9 runs appear when named."""
    (ax,) = activation_timeline(cron.trace).axes
    bars = sorted(str(a.get_gid()) for a in ax.patches if str(a.get_gid()).startswith("activation:"))
    assert bars == ['activation:"report"']  # pinged["report"]: one actor type, so the bar is named by its key, quoted
    claim_keys = sorted({str(r.get("key")) for r in cron.trace.of("activation.started") if r.get("actor") == CLAIM})
    (named,) = activation_timeline(cron.trace, keys=claim_keys[:1]).axes
    assert [str(a.get_gid()) for a in named.patches if str(a.get_gid()).startswith("activation:")] == [f'activation:"{claim_keys[0]}"']


def test_spacetime_by_default_marks_no_claim_key_row(cron: Run) -> None:
    """Around a cron tick the claim key's epoch and writes are not marked on the nodes' lines unless internal=True."""
    won = cron.trace.of("node_schedule.claim_won")[0]
    quiet = "\n".join(t.get_text() for t in spacetime_diagram(cron.trace, won.t - 0.02, 0.04).axes[0].texts)
    loud = "\n".join(t.get_text() for t in spacetime_diagram(cron.trace, won.t - 0.02, 0.04, internal=True).axes[0].texts)
    assert "schedule_fire" not in quiet and "schedule_fire" in loud


def test_catchup_by_default_charts_the_programs_schedule() -> None:
    """A trace where a claim key's schedule fires first, beside the program's: the chart picks the program's, the claim's when named."""
    base = scenarios.run("pause-catch-up", 0).trace
    rows: list[Row] = []
    for row in base.rows:
        if row.kind.startswith("schedule."):  # the same schedule under a claim key, just before each of its rows
            rows.append(Row(len(rows), row.t_ns, row.node, row.wall_us, row.kind, {**row.fields, "actor": CLAIM, "key": "claim"}))
        rows.append(Row(len(rows), row.t_ns, row.node, row.wall_us, row.kind, dict(row.fields)))
    trace = Trace(rows)
    actor = str(base.of("schedule.fired")[0].get("actor"))
    title = catchup_chart(trace).axes[0].get_title(loc="left")
    assert f"of {actor.split(':')[-1]}[" in title and "claim" not in title
    assert f'of {CLAIM.split(":")[-1]}["claim"]' in catchup_chart(trace, actor=CLAIM).axes[0].get_title(loc="left")


def test_key_label_names_a_key_as_a_key() -> None:
    """A key is quoted after its type's short name (beater["dormant"]), or quoted alone, so 'dormant' or 'both' reads as a key."""
    from sim.viz.data.keys import key_label, short_type

    assert short_type("sim.scenarios.single:beater") == "beater"
    assert key_label("sim.scenarios.single:beater", "dormant") == 'beater["dormant"]'
    assert key_label("beater", "both", with_type=False) == '"both"'


def test_the_events_in_words_name_the_key_as_a_key() -> None:
    """The explorer's words: 'n1 activated beater["dormant"]', 'n1 fired beater["both"]'s schedule 'beat'' (was beater[both]'s schedule beat)."""
    from sim.viz.data.frames import describe

    a = "sim.scenarios.single:beater"
    started = Row(0, 0, "n1", 0, "activation.started", {"actor": a, "key": "dormant", "lease": 1, "recovered": False})
    fired = Row(1, 0, "n1", 0, "schedule.fired", {"actor": a, "key": "both", "name": "beat"})
    assert describe(started) == 'n1 activated beater["dormant"]'
    assert describe(fired) == "n1 fired beater[\"both\"]'s schedule 'beat'"
