"""More reinforcement-learning steps from public code: a dueling double DQN whose loss module
is held by the network, Dreamer's three losses (world model, actor, value) over an imagined
rollout, and stable-baselines3's TD3.

Each builder takes ``seed`` and returns a :class:`RealCase`; the text is ours, the structure
(modules, optimizers, order of calls, bug) is the repository's.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import numpy as np
import torch
from realcode_common import RealCase
from torch import nn
from torch.nn import functional as F

# --- philtabor/Youtube-Code-Repository ReinforcementLearning/DeepQLearning/dueling_ddqn_torch.py
# @eb3aa9733158a4f7c4ba1fefaa812b27ffd889b6: the network holds its optimizer and its loss
# (self.optimizer = Adam, self.loss = nn.MSELoss()), the step calls q_eval.loss(q_target,
# q_pred). The target network q_next runs with gradients, so every step fills its .grad: the
# bug the same author's Deep-Q-Learning-Paper-To-Code#16 reports for its DDQN (fix:
# torch.no_grad()). q_next[dones] = 0.0 is written in place, as in the original.


class DuelingDeepQNetwork(nn.Module):
    def __init__(self, lr: float, n_actions: int, input_dims: tuple[int, ...],
                 hidden: int = 8) -> None:
        super().__init__()
        self.fc1 = nn.Linear(*input_dims, hidden)
        self.V = nn.Linear(hidden, 1)
        self.A = nn.Linear(hidden, n_actions)
        self.optimizer = torch.optim.Adam(self.parameters(), lr=lr)
        self.loss = nn.MSELoss()

    def forward(self, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        flat1 = F.relu(self.fc1(state))
        return self.V(flat1), self.A(flat1)


def tabor_dueling_ddqn(seed: int, *, no_grad: bool = False, batch: int = 4, n_actions: int = 3,
                       input_dims: tuple[int, ...] = (4,), gamma: float = 0.99,
                       replace: int = 1000) -> RealCase:
    torch.manual_seed(seed)
    q_eval = DuelingDeepQNetwork(5e-4, n_actions, input_dims)
    q_next = DuelingDeepQNetwork(5e-4, n_actions, input_dims)
    states, states_ = torch.randn(batch, *input_dims), torch.randn(batch, *input_dims)
    actions = torch.randint(0, n_actions, (batch,))
    rewards, dones = torch.randn(batch), torch.rand(batch) < 0.25
    counter = {"learn_step": 0}

    def step() -> torch.Tensor:
        if counter["learn_step"] % replace == 0:  # replace_target_network
            q_next.load_state_dict(q_eval.state_dict())
        indices = np.arange(batch)
        V_s, A_s = q_eval.forward(states)
        if no_grad:
            with torch.no_grad():
                V_s_, A_s_ = q_next.forward(states_)
        else:
            V_s_, A_s_ = q_next.forward(states_)  # audit: fix here
        V_s_eval, A_s_eval = q_eval.forward(states_)
        q_pred = torch.add(V_s, (A_s - A_s.mean(dim=1, keepdim=True)))[indices, actions]
        q_next_values = torch.add(V_s_, (A_s_ - A_s_.mean(dim=1, keepdim=True)))
        q_eval_next = torch.add(V_s_eval, (A_s_eval - A_s_eval.mean(dim=1, keepdim=True)))
        max_actions = torch.argmax(q_eval_next, dim=1)
        q_next_values[dones] = 0.0
        q_target = rewards + gamma * q_next_values[indices, max_actions]
        counter["learn_step"] += 1
        return q_eval.loss(q_target, q_pred)

    return RealCase(f"tabor_dueling_ddqn{'_no_grad' if no_grad else ''}",
                    "philtabor/Youtube-Code-Repository ReinforcementLearning/DeepQLearning/"
                    "dueling_ddqn_torch.py@eb3aa9733158a4f7c4ba1fefaa812b27ffd889b6",
                    "https://github.com/philtabor/Deep-Q-Learning-Paper-To-Code/issues/16",
                    "correct" if no_grad else "leaks", step, q_eval.optimizer,
                    {"q_eval": q_eval, "q_next": q_next})


# --- juliusfrost/dreamer-pytorch dreamer/algos/dreamer_algo.py, dreamer/models/rnns.py,
# dreamer/utils/module.py@f973caff6efc843c8dc2f2fb0c07b061b1f8ef74: Dreamer (v1) with three
# optimizers (world model, actor, value). The world-model loss is KL (clamped below at free_nats)
# + reward and image likelihoods; the actor loss is minus the lambda-returns of a policy rollout
# imagined by the RSSM from the detached posteriors, backpropagated through the frozen dynamics
# (FreezeParameters sets requires_grad=False on the world model, and on the value model for the
# returns), into the actions; the value loss fits the detached returns. The second case runs
# the imagined rollout under torch.no_grad() instead of FreezeParameters, as
# esteveste/dreamerV2-pytorch does ("doesn't support learning the actor by propagating the value
# network (torch.no_grad())", its README, quoted in esteveste/dreamerV2-pytorch#1): the actor
# then gets no gradient at all.


class FreezeParameters:
    """Context manager that sets requires_grad=False on the modules' parameters, and back."""

    def __init__(self, modules: list[nn.Module]) -> None:
        self.params = [p for m in modules for p in m.parameters()]
        self.param_states = [p.requires_grad for p in self.params]

    def __enter__(self) -> None:
        for param in self.params:
            param.requires_grad = False

    def __exit__(self, *args: object) -> None:
        for param, state in zip(self.params, self.param_states):
            param.requires_grad = state


