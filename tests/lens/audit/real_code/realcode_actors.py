"""Deterministic actor-critic training steps from public code: TD3, DDPG as the TD3 authors
wrote it, and the Hands-on-RL DDPG whose target is computed with its graph (with its fixed twin).

Each builder takes ``seed`` and returns a :class:`RealCase`; the text is ours, the structure
(modules, optimizers, order of calls, bug) is the repository's.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable

import torch
from realcode_common import RealCase
from torch import nn
from torch.nn import functional as F

# --- sfujim/TD3 TD3.py@34770ccdcb51df6f6c7d85c1ba7e40d71b940d16 ---------------------------------
# Correct (the authors' code for arXiv:1802.09477): the target action with clipped noise and the
# twin target Q under no_grad; the critic loss on both heads; the actor loss through critic.Q1
# (pass-through); both targets soft-updated with .data.copy_. policy_freq is a constructor
# argument (default 2); it is 1 here so that every step has the same losses.


class Actor(nn.Module):
    """The actor of TD3.py and DDPG.py alike (widths 256-256 and 400-300 there)."""

    def __init__(self, state_dim: int, action_dim: int, max_action: float,
                 widths: tuple[int, int] = (8, 8)) -> None:
        super().__init__()
        self.l1, self.l2 = nn.Linear(state_dim, widths[0]), nn.Linear(*widths)
        self.l3 = nn.Linear(widths[1], action_dim)
        self.max_action = max_action

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        a = F.relu(self.l1(state))
        a = F.relu(self.l2(a))
        return self.max_action * torch.tanh(self.l3(a))


class TD3Critic(nn.Module):
    def __init__(self, state_dim: int, action_dim: int, hidden: int = 8) -> None:
        super().__init__()
        self.l1 = nn.Linear(state_dim + action_dim, hidden)
        self.l2, self.l3 = nn.Linear(hidden, hidden), nn.Linear(hidden, 1)
        self.l4 = nn.Linear(state_dim + action_dim, hidden)
        self.l5, self.l6 = nn.Linear(hidden, hidden), nn.Linear(hidden, 1)

    def forward(self, state: torch.Tensor, action: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        sa = torch.cat([state, action], 1)
        q1 = self.l3(F.relu(self.l2(F.relu(self.l1(sa)))))
        q2 = self.l6(F.relu(self.l5(F.relu(self.l4(sa)))))
        return q1, q2

    def Q1(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        sa = torch.cat([state, action], 1)
        return self.l3(F.relu(self.l2(F.relu(self.l1(sa)))))


def replay_sample(batch: int, state_dim: int, action_dim: int, max_action: float
                  ) -> tuple[torch.Tensor, ...]:
    """A batch as sfujim/TD3's ReplayBuffer.sample returns it: state, next state, action,
    reward, not done."""
    state, next_state = torch.randn(batch, state_dim), torch.randn(batch, state_dim)
    action = (torch.rand(batch, action_dim) * 2 - 1) * max_action
    reward, not_done = torch.randn(batch, 1), (torch.rand(batch, 1) > 0.2).float()
    return state, next_state, action, reward, not_done


def sfujim_td3(seed: int, *, state_dim: int = 3, action_dim: int = 1, max_action: float = 2.0,
               batch: int = 4, discount: float = 0.99, tau: float = 0.005,
               policy_noise: float = 0.2, noise_clip: float = 0.5, policy_freq: int = 1
               ) -> RealCase:
    torch.manual_seed(seed)
    actor = Actor(state_dim, action_dim, max_action)
    actor_target = copy.deepcopy(actor)
    actor_optimizer = torch.optim.Adam(actor.parameters(), lr=3e-4)
    critic = TD3Critic(state_dim, action_dim)
    critic_target = copy.deepcopy(critic)
    critic_optimizer = torch.optim.Adam(critic.parameters(), lr=3e-4)
    state, next_state, action, reward, not_done = replay_sample(batch, state_dim, action_dim,
                                                                max_action)
    it = {"total_it": 0}

    def step() -> dict[str, torch.Tensor]:
        it["total_it"] += 1
        with torch.no_grad():
            noise = (torch.randn_like(action) * policy_noise).clamp(-noise_clip, noise_clip)
            next_action = (actor_target(next_state) + noise).clamp(-max_action, max_action)
            target_Q1, target_Q2 = critic_target(next_state, next_action)
            target_Q = torch.min(target_Q1, target_Q2)
            target_Q = reward + not_done * discount * target_Q
        current_Q1, current_Q2 = critic(state, action)
        critic_loss = F.mse_loss(current_Q1, target_Q) + F.mse_loss(current_Q2, target_Q)
        out = {"critic": critic_loss}
        if it["total_it"] % policy_freq == 0:
            actor_loss = -critic.Q1(state, actor(state)).mean()
            out["actor"] = actor_loss
            for param, target_param in zip(critic.parameters(), critic_target.parameters()):
                target_param.data.copy_(tau * param.data + (1 - tau) * target_param.data)
            for param, target_param in zip(actor.parameters(), actor_target.parameters()):
                target_param.data.copy_(tau * param.data + (1 - tau) * target_param.data)
        return out

    return RealCase("sfujim_td3", "sfujim/TD3 TD3.py@34770ccdcb51df6f6c7d85c1ba7e40d71b940d16",
                    "https://arxiv.org/abs/1802.09477 (authors' official implementation)",
                    "correct", step, {"critic": critic_optimizer, "actor": actor_optimizer},
                    {"actor": actor, "actor_target": actor_target, "critic": critic,
                     "critic_target": critic_target}, expect_pass_through=True)


# --- boyu-ai/Hands-on-RL 第13章-DDPG算法.ipynb@4a151a4bfeafd3061c0e0ef59bece25ca8fb2bf8 ---
# q_targets = rewards + gamma * target_critic(next_states, target_actor(next_states)) * (1 -
# dones), with neither detach nor no_grad: target_critic and target_actor, in no optimizer,
# receive .grad from the critic loss (truth "leaks", as philtabor_ddqn). boyu-ai/Hands-on-RL#112
# reports the TD target computed without detach; the thread notes the DDPG target has none
# either. The fixed twin computes the target under torch.no_grad(), the fix #112 asks for; its
# actor loss still passes through the critic.


class HandsOnPolicyNet(nn.Module):
    def __init__(self, state_dim: int, hidden_dim: int, action_dim: int,
                 action_bound: float) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(state_dim, hidden_dim), nn.Linear(hidden_dim, action_dim)
        self.action_bound = action_bound

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.fc2(F.relu(self.fc1(x)))) * self.action_bound


class HandsOnQValueNet(nn.Module):
    def __init__(self, state_dim: int, hidden_dim: int, action_dim: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(state_dim + action_dim, hidden_dim)
        self.fc2, self.fc_out = nn.Linear(hidden_dim, hidden_dim), nn.Linear(hidden_dim, 1)

    def forward(self, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        cat = torch.cat([x, a], dim=1)
        return self.fc_out(F.relu(self.fc2(F.relu(self.fc1(cat)))))


def handson_ddpg(seed: int, *, fixed: bool = False, state_dim: int = 3, hidden_dim: int = 8,
                 action_dim: int = 1, action_bound: float = 2.0, batch: int = 4,
                 gamma: float = 0.98, tau: float = 0.005) -> RealCase:
    torch.manual_seed(seed)
    actor = HandsOnPolicyNet(state_dim, hidden_dim, action_dim, action_bound)
    critic = HandsOnQValueNet(state_dim, hidden_dim, action_dim)
    target_actor = HandsOnPolicyNet(state_dim, hidden_dim, action_dim, action_bound)
    target_critic = HandsOnQValueNet(state_dim, hidden_dim, action_dim)
    target_critic.load_state_dict(critic.state_dict())
    target_actor.load_state_dict(actor.state_dict())
    actor_optimizer = torch.optim.Adam(actor.parameters(), lr=3e-4)
    critic_optimizer = torch.optim.Adam(critic.parameters(), lr=3e-3)
    states, next_states = torch.randn(batch, state_dim), torch.randn(batch, state_dim)
    actions = (torch.rand(batch, action_dim) * 2 - 1) * action_bound
    rewards, dones = torch.randn(batch, 1), (torch.rand(batch, 1) < 0.2).float()

    def soft_update(net: nn.Module, target_net: nn.Module) -> None:
        for param_target, param in zip(target_net.parameters(), net.parameters()):
            param_target.data.copy_(param_target.data * (1.0 - tau) + param.data * tau)

    def step() -> dict[str, torch.Tensor]:
        with torch.no_grad() if fixed else contextlib.nullcontext():  # the fix: no graph
            next_q_values = target_critic(next_states, target_actor(next_states))  # audit: fix here
            q_targets = rewards + gamma * next_q_values * (1 - dones)
        critic_loss = torch.mean(F.mse_loss(critic(states, actions), q_targets))
        actor_loss = -torch.mean(critic(states, actor(states)))
        soft_update(actor, target_actor)
        soft_update(critic, target_critic)
        return {"critic": critic_loss, "actor": actor_loss}

    return RealCase(f"handson_ddpg{'_fixed' if fixed else ''}",
                    "boyu-ai/Hands-on-RL 第13章-DDPG算法.ipynb@4a151a4bfeafd3061c0e0ef59bece25c"
                    "a8fb2bf8", "https://github.com/boyu-ai/Hands-on-RL/issues/112",
                    "correct" if fixed else "leaks", step,
                    {"critic": critic_optimizer, "actor": actor_optimizer},
                    {"actor": actor, "critic": critic, "target_actor": target_actor,
                     "target_critic": target_critic}, expect_pass_through=fixed)


# --- sfujim/TD3 DDPG.py@34770ccdcb51df6f6c7d85c1ba7e40d71b940d16 --------------------------------
# Correct (the authors' DDPG baseline): the target is built with its graph, then cut late by
# reward + (not_done * discount * target_Q).detach(); the actor loss passes through the critic.


class DDPGCritic(nn.Module):
    def __init__(self, state_dim: int, action_dim: int) -> None:
        super().__init__()
        self.l1 = nn.Linear(state_dim, 8)
        self.l2, self.l3 = nn.Linear(8 + action_dim, 6), nn.Linear(6, 1)

    def forward(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        q = F.relu(self.l1(state))
        q = F.relu(self.l2(torch.cat([q, action], 1)))
        return self.l3(q)


def sfujim_ddpg(seed: int, *, state_dim: int = 3, action_dim: int = 1, max_action: float = 2.0,
                batch: int = 4, discount: float = 0.99, tau: float = 0.001) -> RealCase:
    torch.manual_seed(seed)
    actor = Actor(state_dim, action_dim, max_action, (8, 6))
    actor_target = copy.deepcopy(actor)
    actor_optimizer = torch.optim.Adam(actor.parameters(), lr=1e-4)
    critic = DDPGCritic(state_dim, action_dim)
    critic_target = copy.deepcopy(critic)
    critic_optimizer = torch.optim.Adam(critic.parameters(), weight_decay=1e-2)
    state, next_state, action, reward, not_done = replay_sample(batch, state_dim, action_dim,
                                                                max_action)

    def step() -> dict[str, torch.Tensor]:
        target_Q = critic_target(next_state, actor_target(next_state))
        target_Q = reward + (not_done * discount * target_Q).detach()
        current_Q = critic(state, action)
        critic_loss = F.mse_loss(current_Q, target_Q)
        actor_loss = -critic(state, actor(state)).mean()
        for param, target_param in zip(critic.parameters(), critic_target.parameters()):
            target_param.data.copy_(tau * param.data + (1 - tau) * target_param.data)
        for param, target_param in zip(actor.parameters(), actor_target.parameters()):
            target_param.data.copy_(tau * param.data + (1 - tau) * target_param.data)
        return {"critic": critic_loss, "actor": actor_loss}

    return RealCase("sfujim_ddpg", "sfujim/TD3 DDPG.py@34770ccdcb51df6f6c7d85c1ba7e40d71b940d16",
                    "https://arxiv.org/abs/1802.09477 (authors' DDPG baseline, late .detach())",
                    "correct", step, {"critic": critic_optimizer, "actor": actor_optimizer},
                    {"actor": actor, "actor_target": actor_target, "critic": critic,
                     "critic_target": critic_target}, expect_pass_through=True)


CASES: dict[str, Callable[[int], RealCase]] = {
    "sfujim_td3": sfujim_td3,
    "handson_ddpg": handson_ddpg,
    "handson_ddpg_fixed": lambda s: handson_ddpg(s, fixed=True),
    "sfujim_ddpg": sfujim_ddpg,
}
