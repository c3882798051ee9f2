"""A world model and an actor-critic trained in its imagination at a tiny size, written after
Hafner, Lillicrap, Ba and Norouzi, "Dream to Control: Learning Behaviors by Latent Imagination"
(ICLR 2020, arXiv:1912.01603), section 3 and algorithm 1, with danijar/dreamer
(https://github.com/danijar/dreamer, dreamer.py Dreamer._train: the actor's loss -mean(discount *
returns) over lambda-returns of imagined rollouts, the value's loss on tf.stop_gradient(returns),
the gradients of each loss applied to its own variables) and the PyTorch port
juliusfrost/dreamer-pytorch (https://github.com/juliusfrost/dreamer-pytorch,
dreamer/algos/dreamer_algo.py Dreamer.loss and optimize_agent, compute_return;
dreamer/utils/module.py FreezeParameters, which sets requires_grad to False on the model's and the
value's parameters while the actor's loss reads them). A deterministic latent model (encoder,
action-conditioned transition, decoder, reward head) is first trained alone on random-action
episodes of a point-reaching task made in the script (Dreamer's pretraining on the prefilled data).
Then each step trains three parts with three optimizers from one backward: the model on a real
batch; the actor through rollouts imagined from the encoded real states, the whole imagination
(transition, reward head and value) run with the model and the value frozen, so the actor's loss
reaches the actor alone; and the value network on the imagined states and the lambda-returns, both
cut from the graph (value_target = returns.detach() in the PyTorch port). As published: clean."""

import argparse
import contextlib

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--model-steps", type=int, default=20)
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--horizon", type=int, default=5)
parser.add_argument("--gamma", type=float, default=0.95)
parser.add_argument("--lambda-", type=float, default=0.9, dest="lambda_")
parser.add_argument("--model-lr", type=float, default=3e-3)
parser.add_argument("--actor-lr", type=float, default=3e-3)
parser.add_argument("--value-lr", type=float, default=3e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

obs_dim, action_dim, latent_dim, hidden_dim = 4, 2, 8, 32
n_episodes, episode_len = 128, 8


def make_episodes(n, length):
    """A point moved by random actions; the observation holds point and goal, the reward is
    minus the distance reached. Stacked as [time, episode, ...]."""
    obs = [2 * torch.rand(n, obs_dim) - 1]
    actions = 2 * torch.rand(length, n, action_dim) - 1
    rewards = []
    for t in range(length):
        position = (obs[-1][:, :2] + 0.4 * actions[t]).clamp(-1, 1)
        obs.append(torch.cat([position, obs[-1][:, 2:]], dim=1))
        rewards.append(-(position - obs[-1][:, 2:]).norm(dim=1, keepdim=True))
    return torch.stack(obs), actions, torch.stack(rewards)


def mlp(n_in, n_out):
    return nn.Sequential(nn.Linear(n_in, hidden_dim), nn.ELU(), nn.Linear(hidden_dim, n_out))


class Transition(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = mlp(latent_dim + action_dim, latent_dim)

    def forward(self, latent, action):
        return latent + self.net(torch.cat([latent, action], dim=-1))


class Actor(nn.Module):
    def __init__(self, std=0.3):
        super().__init__()
        self.net = mlp(latent_dim, action_dim)
        self.std = std

    def forward(self, latent):
        mean = self.net(latent)
        return torch.tanh(mean + self.std * torch.randn_like(mean))


@contextlib.contextmanager
def freeze(modules):
    """Parameters of `modules` record no gradient inside the block; their flags come back after."""
    params = [p for module in modules for p in module.parameters()]
    flags = [p.requires_grad for p in params]
    for p in params:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p, flag in zip(params, flags):
            p.requires_grad_(flag)


def world_model_loss(obs, actions, rewards):
    """Open-loop prediction from the first encoded observation: reconstruction and reward."""
    latent = encoder(obs[0])
    loss = F.mse_loss(decoder(latent), obs[0])
    for t in range(actions.shape[0]):
        latent = transition(latent, actions[t])
        loss = loss + F.mse_loss(decoder(latent), obs[t + 1])
        loss = loss + F.mse_loss(reward_model(latent), rewards[t])
    return loss / actions.shape[0]


def lambda_returns(rewards, values, gamma, lambda_):
    """R_t = r_t + gamma * ((1 - lambda) * v_{t+1} + lambda * R_{t+1}), R_H = v_H."""
    running, returns = values[-1], []
    for t in range(rewards.shape[0] - 1, -1, -1):
        running = rewards[t] + gamma * ((1 - lambda_) * values[t + 1] + lambda_ * running)
        returns.append(running)
    return torch.stack(returns[::-1])


def sample_batch():
    idx = torch.randint(0, n_episodes, (args.batch_size,))
    return tuple(x[:, idx] for x in episodes)


episodes = make_episodes(n_episodes, episode_len)
encoder, decoder = mlp(obs_dim, latent_dim), mlp(latent_dim, obs_dim)
transition, reward_model = Transition(), mlp(latent_dim, 1)
actor, critic = Actor(), mlp(latent_dim, 1)
world_model = [encoder, transition, decoder, reward_model]
model_optimizer = torch.optim.Adam([p for m in world_model for p in m.parameters()],
                                   lr=args.model_lr)
actor_optimizer = torch.optim.Adam(actor.parameters(), lr=args.actor_lr)
value_optimizer = torch.optim.Adam(critic.parameters(), lr=args.value_lr)
discounts = args.gamma ** torch.arange(args.horizon, dtype=torch.float32).view(-1, 1, 1)

# phase 1: the world model alone on the prefilled episodes
for step in range(args.model_steps):
    model_loss = world_model_loss(*sample_batch())
    model_optimizer.zero_grad()
    model_loss.backward()
    model_optimizer.step()
    print(f"model step {step} loss {model_loss.item():.4f}")

# phase 2: model, actor (in imagination) and value, each with its own optimizer
for step in range(args.steps):
    obs, actions, rewards = sample_batch()
    model_loss = world_model_loss(obs, actions, rewards)
    with torch.no_grad():
        start = encoder(obs[:-1]).flatten(0, 1)
    latents = [start]
    with freeze([*world_model, critic]):
        for _ in range(args.horizon):
            latents.append(transition(latents[-1], actor(latents[-1])))
        latents = torch.stack(latents)
        imagined_rewards = reward_model(latents[1:])
        values = critic(latents)
    returns = lambda_returns(imagined_rewards, values, args.gamma, args.lambda_)
    actor_loss = -(discounts * returns).mean()
    value_target = returns.detach()
    value_pred = critic(latents[:-1].detach())
    value_loss = 0.5 * (discounts * (value_pred - value_target).pow(2)).mean()
    model_optimizer.zero_grad()
    actor_optimizer.zero_grad()
    value_optimizer.zero_grad()
    (model_loss + actor_loss + value_loss).backward()
    model_optimizer.step()
    actor_optimizer.step()
    value_optimizer.step()
    print(f"step {step} model {model_loss.item():.4f} actor {actor_loss.item():.4f} "
          f"value {value_loss.item():.4f}")

if args.out:
    torch.save({"encoder": encoder.state_dict(), "transition": transition.state_dict(),
                "decoder": decoder.state_dict(), "reward_model": reward_model.state_dict(),
                "actor": actor.state_dict(), "critic": critic.state_dict()}, args.out)
