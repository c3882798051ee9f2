"""A synchronous advantage actor-critic (A2C) over n-step rollouts of parallel environments, at a
tiny size, written after Mnih et al., "Asynchronous Methods for Deep Reinforcement Learning"
(ICML 2016, arXiv:1602.01783; the synchronous form of OpenAI Baselines) and
ikostrikov/pytorch-a2c-ppo-acktr-gail (main.py and a2c_ppo_acktr/algo/a2c_acktr.py: each update
collects ``num_steps`` steps of ``num_processes`` environments, bootstraps the returns from the
critic's value of the last observation with ``masks`` cutting them at episode ends, and
minimises ``value_loss * value_loss_coef + action_loss - dist_entropy * entropy_coef`` with
RMSprop after clipping the gradient's norm). The rollout storage here is plain Python lists
(log-probabilities, values, entropies, rewards, masks), made before the update loop and emptied
after each update, once its loss has been backpropagated (``retain_graph=True``) and stepped;
the loop logs every ``--log-interval`` updates. The actor and the critic are each one linear
layer over the one-hot cell. The environments, in the script: 4 walks on 6 cells started at
random cells, reward 1 at the right end, which ends the episode and starts a new one at a
random cell. 12 updates of 5 steps. ``--out PATH`` saves both state_dicts."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn, optim
from torch.distributions import Categorical

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--updates", type=int, default=12)
parser.add_argument("--num-steps", type=int, default=5)
parser.add_argument("--num-processes", type=int, default=4)
parser.add_argument("--cells", type=int, default=6)
parser.add_argument("--gamma", type=float, default=0.9)
parser.add_argument("--lr", type=float, default=7e-3)
parser.add_argument("--value-loss-coef", type=float, default=0.5)
parser.add_argument("--entropy-coef", type=float, default=0.01)
parser.add_argument("--max-grad-norm", type=float, default=0.5)
parser.add_argument("--log-interval", type=int, default=4)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)


class Walks:
    """``num_processes`` walks on ``cells`` cells; the right end pays 1 and restarts the walk."""

    def reset(self):
        self.cells = torch.randint(0, args.cells - 1, (args.num_processes,))
        return self.obs()

    def obs(self):
        return F.one_hot(self.cells, args.cells).float()

    def step(self, action):
        self.cells = (self.cells + 2 * action - 1).clamp(min=0)
        done = self.cells == args.cells - 1
        reward = done.float()
        restart = torch.randint(0, args.cells - 1, (args.num_processes,))
        self.cells = torch.where(done, restart, self.cells)
        return self.obs(), reward, done


actor = nn.Linear(args.cells, 2)
critic = nn.Linear(args.cells, 1)
params = list(actor.parameters()) + list(critic.parameters())
optimizer = optim.RMSprop(params, lr=args.lr, eps=1e-5, alpha=0.99)
envs = Walks()
obs = envs.reset()
log_probs, values, entropies, rewards, masks = [], [], [], [], []

for update in range(args.updates):
    for _ in range(args.num_steps):
        dist = Categorical(logits=actor(obs))
        action = dist.sample()
        log_probs.append(dist.log_prob(action))
        values.append(critic(obs).squeeze(-1))
        entropies.append(dist.entropy())
        obs, reward, done = envs.step(action)
        rewards.append(reward)
        masks.append(1.0 - done.float())

    with torch.no_grad():
        next_value = critic(obs).squeeze(-1)
    returns, R = [], next_value
    for step in reversed(range(len(rewards))):
        R = rewards[step] + args.gamma * R * masks[step]
        returns.insert(0, R)
    returns = torch.stack(returns)
    advantages = returns - torch.stack(values)
    value_loss = advantages.pow(2).mean()
    action_loss = -(advantages.detach() * torch.stack(log_probs)).mean()
    dist_entropy = torch.stack(entropies).mean()

    optimizer.zero_grad()
    loss = value_loss * args.value_loss_coef + action_loss - dist_entropy * args.entropy_coef
    loss.backward(retain_graph=True)
    nn.utils.clip_grad_norm_(params, args.max_grad_norm)
    optimizer.step()

    if update % args.log_interval == 0:
        print(f"update {update}: value loss {value_loss.item():.4f} entropy {dist_entropy.item():.4f}")
        del log_probs[:], values[:], entropies[:], rewards[:], masks[:]

if args.out:
    torch.save({"actor": actor.state_dict(), "critic": critic.state_dict()}, args.out)
