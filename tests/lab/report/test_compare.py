"""``toolkit compare`` on every built-in experiment: two seeds of tiny runs, blocked and unblocked
side by side with ranges over the seeds, a terminal table of at most 120 characters, a figure
per headline metric that shows each seed and does not hang values from zero; the statistics
checked against numpy's over the same summaries."""

from __future__ import annotations

import csv
import importlib.metadata
import os
import re
import textwrap
from pathlib import Path

import pandas as pd
import pytest
from matplotlib.patches import Rectangle

from toolkit.lab import run_experiment
from toolkit.lab.report.compare import (
    DIFF,
    NARROWEST,
    WIDTH,
    Comparison,
    Sweep,
    cell,
    compare_runs,
    format_table,
    headline_metrics,
    metric_figure,
    terminal_width,
    write_compare,
)

#: Each built-in experiment shrunk to a fraction of a second or so (on top of its QUICK).
TINY: dict[str, dict] = {
    "adversarial_training": {"hidden": [8], "epochs": 1, "n_train": 64, "batch_size": 32,
                             "steps": 2, "eval_steps": 2, "eval_restarts": 1, "n_eval": 32,
                             "check_size": 16, "memory_steps": [1, 2], "memory_batch": 8,
                             "timing_repeat": 1, "timing_rounds": 3, "grad_batch": 8,
                             "n_examples": 2},
    "audit_corpus": {"width": 8, "batch": 8, "rounds": 2, "windows": 2},
    "dice": {"sample_sizes": [10, 100], "repeats": 2, "timing_repeat": 3},
    "em_gmm": {"n_samples": 60, "n_iter": 3, "inner_steps": 2, "include_iris": False},
    "gradient_lens": {"q_hidden": 8, "td_steps": 3, "gan_hidden": 8, "gan_batch": 16,
                      "rounds": 3},
    "rbm_cd": {"n_iter": 10, "log_every": 5, "sample_steps": 10, "n_samples": 4},
    "simsiam": {"epochs": 2, "hidden": 16, "dim": 8},
    "softmax_gradients": {"scales": [1.0, 100.0], "n_rows": 4, "n_cols": 8,
                          "failure_points": 5, "cost_shapes": [[16, 16]], "cost_repeat": 3},
    "td_learning": {"chain_steps": 20, "a_split_steps": 200, "baird_sweeps": 30,
                    "log_every": 10},
    "vq_vae": {"epochs": 1, "hidden": 16},
}
SEEDS = (0, 1)


def _builtin() -> list[str]:
    """The built-in experiments that compare one algorithm (the showcase, which composes them,
    is left out: its runs are compared as their children's)."""
    return sorted(e.name for e in importlib.metadata.entry_points(group="toolkit.experiments")
                  if e.value.startswith("stop_gradient_experiments.")
                  and not hasattr(e.load(), "parts"))


def test_every_builtin_experiment_has_tiny_params():
    assert sorted(TINY) == _builtin()


