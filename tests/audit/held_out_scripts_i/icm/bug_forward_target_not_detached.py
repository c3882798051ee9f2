"""An intrinsic curiosity module on an advantage actor-critic at a tiny size, written after
Pathak, Agrawal, Efros and Darrell, "Curiosity-driven Exploration by Self-supervised Prediction"
(ICML 2017, arXiv:1705.05363), section 2 and equation 7 (min over the policy, inverse and forward
models of -lambda * E[sum r] + (1 - beta) * L_I + beta * L_F, with the curiosity reward
r^i = eta / 2 * ||phi_hat(s_t+1) - phi(s_t+1)||^2), with pathak22/noreward-rl
(https://github.com/pathak22/noreward-rl, src/model.py StateActionPredictor: the inverse model on
phi(s_t) and phi(s_t+1), the forward model on phi(s_t) and the action, pred_bonus returning the
bonus as numbers from a session run; src/a3c.py, where the bonus is added to the extrinsic reward
before the returns are formed) and the PyTorch layout of jcwleo/curiosity-driven-exploration-pytorch
(https://github.com/jcwleo/curiosity-driven-exploration-pytorch, model.py ICMModel.forward;
agents.py ICMAgent.compute_intrinsic_reward, which returns intrinsic_reward.data as numpy, and
ICMAgent.train_model: forward_mse(pred_next_state_feature, real_next_state_feature.detach()), the
inverse model's cross-entropy training the shared feature encoder, one Adam over the actor-critic
and the ICM). Sixteen parallel walks on a grid whose observation also holds noise the
agent cannot control; a sparse extrinsic reward at one corner. The curiosity reward is read from
the forward model's error with .detach(), so the actor-critic's loss reaches neither the forward
model nor the encoder, and the forward model's target features are cut from the graph, so the
encoder is trained by the inverse model (and by the forward model through its input features).
Injected bug: the forward model's target features phi(s_t+1) keep their graph (no .detach(), for
jcwleo's real_next_state_feature.detach()), so the forward loss also moves the encoder's
features of the next state towards the forward model's prediction, the collapse the inverse
model alone is meant to shape the features against."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--updates", type=int, default=15)
parser.add_argument("--n-envs", type=int, default=16)
parser.add_argument("--rollout", type=int, default=8)
parser.add_argument("--gamma", type=float, default=0.95)
parser.add_argument("--eta", type=float, default=1.0)
parser.add_argument("--beta", type=float, default=0.2)
parser.add_argument("--lambda-", type=float, default=0.1, dest="lambda_")
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

grid, n_noise, n_actions, feat_dim, hidden_dim = 5, 3, 4, 8, 32
obs_dim = 2 + n_noise
moves = torch.tensor([[1, 0], [-1, 0], [0, 1], [0, -1]])


def observe(cells):
    """Normalised position and noise the actions do not control."""
    return torch.cat([cells.float() / (grid - 1), torch.randn(len(cells), n_noise)], dim=1)


def step_env(cells, actions):
    cells = (cells + moves[actions]).clamp(0, grid - 1)
    reward = (cells == grid - 1).all(dim=1).float()
    return cells, reward


def mlp(n_in, n_out):
    return nn.Sequential(nn.Linear(n_in, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, n_out))


class ICM(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = mlp(obs_dim, feat_dim)
        self.inverse_model = mlp(2 * feat_dim, n_actions)
        self.forward_model = mlp(feat_dim + n_actions, feat_dim)

    def forward(self, obs, next_obs, actions):
        phi, phi_next = self.encoder(obs), self.encoder(next_obs)
        action_logits = self.inverse_model(torch.cat([phi, phi_next], dim=-1))
        one_hot = F.one_hot(actions, n_actions).float()
        phi_pred = self.forward_model(torch.cat([phi, one_hot], dim=-1))
        return phi_next, phi_pred, action_logits


actor_critic = mlp(obs_dim, n_actions + 1)
icm = ICM()
optimizer = torch.optim.Adam([*actor_critic.parameters(), *icm.parameters()], lr=args.lr)
cells = torch.zeros(args.n_envs, 2, dtype=torch.long)
obs = observe(cells)
for update in range(args.updates):
    batch_obs, batch_next, batch_actions, batch_ext = [], [], [], []
    with torch.no_grad():
        for _ in range(args.rollout):
            action = torch.distributions.Categorical(logits=actor_critic(obs)[:, :-1]).sample()
            cells, reward = step_env(cells, action)
            next_obs = observe(cells)
            batch_obs.append(obs), batch_next.append(next_obs)
            batch_actions.append(action), batch_ext.append(reward)
            obs = next_obs
        bootstrap = actor_critic(obs)[:, -1]
    obs_t, next_t = torch.stack(batch_obs), torch.stack(batch_next)
    actions_t, extrinsic = torch.stack(batch_actions), torch.stack(batch_ext)
    # curiosity: inverse and forward models on the transitions of the rollout
    phi_next, phi_pred, action_logits = icm(obs_t, next_t, actions_t)
    inverse_loss = F.cross_entropy(action_logits.flatten(0, 1), actions_t.flatten())
    forward_error = 0.5 * (phi_pred - phi_next).pow(2).sum(-1)
    forward_loss = forward_error.mean()
    intrinsic = args.eta * forward_error.detach()
    # advantage actor-critic on the extrinsic plus curiosity reward
    rewards = extrinsic + intrinsic
    running, returns = bootstrap, []
    for t in range(args.rollout - 1, -1, -1):
        running = rewards[t] + args.gamma * running
        returns.append(running)
    returns = torch.stack(returns[::-1])
    out = actor_critic(obs_t)
    dist = torch.distributions.Categorical(logits=out[..., :-1])
    values = out[..., -1]
    advantages = (returns - values).detach()
    actor_loss = -(dist.log_prob(actions_t) * advantages).mean()
    critic_loss = (returns - values).pow(2).mean()
    policy_loss = actor_loss + 0.5 * critic_loss - 0.01 * dist.entropy().mean()
    loss = args.lambda_ * policy_loss + (1 - args.beta) * inverse_loss + args.beta * forward_loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"update {update} inverse {inverse_loss.item():.4f} forward {forward_loss.item():.4f} "
          f"intrinsic {intrinsic.mean().item():.4f} extrinsic {extrinsic.mean().item():.3f}")

if args.out:
    torch.save({"actor_critic": actor_critic.state_dict(), "icm": icm.state_dict()}, args.out)
