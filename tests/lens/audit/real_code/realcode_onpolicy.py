"""On-policy training steps from public code: CleanRL's PPO (rollout buffers written in place
under no_grad) and the recurrent A2C of pytorch-a2c-ppo-acktr-gail, with its twin whose
advantage is not detached.

Each builder takes ``seed`` and returns a :class:`RealCase`; the text is ours, the structure
(modules, optimizers, order of calls, bug) is the repository's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from realcode_common import RealCase
from torch import nn
from torch.distributions import Categorical

# --- vwxyzjn/cleanrl cleanrl/ppo.py@fe8d8a03c41a7ef5b523e2e354bd01c363e786bb -------------------
# Correct (the reference PPO, benchmarked in docs.cleanrl.dev): the rollout fills preallocated
# buffers with get_action_and_value under no_grad (values[step] written in place), GAE under
# no_grad, then the clipped-ratio policy loss, the clipped value loss and the entropy bonus. One
# iteration is num_minibatches steps; step() is one minibatch, and the rollout runs at the first
# minibatch of an iteration.

SQRT2 = float(np.sqrt(2))


def layer_init(layer: nn.Linear, std: float = SQRT2, bias_const: float = 0.0) -> nn.Linear:
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class PPOAgent(nn.Module):
    def __init__(self, n_obs: int, n_act: int, hidden: int = 8) -> None:
        super().__init__()
        self.critic = nn.Sequential(layer_init(nn.Linear(n_obs, hidden)), nn.Tanh(),
                                    layer_init(nn.Linear(hidden, hidden)), nn.Tanh(),
                                    layer_init(nn.Linear(hidden, 1), std=1.0))
        self.actor = nn.Sequential(layer_init(nn.Linear(n_obs, hidden)), nn.Tanh(),
                                   layer_init(nn.Linear(hidden, hidden)), nn.Tanh(),
                                   layer_init(nn.Linear(hidden, n_act), std=0.01))

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x)

    def get_action_and_value(self, x: torch.Tensor, action: torch.Tensor | None = None
                             ) -> tuple[torch.Tensor, ...]:
        logits = self.actor(x)
        probs = Categorical(logits=logits)
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)


def cleanrl_ppo(seed: int, *, n_obs: int = 4, n_act: int = 2, num_envs: int = 2,
                num_steps: int = 4, num_minibatches: int = 2, num_iterations: int = 10,
                learning_rate: float = 2.5e-4, gamma: float = 0.99, gae_lambda: float = 0.95,
                clip_coef: float = 0.2, ent_coef: float = 0.01, vf_coef: float = 0.5
                ) -> RealCase:
    torch.manual_seed(seed)
    np.random.seed(seed)
    agent = PPOAgent(n_obs, n_act)
    optimizer = torch.optim.Adam(agent.parameters(), lr=learning_rate, eps=1e-5)
    batch_size = num_envs * num_steps
    minibatch_size = batch_size // num_minibatches
    obs = torch.zeros((num_steps, num_envs, n_obs))
    actions = torch.zeros((num_steps, num_envs))
    logprobs = torch.zeros((num_steps, num_envs))
    rewards = torch.zeros((num_steps, num_envs))
    dones = torch.zeros((num_steps, num_envs))
    values = torch.zeros((num_steps, num_envs))
    st: dict[str, Any] = {"next_obs": torch.randn(num_envs, n_obs),
                          "next_done": torch.zeros(num_envs), "iteration": 0,
                          "mb": num_minibatches, "b": None, "b_inds": np.arange(batch_size)}

    def env_step(action: torch.Tensor) -> tuple[torch.Tensor, ...]:
        # stands in for envs.step: random observations, rewards and dones
        return (torch.randn(num_envs, n_obs), torch.rand(num_envs),
                (torch.rand(num_envs) < 0.2).float())

    def rollout() -> None:
        st["iteration"] += 1
        frac = 1.0 - (st["iteration"] - 1.0) / num_iterations
        optimizer.param_groups[0]["lr"] = frac * learning_rate
        for step in range(num_steps):
            obs[step] = st["next_obs"]
            dones[step] = st["next_done"]
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(st["next_obs"])
                values[step] = value.flatten()
            actions[step] = action
            logprobs[step] = logprob
            st["next_obs"], reward, st["next_done"] = env_step(action)
            rewards[step] = reward.view(-1)
        with torch.no_grad():
            next_value = agent.get_value(st["next_obs"]).reshape(1, -1)
            advantages = torch.zeros_like(rewards)
            lastgaelam = 0
            for t in reversed(range(num_steps)):
                if t == num_steps - 1:
                    nextnonterminal = 1.0 - st["next_done"]
                    nextvalues = next_value
                else:
                    nextnonterminal = 1.0 - dones[t + 1]
                    nextvalues = values[t + 1]
                delta = rewards[t] + gamma * nextvalues * nextnonterminal - values[t]
                advantages[t] = lastgaelam = (delta + gamma * gae_lambda * nextnonterminal
                                              * lastgaelam)
            returns = advantages + values
        st["b"] = (obs.reshape((-1, n_obs)), logprobs.reshape(-1), actions.reshape(-1),
                   advantages.reshape(-1), returns.reshape(-1), values.reshape(-1))
        np.random.shuffle(st["b_inds"])
        st["mb"] = 0

    def step() -> torch.Tensor:
        if st["mb"] == num_minibatches:
            rollout()
        b_obs, b_logprobs, b_actions, b_advantages, b_returns, b_values = st["b"]
        start = st["mb"] * minibatch_size
        mb_inds = st["b_inds"][start:start + minibatch_size]
        st["mb"] += 1
        _, newlogprob, entropy, newvalue = agent.get_action_and_value(
            b_obs[mb_inds], b_actions.long()[mb_inds])
        logratio = newlogprob - b_logprobs[mb_inds]
        ratio = logratio.exp()
        with torch.no_grad():
            _approx_kl = ((ratio - 1) - logratio).mean()  # logged by the source
        mb_advantages = b_advantages[mb_inds]
        mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)
        pg_loss1 = -mb_advantages * ratio
        pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)
        pg_loss = torch.max(pg_loss1, pg_loss2).mean()
        newvalue = newvalue.view(-1)
        v_loss_unclipped = (newvalue - b_returns[mb_inds]) ** 2
        v_clipped = b_values[mb_inds] + torch.clamp(newvalue - b_values[mb_inds],
                                                    -clip_coef, clip_coef)
        v_loss_clipped = (v_clipped - b_returns[mb_inds]) ** 2
        v_loss = 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()
        entropy_loss = entropy.mean()
        return pg_loss - ent_coef * entropy_loss + v_loss * vf_coef

    return RealCase("cleanrl_ppo", "vwxyzjn/cleanrl cleanrl/ppo.py@fe8d8a03c41a7ef5b523e2e354bd01"
                    "c363e786bb", "https://docs.cleanrl.dev/rl-algorithms/ppo/ (benchmarked "
                    "reference)", "correct", step, optimizer, {"agent": agent})


# --- ikostrikov/pytorch-a2c-ppo-acktr-gail a2c_ppo_acktr/algo/a2c_acktr.py, model.py, storage.py,
# main.py@41332b78dfb50321c29bade65f9d244387f68a60 ---------------------------------------------
# Correct: MLPBase with recurrent=True (a GRU trunk shared by actor and critic). The rollout runs
# actor_critic.act under no_grad and RolloutStorage.insert copy_()s its results; next_value under
# no_grad; compute_returns with the defaults (use_gae=False, use_proper_time_limits=False); then
# A2C_ACKTR.update: evaluate_actions from the stored first hidden state and masks, advantages =
# returns - values, action_loss = -(advantages.detach() * log_probs).mean(). main.py's
# after_update, which follows the optimizer step, opens the next step().
# The twin without the .detach() trains the critic through the baseline of the policy term
# (truth "targets"): the bug fixed in deepchem/deepchem#618 ("the advantage should be treated as
# just a constant") and icoxfog417/baby-steps-of-rl-ja#16 (fixed with stop_gradient).


class FixedCategorical(Categorical):
    def sample(self) -> torch.Tensor:  # one action per row, as a column
        return super().sample().unsqueeze(-1)

    def log_probs(self, actions: torch.Tensor) -> torch.Tensor:
        log_prob = super().log_prob(actions.squeeze(-1))
        return log_prob.view(actions.size(0), -1).sum(-1).unsqueeze(-1)


class CategoricalHead(nn.Module):
    def __init__(self, num_inputs: int, num_outputs: int) -> None:
        super().__init__()
        self.linear = nn.Linear(num_inputs, num_outputs)
        nn.init.orthogonal_(self.linear.weight.data, gain=0.01)
        nn.init.constant_(self.linear.bias.data, 0)

    def forward(self, x: torch.Tensor) -> FixedCategorical:
        return FixedCategorical(logits=self.linear(x))


class MLPBase(nn.Module):
    def __init__(self, num_inputs: int, hidden_size: int = 8) -> None:
        super().__init__()
        self._hidden_size = hidden_size
        self.gru = nn.GRU(num_inputs, hidden_size)
        for name, param in self.gru.named_parameters():
            if "bias" in name:
                nn.init.constant_(param, 0)
            elif "weight" in name:
                nn.init.orthogonal_(param)
        num_inputs = hidden_size

        def init_(m: nn.Linear) -> nn.Linear:
            nn.init.orthogonal_(m.weight.data, gain=np.sqrt(2))
            nn.init.constant_(m.bias.data, 0)
            return m

        self.actor = nn.Sequential(init_(nn.Linear(num_inputs, hidden_size)), nn.Tanh(),
                                   init_(nn.Linear(hidden_size, hidden_size)), nn.Tanh())
        self.critic = nn.Sequential(init_(nn.Linear(num_inputs, hidden_size)), nn.Tanh(),
                                    init_(nn.Linear(hidden_size, hidden_size)), nn.Tanh())
        self.critic_linear = init_(nn.Linear(hidden_size, 1))

    @property
    def output_size(self) -> int:
        return self._hidden_size

    def _forward_gru(self, x: torch.Tensor, hxs: torch.Tensor, masks: torch.Tensor
                     ) -> tuple[torch.Tensor, torch.Tensor]:
        if x.size(0) == hxs.size(0):
            x, hxs = self.gru(x.unsqueeze(0), (hxs * masks).unsqueeze(0))
            return x.squeeze(0), hxs.squeeze(0)
        N = hxs.size(0)
        T = int(x.size(0) / N)
        x = x.view(T, N, x.size(1))
        masks = masks.view(T, N)
        zeros = (masks[1:] == 0.0).any(dim=-1).nonzero().squeeze().cpu()
        if zeros.dim() == 0:
            has_zeros = [zeros.item() + 1]
        else:
            has_zeros = (zeros + 1).numpy().tolist()
        has_zeros = [0, *has_zeros, T]
        hxs = hxs.unsqueeze(0)
        outputs = []
        for i in range(len(has_zeros) - 1):
            start_idx, end_idx = has_zeros[i], has_zeros[i + 1]
            rnn_scores, hxs = self.gru(x[start_idx:end_idx],
                                       hxs * masks[start_idx].view(1, -1, 1))
            outputs.append(rnn_scores)
        x = torch.cat(outputs, dim=0).view(T * N, -1)
        return x, hxs.squeeze(0)

    def forward(self, inputs: torch.Tensor, rnn_hxs: torch.Tensor, masks: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x, rnn_hxs = self._forward_gru(inputs, rnn_hxs, masks)
        return self.critic_linear(self.critic(x)), self.actor(x), rnn_hxs


class A2CPolicy(nn.Module):
    def __init__(self, num_inputs: int, n_act: int) -> None:
        super().__init__()
        self.base = MLPBase(num_inputs)
        self.dist = CategoricalHead(self.base.output_size, n_act)

    def act(self, inputs: torch.Tensor, rnn_hxs: torch.Tensor, masks: torch.Tensor
            ) -> tuple[torch.Tensor, ...]:
        value, actor_features, rnn_hxs = self.base(inputs, rnn_hxs, masks)
        dist = self.dist(actor_features)
        action = dist.sample()
        return value, action, dist.log_probs(action), rnn_hxs

    def get_value(self, inputs: torch.Tensor, rnn_hxs: torch.Tensor, masks: torch.Tensor
                  ) -> torch.Tensor:
        return self.base(inputs, rnn_hxs, masks)[0]

    def evaluate_actions(self, inputs: torch.Tensor, rnn_hxs: torch.Tensor,
                         masks: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, ...]:
        value, actor_features, rnn_hxs = self.base(inputs, rnn_hxs, masks)
        dist = self.dist(actor_features)
        return value, dist.log_probs(action), dist.entropy().mean(), rnn_hxs


class RolloutStorage:
    def __init__(self, num_steps: int, num_processes: int, n_obs: int, hidden: int) -> None:
        self.obs = torch.zeros(num_steps + 1, num_processes, n_obs)
        self.recurrent_hidden_states = torch.zeros(num_steps + 1, num_processes, hidden)
        self.rewards = torch.zeros(num_steps, num_processes, 1)
        self.value_preds = torch.zeros(num_steps + 1, num_processes, 1)
        self.returns = torch.zeros(num_steps + 1, num_processes, 1)
        self.action_log_probs = torch.zeros(num_steps, num_processes, 1)
        self.actions = torch.zeros(num_steps, num_processes, 1).long()
        self.masks = torch.ones(num_steps + 1, num_processes, 1)
        self.bad_masks = torch.ones(num_steps + 1, num_processes, 1)
        self.num_steps = num_steps
        self.step = 0

    def insert(self, obs: torch.Tensor, hxs: torch.Tensor, actions: torch.Tensor,
               action_log_probs: torch.Tensor, value_preds: torch.Tensor,
               rewards: torch.Tensor, masks: torch.Tensor, bad_masks: torch.Tensor) -> None:
        self.obs[self.step + 1].copy_(obs)
        self.recurrent_hidden_states[self.step + 1].copy_(hxs)
        self.actions[self.step].copy_(actions)
        self.action_log_probs[self.step].copy_(action_log_probs)
        self.value_preds[self.step].copy_(value_preds)
        self.rewards[self.step].copy_(rewards)
        self.masks[self.step + 1].copy_(masks)
        self.bad_masks[self.step + 1].copy_(bad_masks)
        self.step = (self.step + 1) % self.num_steps

    def after_update(self) -> None:
        self.obs[0].copy_(self.obs[-1])
        self.recurrent_hidden_states[0].copy_(self.recurrent_hidden_states[-1])
        self.masks[0].copy_(self.masks[-1])
        self.bad_masks[0].copy_(self.bad_masks[-1])

    def compute_returns(self, next_value: torch.Tensor, gamma: float) -> None:
        # use_gae=False, use_proper_time_limits=False
        self.returns[-1] = next_value
        for step in reversed(range(self.rewards.size(0))):
            self.returns[step] = self.returns[step + 1] * gamma * self.masks[step + 1] \
                + self.rewards[step]


def ikostrikov_a2c(seed: int, *, detach: bool = True, n_obs: int = 3, n_act: int = 2,
                   num_steps: int = 2, num_processes: int = 2, gamma: float = 0.99,
                   value_loss_coef: float = 0.5, entropy_coef: float = 0.01) -> RealCase:
    torch.manual_seed(seed)
    actor_critic = A2CPolicy(n_obs, n_act)
    optimizer = torch.optim.RMSprop(actor_critic.parameters(), 7e-4, eps=1e-5, alpha=0.99)
    hidden = actor_critic.base.output_size
    rollouts = RolloutStorage(num_steps, num_processes, n_obs, hidden)
    rollouts.obs[0].copy_(torch.randn(num_processes, n_obs))
    st = {"updated": False}

    def step() -> torch.Tensor:
        if st["updated"]:  # main.py calls rollouts.after_update() after agent.update()
            rollouts.after_update()
        st["updated"] = True
        for s in range(num_steps):
            with torch.no_grad():
                value, action, action_log_prob, hxs = actor_critic.act(
                    rollouts.obs[s], rollouts.recurrent_hidden_states[s], rollouts.masks[s])
            obs = torch.randn(num_processes, n_obs)  # envs.step(action)
            reward = torch.rand(num_processes, 1)
            done = (torch.rand(num_processes) < 0.3).tolist()
            masks = torch.FloatTensor([[0.0] if d else [1.0] for d in done])
            bad_masks = torch.ones(num_processes, 1)
            rollouts.insert(obs, hxs, action, action_log_prob, value, reward, masks, bad_masks)
        with torch.no_grad():
            next_value = actor_critic.get_value(rollouts.obs[-1],
                                                rollouts.recurrent_hidden_states[-1],
                                                rollouts.masks[-1]).detach()
        rollouts.compute_returns(next_value, gamma)
        # A2C_ACKTR.update
        values, action_log_probs, dist_entropy, _ = actor_critic.evaluate_actions(
            rollouts.obs[:-1].view(-1, n_obs),
            rollouts.recurrent_hidden_states[0].view(-1, hidden),
            rollouts.masks[:-1].view(-1, 1), rollouts.actions.view(-1, 1))
        values = values.view(num_steps, num_processes, 1)
        action_log_probs = action_log_probs.view(num_steps, num_processes, 1)
        advantages = rollouts.returns[:-1] - values
        value_loss = advantages.pow(2).mean()
        adv = advantages.detach() if detach else advantages
        action_loss = -(adv * action_log_probs).mean()  # audit: fix here
        return value_loss * value_loss_coef + action_loss - dist_entropy * entropy_coef

    return RealCase(f"ikostrikov_a2c{'' if detach else '_no_detach'}",
                    "ikostrikov/pytorch-a2c-ppo-acktr-gail a2c_ppo_acktr/algo/a2c_acktr.py@41332"
                    "b78dfb50321c29bade65f9d244387f68a60",
                    "https://arxiv.org/abs/1602.01783 (A2C, the synchronous A3C it implements: "
                    "the advantage detached)" if detach else
                    "https://github.com/deepchem/deepchem/pull/618, "
                    "https://github.com/icoxfog417/baby-steps-of-rl-ja/issues/16",
                    "correct" if detach else "targets", step, optimizer,
                    {"actor_critic": actor_critic})


CASES: dict[str, Callable[[int], RealCase]] = {
    "cleanrl_ppo": cleanrl_ppo,
    "ikostrikov_a2c": ikostrikov_a2c,
    "ikostrikov_a2c_no_detach": lambda s: ikostrikov_a2c(s, detach=False),
}