@pytest.fixture(scope="module")
def two_seeds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every built-in experiment run with seeds 0 and 1 at TINY sizes (no reports)."""
    from toolkit.lab.plan.registry import load_experiment

    root = tmp_path_factory.mktemp("compare")
    for name, tiny in TINY.items():
        experiment = load_experiment(name)
        for seed in SEEDS:
            run_experiment(experiment, {**(experiment.quick or {}), **tiny}, seed=seed,
                           device="cpu", dtype=experiment.dtype or "float32",
                           output_dir=root / name)
    return root


def _stats(table: Comparison, quantity: str, variant: str) -> pd.Series:
    (row,) = table.stats().xs((quantity, variant), level=("quantity", "variant")).itertuples()
    return row


@pytest.mark.slow  # every experiment, twice
def test_compare_every_experiment_on_two_seeds(two_seeds: Path) -> None:
    for name in TINY:
        folder = two_seeds / name
        table = compare_runs(folder)
        assert table.labels(name) == ["default"]
        assert table.seeds(name, "default") == list(SEEDS), name
        paired = table.paired(name, "default")
        if name != "audit_corpus":  # its summary has no blocked/unblocked pairs
            assert paired, name
            n = table.stats().xs(DIFF, level="variant")["n"]
            assert set(n) == {len(SEEDS)}, name
        text = format_table(table)
        assert max(len(line) for line in text.splitlines()) <= WIDTH, name
        assert f"{name} · 1 config, 2 runs pooled" in text, name
        csv_path, html_path = write_compare(table, folder)
        with csv_path.open() as fh:
            rows = list(csv.DictReader(fh))
        assert {r["n"] for r in rows} == {"2"}, name
        page = html_path.read_text()
        headline = headline_metrics(table, name)
        figures = sorted((folder / "compare_figures").glob(f"{name}__*.png"))
        assert len(figures) == len(headline) == page.count("<figure"), name
        if paired:
            assert 1 <= len(headline) <= 3, name
    # the defects this replaced: td_learning's variants one level down, and em_gmm's
    # log-likelihoods drawn as bars from zero
    td = compare_runs(two_seeds / "td_learning")
    values = td.values[td.values.quantity == "a_split.values.B"]
    assert set(values.variant) == {"blocked", "unblocked", DIFF}
    text = {v: cell(values.value[values.variant == v], "x") for v in values.variant}
    assert text == {"blocked": "1 [seeds agree]", "unblocked": "0.75 [seeds agree]",
                    DIFF: "-0.25 [seeds agree]"}
    em = compare_runs(two_seeds / "em_gmm")
    fig = metric_figure(em, "em_gmm", "final_loglik")
    (ax,) = fig.axes
    _, high = ax.get_ylim()
    assert high < 0 and not [p for p in ax.patches if isinstance(p, Rectangle)
                             and p.get_height() != 0 and p is not ax.patch]
    (legend,) = fig.legends  # the config's colour and marker, with its difference
    assert legend.get_texts()[0].get_text().startswith("default\nΔ ")
    # the whole folder: one config per experiment, still at most WIDTH characters a line
    everything = compare_runs(two_seeds)
    assert sorted(everything.sweeps) == sorted(TINY)
    assert max(len(line) for line in format_table(everything).splitlines()) <= WIDTH


def _table(rows: dict[str, tuple[list[float], list[float]]]) -> Comparison:
    """A comparison of one config from ``quantity → (blocked, unblocked)`` over seeds 0, 1…"""
    records = [{"experiment": "exp", "config": "default", "seed": seed, "quantity": q,
                "variant": variant, "value": value}
               for q, pair in rows.items() for variant, values in zip(
                   ("blocked", "unblocked", DIFF),
                   (*pair, [u - b for b, u in zip(*pair)])) for seed, value in enumerate(values)]
    return Comparison(pd.DataFrame(records), {"exp": Sweep(points={"default": {}})},
                      {("exp", "default"): []})


def test_cells_give_the_mean_and_the_range_and_pair_the_difference_by_seed() -> None:
    table = _table({"loss": ([1.0, 3.0], [2.0, 7.0]), "seconds": ([0.25, 0.5], [0.25, 0.25])})
    assert cell([1.0, 3.0], "loss") == "2 [1, 3]"
    assert cell([2.0, 7.0], "loss") == "4.5 [2, 7]"
    assert cell([1.0, 4.0], "loss") == "2.5 [1, 4]"
    assert cell([0.25, 0.5], "seconds") == "375 [250, 500] ms"
    assert cell([0.25, 0.25], "seconds") == "250 ms [seeds agree]"
    loss = _stats(table, "loss", "blocked")
    assert (loss.mean, loss.n) == (2.0, 2) and loss.std == pytest.approx(2 ** 0.5)
    assert _stats(table, "loss", DIFF).mean == 2.5  # paired: (2 - 1 + 7 - 3) / 2
    assert headline_metrics(table, "exp") == ["loss", "seconds"]


def test_a_wide_table_stays_within_the_width() -> None:
    long = "grad_max_abs_err_vs_float64.bfloat16.random.with.a.very.long.name.indeed"
    table = _table({long: ([1.234567e-7, 9.87654e-7], [-3.2101e-5, 7.7777e-3]),
                    "loss": ([1.0, 3.0], [2.0, 7.0])})
    for width in (120, 80, 60):
        text = format_table(table, width)
        assert max(len(line) for line in text.splitlines()) <= width, (width, text)
        assert "bfloat16" in text and "[1.23e-07, 9.88e-07]" in text


#: Numbers as an em_gmm sweep gives them: a table of them is 100 characters wide.
EM_LIKE = {"agreeing": ([2.0, 2.0], [1.5, 1.5]),
           "final_loglik": ([-3.56, -3.4612], [-3.5677, -3.4668]),
           "final_resp_entropy": ([0.0282, 0.0309], [0.0217, 0.0224]),
           "weights_max_abs_err": ([0.0101, 0.034], [0.0101013, 0.03592])}
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[+-]\d+)?")


@pytest.mark.parametrize("columns", [80, 60, 100])
def test_the_table_takes_the_terminals_width_and_splits_no_number(
        columns: int, monkeypatch: pytest.MonkeyPatch) -> None:
    table = _table(EM_LIKE)
    wide = format_table(table, 400)
    assert max(len(line) for line in wide.splitlines()) > 80  # the case of issue 72
    monkeypatch.setenv("COLUMNS", str(columns))
    text = format_table(table)
    assert max(len(line) for line in text.splitlines()) <= columns, text
    # a number broken across lines would leave pieces that the one-line table does not hold
    tokens = [t for line in text.splitlines() for t in NUMBER.findall(line)]
    assert sorted(tokens) == sorted(t for line in wide.splitlines()
                                    for t in NUMBER.findall(line)), text
    assert "-0.00665 [-0.0077, -0.0056]" in text  # whole, on one line


def test_piped_output_is_as_wide_as_WIDTH(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)  # pytest's stdout is no terminal
    assert terminal_width() == WIDTH
    monkeypatch.setenv("COLUMNS", "10")
    assert terminal_width() == NARROWEST


def test_every_row_has_its_range_or_says_why_not() -> None:
    assert cell([2.0], "loss") == "2 [1 seed]"
    assert cell([2.0, 2.0, 2.0], "loss") == "2 [seeds agree]"
    text = format_table(_table(EM_LIKE), 80)
    for line in text.splitlines()[3:]:
        if line.strip().startswith(("blocked", "unblocked", "Δ")):
            assert "[" in line and "]" in line, line
    assert "blocked    2 [seeds agree]" in text and "Δ          -0.5 [seeds agree]" in text


def test_compare_on_the_command_line_at_80_columns(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from toolkit.lab.cli import main

    (tmp_path / "exps").mkdir()
    (tmp_path / "exps" / "em_like.py").write_text(EM_LIKE_EXPERIMENT)
    monkeypatch.setenv("TOOLKIT_EXPERIMENTS_PATH", str(tmp_path / "exps"))
    for seed in (0, 1):
        run_experiment("em_like", seed=seed, device="cpu", output_dir=tmp_path / "r")
    capsys.readouterr()
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.chdir(tmp_path)  # the files' paths are printed from the working folder
    assert main(["compare", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80, out
    assert "-0.006653 [-0.0077, -0.00561]" in out  # whole, on one line
    assert out.splitlines()[-2:] == [os.path.join("r", "compare.csv"),
                                     os.path.join("r", "compare.html")]


EM_LIKE_EXPERIMENT = textwrap.dedent('''
    """Two seeds of em_gmm-like numbers, Δ = -0.0077 (seed 0) and -0.005606 (seed 1)."""
    from toolkit.lab import ExperimentParams

    class Params(ExperimentParams):
        pass

    def run(params, ctx):
        b = [-3.5612, -3.4631][ctx.seed]
        u = b + [-0.0077, -0.005606][ctx.seed]
        ctx.summary(blocked={"final_loglik": b, "final_resp_entropy": 0.0282 + ctx.seed / 300},
                    unblocked={"final_loglik": u, "final_resp_entropy": 0.02171})
''')


LONG_KEY = textwrap.dedent('''
    """A summary key of 300 characters (a name from results: any length)."""
    from toolkit.lab import ExperimentParams

    class Params(ExperimentParams):
        pass

    def run(params, ctx):
        key = "quantity_" + "k" * 291
        ctx.summary(blocked={key: 1.0 + ctx.seed}, unblocked={key: 2.0 + ctx.seed})
''')


def test_a_long_metric_name_gets_a_short_file_name(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from toolkit.lab.cli import main

    (tmp_path / "exps").mkdir()
    (tmp_path / "exps" / "long_key.py").write_text(LONG_KEY)
    monkeypatch.setenv("TOOLKIT_EXPERIMENTS_PATH", str(tmp_path / "exps"))
    for seed in (0, 1):
        run_experiment("long_key", seed=seed, device="cpu", output_dir=tmp_path / "r")
    assert main(["compare", str(tmp_path / "r")]) == 0
    html = (tmp_path / "r" / "compare.html").read_text()
    assert "quantity_" + "k" * 291 in html  # the full name stays in the page
    names = [p.name for p in (tmp_path / "r" / "compare_figures").iterdir()]
    assert names and all(len(n) <= 84 for n in names)
