"""SLAC: stochastic latent actor-critic on a synthetic low-dimensional partially observed task.

Paper: Alex X. Lee, Anusha Nagabandi, Pieter Abbeel, Sergey Levine, "Stochastic Latent
Actor-Critic: Deep Reinforcement Learning with a Latent Variable Model", NeurIPS 2020,
arXiv:1907.00953.
Reference implementation: toshikwa/slac.pytorch, slac/algo.py (SlacAlgorithm: update_latent,
update_sac, prepare_batch, update_critic, update_actor), slac/network/latent.py (LatentModel:
sample_prior, sample_posterior, calculate_loss), slac/network/sac.py (GaussianPolicy,
TwinnedQNetwork), slac/utils.py (soft_update, grad_false); original code alexlee-gk/slac.

A hidden 2-d linear system is seen through a 6-d noisy nonlinear observation; sequences with
random actions fill a replay buffer. The latent model (encoder, two-level latent z1/z2 with
prior and filtering posterior, observation decoder, reward model) is trained by its ELBO: KL of
the z1 posterior to the prior plus observation and reward negative log-likelihoods. After a
latent-only warm-up, each iteration does one latent step and one SAC step. For SAC, encoder
features and posterior latents are computed under torch.no_grad(), so critic and actor losses
never reach the latent model, which is trained only by its own loss. The twin critic reads the
latent z(t) and action; its target uses the target critic and the actor on the next
feature-action history, also without gradient. The actor reads the feature-action history and
is trained through the critic; the entropy temperature log_alpha is learned against the
detached policy entropy; the target critic starts as a copy of the critic, is frozen, and
follows it by Polyak averaging.
Bug: hard_update assigns t.data = s.data instead of copying values, so the target critic's
parameters share storage with the critic: the target is the online critic itself (no lag), and
each Polyak step, done in place on the shared tensors, also scales the critic's own weights.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

OBS_DIM, ACT_DIM, STATE_DIM = 6, 1, 2
FEAT_DIM, Z1_DIM, Z2_DIM, HIDDEN = 8, 4, 8, (32, 32)
N_EPISODES, EP_LEN, NUM_SEQ = 48, 12, 4
BATCH_LATENT, BATCH_SAC = 16, 32
WARMUP_STEPS, STEPS = 15, 50
LR_LATENT, LR_SAC, GAMMA, TAU = 3e-3, 3e-4, 0.99, 5e-3


def build_mlp(in_dim, out_dim, hidden, act):
    layers, d = [], in_dim
    for h in hidden:
        layers += [nn.Linear(d, h), act()]
        d = h
    layers.append(nn.Linear(d, out_dim))
    return nn.Sequential(*layers)


class Gaussian(nn.Module):
    def __init__(self, in_dim, out_dim):
        super().__init__()
        self.net = build_mlp(in_dim, 2 * out_dim, HIDDEN, lambda: nn.LeakyReLU(0.2))

    def forward(self, x):
        mean, std = self.net(x).chunk(2, dim=-1)
        return mean, F.softplus(std) + 1e-5


def kl_gaussian(m_q, s_q, m_p, s_p):
    var_ratio = (s_q / s_p).pow(2)
    t1 = ((m_q - m_p) / s_p).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


def gaussian_nll(x, mean, std):
    noise = (x - mean) / (std + 1e-8)
    return 0.5 * noise.pow(2) + std.log() + 0.5 * math.log(2 * math.pi)


class LatentModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(
            build_mlp(OBS_DIM, FEAT_DIM, (32,), lambda: nn.LeakyReLU(0.2)), nn.LeakyReLU(0.2))
        self.z2_init = Gaussian(Z1_DIM, Z2_DIM)
        self.z1_prior = Gaussian(Z2_DIM + ACT_DIM, Z1_DIM)
        self.z2_trans = Gaussian(Z1_DIM + Z2_DIM + ACT_DIM, Z2_DIM)
        self.z1_post_init = Gaussian(FEAT_DIM, Z1_DIM)
        self.z1_post = Gaussian(FEAT_DIM + Z2_DIM + ACT_DIM, Z1_DIM)
        self.decoder = build_mlp(Z1_DIM + Z2_DIM, OBS_DIM, HIDDEN, lambda: nn.LeakyReLU(0.2))
        self.reward = Gaussian(2 * (Z1_DIM + Z2_DIM) + ACT_DIM, 1)
        self.obs_std = math.sqrt(0.1)

    def sample_posterior(self, feat_, act_):
        m, s = self.z1_post_init(feat_[:, 0])
        z1 = m + torch.randn_like(s) * s
        m2, s2 = self.z2_init(z1)
        z2 = m2 + torch.randn_like(s2) * s2
        means, stds, z1s, z2s = [m], [s], [z1], [z2]
        for t in range(1, act_.size(1) + 1):
            m, s = self.z1_post(torch.cat([feat_[:, t], z2, act_[:, t - 1]], dim=1))
            z1 = m + torch.randn_like(s) * s
            m2, s2 = self.z2_trans(torch.cat([z1, z2, act_[:, t - 1]], dim=1))
            z2 = m2 + torch.randn_like(s2) * s2
            means.append(m)
            stds.append(s)
            z1s.append(z1)
            z2s.append(z2)
        stack = lambda xs: torch.stack(xs, dim=1)
        return stack(means), stack(stds), stack(z1s), stack(z2s)

    def sample_prior(self, act_, z2_):
        m, s = self.z1_prior(torch.cat([z2_[:, :act_.size(1)], act_], dim=-1))
        m0, s0 = torch.zeros_like(m[:, :1]), torch.ones_like(s[:, :1])
        return torch.cat([m0, m], dim=1), torch.cat([s0, s], dim=1)

    def loss(self, obs_, act_, rew_, done_):
        feat_ = self.encoder(obs_)
        m_post, s_post, z1_, z2_ = self.sample_posterior(feat_, act_)
        m_pri, s_pri = self.sample_prior(act_, z2_)
        loss_kld = kl_gaussian(m_post, s_post, m_pri, s_pri).mean(0).sum()
        z_ = torch.cat([z1_, z2_], dim=-1)
        obs_mean = self.decoder(z_)
        loss_obs = gaussian_nll(obs_, obs_mean, torch.full_like(obs_mean, self.obs_std))
        loss_obs = loss_obs.mean(0).sum()
        x = torch.cat([z_[:, :-1], act_, z_[:, 1:]], dim=-1)
        r_mean, r_std = self.reward(x)
        loss_rew = (gaussian_nll(rew_, r_mean, r_std) * (1 - done_)).mean(0).sum()
        return loss_kld, loss_obs, loss_rew


class GaussianPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        in_dim = NUM_SEQ * FEAT_DIM + (NUM_SEQ - 1) * ACT_DIM
        self.net = build_mlp(in_dim, 2 * ACT_DIM, HIDDEN, nn.ReLU)

    def sample(self, feat_act):
        mean, log_std = self.net(feat_act).chunk(2, dim=-1)
        log_std = log_std.clamp(-20, 2)
        noise = torch.randn_like(mean)
        action = torch.tanh(mean + noise * log_std.exp())
        log_pi = (-0.5 * noise.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(-1, True)
        log_pi = log_pi - torch.log(1 - action.pow(2) + 1e-6).sum(-1, True)
        return action, log_pi


class TwinQ(nn.Module):
    def __init__(self):
        super().__init__()
        self.q1 = build_mlp(Z1_DIM + Z2_DIM + ACT_DIM, 1, HIDDEN, nn.ReLU)
        self.q2 = build_mlp(Z1_DIM + Z2_DIM + ACT_DIM, 1, HIDDEN, nn.ReLU)

    def forward(self, z, a):
        x = torch.cat([z, a], dim=1)
        return self.q1(x), self.q2(x)


@torch.no_grad()
def hard_update(target, source):
    for t, s in zip(target.parameters(), source.parameters()):
        t.data = s.data


@torch.no_grad()
def soft_update(target, source, tau):
    for t, s in zip(target.parameters(), source.parameters()):
        t.mul_(1.0 - tau)
        t.add_(tau * s)


def make_buffer():
    a_mat = 0.95 * torch.tensor([[math.cos(0.3), -math.sin(0.3)], [math.sin(0.3), math.cos(0.3)]])
    b_vec = torch.tensor([0.0, 0.5])
    w_obs = torch.randn(OBS_DIM, STATE_DIM)
    obs, act, rew = [], [], []
    s = torch.randn(N_EPISODES, STATE_DIM)
    for _ in range(EP_LEN):
        obs.append(torch.tanh(s @ w_obs.T) + 0.05 * torch.randn(N_EPISODES, OBS_DIM))
        a = torch.rand(N_EPISODES, ACT_DIM) * 2 - 1
        s = s @ a_mat.T + a * b_vec + 0.05 * torch.randn(N_EPISODES, STATE_DIM)
        act.append(a)
        rew.append(-s.pow(2).sum(1, keepdim=True) - 0.1 * a.pow(2))
    obs.append(torch.tanh(s @ w_obs.T) + 0.05 * torch.randn(N_EPISODES, OBS_DIM))
    return torch.stack(obs, 1), torch.stack(act, 1), torch.stack(rew, 1)


def sample_seq(buffer, batch):
    obs, act, rew = buffer
    ep = torch.randint(0, N_EPISODES, (batch,))
    t0 = torch.randint(0, EP_LEN - NUM_SEQ + 1, (batch,))
    idx = t0[:, None] + torch.arange(NUM_SEQ)
    obs_ = obs[ep[:, None], torch.cat([idx, idx[:, -1:] + 1], 1)]
    act_ = act[ep[:, None], idx]
    rew_ = rew[ep[:, None], idx]
    return obs_, act_, rew_, torch.zeros_like(rew_)


def feature_actions(feat_, act_):
    n = feat_.size(0)
    fa = torch.cat([feat_[:, :-1].reshape(n, -1), act_[:, :-1].reshape(n, -1)], dim=-1)
    n_fa = torch.cat([feat_[:, 1:].reshape(n, -1), act_[:, 1:].reshape(n, -1)], dim=-1)
    return fa, n_fa


class Slac:
    def __init__(self):
        self.latent = LatentModel()
        self.actor = GaussianPolicy()
        self.critic = TwinQ()
        self.critic_target = TwinQ()
        hard_update(self.critic_target, self.critic)
        self.critic_target.requires_grad_(False)
        self.target_entropy = -float(ACT_DIM)
        self.log_alpha = torch.zeros(1, requires_grad=True)
        self.alpha = self.log_alpha.detach().exp()
        self.optim_latent = torch.optim.Adam(self.latent.parameters(), lr=LR_LATENT)
        self.optim_actor = torch.optim.Adam(self.actor.parameters(), lr=LR_SAC)
        self.optim_critic = torch.optim.Adam(self.critic.parameters(), lr=LR_SAC)
        self.optim_alpha = torch.optim.Adam([self.log_alpha], lr=LR_SAC)

    def update_latent(self, buffer):
        obs_, act_, rew_, done_ = sample_seq(buffer, BATCH_LATENT)
        loss_kld, loss_obs, loss_rew = self.latent.loss(obs_, act_, rew_, done_)
        (loss_kld + loss_obs + loss_rew).backward()
        self.optim_latent.step()
        self.optim_latent.zero_grad()
        return loss_kld.item(), loss_obs.item(), loss_rew.item()

    def prepare_batch(self, obs_, act_):
        with torch.no_grad():
            feat_ = self.latent.encoder(obs_)
            _, _, z1_, z2_ = self.latent.sample_posterior(feat_, act_)
            z_ = torch.cat([z1_, z2_], dim=-1)
        fa, n_fa = feature_actions(feat_, act_)
        return z_[:, -2], z_[:, -1], act_[:, -1], fa, n_fa

    def update_critic(self, z, next_z, action, next_fa, reward, done):
        q1, q2 = self.critic(z, action)
        with torch.no_grad():
            next_action, log_pi = self.actor.sample(next_fa)
            nq1, nq2 = self.critic_target(next_z, next_action)
            next_q = torch.min(nq1, nq2) - self.alpha * log_pi
        target_q = reward + (1.0 - done) * GAMMA * next_q
        loss_critic = (q1 - target_q).pow(2).mean() + (q2 - target_q).pow(2).mean()
        self.optim_critic.zero_grad()
        loss_critic.backward()
        self.optim_critic.step()
        return loss_critic.item()

    def update_actor(self, z, fa):
        action, log_pi = self.actor.sample(fa)
        q1, q2 = self.critic(z, action)
        loss_actor = -torch.mean(torch.min(q1, q2) - self.alpha * log_pi)
        self.optim_actor.zero_grad()
        loss_actor.backward()
        self.optim_actor.step()

        entropy = -log_pi.detach().mean()
        loss_alpha = -self.log_alpha * (self.target_entropy - entropy)
        self.optim_alpha.zero_grad()
        loss_alpha.backward()
        self.optim_alpha.step()
        self.alpha = self.log_alpha.detach().exp()
        return loss_actor.item()

    def update_sac(self, buffer):
        obs_, act_, rew_, done_ = sample_seq(buffer, BATCH_SAC)
        z, next_z, action, fa, n_fa = self.prepare_batch(obs_, act_)
        loss_critic = self.update_critic(z, next_z, action, n_fa, rew_[:, -1], done_[:, -1])
        loss_actor = self.update_actor(z, fa)
        soft_update(self.critic_target, self.critic, TAU)
        return loss_critic, loss_actor


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=str, default=None)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    buffer = make_buffer()
    algo = Slac()
    for step in range(1, WARMUP_STEPS + 1):
        kld, nll_obs, nll_rew = algo.update_latent(buffer)
    print(f"warm-up kld {kld:.3f} obs {nll_obs:.3f} reward {nll_rew:.3f}")
    for step in range(1, STEPS + 1):
        kld, nll_obs, nll_rew = algo.update_latent(buffer)
        loss_critic, loss_actor = algo.update_sac(buffer)
        if step % 10 == 0:
            print(f"step {step} kld {kld:.3f} obs {nll_obs:.3f} reward {nll_rew:.3f} "
                  f"critic {loss_critic:.3f} actor {loss_actor:.3f} "
                  f"alpha {algo.alpha.item():.4f}")
    if args.out:
        torch.save({"latent": algo.latent.state_dict(), "actor": algo.actor.state_dict(),
                    "critic": algo.critic.state_dict(),
                    "critic_target": algo.critic_target.state_dict(),
                    "log_alpha": algo.log_alpha.detach().clone()}, args.out)


if __name__ == "__main__":
    main()
