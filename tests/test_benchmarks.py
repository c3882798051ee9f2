"""Smoke runs of the benchmark scripts (``--quick``): they must keep running and print ratios.

The timings themselves are not asserted (speed is judged from the scripts' full runs, never
inside unit tests); these runs only catch a script broken by a change in the library.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

CASES = {
    "bench_softmax.py": ["--quick"],
    "bench_em.py": ["--quick"],
    "bench_rbm.py": ["--quick", "--tile", "1"],
    "bench_adversarial.py": ["--quick"],
    "bench_sweep.py": ["--quick"],
    "bench_lens.py": ["--quick"],
    "bench_audit.py": ["--quick"],
}


@pytest.mark.parametrize("script", sorted(CASES))
def test_benchmark_quick_run(script: str) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TQDM_DISABLE": "1"}
    proc = subprocess.run([sys.executable, str(BENCHMARKS / script), *CASES[script]],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, f"{script} failed:\n{proc.stdout}\n{proc.stderr}"
    assert "ratio" in proc.stdout, f"{script} printed no ratio:\n{proc.stdout}"
