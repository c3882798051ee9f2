"""A score-function weight made from the policy's own distribution summed over its actions: COMA's
counterfactual advantage ``Q(u) - sum_u' pi(u') Q(u')`` (Foerster et al. 2018, eq. 4; oxwhirl/
pymarl's ``COMALearner.train`` detaches it). The baseline is an expectation under ``pi``, no
function of each action's probability as an entropy's weight is: without its cut the weight
carries the actor's gradient, a ``target`` whose edit cuts it. An entropy bonus (``pi * log pi``
summed after the product) and a focal weight stay no target."""

from __future__ import annotations

import torch
from torch import nn

from toolkit.audit import audit_step

torch.manual_seed(0)
agent = nn.Linear(4, 3)
optimizer = torch.optim.SGD(agent.parameters(), lr=0.1)
OBS, Q, ACTIONS = torch.randn(8, 4), torch.randn(8, 3), torch.randint(0, 3, (8, 1))


def coma(cut: bool):
    def step() -> torch.Tensor:
        pi = torch.softmax(agent(OBS), -1)
        baseline = (pi * Q).sum(-1)
        advantages = Q.gather(1, ACTIONS).squeeze(1) - baseline
        if cut:
            advantages = advantages.detach()
        log_pi_taken = torch.log(pi.gather(1, ACTIONS).squeeze(1))
        return -(advantages * log_pi_taken).mean()
    return step


def with_entropy_bonus() -> torch.Tensor:
    pi = torch.softmax(agent(OBS), -1)
    log_pi = torch.log_softmax(agent(OBS), -1)
    advantages = (Q.gather(1, ACTIONS).squeeze(1) - (pi * Q).sum(-1)).detach()
    entropy = -(pi * log_pi).sum(-1)
    return -(advantages * log_pi.gather(1, ACTIONS).squeeze(1)).mean() - 0.01 * entropy.mean()


def focal() -> torch.Tensor:
    log_p = torch.log_softmax(agent(OBS), -1).gather(1, ACTIONS).squeeze(1)
    return -((1 - log_p.exp()) ** 2 * log_p).mean()


def test_an_expectation_under_the_policy_as_its_weight_carries_the_actor_s_gradient():
    (found,) = audit_step(coma(cut=False), optimizer).targets
    assert "weight" in found.form and found.edits


def test_the_weight_cut_is_clean():
    assert audit_step(coma(cut=True), optimizer).ok


def test_an_entropy_bonus_and_a_focal_weight_are_no_targets():
    assert audit_step(with_entropy_bonus, optimizer).ok
    assert audit_step(focal, optimizer).ok
