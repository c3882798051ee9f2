"""Report tests: the runner's fixture experiments are on the search path."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parents[1] / "runner" / "fixtures"


@pytest.fixture(autouse=True)
def _fixture_experiments(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLKIT_EXPERIMENTS_PATH", str(FIXTURES / "experiments"))
