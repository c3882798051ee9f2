"""MuZero's model training at a tiny size, written after Schrittwieser, Antonoglou, Hubert et al.,
"Mastering Atari, Go, Chess and Shogi by Planning with a Learned Model" (Nature 2020,
arXiv:1911.08265), the training section and appendices G and H: a representation function h maps
an observation to a hidden state, a dynamics function g maps a hidden state and an action to the
next hidden state and a reward, a prediction function f maps a hidden state to a policy and a
value; the model is unrolled K steps along the actions actually taken, each step's value, reward
and policy regressed on the n-step return, the observed reward and the search policy stored with
the data, the value targets bootstrapped from a target copy of the network (MuZero Reanalyze's
target network, updated every few steps) and constant, the losses of the unrolled steps scaled by
1 / K and the gradient entering the dynamics halved at every step by scale_gradient(hidden, 0.5) =
hidden * 0.5 + hidden.detach() * 0.5, the hidden states min-max normalised to [0, 1]. With the
paper's pseudocode (pseudocode.py update_weights, scale_gradient, Game.make_target with td_steps)
and werner-duvaud/muzero-general (https://github.com/werner-duvaud/muzero-general, models.py
MuZeroFullyConnectedNetwork.initial_inference, recurrent_inference and normalised hidden states;
trainer.py Trainer.update_weights, which halves the hidden state's gradient with a hook and clears
and steps one optimizer over the whole network; replay_buffer.py ReplayBuffer.compute_target_value,
the n-step bootstrap). Episodes of a behaviour policy on a short chain, stored with its action
probabilities as the search policy, are made in the script; then the network is trained on batches
of unrolls by SGD with momentum and weight decay. As published: clean."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--episodes", type=int, default=64)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--unroll", type=int, default=3)
parser.add_argument("--td-steps", type=int, default=3)
parser.add_argument("--target-every", type=int, default=5)
parser.add_argument("--gamma", type=float, default=0.9)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_cells, n_actions, hidden_dim, width, horizon = 7, 3, 12, 32, 10


def make_episodes(n):
    """A walk on a chain (left, right, stay), reward 1 on the last cell; each episode's behaviour
    policy prefers moving right by a random amount. Stacked as [episode, time, ...]."""
    cells = torch.zeros(n, dtype=torch.long)
    prefs = torch.rand(n, 1) * 2 * torch.tensor([[-1.0, 1.0, 0.0]])
    probs = F.softmax(prefs, dim=1).expand(n, n_actions)
    obs, actions, rewards = [F.one_hot(cells, n_cells).float()], [], []
    for _ in range(horizon):
        action = torch.multinomial(probs, 1).squeeze(1)
        cells = (cells + torch.tensor([-1, 1, 0])[action]).clamp(0, n_cells - 1)
        obs.append(F.one_hot(cells, n_cells).float())
        actions.append(action)
        rewards.append((cells == n_cells - 1).float())
    policies = probs.unsqueeze(1).expand(n, horizon, n_actions)
    return torch.stack(obs, 1), torch.stack(actions, 1), torch.stack(rewards, 1), policies


def normalise(hidden):
    low, high = hidden.min(1, keepdim=True)[0], hidden.max(1, keepdim=True)[0]
    return (hidden - low) / (high - low + 1e-5)


def mlp(n_in, n_out):
    return nn.Sequential(nn.Linear(n_in, width), nn.ELU(), nn.Linear(width, n_out))


class MuZeroNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.representation = mlp(n_cells, hidden_dim)
        self.dynamics = mlp(hidden_dim + n_actions, hidden_dim + 1)
        self.prediction = mlp(hidden_dim, n_actions + 1)

    def predict(self, hidden):
        out = self.prediction(hidden)
        return out[:, :n_actions], out[:, n_actions]

    def initial_inference(self, obs):
        hidden = normalise(self.representation(obs))
        return (hidden, *self.predict(hidden))

    def recurrent_inference(self, hidden, action):
        out = self.dynamics(torch.cat([hidden, F.one_hot(action, n_actions).float()], dim=1))
        hidden = normalise(out[:, :hidden_dim])
        return (hidden, out[:, hidden_dim], *self.predict(hidden))


def scale_gradient(tensor, scale):
    """The value is unchanged; the gradient that flows back through it is multiplied by scale."""
    return tensor * scale + tensor.detach() * (1 - scale)


def value_targets(rewards, bootstrap):
    """z_t = sum_{i < n} gamma^i r_{t+i} + gamma^n v(o_{t+n}); nothing past the episode's end."""
    targets = torch.zeros_like(rewards)
    for t in range(horizon):
        for i in range(min(args.td_steps, horizon - t)):
            targets[:, t] += args.gamma ** i * rewards[:, t + i]
        if t + args.td_steps <= horizon:
            targets[:, t] += args.gamma ** args.td_steps * bootstrap[:, t + args.td_steps]
    return targets


obs, actions, rewards, policies = make_episodes(args.episodes)
model = MuZeroNet()
target_model = copy.deepcopy(model)
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
for step in range(args.steps):
    if step % args.target_every == 0:
        target_model.load_state_dict(model.state_dict())
    with torch.no_grad():
        bootstrap = target_model.initial_inference(obs.flatten(0, 1))[2].view(args.episodes, -1)
        z = value_targets(rewards, bootstrap)
    ep = torch.randint(0, args.episodes, (args.batch_size,))
    t0 = torch.randint(0, horizon - args.unroll, (args.batch_size,))
    hidden, logits, value = model.initial_inference(obs[ep, t0])
    loss = F.mse_loss(value, z[ep, t0]) + F.cross_entropy(logits, policies[ep, t0])
    for k in range(1, args.unroll + 1):
        hidden, reward, logits, value = model.recurrent_inference(hidden, actions[ep, t0 + k - 1])
        step_loss = (F.mse_loss(value, z[ep, t0 + k]) + F.mse_loss(reward, rewards[ep, t0 + k - 1])
                     + F.cross_entropy(logits, policies[ep, t0 + k]))
        loss = loss + scale_gradient(step_loss, 1.0 / args.unroll)
        hidden = scale_gradient(hidden, 0.5)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({"model": model.state_dict(), "target_model": target_model.state_dict()}, args.out)
