"""Config loading, overrides, sweeps/seeds, and every bad-input case (exit 2, one line)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from toolkit.lab import ConfigError, RunConfig, plan_one
from toolkit.lab.cli import main
from toolkit.lab.plan.config import Plan, parse_override, parse_seeds, plan


def load_config(path: Path, overrides: list[str] | tuple[str, ...] = (),
                **options: object) -> list[RunConfig]:
    """The validated config of each run of the file (what each run's config.toml holds)."""
    return [spec.config for spec in plan(path, overrides, **options)]


def test_load_resolves_defaults_and_round_trips(tiny_config: Path, tmp_path: Path) -> None:
    (spec,) = plan(tiny_config)
    config = spec.config
    assert config.experiment == "tiny_counter"
    assert config.params == {"n_steps": 4, "n_logged": 0, "lr": 0.1, "sleep_s": 0.0, "fail_at": -1,
                             "findings_fail": False, "extra_block": False,
                             "started_file": ""}
    assert config.disable_blocks == ("tiny.*",)
    assert spec.dtype is torch.float64
    again = tmp_path / "again.toml"
    again.write_text(config.to_toml(str(tiny_config)))
    assert load_config(again) == [config]
    assert RunConfig.from_toml(again.read_text()) == config


def test_toml_writer_round_trips_nested_values() -> None:
    # config.toml is written by tomli-w from the model and read back into it: nested tables,
    # escapes, inf and empty tables survive; None (TOML has no null) is left out of the file
    # and of the identity alike, so the run read back is the run planned
    params = {"a": 1, "b": [1.5, float("inf")], "s": 'quote " and \\ and \n', "t": True,
              "x": [1, 2], "sub": {"deep": "v", "empty": {}}, "none": None}
    config = RunConfig(experiment="tiny_counter", params=params)
    back = RunConfig.from_toml(config.to_toml())
    assert back.params == {k: v for k, v in params.items() if k != "none"}
    assert back.identity() == config.identity()
    assert back == config.model_copy(update={"params": back.params})
    with pytest.raises(ValueError, match=r"params.l: TOML cannot hold null inside a list"):
        RunConfig(experiment="tiny_counter", params={"l": [1, None]}).to_toml()


def test_an_infinite_param_in_a_free_table_is_written_as_inf() -> None:
    # the showcase's overrides are untyped tables: inf stays inf in config.toml (not null)
    (spec,) = plan(Path(__file__).parents[3] / "configs" / "showcase_quick.toml",
                   ['params.experiments=["tiny_counter"]', "params.overrides.tiny_counter.lr=inf"])
    assert spec.config.params["overrides"]["tiny_counter"]["lr"] == float("inf")
    back = RunConfig.from_toml(spec.config.to_toml())
    assert back == spec.config and back.identity() == spec.config.identity()


@pytest.mark.parametrize(("text", "key", "value"), [
    ("params.n_steps=10", "params.n_steps", 10),
    ("params.lr=1e-3", "params.lr", 1e-3),
    ("flag=true", "flag", True),
    ("params.sizes=[1, 2]", "params.sizes", [1, 2]),
    ('name="a b"', "name", "a b"),
    ("device=cpu", "device", "cpu"),          # bare word → string
    ("disable_blocks=[\"em.*\"]", "disable_blocks", ["em.*"]),
    ("pattern=em.*", "pattern", "em.*"),
])
def test_parse_override(text: str, key: str, value: object) -> None:
    assert parse_override(text) == (key, value)


@pytest.mark.parametrize(("text", "match"), [
    ("params.n_steps", "expected KEY=VALUE"),
    ("params.n_steps=", "missing value"),
    ("params.n_steps=[1,", "not a TOML value"),
    ("=3", "not a valid dotted key"),
    ("params..x=3", "not a valid dotted key"),
    ("params.x=a b", "not a TOML value"),
])
def test_parse_override_rejects(text: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_override(text)


def test_overrides_are_validated(tiny_config: Path) -> None:
    (config,) = load_config(tiny_config, ["params.n_steps=7", "dtype=float32"])
    assert config.params["n_steps"] == 7 and config.dtype == "float32"
    with pytest.raises(ConfigError, match=r"^--set params.lr=-1: params.lr: .*> 0"):
        load_config(tiny_config, ["params.lr=-1"])


def test_sweep_grid_times_seeds(tiny_config: Path) -> None:
    text = tiny_config.read_text() + "\n[sweep]\nparams.n_steps = [1, 2, 3]\ndtype = " \
                                      "[\"float32\", \"float64\"]\n"
    tiny_config.write_text(text.replace("seed = 0", "seeds = [5, 6]"))
    specs = plan(tiny_config)
    runs = [spec.config for spec in specs]
    assert len(runs) == 3 * 2 * 2 == len(Plan.read(tiny_config))
    assert [(r.params["n_steps"], r.dtype, r.seed) for r in runs[:4]] == [
        (1, "float32", 5), (1, "float32", 6), (1, "float64", 5), (1, "float64", 6)]
    assert specs[0].sweep_point == {"params.n_steps": 1, "dtype": "float32"}
    # --seeds replaces the file's seeds; --set seed replaces seeds
    assert [r.seed for r in load_config(tiny_config, seeds=[0, 1, 2])][:3] == [0, 1, 2]
    assert {r.seed for r in load_config(tiny_config, ["seed=9"])} == {9}


def test_sweep_errors(tiny_config: Path) -> None:
    with pytest.raises(ConfigError, match=r"sweep.params.n_step: unknown key; did you mean "
                                          r"'n_steps'"):
        load_config(tiny_config, ["sweep.params.n_step=[1, 2]"])
    with pytest.raises(ConfigError, match=r"sweep.params.n_steps: must be a non-empty list"):
        load_config(tiny_config, ["sweep.params.n_steps=3"])
    with pytest.raises(ConfigError, match=r"sweep.seed: cannot be swept"):
        load_config(tiny_config, ["sweep.seed=[1, 2]"])
    with pytest.raises(ConfigError, match=r"\[sweep\]: params.n_steps: .*>= 1"):
        load_config(tiny_config, ["sweep.params.n_steps=[1, 0]"])


def test_seed_lists() -> None:
    assert parse_seeds("0,1,2") == [0, 1, 2]
    assert parse_seeds("3-5") == [3, 4, 5]
    with pytest.raises(ConfigError, match="--seeds: 'a,b' is not a list of seeds"):
        parse_seeds("a,b")
    with pytest.raises(ConfigError, match="not a list of seeds"):
        parse_seeds("-1")


def test_seed_and_seeds_together(tiny_config: Path) -> None:
    tiny_config.write_text(tiny_config.read_text().replace("seed = 0", "seed = 0\nseeds = [1]"))
    with pytest.raises(ConfigError, match="both `seed` and `seeds` are set"):
        load_config(tiny_config)


def test_plan_one_validates_python_input() -> None:
    config = plan_one("tiny_counter", {"n_steps": 2}, seed=3).config
    assert config.params["n_steps"] == 2 and config.seed == 3
    with pytest.raises(ConfigError, match=r"params.n_stepz: unknown key; did you mean 'n_steps'"):
        plan_one("tiny_counter", {"n_stepz": 2})
    with pytest.raises(ConfigError, match="dtype: Input should be 'float16', 'bfloat16', "
                                          "'float32' or 'float64', got 'float8'"):
        plan_one("tiny_counter", dtype="float8")


BAD_INPUTS = {
    # name: (file text or None for a missing file, extra args, expected pieces of the line)
    "missing file": (None, [], ["missing.toml", "no such file"]),
    "invalid toml": ('experiment = "tiny_counter"\nseed = = 3\n', [],
                     ["invalid TOML", "line 2", "column"]),
    "unknown experiment": ('experiment = "tiny_countr"\n', [],
                           ["experiment: unknown experiment 'tiny_countr'",
                            "did you mean 'tiny_counter'"]),
    "unknown key": ('experiment = "tiny_counter"\n[params]\nn_stepz = 3\n', [],
                    ["params.n_stepz: unknown key", "did you mean 'n_steps'"]),
    "unknown common key": ('experiment = "tiny_counter"\nsed = 3\n', [],
                           ["sed: unknown key", "did you mean 'seed'"]),
    "wrong type": ('experiment = "tiny_counter"\n[params]\nn_steps = "many"\n', [],
                   ["params.n_steps", "valid integer", "got 'many'", "use an integer"]),
    "out of range": ('experiment = "tiny_counter"\n[params]\nlr = 0.0\n', [],
                     ["params.lr", "greater than 0", "use a value > 0"]),
    "bad --set": ('experiment = "tiny_counter"\n', ["--set", "params.n_steps"],
                  ["--set 'params.n_steps'", "expected KEY=VALUE"]),
    "bad --set value": ('experiment = "tiny_counter"\n', ["--set", "params.lr=[0.1,"],
                        ["--set 'params.lr=[0.1,'", "params.lr", "not a TOML value"]),
    "bad dtype": ('experiment = "tiny_counter"\ndtype = "float8"\n', [],
                  ["dtype", "'float8'", "use one of"]),
    "unwritable output": ('experiment = "tiny_counter"\noutput_dir = "OUT/file.txt/sub"\n', [],
                          ["output_dir", "cannot write run folders", "--out DIR"]),
    "bad workers": ('experiment = "tiny_counter"\n', ["--workers", "0"], ["--workers"]),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_exits_2_with_one_line(case: str, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    text, extra, pieces = BAD_INPUTS[case]
    (tmp_path / "file.txt").write_text("a file, not a folder")
    path = tmp_path / ("missing.toml" if text is None else "config.toml")
    if text is not None:
        path.write_text(text.replace("OUT", str(tmp_path)))
    out = tmp_path / "results"
    args = ["run", str(path), *extra]
    if case != "unwritable output":
        args += ["--out", str(out)]
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("toolkit: error: ")
    if case not in ("bad --set", "bad --set value", "bad workers"):
        assert str(path) in lines[0]
    for piece in pieces:
        assert piece in lines[0], (piece, lines[0])
    assert "Traceback" not in err
    assert not out.exists() or not any(out.rglob("meta.json"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_cuda_is_an_input_error(tiny_config: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", str(tiny_config), "--set", "device=cuda", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "device: device 'cuda' asks for CUDA, but torch reports no CUDA device" in err
    assert 'use device = "cpu" or "auto"' in err
    assert not (tmp_path / "r").exists()


def test_debug_shows_the_exception(tiny_config: Path) -> None:
    with pytest.raises(ConfigError, match="unknown key"):
        main(["run", str(tiny_config), "--set", "params.nope=1", "--debug"])


def test_dry_run_lists_runs(tiny_config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", str(tiny_config), "--seeds", "0-2", "--dry-run",
                 "--set", "sweep.params.lr=[0.1, 0.2]"]) == 0
    out = capsys.readouterr().out
    assert "6 runs" in out and "tiny_counter seed=2 params.lr=0.2" in out


@pytest.mark.parametrize("command", ["run", "sweep", "report", "compare", "list"])
def test_help_has_examples(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "usage: toolkit" in out
    if command != "list":
        assert "examples:" in out


def test_usage_error_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["run"])
    assert exc.value.code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_resume_skips_complete_runs(tiny_config: Path, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results"
    base = ["run", str(tiny_config), "--out", str(out), "--no-report", "--quiet"]
    assert main([*base, "--seeds", "0,1"]) == 0
    assert main([*base, "--seeds", "0,1,2", "--resume"]) == 0
    runs = [d for d in (out / "tiny_counter").iterdir() if (d / "meta.json").is_file()]
    seeds = sorted(int(d.name.split("__seed")[1].split("__")[0]) for d in runs)
    assert seeds == [0, 1, 2]
    # each invocation made its seed group, the resumed one over every seed it covers
    groups = sorted(d.name.split("__")[1] for d in (out / "tiny_counter").iterdir()
                    if (d / "group.json").is_file())
    assert groups == ["seeds0-1", "seeds0-2"]
    assert main([*base, "--seeds", "0,1,2", "--resume"]) == 0
    assert "nothing to do" in capsys.readouterr().out
    # a different config is not "complete"
    assert main([*base, "--seeds", "0", "--resume", "--set", "params.lr=0.3"]) == 0
    assert len([d for d in (out / "tiny_counter").iterdir() if (d / "meta.json").is_file()]) == 4


def test_disable_blocks_accepts_a_single_pattern(tiny_config: Path) -> None:
    (config,) = load_config(tiny_config, ["disable_blocks=tiny.*"])
    assert config.disable_blocks == ("tiny.*",)


def test_a_parameter_without_params_prefix_gets_the_suggestion(tiny_config: Path) -> None:
    with pytest.raises(ConfigError, match=r"n_steps: unknown key; did you mean params\.n_steps\?"):
        load_config(tiny_config, ["n_steps=50"])
