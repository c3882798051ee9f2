"""A backward taken for an input's gradient (a Langevin sampler's step, an attack's
perturbation: the script reads the input's ``.grad``) that also writes into tensors the
optimizer then steps, beside the loss that trains them: the sampler's gradient is added to
the loss's (``leak``). The freeze before the chain switched off the backbone but not the head;
the finding names that freeze and the backward, and its edit gives the backward ``inputs=``
its input, after which the script trains as the one that froze the whole network. An attack
whose gradient the script clears before the loss's backward (``zero_grad()`` after it), and a
chain over a network frozen whole, are no finding."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, audit, failures, twins

pytestmark = pytest.mark.slow

SAMPLER = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)
backbone, head = nn.Sequential(nn.Linear(2, 8), nn.Tanh()), nn.Linear(8, 3)
energy_model = nn.ModuleDict({"backbone": backbone, "head": head})
optimizer = torch.optim.Adam(energy_model.parameters(), lr=0.01)
data, labels = torch.randn(32, 2), torch.randint(0, 3, (32,))


def energy(x):
    return head(backbone(x)).logsumexp(1)


def sample(n):
    x = torch.randn(n, 2).requires_grad_(True)
    FREEZE
    for _ in range(3):
        energy(x).sum().backward()
        x = (x + 0.1 * x.grad).detach().requires_grad_(True)
    energy_model.requires_grad_(True)
    return x.detach()


for step in range(4):
    optimizer.zero_grad()
    fake = sample(16)
    loss = energy(fake).mean() - energy(data).mean() + F.cross_entropy(head(backbone(data)), labels)
    loss.backward()
    optimizer.step()
if args.out:
    torch.save(energy_model.state_dict(), args.out)
"""

WHOLE = SAMPLER.replace("FREEZE", "energy_model.requires_grad_(False)")
PART = SAMPLER.replace("FREEZE", "backbone.requires_grad_(False)")

ATTACK = """\
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
model = nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
    delta = torch.zeros_like(x).requires_grad_(True)
    F.cross_entropy(model(x + delta), y).backward()
    x_adv = (x + 0.1 * delta.grad.sign()).detach()
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x_adv), y)
    loss.backward()
    optimizer.step()
"""


def test_the_sampler_s_gradient_in_the_head_is_a_leak_cut_by_the_backward_s_inputs(tmp_path):
    folder = twins(tmp_path, WHOLE, PART)
    done = applied_and_trains(folder, "leak", "--watch", "1")
    assert "energy(x).sum().backward() -> energy(x).sum().backward(inputs=[x])" in done.stdout
    assert "train.py:22: backbone.requires_grad_(False)" in done.stdout, done.stdout


@pytest.mark.parametrize("text", [WHOLE, ATTACK], ids=["frozen-whole", "attack-cleared"])
def test_a_chain_over_a_frozen_network_or_a_cleared_attack_is_no_finding(tmp_path, text):
    script = tmp_path / "train.py"
    script.write_text(text, encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 0 and not failures(report), failures(report)
