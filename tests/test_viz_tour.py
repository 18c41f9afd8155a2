"""The tour (``sim.viz.tour``, ``python -m sim tour``): it lives with the views, and the world layer imports no view."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from sim.__main__ import main as cli

ROOT = Path(__file__).resolve().parent.parent


def test_tour_writes_a_summary_and_figures_for_every_tour_scenario(tmp_path: object) -> None:
    """`python -m sim tour --out DIR` (make demo) writes summary.md and a timeline PNG per scenario, all checks holding."""
    import matplotlib

    matplotlib.use("Agg")
    from sim.viz.tour import TOUR, write_tour

    out = Path(str(tmp_path)) / "tour"
    assert write_tour(out, seed=0) == 0
    summary = (out / "summary.md").read_text()
    for name, _ in TOUR:
        assert f"## {name}" in summary
        assert (out / f"{name}-timeline.png").stat().st_size > 10_000
    assert "FAILED" not in summary


def test_the_tour_command_reaches_the_views_tour(monkeypatch: pytest.MonkeyPatch) -> None:
    """`python -m sim tour --out DIR --seed 3` calls sim.viz.tour.write_tour(DIR, seed=3) and returns what it returns."""
    import sim.viz.tour

    calls: list[tuple[str, int]] = []

    def fake(out: str, *, seed: int = 0) -> int:
        calls.append((out, seed))
        return 7

    monkeypatch.setattr(sim.viz.tour, "write_tour", fake)
    assert cli(["tour", "--out", "somewhere", "--seed", "3"]) == 7
    assert calls == [("somewhere", 3)]


def _view_imports(path: Path) -> set[str]:
    """The sim.viz modules a file imports, at any depth (a late import inside a function counts too)."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            found |= {base} | {f"{base}.{a.name}" for a in node.names}
    return {name for name in found if name == "sim.viz" or name.startswith("sim.viz.")}


def test_the_world_layer_reaches_the_views_only_from_the_command_line_and_the_failure_report() -> None:
    """No module under sim/ outside sim.viz imports a view (sim.tour is gone), but the CLI's tour command and the pytest plugin's chart, both late."""
    reach = {
        (str(path.relative_to(ROOT)), name)
        for path in sorted((ROOT / "sim").rglob("*.py"))
        if "viz" not in path.relative_to(ROOT / "sim").parts
        for name in _view_imports(path)
    }
    assert not (ROOT / "sim" / "tour.py").exists()
    assert reach == {("sim/__main__.py", "sim.viz.tour"), ("sim/__main__.py", "sim.viz.tour.write_tour"), ("sim/pytest_plugin.py", "sim.viz")}
