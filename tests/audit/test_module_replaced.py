"""A submodule started again as a new module after its optimizer was built (DeepCluster's top
layer, ``model.top_layer = nn.Linear(...)`` at each new clustering, for a reset of the layer its
optimizer holds): the loss trains the new layer, which no optimizer holds, and the optimizer
steps the old one, which nothing reads. One ``unstepped`` failure at the replacing line, however
many times it runs; its edit loads the new module's state into the one the optimizer holds, and
the fixed script trains as the published one, which resets the layer in place. Rebuilding the
optimizer after the replacement, as DeepCluster's own code does, is no finding."""

from __future__ import annotations

from pathlib import Path

from script_audit import applied, assert_trains_as, audit, cli, failures

SCRIPT = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
model = nn.Module()
model.features = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
model.top_layer = nn.Linear(8, 3)
optimizer = torch.optim.SGD(model.features.parameters(), lr=0.1)
optimizer_tl = torch.optim.SGD(model.top_layer.parameters(), lr=0.1)
x = torch.randn(32, 4)
for epoch in range(3):
    labels = torch.randint(0, 3, (32,))
    if epoch > 0:
        RESET
    for step in range(2):
        loss = F.cross_entropy(model.top_layer(model.features(x)), labels)
        optimizer.zero_grad()
        optimizer_tl.zero_grad()
        loss.backward()
        optimizer.step()
        optimizer_tl.step()
if args.out:
    torch.save(model.state_dict(), args.out)
"""

REPLACED = "model.top_layer = nn.Linear(8, 3)"


def _write(path: Path, reset: str) -> Path:
    path.write_text(SCRIPT.replace("RESET", reset), encoding="utf-8")
    return path


def test_a_layer_started_again_after_its_optimizer_is_one_failure_at_that_line(tmp_path):
    code, report = audit(tmp_path, _write(tmp_path / "train.py", REPLACED), "--watch", "1")
    found = failures(report)
    assert code == 1 and [f["kind"] for f in found] == ["unstepped"]
    assert found[0]["at"][0] == f"train.py:19: {REPLACED}"
    assert set(found[0]["names"]) == {"model.top_layer.weight", "model.top_layer.bias"}


def test_a_new_optimizer_over_the_new_layer_is_no_finding(tmp_path):
    rebuilt = (f"{REPLACED}\n        optimizer_tl = torch.optim.SGD("
               "model.top_layer.parameters(), lr=0.1)")
    code, report = audit(tmp_path, _write(tmp_path / "train.py", rebuilt), "--watch", "1")
    assert code == 0 and not failures(report)


def test_the_edit_loads_the_new_state_into_the_held_layer_and_trains_as_published(tmp_path):
    folder = tmp_path / "proj"
    folder.mkdir()
    _write(folder / "published.py", "model.top_layer.reset_parameters()")
    _write(folder / "train.py", REPLACED)
    applied(folder, "unstepped", "--watch", "1")
    assert "model.top_layer.load_state_dict(nn.Linear(8, 3).state_dict())" in \
        (folder / "train.py").read_text(encoding="utf-8")
    assert cli("--watch", "1", "train.py", cwd=folder).returncode == 0
    assert_trains_as(folder)
