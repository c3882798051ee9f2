"""DrQ at a tiny size, written after Kostrikov, Yarats and Fergus, "Image Augmentation Is All You
Need: Regularizing Deep Reinforcement Learning from Pixels" (ICLR 2021, arXiv:2004.13649),
algorithm 1 (soft actor-critic with random-shift augmentation, K = M = 2), with denisyarats/drq
(https://github.com/denisyarats/drq, drq.py Encoder, Actor, Critic, DRQAgent.update_critic,
DRQAgent.update_actor_and_alpha and DRQAgent.update, replay_buffer.py ReplayBuffer.sample,
utils.py soft_update_params and tie_weights). A convolutional encoder (then a linear layer,
LayerNorm and tanh) feeds a squashed-Gaussian actor and two Q heads; the actor's encoder has its
own linear layer but its convolutions are tied to the critic's (copy_conv_weights_from), and the
actor's Adam holds them. The critic is trained on two random shifts of each observation against
the average of two soft TD targets, each from a random shift of the next observation, read from
the target critic (a copy, Polyak-averaged every ``critic_target_update_frequency`` steps) at the
actor's sampled next action, all under torch.no_grad(); the actor then minimises
alpha * log pi - min(Q1, Q2) at its reparameterised action, reading the encoder with
detach_encoder=True in both the actor and the critic (so only the critic's loss trains the
convolutions) and the temperature as alpha.detach(); the temperature is trained by
alpha * (-log pi - target_entropy), the log-probability detached. Two phases at this size: a short
warm-up trains the critic alone (the actor and the temperature held at their initial values),
then the full update, the actor and temperature every ``actor_update_frequency`` steps.
Transitions of a point-reaching task seen as two-channel 10x10 images (a blob at the point and
one at the goal), with a random behaviour policy, made in the script. As published: clean."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributions import Normal, TanhTransform, TransformedDistribution

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--warmup-steps", type=int, default=4)
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--discount", type=float, default=0.99)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--init-temperature", type=float, default=0.1)
parser.add_argument("--critic-tau", type=float, default=0.01)
parser.add_argument("--actor-update-frequency", type=int, default=2)
parser.add_argument("--critic-target-update-frequency", type=int, default=2)
parser.add_argument("--image-pad", type=int, default=1)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

image_size, channels, action_dim, feature_dim, hidden_dim, n_transitions = 10, 2, 2, 16, 32, 256
log_std_min, log_std_max = -5.0, 2.0


def render(points):
    """points (n, 2) in [-1, 1] -> a Gaussian blob on a 10x10 grid, in [0, 255]."""
    grid = torch.linspace(-1, 1, image_size)
    dy = (grid.view(1, -1, 1) - points[:, 1].view(-1, 1, 1)) ** 2
    dx = (grid.view(1, 1, -1) - points[:, 0].view(-1, 1, 1)) ** 2
    return 255 * torch.exp(-(dx + dy) / (2 * 0.2 ** 2))


def make_dataset(n):
    position = 2 * torch.rand(n, 2) - 1
    goal = 2 * torch.rand(n, 2) - 1
    actions = 2 * torch.rand(n, action_dim) - 1
    next_position = (position + 0.4 * actions).clamp(-1, 1)
    rewards = -(next_position - goal).norm(dim=1, keepdim=True)
    not_dones = torch.ones(n, 1)
    obs = torch.stack([render(position), render(goal)], dim=1)
    next_obs = torch.stack([render(next_position), render(goal)], dim=1)
    return obs, actions, rewards, next_obs, not_dones


def random_shift(images, pad):
    """Replication-pad by ``pad`` and crop back at a random offset, one offset per image."""
    n, c, h, w = images.shape
    padded = F.pad(images, (pad, pad, pad, pad), mode="replicate")
    dy = torch.randint(0, 2 * pad + 1, (n,))
    dx = torch.randint(0, 2 * pad + 1, (n,))
    rows = (dy.view(n, 1) + torch.arange(h)).view(n, 1, h, 1).expand(n, c, h, w)
    cols = (dx.view(n, 1) + torch.arange(w)).view(n, 1, 1, w).expand(n, c, h, w)
    batch = torch.arange(n).view(n, 1, 1, 1).expand(n, c, h, w)
    chans = torch.arange(c).view(1, c, 1, 1).expand(n, c, h, w)
    return padded[batch, chans, rows, cols]


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.convs = nn.ModuleList([nn.Conv2d(channels, 8, 3, stride=2),
                                    nn.Conv2d(8, 8, 3, stride=1)])
        self.fc = nn.Linear(8 * 2 * 2, feature_dim)
        self.ln = nn.LayerNorm(feature_dim)

    def forward_conv(self, obs):
        h = obs / 255.0
        for conv in self.convs:
            h = torch.relu(conv(h))
        return h.flatten(1)

    def forward(self, obs, detach=False):
        h = self.forward_conv(obs)
        if detach:
            h = h.detach()
        return torch.tanh(self.ln(self.fc(h)))

    def copy_conv_weights_from(self, source):
        for conv, source_conv in zip(self.convs, source.convs):
            conv.weight = source_conv.weight
            conv.bias = source_conv.bias


def mlp(in_dim, out_dim):
    return nn.Sequential(nn.Linear(in_dim, hidden_dim), nn.ReLU(),
                         nn.Linear(hidden_dim, hidden_dim), nn.ReLU(),
                         nn.Linear(hidden_dim, out_dim))


class Actor(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder()
        self.trunk = mlp(feature_dim, 2 * action_dim)

    def forward(self, obs, detach_encoder=False):
        mu, log_std = self.trunk(self.encoder(obs, detach=detach_encoder)).chunk(2, dim=-1)
        log_std = torch.tanh(log_std)
        log_std = log_std_min + 0.5 * (log_std_max - log_std_min) * (log_std + 1)
        return TransformedDistribution(Normal(mu, log_std.exp()), [TanhTransform(cache_size=1)])


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder()
        self.Q1 = mlp(feature_dim + action_dim, 1)
        self.Q2 = mlp(feature_dim + action_dim, 1)

    def forward(self, obs, action, detach_encoder=False):
        obs_action = torch.cat([self.encoder(obs, detach=detach_encoder), action], dim=-1)
        return self.Q1(obs_action), self.Q2(obs_action)


def soft_update_params(net, target_net, tau):
    for param, target_param in zip(net.parameters(), target_net.parameters()):
        target_param.data.copy_(tau * param.data + (1 - tau) * target_param.data)


dataset = make_dataset(n_transitions)
actor = Actor()
critic = Critic()
critic_target = Critic()
critic_target.load_state_dict(critic.state_dict())
actor.encoder.copy_conv_weights_from(critic.encoder)
log_alpha = torch.tensor(math.log(args.init_temperature), requires_grad=True)
target_entropy = -action_dim
actor_optimizer = torch.optim.Adam(actor.parameters(), lr=args.lr)
critic_optimizer = torch.optim.Adam(critic.parameters(), lr=args.lr)
log_alpha_optimizer = torch.optim.Adam([log_alpha], lr=args.lr)


def sample():
    idx = torch.randint(0, n_transitions, (args.batch_size,))
    obs, action, reward, next_obs, not_done = (t[idx] for t in dataset)
    obs_aug, next_obs_aug = obs.clone(), next_obs.clone()
    obs, next_obs = random_shift(obs, args.image_pad), random_shift(next_obs, args.image_pad)
    obs_aug = random_shift(obs_aug, args.image_pad)
    next_obs_aug = random_shift(next_obs_aug, args.image_pad)
    return obs, action, reward, next_obs, not_done, obs_aug, next_obs_aug


def soft_target(next_obs, reward, not_done):
    dist = actor(next_obs)
    next_action = dist.rsample()
    log_prob = dist.log_prob(next_action).sum(-1, keepdim=True)
    target_Q1, target_Q2 = critic_target(next_obs, next_action)
    target_V = torch.min(target_Q1, target_Q2) - log_alpha.exp().detach() * log_prob
    return reward + not_done * args.discount * target_V


def update_critic(obs, action, reward, next_obs, not_done, obs_aug, next_obs_aug):
    with torch.no_grad():
        target_Q = soft_target(next_obs, reward, not_done)
        target_Q_aug = soft_target(next_obs_aug, reward, not_done)
        target_Q = (target_Q + target_Q_aug) / 2
    current_Q1, current_Q2 = critic(obs, action)
    critic_loss = F.mse_loss(current_Q1, target_Q) + F.mse_loss(current_Q2, target_Q)
    Q1_aug, Q2_aug = critic(obs_aug, action)
    critic_loss = critic_loss + F.mse_loss(Q1_aug, target_Q) + F.mse_loss(Q2_aug, target_Q)
    critic_optimizer.zero_grad()
    critic_loss.backward()
    critic_optimizer.step()
    return critic_loss.item()


def update_actor_and_alpha(obs):
    dist = actor(obs, detach_encoder=True)
    action = dist.rsample()
    log_prob = dist.log_prob(action).sum(-1, keepdim=True)
    actor_Q1, actor_Q2 = critic(obs, action, detach_encoder=True)
    actor_Q = torch.min(actor_Q1, actor_Q2)
    alpha = log_alpha.exp()
    actor_loss = (alpha.detach() * log_prob - actor_Q).mean()
    actor_optimizer.zero_grad()
    actor_loss.backward()
    actor_optimizer.step()
    log_alpha_optimizer.zero_grad()
    alpha_loss = (alpha * (-log_prob - target_entropy).detach()).mean()
    alpha_loss.backward()
    log_alpha_optimizer.step()
    return actor_loss.item(), alpha_loss.item()


# phase 1: warm-up, the critic alone
for step in range(args.warmup_steps):
    critic_loss = update_critic(*sample())
    if step % args.critic_target_update_frequency == 0:
        soft_update_params(critic, critic_target, args.critic_tau)
    print(f"warm-up step {step} critic {critic_loss:.4f}")

# phase 2: DrQ, critic every step, actor and temperature every actor_update_frequency steps
for step in range(args.steps):
    batch = sample()
    critic_loss = update_critic(*batch)
    if step % args.actor_update_frequency == 0:
        actor_loss, alpha_loss = update_actor_and_alpha(batch[0])
        print(f"step {step} actor {actor_loss:.4f} alpha {alpha_loss:.4f}")
    if step % args.critic_target_update_frequency == 0:
        soft_update_params(critic, critic_target, args.critic_tau)
    print(f"step {step} critic {critic_loss:.4f}")

if args.out:
    torch.save({"actor": actor.state_dict(), "critic": critic.state_dict(),
                "critic_target": critic_target.state_dict(), "log_alpha": log_alpha.detach()},
               args.out)
