"""CURL: contrastive representation learning on top of pixel-based SAC, on a tiny point-mass task.

Paper: Aravind Srinivas, Michael Laskin and Pieter Abbeel, "CURL: Contrastive Unsupervised
Representations for Reinforcement Learning", arXiv:2004.04136, ICML 2020.
Reference implementation: MishaLaskin/curl, curl_sac.py (Actor with a tanh-squashed Gaussian
head and log_std bounded by a tanh, QFunction, Critic with two Q heads over one pixel encoder,
CURL with the bilinear matrix W, encode(ema=True) running the key encoder under torch.no_grad()
and compute_logits subtracting the row maximum; CurlSacAgent.update_critic,
update_actor_and_alpha, update_cpc and update), encoder.py (PixelEncoder: a stride-2 then a
stride-1 3x3 convolution, fc and LayerNorm, detach=True cutting after the convolutions;
copy_conv_weights_from tying the actor's convolutions to the critic's), utils.py
(soft_update_params, ReplayBuffer.sample_cpc with independent random crops for the anchor and
the positive) and train.py (init_steps of random actions, then one agent.update per env step).

The environment is a point mass on [-1, 1]^2 drawn as a Gaussian blob on a 24x24 grid; two
frames are stacked and every sampled observation is randomly cropped to 20x20 (centre crop for
acting). The reward is minus the distance to a fixed goal; time-limit ends are bootstrapped
(not_done = 1), as the reference's done_bool does. The critic's encoder (convolutions, fc and
LayerNorm) is the query encoder of CURL; the critic target's encoder, updated only by an
exponential moving average (encoder_tau), is the momentum key encoder. Each update runs:
the critic step on the TD error against the target critic (targets under torch.no_grad()); every
actor_update_freq steps the actor and temperature steps with the encoder's convolutions detached
(the actor's own fc/LayerNorm train through the actor loss); every critic_target_update_freq
steps the soft updates of Q1, Q2 (critic_tau) and the encoder (encoder_tau); then the contrastive
step: queries from the critic encoder, keys from the key encoder without gradient, logits
z_a W z_pos^T, cross entropy against the diagonal, and both the encoder optimizer and the CPC
optimizer (W plus the query encoder) step, as in the reference.
As published: clean.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--init_steps", type=int, default=20)
parser.add_argument("--num_train_steps", type=int, default=60)
parser.add_argument("--episode_len", type=int, default=15)
parser.add_argument("--batch_size", type=int, default=16)
parser.add_argument("--pre_image_size", type=int, default=24)
parser.add_argument("--image_size", type=int, default=20)
parser.add_argument("--frame_stack", type=int, default=2)
parser.add_argument("--hidden_dim", type=int, default=32)
parser.add_argument("--feature_dim", type=int, default=16)
parser.add_argument("--num_filters", type=int, default=8)
parser.add_argument("--critic_lr", type=float, default=1e-3)
parser.add_argument("--actor_lr", type=float, default=1e-3)
parser.add_argument("--encoder_lr", type=float, default=1e-3)
parser.add_argument("--alpha_lr", type=float, default=1e-4)
parser.add_argument("--critic_tau", type=float, default=0.01)
parser.add_argument("--encoder_tau", type=float, default=0.05)
parser.add_argument("--actor_update_freq", type=int, default=2)
parser.add_argument("--critic_target_update_freq", type=int, default=2)
parser.add_argument("--discount", type=float, default=0.99)
parser.add_argument("--init_temperature", type=float, default=0.1)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

ACTION_DIM = 2
GOAL = torch.tensor([0.5, -0.3])


class PointMassPixels:
    """A point mass moved by its action, observed as stacked rendered frames."""

    def __init__(self, size, frame_stack, episode_len):
        self.size, self.k, self.episode_len = size, frame_stack, episode_len
        grid = torch.linspace(-1.0, 1.0, size)
        self.gy, self.gx = torch.meshgrid(grid, grid, indexing="ij")

    def render(self):
        d2 = (self.gx - self.pos[0]) ** 2 + (self.gy - self.pos[1]) ** 2
        return 255.0 * torch.exp(-d2 / 0.02)

    def reset(self):
        self.pos = torch.rand(2) * 2 - 1
        self.t = 0
        self.frames = [self.render() for _ in range(self.k)]
        return torch.stack(self.frames)

    def step(self, action):
        self.pos = (self.pos + 0.2 * action).clamp(-1.0, 1.0)
        self.t += 1
        self.frames = self.frames[1:] + [self.render()]
        reward = -torch.linalg.vector_norm(self.pos - GOAL).item()
        return torch.stack(self.frames), reward, self.t >= self.episode_len


def random_crop(imgs, out):
    n, crop_max = imgs.shape[0], imgs.shape[-1] - out
    top = torch.randint(0, crop_max, (n,))
    left = torch.randint(0, crop_max, (n,))
    return torch.stack([imgs[i, :, top[i]:top[i] + out, left[i]:left[i] + out]
                        for i in range(n)])


def center_crop(img, out):
    top = (img.shape[-1] - out) // 2
    return img[..., top:top + out, top:top + out]


class ReplayBuffer:
    def __init__(self, obs_shape, capacity, batch_size, image_size):
        self.obses = torch.zeros(capacity, *obs_shape)
        self.next_obses = torch.zeros(capacity, *obs_shape)
        self.actions = torch.zeros(capacity, ACTION_DIM)
        self.rewards = torch.zeros(capacity, 1)
        self.not_dones = torch.zeros(capacity, 1)
        self.batch_size, self.image_size, self.idx = batch_size, image_size, 0

    def add(self, obs, action, reward, next_obs, done):
        self.obses[self.idx] = obs
        self.actions[self.idx] = action
        self.rewards[self.idx] = reward
        self.next_obses[self.idx] = next_obs
        self.not_dones[self.idx] = 1.0 - done
        self.idx += 1

    def sample_cpc(self):
        idxs = torch.randint(0, self.idx, (self.batch_size,))
        obses = random_crop(self.obses[idxs], self.image_size)
        next_obses = random_crop(self.next_obses[idxs], self.image_size)
        pos = random_crop(self.obses[idxs], self.image_size)
        cpc_kwargs = dict(obs_anchor=obses, obs_pos=pos)
        return (obses, self.actions[idxs], self.rewards[idxs], next_obses,
                self.not_dones[idxs], cpc_kwargs)


def weight_init(m):
    if isinstance(m, nn.Linear):
        nn.init.orthogonal_(m.weight)
        nn.init.zeros_(m.bias)
    elif isinstance(m, nn.Conv2d):
        nn.init.zeros_(m.weight)
        nn.init.zeros_(m.bias)
        mid = m.weight.size(2) // 2
        with torch.no_grad():
            nn.init.orthogonal_(m.weight[:, :, mid, mid], nn.init.calculate_gain("relu"))


class PixelEncoder(nn.Module):
    def __init__(self, obs_shape, feature_dim, num_filters):
        super().__init__()
        self.convs = nn.ModuleList([nn.Conv2d(obs_shape[0], num_filters, 3, stride=2),
                                    nn.Conv2d(num_filters, num_filters, 3, stride=1)])
        out_dim = (obs_shape[-1] - 3) // 2 + 1 - 2
        self.fc = nn.Linear(num_filters * out_dim * out_dim, feature_dim)
        self.ln = nn.LayerNorm(feature_dim)
        self.feature_dim = feature_dim

    def forward(self, obs, detach=False):
        h = obs / 255.0
        for conv in self.convs:
            h = torch.relu(conv(h))
        h = h.flatten(1)
        if detach:
            h = h.detach()
        return self.ln(self.fc(h))

    def copy_conv_weights_from(self, source):
        for conv, src in zip(self.convs, source.convs):
            conv.weight = src.weight
            conv.bias = src.bias


def gaussian_logprob(noise, log_std):
    residual = (-0.5 * noise.pow(2) - log_std).sum(-1, keepdim=True)
    return residual - 0.5 * math.log(2 * math.pi) * noise.size(-1)


def squash(mu, pi, log_pi):
    mu, pi = torch.tanh(mu), torch.tanh(pi)
    log_pi = log_pi - torch.log(F.relu(1 - pi.pow(2)) + 1e-6).sum(-1, keepdim=True)
    return mu, pi, log_pi


class Actor(nn.Module):
    def __init__(self, obs_shape, hidden_dim, feature_dim, num_filters,
                 log_std_min=-10.0, log_std_max=2.0):
        super().__init__()
        self.encoder = PixelEncoder(obs_shape, feature_dim, num_filters)
        self.log_std_min, self.log_std_max = log_std_min, log_std_max
        self.trunk = nn.Sequential(
            nn.Linear(feature_dim, hidden_dim), nn.ReLU(),
            nn.Linear(hidden_dim, hidden_dim), nn.ReLU(),
            nn.Linear(hidden_dim, 2 * ACTION_DIM))
        self.apply(weight_init)

    def forward(self, obs, detach_encoder=False):
        h = self.encoder(obs, detach=detach_encoder)
        mu, log_std = self.trunk(h).chunk(2, dim=-1)
        log_std = torch.tanh(log_std)
        log_std = self.log_std_min + 0.5 * (self.log_std_max - self.log_std_min) * (log_std + 1)
        noise = torch.randn_like(mu)
        pi = mu + noise * log_std.exp()
        log_pi = gaussian_logprob(noise, log_std)
        mu, pi, log_pi = squash(mu, pi, log_pi)
        return mu, pi, log_pi, log_std


class QFunction(nn.Module):
    def __init__(self, obs_dim, hidden_dim):
        super().__init__()
        self.trunk = nn.Sequential(
            nn.Linear(obs_dim + ACTION_DIM, hidden_dim), nn.ReLU(),
            nn.Linear(hidden_dim, hidden_dim), nn.ReLU(),
            nn.Linear(hidden_dim, 1))

    def forward(self, h, action):
        return self.trunk(torch.cat([h, action], dim=1))


class Critic(nn.Module):
    def __init__(self, obs_shape, hidden_dim, feature_dim, num_filters):
        super().__init__()
        self.encoder = PixelEncoder(obs_shape, feature_dim, num_filters)
        self.Q1 = QFunction(feature_dim, hidden_dim)
        self.Q2 = QFunction(feature_dim, hidden_dim)
        self.apply(weight_init)

    def forward(self, obs, action, detach_encoder=False):
        h = self.encoder(obs, detach=detach_encoder)
        return self.Q1(h, action), self.Q2(h, action)


class CURL(nn.Module):
    def __init__(self, z_dim, critic, critic_target):
        super().__init__()
        self.encoder = critic.encoder
        self.encoder_target = critic_target.encoder
        self.W = nn.Parameter(torch.rand(z_dim, z_dim))

    def encode(self, x, ema=False):
        if ema:
            with torch.no_grad():
                z_out = self.encoder_target(x)
        else:
            z_out = self.encoder(x)
        return z_out

    def compute_logits(self, z_a, z_pos):
        logits = z_a @ (self.W @ z_pos.T)
        return logits - logits.max(1)[0][:, None]


def soft_update_params(net, target_net, tau):
    with torch.no_grad():
        for param, target_param in zip(net.parameters(), target_net.parameters()):
            target_param.copy_(tau * param + (1 - tau) * target_param)


class CurlSacAgent:
    def __init__(self, obs_shape):
        self.actor = Actor(obs_shape, args.hidden_dim, args.feature_dim, args.num_filters)
        self.critic = Critic(obs_shape, args.hidden_dim, args.feature_dim, args.num_filters)
        self.critic_target = Critic(obs_shape, args.hidden_dim, args.feature_dim,
                                    args.num_filters)
        self.critic_target.load_state_dict(self.critic.state_dict())
        self.curl = CURL(args.feature_dim, self.critic, self.critic_target)
        self.actor.encoder.copy_conv_weights_from(self.critic.encoder)

        self.log_alpha = torch.tensor(math.log(args.init_temperature), requires_grad=True)
        self.target_entropy = -float(ACTION_DIM)

        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=args.actor_lr,
                                                betas=(0.9, 0.999))
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=args.critic_lr,
                                                 betas=(0.9, 0.999))
        self.log_alpha_optimizer = torch.optim.Adam([self.log_alpha], lr=args.alpha_lr,
                                                    betas=(0.5, 0.999))
        self.encoder_optimizer = torch.optim.Adam(self.critic.encoder.parameters(),
                                                  lr=args.encoder_lr)
        self.cpc_optimizer = torch.optim.Adam(self.curl.parameters(), lr=args.encoder_lr)
        self.cross_entropy_loss = nn.CrossEntropyLoss()

    @property
    def alpha(self):
        return self.log_alpha.exp()

    def sample_action(self, obs):
        with torch.no_grad():
            _, pi, _, _ = self.actor(center_crop(obs, args.image_size).unsqueeze(0))
        return pi[0]

    def update_critic(self, obs, action, reward, next_obs, not_done):
        with torch.no_grad():
            _, policy_action, log_pi, _ = self.actor(next_obs)
            target_Q1, target_Q2 = self.critic_target(next_obs, policy_action)
            target_V = torch.min(target_Q1, target_Q2) - self.alpha.detach() * log_pi
            target_Q = reward + not_done * args.discount * target_V
        current_Q1, current_Q2 = self.critic(obs, action)
        critic_loss = F.mse_loss(current_Q1, target_Q) + F.mse_loss(current_Q2, target_Q)
        self.critic_optimizer.zero_grad()
        critic_loss.backward()
        self.critic_optimizer.step()
        return critic_loss.item()

    def update_actor_and_alpha(self, obs):
        _, pi, log_pi, log_std = self.actor(obs, detach_encoder=True)
        actor_Q1, actor_Q2 = self.critic(obs, pi, detach_encoder=True)
        actor_Q = torch.min(actor_Q1, actor_Q2)
        actor_loss = (self.alpha.detach() * log_pi - actor_Q).mean()
        self.actor_optimizer.zero_grad()
        actor_loss.backward()
        self.actor_optimizer.step()

        self.log_alpha_optimizer.zero_grad()
        alpha_loss = (self.alpha * (-log_pi - self.target_entropy).detach()).mean()
        alpha_loss.backward()
        self.log_alpha_optimizer.step()

    def update_cpc(self, obs_anchor, obs_pos):
        z_a = self.curl.encode(obs_anchor)
        z_pos = self.curl.encode(obs_pos, ema=True)
        logits = self.curl.compute_logits(z_a, z_pos)
        labels = torch.arange(logits.shape[0])
        loss = self.cross_entropy_loss(logits, labels)
        self.encoder_optimizer.zero_grad()
        self.cpc_optimizer.zero_grad()
        loss.backward()
        self.encoder_optimizer.step()
        self.cpc_optimizer.step()
        return loss.item()

    def update(self, replay_buffer, step):
        obs, action, reward, next_obs, not_done, cpc_kwargs = replay_buffer.sample_cpc()
        critic_loss = self.update_critic(obs, action, reward, next_obs, not_done)
        if step % args.actor_update_freq == 0:
            self.update_actor_and_alpha(obs)
        if step % args.critic_target_update_freq == 0:
            soft_update_params(self.critic.Q1, self.critic_target.Q1, args.critic_tau)
            soft_update_params(self.critic.Q2, self.critic_target.Q2, args.critic_tau)
            soft_update_params(self.critic.encoder, self.critic_target.encoder,
                               args.encoder_tau)
        cpc_loss = self.update_cpc(cpc_kwargs["obs_anchor"], cpc_kwargs["obs_pos"])
        return critic_loss, cpc_loss


env = PointMassPixels(args.pre_image_size, args.frame_stack, args.episode_len)
obs_shape = (args.frame_stack, args.image_size, args.image_size)
replay_buffer = ReplayBuffer((args.frame_stack, args.pre_image_size, args.pre_image_size),
                             args.num_train_steps, args.batch_size, args.image_size)
agent = CurlSacAgent(obs_shape)

done, episode_reward = True, 0.0
for step in range(args.num_train_steps):
    if done:
        obs = env.reset()
        done, episode_reward = False, 0.0
    if step < args.init_steps:
        action = torch.rand(ACTION_DIM) * 2 - 1
    else:
        action = agent.sample_action(obs)
    if step >= args.init_steps:
        critic_loss, cpc_loss = agent.update(replay_buffer, step)
        if step % 10 == 0 or step == args.num_train_steps - 1:
            print(f"step {step:3d} critic {critic_loss:.4f} curl {cpc_loss:.4f} "
                  f"alpha {agent.alpha.item():.4f}")
    next_obs, reward, done = env.step(action)
    episode_reward += reward
    replay_buffer.add(obs, action, reward, next_obs, 0.0)
    obs = next_obs

if args.out:
    torch.save({"actor": agent.actor.state_dict(), "critic": agent.critic.state_dict(),
                "critic_target": agent.critic_target.state_dict(),
                "curl": {k: v for k, v in agent.curl.state_dict().items() if k != "W"},
                "W": agent.curl.W.detach().clone(), "log_alpha": agent.log_alpha.detach()},
               args.out)
