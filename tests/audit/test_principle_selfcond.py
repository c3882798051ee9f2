"""``toolkit audit SCRIPT``: an estimate fed back within one iteration (self-conditioning,
recycling), on scripts written for it (``tests/lens/audit/scripts/``) in a field other than the
held-out ones: an AlphaFold-style recycling refiner, and legitimate weight-tied unrolls.

- Within one iteration, a network's output that no loss compares, fed back (through any
  computation) as an input of a later call of the same network on the same input, whose output
  the loss compares, while on other iterations that argument holds a constant (zeros, no
  estimate: the network is trained to predict without it too), makes the loss train the network
  through every earlier pass; the published form (AlphaFold's recycling, self-conditioning)
  cuts it. A failure at the statement that makes the estimate, naming the network's tensors;
  the edit runs that statement under ``torch.no_grad()``, which trains as the published script.
- No finding: the published twin (the estimate made under ``no_grad``); a weight-tied unroll
  trained end to end (learned ISTA: the loss's call never reads the constant); the same with
  every step's output in the loss (deep supervision); a recurrent cell stepped over new
  observations (a learned tracking filter: the later call reads other inputs).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from toolkit.audit.cli import main
from toolkit.audit.verify.gradients import same_gradient
from toolkit.audit.verify.rerun import load_record

SCRIPTS = Path(__file__).parents[1] / "lens" / "audit" / "scripts"


def _audit(tmp_path: Path, script: Path, *args: str) -> tuple[int, dict]:
    rec = tmp_path / f"record-{script.stem}"
    code = main(["--no-verify", "--record", str(rec), "--watch", "1", str(script), *args])
    report, _ = load_record(str(rec))
    return code, report


def _failures(report: dict) -> list[dict]:
    return [f for f in report["findings"] if f["failure"]]


def test_a_recycled_estimate_kept_in_the_graph_is_a_failure_where_it_is_made(tmp_path):
    code, report = _audit(tmp_path, SCRIPTS / "recycling_refiner_not_cut.py")
    assert code == 1
    (found,) = _failures(report)
    assert found["kind"] == "carried" and found["iteration"] == 0
    assert found["at"][0] == ("recycling_refiner_not_cut.py:63: "
                              "prev_coords = model(features, prev_coords)")
    assert found["names"] and all(n.startswith("model.") for n in found["names"])
    assert "`prev_coords`" in found["message"]
    (edit,) = found["edits"]
    assert edit["start"][0] == 63
    assert edit["new"] == ("        with torch.no_grad():\n"
                           "            prev_coords = model(features, prev_coords)\n")


@pytest.mark.parametrize("args", [("recycling_refiner.py",), ("lista_tied.py",),
                                  ("lista_tied.py", "--deep"), ("learned_tracker.py",)],
                         ids=["published", "tied-unroll", "deep-supervision", "tracker"])
def test_a_cut_estimate_or_an_unroll_trained_end_to_end_is_no_finding(tmp_path, args):
    code, report = _audit(tmp_path, SCRIPTS / args[0], *args[1:])
    assert code == 0 and _failures(report) == []


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "toolkit.audit", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600, check=False)


def _trained(script: str, out: Path, cwd: Path) -> dict[str, torch.Tensor]:
    done = subprocess.run([sys.executable, script, "--out", str(out)], cwd=cwd,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    return torch.load(out, weights_only=True)


@pytest.mark.slow
def test_the_edit_is_verified_and_trains_as_the_published_script(tmp_path):
    folder = tmp_path / "proj"
    folder.mkdir()
    shutil.copy(SCRIPTS / "recycling_refiner_not_cut.py", folder / "train.py")
    shutil.copy(SCRIPTS / "recycling_refiner.py", folder / "published.py")
    done = _cli("--watch", "1", "--record", str(tmp_path / "pub"), "published.py", cwd=folder)
    assert done.returncode == 0, done.stdout + done.stderr
    done = _cli("--watch", "1", "--apply", "train.py", cwd=folder)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAIL    carried:" in done.stdout and "wrote train.py" in done.stdout
    done = _cli("--watch", "1", "--record", str(tmp_path / "fixed"), "train.py", cwd=folder)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "fixed" / "report.json").read_text())
    assert not _failures(report)
    ours = torch.load(tmp_path / "fixed" / "grads.pt", weights_only=True)
    theirs = torch.load(tmp_path / "pub" / "grads.pt", weights_only=True)
    assert len(ours) == len(theirs) > 0
    for mine, published in zip(ours, theirs):
        assert mine["grads"].keys() == published["grads"].keys()
        for key, g in published["grads"].items():
            assert same_gradient(mine["grads"][key], g), key
    fixed = _trained("train.py", tmp_path / "fixed.pt", folder)
    twin = _trained("published.py", tmp_path / "twin.pt", folder)
    assert fixed.keys() == twin.keys()
    for key, value in twin.items():
        assert torch.allclose(fixed[key], value, rtol=1e-5, atol=1e-7), key
