"""Runs through the Python API: files, determinism, unique directories, failures, signals."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from toolkit import stop_gradient
from toolkit.lab import (
    RunContext,
    RunResults,
    load_all,
    load_experiment,
    run_experiment,
)
from toolkit.lab.cli import main
from toolkit.lab.plan.config import plan
from toolkit.lab.report import write_report
from toolkit.lab.results.files import new_run_dir, to_jsonable

RUN_FILES = {"config.toml", "meta.json", "metrics.jsonl", "summary.json", "costs.json",
             "artifacts", "findings.json", "findings.md", ".lock"}  # .lock: held while it runs


def test_run_writes_the_results_layout(tmp_path: Path) -> None:
    finished = []
    run = run_experiment("tiny_counter", {"n_steps": 3}, seed=1, dtype="float64",
                         disable_blocks=["tiny.*"], output_dir=tmp_path,
                         finish=lambda run_dir, experiment: finished.append((run_dir, experiment)))
    assert run.run_dir.parent == tmp_path / "tiny_counter"
    assert run.run_dir.name.split("__")[1] == "seed1"
    assert {p.name for p in run.run_dir.iterdir()} == RUN_FILES  # the runner draws nothing
    # finish gets the run directory and the experiment object the runner was handed
    (finished_dir, experiment), = finished
    assert finished_dir == run.run_dir and experiment.name == "tiny_counter"
    assert run.meta["finish_s"] >= 0
    assert run.meta["executor"]["kind"] == "local" and run.meta["threads"] == 1
    assert not [p for p in run.run_dir.rglob("*.tmp")]
    meta = run.meta
    assert meta["status"] == "complete" and meta["error"] is None
    assert meta["seed"] == 1 and meta["device"] == "cpu" and meta["dtype"] == "float64"
    assert set(meta["versions"]) == {"python", "torch", "numpy", "toolkit"}
    assert meta["duration_s"] >= 0 and meta["started"] <= meta["ended"]
    assert meta["blocks_seen"] == ["tiny.target"]
    assert run.params["n_steps"] == 3 and run.config["seed"] == 1
    steps, values = run.metric("blocked/train/loss")
    assert steps.tolist() == [0, 1, 2] and values.shape == (3,)
    # the blocked target is a constant: w moves by -2 lr w each step (loss changes);
    # unblocked: d/dw (w - 2w)^2 = 2w, the opposite direction
    assert run.summary["blocked"]["loss"] != run.summary["unblocked"]["loss"]
    assert run.summary["n_steps"] == 3
    assert run.costs["blocked"]["seconds"] == 0.001
    curve = run.artifact("curve")
    assert np.allclose(curve["blocked"], run.metric("blocked/train/loss")[1])
    with pytest.raises(KeyError, match="did you mean 'blocked/train/loss'"):
        run.metric("blocked/train/los")


def test_summary_is_byte_identical_for_same_config_and_seed(tmp_path: Path) -> None:
    a = run_experiment("tiny_counter", {"n_steps": 5}, seed=3, output_dir=tmp_path)
    b = run_experiment("tiny_counter", {"n_steps": 5}, seed=3, output_dir=tmp_path)
    c = run_experiment("tiny_counter", {"n_steps": 5}, seed=4, output_dir=tmp_path)
    assert a.run_dir != b.run_dir
    assert (a.run_dir / "summary.json").read_bytes() == (b.run_dir / "summary.json").read_bytes()
    assert (a.run_dir / "metrics.jsonl").read_bytes() == (b.run_dir / "metrics.jsonl").read_bytes()
    assert (a.run_dir / "summary.json").read_bytes() != (c.run_dir / "summary.json").read_bytes()


def test_run_dirs_never_collide(tmp_path: Path) -> None:
    made: list[Path] = []
    lock = threading.Lock()

    def make() -> None:
        for _ in range(25):
            d = new_run_dir(tmp_path, "exp", 0)
            with lock:
                made.append(d)

    threads = [threading.Thread(target=make) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(made) == 100 and len(set(made)) == 100
    assert all(d.is_dir() for d in made)


def test_failed_run_is_marked_and_reraised(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="failing at step 1"):
        run_experiment("tiny_counter", {"n_steps": 3, "fail_at": 1}, output_dir=tmp_path,
                       finish=write_report)
    (run_dir,) = (tmp_path / "tiny_counter").iterdir()
    run = RunResults(run_dir)
    assert run.status == "failed"
    assert run.meta["error"] == "RuntimeError: tiny_counter: failing at step 1 as asked"
    assert "Traceback" in run.meta["traceback"] and "tiny_counter.py" in run.meta["traceback"]
    assert len(run.metrics) == 1  # what was logged before the failure is kept
    assert (run_dir / "report.html").exists()


def test_failed_run_exits_1(tiny_config: Path, tmp_path: Path,
                            capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", str(tiny_config), "--set", "params.fail_at=0", "--out", str(tmp_path),
                 "--quiet", "--no-report"])
    assert code == 1
    assert "failed" in capsys.readouterr().err


def test_sigterm_marks_the_run_interrupted(tmp_path: Path, tiny_config: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    started = tmp_path / "started"

    def kill_when_started() -> None:
        deadline = time.monotonic() + 30
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGTERM)

    killer = threading.Thread(target=kill_when_started)
    killer.start()
    code = main(["run", str(tiny_config), "--set", "params.n_logged=1000", "--set",
                 "params.sleep_s=0.01", "--set", f"params.started_file={str(started)!r}",
                 "--out", str(tmp_path / "out"), "--no-report"])
    killer.join()
    assert code == 143
    (run_dir,) = (tmp_path / "out" / "tiny_counter").iterdir()
    run = RunResults(run_dir)
    assert run.status == "interrupted" and run.meta["interrupted_by"] == "SIGTERM"
    assert "SIGTERM" in run.meta["error"]
    assert 1 <= len(run.metrics) < 1000
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # handlers restored
    lines = [line for line in capsys.readouterr().err.splitlines()
             if line.startswith("toolkit: interrupted")]
    assert lines == ["toolkit: interrupted by SIGTERM (exit status 143); of 1 run:"]


def _ctx(tmp_path: Path, **kw: object) -> RunContext:
    run_dir = tmp_path / "run"
    run_dir.mkdir(exist_ok=True)
    args: dict = {"run_dir": run_dir, "seed": 0, "device": torch.device("cpu"),
                  "dtype": torch.float32, "disable_patterns": ("*",)}
    args.update(kw)
    return RunContext(**args)


def test_compare_replays_randomness_and_disables_blocks(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    w = torch.tensor([1.0, -2.0], requires_grad=True)

    def fn() -> tuple[torch.Tensor, torch.Tensor, float]:
        noise = torch.randn(3, generator=ctx.generator)
        loss = (w * stop_gradient(w, name="t.block")).sum() + torch.rand(1).item()
        return noise, torch.autograd.grad(loss, w)[0], float(np.random.rand())

    out = ctx.compare(fn)
    assert torch.equal(out["blocked"][0], out["unblocked"][0])
    assert out["blocked"][2] == out["unblocked"][2]
    assert torch.equal(out["blocked"][1], w.detach())        # d/dw w·sg(w) = w
    assert torch.equal(out["unblocked"][1], 2 * w.detach())  # d/dw w·w = 2w
    # explicit patterns that match nothing: both variants equal, and a warning is recorded
    with pytest.warns(RuntimeWarning, match="no named block matching"):
        same = ctx.compare(fn, disable=["other.*"])
    assert torch.equal(same["blocked"][1], same["unblocked"][1])
    with pytest.raises(TypeError, match=r"ctx.compare: disable must be a sequence"):
        ctx.compare(fn, disable="t.*")


def test_context_files(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    ctx.log(0, **{"blocked/train/loss": torch.tensor(1.5), "unblocked/train/loss": np.float32(2)})
    with pytest.raises(TypeError, match=r"ctx.log: step must be an int"):
        ctx.log(1.0, x=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"ctx.log: metric 'v' must be a number"):
        ctx.log(1, v=[1, 2])
    ctx.summary(blocked={"a": 1}, note="x")
    ctx.summary(blocked={"b": torch.tensor([1.0, 2.0])})
    with ctx.timer("fit") as timer:
        pass
    assert timer.seconds >= 0
    child = ctx.child("sub", experiment="tiny_counter", params={"n_steps": 2})
    child.log(0, **{"blocked/x": 3})
    child.summary(blocked={"c": 2})
    child.save_artifact("data", {"z": np.arange(3)})
    child.save_artifact("info", {"label": "text", "values": [1, 2]})
    with pytest.raises(ValueError, match="a child named 'sub' exists already"):
        ctx.child("sub")
    with pytest.raises(ValueError, match=r"ctx.save_artifact: name must be"):
        ctx.save_artifact("../evil", {})
    with pytest.raises(TypeError, match="cannot store object as JSON"):
        ctx.summary(bad=object())
    ctx._files.close()
    summary = json.loads((ctx.run_dir / "summary.json").read_text())
    assert summary == {"blocked": {"a": 1, "b": [1.0, 2.0]}, "note": "x",
                       "sub": {"blocked": {"c": 2}}}
    costs = json.loads((ctx.run_dir / "costs.json").read_text())
    assert costs["timers"]["fit"] == pytest.approx(timer.seconds)
    rows = [json.loads(line) for line in (ctx.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert rows == [{"step": 0, "blocked/train/loss": 1.5, "unblocked/train/loss": 2.0},
                    {"step": 0, "sub/blocked/x": 3}]
    assert (ctx.run_dir / "artifacts" / "sub" / "data.npz").exists()
    assert (ctx.run_dir / "artifacts" / "sub" / "info.json").exists()


def test_to_jsonable() -> None:
    assert to_jsonable({"a": torch.tensor(2.5), "b": np.int64(3), "c": (1, 2),
                        "d": torch.float32, "e": torch.ones(2, dtype=torch.bfloat16)}) == {
        "a": 2.5, "b": 3, "c": [1, 2], "d": "torch.float32", "e": [1.0, 1.0]}


def test_registry_reports_broken_modules_without_hiding_others() -> None:
    loaded, broken = load_all()
    assert "tiny_counter" in loaded and "td_learning" in loaded
    # the showcase is an experiment like the others, registered by its entry point
    assert "showcase" in loaded
    assert load_experiment("showcase").module.__name__ == "stop_gradient_experiments.showcase"
    assert "ImportError" in broken["broken_module"]
    assert "fails on import on purpose" in broken["broken_module"]
    assert "run(params, ctx)" in broken["no_run"]


def test_broken_experiment_is_an_input_error(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "b.toml"
    path.write_text('experiment = "broken_module"\n')
    assert main(["run", str(path), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "experiment 'broken_module' cannot be loaded" in err


@pytest.mark.slow  # a fresh interpreter importing torch
def test_the_runner_never_imports_the_report() -> None:
    import subprocess
    import sys

    code = ("import sys\nfrom toolkit.lab import run_experiment\n"
            "import toolkit.lab.execute.local, toolkit.lab.execute.dask\n"
            "assert not any(m.startswith('toolkit.lab.report') for m in sys.modules)\n"
            "assert 'matplotlib' not in sys.modules\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_meta_lists_blocks_that_ran_outside_compare_too(tmp_path: Path) -> None:
    run = run_experiment("tiny_counter", {"extra_block": True}, output_dir=tmp_path)
    assert run.meta["blocks_seen"] == ["tiny.outside", "tiny.target"]


def test_list_reads_the_sources(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    captured = capsys.readouterr()
    assert "td_learning" in captured.out and "tiny test experiment" in captured.out
    (line,) = [li for li in captured.out.splitlines() if "no_run" in li]
    assert "BROKEN: it must define `run(params, ctx)`" in line
    # the fixture that raises on import also lacks Params and run(): seen without importing it
    (line,) = [li for li in captured.out.splitlines() if "broken_module" in li]
    assert "BROKEN: it must define `class Params(ExperimentParams)`" in line
    assert "configs/showcase.toml" in captured.out
    assert "toolkit list --check" in captured.out
    assert "2 experiment modules cannot be loaded: broken_module, no_run" in captured.err


def test_list_check_imports_every_module(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "--check"]) == 1  # as a linter says it: a problem found
    captured = capsys.readouterr()
    n = len([li for li in captured.out.splitlines()[1:] if li.startswith("  ")
             and not li.strip().endswith(".toml")])
    assert captured.out.splitlines()[-1] == f"check: 2 of {n} experiments cannot be loaded"
    (line,) = [li for li in captured.out.splitlines() if "broken_module" in li]
    assert "BROKEN: import failed: ImportError: broken_module: this fixture fails" in line
    assert "experiment modules cannot be loaded" in captured.err
    assert "broken_module" in captured.err and "no_run" in captured.err


def test_version_names_what_it_runs_with(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    with pytest.raises(SystemExit):
        main(["--version"])
    line = capsys.readouterr().out.strip()
    for name in ("torch", "numpy", "scipy", "scikit-learn", "matplotlib"):
        assert f"{name} {version(name)}" in line


@pytest.mark.slow  # a subprocess per command
@pytest.mark.parametrize("argv", [["--help"], ["list"], ["run", "--help"]])
def test_help_and_list_do_not_import_torch(argv: list[str]) -> None:
    import subprocess
    import sys

    code = ("import sys\nfrom toolkit.lab.cli.app import main\ntry:\n    main(sys.argv[1:])\n"
            "except SystemExit:\n    pass\nassert 'torch' not in sys.modules, 'torch imported'\n")
    out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_ctrl_c_at_start_up_is_one_line_and_status_130(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import toolkit.lab.cli.app

    def interrupted(argv: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(toolkit.lab.cli.app, "_main", interrupted)
    assert main(["list"]) == 130
    assert capsys.readouterr().err == "toolkit: interrupted by SIGINT (exit status 130)\n"


@pytest.mark.slow  # end to end: a showcase and its report
def test_showcase_runs_children_into_one_report(tmp_path: Path) -> None:
    specs = plan(Path(__file__).parents[3] / "configs" / "showcase_quick.toml",
                 ["params.experiments=[\"tiny_counter\", \"td_learning\"]"],
                 output_dir=tmp_path)
    run = run_experiment(specs[0].config, finish=write_report)
    assert run.status == "complete"
    assert run.children == ["tiny_counter", "td_learning"]
    child = run.child("tiny_counter")
    assert child.params["n_steps"] == 3  # QUICK
    assert child.summary["n_steps"] == 3
    assert run.child("td_learning").params["chain_steps"] == 40  # override on top of QUICK
    assert run.child("td_learning").params["log_every"] == 10  # QUICK
    assert run.child("td_learning").config["dtype"] == "float64"  # its module's DTYPE
    assert "blocked/train/loss" in child.metric_keys()
    # the child computes what a run of its own computes with the same params and seed
    alone = run_experiment("tiny_counter", {"n_steps": 3}, seed=0, output_dir=tmp_path)
    assert alone.summary == child.summary
    figures = {p.name for p in (run.run_dir / "figures").iterdir()}
    assert {"tiny_counter__tiny_curve.png", "td_learning__a_split_values.png",
            "td_learning__baird_weight_norm.png", "time.png"} <= figures
    html = (run.run_dir / "report.html").read_text()
    assert "<h2>tiny_counter</h2>" in html and "<h2>td_learning</h2>" in html


def test_showcase_fails_clearly_when_a_child_fails(tmp_path: Path) -> None:
    specs = plan(Path(__file__).parents[3] / "configs" / "showcase_quick.toml",
                 ["params.experiments=[\"tiny_counter\"]",
                  "params.overrides.tiny_counter.fail_at=0"], output_dir=tmp_path)
    with pytest.raises(RuntimeError, match="showcase: experiment 'tiny_counter' failed: "
                                           "RuntimeError: tiny_counter: failing at step 0"):
        run_experiment(specs[0].config)


def test_showcase_rejects_unknown_or_broken_selection(tmp_path: Path) -> None:
    from toolkit.lab import ConfigError

    path = Path(__file__).parents[3] / "configs" / "showcase_quick.toml"
    with pytest.raises(ConfigError, match=r"params.experiments: unknown experiment "
                                          r"'tiny_countr'; did you mean 'tiny_counter'"):
        plan(path, ["params.experiments=[\"tiny_countr\"]"])
    with pytest.raises(ConfigError, match="params: cannot run broken_module: import failed"):
        plan(path, ["params.experiments=[\"broken_module\"]"], output_dir=tmp_path)


def test_showcase_overrides_are_checked_when_the_config_loads(tmp_path: Path,
                                                              capsys) -> None:
    path = Path(__file__).parents[3] / "configs" / "showcase_quick.toml"
    argv = ["run", str(path), "--dry-run", "--set", "params.experiments=[\"tiny_counter\"]",
            "--set", "params.overrides.tiny_counter.n_stepz=5"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "overrides.tiny_counter.n_stepz: unknown key; did you mean 'n_steps'?" in err[0]


def test_a_run_sets_its_thread_count_and_restores_it(tmp_path: Path) -> None:
    before = torch.get_num_threads()
    run = run_experiment("tiny_counter", {"n_steps": 2}, threads=3, output_dir=tmp_path)
    assert run.meta["threads"] == 3 and run.config["threads"] == 3
    assert torch.get_num_threads() == before


def test_compare_hands_each_variant_over_as_soon_as_it_finishes(tmp_path: Path) -> None:
    ctx = RunContext(run_dir=tmp_path, seed=0, device=torch.device("cpu"), dtype=torch.float32,
                     disable_patterns=("demo.*",))
    events = []

    def fn() -> str:
        events.append("run")
        stop_gradient(torch.ones(1), name="demo.x")
        return f"result {len(events)}"

    out = ctx.compare(fn, on_result=lambda variant, result: events.append((variant, result)))
    assert events == ["run", ("blocked", "result 1"), "run", ("unblocked", "result 3")]
    assert out == {"blocked": "result 1", "unblocked": "result 3"}


def test_every_install_hint_is_the_docs_own_line() -> None:
    """An extra's hint (the CLI's errors and help, the integrations') says what the docs say."""
    import re

    from runner_testutil import REPO

    from toolkit._utils.lazy import install_line

    docs = " ".join(" ".join(p.read_text(encoding="utf-8").split())
                    for p in [REPO / "README.md", *(REPO / "docs").rglob("*.md")])
    code = "\n".join(p.read_text(encoding="utf-8") for p in (REPO / "toolkit").rglob("*.py"))
    for extra in ("tensorboard", "distributed", "lightning", "transformers"):
        assert f"`{install_line(extra)}`" in docs
        assert not re.search(rf"pip install [^\n]*\[{extra}\]", code.replace(
            install_line(extra), "").replace(install_line(extra).replace('"', '\\"'), ""))
