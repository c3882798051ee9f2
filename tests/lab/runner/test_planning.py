"""Planning: each run's parameters validated once, its device resolved once, its work counted
before it is made; what a config file may not do (lower security, seeds past 64 bits)."""

from __future__ import annotations

import pickle
import textwrap
import time
from pathlib import Path

import pytest

from toolkit.lab import ConfigError, RunResults, plan_one, run_experiment
from toolkit.lab.cli import main
from toolkit.lab.plan import config as planning_module
from toolkit.lab.plan.config import parse_seeds, plan
from toolkit.lab.results.schema import MAX_SEED

# An experiment whose Params write a line to $COUNT_FILE each time they are validated, in
# whichever process validates them.
COUNTED = textwrap.dedent('''
    """Counts the validations of its Params."""
    import os
    from pydantic import Field, model_validator
    from toolkit import stop_gradient
    from toolkit.lab import ExperimentParams

    BLOCKS = ("counted.cut",)

    class Params(ExperimentParams):
        n: int = Field(2, ge=1)
        tags: list[str] = Field(default_factory=list)
        nested: dict[str, list[int]] = Field(default_factory=dict)

        @model_validator(mode="before")
        @classmethod
        def _count(cls, data):
            with open(os.environ["COUNT_FILE"], "a") as fh:
                fh.write(f"{os.getpid()}\\n")
            return data

    def run(params, ctx):
        import torch
        x = torch.ones(params.n, dtype=torch.float64, requires_grad=True)
        def step():
            return (stop_gradient(x, name="counted.cut") * x).sum().item()
        blocked, unblocked = ctx.compare(step)
        ctx.summary(blocked={"value": blocked}, unblocked={"value": unblocked},
                    tags=list(params.tags), nested=dict(params.nested))
''')


