"""Unsupervised skill discovery at a tiny size, written after Eysenbach, Gupta, Ibarz and Levine,
"Diversity is All You Need: Learning Skills without a Reward Function" (ICLR 2019,
arXiv:1802.06070), algorithm 1, with ben-eysenbach/sac (https://github.com/ben-eysenbach/sac,
sac/algos/diayn.py DIAYN: the pseudo-reward log q(z|s) - log p(z) from the discriminator, p(z)
uniform, and the discriminator's own softmax cross-entropy on the skill) and
alirezakazemipour/DIAYN-PyTorch (https://github.com/alirezakazemipour/DIAYN-PyTorch, Brain/agent.py
SACAgent.train: rewards = logq_z_ns.gather(-1, zs).detach() - torch.log(p_z + 1e-6) from the
discriminator's logits at the next states, discriminator_loss = cross_ent_loss(logits, zs) stepped
by its own Adam). A skill z is drawn uniformly for each episode and fed to the policy as a one-hot;
the agent is a small maximum-entropy actor-critic in place of SAC (REINFORCE with a learnt
skill-conditioned baseline and an entropy bonus), trained on discounted returns of the
pseudo-reward, which is taken as numbers: the agent's losses never reach the discriminator, which
learns from its cross-entropy alone. The three losses are summed into one backward and each Adam
steps its own networks. A point moved by five discrete moves on a square, made in the script.
Injected bug: the pseudo-reward is taken with its graph (rewards = log_q - log_p_z, no .detach();
DIAYN-PyTorch's SACAgent.train detaches logq_z_ns before subtracting log p(z), and ben-eysenbach/sac
feeds the reward to the critic as numbers), so the discounted returns and the advantages carry the
discriminator's graph: the value loss's backward, summed with the discriminator's cross-entropy,
adds (returns - V) * d returns / d theta_q to the discriminator's gradient, and its Adam steps log
q(z|s') towards the critic's values, not only towards the skill labels."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iterations", type=int, default=40)
parser.add_argument("--n-episodes", type=int, default=32)
parser.add_argument("--horizon", type=int, default=10)
parser.add_argument("--n-skills", type=int, default=4)
parser.add_argument("--gamma", type=float, default=0.9)
parser.add_argument("--ent-coef", type=float, default=0.05)
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--disc-lr", type=float, default=1e-2)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

state_dim, n_actions, hidden_dim = 2, 5, 32
moves = 0.15 * torch.tensor([[0.0, 0.0], [1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
log_p_z = math.log(1.0 / args.n_skills)


def mlp(n_in, n_out):
    return nn.Sequential(nn.Linear(n_in, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, hidden_dim),
                         nn.ReLU(), nn.Linear(hidden_dim, n_out))


def with_skill(states, skills):
    one_hot = F.one_hot(skills, args.n_skills).float().expand(*states.shape[:-1], -1)
    return torch.cat([states, one_hot], -1)


policy = mlp(state_dim + args.n_skills, n_actions)
value = mlp(state_dim + args.n_skills, 1)
discriminator = mlp(state_dim, args.n_skills)
agent_optimizer = torch.optim.Adam([*policy.parameters(), *value.parameters()], lr=args.lr)
disc_optimizer = torch.optim.Adam(discriminator.parameters(), lr=args.disc_lr)


def rollout(skills):
    states = [0.05 * torch.randn(len(skills), state_dim)]
    actions = []
    with torch.no_grad():
        for _ in range(args.horizon):
            logits = policy(with_skill(states[-1], skills))
            actions.append(torch.distributions.Categorical(logits=logits).sample())
            states.append((states[-1] + moves[actions[-1]]).clamp(-1, 1))
    states = torch.stack(states)
    return states[:-1], torch.stack(actions), states[1:]


def discounted_returns(rewards):
    returns, running = torch.zeros_like(rewards), torch.zeros_like(rewards[0])
    for t in range(len(rewards) - 1, -1, -1):
        running = rewards[t] + args.gamma * running
        returns[t] = running
    return returns


for iteration in range(args.iterations):
    skills = torch.randint(0, args.n_skills, (args.n_episodes,))
    states, actions, next_states = rollout(skills)
    skill_labels = skills.expand(args.horizon, -1)
    disc_logits = discriminator(next_states)
    log_q = F.log_softmax(disc_logits, -1).gather(-1, skill_labels.unsqueeze(-1)).squeeze(-1)
    rewards = log_q - log_p_z
    returns = discounted_returns(rewards)
    dist = torch.distributions.Categorical(logits=policy(with_skill(states, skills)))
    advantages = returns - value(with_skill(states, skills)).squeeze(-1)
    policy_loss = -(dist.log_prob(actions) * advantages.detach()).mean()
    policy_loss = policy_loss - args.ent_coef * dist.entropy().mean()
    value_loss = 0.5 * advantages.pow(2).mean()
    disc_loss = F.cross_entropy(disc_logits.flatten(0, 1), skill_labels.flatten())
    agent_optimizer.zero_grad()
    disc_optimizer.zero_grad()
    (policy_loss + value_loss + disc_loss).backward()
    agent_optimizer.step()
    disc_optimizer.step()
    print(f"iteration {iteration} disc {disc_loss.item():.4f} "
          f"reward {rewards.mean().item():.4f} value {value_loss.item():.4f}")

with torch.no_grad():
    skills = torch.arange(args.n_skills).repeat_interleave(8)
    final = rollout(skills)[2][-1]
    accuracy = (discriminator(final).argmax(-1) == skills).float().mean()
print(f"skill accuracy of the discriminator at the last state {accuracy.item():.4f}")

if args.out:
    torch.save({"policy": policy.state_dict(), "value": value.state_dict(),
                "discriminator": discriminator.state_dict()}, args.out)