class RSSMTransition(nn.Module):
    def __init__(self, action_size: int, stoch: int, deter: int, hidden: int) -> None:
        super().__init__()
        self._cell = nn.GRUCell(hidden, deter)
        self._rnn_input_model = nn.Sequential(nn.Linear(action_size + stoch, hidden), nn.ELU())
        self._stochastic_prior_model = nn.Sequential(nn.Linear(deter, hidden), nn.ELU(),
                                                     nn.Linear(hidden, 2 * stoch))

    def forward(self, prev_action: torch.Tensor, prev_state: dict[str, torch.Tensor]
                ) -> dict[str, torch.Tensor]:
        rnn_input = self._rnn_input_model(torch.cat([prev_action, prev_state["stoch"]], dim=-1))
        deter_state = self._cell(rnn_input, prev_state["deter"])
        mean, std = torch.chunk(self._stochastic_prior_model(deter_state), 2, dim=-1)
        std = F.softplus(std) + 0.1
        stoch = torch.distributions.Normal(mean, std).rsample()
        return {"mean": mean, "std": std, "stoch": stoch, "deter": deter_state}


class RSSMRepresentation(nn.Module):
    def __init__(self, transition_model: RSSMTransition, obs_embed_size: int, stoch: int,
                 deter: int, hidden: int) -> None:
        super().__init__()
        self._transition_model = transition_model
        self._stochastic_posterior_model = nn.Sequential(
            nn.Linear(deter + obs_embed_size, hidden), nn.ELU(), nn.Linear(hidden, 2 * stoch))

    def forward(self, obs_embed: torch.Tensor, prev_action: torch.Tensor,
                prev_state: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], ...]:
        prior_state = self._transition_model(prev_action, prev_state)
        x = torch.cat([prior_state["deter"], obs_embed], -1)
        mean, std = torch.chunk(self._stochastic_posterior_model(x), 2, dim=-1)
        std = F.softplus(std) + 0.1
        stoch = torch.distributions.Normal(mean, std).rsample()
        return prior_state, {"mean": mean, "std": std, "stoch": stoch,
                             "deter": prior_state["deter"]}


