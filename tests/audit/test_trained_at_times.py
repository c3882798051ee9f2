"""Tensors an optimizer steps that get no gradient at some steps, by the method's design,
told apart from the bugs they look like; and a parameter of no module left out:

- **an output the loss leaves out, also computed under no_grad** (PPG's auxiliary value head,
  Cobbe et al. 2020: the rollout runs the whole model under ``no_grad``, the policy phase's
  loss runs it with a graph and reads the policy and value heads only): the call under
  no_grad is not what keeps the head from that loss: ``unused`` (information). A head whose
  only forward runs under no_grad stays ``dead``;
- **a loss that joins another every few steps** (option-critic's critic, Bacon et al. 2017,
  whose TD loss is added to the actor's every few steps, while the actor's loss reads the
  critic cut): the critic is trained at those steps, no finding. A cut that begins late and
  lasts (the critic's loss dropped after a while) stays ``dead``;
- **a parameter of no module** that a loss trains in a term of its own, beside terms an
  optimizer steps (a GFlowNet's ``log_z``, Malkin et al. 2022), held by no optimizer:
  ``unstepped``, at the optimizer's line, with the parameter group that adds it. One the
  script steps by hand is no finding.
"""

from __future__ import annotations

import pytest
from script_audit import audit, failures

_PPG = """\
import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.body, self.pi, self.aux = nn.Linear(4, 8), nn.Linear(8, 3), nn.Linear(8, 1)

    def forward(self, x):
        h = torch.tanh(self.body(x))
        return self.pi(h), self.aux(h)


torch.manual_seed(0)
model = Model()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for _ in range(3):
    with torch.no_grad():
        obs = torch.randn(16, 4)
        old_logits, _ = model(obs)
        actions = torch.distributions.Categorical(logits=old_logits).sample()
    {forward}
    loss = F.cross_entropy(logits, actions)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


@pytest.mark.parametrize(("forward", "failed", "noted"), [
    ("logits, _ = model(obs)", [], ["unused"]),
    ("logits = model.pi(torch.tanh(model.body(obs)))", ["dead"], []),
], ids=["head_run_with_a_graph_and_left_out", "head_run_under_no_grad_only"])
def test_an_output_left_out_is_not_cut_by_another_call_under_no_grad(
        tmp_path, forward, failed, noted):
    script = tmp_path / "ppg.py"
    script.write_text(_PPG.format(forward=forward))
    code, report = audit(tmp_path, script, "--watch", "1")
    assert [f["kind"] for f in failures(report)] == failed, failures(report)
    assert [f["kind"] for f in report["findings"] if not f["failure"]] == noted
    assert code == (1 if failed else 0)


_OPTION_CRITIC = """\
import torch
from torch import nn

torch.manual_seed(0)
features, q, policy = nn.Linear(4, 8), nn.Linear(8, 2), nn.Linear(8, 3)
optimizer = torch.optim.RMSprop([*features.parameters(), *q.parameters(),
                                 *policy.parameters()], lr=1e-2)
for step in range(8):
    state = torch.relu(features(torch.randn(1, 4)))
    values = q(state)[0]
    dist = torch.distributions.Categorical(logits=policy(state)[0])
    action = dist.sample()
    loss = -dist.log_prob(action) * (1.0 - values[0].detach())
    if {critic_when}:
        loss = loss + 0.5 * (values[0] - 1.0).pow(2)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


@pytest.mark.parametrize(("critic_when", "failed"), [
    ("step % 3 == 0", []),
    ("step < 2", ["dead"]),
], ids=["critic_every_few_steps", "critic_dropped_after_two"])
def test_a_loss_that_joins_every_few_steps_trains_what_the_others_read_cut(
        tmp_path, critic_when, failed):
    script = tmp_path / "option_critic.py"
    script.write_text(_OPTION_CRITIC.format(critic_when=critic_when))
    code, report = audit(tmp_path, script, "--watch", "1")
    got = failures(report)
    assert sorted({f["kind"] for f in got}) == failed, got
    assert code == (1 if failed else 0)
    assert all(set(f["names"]) == {"q.weight", "q.bias"} for f in got)


_GFLOWNET = """\
import torch
from torch import nn

torch.manual_seed(0)
policy = nn.Linear(4, 1)
log_z = nn.Parameter(torch.zeros(1))
optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
{added}
for _ in range(3):
    log_pf = policy(torch.randn(8, 4)).squeeze(1)
    loss = (log_z + log_pf - torch.randn(8)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    {by_hand}
"""


@pytest.mark.parametrize(("added", "by_hand", "failed"), [
    ("", "", ["unstepped"]),
    ("optimizer.add_param_group({'params': [log_z], 'lr': 0.1})", "", []),
    # stepped by hand, its gradient cleared after (else each update reads the sum of all)
    ("", "log_z.data -= 0.1 * log_z.grad; log_z.grad = None", []),
], ids=["left_out", "in_its_own_group", "stepped_by_hand"])
def test_a_parameter_of_no_module_a_loss_trains_is_added_to_the_optimizer(
        tmp_path, added, by_hand, failed):
    script = tmp_path / "gflownet.py"
    script.write_text(_GFLOWNET.format(added=added, by_hand=by_hand))
    code, report = audit(tmp_path, script, "--watch", "1")
    got = failures(report)
    assert [f["kind"] for f in got] == failed, got
    assert code == (1 if failed else 0)
    if failed:
        assert got[0]["names"] == ["log_z"]
        assert got[0]["at"][0].startswith("gflownet.py:7: optimizer = torch.optim.Adam(")
        assert [e["new"] for e in got[0]["edits"]] == [
            'optimizer.add_param_group({"params": [log_z]})\n']
