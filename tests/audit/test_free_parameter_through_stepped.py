"""``toolkit audit SCRIPT``: a parameter of no module that the loss trains through tensors an
optimizer steps, left out of every optimizer (:mod:`toolkit.audit.rules.running.not_parameters`).
Scripts written for it in the shape of generalized state-dependent exploration (Raffin et al.
2021, "Smooth Exploration for Robotic Reinforcement Learning"): a Gaussian policy whose mean an
actor makes and whose scale a free ``log_std`` parameter does, both trained by the policy
gradient.

- ``log_std`` left out of the list the optimizer is built over: a failure whose edit writes it
  into that list, as the published line has it, and trains as the published script; built over
  parameter groups, the edit adds a group.
- No finding: the published script; a perturbation made a parameter and moved by the script's
  own ascent step (an attack's), which no optimizer is meant to hold.
"""

from __future__ import annotations

import pytest
from script_audit import assert_trains_as, audit, check_fix, failures, twins

PUBLISHED = '''\
import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
actor = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 2))
log_std = nn.Parameter(torch.full((2,), -1.0))
params = [*actor.parameters(), log_std]
optimizer = torch.optim.Adam(params, lr=1e-2)
for step in range(4):
    state = torch.randn(16, 3)
    dist = torch.distributions.Normal(actor(state), log_std.exp())
    action = dist.sample()
    advantage = -(action - 0.3).pow(2).sum(1)
    loss = -(dist.log_prob(action).sum(1) * advantage).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save({"actor": actor.state_dict(), "log_std": log_std.detach().clone()}, args.out)
'''

LEFT_OUT = PUBLISHED.replace("params = [*actor.parameters(), log_std]",
                             "params = [*actor.parameters()]")
GROUPS = PUBLISHED.replace("params = [*actor.parameters(), log_std]",
                           'params = [{"params": actor.parameters()}]')

#: a perturbation of the input made a parameter, moved by the script's own ascent step
PERTURBED = '''\
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(32, 6), torch.randint(0, 3, (32,))
delta = nn.Parameter(torch.zeros(6))
for step in range(4):
    optimizer.zero_grad()
    F.cross_entropy(model(x + delta), y).backward()
    optimizer.step()
    with torch.no_grad():
        delta += 0.01 * delta.grad.sign()
        delta.grad = None
'''


def test_a_scale_left_out_of_the_list_is_written_into_it(tmp_path):
    (tmp_path / "train.py").write_text(LEFT_OUT, encoding="utf-8")
    code, report = audit(tmp_path, tmp_path / "train.py", "--watch", "1")
    assert code == 1
    (found,) = failures(report)
    assert found["kind"] == "unstepped" and found["names"] == ["log_std"]
    (edit,) = found["edits"]
    assert edit["start"][0] == 12 and edit["new"] == "*actor.parameters(), log_std"


def test_built_over_groups_the_edit_adds_a_group(tmp_path):
    (tmp_path / "train.py").write_text(GROUPS, encoding="utf-8")
    code, report = audit(tmp_path, tmp_path / "train.py", "--watch", "1")
    assert code == 1
    (found,) = failures(report)
    (edit,) = found["edits"]
    assert edit["start"][0] == 14 and "add_param_group" in edit["new"]


@pytest.mark.parametrize("text", [PUBLISHED, PERTURBED], ids=["published", "perturbation"])
def test_a_held_or_hand_moved_parameter_is_no_finding(tmp_path, text):
    (tmp_path / "train.py").write_text(text, encoding="utf-8")
    code, report = audit(tmp_path, tmp_path / "train.py", "--watch", "1")
    assert code == 0 and failures(report) == [], [f["message"] for f in failures(report)]


@pytest.mark.slow
def test_the_edit_trains_as_the_published_script(tmp_path):
    folder = twins(tmp_path, PUBLISHED, LEFT_OUT)
    check_fix(tmp_path, folder, "unstepped", "--watch", "1")
    assert_trains_as(folder)


#: GLO's latent codes (Bojanowski et al. 2018), projected onto the ball by wrapping them anew
#: after the optimizer was built: the replaced rule's one finding, not a second one here
REWRAPPED = '''\
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
g = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 6))
codes = nn.Parameter(torch.randn(32, 4))
x = torch.randn(32, 6)
optimizer = torch.optim.SGD([*g.parameters(), codes], lr=0.1)
for step in range(4):
    loss = F.mse_loss(g(codes), x)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    codes = nn.Parameter(codes.data / codes.data.norm(dim=1, keepdim=True).clamp(min=1))
'''


def test_a_parameter_wrapped_anew_after_the_optimizer_is_the_replaced_rules(tmp_path):
    (tmp_path / "train.py").write_text(REWRAPPED, encoding="utf-8")
    code, report = audit(tmp_path, tmp_path / "train.py", "--watch", "1")
    assert code == 1
    (found,) = failures(report)
    assert found["kind"] == "unstepped" and found["at"][0].startswith("train.py:15:")
