"""The layering contracts of pyproject.toml's [tool.importlinter] hold, and each one catches the import it forbids."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT = Path(sys.executable).parent / "lint-imports"

# One planted import per contract: (file, the line appended, the contract's name as lint-imports prints it, the
# import as its report names it).
PLANTED = [
    ("casty/protocol/limits.py", "import casty._core.codec", "the protocol cores import nothing of casty", "casty.protocol.limits -> casty._core.codec"),
    ("casty/_core/ref.py", "import casty.cluster.routing", "casty layers:", "casty._core.ref -> casty.cluster.routing"),
    ("casty/errors.py", "import sim.trace", "casty never imports sim", "casty.errors -> sim.trace"),
    ("casty/cluster/client.py", "import casty.cluster.node", "the node process and the client do not import each other", "casty.cluster.client -> casty.cluster.node"),
    ("sim/world.py", "import sim.viz", "the world does not import its views", "sim.world -> sim.viz"),
]


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` on the packages under ``root``, with ``root``'s pyproject.toml, no cache written."""
    if not LINT.exists():
        pytest.fail(f"{LINT} is missing: import-linter is in the test extra (make setup installs it)")
    env = {**os.environ, "PYTHONPATH": str(root), "COLUMNS": "400"}
    return subprocess.run([str(LINT), "--no-cache"], cwd=root, env=env, capture_output=True, text=True, timeout=120)


def test_every_layering_contract_is_kept() -> None:
    """lint-imports on the tree: every contract KEPT, exit 0 (a broken one prints the import chain that breaks it)."""
    result = lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 5 kept, 0 broken." in result.stdout


def test_each_contract_catches_its_forbidden_import(tmp_path: Path) -> None:
    """A copy of the tree with one forbidden import planted per contract: all five contracts broken, each naming its import."""
    for package in ("casty", "sim"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    for file, line, _, _ in PLANTED:
        with open(tmp_path / file, "a", encoding="utf-8") as out:
            out.write(f"\n{line}  # planted by tests/test_layers.py\n")
    result = lint(tmp_path)
    report = " ".join(result.stdout.split())  # lint-imports wraps long lines
    assert result.returncode == 1, report
    assert "Contracts: 0 kept, 5 broken." in report
    assert [contract for _, _, contract, _ in PLANTED if f"{contract}" not in report.split("Broken contracts", 1)[1]] == []
    assert [chain for _, _, _, chain in PLANTED if chain not in report] == []
