"""scripts/tolerance_margins.py: the ratios it records are the ones the assertions allowed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "tolerance_margins.py"

# each assertion's error is a known fraction of its tolerance (the comment on its line)
MEASURED = '''
import math

import numpy as np
import pytest
import torch


def test_known_ratios():
    torch.testing.assert_close(torch.tensor(1.0), torch.tensor(1 + 2**-18), rtol=0, atol=2**-17)  # 0.5
    one, near = torch.tensor(1.0, dtype=torch.float64), torch.tensor(1.0 + 5e-8, dtype=torch.float64)
    torch.testing.assert_close(one, near)  # 0.25: the float64 defaults
    np.testing.assert_allclose([2.0, 4.0], [2.0, 4.0 + 1e-6], rtol=1e-6)  # 0.25
    assert 1.0 + 3e-4 == pytest.approx(1.0, abs=1e-3)  # 0.3
    assert math.isclose(1.0, 1.0 + 7e-4, abs_tol=1e-3)  # 0.7
    err = 2e-7
    assert err < 1e-6  # 0.2
    assert torch.allclose(torch.zeros(3), torch.full((3,), 4e-9))  # 0.4: atol 1e-8
    assert not np.allclose([0.0], [1e-7])  # negated: 1e-8 / 1e-7 = 0.1
    bigger = 2 * err
    assert err < bigger  # an ordering
    assert err / 2 < 1e-6  # arithmetic: pytest does not show err / 2, so this is not read


@pytest.mark.xfail(strict=True, raises=AssertionError)
def test_an_expected_failure_is_left_out():
    torch.testing.assert_close(torch.tensor(1.0), torch.tensor(2.0))


def test_a_failure_is_recorded():
    torch.testing.assert_close(torch.tensor(1.0), torch.tensor(1 + 2**-16), rtol=0, atol=2**-17)  # 2
'''


@pytest.mark.slow
def test_run_records_each_sites_ratio(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_measured.py").write_text(textwrap.dedent(MEASURED), encoding="utf-8")
    out = tmp_path / "margins.jsonl"
    env = {**os.environ, "TOOLKIT_MARGINS_TESTS": str(tests)}
    proc = subprocess.run([sys.executable, str(SCRIPT), "run", str(out), "--", str(tests),
                           "-n", "0", "-p", "no:cacheprovider"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the second test fails
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    lines = (tests / "test_measured.py").read_text(encoding="utf-8").splitlines()
    found = {}
    for row in rows:
        assert row["file"] == "tests/test_measured.py"
        found.setdefault(row["line"], {})[row["kind"]] = row["ratio"]
    for number, text in enumerate(lines, start=1):
        if "# " in text and text.split("# ")[-1][:1].isdigit():
            (ratio,) = [r for kind, r in found[number].items()
                        if not kind.endswith("(ordering)")]
            assert ratio == pytest.approx(float(text.split("# ")[-1].split(":")[0]), rel=1e-3)
    negated = lines.index("    assert not np.allclose([0.0], [1e-7])  # negated: 1e-8 / 1e-7 "
                          "= 0.1") + 1
    assert found[negated] == {"np.allclose (negated)": pytest.approx(0.1, rel=1e-3)}
    ordering = lines.index("    assert err < bigger  # an ordering") + 1
    assert found[ordering] == {"assert < (ordering)": pytest.approx(0.5)}
    assert lines.index("    assert err / 2 < 1e-6  # arithmetic: pytest does not show err / 2, "
                       "so this is not read") + 1 not in found

    report = subprocess.run([sys.executable, str(SCRIPT), "report", str(out), "--within", "3"],
                            capture_output=True, text=True, check=True).stdout
    assert report.startswith("4 of 10 sites within 3x of their tolerance")
    assert "| tests/test_measured.py:" in report and "(ordering)" not in report
