"""Adversarial inverse reinforcement learning at a tiny size, written after Fu, Luo and Levine,
"Learning Robust Rewards with Adversarial Inverse Reinforcement Learning" (ICLR 2018,
arXiv:1710.11248), section 5 and algorithm 1, with justinjfu/inverse_rl
(https://github.com/justinjfu/inverse_rl, inverse_rl/models/airl_state.py AIRL: log p_tau = reward +
gamma * V(s') - V(s), one value network read at s and at s', against log q_tau, the policy's
log-probabilities fed in as a placeholder; AIRL.eval with score_discrim, which hands the policy log
D - log(1 - D) as numbers) and the PyTorch layout of HumanCompatibleAI/imitation
(https://github.com/HumanCompatibleAI/imitation, src/imitation/algorithms/adversarial/airl.py
AIRL.logits_expert_is_high: f - log pi; src/imitation/algorithms/adversarial/common.py
AdversarialTrainer._make_disc_train_batches, which evaluates log pi under th.no_grad();
src/imitation/rewards/reward_nets.py BasicShapedRewardNet and ShapedRewardNet.forward: f = g(s, a) +
gamma * (1 - done) * h(s') - h(s)). Each round the Gaussian policy collects short episodes of a
point-reaching task; the discriminator D = exp(f) / (exp(f) + pi(a|s)) is trained by logistic
regression on the logits f - log pi, expert transitions against the policy's, with log pi a
constant; then the policy is trained by REINFORCE on the reward log D - log(1 - D) = f - log pi,
which the references compute as numbers, so it is a constant of the policy's loss: the policy trains
neither the discriminator nor itself through its reward. Expert episodes of a noisy scripted
controller, made in the script. Injected bug: the shaping potential at the next state is cut from
the graph (self.h(next_states).detach(), as for a TD target), so h is trained only through -h(s),
while the reference's value network, read at s and at s' with the same weights, is trained through
both terms of log p_tau."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--rounds", type=int, default=12)
parser.add_argument("--disc-steps", type=int, default=2)
parser.add_argument("--n-episodes", type=int, default=32)
parser.add_argument("--horizon", type=int, default=6)
parser.add_argument("--gamma", type=float, default=0.95)
parser.add_argument("--disc-lr", type=float, default=3e-3)
parser.add_argument("--policy-lr", type=float, default=1e-2)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

state_dim, action_dim, hidden_dim = 4, 2, 32


def step_env(states, actions):
    """A point moved by its action towards a goal; the state holds point and goal."""
    position = (states[:, :2] + 0.4 * actions.clamp(-1, 1)).clamp(-1, 1)
    return torch.cat([position, states[:, 2:]], dim=1)


def rollout(act, n):
    """Episodes of a fixed horizon, stacked as [horizon, n, ...]; done marks the last step."""
    states = [2 * torch.rand(n, state_dim) - 1]
    actions = []
    for _ in range(args.horizon):
        actions.append(act(states[-1]))
        states.append(step_env(states[-1], actions[-1]))
    dones = torch.zeros(args.horizon, n, 1)
    dones[-1] = 1.0
    return torch.stack(states[:-1]), torch.stack(actions), torch.stack(states[1:]), dones


def expert(states):
    return (2.5 * (states[:, 2:] - states[:, :2]) + 0.2 * torch.randn(len(states), 2)).clamp(-1, 1)


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.mean = nn.Sequential(nn.Linear(state_dim, hidden_dim), nn.Tanh(),
                                  nn.Linear(hidden_dim, action_dim))
        self.log_std = nn.Parameter(torch.full((action_dim,), -0.5))

    def dist(self, states):
        return torch.distributions.Normal(self.mean(states), self.log_std.exp())

    def log_prob(self, states, actions):
        return self.dist(states).log_prob(actions).sum(-1, keepdim=True)

    def sample(self, states):
        return self.dist(states).sample()


class ShapedDiscriminator(nn.Module):
    """f(s, a, s') = g(s, a) + gamma * (1 - done) * h(s') - h(s)."""

    def __init__(self, gamma):
        super().__init__()
        self.gamma = gamma
        self.g = nn.Sequential(nn.Linear(state_dim + action_dim, hidden_dim), nn.ReLU(),
                               nn.Linear(hidden_dim, 1))
        self.h = nn.Sequential(nn.Linear(state_dim, hidden_dim), nn.ReLU(),
                               nn.Linear(hidden_dim, 1))

    def forward(self, states, actions, next_states, dones):
        reward = self.g(torch.cat([states, actions], dim=-1))
        next_potential = self.h(next_states).detach()
        return reward + self.gamma * (1.0 - dones) * next_potential - self.h(states)


def discounted_returns(rewards, gamma):
    returns, running = [], torch.zeros_like(rewards[0])
    for t in range(rewards.shape[0] - 1, -1, -1):
        running = rewards[t] + gamma * running
        returns.append(running)
    return torch.stack(returns[::-1])


expert_data = [x.flatten(0, 1) for x in rollout(expert, 256)]
policy = Policy()
discriminator = ShapedDiscriminator(args.gamma)
policy_optimizer = torch.optim.Adam(policy.parameters(), lr=args.policy_lr)
disc_optimizer = torch.optim.Adam(discriminator.parameters(), lr=args.disc_lr)
for round_ in range(args.rounds):
    with torch.no_grad():
        states, actions, next_states, dones = rollout(policy.sample, args.n_episodes)
    gen_data = [x.flatten(0, 1) for x in (states, actions, next_states, dones)]
    # discriminator: logistic regression on f - log pi, expert labelled 1
    for _ in range(args.disc_steps):
        idx = torch.randint(0, len(expert_data[0]), (len(gen_data[0]),))
        batch = [torch.cat([e[idx], g]) for e, g in zip(expert_data, gen_data)]
        labels = torch.cat([torch.ones(len(idx), 1), torch.zeros(len(idx), 1)])
        with torch.no_grad():
            log_pi = policy.log_prob(batch[0], batch[1])
        logits = discriminator(*batch) - log_pi
        disc_loss = F.binary_cross_entropy_with_logits(logits, labels)
        disc_optimizer.zero_grad()
        disc_loss.backward()
        disc_optimizer.step()
    # policy: REINFORCE on the reward log D - log(1 - D) = f - log pi
    log_probs = policy.log_prob(states, actions)
    rewards = (discriminator(states, actions, next_states, dones) - log_probs).detach()
    returns = discounted_returns(rewards, args.gamma)
    advantages = (returns - returns.mean()) / (returns.std() + 1e-8)
    policy_loss = -(log_probs * advantages).mean()
    policy_optimizer.zero_grad()
    policy_loss.backward()
    policy_optimizer.step()
    print(f"round {round_} discriminator {disc_loss.item():.4f} "
          f"reward {rewards.mean().item():.4f} policy {policy_loss.item():.4f}")

if args.out:
    torch.save({"policy": policy.state_dict(), "discriminator": discriminator.state_dict()},
               args.out)