@pytest.fixture
def counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The counting experiment on the search path; returns the file its validations go to."""
    folder = tmp_path / "exps"
    folder.mkdir()
    (folder / "counted.py").write_text(COUNTED)
    count = tmp_path / "count.txt"
    count.write_text("")
    monkeypatch.setenv("TOOLKIT_EXPERIMENTS_PATH", str(folder))
    monkeypatch.setenv("COUNT_FILE", str(count))
    return count


def _config(tmp_path: Path, body: str = "") -> Path:
    path = tmp_path / "counted.toml"
    path.write_text('experiment = "counted"\ndevice = "cpu"\ndtype = "float64"\n'
                    f'output_dir = "{(tmp_path / "out").as_posix()}"\n{body}')
    return path


def _validations(count: Path) -> int:
    return len(count.read_text().split())


@pytest.mark.parametrize("workers", [1, pytest.param(2, marks=pytest.mark.slow)])  # 2: a pool
def test_a_run_validates_its_params_once(counted: Path, tmp_path: Path, workers: int) -> None:
    # one grid point, two seeds: one validation for both, in this process or in a pool
    path = _config(tmp_path, "seeds = [0, 1]\n[params]\nn = 3\n")
    assert main(["run", str(path), "--quiet", "--no-report", "--workers", str(workers)]) == 0
    assert _validations(counted) == 1
    runs = sorted((tmp_path / "out" / "counted").glob("*__seed[0-9]*"))
    assert [RunResults(r).params["n"] for r in runs] == [3, 3]


def test_a_sweep_validates_once_per_point(counted: Path, tmp_path: Path) -> None:
    path = _config(tmp_path, "seeds = [0, 1]\n[sweep]\nparams.n = [1, 2, 3]\n")
    specs = plan(path)
    assert len(specs) == 6 and _validations(counted) == 3
    assert [s.params.n for s in specs] == [1, 1, 2, 2, 3, 3]


def test_a_spec_crosses_processes_without_a_second_validation(counted: Path,
                                                              tmp_path: Path) -> None:
    (spec,) = plan(_config(tmp_path, '[params]\ntags = ["a"]\nnested = {k = [1, 2]}\n'))
    assert _validations(counted) == 1
    back = pickle.loads(pickle.dumps(spec))
    assert _validations(counted) == 1
    assert back.params == spec.params and back.config == spec.config
    assert back.params.nested == {"k": [1, 2]} and back.device == spec.device


def test_the_device_is_resolved_once_per_plan(counted: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = planning_module.resolve_device

    def counting(device: str, **kw: object) -> object:
        calls.append(device)
        return real(device, **kw)

    monkeypatch.setattr(planning_module, "resolve_device", counting)
    specs = plan(_config(tmp_path, "seeds = [0, 1, 2]\n[sweep]\nparams.n = [1, 2]\n"))
    assert len(specs) == 6 and calls == ["cpu"]


def test_params_given_in_python_go_on_top_of_the_file(counted: Path, tmp_path: Path) -> None:
    # no TOML text in between: nested values and strings with quotes arrive as they are
    path = _config(tmp_path, "[params]\nn = 3\n")
    run = run_experiment(path, {"tags": ['say "hi"', "a=b"], "nested": {"x": [1]}})
    assert run.params == {"n": 3, "tags": ['say "hi"', "a=b"], "nested": {"x": [1]}}
    assert _validations(counted) == 1


def test_a_params_object_is_taken_as_it_is(counted: Path, tmp_path: Path) -> None:
    spec = plan_one("counted", {"n": 4}, device="cpu", output_dir=tmp_path)
    assert _validations(counted) == 1
    again = plan_one(spec.experiment, spec.params, device="cpu", output_dir=tmp_path)
    assert _validations(counted) == 1 and again.params is spec.params


def test_a_wrong_param_from_python_names_it(counted: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        run_experiment(_config(tmp_path), {"n": 0})
    assert "params.n" in err.value.line() and "given in Python" in err.value.line()


# ----------------------------------------------------------------------------- counting work


def test_a_runaway_seed_range_is_refused_by_its_count(counted: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    t0 = time.perf_counter()
    code = main(["run", str(_config(tmp_path)), "--seeds", "0-100000000", "--dry-run"])
    elapsed = time.perf_counter() - t0
    err = capsys.readouterr().err
    assert code == 2 and "100,000,001 runs" in err and "--max-runs" in err
    assert elapsed < 30  # a generous bound: counted, not listed (listing takes minutes)
    assert len(err.strip().splitlines()) == 1


def test_a_runaway_grid_is_refused_by_its_count(counted: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    grid = ", ".join(str(i) for i in range(1, 1001))
    path = _config(tmp_path, f"[sweep]\nparams.n = [{grid}]\nparams.tags = "
                             f"[{', '.join(repr(str(i)) for i in range(1000))}]\n")
    assert main(["sweep", str(path), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "1,000,000 runs (1,000,000 sweep points x 1 seeds)" in err
    assert _validations(counted) == 0  # refused before a single point was made


def test_the_limit_can_be_raised(counted: Path, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = _config(tmp_path)
    assert main(["run", str(path), "--seeds", "0-11", "--dry-run", "--max-runs", "10"]) == 2
    assert "above the limit of 10" in capsys.readouterr().err
    assert main(["run", str(path), "--seeds", "0-11", "--dry-run", "--max-runs", "12"]) == 0
    assert "12 runs" in capsys.readouterr().out
    assert main(["run", str(path), "--dry-run", "--max-runs", "0"]) == 2
    assert "--max-runs" in capsys.readouterr().err


# ----------------------------------------------------------------------------- the door


@pytest.mark.parametrize("seeds", [f"seed = {MAX_SEED + 1}", f"seeds = [0, {2**64}]"])
def test_a_seed_past_64_bits_is_refused_in_the_file(counted: Path, tmp_path: Path,
                                                    seeds: str) -> None:
    with pytest.raises(ConfigError) as err:
        plan(_config(tmp_path, seeds + "\n"))
    assert "seed" in err.value.line() and str(MAX_SEED) in err.value.line()


def test_a_seed_past_64_bits_is_refused_on_the_command_line() -> None:
    with pytest.raises(ConfigError) as err:
        parse_seeds(f"0,{MAX_SEED + 1}")
    assert "2^63 - 1" in err.value.line()
    assert list(parse_seeds(f"{MAX_SEED - 1}-{MAX_SEED}")) == [MAX_SEED - 1, MAX_SEED]


def test_a_config_file_cannot_lower_security(counted: Path, tmp_path: Path) -> None:
    # plain tcp:// is refused (TLS only, everywhere), and there is no key that turns it off
    path = _config(tmp_path, '[executor]\nkind = "dask"\naddress = "tcp://10.0.0.1:8786"\n')
    with pytest.raises(ConfigError) as err:
        plan(path)
    assert "executor.address" in err.value.line() and "tls://" in err.value.line()
    path = _config(tmp_path, '[executor]\nkind = "dask"\naddress = "tls://10.0.0.1:8786"\n'
                             "insecure = true\n")
    with pytest.raises(ConfigError) as err:
        plan(path)
    assert "executor.insecure: unknown key" in err.value.line()


def test_a_nul_byte_in_a_path_is_refused_in_one_line(counted: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    path = tmp_path / "nul.toml"
    path.write_text('experiment = "counted"\noutput_dir = "res\\u0000x"\n')
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert "NUL byte" in err and "unexpected" not in err and len(err.splitlines()) == 1


def test_a_fifo_as_config_is_refused_not_waited_on(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    import os

    fifo = tmp_path / "config.toml"
    os.mkfifo(fifo)
    assert main(["run", str(fifo), "--dry-run"]) == 2  # returns: nothing opened the FIFO
    assert "is a named pipe (FIFO), not a file" in capsys.readouterr().err


def test_paths_are_printed_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "no/such\nfile\u202eevil.toml"]) == 2
    err = capsys.readouterr().err
    assert "no/such\\nfile\\u202eevil.toml" in err and "\u202e" not in err
    assert len(err.splitlines()) == 1


@pytest.mark.slow  # a pool of processes
def test_the_showcase_validates_each_childs_params_once_even_in_a_pool(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # registered children: their validated params travel with the spec to a worker process
    spec = plan(Path(__file__).parents[3] / "configs" / "showcase_quick.toml",
                output_dir=tmp_path)[0]
    children = spec.params.children()
    back = pickle.loads(pickle.dumps(spec))

    def again(*args: object, **kwargs: object) -> None:
        raise AssertionError("the children's params were validated a second time")

    monkeypatch.setattr(spec.experiment.module, "child_params", again)
    assert back.params.children() == children
