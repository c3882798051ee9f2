"""PPO with gradient accumulation over micro-batches, at a tiny size, written after Schulman et
al., "Proximal Policy Optimization Algorithms" (arXiv:1707.06347) and Hugging Face's TRL
(huggingface/trl, trl/trainer/ppo_trainer.py, ``PPOTrainer.train``: mini-batches of a shuffled
rollout, one optimizer step each, each cut into micro-batches whose losses are accumulated):
each step should sum the gradients of a mini-batch's 4 micro-batches, as in
``trl_ppo_micro_batches.py``, where the clear runs before a mini-batch's first micro-batch,
under ``micro_batch_start % mini_batch_size == 0``. The bug twin takes the wrong modulus,
``micro_batch_start % micro_batch_size == 0``, which holds for EVERY micro-batch: the clear runs
before each micro-batch's forward pass, after the backward passes of those before it in the same
mini-batch, and each of the 12 steps trains the ``policy`` and the ``value_model`` on the last
micro-batch of four only. One line differs from the published script. A contextual bandit with
4 actions, 3 rollouts of 32 contexts, 2 PPO epochs. Contexts and rewards made in the script.
Adam. Bug: the step drops accumulated gradient. ``--out PATH`` saves the model's state_dict
after the run."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--total-episodes", type=int, default=3)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--mini-batch-size", type=int, default=16)
parser.add_argument("--micro-batch-size", type=int, default=4)
parser.add_argument("--num-ppo-epochs", type=int, default=2)
parser.add_argument("--cliprange", type=float, default=0.2)
parser.add_argument("--cliprange-value", type=float, default=0.2)
parser.add_argument("--vf-coef", type=float, default=0.1)
parser.add_argument("--learning-rate", type=float, default=1e-2)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

obs_dim, n_actions = 6, 4
reward_weights = torch.randn(obs_dim, n_actions)


class PolicyAndValueWrapper(nn.Module):
    def __init__(self):
        super().__init__()
        self.policy = nn.Sequential(nn.Linear(obs_dim, 32), nn.Tanh(), nn.Linear(32, n_actions))
        self.value_model = nn.Sequential(nn.Linear(obs_dim, 32), nn.Tanh(), nn.Linear(32, 1))

    def forward(self, obs):
        return self.policy(obs), self.value_model(obs).squeeze(-1)


model = PolicyAndValueWrapper()
optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate, eps=1e-5)
gradient_accumulation_steps = args.mini_batch_size // args.micro_batch_size

for update in range(args.total_episodes):
    obs = torch.randn(args.batch_size, obs_dim)
    with torch.no_grad():
        logits, values = model(obs)
        actions = torch.distributions.Categorical(logits=logits).sample()
        logprobs = F.log_softmax(logits, -1).gather(1, actions[:, None]).squeeze(1)
        rewards = (obs @ reward_weights).gather(1, actions[:, None]).squeeze(1)
        rewards = rewards + 0.1 * torch.randn(args.batch_size)
        returns = rewards
        advantages = returns - values
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    for _ppo_epoch in range(args.num_ppo_epochs):
        b_inds = torch.randperm(args.batch_size)
        for mini_batch_start in range(0, args.batch_size, args.mini_batch_size):
            mini_batch_end = mini_batch_start + args.mini_batch_size
            for micro_batch_start in range(mini_batch_start, mini_batch_end,
                                           args.micro_batch_size):
                if micro_batch_start % args.micro_batch_size == 0:
                    optimizer.zero_grad()
                mb_inds = b_inds[micro_batch_start:micro_batch_start + args.micro_batch_size]
                new_logits, vpred = model(obs[mb_inds])
                new_logprobs = F.log_softmax(new_logits, -1).gather(
                    1, actions[mb_inds, None]).squeeze(1)
                vpredclipped = values[mb_inds] + torch.clamp(
                    vpred - values[mb_inds], -args.cliprange_value, args.cliprange_value)
                vf_losses1 = (vpred - returns[mb_inds]) ** 2
                vf_losses2 = (vpredclipped - returns[mb_inds]) ** 2
                vf_loss = 0.5 * torch.max(vf_losses1, vf_losses2).mean()
                ratio = torch.exp(new_logprobs - logprobs[mb_inds])
                pg_losses = -advantages[mb_inds] * ratio
                pg_losses2 = -advantages[mb_inds] * torch.clamp(
                    ratio, 1.0 - args.cliprange, 1.0 + args.cliprange)
                pg_loss = torch.max(pg_losses, pg_losses2).mean()
                loss = pg_loss + args.vf_coef * vf_loss
                (loss / gradient_accumulation_steps).backward()
            optimizer.step()
    print(f"update {update}: mean reward {rewards.mean().item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
