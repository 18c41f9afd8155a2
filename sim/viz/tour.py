"""``python -m sim tour``: run the tour scenarios, write their figures (PNG) and a summary.

This is ``make demo``: a reader who runs one command gets, in one folder, what the
simulator shows about schedules under failure, each figure next to the checks that held.

It lives with the views, above the world: it runs scenarios (``sim``) and draws them
(``sim.viz``), and the world layer imports no view. ``python -m sim tour`` reaches it
with the CLI's one late import (``sim/__main__.py``).
"""

from __future__ import annotations

import time
from pathlib import Path

from sim import scenarios

__all__ = ["TOUR", "write_tour"]

TOUR: tuple[tuple[str, str | None], ...] = (
    ("ticker", "tick"),
    ("interval-day", "quarter"),
    ("pause-catch-up", "beat"),
    ("clock-step", "minute"),
    ("clock-does-not-activate", "beat"),
    ("durable-restart", "minute"),
    ("timer-vs-schedule", "schedule"),
    ("daily-report", "daily"),
    ("timers-vs-schedules", "persisted"),
)

CLUSTER_TOUR: tuple[str, ...] = ("stale-owner-fenced", "ownership-repeat", "ownership-miss", "all-replicas-lost", "rolling-restart")
"""Cluster scenarios: drawn as the ownership chart of their most eventful key, instead of the catch-up chart."""


def write_tour(out: str | Path, *, seed: int = 0) -> int:
    """Run every tour scenario with ``seed``; write ``<name>-catchup.png`` (or ``-ownership.png``), ``<name>-timeline.png`` and ``summary.md``."""
    import matplotlib

    matplotlib.use("Agg")
    from sim.viz import activation_timeline, catchup_chart, ownership_chart

    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["# casty lab tour", "", f"seed {seed}. Each scenario ran on virtual time; its checks read the trace.", ""]
    failed = 0
    for name, schedule in (*TOUR, *((n, None) for n in CLUSTER_TOUR)):
        started = time.perf_counter()
        result = scenarios.run(name, seed)
        elapsed = time.perf_counter() - started
        chosen = result.scenario
        status = "all checks hold" if result.ok else f"{len(result.failures)} check(s) FAILED"
        failed += 0 if result.ok else 1
        print(f"{name:<26} {status:<22} {len(result.trace):>6} rows  {result.world.now:>9.0f} s simulated in {elapsed * 1000:7.1f} ms")
        lines += [f"## {name}", "", chosen.description, "", f"- {status}; {len(result.trace)} trace rows; digest `{result.trace.digest()[:16]}`"]
        for failure in result.failures:
            lines.append(f"- FAILED: {failure}")
        figures = []
        if schedule is not None and result.trace.of("schedule.fired", name=schedule):
            fig = catchup_chart(result.trace, schedule=schedule, title=f"{name}: schedule {schedule!r}")
            path = folder / f"{name}-catchup.png"
            fig.savefig(path, dpi=110)
            figures.append(path.name)
        if name in CLUSTER_TOUR:
            fig = ownership_chart(result.trace)
            path = folder / f"{name}-ownership.png"
            fig.savefig(path, dpi=110)
            figures.append(path.name)
        fig = activation_timeline(result.trace, title=f"{name}: activations")
        path = folder / f"{name}-timeline.png"
        fig.savefig(path, dpi=110)
        figures.append(path.name)
        lines += [f"- figures: {', '.join(figures)}", ""]
        for figure in figures:
            lines += [f"![{figure}]({figure})", ""]
    (folder / "summary.md").write_text("\n".join(lines))
    print(f"wrote {len(TOUR) + len(CLUSTER_TOUR)} scenarios' figures and summary.md to {folder}/")
    return 1 if failed else 0
