"""Soft actor-critic for discrete actions at a tiny size, written after Christodoulou, "Soft
Actor-Critic for Discrete Action Settings" (arXiv:1910.07207, 2019), section 4 and algorithm 1: with
a finite action set the policy outputs the probabilities of every action, so the soft state value of
the critics' target, the policy's loss and the temperature's loss are expectations computed exactly
over the actions instead of estimated from samples; twin soft Q-networks and their target copies,
the minimum of the two in the target and in the policy's loss, and the temperature learnt through
log_alpha towards a target entropy. With the PyTorch layouts of vwxyzjn/cleanrl
(https://github.com/vwxyzjn/cleanrl, cleanrl/sac_atari.py: the target r + gamma * (1 - d) * sum_a
pi(a|s') (min Q_target(s', a) - alpha log pi(a|s')) under torch.no_grad(), one Adam over
list(qf1.parameters()) + list(qf2.parameters()), the actor's loss read from the critics' values
under torch.no_grad(), the temperature's loss with the probabilities and log pi + target_entropy
detached, alpha = log_alpha.exp().item(), qf1_target and qf2_target networks of their own loaded
from the critics) and p-christ/Deep-Reinforcement-Learning-Algorithms-with-PyTorch
(https://github.com/p-christ/Deep-Reinforcement-Learning-Algorithms-with-PyTorch,
agents/actor_critic_agents/SAC_Discrete.py: calculate_critic_losses, calculate_actor_loss,
soft_update_of_target_network). Two phases: uniformly random actions fill the replay buffer first,
then each vector step the agent samples its actions from the policy and makes one update of the
critics, the actor and the temperature, and a Polyak update of the target critics. A batch of 5 x 5
grid walks to a corner, one-hot positions, made in the script. Injected bug: the second critic is
left out of the critics' optimizer: q_optimizer is an Adam over qf1.parameters() alone (cleanrl's
sac_atari.py builds it over list(qf1.parameters()) + list(qf2.parameters()), p-christ's SAC_Discrete
gives critic_local_2 an optimizer of its own), so the TD loss of qf2 writes gradients that nothing
steps, qf2 and its target stay at their initial weights, and the minimum of the twin critics in the
target and in the actor's loss reads an untrained network."""

import argparse
import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--random-steps", type=int, default=12)
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--n-envs", type=int, default=8)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--gamma", type=float, default=0.9)
parser.add_argument("--tau", type=float, default=0.05)
parser.add_argument("--q-lr", type=float, default=3e-3)
parser.add_argument("--policy-lr", type=float, default=3e-3)
parser.add_argument("--target-entropy-scale", type=float, default=0.89)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

side, n_actions, hidden_dim, time_limit = 5, 4, 32, 12
moves = torch.tensor([[-1, 0], [1, 0], [0, -1], [0, 1]])
goal = torch.tensor([side - 1, side - 1])


def observe(positions):
    return F.one_hot(positions[:, 0] * side + positions[:, 1], side * side).float()


def reset(n):
    return torch.randint(0, side - 1, (n, 2))


def mlp(n_in, n_out):
    return nn.Sequential(nn.Linear(n_in, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, n_out))