def _stack(states: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    return {k: torch.stack([s[k] for s in states], dim=0) for k in states[0]}


def _feat(state: dict[str, torch.Tensor]) -> torch.Tensor:
    return torch.cat((state["stoch"], state["deter"]), dim=-1)


def _dense(inp: int, out: int, hidden: int) -> nn.Module:
    return nn.Sequential(nn.Linear(inp, hidden), nn.ELU(), nn.Linear(hidden, hidden), nn.ELU(),
                         nn.Linear(hidden, out))


def dreamer(seed: int, *, no_grad_rollout: bool = False, batch_t: int = 3, batch_b: int = 2,
            action_size: int = 2, stoch: int = 4, deter: int = 6, hidden: int = 8,
            horizon: int = 3, discount: float = 0.99, discount_lambda: float = 0.95,
            free_nats: float = 3.0, kl_scale: float = 1.0) -> RealCase:
    torch.manual_seed(seed)
    feat_size = stoch + deter
    observation_encoder = nn.Sequential(nn.Conv2d(3, 4, 4, stride=2), nn.ReLU(), nn.Flatten())
    observation_decoder = nn.Sequential(nn.Linear(feat_size, 36), nn.Unflatten(-1, (4, 3, 3)),
                                        nn.ConvTranspose2d(4, 3, 4, stride=2))
    transition = RSSMTransition(action_size, stoch, deter, hidden)
    representation = RSSMRepresentation(transition, 36, stoch, deter, hidden)
    reward_model, value_model = _dense(feat_size, 1, hidden), _dense(feat_size, 1, hidden)
    action_decoder = _dense(feat_size, 2 * action_size, hidden)
    model_modules = [observation_encoder, observation_decoder, reward_model, representation]
    model_optimizer = torch.optim.Adam([p for m in model_modules for p in m.parameters()],
                                       lr=6e-4)
    actor_optimizer = torch.optim.Adam(action_decoder.parameters(), lr=8e-5)
    value_optimizer = torch.optim.Adam(value_model.parameters(), lr=8e-5)
    observation = torch.rand(batch_t, batch_b, 3, 8, 8) - 0.5
    action = torch.rand(batch_t, batch_b, action_size) * 2 - 1
    reward = torch.randn(batch_t, batch_b, 1)

    def policy(state: dict[str, torch.Tensor]) -> torch.Tensor:
        mean, std = torch.chunk(action_decoder(_feat(state)), 2, dim=-1)
        return torch.tanh(mean + (F.softplus(std) + 1e-4) * torch.randn_like(mean))

    def rollout_policy(steps: int, prev_state: dict[str, torch.Tensor]
                       ) -> dict[str, torch.Tensor]:
        state = {k: v.detach() for k, v in prev_state.items()}
        next_states = []
        for _ in range(steps):
            state = transition(policy({k: v.detach() for k, v in state.items()}), state)
            next_states.append(state)
        return _stack(next_states)

    def compute_return(reward: torch.Tensor, value: torch.Tensor, discount: torch.Tensor,
                       bootstrap: torch.Tensor, lambda_: float) -> torch.Tensor:
        next_values = torch.cat([value[1:], bootstrap[None]], 0)
        target = reward + discount * next_values * (1 - lambda_)
        outputs, accumulated = [], bootstrap
        for t in range(reward.shape[0] - 1, -1, -1):
            accumulated = target[t] + discount[t] * lambda_ * accumulated
            outputs.append(accumulated)
        return torch.flip(torch.stack(outputs), [0])

    def step() -> dict[str, torch.Tensor]:
        embed = observation_encoder(observation.flatten(0, 1)).view(batch_t, batch_b, -1)
        prev_state = {k: torch.zeros(batch_b, stoch) for k in ("mean", "std", "stoch")}
        prev_state["deter"] = torch.zeros(batch_b, deter)
        priors, posts = [], []
        for t in range(batch_t):  # rollout_representation
            prior_t, prev_state = representation(embed[t], action[t], prev_state)
            priors.append(prior_t)
            posts.append(prev_state)
        prior, post = _stack(priors), _stack(posts)
        feat = _feat(post)
        image_pred = observation_decoder(feat.flatten(0, 1)).view_as(observation)
        reward_loss = -torch.mean(torch.distributions.Normal(reward_model(feat), 1.0)
                                  .log_prob(reward))
        image_loss = -torch.mean(torch.distributions.Independent(
            torch.distributions.Normal(image_pred, 1.0), 3).log_prob(observation))
        prior_dist = torch.distributions.Independent(
            torch.distributions.Normal(prior["mean"], prior["std"]), 1)
        post_dist = torch.distributions.Independent(
            torch.distributions.Normal(post["mean"], post["std"]), 1)
        div = torch.mean(torch.distributions.kl.kl_divergence(post_dist, prior_dist))
        div = torch.max(div, div.new_full(div.size(), free_nats))
        model_loss = kl_scale * div + reward_loss + image_loss
        with torch.no_grad():
            flat_post = {k: v.reshape(batch_t * batch_b, -1) for k, v in post.items()}
        if no_grad_rollout:
            with torch.no_grad():  # audit: fix here
                imag_dist = rollout_policy(horizon, flat_post)
        else:
            with FreezeParameters(model_modules):
                imag_dist = rollout_policy(horizon, flat_post)
        imag_feat = _feat(imag_dist)
        with FreezeParameters([*model_modules, value_model]):
            imag_reward = reward_model(imag_feat)
            value = value_model(imag_feat)
        discount_arr = discount * torch.ones_like(imag_reward)
        returns = compute_return(imag_reward[:-1], value[:-1], discount_arr[:-1],
                                 bootstrap=value[-1], lambda_=discount_lambda)
        discount_arr = torch.cat([torch.ones_like(discount_arr[:1]), discount_arr[1:]])
        discount_w = torch.cumprod(discount_arr[:-1], 0)
        actor_loss = -torch.mean(discount_w * returns)
        with torch.no_grad():
            value_feat = imag_feat[:-1].detach()
            value_discount = discount_w.detach()
            value_target = returns.detach()
        log_prob = torch.distributions.Normal(value_model(value_feat), 1.0).log_prob(value_target)
        value_loss = -torch.mean(value_discount * log_prob)
        return {"model": model_loss, "actor": actor_loss, "value": value_loss}

    return RealCase(f"dreamer{'_no_grad_rollout' if no_grad_rollout else ''}",
                    "juliusfrost/dreamer-pytorch dreamer/algos/dreamer_algo.py@f973caff6efc843c8"
                    "dc2f2fb0c07b061b1f8ef74", "https://github.com/esteveste/dreamerV2-pytorch/"
                    "issues/1" if no_grad_rollout else "https://arxiv.org/abs/1912.01603 (Hafner"
                    " et al. 2020, eq. 7-8: the actor maximises V_lambda through the dynamics)",
                    "dead" if no_grad_rollout else "correct", step,
                    {"model": model_optimizer, "actor": actor_optimizer,
                     "value": value_optimizer},
                    {"observation_encoder": observation_encoder,
                     "observation_decoder": observation_decoder, "representation": representation,
                     "reward_model": reward_model, "value_model": value_model,
                     "action_decoder": action_decoder})


# --- DLR-RM/stable-baselines3 stable_baselines3/td3/td3.py, common/policies.py@e05d2dbe6eda0acd0ef2
# e316e3e4065677add3eb (TD3.train): the target (smoothed target action, min of the twin target
# critics) under th.no_grad(); the critic loss sums the MSE of each Q-network; the actor loss
# through critic.q1_forward, whose feature extraction runs under no_grad (a Flatten here, no
# parameters); the targets updated by polyak_update (mul_ and add with out=, under no_grad).
# Each network holds its optimizer, as SB3's policies do.


class SB3Critic(nn.Module):
    def __init__(self, obs_dim: int, action_dim: int, hidden: int = 8, n_critics: int = 2
                 ) -> None:
        super().__init__()
        self.features_extractor = nn.Flatten()
        self.q_networks = nn.ModuleList(nn.Sequential(
            nn.Linear(obs_dim + action_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
            nn.ReLU(), nn.Linear(hidden, 1)) for _ in range(n_critics))

    def forward(self, obs: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, ...]:
        qvalue_input = torch.cat([self.features_extractor(obs), actions], dim=1)
        return tuple(q_net(qvalue_input) for q_net in self.q_networks)

    def q1_forward(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            features = self.features_extractor(obs)
        return self.q_networks[0](torch.cat([features, actions], dim=1))


def polyak_update(params: list[torch.Tensor], target_params: list[torch.Tensor],
                  tau: float) -> None:
    with torch.no_grad():
        for param, target_param in zip(params, target_params):
            target_param.data.mul_(1 - tau)
            torch.add(target_param.data, param.data, alpha=tau, out=target_param.data)


def sb3_td3(seed: int, *, obs_dim: int = 3, action_dim: int = 1, batch: int = 4,
            gamma: float = 0.99, tau: float = 0.005, target_policy_noise: float = 0.2,
            target_noise_clip: float = 0.5) -> RealCase:
    torch.manual_seed(seed)
    actor = nn.Sequential(nn.Flatten(), nn.Linear(obs_dim, 8), nn.ReLU(), nn.Linear(8, 8),
                          nn.ReLU(), nn.Linear(8, action_dim), nn.Tanh())
    actor_target = copy.deepcopy(actor)
    critic = SB3Critic(obs_dim, action_dim)
    critic_target = copy.deepcopy(critic)
    actor_optimizer = torch.optim.Adam(actor.parameters(), lr=1e-3)
    critic_optimizer = torch.optim.Adam(critic.parameters(), lr=1e-3)
    observations, next_observations = torch.randn(batch, obs_dim), torch.randn(batch, obs_dim)
    actions = torch.rand(batch, action_dim) * 2 - 1
    rewards, dones = torch.randn(batch, 1), (torch.rand(batch, 1) < 0.2).float()

    def step() -> dict[str, torch.Tensor]:
        with torch.no_grad():
            noise = actions.clone().data.normal_(0, target_policy_noise)
            noise = noise.clamp(-target_noise_clip, target_noise_clip)
            next_actions = (actor_target(next_observations) + noise).clamp(-1, 1)
            next_q_values = torch.cat(critic_target(next_observations, next_actions), dim=1)
            next_q_values, _ = torch.min(next_q_values, dim=1, keepdim=True)
            target_q_values = rewards + (1 - dones) * gamma * next_q_values
        current_q_values = critic(observations, actions)
        critic_loss = sum(F.mse_loss(current_q, target_q_values) for current_q in current_q_values)
        actor_loss = -critic.q1_forward(observations, actor(observations)).mean()
        polyak_update(list(critic.parameters()), list(critic_target.parameters()), tau)
        polyak_update(list(actor.parameters()), list(actor_target.parameters()), tau)
        return {"critic": critic_loss, "actor": actor_loss}

    return RealCase("sb3_td3", "DLR-RM/stable-baselines3 stable_baselines3/td3/td3.py@e05d2dbe6eda"
                    "0acd0ef2e316e3e4065677add3eb", "https://arxiv.org/abs/1802.09477 (Fujimoto "
                    "et al. 2018, Algorithm 1)", "correct", step,
                    {"critic": critic_optimizer, "actor": actor_optimizer},
                    {"actor": actor, "actor_target": actor_target, "critic": critic,
                     "critic_target": critic_target}, expect_pass_through=True)


CASES: dict[str, Callable[[int], RealCase]] = {
    "sb3_td3": sb3_td3,
    "dreamer": dreamer, "dreamer_no_grad_rollout": lambda s: dreamer(s, no_grad_rollout=True),
    "tabor_dueling_ddqn": tabor_dueling_ddqn,
    "tabor_dueling_ddqn_no_grad": lambda s: tabor_dueling_ddqn(s, no_grad=True),
}
