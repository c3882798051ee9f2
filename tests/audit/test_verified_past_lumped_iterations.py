"""An edit verified where the first audit counted fewer iterations than the script took
steps: adversarial weight perturbation's proxy bound to the model itself (``proxy = model`` for
a network of its own, Wu et al. 2020), found at the first step of the perturbed phase. The run
with the proxy aliased gave the warm-up's steps one iteration, so rerunning the edited script
for as many iterations as the finding's stopped before its step; the rerun that audits as many
iterations as there were steps up to it proves the copy, and the fixed script trains as the
published one."""

from __future__ import annotations

from script_audit import applied, assert_trains_as, cli

SCRIPT = """\
import argparse
import copy
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
proxy = PROXY
proxy_optim = torch.optim.SGD(proxy.parameters(), lr=0.1)
x, y = torch.randn(32, 4), torch.randint(0, 3, (32,))


def perturbed(net, inputs):
    inputs = inputs.clone().requires_grad_(True)
    grad, = torch.autograd.grad(F.cross_entropy(net(inputs), y), inputs)
    return (inputs + 0.1 * grad.sign()).detach()


for step in range(6):
    x_adv = perturbed(model, x)
    if step >= 3:
        proxy.load_state_dict(model.state_dict())
        proxy_loss = -F.cross_entropy(proxy(x_adv), y)
        proxy_optim.zero_grad()
        proxy_loss.backward()
        proxy_optim.step()
        with torch.no_grad():
            diff = [p - q for p, q in zip(proxy.parameters(), model.parameters())]
            for p, d in zip(model.parameters(), diff):
                p.add_(d)
    loss = F.cross_entropy(model(x_adv), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step >= 3:
        with torch.no_grad():
            for p, d in zip(model.parameters(), diff):
                p.sub_(d)
if args.out:
    torch.save(model.state_dict(), args.out)
"""


def test_the_aliased_proxy_copied_is_verified_and_trains_as_published(tmp_path):
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "published.py").write_text(SCRIPT.replace("PROXY", "copy.deepcopy(model)"),
                                         encoding="utf-8")
    (folder / "train.py").write_text(SCRIPT.replace("PROXY", "model"), encoding="utf-8")
    done = applied(folder, "aliased", "--watch", "1")
    assert "verified: train.py:13: model -> copy.deepcopy(model)" in done.stdout, done.stdout
    assert cli("--watch", "1", "train.py", cwd=folder).returncode == 0
    assert_trains_as(folder)
