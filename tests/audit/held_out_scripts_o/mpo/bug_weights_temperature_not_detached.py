"""Maximum a posteriori policy optimisation at a tiny size, written after Abdolmaleki, Springenberg,
Tassa, Munos, Heess and Riedmiller, "Maximum a Posteriori Policy Optimisation" (ICLR 2018,
arXiv:1806.06920), with google-deepmind/acme (https://github.com/google-deepmind/acme,
acme/tf/losses/mpo.py MPO.__call__: compute_weights_and_temperature_loss, whose E-step weights
softmax(Q / stop_gradient(temperature)) over actions sampled from the target policy and scored
by the target critic, and whose dual loss trains the temperature; compute_cross_entropy_loss for
the M-step on two decoupled Gaussians, one with the online mean and the target stddev, one with
the target mean and the online stddev; compute_parametric_kl_penalty_and_dual_loss, the KL
penalty with stop_gradient(alpha) and the dual loss alpha * (epsilon - stop_gradient(kl)), per
action dimension; acme/agents/tf/mpo/learning.py MPOLearner._step, one loss whose gradients go
to the policy's optimizer and to a dual optimizer over the temperature and both multipliers,
the critic's TD target under the target networks, and target networks copied every few steps).
A point-reaching task made in the script; transitions from the acting policy fill a replay
buffer and each environment step is followed by one update. Bug: the E-step weights are
softmax(q / temperature) with the temperature's graph, where acme's
compute_weights_and_temperature_loss divides by tf.stop_gradient(temperature), so the M-step's
weighted cross-entropy also backpropagates into log_temperature and the dual optimizer steps the
temperature on the dual loss plus the gradient of the policy's loss through the weights."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributions import Normal, kl_divergence

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--start-steps", type=int, default=48)
parser.add_argument("--steps", type=int, default=24)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--num-samples", type=int, default=16, help="actions sampled per state")
parser.add_argument("--target-period", type=int, default=6)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--dual-lr", type=float, default=1e-2)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

obs_dim, act_dim, hidden_dim, episode_len, gamma = 4, 2, 32, 12, 0.9
epsilon, epsilon_mean, epsilon_stddev = 0.1, 0.05, 1e-3


def step_env(obs, action):
    position = (obs[:2] + 0.3 * action.clamp(-1, 1)).clamp(-1, 1)
    return torch.cat([position, obs[2:]]), -(position - obs[2:]).norm()


class GaussianPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs_dim, hidden_dim), nn.Tanh(),
                                 nn.Linear(hidden_dim, 2 * act_dim))

    def forward(self, obs):
        mean, raw_std = self.net(obs).chunk(2, dim=-1)
        return torch.tanh(mean), F.softplus(raw_std) + 1e-3


critic = nn.Sequential(nn.Linear(obs_dim + act_dim, hidden_dim), nn.ELU(),
                       nn.Linear(hidden_dim, hidden_dim), nn.ELU(), nn.Linear(hidden_dim, 1))
policy = GaussianPolicy()
target_policy, target_critic = copy.deepcopy(policy), copy.deepcopy(critic)
log_temperature = torch.tensor([1.0], requires_grad=True)
log_alpha_mean = torch.full((act_dim,), 1.0, requires_grad=True)
log_alpha_stddev = torch.full((act_dim,), 3.0, requires_grad=True)
policy_optimizer = torch.optim.Adam(policy.parameters(), lr=args.lr)
critic_optimizer = torch.optim.Adam(critic.parameters(), lr=args.lr)
dual_optimizer = torch.optim.Adam([log_temperature, log_alpha_mean, log_alpha_stddev],
                                  lr=args.dual_lr)
buffer = {k: [] for k in ("obs", "act", "rew", "next_obs")}


def q_of(net, obs, actions):
    """Q of every sampled action, [N, B, A] -> [N, B]."""
    obs = obs.expand(actions.shape[0], -1, -1)
    return net(torch.cat([obs, actions], dim=-1)).squeeze(-1)


def update(step):
    idx = torch.randint(0, len(buffer["obs"]), (args.batch_size,))
    obs, act, rew, next_obs = (torch.stack(buffer[k])[idx] for k in buffer)

    with torch.no_grad():  # the critic's target under the target policy and critic
        next_mean, next_std = target_policy(next_obs)
        next_actions = Normal(next_mean, next_std).sample((args.num_samples,))
        y = rew + gamma * q_of(target_critic, next_obs, next_actions).mean(0)
    critic_loss = F.mse_loss(critic(torch.cat([obs, act], dim=-1)).squeeze(-1), y)
    critic_optimizer.zero_grad()
    critic_loss.backward()
    critic_optimizer.step()

    with torch.no_grad():  # the E-step samples, scored by the target critic
        target_mean, target_std = target_policy(obs)
        actions = Normal(target_mean, target_std).sample((args.num_samples,))
        q = q_of(target_critic, obs, actions)
    temperature = F.softplus(log_temperature) + 1e-8
    alpha_mean = F.softplus(log_alpha_mean) + 1e-8
    alpha_stddev = F.softplus(log_alpha_stddev) + 1e-8
    weights = F.softmax(q / temperature, dim=0)
    q_logsumexp = torch.logsumexp(q / temperature, dim=0)
    log_num = torch.log(torch.tensor(float(args.num_samples)))
    loss_temperature = temperature * (epsilon + q_logsumexp.mean() - log_num)

    online_mean, online_std = policy(obs)  # M-step on the two decoupled Gaussians
    fixed_stddev = Normal(online_mean, target_std)
    fixed_mean = Normal(target_mean, online_std)
    loss_mean = -(weights * fixed_stddev.log_prob(actions).sum(-1)).sum(0).mean()
    loss_stddev = -(weights * fixed_mean.log_prob(actions).sum(-1)).sum(0).mean()
    kl_mean = kl_divergence(Normal(target_mean, target_std), fixed_stddev).mean(0)
    kl_stddev = kl_divergence(Normal(target_mean, target_std), fixed_mean).mean(0)
    loss_kl = (alpha_mean.detach() * kl_mean).sum() + (alpha_stddev.detach() * kl_stddev).sum()
    loss_alpha = ((alpha_mean * (epsilon_mean - kl_mean.detach())).sum()
                  + (alpha_stddev * (epsilon_stddev - kl_stddev.detach())).sum())
    loss = loss_mean + loss_stddev + loss_kl + loss_alpha + loss_temperature.sum()
    policy_optimizer.zero_grad()
    dual_optimizer.zero_grad()
    loss.backward()
    policy_optimizer.step()
    dual_optimizer.step()
    with torch.no_grad():
        for log_dual in (log_temperature, log_alpha_mean, log_alpha_stddev):
            log_dual.clamp_(min=-18.0)
    if (step + 1) % args.target_period == 0:
        target_policy.load_state_dict(policy.state_dict())
        target_critic.load_state_dict(critic.state_dict())
    return critic_loss.item(), loss.item()


obs, t, n_updates = 2 * torch.rand(obs_dim) - 1, 0, 0
for step in range(args.start_steps + args.steps):
    if step < args.start_steps:
        action = 2 * torch.rand(act_dim) - 1
    else:
        with torch.no_grad():
            mean, std = policy(obs)
            action = Normal(mean, std).sample()
    next_obs, reward = step_env(obs, action)
    for k, v in zip(buffer, (obs, action, reward, next_obs)):
        buffer[k].append(v)
    obs, t = next_obs, t + 1
    if t == episode_len:
        obs, t = 2 * torch.rand(obs_dim) - 1, 0
    if step >= args.start_steps:
        critic_loss, policy_loss = update(n_updates)
        n_updates += 1
        print(f"step {step} critic {critic_loss:.4f} policy {policy_loss:.4f} "
              f"temperature {F.softplus(log_temperature).item():.4f}")

if args.out:
    torch.save({**{f"policy.{k}": v for k, v in policy.state_dict().items()},
                **{f"critic.{k}": v for k, v in critic.state_dict().items()},
                **{f"target_policy.{k}": v for k, v in target_policy.state_dict().items()},
                **{f"target_critic.{k}": v for k, v in target_critic.state_dict().items()},
                "log_temperature": log_temperature.detach(),
                "log_alpha_mean": log_alpha_mean.detach(),
                "log_alpha_stddev": log_alpha_stddev.detach()}, args.out)
