"""``--tensorboard DIR``: every logged metric mirrored to TensorBoard event files, one writer per
variant, read back with TensorBoard's own reader; refused cleanly where the extra is missing."""

from __future__ import annotations

import json
import pickle
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from toolkit.lab import RunResults
from toolkit.lab.cli import main


def _scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar of the event files in ``folder`` (not below it), as TensorBoard reads them."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0})  # 0: keep every point
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def _expected(run: RunResults) -> dict[str, dict[str, list[tuple[int, float]]]]:
    """variant → tag → (step, value) from metrics.jsonl, each value rounded to float32 (what
    a TensorBoard scalar holds)."""
    out: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for row in run.metrics:
        for key, value in row.items():
            if key != "step" and value is not None:
                variant, _, tag = key.partition("/")
                out.setdefault(variant, {}).setdefault(tag, []).append(
                    (row["step"], float(np.float32(value))))
    return out


def _runs(out: Path) -> list[RunResults]:
    return [RunResults(d) for d in sorted((out / "tiny_counter").iterdir())
            if (d / "meta.json").is_file()]


def test_event_files_hold_what_metrics_jsonl_holds(tiny_config: Path, tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    board, out, plain = tmp_path / "tb", tmp_path / "results", tmp_path / "plain"
    assert main(["run", str(tiny_config), "--seeds", "0,1", "--out", str(out), "--tensorboard",
                 str(board), "--quiet", "--no-report"]) == 0
    runs = _runs(out)
    assert len(runs) == 2
    for run in runs:
        folder = board / "tiny_counter" / run.run_dir.name
        assert run.meta["tensorboard"] == str(folder)
        expected = _expected(run)
        assert sorted(p.name for p in folder.iterdir() if p.is_dir()) == sorted(expected) \
            == ["blocked", "unblocked"]  # one TensorBoard run per variant, side by side
        for variant, tags in expected.items():
            assert _scalars(folder / variant) == tags, (run.run_dir, variant)
        assert not list(folder.glob("events.*"))  # every key named its variant
    # the summary does not depend on the mirror: the same bytes without it
    assert main(["run", str(tiny_config), "--seeds", "0,1", "--out", str(plain), "--quiet",
                 "--no-report"]) == 0
    for with_board, without in zip(runs, _runs(plain)):
        assert with_board.seed == without.seed
        assert (with_board.run_dir / "summary.json").read_bytes() == \
            (without.run_dir / "summary.json").read_bytes()
        assert "tensorboard" not in (with_board.run_dir / "config.toml").read_text()


def test_a_failing_run_closes_its_writers(tiny_config: Path, tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    board, out = tmp_path / "tb", tmp_path / "results"
    before = set(threading.enumerate())
    assert main(["run", str(tiny_config), "--set", "params.fail_at=2", "--out", str(out),
                 "--tensorboard", str(board), "--quiet", "--no-report"]) == 1
    # each writer's thread ends when the writer is closed: none is left running (tqdm's
    # monitor, started with the first progress bar of the process and kept for every later
    # one, is no writer's)
    assert [t.name for t in set(threading.enumerate()) - before
            if t.name != "tqdm_monitor"] == []
    (run,) = _runs(out)
    assert run.status == "failed"
    folder = board / "tiny_counter" / run.run_dir.name
    steps = [step for step, _ in _scalars(folder / "blocked")["train/loss"]]
    assert steps == [0, 1]  # what was logged before the failure, flushed to disk


def test_the_config_key_works_as_the_option_does(tiny_config: Path, tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    board = tmp_path / "from config"
    tiny_config.write_text(f"tensorboard = {json.dumps(str(board))}\n" + tiny_config.read_text())
    assert main(["run", str(tiny_config), "--out", str(tmp_path / "r"), "--quiet",
                 "--no-report"]) == 0
    (run,) = _runs(tmp_path / "r")
    assert _scalars(board / "tiny_counter" / run.run_dir.name / "unblocked") == \
        _expected(run)["unblocked"]


def test_without_the_extra_the_cli_refuses_before_any_run(tiny_config: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # as if not installed
    out = tmp_path / "results"
    assert main(["run", str(tiny_config), "--out", str(out), "--tensorboard",
                 str(tmp_path / "tb")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("toolkit: error: --tensorboard") and \
        'pip install -e ".[tensorboard]"' in err
    assert not out.exists() and not (tmp_path / "tb").exists()  # nothing started


def test_a_spec_travels_with_its_folder_and_no_writer(tiny_config: Path, tmp_path: Path) -> None:
    from toolkit.lab.plan.config import plan

    (spec,) = plan(tiny_config, tensorboard=tmp_path / "tb")
    assert spec.tensorboard == str(tmp_path / "tb")
    assert "tensorboard" not in spec.config.model_dump()  # not part of the run's identity
    back = pickle.loads(pickle.dumps(spec))  # how a pool or a Dask worker receives it
    assert back.tensorboard == spec.tensorboard and back.config == spec.config


def test_keys_without_a_variant_and_childrens_keys(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from toolkit.lab.execute.live_curves import TensorBoardMirror

    mirror = TensorBoardMirror(tmp_path)
    mirror.log(0, {"step": 0, "loss": 1.5, "em_gmm/blocked/train/loglik": -2.0,
                   "../../escape/x": 3.0, "em_gmm/unblocked/train/loglik": None}, "em_gmm/")
    mirror.close()
    mirror.close()  # a second close does nothing
    assert _scalars(tmp_path) == {"loss": [(0, 1.5)], "../../escape/x": [(0, 3.0)]}
    assert _scalars(tmp_path / "blocked") == {"em_gmm/train/loglik": [(0, -2.0)]}
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["blocked"]
