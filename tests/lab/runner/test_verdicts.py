"""Findings over seeds: the verdict rules, the seed counts, and the timing interval rule."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from runner_testutil import cli

from toolkit.lab import Finding, Headline, SeedGroup, TimeRatio, read_findings
from toolkit.lab.plan.config import Plan
from toolkit.lab.results.findings import aggregate, median_interval

BASIS = "a named theorem"


def loss_finding(value: float, holds: bool | None, **kw) -> Finding:
    return Finding("The loss is {loss}.", holds, basis=BASIS if holds is not None else "",
                   values={"loss": value}, **kw)


def over_seeds(*findings: Finding):
    verdicts, problems = aggregate({seed: {"x": [f]} for seed, f in enumerate(findings)})
    (verdict,) = verdicts["x"]
    return verdict, problems


# -- the verdict over seeds


def test_a_prediction_holds_only_when_it_holds_in_every_seed() -> None:
    v, _ = over_seeds(loss_finding(1.0, True), loss_finding(2.0, False), loss_finding(3.0, True))
    assert v.verdict is False and v.label == "not as predicted"
    assert (v.held, v.n_seeds) == (2, 3) and v.seeds_note == "held in 2 of 3 seeds"
    v, _ = over_seeds(*(loss_finding(x, True) for x in (1.0, 2.0, 3.0)))
    assert v.verdict is True and v.seeds_note == "held in 3 of 3 seeds"


def test_a_stated_fraction_allows_a_seed_to_miss() -> None:
    two_of_three = [loss_finding(1.0, True, need=0.6), loss_finding(2.0, False, need=0.6),
                    loss_finding(3.0, True, need=0.6)]
    v, _ = over_seeds(*two_of_three)
    assert v.verdict is True and v.seeds_note == "held in 2 of 3 seeds, needs 2"
    v, _ = over_seeds(*(loss_finding(1.0, h, need=0.8) for h in (True, False, True)))
    assert v.verdict is False  # 0.8 of 3 seeds is 3 (rounded up)
    with pytest.raises(ValueError, match=r"need\n  Input should be less than or equal to 1 "
                                         r".*input_value=1.5"):
        loss_finding(1.0, True, need=1.5)


def test_numbers_are_the_mean_and_range_over_seeds() -> None:
    v, _ = over_seeds(loss_finding(1.0, None), loss_finding(2.0, None), loss_finding(6.0, None))
    assert v.text == "The loss is 3 [1, 6]." and v.verdict is None
    assert v.seeds_note == "3 seeds" and v.label == "measured"
    v, _ = over_seeds(loss_finding(0.5, None), loss_finding(0.5, None))
    assert v.text == "The loss is 0.5."  # one number when the seeds agree
    v, _ = over_seeds(loss_finding(0.5, None), loss_finding(math.nan, None))
    assert v.text == "The loss is 0.5 (n/a in 1 seed)."


def test_seed_independent_findings_say_so_and_are_checked() -> None:
    fixed = [Finding("{n} autograd nodes.", True, "cost", basis=BASIS, values={"n": 7},
                     seed_independent=True) for _ in range(3)]
    v, problems = over_seeds(*fixed)
    assert v.seed_independent and v.seeds_note == "seed-independent" and problems == []
    v, _ = over_seeds(fixed[0])
    assert v.seeds_note == "seed-independent"  # also with one seed
    varied = [*fixed[:2], Finding("{n} autograd nodes.", True, "cost", basis=BASIS,
                                  values={"n": 8}, seed_independent=True)]
    v, problems = over_seeds(*varied)
    assert not v.seed_independent and v.seeds_note == "held in 3 of 3 seeds"
    assert problems == ["x: a finding declared seed-independent differs between seeds: "
                        "'{n} autograd nodes.'"]


def test_per_seed_findings_are_kept_and_read_back(tmp_path: Path) -> None:
    from toolkit.lab.results.records import write_findings

    per_seed = {s: {"x": [loss_finding(float(s), s != 1)]} for s in (0, 1, 2)}
    write_findings(tmp_path, per_seed, [])
    data = json.loads((tmp_path / "findings.json").read_text())
    assert data["seeds"] == [0, 1, 2]
    (item,) = data["findings"]["x"]
    assert [p["values"]["loss"] for p in item["per_seed"]] == [0.0, 1.0, 2.0]
    assert [p["verdict"] for p in item["per_seed"]] == [True, False, True]
    assert item["label"] == "not as predicted" and item["held"] == 2
    (back,) = read_findings(tmp_path)["x"]
    assert back.text == "The loss is 1 [0, 2]." and back.verdict is False
    md = (tmp_path / "findings.md").read_text()
    assert "(not as predicted; held in 2 of 3 seeds) Basis: a named theorem." in md


def test_findings_check_their_text_and_basis() -> None:
    with pytest.raises(ValueError, match="Finding: a prediction must name its basis"):
        Finding("x holds.", True)
    with pytest.raises(ValueError, match=r"Finding: the text names \{y\} but values has \['x'\]"):
        Finding("{y}", values={"x": 1})
    with pytest.raises(ValueError, match="placeholder format must be digits and/or a unit"):
        Finding("{x:.3f}", values={"x": 1.0})
    with pytest.raises(ValueError, match=r"Finding\nvalues.x.bool\n.*input_value=\[1, 2\]"):
        Finding("{x}", values={"x": [1, 2]})  # a number, a string, a bool or None
    assert Finding("took {t:s}, {m:B}, {r:4}", values={"t": 0.0123, "m": 2048,
                                                       "r": 1.23456}).sentence == \
        "took 12.3 ms, 2 KiB, 1.235"


# -- timings: a verdict only when the interval excludes 1


def test_a_prediction_outside_its_range_is_a_measurement_that_says_why() -> None:
    why = "the theory covers n >= 100; this run has n = 10"
    f = loss_finding(1.0, False, outside=why)
    assert f.holds is None and f.label == "measured" and not f.predicts
    assert f.sentence == f"The loss is 1. Measured only: {why}"
    v, problems = over_seeds(f, loss_finding(2.0, True, outside=why))
    assert v.verdict is None and v.outside == why and not problems
    assert v.text == f"The loss is 1.5 [1, 2]. Measured only: {why}"
    timed = Finding("{timing}", timing=TimeRatio((2.0,) * 9, "above"), basis=BASIS, outside=why)
    assert timed.holds is None and timed.timing is not None and timed.timing.expect is None
    inside = loss_finding(1.0, False, outside=" ")  # blank: inside the range
    assert inside.holds is False


def test_seeds_outside_a_range_drawn_per_seed_are_counted_apart() -> None:
    """The range may depend on what a seed drew (a random problem): those seeds test nothing,
    and the verdict is over the seeds inside it."""
    v, _ = over_seeds(loss_finding(1.0, True), loss_finding(2.0, False, outside="too short"),
                      loss_finding(3.0, True))
    assert v.verdict is True and v.outside_seeds == 1
    assert v.seeds_note == "held in 2 of 2 seeds; 1 outside its range"
    assert v.text.endswith("Measured only in 1 of 3 seeds: too short")
    v, _ = over_seeds(loss_finding(1.0, False), loss_finding(2.0, False, outside="too short"))
    assert v.verdict is False and v.seeds_note == "held in 0 of 1 seed; 1 outside its range"


def test_a_headline_names_values_the_finding_has() -> None:
    head = Headline("loss", blocked="loss", unblocked="loss", thresholds=(0.5,))
    v, _ = over_seeds(loss_finding(1.0, True, headline=head), loss_finding(2.0, True,
                                                                            headline=head))
    assert v.headline == head
    with pytest.raises(ValueError, match="headline draws 'gap'"):
        loss_finding(1.0, True, headline=Headline("loss", blocked="loss", unblocked="gap"))


def test_median_interval_is_distribution_free_order_statistics() -> None:
    assert median_interval(range(5)) is None  # [min, max] of 5 covers only 93.75 %
    assert median_interval(range(9)) == (1, 7)  # coverage 1 − 2·10/512 = 0.961
    with pytest.raises(ValueError, match=r"median_interval: confidence must be in \(0, 1\)"):
        median_interval([1.0], confidence=1.0)
    r = TimeRatio((1.1, 1.2, 1.3, 1.15, 1.25, 1.22, 1.18, 1.21, 1.3))
    assert r.side == "above" and r.interval == (1.15, 1.3) and len(r.rounds) == 9
    assert str(r) == "1.21x (95 % interval 1.15x to 1.3x, 9 rounds)"


def test_a_time_verdict_needs_an_interval_that_excludes_one() -> None:
    slower = (1.3, 1.2, 1.25, 1.4, 1.22, 1.31, 1.28, 1.35, 1.26)
    noisy = (0.8, 1.3, 0.9, 1.2, 1.1, 0.95, 1.05, 1.4, 0.7)
    assert TimeRatio(slower, "above").verdict() is True
    assert TimeRatio(slower, "below").verdict() is False
    assert TimeRatio(noisy, "above").verdict() is None  # interval includes 1: measured
    assert TimeRatio(slower[:5], "above").verdict() is None  # too few rounds for an interval
    assert TimeRatio(slower).verdict() is None  # no prediction: measured
    f = Finding("It takes {timing} the blocked time.", topic="cost", basis=BASIS,
                timing=TimeRatio(noisy, "above"))
    assert f.label == "measured" and "95 % interval" in f.sentence
    with pytest.raises(ValueError, match="Finding: a timing's verdict follows from its "
                                         "interval; leave verdict=None, got True"):
        Finding("{timing}", True, basis=BASIS, timing=TimeRatio(slower, "above"))
    with pytest.raises(ValueError, match=r"TimeRatio\n.*\n  Input should be 'above' or "
                                         r"'below'.*input_value='up'"):
        TimeRatio(slower, "up")


def test_timings_pool_their_rounds_over_seeds() -> None:
    # each seed alone has too few rounds for an interval; together they have one
    per_seed = [Finding("{timing}", topic="cost", basis=BASIS,
                        timing=TimeRatio(rounds, "above"))
                for rounds in ((1.3, 1.2, 1.25), (1.4, 1.22, 1.31), (1.28, 1.35, 1.26))]
    assert all(f.label == "measured" for f in per_seed)
    v, _ = over_seeds(*per_seed)
    assert v.verdict is True
    assert v.seeds_note == ("9 rounds in 3 seeds; too few rounds in each seed for an interval "
                            "of its own")
    assert v.text == "1.28x (95 % interval 1.22x to 1.35x, 9 rounds)"


def timed(*per_seed: tuple[float, ...]):
    return over_seeds(*(Finding("{timing}", topic="cost", basis=BASIS,
                                timing=TimeRatio(rounds, "above")) for rounds in per_seed))


SLOWER = (1.3, 1.2, 1.25, 1.4, 1.22, 1.31, 1.28, 1.35, 1.26)  # interval above 1
EVEN = (0.8, 1.3, 0.9, 1.2, 1.1, 0.95, 1.05, 1.4, 0.7)  # interval holds 1
MUCH_SLOWER = tuple(9 * r for r in SLOWER)


def test_a_pooled_timing_says_over_which_seeds_it_holds() -> None:
    v, _ = timed(SLOWER, SLOWER, SLOWER)
    assert v.verdict is True and v.seeds_note == (
        "27 rounds in 3 seeds; each seed's own interval lies above 1 in 3 of 3 seeds")
    v, _ = timed(SLOWER)  # one seed: the pooled interval is the seed's
    assert v.verdict is True and v.seeds_note == "9 rounds in 1 seed"
    v, _ = timed(SLOWER, SLOWER, SLOWER[:4])  # a seed too short for its own interval
    assert v.verdict is True and v.seeds_note == (
        "22 rounds in 3 seeds; each seed's own interval lies above 1 in 2 of 2 seeds (1 more "
        "with too few rounds)")


def test_a_timing_whose_seeds_disagree_is_a_measurement() -> None:
    # the PGD-AT defect: 9.83x over three seeds, one seed alone unlike the others
    v, _ = timed(MUCH_SLOWER, MUCH_SLOWER, EVEN)
    assert v.timing is not None and v.timing.verdict() is True  # pooled, it holds
    assert v.verdict is None and v.label == "measured"
    assert v.seeds_note == ("27 rounds in 3 seeds; each seed's own interval lies above 1 in "
                            "2 of 3 seeds")
    v, _ = timed(tuple(1 / r for r in SLOWER), MUCH_SLOWER, MUCH_SLOWER)
    assert v.verdict is None  # a seed faster without the block, the others slower
    v, _ = timed(*(tuple(1 / r for r in SLOWER),) * 3)  # every seed against the prediction
    assert v.verdict is False and v.seeds_note.endswith("lies below 1 in 3 of 3 seeds")


def test_the_seeds_of_a_timing_are_read_back(tmp_path: Path) -> None:
    from toolkit.lab.results.records import write_findings

    per_seed = {s: {"x": [Finding("{timing}", topic="cost", basis=BASIS,
                                  timing=TimeRatio(r, "above"))]}
                for s, r in enumerate((MUCH_SLOWER, MUCH_SLOWER, EVEN))}
    write_findings(tmp_path, per_seed, [])
    (back,) = read_findings(tmp_path)["x"]
    assert back.verdict is None and "above 1 in 2 of 3 seeds" in back.seeds_note
    assert "(measured; 27 rounds in 3 seeds; each seed's own interval lies above 1 in 2 of 3 " \
           "seeds)" in (tmp_path / "findings.md").read_text()


# -- seed groups from the command line


@pytest.mark.slow
def test_run_with_seeds_writes_a_seed_group(tiny_config: Path, tmp_path: Path) -> None:
    out = tmp_path / "results"
    proc = cli("run", str(tiny_config), "--seeds", "0-2", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    folders = sorted((out / "tiny_counter").iterdir())
    groups = [d for d in folders if (d / "group.json").is_file()]
    runs = [d for d in folders if (d / "meta.json").is_file()]
    assert len(groups) == 1 and len(runs) == 3
    group = SeedGroup(groups[0])
    assert group.seeds == [0, 1, 2] and sorted(group.run_dirs) == sorted(runs)
    assert groups[0].name.split("__")[1] == "seeds0-2"
    assert not any((d / "report.html").exists() for d in runs)  # one report, over the seeds
    html = (groups[0] / "report.html").read_text()
    assert 'data-seeds="3/3"' in html and "held in 3 of 3 seeds" in html
    assert "seeds 0, 1, 2" in html
    (v,) = read_findings(groups[0])["tiny_counter"]
    assert v.seeds == (0, 1, 2) and len(v.per_seed) == 3
    # not a terminal: the tally, the verdict counts and the paths; on stderr, one line per
    # experiment of each seed as it ended, nothing else
    assert "tiny_counter  1 as predicted" in proc.stdout and "tally: 1 as predicted" in proc.stdout
    assert f"report:   {groups[0] / 'report.html'}" in proc.stdout
    ended = proc.stderr.splitlines()
    assert sorted(line.split()[:3] for line in ended) == [
        ["seed", str(s), "tiny_counter"] for s in range(3)], proc.stderr
    verbose = cli("run", str(tiny_config), "--seeds", "0-2", "--out", str(tmp_path / "v"),
                  "--verbose")
    assert "held in 3 of 3 seeds" in verbose.stdout and "seed group: " in verbose.stderr
    assert json.loads((groups[0] / "group.json").read_text())["wall_seconds"] > 0
    # the group is drawn again from its files, and its config runs the same seeds
    assert cli("report", str(groups[0])).returncode == 0
    read = Plan.read(groups[0] / "config.toml")
    assert list(read.seeds) == [0, 1, 2] and len(read) == 3
