"""FeUdal networks at a tiny size, written after Vezhnevets, Osindero, Schaul, Heess, Jaderberg,
Silver and Kavukcuoglu, "FeUdal Networks for Hierarchical Reinforcement Learning" (ICML 2017,
arXiv:1703.01161), sections 3 and 4 (the Manager's goals in its latent state space, the Worker's
policy pi = softmax(U w) with w = phi(sum of the last c + 1 goals), "no gradients are propagated
between Worker and Manager", the transition policy gradient A^M_t * grad d_cos(s_{t+c} - s_t,
g_t(theta)) with the state difference held fixed, and the intrinsic reward r^I_t = 1/c * sum_i
d_cos(s_t - s_{t-i}, g_{t-i})), with lweitkamp/feudalnets-pytorch
(https://github.com/lweitkamp/feudalnets-pytorch, feudalnet.py: Manager.forward, which returns
the normalised goal with its graph and the latent state as state.detach(); FeudalNetwork.forward,
"states never have gradients active"; Worker.forward, goals = torch.stack(goals).detach().sum(dim=0)
before phi, "detaching is vital, no end to end training"; Worker.intrinsic_reward, r_i.detach();
Manager.state_goal_cosine; feudal_loss, the worker's and manager's advantages .detach()-ed in the
policy terms, one loss and one optimizer over the whole network). Feed-forward perception, an
LSTM cell for each of Manager and Worker (the dilated LSTM left out). Each update runs a batch of
short episodes of a point-reaching task made in the script, with four moves and a reward for each
step towards the goal, and takes one A2C-style step on the sum of both policies' and both critics'
losses. Injected bug: the Manager's stop-gradient is put on its goal instead of its latent
state (normalize(goal_hat).detach(), state), so the transition policy gradient reaches the
Manager through the state difference s_{t+c} - s_t (its state space and the perception) and
never through the goal g_t, whose LSTM learns from its critic alone."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--updates", type=int, default=25)
parser.add_argument("--n-envs", type=int, default=16)
parser.add_argument("--rollout", type=int, default=10)
parser.add_argument("--c", type=int, default=3, help="the Manager's horizon")
parser.add_argument("--gamma-m", type=float, default=0.99)
parser.add_argument("--gamma-w", type=float, default=0.95)
parser.add_argument("--alpha", type=float, default=0.5, help="weight of the intrinsic reward")
parser.add_argument("--entropy-coef", type=float, default=0.01)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

obs_dim, n_actions, d, k = 4, 4, 16, 4
moves = torch.tensor([[0.2, 0.0], [-0.2, 0.0], [0.0, 0.2], [0.0, -0.2]])


def step_env(obs, action):
    """A point moved by one of four moves; the reward is the distance gained on the goal."""
    position = (obs[:, :2] + moves[action]).clamp(-1, 1)
    before = (obs[:, :2] - obs[:, 2:]).norm(dim=1)
    after = (position - obs[:, 2:]).norm(dim=1)
    return torch.cat([position, obs[:, 2:]], dim=1), before - after


class Manager(nn.Module):
    def __init__(self):
        super().__init__()
        self.space = nn.Linear(d, d)
        self.rnn = nn.LSTMCell(d, d)
        self.critic = nn.Linear(d, 1)

    def forward(self, z, hidden):
        state = F.relu(self.space(z))
        hidden = self.rnn(state, hidden)
        goal_hat = hidden[0]
        return F.normalize(goal_hat, dim=-1).detach(), state, self.critic(goal_hat), hidden


class Worker(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTMCell(d, k * n_actions)
        self.phi = nn.Linear(d, k, bias=False)
        self.critic = nn.Linear(k * n_actions, 1)

    def forward(self, z, goals, hidden):
        hidden = self.rnn(z, hidden)
        u = hidden[0].view(-1, k, n_actions)
        w = self.phi(torch.stack(goals).detach().sum(dim=0))
        logits = torch.einsum("bk,bka->ba", w, u)
        return torch.distributions.Categorical(logits=logits), self.critic(hidden[0]), hidden


class FeudalNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.percept = nn.Sequential(nn.Linear(obs_dim, d), nn.ReLU())
        self.manager = Manager()
        self.worker = Worker()


def discount(rewards, bootstrap, gamma):
    returns, running = [], bootstrap
    for r in reversed(rewards):
        running = r + gamma * running
        returns.append(running)
    return torch.stack(returns[::-1])


net = FeudalNet()
optimizer = torch.optim.Adam(net.parameters(), lr=args.lr)
B, T, c = args.n_envs, args.rollout, args.c
for update in range(args.updates):
    obs = 2 * torch.rand(B, obs_dim) - 1
    h_m = (torch.zeros(B, d), torch.zeros(B, d))
    h_w = (torch.zeros(B, k * n_actions), torch.zeros(B, k * n_actions))
    goals, states = [torch.zeros(B, d) for _ in range(c)], []
    log_probs, entropies, values_m, values_w, rewards = [], [], [], [], []
    for t in range(T):
        z = net.percept(obs)
        goal, state, value_m, h_m = net.manager(z, h_m)
        goals.append(goal)
        states.append(state)
        dist, value_w, h_w = net.worker(z, goals[-(c + 1):], h_w)
        action = dist.sample()
        obs, reward = step_env(obs, action)
        log_probs.append(dist.log_prob(action))
        entropies.append(dist.entropy())
        values_m.append(value_m.squeeze(-1))
        values_w.append(value_w.squeeze(-1))
        rewards.append(reward)
    with torch.no_grad():  # bootstrap values and the last latent state
        z = net.percept(obs)
        goal_T, state_T, next_value_m, _ = net.manager(z, h_m)
        _, next_value_w, _ = net.worker(z, goals[-c:] + [goal_T], h_w)
        all_states, past_goals = states + [state_T], goals[c:]
        intrinsic = []
        for t in range(1, T + 1):
            cosines = [F.cosine_similarity(all_states[t] - all_states[t - i], past_goals[t - i])
                       for i in range(1, c + 1) if t - i >= 0]
            intrinsic.append(torch.stack(cosines).sum(0) / c)
    worker_rewards = [r + args.alpha * r_i for r, r_i in zip(rewards, intrinsic)]
    returns_m = discount(rewards, next_value_m.squeeze(-1), args.gamma_m)
    returns_w = discount(worker_rewards, next_value_w.squeeze(-1), args.gamma_w)
    advantage_m = returns_m - torch.stack(values_m)
    advantage_w = returns_w - torch.stack(values_w)
    # transition policy gradient: the cosine between s_{t+c} - s_t and g_t, gradient through g_t
    state_goal_cos = torch.stack([
        F.cosine_similarity(all_states[t + c] - all_states[t], past_goals[t], dim=-1)
        for t in range(T - c + 1)])
    manager_loss = -(advantage_m[:T - c + 1].detach() * state_goal_cos).mean()
    worker_loss = -(advantage_w.detach() * torch.stack(log_probs)).mean()
    value_loss = 0.5 * advantage_m.pow(2).mean() + 0.5 * advantage_w.pow(2).mean()
    loss = manager_loss + worker_loss + value_loss - args.entropy_coef * torch.stack(
        entropies).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"update {update} return {torch.stack(rewards).sum(0).mean().item():.4f} "
          f"intrinsic {torch.stack(intrinsic).mean().item():.4f} loss {loss.item():.4f}")

if args.out:
    torch.save({k_: v.detach().clone() for k_, v in net.state_dict().items()}, args.out)
