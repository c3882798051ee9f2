"""Advantage-weighted regression at a tiny size, written after Peng, Kumar, Zhang and Levine,
"Advantage-Weighted Regression: Simple and Scalable Off-Policy Reinforcement Learning" (2019,
arXiv:1910.00177), section 3 and algorithm 1, with the authors' xbpeng/awr
(https://github.com/xbpeng/awr, learning/awr_agent.py AWRAgent: _update, which updates the critic
and then the actor on the replay buffer; _compute_batch_new_vals and _compute_return, the TD(lambda)
returns computed in numpy from the critic's values; _update_critic and _build_losses, the value
regressed on those returns fed in as a placeholder; _calc_adv and _calc_adv_weights, the
normalised advantages exp(adv / temp) clipped at weight_clip, fed to the actor as numbers;
momentum SGD for each network). Each iteration the Gaussian policy (fixed standard deviation)
adds episodes of a point-reaching task to a buffer of recent episodes; then the value network is
regressed on TD(lambda) returns built from its own values with those values detached (the
returns are a fixed target), and the policy is regressed on the buffer's actions, its
log-likelihood weighted by exp(normalised advantage / temp) clipped at weight_clip, the advantage
(return minus value) detached so the weights are numbers. Each optimizer clears its gradients
after its step. Episodes made in the script. Injected bug: the value's TD(lambda) targets are
built from the values with their graph (td_lambda_returns(rewards, values, ...), for
values.detach(); xbpeng/awr computes them in numpy and feeds them as the tar_val placeholder), so
the regression differentiates its own target too: the value network is trained by the full
residual gradient, which also moves the bootstrapped values of the later states so as to bring
the returns towards the current predictions, instead of by regression on fixed returns."""

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iterations", type=int, default=4)
parser.add_argument("--episodes-per-iter", type=int, default=32)
parser.add_argument("--buffer-episodes", type=int, default=96)
parser.add_argument("--critic-steps", type=int, default=8)
parser.add_argument("--actor-steps", type=int, default=8)
parser.add_argument("--batch-episodes", type=int, default=16)
parser.add_argument("--horizon", type=int, default=8)
parser.add_argument("--gamma", type=float, default=0.9)
parser.add_argument("--td-lambda", type=float, default=0.95)
parser.add_argument("--temp", type=float, default=1.0)
parser.add_argument("--weight-clip", type=float, default=20.0)
parser.add_argument("--critic-lr", type=float, default=1e-2)
parser.add_argument("--actor-lr", type=float, default=1e-2)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

state_dim, action_dim, hidden_dim, action_std = 4, 2, 64, 0.2


def mlp(n_in, n_out):
    return nn.Sequential(nn.Linear(n_in, hidden_dim), nn.ReLU(),
                         nn.Linear(hidden_dim, hidden_dim), nn.ReLU(),
                         nn.Linear(hidden_dim, n_out))


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.mean = mlp(state_dim, action_dim)

    def dist(self, states):
        return torch.distributions.Normal(self.mean(states), action_std)

    def log_prob(self, states, actions):
        return self.dist(states).log_prob(actions).sum(-1)


def rollout(n):
    """Episodes stacked as states [T + 1, n, ...], actions [T, n, ...], rewards [T, n]."""
    states = [2 * torch.rand(n, state_dim) - 1]
    actions, rewards = [], []
    for _ in range(args.horizon):
        action = policy.dist(states[-1]).sample()
        position = (states[-1][:, :2] + 0.3 * action.clamp(-1, 1)).clamp(-1, 1)
        states.append(torch.cat([position, states[-1][:, 2:]], dim=1))
        actions.append(action)
        rewards.append(-(position - states[-1][:, 2:]).norm(dim=1))
    return torch.stack(states), torch.stack(actions), torch.stack(rewards)


def sample_paths(buffer):
    idx = torch.randint(0, buffer[0].shape[1], (args.batch_episodes,))
    return tuple(x[:, idx] for x in buffer)


def td_lambda_returns(rewards, values, gamma, lambda_):
    """R_T-1 = r_T-1 + gamma * v_T; R_t = r_t + gamma * ((1 - lambda) * v_t+1 + lambda * R_t+1)."""
    running = rewards[-1] + gamma * values[-1]
    returns = [running]
    for t in range(rewards.shape[0] - 2, -1, -1):
        running = rewards[t] + gamma * ((1 - lambda_) * values[t + 1] + lambda_ * running)
        returns.append(running)
    return torch.stack(returns[::-1])


policy, critic = Policy(), mlp(state_dim, 1)
actor_optimizer = torch.optim.SGD(policy.parameters(), lr=args.actor_lr, momentum=0.9)
critic_optimizer = torch.optim.SGD(critic.parameters(), lr=args.critic_lr, momentum=0.9)
buffer = None
for it in range(args.iterations):
    with torch.no_grad():
        episodes = rollout(args.episodes_per_iter)
    if buffer is None:
        buffer = episodes
    else:
        buffer = tuple(torch.cat([old, new], 1)[:, -args.buffer_episodes:]
                       for old, new in zip(buffer, episodes))
    # value regression on TD(lambda) returns
    for step in range(args.critic_steps):
        states, actions, rewards = sample_paths(buffer)
        values = critic(states).squeeze(-1)
        targets = td_lambda_returns(rewards, values, args.gamma, args.td_lambda)
        critic_loss = 0.5 * (targets - values[:-1]).pow(2).mean()
        critic_loss.backward()
        critic_optimizer.step()
        critic_optimizer.zero_grad()
    # policy regression weighted by exp(advantage / temp), clipped
    for step in range(args.actor_steps):
        states, actions, rewards = sample_paths(buffer)
        values = critic(states).squeeze(-1)
        returns = td_lambda_returns(rewards, values, args.gamma, args.td_lambda)
        adv = (returns - values[:-1]).detach()
        adv = (adv - adv.mean()) / (adv.std() + 1e-5)
        weights = torch.exp(adv / args.temp).clamp(max=args.weight_clip)
        actor_loss = -(weights * policy.log_prob(states[:-1], actions)).mean()
        actor_loss.backward()
        actor_optimizer.step()
        actor_optimizer.zero_grad()
    print(f"iteration {it} return {episodes[2].sum(0).mean().item():.4f} "
          f"critic {critic_loss.item():.4f} actor {actor_loss.item():.4f} "
          f"max weight {weights.max().item():.3f}")

if args.out:
    torch.save({"policy": policy.state_dict(), "critic": critic.state_dict()}, args.out)
