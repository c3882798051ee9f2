"""An actor-critic with an action-value critic at a tiny size, written after Sutton and Barto,
"Reinforcement Learning: An Introduction" (2nd ed., 2018, section 13.5) and
pytorch/examples reinforcement_learning/actor_critic.py (https://github.com/pytorch/examples/
blob/main/reinforcement_learning/actor_critic.py), with the critic made an action value
``Q(s, a)`` that reads the sampled action as a one-hot: the action is drawn from the policy
with ``torch.multinomial`` (gradients on, as many scripts write it), the critic regresses the
reward of the action taken, and the policy is trained by the score function, ``-log pi(a|s)
Q(s, a)``, with the critic's value cut. The sample passes no gradient and needs none
(REINFORCE, Williams 1992): no straight-through belongs here. One optimizer, one summed loss.
Data: a one-step bandit whose reward depends on the state, made in the script. As published:
clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--iterations", type=int, default=12)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(0)

n_states, n_actions = 6, 4
best = torch.randint(0, n_actions, (n_states,))

actor = nn.Sequential(nn.Linear(n_states, 32), nn.Tanh(), nn.Linear(32, n_actions))
critic = nn.Sequential(nn.Linear(n_states + n_actions, 32), nn.Tanh(), nn.Linear(32, 1))
optimizer = torch.optim.Adam([*actor.parameters(), *critic.parameters()], lr=1e-2)

for iteration in range(args.iterations):
    s = torch.randint(0, n_states, (32,))
    state = F.one_hot(s, n_states).float()
    probs = F.softmax(actor(state), dim=-1)
    action = torch.multinomial(probs, 1)
    reward = (action.squeeze(1) == best[s]).float()
    q = critic(torch.cat([state, F.one_hot(action.squeeze(1), n_actions).float()], dim=1))
    log_prob = torch.log(probs.gather(1, action)).squeeze(1)
    actor_loss = -(log_prob * q.squeeze(1).detach()).mean()
    critic_loss = F.mse_loss(q.squeeze(1), reward)
    loss = actor_loss + critic_loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"iteration {iteration} reward {reward.mean().item():.3f}")

if args.out:
    torch.save({**{f"actor.{k}": v for k, v in actor.state_dict().items()},
                **{f"critic.{k}": v for k, v in critic.state_dict().items()}}, args.out)
