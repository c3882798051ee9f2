"""A stale gradient in tensors the step's own loss does not reach: TD-MPC's model optimizer
holds the policy too (Hansen et al. 2022), and with its clear moved after its step, the
policy's gradient from the policy's own update is still in ``.grad`` at the model's next step,
which moves the policy a second time. The edit clears before the model's backward, which
leaves the policy with no gradient at that step: it is proved by the finding gone (the
tensors lose a gradient, they gain none), and the fixed script trains as the published one."""

from __future__ import annotations

from script_audit import applied, assert_trains_as, cli

SCRIPT = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
model = nn.ModuleDict({"encoder": nn.Linear(4, 3), "pi": nn.Linear(3, 2)})
optim = torch.optim.Adam(model.parameters(), lr=0.01)
pi_optim = torch.optim.Adam(model["pi"].parameters(), lr=0.01)
x, y = torch.randn(16, 4), torch.randn(16, 3)
for step in range(4):
BEFORE    model_loss = F.mse_loss(model["encoder"](x), y)
    model_loss.backward()
    optim.step()
AFTER    z = model["encoder"](x).detach()
    pi_optim.zero_grad()
    pi_loss = -model["pi"](z).mean()
    pi_loss.backward()
    pi_optim.step()
if args.out:
    torch.save(model.state_dict(), args.out)
"""


def test_the_clear_before_the_models_backward_is_proved_and_trains_as_published(tmp_path):
    folder = tmp_path / "proj"
    folder.mkdir()
    clear = "    optim.zero_grad()\n"
    (folder / "published.py").write_text(
        SCRIPT.replace("BEFORE", clear).replace("AFTER", ""), encoding="utf-8")
    (folder / "train.py").write_text(
        SCRIPT.replace("BEFORE", "").replace("AFTER", clear), encoding="utf-8")
    done = applied(folder, "stale", "--watch", "1")
    assert "verified: train.py:16: insert before it: optim.zero_grad()" in done.stdout, \
        done.stdout
    assert cli("--watch", "1", "train.py", cwd=folder).returncode == 0
    assert_trains_as(folder)
