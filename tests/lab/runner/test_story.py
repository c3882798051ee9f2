"""Stories and findings: written by the runner after a run, read back by reports and tools."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolkit.lab import ConfigError, Finding, fmt, read_findings, run_experiment
from toolkit.lab.plan.config import plan
from toolkit.lab.results.findings import unmatched_patterns


def test_findings_are_written_with_their_verdicts(tmp_path: Path) -> None:
    run = run_experiment("tiny_counter", {"n_steps": 3}, seed=0, output_dir=tmp_path)
    data = json.loads((run.run_dir / "findings.json").read_text())
    (item,) = data["findings"]["tiny_counter"]
    assert item["verdict"] is True and item["label"] == "as predicted"
    assert item["text"].startswith("The final loss is ") and "{" not in item["text"]
    assert data["problems"] == [] and data["seeds"] == [0]
    (own,) = item["per_seed"]  # the run's own finding (of item["seeds"]): template, numbers
    assert item["seeds"] == [0] and own["text"] == ("The final loss is {blocked} blocked and "
                                                "{unblocked} unblocked.")
    assert own["values"]["blocked"] == run.summary["blocked"]["loss"]
    md = (run.run_dir / "findings.md").read_text()
    assert md.startswith("# Findings") and "(as predicted; held in 1 of 1 seed)" in md
    (verdict,) = read_findings(run.run_dir)["tiny_counter"]
    assert (verdict.text, verdict.verdict, verdict.seeds) == (item["text"], True, (0,))
    assert verdict.basis == "the chain rule through the target"


def test_a_failing_findings_function_is_recorded_not_fatal(tmp_path: Path) -> None:
    run = run_experiment("tiny_counter", {"findings_fail": True}, output_dir=tmp_path)
    assert run.status == "complete"
    assert run.meta["findings_problems"] == [
        "tiny_counter: findings() failed: RuntimeError: tiny_counter: findings fail as asked"]


def test_a_pattern_that_matched_no_block_is_a_finding(tmp_path: Path) -> None:
    # a pattern matching none of the blocks the experiment declares is refused up front
    with pytest.raises(ConfigError, match=r"disable_blocks: 'tiny.targt' matches no block of "
                                          r"tiny_counter .*did you mean 'tiny.target'"):
        run_experiment("tiny_counter", {}, disable_blocks=["tiny.targt"], output_dir=tmp_path)
    assert not tmp_path.joinpath("tiny_counter").exists()
    # a declared block that did not run: the run warns, and says so in its findings
    with pytest.warns(RuntimeWarning, match=r"no named block matching \['tiny.outside'\] ran"):
        run = run_experiment("tiny_counter", {}, disable_blocks=["tiny.outside"],
                             output_dir=tmp_path)
    texts = [f.text for f in read_findings(run.run_dir)["tiny_counter"]]
    assert any("'tiny.outside' matched no block that ran (blocks seen: tiny.target)" in t
               for t in texts)


def test_showcase_findings_come_per_child(tmp_path: Path) -> None:
    specs = plan(Path(__file__).parents[3] / "configs" / "showcase_quick.toml",
                 ['params.experiments=["tiny_counter"]'], output_dir=tmp_path)
    run = run_experiment(specs[0].config)
    assert list(read_findings(run.run_dir)) == ["tiny_counter"]


def test_failed_runs_write_no_findings(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError):
        run_experiment("tiny_counter", {"fail_at": 0}, output_dir=tmp_path)
    (run_dir,) = (tmp_path / "tiny_counter").iterdir()
    assert read_findings(run_dir) == {}


def test_unmatched_patterns() -> None:
    assert unmatched_patterns(["em.*", "rbm.*", "*"], ["em.responsibilities"]) == ["rbm.*"]


@pytest.mark.parametrize(("value", "unit", "text"), [
    (0.0014461230000506475, "", "0.00145"), (1059636, "B", "1.01 MiB"), (512, "B", "512 B"),
    (0.0421, "s", "42.1 ms"), (3.0, "s", "3 s"), (None, "", "n/a"), (float("inf"), "", "∞"),
    (2.3e-13, "", "2.3e-13"), (12, "", "12"),
])
def test_fmt_gives_three_significant_digits_and_units(value, unit, text) -> None:
    assert fmt(value, unit) == text


def test_finding_str_carries_its_verdict() -> None:
    assert str(Finding("x is {x}.", False, basis="b", values={"x": 1})) == \
        "x is 1. (not as predicted)"
    assert str(Finding("took 2 s.")) == "took 2 s. (measured)"


def test_finding_topic_and_verdict_are_checked() -> None:
    assert Finding("it took 2 s.", None, "cost").topic == "cost"
    # a pydantic dataclass: a wrong topic or a verdict that is not a bool is refused as made
    with pytest.raises(ValueError, match=r"Finding\n.*\n  Input should be 'result' or 'cost'.*"
                                         r"input_value='x'"):
        Finding("t", True, "x")
    with pytest.raises(ValueError, match=r"Finding\n.*\n  Input should be a valid boolean.*"
                                         r"input_value=1,"):
        Finding("t", 1)
