"""Actor-critic steps with an entropy bonus, written three ways: by hand from the log-softmax
(``-(log_prob * prob).sum(1)``), by ``Categorical(probs).entropy()``, and by the closed form of
a Gaussian's entropy. The entropy is a function of the policy alone: it is a regulariser the
policy maximises, not a target, and none of these steps has a bug.

Each builder takes ``seed`` and returns a :class:`RealCase`; the text is ours, the structure
(modules, optimizers, order of calls) is the repository's.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch
from realcode_common import RealCase
from torch import nn
from torch.distributions import Categorical, Normal
from torch.nn import functional as F

# --- ikostrikov/pytorch-a3c train.py, model.py@48d95844755e2c3e2c7e48bbd1a7141f7212b63f ------
# A3C on Atari: four convolutions and an LSTMCell whose state is carried between rollouts with
# cx.detach(), hx.detach() (reset to zeros when an episode ends). The entropy is written by hand,
# -(log_prob * prob).sum(1), from F.softmax and F.log_softmax of the same logits; GAE with
# gae.detach() in the policy term; the bootstrap R = value.detach(). ensure_shared_grads hands the
# local model's .grad to the shared model's Adam; here the optimizer steps the local model.


class A3CActorCritic(nn.Module):
    def __init__(self, num_inputs: int = 1, n_actions: int = 3, channels: int = 4,
                 hidden: int = 8) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(num_inputs, channels, 3, stride=2, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, 3, stride=2, padding=1)
        self.conv3 = nn.Conv2d(channels, channels, 3, stride=2, padding=1)
        self.conv4 = nn.Conv2d(channels, channels, 3, stride=2, padding=1)
        self.channels, self.hidden = channels, hidden
        self.lstm = nn.LSTMCell(channels * 3 * 3, hidden)
        self.critic_linear = nn.Linear(hidden, 1)
        self.actor_linear = nn.Linear(hidden, n_actions)

    def forward(self, inputs: tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]
                ) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        x, (hx, cx) = inputs
        x = F.elu(self.conv4(F.elu(self.conv3(F.elu(self.conv2(F.elu(self.conv1(x))))))))
        hx, cx = self.lstm(x.view(-1, self.channels * 3 * 3), (hx, cx))
        return self.critic_linear(hx), self.actor_linear(hx), (hx, cx)


def ikostrikov_a3c(seed: int, *, num_steps: int = 3, gamma: float = 0.99,
                   gae_lambda: float = 1.0, entropy_coef: float = 0.01,
                   value_loss_coef: float = 0.5) -> RealCase:
    torch.manual_seed(seed)
    model = A3CActorCritic()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    rng = np.random.default_rng(seed)
    st = {"state": torch.rand(1, 42, 42), "done": True, "hx": None, "cx": None, "t": 0}

    def step() -> torch.Tensor:
        if st["done"]:
            cx, hx = torch.zeros(1, model.hidden), torch.zeros(1, model.hidden)
        else:
            cx, hx = st["cx"].detach(), st["hx"].detach()
        values, log_probs, rewards, entropies = [], [], [], []
        state, done = st["state"], False
        for _ in range(num_steps):
            value, logit, (hx, cx) = model((state.unsqueeze(0), (hx, cx)))
            prob = F.softmax(logit, dim=-1)
            log_prob = F.log_softmax(logit, dim=-1)
            entropy = -(log_prob * prob).sum(1, keepdim=True)
            entropies.append(entropy)
            action = prob.multinomial(num_samples=1).detach()
            log_prob = log_prob.gather(1, action)
            st["t"] += 1  # env.step(action): a new frame, a clipped reward
            state, reward = torch.rand(1, 42, 42), float(np.clip(rng.normal(), -1, 1))
            done = st["t"] % 5 == 0
            values.append(value)
            log_probs.append(log_prob)
            rewards.append(reward)
            if done:
                break
        st.update(state=state, done=done, hx=hx, cx=cx)
        R = torch.zeros(1, 1)
        if not done:
            value, _, _ = model((state.unsqueeze(0), (hx, cx)))
            R = value.detach()
        values.append(R)
        policy_loss, value_loss = 0, 0
        gae = torch.zeros(1, 1)
        for i in reversed(range(len(rewards))):
            R = gamma * R + rewards[i]
            advantage = R - values[i]
            value_loss = value_loss + 0.5 * advantage.pow(2)
            delta_t = rewards[i] + gamma * values[i + 1] - values[i]
            gae = gae * gamma * gae_lambda + delta_t
            policy_loss = policy_loss - log_probs[i] * gae.detach() - entropy_coef * entropies[i]
        return (policy_loss + value_loss_coef * value_loss).sum()

    return RealCase("ikostrikov_a3c", "ikostrikov/pytorch-a3c train.py@48d95844755e2c3e2c7e48bb"
                    "d1a7141f7212b63f", "https://arxiv.org/abs/1602.01783 (Mnih et al. 2016, "
                    "A3C with the entropy of the policy added to the objective)", "correct",
                    step, optimizer, {"model": model})


# --- nikhilbarhate99/PPO-PyTorch PPO.py@728cce83d7ab628fe2634eabcdf3239997eb81dd -------------
# Discrete PPO: the actor ends in nn.Softmax and its distribution is Categorical(action_probs),
# whose .entropy() is the bonus; one Adam over actor and critic (two param groups); policy_old
# (a copy, loaded after each update) acts under no_grad; the advantage is rewards minus the
# detached old state values; K_epochs passes over the same rollout.


class PPOActorCritic(nn.Module):
    def __init__(self, state_dim: int, action_dim: int, hidden: int = 8) -> None:
        super().__init__()
        self.actor = nn.Sequential(nn.Linear(state_dim, hidden), nn.Tanh(),
                                   nn.Linear(hidden, hidden), nn.Tanh(),
                                   nn.Linear(hidden, action_dim), nn.Softmax(dim=-1))
        self.critic = nn.Sequential(nn.Linear(state_dim, hidden), nn.Tanh(),
                                    nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, 1))

    def act(self, state: torch.Tensor) -> tuple[torch.Tensor, ...]:
        dist = Categorical(self.actor(state))
        action = dist.sample()
        return action.detach(), dist.log_prob(action).detach(), self.critic(state).detach()

    def evaluate(self, state: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, ...]:
        dist = Categorical(self.actor(state))
        return dist.log_prob(action), self.critic(state), dist.entropy()


def barhate_ppo(seed: int, *, state_dim: int = 4, action_dim: int = 2, n_steps: int = 6,
                gamma: float = 0.99, eps_clip: float = 0.2) -> RealCase:
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    policy = PPOActorCritic(state_dim, action_dim)
    optimizer = torch.optim.Adam([{"params": policy.actor.parameters(), "lr": 3e-4},
                                  {"params": policy.critic.parameters(), "lr": 1e-3}])
    policy_old = PPOActorCritic(state_dim, action_dim)
    policy_old.load_state_dict(policy.state_dict())
    mse = nn.MSELoss()

    def step() -> torch.Tensor:
        states, actions, logprobs, state_values, rewards, terminals = [], [], [], [], [], []
        for t in range(n_steps):  # select_action, one per environment step
            with torch.no_grad():
                state = torch.randn(state_dim)
                action, logprob, value = policy_old.act(state)
            states.append(state)
            actions.append(action)
            logprobs.append(logprob)
            state_values.append(value)
            rewards.append(float(rng.random()))
            terminals.append(t == n_steps - 1)
        returns, discounted = [], 0.0
        for reward, is_terminal in zip(reversed(rewards), reversed(terminals)):
            if is_terminal:
                discounted = 0.0
            discounted = reward + gamma * discounted
            returns.insert(0, discounted)
        returns_t = torch.tensor(returns, dtype=torch.float32)
        returns_t = (returns_t - returns_t.mean()) / (returns_t.std() + 1e-7)
        old_states = torch.squeeze(torch.stack(states, dim=0)).detach()
        old_actions = torch.squeeze(torch.stack(actions, dim=0)).detach()
        old_logprobs = torch.squeeze(torch.stack(logprobs, dim=0)).detach()
        old_state_values = torch.squeeze(torch.stack(state_values, dim=0)).detach()
        advantages = returns_t.detach() - old_state_values.detach()
        # one of the K_epochs passes (each is its own backward and optimizer step)
        logp, values, dist_entropy = policy.evaluate(old_states, old_actions)
        values = torch.squeeze(values)
        ratios = torch.exp(logp - old_logprobs.detach())
        surr1 = ratios * advantages
        surr2 = torch.clamp(ratios, 1 - eps_clip, 1 + eps_clip) * advantages
        loss = -torch.min(surr1, surr2) + 0.5 * mse(values, returns_t) - 0.01 * dist_entropy
        policy_old.load_state_dict(policy.state_dict())  # after the K epochs
        return loss.mean()

    return RealCase("barhate_ppo", "nikhilbarhate99/PPO-PyTorch PPO.py@728cce83d7ab628fe2634eab"
                    "cdf3239997eb81dd", "https://arxiv.org/abs/1707.06347 (Schulman et al. 2017,"
                    " eq. 9: the clipped surrogate plus an entropy bonus)", "correct", step,
                    optimizer, {"policy": policy, "policy_old": policy_old})


# --- MorvanZhou/pytorch-A3C continuous_A3C.py, utils.py@5ab27abee2c3ac3ca921ac393bfcbda4e0a91745
# A3C for Pendulum: a Normal policy (mu = 2 tanh, sigma = softplus + 1e-3) and a separate value
# branch; the entropy is the Gaussian's closed form 0.5 + 0.5 log(2 pi) + log(sigma); the
# advantage td.detach(); the bootstrap value read through .data. push_and_pull copies the local
# gradients into the global network's SharedAdam; here the optimizer steps the local network.


class MorvanNet(nn.Module):
    def __init__(self, s_dim: int = 3, a_dim: int = 1, hidden: int = 8) -> None:
        super().__init__()
        self.a1, self.mu, self.sigma = (nn.Linear(s_dim, hidden), nn.Linear(hidden, a_dim),
                                        nn.Linear(hidden, a_dim))
        self.c1, self.v = nn.Linear(s_dim, hidden), nn.Linear(hidden, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        a1 = F.relu6(self.a1(x))
        mu = 2 * torch.tanh(self.mu(a1))
        sigma = F.softplus(self.sigma(a1)) + 0.001
        return mu, sigma, self.v(F.relu6(self.c1(x)))

    def loss_func(self, s: torch.Tensor, a: torch.Tensor, v_t: torch.Tensor) -> torch.Tensor:
        self.train()
        mu, sigma, values = self.forward(s)
        td = v_t - values
        c_loss = td.pow(2)
        m = Normal(mu, sigma)
        log_prob = m.log_prob(a)
        entropy = 0.5 + 0.5 * math.log(2 * math.pi) + torch.log(m.scale)  # exploration
        exp_v = log_prob * td.detach() + 0.005 * entropy
        return (-exp_v + c_loss).mean()


def morvan_a3c_continuous(seed: int, *, n_steps: int = 5, gamma: float = 0.9) -> RealCase:
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    lnet = MorvanNet()
    opt = torch.optim.Adam(lnet.parameters(), lr=1e-4, betas=(0.95, 0.999))

    def step() -> torch.Tensor:
        bs = rng.normal(size=(n_steps, 3)).astype(np.float32)
        ba = np.clip(rng.normal(size=(n_steps, 1)), -2, 2).astype(np.float32)
        br = rng.normal(size=n_steps).tolist()
        s_ = rng.normal(size=3).astype(np.float32)
        v_s_ = lnet.forward(torch.from_numpy(s_[None, :]))[-1].data.numpy()[0, 0]
        buffer_v_target = []
        for r in br[::-1]:
            v_s_ = r + gamma * v_s_
            buffer_v_target.append(v_s_)
        buffer_v_target.reverse()
        return lnet.loss_func(torch.from_numpy(bs), torch.from_numpy(ba),
                              torch.tensor(np.array(buffer_v_target)[:, None],
                                           dtype=torch.float32))

    return RealCase("morvan_a3c_continuous", "MorvanZhou/pytorch-A3C continuous_A3C.py@5ab27abe"
                    "e2c3ac3ca921ac393bfcbda4e0a91745", "https://arxiv.org/abs/1602.01783 (Mnih "
                    "et al. 2016, the Gaussian policy's entropy term, sec. 9)", "correct", step,
                    opt, {"lnet": lnet})


CASES: dict[str, Callable[[int], RealCase]] = {
    "ikostrikov_a3c": ikostrikov_a3c, "barhate_ppo": barhate_ppo,
    "morvan_a3c_continuous": morvan_a3c_continuous,
}
