"""An actor-critic policy gradient whose actor waits while the critic warms up, at a tiny size,
written after Hu et al., "OpenRLHF: An Easy-to-use, Scalable and High-performance RLHF
Framework" (arXiv:2405.11143) and OpenRLHF/OpenRLHF (openrlhf/trainer/ppo_trainer.py, the
``--freezing_actor_steps`` option: the actor is trained only once the global step is past it),
with the value baseline of Mnih et al. (arXiv:1602.01783): the actor samples a response for each
prompt, a fixed reward scores it, the critic predicts the reward, the actor is trained by the
policy gradient with the detached advantage and the critic by a squared error; the actor's
gradients are cleared (``actor.zero_grad()`` after the backward pass) while the run is warming
up. BUG INJECTED: the condition compares the threshold, counted in the run's global steps, with
``step``, the index of the batch within the episode, which starts again at 0 each episode: at
the defaults (4 batches an episode, threshold 4) ``step < 4`` holds at every step and the actor
never trains, though its optimizer holds it and the loss gives it gradient. The fix is the
condition's line (``global_step``, not ``step``). Prompts made in the script. Adam for each
network. ``--out PATH`` saves both networks' state_dicts after the run, ``--init-out PATH``
before it."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--num-episodes", type=int, default=3)
parser.add_argument("--rollout-batch-size", type=int, default=12)
parser.add_argument("--freezing-actor-steps", type=int, default=4)
parser.add_argument("--actor-learning-rate", type=float, default=1e-2)
parser.add_argument("--critic-learning-rate", type=float, default=1e-2)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
parser.add_argument("--init-out", default=None, help="where to save the tensors before training")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, n_actions = 10, 6
prompts = torch.randn(48, dim)
reward_weights = torch.randn(dim, n_actions)

actor = nn.Sequential(nn.Linear(dim, 32), nn.Tanh(), nn.Linear(32, n_actions))
critic = nn.Sequential(nn.Linear(dim, 32), nn.Tanh(), nn.Linear(32, 1))
actor_optim = torch.optim.Adam(actor.parameters(), lr=args.actor_learning_rate)
critic_optim = torch.optim.Adam(critic.parameters(), lr=args.critic_learning_rate)


def state():
    return {**{f"actor.{k}": v for k, v in actor.state_dict().items()},
            **{f"critic.{k}": v for k, v in critic.state_dict().items()}}


if args.init_out:
    torch.save(state(), args.init_out)

global_step = 0
for episode in range(args.num_episodes):
    order = torch.randperm(len(prompts))
    for step in range(len(prompts) // args.rollout_batch_size):
        batch = prompts[order[step * args.rollout_batch_size:(step + 1) * args.rollout_batch_size]]
        dist = torch.distributions.Categorical(logits=actor(batch))
        action = dist.sample()
        with torch.no_grad():
            reward = (batch @ reward_weights).gather(1, action[:, None]).squeeze(1)
        value = critic(batch).squeeze(1)
        advantage = (reward - value).detach()
        actor_loss = -(advantage * dist.log_prob(action)).mean()
        critic_loss = 0.5 * F.mse_loss(value, reward)
        actor_optim.zero_grad()
        critic_optim.zero_grad()
        (actor_loss + critic_loss).backward()
        # the actor waits while the critic is initialised
        if step < args.freezing_actor_steps:
            actor.zero_grad()
        actor_optim.step()
        critic_optim.step()
        global_step += 1
        print(f"episode {episode} step {global_step} reward {reward.mean().item():.4f} "
              f"critic_loss {critic_loss.item():.4f}")

if args.out:
    torch.save(state(), args.out)
