"""Imitation learning: GAIL's policy step on the discriminator's reward, and DAgger's
behaviour-cloning step on labels from an expert policy network.

The text is ours, at tiny sizes; the structure is the source's.
"""

from __future__ import annotations

import torch
from realcode_common import RealCase
from torch import nn
from torch.nn import functional as F

# --- ikostrikov/pytorch-a2c-ppo-acktr-gail a2c_ppo_acktr/algo/gail.py@67c96d9f5d4e1fe045f07b7
# 9d7321f734dbd814b: the discriminator is trained with BCE-with-logits on expert (label 1) and
# policy (label 0) state-action pairs; predict_reward, under torch.no_grad(), turns its output
# into the reward log D - log(1 - D) the policy is then trained on (here a REINFORCE step
# weighted by that reward).
GAIL = ("ikostrikov/pytorch-a2c-ppo-acktr-gail a2c_ppo_acktr/algo/gail.py@"
        "67c96d9f5d4e1fe045f07b79d7321f734dbd814b")
GAIL_URL = ("https://github.com/ikostrikov/pytorch-a2c-ppo-acktr-gail/blob/67c96d9f5d4e1fe045f0"
            "7b79d7321f734dbd814b/a2c_ppo_acktr/algo/gail.py")


# The bug: the reward is computed without no_grad, so the policy's loss backpropagates into the
# discriminator, which the policy's optimizer does not step (truth "leaks").
def gail(seed: int, *, bug: bool = False) -> RealCase:
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    obs_dim, n_actions = 4, 3
    policy = nn.Sequential(nn.Linear(obs_dim, 8), nn.Tanh(), nn.Linear(8, n_actions))
    disc = nn.Sequential(nn.Linear(obs_dim + n_actions, 8), nn.Tanh(), nn.Linear(8, 1))
    opt_policy = torch.optim.Adam(policy.parameters(), lr=3e-4)
    opt_disc = torch.optim.Adam(disc.parameters(), lr=1e-3)

    def predict_reward(obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        s = torch.sigmoid(disc(torch.cat([obs, action], dim=1)))
        return (s + 1e-8).log() - (1 - s + 1e-8).log()

    def step() -> dict[str, torch.Tensor]:
        obs = torch.randn(5, obs_dim, generator=gen)
        expert_obs = torch.randn(5, obs_dim, generator=gen)
        expert_act = F.one_hot(torch.randint(0, n_actions, (5,), generator=gen), n_actions).float()
        logits = policy(obs)
        action = torch.multinomial(logits.softmax(-1).detach(), 1, generator=gen).squeeze(1)
        onehot = F.one_hot(action, n_actions).float()
        policy_d = disc(torch.cat([obs, onehot], dim=1))
        expert_d = disc(torch.cat([expert_obs, expert_act], dim=1))
        d_loss = (F.binary_cross_entropy_with_logits(expert_d, torch.ones_like(expert_d))
                  + F.binary_cross_entropy_with_logits(policy_d, torch.zeros_like(policy_d)))
        if bug:
            reward = predict_reward(obs, onehot).squeeze(1)
        else:
            with torch.no_grad():
                reward = predict_reward(obs, onehot).squeeze(1)
        log_prob = logits.log_softmax(-1).gather(1, action[:, None]).squeeze(1)
        return {"disc": d_loss, "policy": -(log_prob * reward).mean()}

    return RealCase("gail_reward_grad" if bug else "gail", GAIL, GAIL_URL,
                    "leaks" if bug else "correct", step,
                    {"disc": opt_disc, "policy": opt_policy},
                    {"policy": policy, "disc": disc})


# --- HumanCompatibleAI/imitation src/imitation/algorithms/dagger.py@c6ed6759c8e3f939b1d71868
# 6e14e88d293fbe3b (DAggerTrainer: the learner's states relabelled by the expert, then a BC
# step): the expert is a trained policy network; its actions are labels. The BC loss here is a
# smooth L1 between the learner's and the expert's continuous actions.
DAGGER = ("HumanCompatibleAI/imitation src/imitation/algorithms/dagger.py@"
          "c6ed6759c8e3f939b1d718686e14e88d293fbe3b")
DAGGER_URL = ("https://github.com/HumanCompatibleAI/imitation/blob/c6ed6759c8e3f939b1d718686e14e"
              "88d293fbe3b/src/imitation/algorithms/dagger.py")


# The bug: the expert labels its states with its graph (no no_grad, its parameters still
# require grad), so every BC backward fills the expert's gradients (truth "leaks").
def dagger(seed: int, *, bug: bool = False) -> RealCase:
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    learner = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 2))
    expert = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 2))
    if not bug:
        expert.requires_grad_(False)
    optimizer = torch.optim.Adam(learner.parameters(), lr=1e-3)

    def step() -> torch.Tensor:
        start = torch.randn(4, 3, generator=gen)
        states = [start]
        with torch.no_grad():  # the learner's own rollout visits the states
            for _ in range(2):
                states.append(states[-1] + 0.1 * F.pad(learner(states[-1]), (0, 1)))
        visited = torch.cat(states)
        labels = expert(visited)
        return F.smooth_l1_loss(learner(visited), labels)

    return RealCase("dagger_expert_grad" if bug else "dagger", DAGGER, DAGGER_URL,
                    "leaks" if bug else "correct", step, optimizer,
                    {"learner": learner, "expert": expert})


CASES = {"gail": gail, "gail_reward_grad": lambda seed: gail(seed, bug=True),
         "dagger": dagger, "dagger_expert_grad": lambda seed: dagger(seed, bug=True)}
TWINS = {"gail_reward_grad": "gail", "dagger_expert_grad": "dagger"}
FIELD = "imitation learning"
