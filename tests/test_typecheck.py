"""mypy --strict stays clean on casty/ and sim/ (the configuration is in pyproject.toml)."""

from __future__ import annotations

from pathlib import Path

import pytest
from mypy import api

ROOT = Path(__file__).resolve().parent.parent


def test_mypy_strict_is_clean(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runtime and the simulator type-check under the project's strict mypy configuration."""
    monkeypatch.chdir(ROOT)
    out, err, status = api.run(["--config-file", str(ROOT / "pyproject.toml"), "--no-error-summary"])
    assert status == 0, out + err
