"""Heads kept in a plain list (bootstrapped DQN's ``self.net_list = [HeadNet() ...]``, for an
``nn.ModuleList``), each called by the script itself: the model's ``parameters()`` never holds
them, so the optimizer built from it never steps them. One ``unstepped`` failure at the line
that keeps them, naming them by the container (``policy.heads.0.weight``), whose edit makes
the list an ``nn.ModuleList`` and trains as the published script."""

from __future__ import annotations

from pathlib import Path

from script_audit import applied, assert_trains_as, audit, failures

SCRIPT = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)


class Ensemble(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.core = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
        self.heads = HEADS

    def forward(self, x):
        h = self.core(x)
        return [head(h) for head in self.heads]


policy = Ensemble(3)
optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
x, y = torch.randn(32, 4), torch.randn(32, 2)
for step in range(3):
    loss = sum(F.mse_loss(out, y) for out in policy(x))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save(policy.state_dict(), args.out)
"""

PLAIN = "[nn.Linear(8, 2) for _ in range(k)]"
REGISTERED = "nn.ModuleList([nn.Linear(8, 2) for _ in range(k)])"


def _write(path: Path, heads: str) -> Path:
    path.write_text(SCRIPT.replace("HEADS", heads), encoding="utf-8")
    return path


def test_heads_in_a_plain_list_are_unstepped_at_the_list_named_by_it(tmp_path):
    code, report = audit(tmp_path, _write(tmp_path / "train.py", PLAIN), "--steps", "2")
    found = failures(report)
    assert code == 1 and [f["kind"] for f in found] == ["unstepped"]
    assert found[0]["at"][0].startswith("train.py:16: self.heads = ")
    assert sorted(found[0]["names"]) == sorted(
        f"policy.heads.{i}.{p}" for i in range(3) for p in ("weight", "bias"))


def test_the_edit_registers_the_list_and_trains_as_published(tmp_path):
    folder = tmp_path / "proj"
    folder.mkdir()
    _write(folder / "published.py", REGISTERED)
    _write(folder / "train.py", PLAIN)
    assert audit(tmp_path, folder / "published.py", "--steps", "2")[0] == 0
    applied(folder, "unstepped", "--steps", "2")
    assert "torch.nn.ModuleList([nn.Linear(8, 2) for _ in range(k)])" in \
        (folder / "train.py").read_text(encoding="utf-8")
    assert_trains_as(folder)


WARM_UP = """\
policy = Ensemble(3)
aux = nn.Linear(8, 2)
warm_up = torch.optim.SGD([*policy.core.parameters(), *aux.parameters()], lr=1e-2)
for step in range(2):
    z = torch.randn(32, 4)
    loss = F.mse_loss(aux(policy.core(z)), z[:, :2])
    warm_up.zero_grad()
    loss.backward()
    warm_up.step()
"""


def test_heads_in_a_plain_list_after_a_warm_up_loop_are_found_in_their_order(tmp_path):
    """A warm-up loop of another optimizer (bootstrapped DQN's torso trained on the reward
    first) leaves its head's last gradient behind: that is its loop's, and does not hide
    the heads kept in the list."""
    script = _write(tmp_path / "train.py", PLAIN)
    script.write_text(script.read_text(encoding="utf-8").replace(
        "policy = Ensemble(3)\n", WARM_UP), encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    found = failures(report)
    assert code == 1 and [f["kind"] for f in found] == ["unstepped"], found
    assert found[0]["at"][0].startswith("train.py:16: self.heads = ")
    assert list(found[0]["names"]) == [
        f"policy.heads.{i}.{p}" for i in range(3) for p in ("weight", "bias")]
