"""A showcase seed interrupted (Ctrl-C) after some of its experiments finished resumes with
``--resume`` running only the unfinished ones, and its ``summary.json`` is byte for byte an
uninterrupted run's (issue 65)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from runner_testutil import REPO

pytestmark = pytest.mark.slow

#: two quick experiments, then one that takes seconds, where the interrupt lands, and a last one
PARTS = ["softmax_gradients", "gradient_lens", "em_gmm", "vq_vae"]
#: the last one at a tiny size: it runs in the whole run and in the resumed one
TINY_LAST = ["params.overrides.vq_vae.epochs=2", "params.overrides.vq_vae.hidden=32"]


def _command(out: Path, *more: str) -> list[str]:
    return [sys.executable, "-m", "toolkit", "run", str(REPO / "configs" / "showcase.toml"),
            "--seeds", "0", "--set", f"params.experiments={json.dumps(PARTS)}",
            *(a for s in TINY_LAST for a in ("--set", s)), "--no-report", "--out", str(out),
            "--verbose", *more]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TOOLKIT_EXPERIMENTS_PATH"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    return env


def _finished(run_dir: Path) -> list[str]:
    try:
        meta = json.loads((run_dir / "meta.json").read_text())
    except (OSError, ValueError):  # not written yet, or being replaced
        return []
    return [k for k, v in meta.get("children", {}).items() if v.get("done")]


def test_an_interrupted_showcase_resumes_with_only_its_unfinished_experiments(
        tmp_path: Path) -> None:
    t0 = time.perf_counter()
    whole = subprocess.run(_command(tmp_path / "whole"), env=_env(), capture_output=True,
                           text=True, timeout=600)
    assert whole.returncode == 0, whole.stderr
    t_whole = time.perf_counter() - t0
    (expected,) = (tmp_path / "whole" / "showcase").glob("*/summary.json")

    out = tmp_path / "resumed"
    proc = subprocess.Popen(_command(out), env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        runs = list((out / "showcase").glob("*seed0*"))
        if runs and _finished(runs[0]) == PARTS[:2]:
            os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in the middle, as a terminal sends it
            break
        time.sleep(0.02)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    (stopped,) = (out / "showcase").glob("*seed0*")
    assert json.loads((stopped / "meta.json").read_text())["status"] == "interrupted"
    assert _finished(stopped) == PARTS[:2]
    assert f"kept {', '.join(PARTS[:2])}" in " ".join(err.split())  # what the interrupt kept
    assert "--resume" in err

    t1 = time.perf_counter()
    again = subprocess.run(_command(out, "--resume"), env=_env(), capture_output=True,
                           text=True, timeout=600)
    t_resumed = time.perf_counter() - t1
    assert again.returncode == 0, again.stderr
    ran = re.findall(r"^ +([a-z_]+) +[0-9.]+ s$", again.stderr, flags=re.M)
    assert ran == PARTS[2:], again.stderr  # the finished ones were not run again
    (resumed,) = [d for d in (out / "showcase").glob("*seed0*") if d != stopped]
    assert (resumed / "summary.json").read_bytes() == expected.read_bytes()
    assert _finished(resumed) == PARTS
    print(f"uninterrupted {t_whole:.1f} s; resumed {t_resumed:.1f} s")
