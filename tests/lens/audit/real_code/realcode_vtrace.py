"""V-trace (IMPALA) from public code: TorchBeast's monobeast learner step, whose V-trace targets
are computed without gradient, and the same step with the targets left on the graph.

Each builder takes ``seed`` and returns a :class:`RealCase`; the text is ours, the structure
(modules, optimizers, order of calls, bug) is the repository's. The Atari network is replaced
by a tiny MLP with the same two heads (policy logits and baseline) over ``T + 1`` steps.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import torch
from realcode_common import RealCase
from torch import nn
from torch.nn import functional as F

# --- facebookresearch/torchbeast torchbeast/monobeast.py, torchbeast/core/vtrace.py
# @0af07b051a2176a8f9fd20c36891ba2bba6bae68: learn() runs the learner model over T + 1 steps,
# takes the last baseline as the bootstrap value, shifts the batch by one step, computes
# V-trace's v_s and policy-gradient advantages from the importance weights
# exp(log pi - log mu) (clipped at 1), and trains one RMSprop on the policy-gradient loss (its
# advantages detached), the baseline loss 0.5 * sum((v_s - V) ** 2) and the entropy loss.
# from_importance_weights runs under torch.no_grad() ("make sure no gradients backpropagated
# through the returned values", as the reference's tf.stop_gradient in deepmind's
# scalable_agent vtrace.py): correct. torchbeast_vtrace_grad: the same code without it, the
# bug that line guards against: the baseline is then trained through its own target.


class TinyAtariNet(nn.Module):
    """A stand-in for monobeast's AtariNet: a torso, a policy head and a baseline head."""

    def __init__(self, obs: int = 4, num_actions: int = 3, hidden: int = 8) -> None:
        super().__init__()
        self.num_actions = num_actions
        self.fc = nn.Linear(obs, hidden)
        self.policy = nn.Linear(hidden, num_actions)
        self.baseline = nn.Linear(hidden, 1)

    def forward(self, frame: torch.Tensor) -> dict[str, torch.Tensor]:
        core = F.relu(self.fc(frame))
        return {"policy_logits": self.policy(core), "baseline": self.baseline(core).squeeze(-1)}


def _action_log_probs(policy_logits: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    return -F.nll_loss(F.log_softmax(torch.flatten(policy_logits, 0, -2), dim=-1),
                       torch.flatten(actions), reduction="none").view_as(actions)


def _from_importance_weights(log_rhos: torch.Tensor, discounts: torch.Tensor,
                             rewards: torch.Tensor, values: torch.Tensor,
                             bootstrap_value: torch.Tensor, no_grad: bool
                             ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(v_s, pg_advantages)``: V-trace with both clipping thresholds at 1."""
    with torch.no_grad() if no_grad else contextlib.nullcontext():
        rhos = torch.exp(log_rhos)
        clipped_rhos = torch.clamp(rhos, max=1.0)
        cs = torch.clamp(rhos, max=1.0)
        values_t_plus_1 = torch.cat([values[1:], torch.unsqueeze(bootstrap_value, 0)], dim=0)
        deltas = clipped_rhos * (rewards + discounts * values_t_plus_1 - values)
        acc = torch.zeros_like(bootstrap_value)
        result = []
        for t in range(discounts.shape[0] - 1, -1, -1):
            acc = deltas[t] + discounts[t] * cs[t] * acc
            result.append(acc)
        result.reverse()
        vs_minus_v_xs = torch.stack(result)
        vs = torch.add(vs_minus_v_xs, values)  # audit: fix here
        vs_t_plus_1 = torch.cat([vs[1:], (torch.ones_like(vs[0]) * bootstrap_value)
                                 .unsqueeze(0)], dim=0)
        pg_advantages = torch.clamp(rhos, max=1.0) * (rewards + discounts * vs_t_plus_1
                                                      - values)
        return vs, pg_advantages


def torchbeast_vtrace(seed: int, *, no_grad: bool = True, T: int = 4, B: int = 2,
                      obs: int = 4, num_actions: int = 3, discounting: float = 0.99,
                      baseline_cost: float = 0.5, entropy_cost: float = 0.0006) -> RealCase:
    torch.manual_seed(seed)
    model = TinyAtariNet(obs, num_actions)
    optimizer = torch.optim.RMSprop(model.parameters(), lr=4.8e-4, momentum=0, eps=0.01,
                                    alpha=0.99)
    batch = {"frame": torch.randn(T + 1, B, obs),
             "action": torch.randint(0, num_actions, (T + 1, B)),
             "policy_logits": torch.randn(T + 1, B, num_actions),
             "reward": torch.randn(T + 1, B), "done": torch.rand(T + 1, B) < 0.2}

    def step() -> torch.Tensor:
        learner_outputs = model(batch["frame"])
        bootstrap_value = learner_outputs["baseline"][-1]
        shifted = {key: tensor[1:] for key, tensor in batch.items()}
        learner_outputs = {key: tensor[:-1] for key, tensor in learner_outputs.items()}
        clipped_rewards = torch.clamp(shifted["reward"], -1, 1)
        discounts = (~shifted["done"]).float() * discounting
        log_rhos = (_action_log_probs(learner_outputs["policy_logits"], shifted["action"])
                    - _action_log_probs(shifted["policy_logits"], shifted["action"]))
        vs, pg_advantages = _from_importance_weights(
            log_rhos, discounts, clipped_rewards, learner_outputs["baseline"], bootstrap_value,
            no_grad)
        cross_entropy = F.nll_loss(
            F.log_softmax(torch.flatten(learner_outputs["policy_logits"], 0, 1), dim=-1),
            target=torch.flatten(shifted["action"], 0, 1), reduction="none")
        pg_loss = torch.sum(cross_entropy.view_as(pg_advantages) * pg_advantages.detach())
        baseline_loss = baseline_cost * 0.5 * torch.sum(
            (vs - learner_outputs["baseline"]) ** 2)
        policy = F.softmax(learner_outputs["policy_logits"], dim=-1)
        log_policy = F.log_softmax(learner_outputs["policy_logits"], dim=-1)
        entropy_loss = entropy_cost * torch.sum(policy * log_policy)
        return pg_loss + baseline_loss + entropy_loss

    return RealCase("torchbeast_vtrace" if no_grad else "torchbeast_vtrace_grad",
                    "facebookresearch/torchbeast torchbeast/core/vtrace.py"
                    "@0af07b051a2176a8f9fd20c36891ba2bba6bae68",
                    "https://github.com/facebookresearch/torchbeast/blob/0af07b051a2176a8f9fd2"
                    "0c36891ba2bba6bae68/torchbeast/core/vtrace.py (from_importance_weights "
                    "under torch.no_grad())", "correct" if no_grad else "targets", step,
                    optimizer, {"model": model})


CASES: dict[str, Callable[[int], RealCase]] = {
    "torchbeast_vtrace": torchbeast_vtrace,
    "torchbeast_vtrace_grad": lambda s: torchbeast_vtrace(s, no_grad=False),
}
