"""A copy kept in sync and never read, as a part of a whole copy the script reads: TD-MPC's
target model, deep-copied from the model and moved toward it as one, whose encoder and Q
network make the TD target, while its policy copy is never called and the target's actions
come from the online policy under no_grad, as the published method does (Hansen et al. 2022;
SAC reads its next actions so too). No ``aliased``: the policy's copy was not made to be that
constant. A copy held on its own, never read, while the online network makes the target,
still is one."""

from __future__ import annotations

from script_audit import audit, failures

SCRIPT = """\
import copy
import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self._q = nn.Linear(4, 1)
        self._pi = nn.Linear(3, 1)

    def Q(self, s, a):
        return self._q(torch.cat([s, a], 1))

    def pi(self, s):
        return torch.tanh(self._pi(s))


torch.manual_seed(0)
model = Model()
model_target = copy.deepcopy(model)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
s, s2, r = torch.randn(16, 3), torch.randn(16, 3), torch.randn(16, 1)
for it in range(4):
    with torch.no_grad():
        target = r + 0.9 * model_target.Q(s2, NEXT_ACTION)
    a = model.pi(s)
    loss = F.mse_loss(model.Q(s, a.detach()), target) - model.Q(s, a).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        for p, p_target in zip(model.parameters(), model_target.parameters()):
            p_target.lerp_(p, 0.1)
"""


def test_the_online_policy_beside_a_whole_target_model_is_the_methods(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.replace("NEXT_ACTION", "model.pi(s2)"), encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 0 and not failures(report), failures(report)


def test_a_copy_held_on_its_own_and_never_read_is_still_aliased(tmp_path):
    own = SCRIPT.replace("NEXT_ACTION", "torch.tanh(policy(s2))").replace(
        "model_target = copy.deepcopy(model)\n",
        "model_target = copy.deepcopy(model)\npolicy = nn.Linear(3, 1)\n"
        "policy_target = copy.deepcopy(policy)\n").replace(
        "optimizer = torch.optim.Adam(model.parameters(), lr=0.01)",
        "optimizer = torch.optim.Adam([*model.parameters(), *policy.parameters()], lr=0.01)"
    ).replace("        for p, p_target in zip(model.parameters(), model_target.parameters()):",
              "        for p, p_target in zip([*model.parameters(), *policy.parameters()],\n"
              "                               [*model_target.parameters(),\n"
              "                                *policy_target.parameters()]):").replace(
        "- model.Q(s, a).mean()", "- model.Q(s, a).mean() - policy(s).mean()")
    script = tmp_path / "train.py"
    script.write_text(own, encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 1 and any(f["kind"] == "aliased" for f in failures(report)), \
        failures(report)


