"""Deep bisimulation for control at a tiny size, written after Zhang, McAllister, Calandra, Gal
and Levine, "Learning Invariant Representations for Reinforcement Learning without
Reconstruction" (ICLR 2021, arXiv:2006.10742), algorithm 1: the critic's encoder is trained by
the TD loss and by a bisimulation loss that regresses the L1 distance of two states' latents onto
|r_i - r_j| + gamma * W_2 of their predicted next-latent distributions, a target taken without
gradient; the SAC actor reads the latent cut off from the encoder. With
facebookresearch/deep_bisim4control (https://github.com/facebookresearch/deep_bisim4control,
agent/bisim_agent.py: BisimAgent.__init__, which ties the actor's conv layers to the critic's;
update_encoder, the transition model's prediction and the permuted rewards under no_grad;
update_transition_reward_model, which detaches next_h; update; update_actor_and_alpha, which
calls self.actor(obs, detach_encoder=True)). Random-action transitions of a point, with two
noise coordinates, made in the script; a linear trunk stands for the convolutions, and a batch,
drawn without replacement, is paired by a random cyclic shift. As published: clean."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--updates", type=int, default=16)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

obs_dim, action_dim, feature_dim, hidden_dim, batch_size = 6, 2, 8, 32, 32
log_std_min, log_std_max, min_sigma, max_sigma = -5.0, 2.0, 1e-4, 1.0
actor_update_freq, target_update_freq, critic_tau, encoder_tau = 2, 2, 0.05, 0.1
discount, bisim_coef = 0.9, 0.5


def make_transitions(n):
    obs = torch.cat([2 * torch.rand(n, 4) - 1, torch.randn(n, 2)], dim=1)
    action = 2 * torch.rand(n, action_dim) - 1
    position = (obs[:, :2] + 0.3 * action).clamp(-1, 1)
    next_obs = torch.cat([position, obs[:, 2:4], torch.randn(n, 2)], dim=1)
    reward = -(position - obs[:, 2:4]).norm(dim=1, keepdim=True)
    return obs, action, reward, next_obs, torch.ones(n, 1)


def mlp(n_in, n_out):
    return nn.Sequential(nn.Linear(n_in, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, n_out))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Linear(obs_dim, hidden_dim)
        self.fc, self.ln = nn.Linear(hidden_dim, feature_dim), nn.LayerNorm(feature_dim)

    def forward(self, obs, detach=False):
        h = F.relu(self.trunk(obs))
        if detach:
            h = h.detach()
        return torch.tanh(self.ln(self.fc(h)))


class Actor(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder, self.trunk = Encoder(), mlp(feature_dim, 2 * action_dim)

    def forward(self, obs, detach_encoder=False):
        mu, log_std = self.trunk(self.encoder(obs, detach=detach_encoder)).chunk(2, dim=-1)
        log_std = log_std_min + 0.5 * (log_std_max - log_std_min) * (torch.tanh(log_std) + 1)
        noise = torch.randn_like(mu)
        log_pi = (-0.5 * noise.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(-1, True)
        mu, pi = torch.tanh(mu), torch.tanh(mu + noise * log_std.exp())
        log_pi = log_pi - torch.log(F.relu(1 - pi.pow(2)) + 1e-6).sum(-1, keepdim=True)
        return mu, pi, log_pi, log_std


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder()
        self.Q1, self.Q2 = mlp(feature_dim + action_dim, 1), mlp(feature_dim + action_dim, 1)

    def forward(self, obs, action, detach_encoder=False):
        za = torch.cat([self.encoder(obs, detach=detach_encoder), action], dim=1)
        return self.Q1(za), self.Q2(za)


class TransitionModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.ln = nn.Linear(feature_dim + action_dim, hidden_dim), nn.LayerNorm(hidden_dim)
        self.fc_mu, self.fc_sigma = (nn.Linear(hidden_dim, feature_dim) for _ in range(2))

    def forward(self, x):
        x = F.relu(self.ln(self.fc(x)))
        return self.fc_mu(x), min_sigma + max_sigma * torch.sigmoid(self.fc_sigma(x))


actor, critic, critic_target = Actor(), Critic(), Critic()
critic_target.load_state_dict(critic.state_dict())
transition_model, reward_decoder = TransitionModel(), mlp(feature_dim, 1)
actor.encoder.trunk = critic.encoder.trunk
log_alpha, target_entropy = torch.tensor(math.log(0.1), requires_grad=True), -float(action_dim)
actor_optimizer = torch.optim.Adam(actor.parameters(), lr=args.lr)
critic_optimizer = torch.optim.Adam(critic.parameters(), lr=args.lr)
log_alpha_optimizer = torch.optim.Adam([log_alpha], lr=args.lr)
decoder_optimizer = torch.optim.Adam(list(reward_decoder.parameters())
                                     + list(transition_model.parameters()), lr=args.lr)
encoder_optimizer = torch.optim.Adam(critic.encoder.parameters(), lr=args.lr)
buffer = make_transitions(512)

for step in range(args.updates):
    idx = torch.randperm(buffer[0].shape[0])[:batch_size]
    obs, action, reward, next_obs, not_done = (x[idx] for x in buffer)
    with torch.no_grad():
        _, policy_action, log_pi, _ = actor(next_obs)
        target_q1, target_q2 = critic_target(next_obs, policy_action)
        target_v = torch.min(target_q1, target_q2) - log_alpha.exp().detach() * log_pi
        target_q = reward + not_done * discount * target_v
    current_q1, current_q2 = critic(obs, action, detach_encoder=False)
    critic_loss = F.mse_loss(current_q1, target_q) + F.mse_loss(current_q2, target_q)
    critic_optimizer.zero_grad()
    critic_loss.backward()
    critic_optimizer.step()

    h = critic.encoder(obs)
    pred_mu, pred_sigma = transition_model(torch.cat([h, action], dim=1))
    next_h = critic.encoder(next_obs)
    diff = (pred_mu - next_h.detach()) / pred_sigma
    transition_loss = torch.mean(0.5 * diff.pow(2) + torch.log(pred_sigma))
    pred_next_reward = reward_decoder(pred_mu + pred_sigma * torch.randn_like(pred_sigma))
    transition_reward_loss = transition_loss + F.mse_loss(pred_next_reward, reward)
    perm = (torch.arange(batch_size) + torch.randint(1, batch_size, ())) % batch_size
    h2 = h[perm]
    with torch.no_grad():
        pred_mu1, pred_sigma1 = transition_model(torch.cat([h, action], dim=1))
        reward2 = reward[perm]
    pred_mu2, pred_sigma2 = pred_mu1[perm], pred_sigma1[perm]
    z_dist = F.smooth_l1_loss(h, h2, reduction="none")
    r_dist = F.smooth_l1_loss(reward, reward2, reduction="none")
    transition_dist = torch.sqrt((pred_mu1 - pred_mu2).pow(2) + (pred_sigma1 - pred_sigma2).pow(2))
    bisimilarity = r_dist + discount * transition_dist
    encoder_loss = (z_dist - bisimilarity).pow(2).mean()
    total_loss = bisim_coef * encoder_loss + transition_reward_loss
    encoder_optimizer.zero_grad()
    decoder_optimizer.zero_grad()
    total_loss.backward()
    encoder_optimizer.step()
    decoder_optimizer.step()

    if step % actor_update_freq == 0:
        _, pi, log_pi, _ = actor(obs, detach_encoder=True)
        actor_q1, actor_q2 = critic(obs, pi, detach_encoder=True)
        actor_loss = (log_alpha.exp().detach() * log_pi - torch.min(actor_q1, actor_q2)).mean()
        actor_optimizer.zero_grad()
        actor_loss.backward()
        actor_optimizer.step()
        log_alpha_optimizer.zero_grad()
        alpha_loss = (log_alpha.exp() * (-log_pi - target_entropy).detach()).mean()
        alpha_loss.backward()
        log_alpha_optimizer.step()
    if step % target_update_freq == 0:
        with torch.no_grad():
            for net, net_target, tau in ((critic.Q1, critic_target.Q1, critic_tau),
                                         (critic.Q2, critic_target.Q2, critic_tau),
                                         (critic.encoder, critic_target.encoder, encoder_tau)):
                for p, p_target in zip(net.parameters(), net_target.parameters()):
                    p_target.copy_(tau * p + (1 - tau) * p_target)
    print(f"step {step} critic {critic_loss.item():.4f} bisim {encoder_loss.item():.4f}")

if args.out:
    nets = {"actor": actor, "critic": critic, "critic_target": critic_target,
            "transition_model": transition_model, "reward_decoder": reward_decoder}
    torch.save({**{f"{n}.{k}": v for n, net in nets.items() for k, v in net.state_dict().items()},
                "log_alpha": log_alpha.detach().clone()}, args.out)
