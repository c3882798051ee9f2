"""Exploration via Elliptical Episodic Bonuses (E3B) at a tiny size, written after Henaff, Raileanu,
Jiang and Rocktäschel, "Exploration via Elliptical Episodic Bonuses" (NeurIPS 2022,
arXiv:2210.05805), Algorithm 1: an actor-critic agent trained on the extrinsic reward plus beta
times an episodic bonus b_t = phi(s_{t+1})^T C_t^{-1} phi(s_{t+1}), where phi is an embedding
trained only through an inverse-dynamics model (predict a_t from phi(s_t) and phi(s_{t+1})), and
C_t = lambda I + sum of phi phi^T over the episode so far, whose inverse is carried through the
episode and updated after each step by the Sherman-Morrison rank-one formula, C^{-1} <- C^{-1} -
u u^T / (1 + b) with u = C^{-1} phi, and reset to I / lambda when an episode starts. With
facebookresearch/e3b (https://github.com/facebookresearch/e3b, e3b_minihack/src/utils.py act: the
actor runs the policy and the elliptical encoder under torch.no_grad(), takes h =
encoder_output.squeeze().detach(), u = torch.mv(cov_inverse, h), b = torch.dot(h, u).item(), and
updates cov_inverse in place with -outer(u, u) / (1 + b), resetting it to eye / ridge at episode
ends; e3b_minihack/src/algos/e3b.py learn: the inverse-dynamics loss on the elliptical encoder's
embeddings of consecutive states, total_rewards = rewards + intrinsic_reward_coef * bonus,
V-trace returns (computed without gradient) for the policy-gradient, baseline and entropy losses,
total_loss = pg_loss + baseline_loss + entropy_loss + inverse_dynamics_loss, the zero_grad() of
the policy's, the elliptical encoder's and the inverse-dynamics model's optimizers before one
backward, a gradient-norm clip per network and the three steps; e3b_minihack/src/losses.py
compute_inverse_dynamics_loss). Here the rollouts are on-policy, so V-trace reduces to discounted
returns bootstrapped from the last state's value; the bonus is that of the state reached, as in
the paper's Algorithm 1; each update follows one episode of B parallel environments, so C^{-1}
starts afresh in each rollout. The environment: a 5 x 5 grid with four moves, a reward at the far
corner and four dimensions of uncontrollable noise in the observation, made in the script.
Bug: the elliptical encoder's optimizer is never cleared: of the three zero_grad() calls before the
one backward (e3b.py learn clears optimizer, elliptical_encoder_optimizer and
inverse_dynamics_optimizer), encoder_optimizer.zero_grad() is missing, so from the second update
on the encoder's gradient is the sum of the inverse-dynamics gradients of every update so far
(clipped as a whole to norm 40), and Adam steps the embedding along that running sum: the
embedding, and with it the bonus, drifts along stale gradients of earlier rollouts."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--updates", type=int, default=40)
parser.add_argument("--envs", type=int, default=16)
parser.add_argument("--episode-length", type=int, default=16)
parser.add_argument("--ridge", type=float, default=0.1, help="lambda: C starts at lambda I")
parser.add_argument("--intrinsic-coef", type=float, default=0.1, help="beta")
parser.add_argument("--out", default=None, help="where to save the networks")
args = parser.parse_args()
torch.manual_seed(args.seed)

size, n_noise, n_actions, emb_dim, hidden = 5, 4, 4, 16, 64
obs_dim = size * size + n_noise
moves = torch.tensor([[1, 0], [-1, 0], [0, 1], [0, -1]])
discount, baseline_cost, entropy_cost = 0.99, 0.5, 0.01


def observe(pos):
    cell = F.one_hot(pos[:, 0] * size + pos[:, 1], size * size).float()
    return torch.cat([cell, torch.randn(pos.size(0), n_noise)], 1)


def env_step(pos, action):
    pos = (pos + moves[action]).clamp(0, size - 1)
    reward = ((pos[:, 0] == size - 1) & (pos[:, 1] == size - 1)).float()
    return pos, reward


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.torso = nn.Sequential(nn.Linear(obs_dim, hidden), nn.ReLU(),
                                   nn.Linear(hidden, hidden), nn.ReLU())
        self.logits = nn.Linear(hidden, n_actions)
        self.baseline = nn.Linear(hidden, 1)

    def forward(self, obs):
        x = self.torso(obs)
        return self.logits(x), self.baseline(x).squeeze(-1)


class InverseDynamics(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2 * emb_dim, hidden), nn.ReLU(),
                                 nn.Linear(hidden, n_actions))

    def forward(self, emb, next_emb):
        return self.net(torch.cat([emb, next_emb], -1))


policy = Policy()
encoder = nn.Sequential(nn.Linear(obs_dim, hidden), nn.ReLU(), nn.Linear(hidden, emb_dim))
inverse_model = InverseDynamics()
policy_optimizer = torch.optim.RMSprop(policy.parameters(), lr=1e-3, eps=1e-5, alpha=0.99)
encoder_optimizer = torch.optim.Adam(encoder.parameters(), lr=1e-3)
inverse_optimizer = torch.optim.Adam(inverse_model.parameters(), lr=1e-3)

B, T = args.envs, args.episode_length
for update in range(args.updates):
    # rollout: one episode per environment, the inverse covariance carried through it
    pos = torch.zeros(B, 2, dtype=torch.long)
    obs = observe(pos)
    cov_inverse = torch.eye(emb_dim).repeat(B, 1, 1) / args.ridge
    observations, actions, rewards, bonuses = [obs], [], [], []
    for _ in range(T):
        with torch.no_grad():
            logits, _ = policy(obs)
            action = torch.multinomial(logits.softmax(-1), 1).squeeze(1)
        pos, reward = env_step(pos, action)
        obs = observe(pos)
        h = encoder(obs).detach()
        u = torch.bmm(cov_inverse, h.unsqueeze(2)).squeeze(2)
        bonus = (h * u).sum(1)
        cov_inverse = cov_inverse - u.unsqueeze(2) * u.unsqueeze(1) / (1 + bonus).view(B, 1, 1)
        observations.append(obs)
        actions.append(action)
        rewards.append(reward)
        bonuses.append(bonus)
    observations = torch.stack(observations)
    actions = torch.stack(actions)
    rewards, bonuses = torch.stack(rewards), torch.stack(bonuses)

    # learner: actor-critic on extrinsic reward plus beta times the bonus, and inverse dynamics
    logits, values = policy(observations)
    total_rewards = rewards + args.intrinsic_coef * bonuses
    ret = values[-1].detach()
    returns = []
    for t in reversed(range(T)):
        ret = total_rewards[t] + discount * ret
        returns.append(ret)
    returns = torch.stack(returns[::-1])
    advantages = returns - values[:-1].detach()
    log_probs = logits[:-1].log_softmax(-1)
    action_log_probs = log_probs.gather(2, actions.unsqueeze(2)).squeeze(2)
    pg_loss = -(action_log_probs * advantages).mean()
    baseline_loss = baseline_cost * 0.5 * ((returns - values[:-1]) ** 2).mean()
    entropy_loss = entropy_cost * (log_probs.exp() * log_probs).sum(-1).mean()

    emb = encoder(observations)
    pred_actions = inverse_model(emb[:-1], emb[1:])
    inverse_dynamics_loss = F.cross_entropy(pred_actions.reshape(-1, n_actions),
                                            actions.reshape(-1))

    total_loss = pg_loss + baseline_loss + entropy_loss + inverse_dynamics_loss
    policy_optimizer.zero_grad()
    inverse_optimizer.zero_grad()
    total_loss.backward()
    nn.utils.clip_grad_norm_(policy.parameters(), 40.0)
    nn.utils.clip_grad_norm_(encoder.parameters(), 40.0)
    nn.utils.clip_grad_norm_(inverse_model.parameters(), 40.0)
    policy_optimizer.step()
    encoder_optimizer.step()
    inverse_optimizer.step()

    if update % 10 == 0:
        print(f"update {update} extrinsic {rewards.sum(0).mean().item():.2f} "
              f"bonus {bonuses.mean().item():.3f} inverse {inverse_dynamics_loss.item():.3f}")

if args.out:
    torch.save({"policy": policy.state_dict(), "encoder": encoder.state_dict(),
                "inverse_model": inverse_model.state_dict()}, args.out)
