"""QR-DQN at a tiny size, written after Dabney, Rowland, Bellemare and Munos, "Distributional
Reinforcement Learning with Quantile Regression" (AAAI 2018, arXiv:1710.10044), algorithm 1 and
the quantile Huber loss of its section 4, with Stable-Baselines3-Contrib
(https://github.com/Stable-Baselines-Team/stable-baselines3-contrib, sb3_contrib/qrdqn/qrdqn.py
QRDQN.train and QRDQN._on_step, sb3_contrib/common/utils.py quantile_huber_loss). A network gives
N quantiles of the return for each action; the targets are the rewards plus the discounted
quantiles that the target network gives at the next state for its greedy action (the action of
the largest mean of its quantiles), all under torch.no_grad(); the loss is the quantile Huber
loss of every pair of current and target quantiles, weighted by |tau_i - 1{u < 0}| at the
quantile midpoints tau_i = (2i + 1) / 2N, summed over the current quantiles and averaged. The
target network is a deep copy of the online one whose weights are loaded from it every
``target_update_interval`` gradient steps (sb3's polyak_update with tau = 1). Transitions of a
small stochastic chain (move left or right or stay, with a noisy reward whose spread grows to the
right), with a uniform behaviour policy, made in the script. Injected bug: the periodic target
update assigns the online network (quantile_net_target = quantile_net) instead of loading its
weights into the deep copy, so after the first update the target network is the network being
trained, and from the step after next the bootstrap quantiles move with every gradient step."""

import argparse
import copy

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=16)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--n-quantiles", type=int, default=8)
parser.add_argument("--gamma", type=float, default=0.9)
parser.add_argument("--lr", type=float, default=5e-3)
parser.add_argument("--target-update-interval", type=int, default=4)
parser.add_argument("--max-grad-norm", type=float, default=10.0)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_states, n_actions, hidden_dim, n_transitions = 6, 3, 32, 512


def make_dataset(n):
    """A chain of states; action 0 moves left, 1 stays, 2 moves right, with a slip."""
    states = torch.randint(0, n_states, (n,))
    actions = torch.randint(0, n_actions, (n,))
    slip = torch.rand(n) < 0.2
    moves = torch.where(slip, torch.randint(-1, 2, (n,)), actions - 1)
    next_states = (states + moves).clamp(0, n_states - 1)
    spread = 0.1 + next_states.float() / n_states
    rewards = (next_states.float() / n_states + spread * torch.randn(n)).unsqueeze(1)
    dones = (next_states == n_states - 1).float().unsqueeze(1)
    eye = torch.eye(n_states)
    return eye[states], actions, rewards, eye[next_states], dones


class QuantileNetwork(nn.Module):
    def __init__(self, n_quantiles):
        super().__init__()
        self.n_quantiles = n_quantiles
        self.net = nn.Sequential(nn.Linear(n_states, hidden_dim), nn.ReLU(),
                                 nn.Linear(hidden_dim, hidden_dim), nn.ReLU(),
                                 nn.Linear(hidden_dim, n_actions * n_quantiles))

    def forward(self, obs):
        return self.net(obs).view(-1, self.n_quantiles, n_actions)


def quantile_huber_loss(current_quantiles, target_quantiles):
    """current (batch, N), target (batch, N'): pairwise Huber loss, weighted by |tau - 1{u<0}|."""
    n_quantiles = current_quantiles.shape[-1]
    cum_prob = (torch.arange(n_quantiles, dtype=torch.float32) + 0.5) / n_quantiles
    cum_prob = cum_prob.view(1, -1, 1)
    pairwise_delta = target_quantiles.unsqueeze(-2) - current_quantiles.unsqueeze(-1)
    abs_delta = pairwise_delta.abs()
    huber = torch.where(abs_delta > 1, abs_delta - 0.5, 0.5 * pairwise_delta ** 2)
    loss = (cum_prob - (pairwise_delta.detach() < 0).float()).abs() * huber
    return loss.sum(dim=-2).mean()


dataset = make_dataset(n_transitions)
quantile_net = QuantileNetwork(args.n_quantiles)
quantile_net_target = copy.deepcopy(quantile_net)
optimizer = torch.optim.Adam(quantile_net.parameters(), lr=args.lr)
for step in range(args.steps):
    idx = torch.randint(0, n_transitions, (args.batch_size,))
    obs, actions, rewards, next_obs, dones = (t[idx] for t in dataset)
    with torch.no_grad():
        next_quantiles = quantile_net_target(next_obs)
        next_greedy = next_quantiles.mean(dim=1, keepdim=True).argmax(dim=2, keepdim=True)
        next_quantiles = next_quantiles.gather(
            dim=2, index=next_greedy.expand(-1, args.n_quantiles, 1)).squeeze(dim=2)
        target_quantiles = rewards + (1 - dones) * args.gamma * next_quantiles
    current_quantiles = quantile_net(obs)
    current_quantiles = current_quantiles.gather(
        dim=2, index=actions.view(-1, 1, 1).expand(-1, args.n_quantiles, 1)).squeeze(dim=2)
    loss = quantile_huber_loss(current_quantiles, target_quantiles)
    optimizer.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(quantile_net.parameters(), args.max_grad_norm)
    optimizer.step()
    if (step + 1) % args.target_update_interval == 0:
        quantile_net_target = quantile_net
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({"quantile_net": quantile_net.state_dict(),
                "quantile_net_target": quantile_net_target.state_dict()}, args.out)
