"""Evolutionary reinforcement learning at a tiny size, written after Khadka and Tumer,
"Evolution-Guided Policy Gradient in Reinforcement Learning" (NeurIPS 2018, arXiv:1805.07917;
ShawK91/erl_paper_nips18, run_erl.py ``Agent.train`` and ``rl_to_evo``, core/mod_neuro_evo.py
``SSNE.epoch``): a population of actors is evolved (the elite kept, every other member cloned
in place from a tournament winner and mutated by Gaussian noise), each member's rollouts fill
a replay buffer, and an RL actor learns from that buffer with DDPG (a critic regressed on the
rewards, the actor trained by Adam to raise the critic's value). After each generation the RL
actor is synchronised into the population: the worst member is replaced by a copy of the RL
agent's record, ``{"actor": ..., "fitness": ...}``. The task is a one-step continuous bandit
(the reward is the negative squared distance of the action to a target made in the script).
Injected bug: the synchronised member is a ``copy.copy`` of the record, whose actor is the RL
actor itself: evolution clones into and mutates the actor that DDPG trains.
``--out PATH`` saves the RL actor, the critic and every member's actor."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--generations", type=int, default=6)
parser.add_argument("--population", type=int, default=5)
parser.add_argument("--rl-steps", type=int, default=4)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--mutation", type=float, default=0.05)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

state_dim, action_dim = 3, 2
goal = torch.randn(state_dim, action_dim)


def reward(states, actions):
    return -((actions - torch.tanh(states @ goal)) ** 2).sum(1)


def new_actor():
    return nn.Sequential(nn.Linear(state_dim, 16), nn.Tanh(), nn.Linear(16, action_dim),
                         nn.Tanh())


buffer_s, buffer_a, buffer_r = [], [], []


@torch.no_grad()
def rollout(actor, noise=0.0):
    states = torch.randn(args.batch_size, state_dim)
    actions = (actor(states) + noise * torch.randn(args.batch_size, action_dim)).clamp(-1, 1)
    rewards = reward(states, actions)
    buffer_s.append(states)
    buffer_a.append(actions)
    buffer_r.append(rewards)
    return rewards.mean().item()


@torch.no_grad()
def evolve(population):
    ranked = sorted(range(len(population)), key=lambda i: -population[i]["fitness"])
    for i in ranked[1:]:
        a, b = torch.randint(0, len(population), (2,)).tolist()
        winner = a if population[a]["fitness"] >= population[b]["fitness"] else b
        if winner != i:
            population[i]["actor"].load_state_dict(population[winner]["actor"].state_dict())
        for p in population[i]["actor"].parameters():
            p.add_(args.mutation * torch.randn_like(p))


population = [{"actor": new_actor(), "fitness": 0.0} for _ in range(args.population)]
actor = new_actor()
critic = nn.Sequential(nn.Linear(state_dim + action_dim, 32), nn.ReLU(), nn.Linear(32, 1))
actor_opt = torch.optim.Adam(actor.parameters(), lr=1e-2)
critic_opt = torch.optim.Adam(critic.parameters(), lr=1e-2)
rl = {"actor": actor, "fitness": 0.0}

for generation in range(args.generations):
    for member in population:
        member["fitness"] = rollout(member["actor"])
    worst = min(range(len(population)), key=lambda i: population[i]["fitness"])
    evolve(population)
    rl["fitness"] = rollout(actor, noise=0.1)
    states, actions = torch.cat(buffer_s), torch.cat(buffer_a)
    rewards = torch.cat(buffer_r)
    for _ in range(args.rl_steps):
        idx = torch.randint(0, len(states), (args.batch_size,))
        s, a, r = states[idx], actions[idx], rewards[idx]
        critic_loss = F.mse_loss(critic(torch.cat([s, a], 1)).squeeze(1), r)
        critic_opt.zero_grad()
        critic_loss.backward()
        critic_opt.step()
        actor_loss = -critic(torch.cat([s, actor(s)], 1)).mean()
        actor_opt.zero_grad()
        actor_loss.backward()
        actor_opt.step()
    population[worst] = copy.copy(rl)
    print(f"generation {generation} best {max(m['fitness'] for m in population):.3f} "
          f"rl {rl['fitness']:.3f} critic {critic_loss.item():.4f}")

if args.out:
    torch.save({"actor": actor.state_dict(), "critic": critic.state_dict(),
                "population": [m["actor"].state_dict() for m in population]}, args.out)
