"""Model-based policy optimization at a tiny size, written after Janner, Fu, Zhang and Levine,
"When to Trust Your Model: Model-Based Policy Optimization" (NeurIPS 2019, arXiv:1906.08253),
algorithm 2, with jannerm/mbpo (https://github.com/jannerm/mbpo, mbpo/models/bnn.py BNN: a
probabilistic ensemble whose log-variance bounds max_logvar and min_logvar BNN.finalize adds to
optvars, trained with 0.01 * sum(max_logvar) - 0.01 * sum(min_logvar); holdout losses pick the
elites) and Xingyu-Lin/mbpo_pytorch (https://github.com/Xingyu-Lin/mbpo_pytorch, main_mbpo.py
rollout_model, model steps from real states with the policy's actions as numbers, and
train_policy_repeats, batches mixed by real_ratio; sac/sac.py SAC.update_parameters: the target
under torch.no_grad(), policy_optim.zero_grad(), the policy's backward through the critic and
its step, then critic_optim.zero_grad(), the critics' backward and step, and soft_update). Two
phases: random steps fill the real buffer and the ensemble is fitted; then each epoch the model
is refitted, one-step rollouts fill the model buffer and each real step is followed by SAC
updates. A point-steering task made in the script. Injected bug: the log-variance bounds are
made nn.Parameter(..., requires_grad=False), so max_logvar and min_logvar are never trained and
the bound term 0.01 * (sum(max_logvar) - sum(min_logvar)) no longer moves them."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--init-steps", type=int, default=60)
parser.add_argument("--model-steps", type=int, default=40)
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--epoch-length", type=int, default=5)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

obs_dim, act_dim, hidden_dim, n_nets, n_elites, episode_len = 3, 1, 32, 3, 2, 10
gamma, tau, alpha, rollout_batch, real_ratio, refit_steps, updates_per_step = (
    0.9, 0.05, 0.2, 64, 0.25, 8, 2)
drift, steer = 0.3 * torch.randn(obs_dim, obs_dim), torch.randn(act_dim, obs_dim)


class EnsembleLinear(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n_nets, n_in, n_out) / (2 * n_in ** 0.5))
        self.bias = nn.Parameter(torch.zeros(n_nets, 1, n_out))

    def forward(self, x):
        return torch.baddbmm(self.bias, x, self.weight)


class EnsembleModel(nn.Module):
    def __init__(self, out_dim=obs_dim + 1):
        super().__init__()
        self.layers = nn.ModuleList([EnsembleLinear(obs_dim + act_dim, hidden_dim),
                                     EnsembleLinear(hidden_dim, 2 * out_dim)])
        self.max_logvar = nn.Parameter(torch.full((1, 1, out_dim), 0.5), requires_grad=False)
        self.min_logvar = nn.Parameter(torch.full((1, 1, out_dim), -10.0), requires_grad=False)

    def forward(self, x):
        mean, raw_logvar = self.layers[1](F.silu(self.layers[0](x))).chunk(2, dim=-1)
        logvar = self.max_logvar - F.softplus(self.max_logvar - raw_logvar)
        return mean, self.min_logvar + F.softplus(logvar - self.min_logvar)


class TanhGaussianPolicy(nn.Sequential):
    def __init__(self):
        super().__init__(nn.Linear(obs_dim, hidden_dim), nn.ReLU(),
                         nn.Linear(hidden_dim, 2 * act_dim))

    def forward(self, state):
        mean, log_std = super().forward(state).chunk(2, dim=-1)
        normal = torch.distributions.Normal(mean, log_std.clamp(-5, 2).exp())
        pre_tanh = normal.rsample()
        action = torch.tanh(pre_tanh)
        log_prob = normal.log_prob(pre_tanh) - torch.log(1 - action.pow(2) + 1e-6)
        return action, log_prob.sum(-1, keepdim=True)


class QNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.q1, self.q2 = (nn.Sequential(nn.Linear(obs_dim + act_dim, hidden_dim), nn.ReLU(),
                                          nn.Linear(hidden_dim, 1)) for _ in range(2))

    def forward(self, state, action):
        sa = torch.cat([state, action], dim=-1)
        return self.q1(sa), self.q2(sa)


model = EnsembleModel()
model_optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
policy, critic = TanhGaussianPolicy(), QNetwork()
critic_target = copy.deepcopy(critic)
policy_optimizer = torch.optim.Adam(policy.parameters(), lr=args.lr)
critic_optimizer = torch.optim.Adam(critic.parameters(), lr=args.lr)
env_pool, model_pool = [], []


def train_model(n_steps):
    state, action, reward, next_state = (torch.stack(x) for x in zip(*env_pool))
    inputs, labels = torch.cat([state, action], 1), torch.cat([reward, next_state - state], 1)
    n_holdout = len(inputs) // 5
    for _ in range(n_steps):  # a bootstrap minibatch for each member
        idx = torch.randint(n_holdout, len(inputs), (n_nets, args.batch_size))
        mean, logvar = model(inputs[idx])
        loss = ((mean - labels[idx]).pow(2) * torch.exp(-logvar) + logvar).mean((1, 2)).sum()
        loss = loss + 0.01 * model.max_logvar.sum() - 0.01 * model.min_logvar.sum()
        model_optimizer.zero_grad()
        loss.backward()
        model_optimizer.step()
    with torch.no_grad():
        mean, _ = model(inputs[:n_holdout].expand(n_nets, -1, -1))
        holdout_mse = (mean - labels[:n_holdout]).pow(2).mean((1, 2))
    return holdout_mse.argsort()[:n_elites], holdout_mse.min().item()


def update_sac():
    n_real = int(args.batch_size * real_ratio)  # a batch of real and model transitions
    rows = [env_pool[i] for i in torch.randint(0, len(env_pool), (n_real,))]
    rows += [model_pool[i] for i in torch.randint(0, len(model_pool), (args.batch_size - n_real,))]
    state, action, reward, next_state = (torch.stack(x) for x in zip(*rows))
    with torch.no_grad():
        next_action, next_log_pi = policy(next_state)
        q1_next, q2_next = critic_target(next_state, next_action)
        next_q = reward + gamma * (torch.min(q1_next, q2_next) - alpha * next_log_pi)
    q1, q2 = critic(state, action)
    critic_loss = F.mse_loss(q1, next_q) + F.mse_loss(q2, next_q)
    pi, log_pi = policy(state)
    policy_loss = (alpha * log_pi - torch.min(*critic(state, pi))).mean()
    policy_optimizer.zero_grad()
    policy_loss.backward()
    policy_optimizer.step()
    critic_optimizer.zero_grad()
    critic_loss.backward()
    critic_optimizer.step()
    with torch.no_grad():
        for p, p_target in zip(critic.parameters(), critic_target.parameters()):
            p_target.copy_(tau * p + (1 - tau) * p_target)
    return critic_loss.item()


def env_step(state, t, action):
    next_state = (state + 0.2 * torch.tanh(state @ drift + action @ steer)).clamp(-2, 2)
    reward = -next_state.pow(2).sum(-1, keepdim=True) - 0.1 * action.pow(2)
    env_pool.append((state, action, reward, next_state))
    return (2 * torch.rand(obs_dim) - 1, 0) if t + 1 == episode_len else (next_state, t + 1)


# phase 1: random exploration fills the real buffer, then the ensemble is fitted on it
state, t = 2 * torch.rand(obs_dim) - 1, 0
for _ in range(args.init_steps):
    state, t = env_step(state, t, 2 * torch.rand(act_dim) - 1)
elites, holdout = train_model(args.model_steps)
print(f"model fitted, holdout mse {holdout:.4f}")

# phase 2: refit the model, branch one-step rollouts from real states, train SAC on both
for epoch in range(args.epochs):
    if epoch > 0:
        elites, holdout = train_model(refit_steps)
    with torch.no_grad():  # one model step from real states, a random elite for each row
        idx = torch.randint(0, len(env_pool), (rollout_batch,))
        origin = torch.stack([env_pool[i][0] for i in idx])
        origin_action = policy(origin)[0]
        mean, logvar = model(torch.cat([origin, origin_action], 1).expand(n_nets, -1, -1))
        sample = mean + torch.randn_like(mean) * (0.5 * logvar).exp()
        member = elites[torch.randint(0, n_elites, (rollout_batch,))]
        sample = sample[member, torch.arange(rollout_batch)]
    model_pool.extend(zip(origin, origin_action, sample[:, :1], origin + sample[:, 1:]))
    for _ in range(args.epoch_length):
        state, t = env_step(state, t, policy(state)[0].detach())
        for _ in range(updates_per_step):
            critic_loss = update_sac()
    print(f"epoch {epoch} holdout {holdout:.4f} critic {critic_loss:.4f}")

if args.out:
    nets = {"model": model, "policy": policy, "critic": critic, "critic_target": critic_target}
    torch.save({f"{n}.{k}": v for n, net in nets.items() for k, v in net.state_dict().items()},
               args.out)
