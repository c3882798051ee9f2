"""summary.json has one shape (toolkit.lab.results.schema.SummaryFile), checked as it is written and
as it is read: each variant's numbers are a table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolkit.lab import RunContext, RunResults, run_experiment
from toolkit.lab.cli import main
from toolkit.lab.errors import DamagedFile
from toolkit.lab.results.view import check_run


def test_a_variant_that_is_not_a_table_is_refused_as_it_is_written(tmp_path: Path) -> None:
    import torch

    ctx = RunContext(run_dir=tmp_path, seed=0, device=torch.device("cpu"),
                     dtype=torch.float64, disable_patterns=("*",), quiet=True)
    ctx.summary(blocked={"loss": 1.0}, note="free JSON of the experiment's")
    with pytest.raises(TypeError, match=r"ctx\.summary: 'unblocked': Input should be a valid "
                       r"dictionary, got list"):
        ctx.summary(unblocked=[1.0, 2.0])
    assert json.loads((tmp_path / "summary.json").read_text()) == {
        "blocked": {"loss": 1.0}, "note": "free JSON of the experiment's"}


@pytest.fixture
def two_runs(tmp_path: Path) -> list[Path]:
    return [run_experiment("tiny_counter", {"n_steps": 2}, seed=seed, device="cpu",
                           output_dir=tmp_path / "r").run_dir for seed in (0, 1)]


def test_a_summary_of_the_wrong_shape_is_one_damaged_run(two_runs: list[Path],
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    bad = two_runs[0] / "summary.json"
    bad.write_text(json.dumps({"blocked": [1, 2], "unblocked": {"loss": 0.5}}))
    (problem,) = check_run(two_runs[0])
    assert problem.path == bad and "blocked" in problem.problem
    with pytest.raises(DamagedFile):
        _ = RunResults(two_runs[0]).summary
    assert check_run(two_runs[1]) == []
    assert main(["compare", str(two_runs[0].parent)]) == 0  # the other run goes on
    err = capsys.readouterr().err
    assert str(bad) in err and "unexpected" not in err
