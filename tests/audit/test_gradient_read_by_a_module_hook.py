"""A backward whose gradient the script reads by a backward hook it registered on a module: K-FAC
(Martens & Grosse 2015, arXiv:1503.05671; alecwangcq/KFAC-Pytorch, optimizers/kfac.py,
_save_grad_output) gathers the statistics of each layer's output gradients in a backward of a
loss on targets sampled from the model's own prediction, clears the gradient that backward left
in the parameters, then backwards the real loss and steps. No ``cleared`` finding: the first
backward was read, by the hook. Without the hook (the statistics gathered by nothing) the same
clear loses a backward: ``cleared``."""

from __future__ import annotations

import pytest
from script_audit import cli

pytestmark = pytest.mark.slow

SCRIPT = """\
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
stats = {}


def save_grad_output(module, grad_input, grad_output):
    g = grad_output[0]
    stats[module] = 0.9 * stats.get(module, 0) + 0.1 * g.t() @ g


HOOK
for step in range(6):
    x, y = torch.randn(16, 4), torch.randn(16, 2)
    optimizer.zero_grad()
    out = model(x)
    loss = F.mse_loss(out, y)
    if step % 2 == 0:
        sampled = out.detach() + torch.randn_like(out)
        F.mse_loss(out, sampled).backward(retain_graph=True)
        optimizer.zero_grad()   # the statistics pass's own gradient
    loss.backward()
    optimizer.step()
"""
REGISTER = """\
for layer in model:
    if isinstance(layer, nn.Linear):
        layer.register_full_backward_hook(save_grad_output)
"""


def test_a_backward_read_by_a_module_hook_then_cleared_is_not_lost(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT.replace("HOOK\n", REGISTER), encoding="utf-8")
    done = cli("--watch", "1", "train.py", cwd=tmp_path)
    assert done.returncode == 0, done.stdout


def test_without_the_hook_the_clear_loses_that_backward(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT.replace("HOOK\n", ""), encoding="utf-8")
    done = cli("--watch", "1", "train.py", cwd=tmp_path)
    assert done.returncode == 1 and "FAIL    cleared:" in done.stdout, done.stdout
