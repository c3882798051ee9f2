"""A reference model aliased to the policy (GRPO's ``ref_model = policy`` for
``copy.deepcopy(policy)``), both called through one helper (``log_probs(model, x)``): inside the
helper both are ``model``, one name read both ways, which is no finding by itself (FixMatch's
pseudo-labels). A network handed to a helper is called by the name its caller hands it by, so
``ref_model``, read under no_grad, and ``policy``, trained, are one network: ``aliased`` at the
binding, the copy made there, and the fixed script trains as the published one."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, twins

pytestmark = pytest.mark.slow

SCRIPT = """\
import argparse
import copy
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)
policy = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 3))
optimizer = torch.optim.SGD(policy.parameters(), lr=0.1)
x, a = torch.randn(32, 4), torch.randint(0, 3, (32,))


def log_probs(model, inputs):
    return torch.log_softmax(model(inputs), -1).gather(1, a[:, None]).squeeze(1)


for step in range(3):   # supervised warm-up: the reference is the policy after it
    loss = -log_probs(policy, x).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
ref_model = REFERENCE
for step in range(4):
    with torch.no_grad():
        ref = log_probs(ref_model, x)
    logp = log_probs(policy, x)
    kl = torch.exp(ref - logp) - (ref - logp) - 1
    loss = -(logp * torch.randn(32)).mean() + 0.5 * kl.mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save({"policy": policy.state_dict(), "ref": ref_model.state_dict()}, args.out)
"""


def test_a_model_aliased_and_read_through_a_helper_is_found_at_its_binding(tmp_path):
    folder = twins(tmp_path, SCRIPT.replace("REFERENCE", "copy.deepcopy(policy)"),
                   SCRIPT.replace("REFERENCE", "policy"))
    done = applied_and_trains(folder, "aliased", "--watch", "1")
    assert "train.py:24: ref_model = policy" in done.stdout
    assert "ref_model = copy.deepcopy(policy)\n" in (folder / "train.py").read_text()
