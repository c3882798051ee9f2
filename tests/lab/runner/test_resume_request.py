"""``--resume`` with nothing to do answers from what each run recorded of its request: it
imports neither torch nor the experiment and starts no pool; a change to the request or to the
experiment's code sends it back to the full check, with the experiment loaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from runner_testutil import FIXTURES, REPO, cli

from toolkit.lab import RunResults
from toolkit.lab.plan.config import Plan
from toolkit.lab.results.view import find_runs

pytestmark = pytest.mark.slow  # two commands in subprocesses, one with a pool

# run main() in a fresh interpreter, then say what it had imported and started
PROBE = """
import json, multiprocessing, sys
from toolkit.lab.cli.app import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "torch": "torch" in sys.modules,
                  "experiment": any(m.endswith("tiny_counter") for m in sys.modules),
                  "pool": "toolkit.lab.execute.local" in sys.modules,
                  "children": len(multiprocessing.active_children())}))
"""


def _probe(*args: str, experiments: Path) -> tuple[dict[str, object], str]:
    env = dict(os.environ, TOOLKIT_EXPERIMENTS_PATH=str(experiments),
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    *said, last = proc.stdout.strip().splitlines()
    return json.loads(last), "\n".join(said)


def test_nothing_to_do_is_known_without_the_experiment(tmp_path: Path) -> None:
    config, out = FIXTURES / "tiny.toml", tmp_path / "out"
    made = cli("run", str(config), "--seeds", "0,1", "--workers", "2", "--no-report",
               "--out", str(out))
    assert made.returncode == 0, made.stderr
    runs = [RunResults(d) for d in find_runs(out / "tiny_counter")]
    assert len(runs) == 2 and all(r.meta["request"] for r in runs)
    seen, said = _probe("run", str(config), "--seeds", "0,1", "--workers", "2", "--out",
                        str(out), "--resume", experiments=FIXTURES / "experiments")
    assert seen == {"code": 0, "torch": False, "experiment": False, "pool": False,
                    "children": 0}
    assert said.splitlines()[-1] == "nothing to do: every run is complete or running"
    assert sorted(said.splitlines()[:-1]) == sorted(f"skipped (complete): {r.run_dir}"
                                                    for r in runs)


def test_a_change_of_code_or_request_is_decided_with_the_experiment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    experiments, out = tmp_path / "experiments", tmp_path / "out"
    experiments.mkdir()
    monkeypatch.setenv("TOOLKIT_EXPERIMENTS_PATH", str(experiments))
    module = experiments / "tiny_counter.py"
    module.write_text((FIXTURES / "experiments" / "tiny_counter.py").read_text())
    config = tmp_path / "tiny.toml"
    config.write_text((FIXTURES / "tiny.toml").read_text())
    env = dict(os.environ, TOOLKIT_EXPERIMENTS_PATH=str(experiments))
    made = subprocess.run([sys.executable, "-m", "toolkit", "run", str(config), "--no-report",
                           "--out", str(out)], env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    before = Plan.read(config).requests()
    module.write_text(module.read_text() + "\n# an edit: the defaults may have changed\n")
    assert Plan.read(config).requests() != before  # the code is part of the request
    # the experiment decides again: same params, so the run is still the one asked for
    seen, said = _probe("run", str(config), "--out", str(out), "--resume", "--no-report",
                        experiments=experiments)
    assert seen["code"] == 0 and seen["experiment"] is True
    assert said.splitlines()[-1] == "nothing to do: every run is complete or running"
    # another request (a param) is another run
    assert Plan.read(config, ["params.n_steps=5"]).requests() != Plan.read(config).requests()
    seen, _ = _probe("run", str(config), "--out", str(out), "--resume", "--no-report",
                     "--set", "params.n_steps=5", experiments=experiments)
    assert seen["code"] == 0 and len(list(find_runs(out / "tiny_counter"))) == 2
