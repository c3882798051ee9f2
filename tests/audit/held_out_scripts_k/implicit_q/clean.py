"""Implicit Q-learning at a tiny size, written after Kostrikov, Nair and Levine, "Offline
Reinforcement Learning with Implicit Q-Learning" (ICLR 2022, arXiv:2110.06169), equations (5)-(7)
and algorithm 1: the value network fitted by expectile regression to the target Q network's values
of the dataset actions, the twin Q networks fitted to r + gamma * V(s'), the target Q network
updated by Polyak averaging, and the policy extracted by advantage-weighted regression with weights
exp(beta * (Q_target(s, a) - V(s))) that carry no gradient, with gwthomas/IQL-PyTorch
(https://github.com/gwthomas/IQL-PyTorch, src/iql.py ImplicitQLearning.update: target_q and next_v
under torch.no_grad(), asymmetric_l2_loss of target_q - v, the Q loss on next_v.detach(),
update_exponential_moving_average of q_target towards qf, exp_adv = torch.exp(beta *
adv.detach()).clamp(max=EXP_ADV_MAX); src/value_functions.py TwinQ, whose forward is the min of
both heads; src/policy.py GaussianPolicy with a state-independent log_std) and
ikostrikov/implicit_q_learning (https://github.com/ikostrikov/implicit_q_learning, critic.py
update_v and update_q, actor.py awr_update_actor). The three losses of a batch are summed into one
backward and each Adam steps its own network, which is the same update as the reference's three
sequential steps: each loss reaches only its own network. Offline transitions of a point-reaching
task (a noisy scripted controller mixed with random actions), made in the script. As published:
clean."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--gamma", type=float, default=0.9)
parser.add_argument("--expectile", type=float, default=0.7, help="tau of the value loss")
parser.add_argument("--beta", type=float, default=3.0, help="inverse temperature of AWR")
parser.add_argument("--polyak", type=float, default=0.05, help="alpha of the target update")
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

obs_dim, act_dim, hidden_dim, n_transitions = 4, 2, 32, 512


def make_dataset(n):
    """Point and goal in the observation; half the actions scripted to the goal, half random."""
    obs = 2 * torch.rand(n, obs_dim) - 1
    scripted = (2 * (obs[:, 2:] - obs[:, :2])).clamp(-1, 1) + 0.3 * torch.randn(n, act_dim)
    random = 2 * torch.rand(n, act_dim) - 1
    actions = torch.where(torch.rand(n, 1) < 0.5, scripted, random).clamp(-1, 1)
    position = (obs[:, :2] + 0.3 * actions).clamp(-1, 1)
    distance = (position - obs[:, 2:]).norm(dim=1, keepdim=True)
    next_obs = torch.cat([position, obs[:, 2:]], dim=1)
    return obs, actions, -distance, next_obs, (distance < 0.1).float()


def mlp(n_in, n_out):
    return nn.Sequential(nn.Linear(n_in, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, hidden_dim),
                         nn.ReLU(), nn.Linear(hidden_dim, n_out))


class TwinQ(nn.Module):
    def __init__(self):
        super().__init__()
        self.q1, self.q2 = mlp(obs_dim + act_dim, 1), mlp(obs_dim + act_dim, 1)

    def both(self, obs, act):
        sa = torch.cat([obs, act], dim=1)
        return self.q1(sa), self.q2(sa)

    def forward(self, obs, act):
        return torch.min(*self.both(obs, act))


class GaussianPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = mlp(obs_dim, act_dim)
        self.log_std = nn.Parameter(torch.zeros(act_dim))

    def forward(self, obs):
        mean = torch.tanh(self.net(obs))
        return torch.distributions.Normal(mean, self.log_std.clamp(-5, 2).exp())


def asymmetric_l2_loss(u, tau):
    return (torch.abs(tau - (u < 0).float()) * u ** 2).mean()


dataset = make_dataset(n_transitions)
critic, value, policy = TwinQ(), mlp(obs_dim, 1), GaussianPolicy()
target_critic = copy.deepcopy(critic).requires_grad_(False)
q_optimizer = torch.optim.Adam(critic.parameters(), lr=args.lr)
v_optimizer = torch.optim.Adam(value.parameters(), lr=args.lr)
policy_optimizer = torch.optim.Adam(policy.parameters(), lr=args.lr)
for step in range(args.steps):
    idx = torch.randint(0, n_transitions, (args.batch_size,))
    obs, actions, rewards, next_obs, dones = (t[idx] for t in dataset)
    with torch.no_grad():
        target_q = target_critic(obs, actions)
        next_v = value(next_obs)
    v = value(obs)
    adv = target_q - v
    v_loss = asymmetric_l2_loss(adv, args.expectile)
    targets = rewards + (1 - dones) * args.gamma * next_v.detach()
    q1, q2 = critic.both(obs, actions)
    q_loss = (F.mse_loss(q1, targets) + F.mse_loss(q2, targets)) / 2
    exp_adv = torch.exp(args.beta * adv.detach()).clamp(max=100.0)
    bc_losses = -policy(obs).log_prob(actions).sum(dim=1, keepdim=True)
    policy_loss = (exp_adv * bc_losses).mean()
    for optimizer in (v_optimizer, q_optimizer, policy_optimizer):
        optimizer.zero_grad()
    (v_loss + q_loss + policy_loss).backward()
    for optimizer in (v_optimizer, q_optimizer, policy_optimizer):
        optimizer.step()
    with torch.no_grad():
        for p_target, p in zip(target_critic.parameters(), critic.parameters()):
            p_target.mul_(1 - args.polyak).add_(p, alpha=args.polyak)
    print(f"step {step} v_loss {v_loss.item():.4f} q_loss {q_loss.item():.4f} "
          f"policy_loss {policy_loss.item():.4f}")

if args.out:
    torch.save({"critic": critic.state_dict(), "target_critic": target_critic.state_dict(),
                "value": value.state_dict(), "policy": policy.state_dict()}, args.out)
