"""Runner tests: the fixture experiments in fixtures/experiments are on the search path."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(autouse=True)
def _fixture_experiments(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLKIT_EXPERIMENTS_PATH", str(FIXTURES / "experiments"))


@pytest.fixture
def tiny_config(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.toml"
    path.write_text((FIXTURES / "tiny.toml").read_text())
    return path
