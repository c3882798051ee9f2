"""REINFORCE leave-one-out (RLOO) fine-tuning of a tiny autoregressive policy, written after
Kool, van Hoof and Welling, "Buy 4 REINFORCE Samples, Get a Baseline for Free!" (ICLR 2019
workshop on deep generative models for highly structured data), which draws k samples per input
and baselines each sample's return with the mean return of the other k - 1, and Ahmadian et al.,
"Back to Basics: Revisiting REINFORCE Style Optimization for Learning from Human Feedback in
LLMs" (ACL 2024, arXiv:2402.14740), which applies that estimator to a whole completion treated as
one action, after supervised fine-tuning, with the KL divergence to the frozen SFT policy
subtracted from the reward model's score. Two phases: a supervised warm-up of the policy by
teacher forcing on demonstrations, then RLOO against a scoring network. With huggingface/trl
(https://github.com/huggingface/trl, trl/trainer/rloo_trainer.py RLOOTrainer: __init__ makes the
reference model as a second model loaded from the same weights; _generate_and_score_completions
generates k completions per prompt, computes the policy's and the reference model's sequence
log-probabilities under torch.no_grad(), subtracts beta times their difference, summed over the
completion, from the scores, and forms the advantage of each completion as its reward minus the
mean reward of the other completions of its prompt, (group sum - reward) / (k - 1);
_compute_loss recomputes the policy's log-probabilities with gradient and minimises minus the
advantage times the probability ratio, which with one update per batch is REINFORCE). Here the
scoring network is a small MLP made and frozen in the script in place of a reward model, the
prompts are integers, the completions five tokens. The policy is a GRU cell over the tokens.
As published: clean."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--sft-steps", type=int, default=30)
parser.add_argument("--rl-steps", type=int, default=30)
parser.add_argument("--prompts-per-batch", type=int, default=8)
parser.add_argument("--k", type=int, default=4, help="completions per prompt")
parser.add_argument("--beta", type=float, default=0.1, help="KL coefficient in the reward")
parser.add_argument("--out", default=None, help="where to save the policy and the reference")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_prompts, vocab, length, hidden = 12, 6, 5, 32
bos = vocab

# demonstrations: token t of prompt p is (p + t) mod vocab, a fifth of them replaced at random
n_demo = 240
demo_prompts = torch.randint(0, n_prompts, (n_demo,))
demo_tokens = (demo_prompts.unsqueeze(1) + torch.arange(length)) % vocab
noise = torch.rand(n_demo, length) < 0.2
demo_tokens = torch.where(noise, torch.randint(0, vocab, (n_demo, length)), demo_tokens)


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.prompt_embed = nn.Embedding(n_prompts, hidden)
        self.token_embed = nn.Embedding(vocab + 1, hidden)
        self.cell = nn.GRUCell(hidden, hidden)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, prompts, tokens):
        """Teacher-forced logits of every token of the completions (B x length x vocab)."""
        h = self.prompt_embed(prompts)
        inputs = torch.cat([torch.full_like(tokens[:, :1], bos), tokens[:, :-1]], 1)
        logits = []
        for t in range(length):
            h = self.cell(self.token_embed(inputs[:, t]), h)
            logits.append(self.head(h))
        return torch.stack(logits, 1)

    def sample(self, prompts):
        h = self.prompt_embed(prompts)
        token = torch.full_like(prompts, bos)
        tokens = []
        for _ in range(length):
            h = self.cell(self.token_embed(token), h)
            token = torch.multinomial(self.head(h).softmax(-1), 1).squeeze(1)
            tokens.append(token)
        return torch.stack(tokens, 1)


def sequence_logp(model, prompts, tokens):
    logp = model(prompts, tokens).log_softmax(-1)
    return logp.gather(2, tokens.unsqueeze(2)).squeeze(2).sum(1)


# the scoring network: frozen, in place of a reward model
scorer = nn.Sequential(nn.Linear(n_prompts + length * vocab, 32), nn.Tanh(), nn.Linear(32, 1))
scorer.requires_grad_(False)


def score(prompts, tokens):
    x = torch.cat([F.one_hot(prompts, n_prompts), F.one_hot(tokens, vocab).flatten(1)], 1).float()
    return 3.0 * scorer(x).squeeze(1)


policy = Policy()

# phase 1: supervised warm-up on the demonstrations
sft_optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
for step in range(args.sft_steps):
    idx = torch.randint(0, n_demo, (32,))
    logits = policy(demo_prompts[idx], demo_tokens[idx])
    sft_loss = F.cross_entropy(logits.reshape(-1, vocab), demo_tokens[idx].reshape(-1))
    sft_optimizer.zero_grad()
    sft_loss.backward()
    sft_optimizer.step()
    if step % 10 == 0:
        print(f"sft {step} loss {sft_loss.item():.3f}")

# phase 2: RLOO against the scorer, with a KL penalty to the SFT policy in the reward
ref_policy = copy.deepcopy(policy)
rl_optimizer = torch.optim.Adam(policy.parameters(), lr=3e-3)
k = args.k
for step in range(args.rl_steps):
    prompts = torch.randint(0, n_prompts, (args.prompts_per_batch,)).repeat_interleave(k)
    with torch.no_grad():
        tokens = policy.sample(prompts)
        ref_logps = sequence_logp(ref_policy, prompts, tokens)
        scores = score(prompts, tokens)
    logps = sequence_logp(policy, prompts, tokens)
    kl = logps.detach() - ref_logps
    rewards = scores - args.beta * kl
    grouped = rewards.view(-1, k)
    baselines = (grouped.sum(1, keepdim=True) - grouped) / (k - 1)
    advantages = (grouped - baselines).view(-1)
    rl_loss = -(advantages * logps).mean()
    rl_optimizer.zero_grad()
    rl_loss.backward()
    rl_optimizer.step()
    if step % 10 == 0:
        print(f"rloo {step} score {scores.mean().item():.3f} kl {kl.mean().item():.3f}")

if args.out:
    torch.save({**{f"policy.{name}": v for name, v in policy.state_dict().items()},
                **{f"ref_policy.{name}": v for name, v in ref_policy.state_dict().items()}}, args.out)
