"""Smoke runs of the benchmark scripts (``--quick``): they must keep running and print ratios.

The timings themselves are not asserted (speed is judged from the scripts' full runs, never
inside unit tests); these runs only catch a script broken by a change in the library.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

CASES = {
    "bench_softmax.py": ["--quick"],
    "bench_em.py": ["--quick"],
    "bench_rbm.py": ["--quick", "--tile", "1"],
    "bench_adversarial.py": ["--quick"],
    "bench_sweep.py": ["--quick"],
    "bench_lens.py": ["--quick"],
    "bench_audit.py": ["--quick"],
    "bench_audit_scaling.py": ["--sizes", "100", "300", "--rounds", "1"],
}


def _load(script: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_bench_{Path(script).stem}",
                                                  BENCHMARKS / script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Each quick run still takes seconds (data sets, fits, Dask clusters): the scripts are
# smoke-tested with the slow tests, which .ci/run runs as a step of its own
@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(CASES))
def test_benchmark_quick_run(script: str, capsys: pytest.CaptureFixture[str],
                             monkeypatch: pytest.MonkeyPatch) -> None:
    # In this process: the imports (torch, the toolkit, torchattacks) are already paid for, which
    # is most of a quick run's time; the threads a script sets are put back afterwards.
    monkeypatch.setenv("TQDM_DISABLE", "1")
    threads = torch.get_num_threads()
    try:
        status = _load(script).main(CASES[script])
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr().out
    assert status in (0, None) or isinstance(status, dict), f"{script} returned {status!r}"
    assert "ratio" in out, f"{script} printed no ratio:\n{out}"


@pytest.mark.slow  # a subprocess
def test_a_benchmark_runs_as_a_script() -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TQDM_DISABLE": "1"}
    proc = subprocess.run([sys.executable, str(BENCHMARKS / "bench_softmax.py"), "--quick"],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, f"bench_softmax.py failed:\n{proc.stdout}\n{proc.stderr}"
    assert "ratio" in proc.stdout
