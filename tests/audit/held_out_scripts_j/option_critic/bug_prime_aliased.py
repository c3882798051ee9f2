"""The option-critic architecture at a tiny size, written after Bacon, Harb and Precup, "The
Option-Critic Architecture" (AAAI 2017, arXiv:1609.05140), section 4 and algorithm 1 (the
intra-option policy gradient and the termination gradient with the advantage Q(s, w) - V(s)), with
lweitkamp/option-critic-pytorch (https://github.com/lweitkamp/option-critic-pytorch,
option_critic.py OptionCriticFeatures: a shared feature body, a Q head over options, a termination
head and per-option softmax policies options_W, options_b; critic_loss, the TD error of Q(s, w)
against a target read from the prime network option_critic_prime with the online next-state
termination probabilities .detach()-ed; actor_loss, the termination loss beta(s, w) * (Q(s, w) -
max Q(s) + termination_reg) with Q detached, and the policy loss -logp * (y - Q(s, w)) with the
target y detached, minus an entropy bonus; main.py run: option_critic_prime =
deepcopy(option_critic), one RMSprop over option_critic.parameters(), no update until the replay
buffer holds more than a batch, then the actor's loss at every step plus the critic's loss every
update_frequency steps in one backward, and
option_critic_prime.load_state_dict(option_critic.state_dict()) every freeze_interval steps). Two
phases: a warm-up in which the untrained agent only fills the buffer, then learning. A small
gridworld made in the script; its observation is the one-hot cell. The target parts are computed
under torch.no_grad(). Injected bug: the prime network is the online network itself (net_prime =
net, for main.py's deepcopy(option_critic)), so the periodic load_state_dict copies the network
onto itself and, from the second update on, every target of the critic's TD error and of the
intra-option policy gradient reads the network being trained (under torch.no_grad(), so without a
gradient) instead of a copy frozen since the last sync."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=90)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--num-options", type=int, default=2)
parser.add_argument("--update-frequency", type=int, default=2)
parser.add_argument("--freeze-interval", type=int, default=6)
parser.add_argument("--gamma", type=float, default=0.95)
parser.add_argument("--termination-reg", type=float, default=0.01)
parser.add_argument("--entropy-reg", type=float, default=0.01)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

size, n_actions, hidden_dim, max_episode_steps = 5, 4, 32, 25
moves = torch.tensor([[0, 1], [0, -1], [1, 0], [-1, 0]])


def observe(cell):
    return F.one_hot(cell[0] * size + cell[1], size * size).float().unsqueeze(0)


def step_env(cell, action):
    """Move in a 5x5 grid; the goal is the far corner (reward 1, the episode ends)."""
    cell = (cell + moves[action]).clamp(0, size - 1)
    at_goal = bool((cell == size - 1).all())
    return cell, (1.0 if at_goal else -0.02), at_goal


class OptionCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(size * size, hidden_dim), nn.ReLU(),
                                      nn.Linear(hidden_dim, hidden_dim), nn.ReLU())
        self.q = nn.Linear(hidden_dim, args.num_options)
        self.terminations = nn.Linear(hidden_dim, args.num_options)
        self.options_W = nn.Parameter(0.1 * torch.randn(args.num_options, hidden_dim, n_actions))
        self.options_b = nn.Parameter(torch.zeros(args.num_options, n_actions))

    def beta(self, state):
        return self.terminations(state).sigmoid()

    def policy(self, state, option):
        return torch.distributions.Categorical(
            logits=state @ self.options_W[option] + self.options_b[option])


def critic_loss(obs, options, rewards, next_obs, dones):
    q = net.q(net.features(obs)).gather(1, options)
    with torch.no_grad():
        next_beta = net.beta(net.features(next_obs)).gather(1, options)
        next_q_prime = net_prime.q(net_prime.features(next_obs))
        target = rewards + (1 - dones) * args.gamma * (
            (1 - next_beta) * next_q_prime.gather(1, options)
            + next_beta * next_q_prime.max(1, keepdim=True)[0])
    return 0.5 * (q - target).pow(2).mean()


def actor_loss(obs, option, action, reward, next_obs, done):
    state = net.features(obs)
    beta = net.beta(state)[0, option]
    q = net.q(state)[0]
    dist = net.policy(state[0], option)
    with torch.no_grad():
        next_beta = net.beta(net.features(next_obs))[0, option]
        next_q_prime = net_prime.q(net_prime.features(next_obs))[0]
        target = reward + (1 - done) * args.gamma * (
            (1 - next_beta) * next_q_prime[option] + next_beta * next_q_prime.max())
    advantage = (q[option] - q.max()).detach()
    termination_loss = beta * (advantage + args.termination_reg) * (1 - done)
    policy_loss = -dist.log_prob(action) * (target - q[option].detach())
    return termination_loss + policy_loss - args.entropy_reg * dist.entropy()


net = OptionCritic()
net_prime = net
optimizer = torch.optim.RMSprop(net.parameters(), lr=args.lr)
buffer, update = [], 0
cell, episode_steps, option, terminate = torch.zeros(2, dtype=torch.long), 0, 0, True
for step in range(args.batch_size + args.steps):
    epsilon = 0.1 + 0.9 * torch.exp(torch.tensor(-step / 40.0)).item()
    obs = observe(cell)
    with torch.no_grad():
        if terminate:  # epsilon-greedy policy over options
            greedy = net.q(net.features(obs)).argmax().item()
            random_option = torch.randint(args.num_options, ()).item()
            option = random_option if torch.rand(()).item() < epsilon else greedy
        action = net.policy(net.features(obs)[0], option).sample()
    next_cell, reward, done = step_env(cell, action)
    next_obs = observe(next_cell)
    buffer.append((obs, option, reward, next_obs, float(done)))
    with torch.no_grad():
        terminate = torch.bernoulli(net.beta(net.features(next_obs))[0, option]).item() > 0
    if len(buffer) > args.batch_size:  # phase 2: learning, once the buffer holds a batch
        loss = actor_loss(obs, option, action, reward, next_obs, float(done))
        if step % args.update_frequency == 0:
            idx = torch.randint(0, len(buffer), (args.batch_size,)).tolist()
            o, w, r, o2, d = zip(*[buffer[i] for i in idx])
            loss = loss + critic_loss(torch.cat(o), torch.tensor(w).unsqueeze(1),
                                      torch.tensor(r).unsqueeze(1), torch.cat(o2),
                                      torch.tensor(d).unsqueeze(1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        update += 1
        if update % args.freeze_interval == 0:
            net_prime.load_state_dict(net.state_dict())
        print(f"step {step} option {option} loss {loss.item():.4f} epsilon {epsilon:.3f}")
    cell, episode_steps = next_cell, episode_steps + 1
    if done or episode_steps == max_episode_steps:
        cell, episode_steps, terminate = torch.zeros(2, dtype=torch.long), 0, True

if args.out:
    torch.save({"net": net.state_dict(), "net_prime": net_prime.state_dict()}, args.out)