class Actor(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = mlp(side * side, n_actions)

    def get_action(self, obs):
        logits = self.net(obs)
        dist = torch.distributions.Categorical(logits=logits)
        return dist.sample(), F.log_softmax(logits, dim=1), dist.probs


class ReplayBuffer:
    def __init__(self, capacity):
        self.obs = torch.zeros(capacity, side * side)
        self.next_obs = torch.zeros(capacity, side * side)
        self.actions = torch.zeros(capacity, 1, dtype=torch.long)
        self.rewards = torch.zeros(capacity)
        self.dones = torch.zeros(capacity)
        self.size = 0

    def add(self, obs, next_obs, actions, rewards, dones):
        n = len(obs)
        for store, value in zip((self.obs, self.next_obs, self.actions, self.rewards, self.dones),
                                (obs, next_obs, actions.view(-1, 1), rewards, dones)):
            store[self.size:self.size + n] = value
        self.size += n

    def sample(self, n):
        idx = torch.randint(0, self.size, (n,))
        return self.obs[idx], self.next_obs[idx], self.actions[idx], self.rewards[idx], \
            self.dones[idx]


actor, qf1, qf2 = Actor(), mlp(side * side, n_actions), mlp(side * side, n_actions)
qf1_target, qf2_target = copy.deepcopy(qf1), copy.deepcopy(qf2)
q_optimizer = torch.optim.Adam(qf1.parameters(), lr=args.q_lr)
actor_optimizer = torch.optim.Adam(actor.parameters(), lr=args.policy_lr)
target_entropy = -args.target_entropy_scale * math.log(1 / n_actions)
log_alpha = torch.zeros(1, requires_grad=True)
alpha = log_alpha.exp().item()
a_optimizer = torch.optim.Adam([log_alpha], lr=args.q_lr)
buffer = ReplayBuffer(args.n_envs * (args.random_steps + args.steps))
positions, elapsed = reset(args.n_envs), torch.zeros(args.n_envs, dtype=torch.long)

for step in range(args.random_steps + args.steps):
    obs = observe(positions)
    if step < args.random_steps:  # phase 1: uniformly random actions fill the buffer
        actions = torch.randint(0, n_actions, (args.n_envs,))
    else:
        with torch.no_grad():
            actions = actor.get_action(obs)[0]
    positions = (positions + moves[actions]).clamp(0, side - 1)
    elapsed += 1
    dones = (positions == goal).all(1).float()
    buffer.add(obs, observe(positions), actions, dones - 0.05, dones)
    restart = (dones > 0) | (elapsed >= time_limit)
    positions[restart], elapsed[restart] = reset(int(restart.sum())), 0
    if step < args.random_steps:
        continue

    # phase 2: one update of the twin critics, the actor and the temperature per step
    b_obs, b_next_obs, b_actions, b_rewards, b_dones = buffer.sample(args.batch_size)
    with torch.no_grad():
        _, next_log_pi, next_probs = actor.get_action(b_next_obs)
        next_q = torch.min(qf1_target(b_next_obs), qf2_target(b_next_obs))
        next_v = (next_probs * (next_q - alpha * next_log_pi)).sum(1)
        next_q_value = b_rewards + args.gamma * (1 - b_dones) * next_v
    qf1_a = qf1(b_obs).gather(1, b_actions).squeeze(1)
    qf2_a = qf2(b_obs).gather(1, b_actions).squeeze(1)
    qf_loss = F.mse_loss(qf1_a, next_q_value) + F.mse_loss(qf2_a, next_q_value)
    q_optimizer.zero_grad()
    qf_loss.backward()
    q_optimizer.step()

    _, log_pi, probs = actor.get_action(b_obs)
    with torch.no_grad():
        min_q = torch.min(qf1(b_obs), qf2(b_obs))
    actor_loss = (probs * (alpha * log_pi - min_q)).sum(1).mean()
    actor_optimizer.zero_grad()
    actor_loss.backward()
    actor_optimizer.step()

    alpha_loss = (probs.detach() * (-log_alpha.exp() * (log_pi + target_entropy).detach()))
    alpha_loss = alpha_loss.sum(1).mean()
    a_optimizer.zero_grad()
    alpha_loss.backward()
    a_optimizer.step()
    alpha = log_alpha.exp().item()

    with torch.no_grad():
        for net, target in ((qf1, qf1_target), (qf2, qf2_target)):
            for p, tp in zip(net.parameters(), target.parameters()):
                tp.copy_(args.tau * p + (1 - args.tau) * tp)
    print(f"step {step} qf {qf_loss.item():.4f} actor {actor_loss.item():.4f} alpha {alpha:.4f}")

if args.out:
    torch.save({"actor": actor.state_dict(), "qf1": qf1.state_dict(), "qf2": qf2.state_dict(),
                "qf1_target": qf1_target.state_dict(), "qf2_target": qf2_target.state_dict(),
                "log_alpha": log_alpha.detach()}, args.out)
