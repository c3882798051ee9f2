"""Reinforcement-learning training steps from public code: SAC (two implementations), DQN and
double DQN variants with their published target bugs, actor-critic and REINFORCE.

Each builder takes ``seed`` and returns a :class:`RealCase`; the text is ours, the structure
(modules, optimizers, order of calls, bug) is the repository's.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from realcode_common import RealCase
from torch import nn
from torch.distributions import Categorical, Normal
from torch.nn import functional as F

# --- vwxyzjn/cleanrl cleanrl/sac_continuous_action.py@2f4172eef96118b4d9d7111e1ecab1859a4b257c --
# Correct (the reference implementation, benchmarked in its docs): the TD target under no_grad,
# the actor's loss through both critics (pass-through), alpha a float after .item(), the
# targets soft-updated with data.copy_ at the end of the iteration.

LOG_STD_MAX, LOG_STD_MIN = 2, -5


class SoftQNetwork(nn.Module):
    def __init__(self, n_obs: int, n_act: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(n_obs + n_act, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, 1)

    def forward(self, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        x = torch.cat([x, a], 1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class Actor(nn.Module):
    def __init__(self, n_obs: int, n_act: int, hidden: int) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(n_obs, hidden), nn.Linear(hidden, hidden)
        self.fc_mean, self.fc_logstd = nn.Linear(hidden, n_act), nn.Linear(hidden, n_act)
        self.register_buffer("action_scale", torch.full((n_act,), 2.0))
        self.register_buffer("action_bias", torch.zeros(n_act))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = F.relu(self.fc2(F.relu(self.fc1(x))))
        log_std = torch.tanh(self.fc_logstd(x))
        log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (log_std + 1)
        return self.fc_mean(x), log_std

    def get_action(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        mean, log_std = self(x)
        normal = Normal(mean, log_std.exp())
        x_t = normal.rsample()
        y_t = torch.tanh(x_t)
        action = y_t * self.action_scale + self.action_bias
        log_prob = normal.log_prob(x_t)
        log_prob -= torch.log(self.action_scale * (1 - y_t.pow(2)) + 1e-6)
        return action, log_prob.sum(1, keepdim=True), torch.tanh(mean) * self.action_scale


def cleanrl_sac(seed: int, *, n_obs: int = 3, n_act: int = 1, hidden: int = 8, batch: int = 4,
                gamma: float = 0.99, tau: float = 0.005) -> RealCase:
    torch.manual_seed(seed)
    actor = Actor(n_obs, n_act, hidden)
    qf1, qf2 = SoftQNetwork(n_obs, n_act, hidden), SoftQNetwork(n_obs, n_act, hidden)
    qf1_target, qf2_target = copy.deepcopy(qf1), copy.deepcopy(qf2)
    q_optimizer = torch.optim.Adam(list(qf1.parameters()) + list(qf2.parameters()), lr=1e-3)
    actor_optimizer = torch.optim.Adam(list(actor.parameters()), lr=3e-4)
    target_entropy = -float(n_act)
    log_alpha = torch.zeros(1, requires_grad=True)
    a_optimizer = torch.optim.Adam([log_alpha], lr=1e-3)
    alpha = log_alpha.exp().item()
    obs, next_obs = torch.randn(batch, n_obs), torch.randn(batch, n_obs)
    actions, rewards = torch.rand(batch, n_act) * 4 - 2, torch.randn(batch)
    dones = (torch.rand(batch) < 0.2).float()

    def step() -> dict[str, torch.Tensor]:
        with torch.no_grad():
            next_actions, next_log_pi, _ = actor.get_action(next_obs)
            min_next = torch.min(qf1_target(next_obs, next_actions),
                                 qf2_target(next_obs, next_actions)) - alpha * next_log_pi
            next_q_value = rewards + (1 - dones) * gamma * min_next.view(-1)
        qf1_a_values = qf1(obs, actions).view(-1)
        qf2_a_values = qf2(obs, actions).view(-1)
        qf_loss = F.mse_loss(qf1_a_values, next_q_value) + F.mse_loss(qf2_a_values, next_q_value)
        pi, log_pi, _ = actor.get_action(obs)
        min_qf_pi = torch.min(qf1(obs, pi), qf2(obs, pi))
        actor_loss = ((alpha * log_pi) - min_qf_pi).mean()
        with torch.no_grad():
            _, log_pi, _ = actor.get_action(obs)
        alpha_loss = (-log_alpha.exp() * (log_pi + target_entropy)).mean()
        for net, target in ((qf1, qf1_target), (qf2, qf2_target)):
            for param, target_param in zip(net.parameters(), target.parameters()):
                target_param.data.copy_(tau * param.data + (1 - tau) * target_param.data)
        return {"qf": qf_loss, "actor": actor_loss, "alpha": alpha_loss}

    return RealCase("cleanrl_sac", "vwxyzjn/cleanrl cleanrl/sac_continuous_action.py@2f4172eef96"
                    "118b4d9d7111e1ecab1859a4b257c",
                    "https://docs.cleanrl.dev/rl-algorithms/sac/ (benchmarked reference)",
                    "correct", step, {"qf": q_optimizer, "actor": actor_optimizer,
                                      "alpha": a_optimizer},
                    {"actor": actor, "qf1": qf1, "qf2": qf2, "qf1_target": qf1_target,
                     "qf2_target": qf2_target}, expect_pass_through=True,
                    tensors={"log_alpha": log_alpha})


# --- pranz24/pytorch-soft-actor-critic sac.py@308b109023563601e1d253d7acd8bfa9e528c75e,
# model.py@d8ba7370e574340e9e0e9dd0276dbd2241ff3fd1 ---------------------------------------------
# Correct (fixed alpha, the default of main.py): one QNetwork module holds both Q heads; the
# critic target soft-updated by soft_update (utils.py) after the policy step.


class QNetwork(nn.Module):
    def __init__(self, n_obs: int, n_act: int, hidden: int) -> None:
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(n_obs + n_act, hidden), nn.Linear(hidden, hidden)
        self.linear3 = nn.Linear(hidden, 1)
        self.linear4, self.linear5 = nn.Linear(n_obs + n_act, hidden), nn.Linear(hidden, hidden)
        self.linear6 = nn.Linear(hidden, 1)

    def forward(self, state: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, ...]:
        xu = torch.cat([state, action], 1)
        x1 = self.linear3(F.relu(self.linear2(F.relu(self.linear1(xu)))))
        x2 = self.linear6(F.relu(self.linear5(F.relu(self.linear4(xu)))))
        return x1, x2


class GaussianPolicy(nn.Module):
    def __init__(self, n_obs: int, n_act: int, hidden: int) -> None:
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(n_obs, hidden), nn.Linear(hidden, hidden)
        self.mean_linear, self.log_std_linear = nn.Linear(hidden, n_act), nn.Linear(hidden, n_act)
        self.action_scale, self.action_bias = torch.tensor(1.0), torch.tensor(0.0)

    def sample(self, state: torch.Tensor) -> tuple[torch.Tensor, ...]:
        x = F.relu(self.linear2(F.relu(self.linear1(state))))
        mean = self.mean_linear(x)
        log_std = torch.clamp(self.log_std_linear(x), min=-20, max=2)
        normal = Normal(mean, log_std.exp())
        x_t = normal.rsample()
        y_t = torch.tanh(x_t)
        action = y_t * self.action_scale + self.action_bias
        log_prob = normal.log_prob(x_t)
        log_prob -= torch.log(self.action_scale * (1 - y_t.pow(2)) + 1e-6)
        return action, log_prob.sum(1, keepdim=True), torch.tanh(mean)


def pranz24_sac(seed: int, *, n_obs: int = 3, n_act: int = 1, hidden: int = 8, batch: int = 4,
                gamma: float = 0.99, tau: float = 0.005, alpha: float = 0.2) -> RealCase:
    torch.manual_seed(seed)
    critic, policy = QNetwork(n_obs, n_act, hidden), GaussianPolicy(n_obs, n_act, hidden)
    critic_target = QNetwork(n_obs, n_act, hidden)
    critic_target.load_state_dict(critic.state_dict())  # hard_update
    critic_optim = torch.optim.Adam(critic.parameters(), lr=3e-4)
    policy_optim = torch.optim.Adam(policy.parameters(), lr=3e-4)
    state, next_state = torch.randn(batch, n_obs), torch.randn(batch, n_obs)
    action, reward = torch.rand(batch, n_act) * 2 - 1, torch.randn(batch, 1)
    mask = (torch.rand(batch, 1) > 0.2).float()

    def step() -> dict[str, torch.Tensor]:
        with torch.no_grad():
            next_action, next_log_pi, _ = policy.sample(next_state)
            q1_next, q2_next = critic_target(next_state, next_action)
            next_q_value = reward + mask * gamma * (torch.min(q1_next, q2_next)
                                                    - alpha * next_log_pi)
        qf1, qf2 = critic(state, action)
        qf_loss = F.mse_loss(qf1, next_q_value) + F.mse_loss(qf2, next_q_value)
        pi, log_pi, _ = policy.sample(state)
        qf1_pi, qf2_pi = critic(state, pi)
        policy_loss = ((alpha * log_pi) - torch.min(qf1_pi, qf2_pi)).mean()
        for target_param, param in zip(critic_target.parameters(), critic.parameters()):
            target_param.data.copy_(target_param.data * (1.0 - tau) + param.data * tau)
        return {"critic": qf_loss, "policy": policy_loss}

    return RealCase("pranz24_sac", "pranz24/pytorch-soft-actor-critic sac.py@308b109023563601e1d"
                    "253d7acd8bfa9e528c75e", "https://arxiv.org/abs/1812.05905 (Haarnoja et al.,"
                    " the algorithm it implements)", "correct", step,
                    {"critic": critic_optim, "policy": policy_optim},
                    {"critic": critic, "policy": policy, "critic_target": critic_target},
                    expect_pass_through=True)


# --- vwxyzjn/cleanrl cleanrl/dqn.py ----------------------------------------------------------
# Correct: the one visible cut, `with torch.no_grad(): target_max, _ = target_network(...)`.


def cleanrl_dqn(seed: int, *, n_obs: int = 4, n_act: int = 2, batch: int = 4,
                gamma: float = 0.99, tau: float = 1.0) -> RealCase:
    torch.manual_seed(seed)

    def q_net() -> nn.Module:
        return nn.Sequential(nn.Linear(n_obs, 12), nn.ReLU(), nn.Linear(12, 8), nn.ReLU(),
                             nn.Linear(8, n_act))

    q_network, target_network = q_net(), q_net()
    optimizer = torch.optim.Adam(q_network.parameters(), lr=2.5e-4)
    target_network.load_state_dict(q_network.state_dict())
    obs, next_obs = torch.randn(batch, n_obs), torch.randn(batch, n_obs)
    actions, rewards = torch.randint(0, n_act, (batch, 1)), torch.randn(batch, 1)
    dones = (torch.rand(batch, 1) < 0.2).float()

    def step() -> torch.Tensor:
        with torch.no_grad():
            target_max, _ = target_network(next_obs).max(dim=1)
            td_target = rewards.flatten() + gamma * target_max * (1 - dones.flatten())
        old_val = q_network(obs).gather(1, actions).squeeze()
        loss = F.mse_loss(td_target, old_val)
        for target_param, param in zip(target_network.parameters(), q_network.parameters()):
            target_param.data.copy_(tau * param.data + (1.0 - tau) * target_param.data)
        return loss

    return RealCase("cleanrl_dqn", "vwxyzjn/cleanrl cleanrl/dqn.py@b5fb801e60651ba15cf784866db6c"
                    "b7c3490b60c", "https://docs.cleanrl.dev/rl-algorithms/dqn/ (benchmarked "
                    "reference)", "correct", step, optimizer,
                    {"q_network": q_network, "target_network": target_network})


# --- philtabor/Deep-Q-Learning-Paper-To-Code DDQN/ddqn_agent.py@7c014a33cedd4a441dad1c40a15540bc6
# 13caa07: q_next (the target network) runs with gradients: its .grad fills every step
# (philtabor/Deep-Q-Learning-Paper-To-Code#9 and #16, whose fix is torch.no_grad()). The loss is
# called as loss(q_target, q_pred), q_next[dones] = 0.0 written in place, as in the original.


class DeepQNetwork(nn.Module):
    def __init__(self, n_actions: int, channels: int = 4) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, 8, 8, stride=4)
        self.conv2 = nn.Conv2d(8, 16, 4, stride=2)
        self.conv3 = nn.Conv2d(16, 16, 3, stride=1)
        self.fc1, self.fc2 = nn.Linear(16, 32), nn.Linear(32, n_actions)
        self.optimizer = torch.optim.RMSprop(self.parameters(), lr=1e-4)
        self.loss = nn.MSELoss()

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv3(F.relu(self.conv2(F.relu(self.conv1(state))))))
        return self.fc2(F.relu(self.fc1(x.view(x.size(0), -1))))


def philtabor_ddqn(seed: int, *, no_grad: bool = False, batch: int = 4, n_actions: int = 3,
                   gamma: float = 0.99, replace: int = 1000) -> RealCase:
    torch.manual_seed(seed)
    q_eval, q_next = DeepQNetwork(n_actions), DeepQNetwork(n_actions)
    states, states_ = torch.rand(batch, 4, 36, 36), torch.rand(batch, 4, 36, 36)
    actions = torch.randint(0, n_actions, (batch,))
    rewards, dones = torch.randn(batch), torch.rand(batch) < 0.25
    counter = {"learn_step": 0}

    def step() -> torch.Tensor:
        if counter["learn_step"] % replace == 0:  # replace_target_network
            q_next.load_state_dict(q_eval.state_dict())
        indices = np.arange(batch)
        q_pred = q_eval.forward(states)[indices, actions]
        if no_grad:
            with torch.no_grad():
                q_next_values = q_next.forward(states_)
        else:
            q_next_values = q_next.forward(states_)  # audit: fix here
        q_eval_next = q_eval.forward(states_)
        max_actions = torch.argmax(q_eval_next, dim=1)
        q_next_values[dones] = 0.0
        q_target = rewards + gamma * q_next_values[indices, max_actions]
        counter["learn_step"] += 1
        return q_eval.loss(q_target, q_pred)

    return RealCase(f"philtabor_ddqn{'_no_grad' if no_grad else ''}",
                    "philtabor/Deep-Q-Learning-Paper-To-Code DDQN/ddqn_agent.py@7c014a33cedd4a4"
                    "41dad1c40a15540bc613c560e",
                    "https://github.com/philtabor/Deep-Q-Learning-Paper-To-Code/issues/16",
                    "correct" if no_grad else "leaks", step, q_eval.optimizer,
                    {"q_eval": q_eval, "q_next": q_next})


# --- datawhalechina/easy-rl notebooks/DoubleDQN.ipynb@1782eb8f99f66024a6e1646c87f84c4291f27ebb --
# The TD target has no detach (datawhalechina/easy-rl#117, point 1): target_net receives
# gradient. #117's point 3: policy_net and target_net "maintain the same network", so the target
# is computed by the network being trained: a trained target. The fixed twins separate the
# networks and compute the target without gradient, as #117 proposes.


class MLP(nn.Module):
    def __init__(self, n_states: int, n_actions: int, hidden_dim: int = 8) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(n_states, hidden_dim), nn.Linear(hidden_dim, hidden_dim)
        self.fc3 = nn.Linear(hidden_dim, n_actions)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def easyrl_ddqn(seed: int, *, fixed: bool = False, same_net: bool = False, batch: int = 4,
                n_states: int = 4, n_actions: int = 2, gamma: float = 0.99) -> RealCase:
    torch.manual_seed(seed)
    policy_net = MLP(n_states, n_actions)
    target_net = policy_net if same_net and not fixed else MLP(n_states, n_actions)
    if target_net is not policy_net:
        for target_param, param in zip(target_net.parameters(), policy_net.parameters()):
            target_param.data.copy_(param.data)
    optimizer = torch.optim.Adam(policy_net.parameters(), lr=1e-4)
    # the batch from its own generator: the same for every twin, however many networks it built
    g = torch.Generator().manual_seed(seed)
    state_batch = torch.randn(batch, n_states, generator=g)
    next_state_batch = torch.randn(batch, n_states, generator=g)
    action_batch = torch.randint(0, n_actions, (batch, 1), generator=g)
    reward_batch = torch.randn(batch, generator=g)
    done_batch = (torch.rand(batch, 1, generator=g) < 0.2).float()

    def step() -> torch.Tensor:
        q_value_batch = policy_net(state_batch).gather(dim=1, index=action_batch)
        with torch.set_grad_enabled(not fixed):
            next_q_value_batch = policy_net(next_state_batch)
            next_target_value_batch = target_net(next_state_batch)  # audit: fix here [easyrl_ddqn]
            next_target_q_value_batch = next_target_value_batch.gather(
                1, torch.max(next_q_value_batch, 1)[1].unsqueeze(1))
            expected = (reward_batch  # audit: fix here [easyrl_ddqn_same_net]
                        + gamma * next_target_q_value_batch * (1 - done_batch))
        return nn.MSELoss()(q_value_batch, expected)

    kind = "_same_net" if same_net else ""
    truth = "correct" if fixed else ("targets" if same_net else "leaks")
    return RealCase(f"easyrl_ddqn{kind}{'_fixed' if fixed else ''}",
                    "datawhalechina/easy-rl notebooks/DoubleDQN.ipynb@1782eb8f99f66024a6e1646c87"
                    "f84c4291f27ebb", "https://github.com/datawhalechina/easy-rl/pull/117",
                    truth, step, optimizer,
                    {"policy_net": policy_net}
                    | ({} if target_net is policy_net else {"target_net": target_net}))


# --- pytorch/examples reinforcement_learning/actor_critic.py@1c16b6c4b4e30902b4fcdbd4d77ed19c60e4b
# 36d, reinforce.py: one optimizer over a shared trunk with an action head and a value head. The
# advantage is R - value.item() (a number). Without .item() the policy term trains the value
# head and the trunk through the baseline: the bug of
# astariul/encode-attend-navigate-pytorch#2 (fixed in #3 by detaching the critic's value).


class ActorCriticPolicy(nn.Module):
    def __init__(self, hidden: int = 8) -> None:
        super().__init__()
        self.affine1 = nn.Linear(4, hidden)
        self.action_head, self.value_head = nn.Linear(hidden, 2), nn.Linear(hidden, 1)
        self.saved_actions: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.rewards: list[float] = []

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = F.relu(self.affine1(x))
        return F.softmax(self.action_head(x), dim=-1), self.value_head(x)


def actor_critic(seed: int, *, item: bool = True, steps: int = 5, gamma: float = 0.99
                 ) -> RealCase:
    torch.manual_seed(seed)
    model = ActorCriticPolicy()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-2)
    states, rewards = torch.randn(steps, 4), torch.rand(steps).tolist()
    eps = np.finfo(np.float32).eps.item()

    def step() -> torch.Tensor:
        for t in range(steps):  # select_action, one per environment step
            probs, state_value = model(states[t:t + 1])
            m = Categorical(probs)
            model.saved_actions.append((m.log_prob(m.sample()), state_value))
            model.rewards.append(rewards[t])
        R, returns = 0.0, []
        for r in model.rewards[::-1]:
            R = r + gamma * R
            returns.insert(0, R)
        returns_t = torch.tensor(returns)
        returns_t = (returns_t - returns_t.mean()) / (returns_t.std() + eps)
        policy_losses, value_losses = [], []
        for (log_prob, value), R_t in zip(model.saved_actions, returns_t):
            advantage = R_t - (value.item() if item else value)  # audit: fix here
            policy_losses.append(-log_prob * advantage)
            value_losses.append(F.smooth_l1_loss(value, torch.tensor([[R_t.item()]])))
        loss = torch.stack(policy_losses).sum() + torch.stack(value_losses).sum()
        del model.rewards[:]
        del model.saved_actions[:]
        return loss

    return RealCase(f"actor_critic{'' if item else '_no_item'}",
                    "pytorch/examples reinforcement_learning/actor_critic.py@1c16b6c4b4e30902b4f"
                    "cbd4d77ed19c60e4b36d",
                    "https://github.com/astariul/encode-attend-navigate-pytorch/pull/3",
                    "correct" if item else "targets", step, optimizer, {"model": model})


def reinforce(seed: int, *, steps: int = 5, gamma: float = 0.99) -> RealCase:
    torch.manual_seed(seed)
    policy = nn.ModuleDict({"affine1": nn.Linear(4, 8), "dropout": nn.Dropout(p=0.6),
                            "affine2": nn.Linear(8, 2)})
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
    states, rewards = torch.randn(steps, 4), torch.rand(steps).tolist()

    def forward(x: torch.Tensor) -> torch.Tensor:
        x = F.relu(policy["dropout"](policy["affine1"](x)))
        return F.softmax(policy["affine2"](x), dim=1)

    def step() -> torch.Tensor:
        saved_log_probs = []
        for t in range(steps):
            m = Categorical(forward(states[t:t + 1]))
            saved_log_probs.append(m.log_prob(m.sample()))
        R, returns = 0.0, []
        for r in rewards[::-1]:
            R = r + gamma * R
            returns.insert(0, R)
        returns_t = torch.tensor(returns)
        returns_t = (returns_t - returns_t.mean()) / (returns_t.std() + 1e-7)
        return torch.cat([-lp * R_t for lp, R_t in zip(saved_log_probs, returns_t)]).sum()

    return RealCase("reinforce", "pytorch/examples reinforcement_learning/reinforce.py@1c16b6c4b4"
                    "e30902b4fcdbd4d77ed19c60e4b36d", "https://doi.org/10.1007/BF00992696 "
                    "(Williams 1992, the estimator it implements)", "correct", step, optimizer,
                    {"policy": policy})


CASES = {
    "cleanrl_sac": cleanrl_sac, "pranz24_sac": pranz24_sac, "cleanrl_dqn": cleanrl_dqn,
    "philtabor_ddqn": philtabor_ddqn,
    "philtabor_ddqn_no_grad": lambda s: philtabor_ddqn(s, no_grad=True),
    "easyrl_ddqn": easyrl_ddqn, "easyrl_ddqn_fixed": lambda s: easyrl_ddqn(s, fixed=True),
    "easyrl_ddqn_same_net": lambda s: easyrl_ddqn(s, same_net=True),
    "easyrl_ddqn_same_net_fixed": lambda s: easyrl_ddqn(s, same_net=True, fixed=True),
    "actor_critic": actor_critic, "actor_critic_no_item": lambda s: actor_critic(s, item=False),
    "reinforce": reinforce,
}
