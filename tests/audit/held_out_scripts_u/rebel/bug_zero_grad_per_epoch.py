"""REBEL, reinforcement learning by regressing relative rewards, of a tiny autoregressive token
policy with a synthetic reward and a KL penalty to a reference policy, written after Gao, Chang,
Zhan, Oertell, Swamy, Brantley, Joachims, Bagnell, Lee and Sun, "REBEL: Reinforcement Learning
via Regressing Relative Rewards" (NeurIPS 2024, arXiv:2404.16767): for every prompt x two
completions y, y' are sampled from the current policy pi_t, and pi_{t+1} is found by the least
squares regression of the difference of log-ratios, (log pi(y|x) - log pi_t(y|x)) - (log pi(y'|x)
- log pi_t(y'|x)), onto eta times the difference of rewards r(x, y) - r(x, y'), the old
policy's log-probabilities and the rewards being constants. With the authors' code,
ZhaolinGao/REBEL (https://github.com/ZhaolinGao/REBEL, src/tldr/rebel.py, the main loop:
under torch.no_grad() it generates two responses per query, takes their summed token
log-probabilities under the policy (logprobs) and the reference (ref_logprobs, the adapter
disabled) and the reward model's scores, and sets rewards = scores - kl_coef * (logprobs -
ref_logprobs); then for noptepochs epochs over shuffled minibatches of query pairs it recomputes
new_logprobs with gradient, ratio_logprob = new_logprobs - mb_logprobs, takes the first
responses' minus the second responses' ratio, reg_diff = ratio - eta * (reward difference),
loss = (reg_diff ** 2).mean(), and calls backward, optimizer.step() and optimizer.zero_grad()
for every minibatch, with AdamW and a linearly annealed learning rate), whose steps this script
follows. Here prompts are integers, completions have five tokens from a vocabulary of six, the
policy is a small MLP over the prompt, the previous token and the position, the reference is a
frozen copy of the initial policy, and the score is the number of tokens that follow the
prompt's pattern (p + 2t) mod 6.
Bug: optimizer.zero_grad() runs once per epoch, not per minibatch, so the gradients pile up."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--updates", type=int, default=16, help="REBEL iterations (rollout batches)")
parser.add_argument("--batch-size", type=int, default=32, help="prompts per iteration")
parser.add_argument("--minibatch-size", type=int, default=8, help="prompts per gradient step")
parser.add_argument("--noptepochs", type=int, default=4)
parser.add_argument("--eta", type=float, default=1.0)
parser.add_argument("--kl-coef", type=float, default=0.05)
parser.add_argument("--temperature", type=float, default=0.7)
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--out", default=None, help="where to save the policy")
args = parser.parse_args()
torch.manual_seed(args.seed)
torch.set_num_threads(1)  # tiny networks: one thread is fastest and reproducible

n_prompts, vocab, length, hidden = 8, 6, 5, 32
bos = vocab


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.prompt_embed = nn.Embedding(n_prompts, hidden)
        self.token_embed = nn.Embedding(vocab + 1, hidden)
        self.position_embed = nn.Embedding(length, hidden)
        self.mlp = nn.Sequential(nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, vocab))

    def forward(self, prompts, previous, positions):
        h = self.prompt_embed(prompts) + self.token_embed(previous) + self.position_embed(positions)
        return self.mlp(h) / args.temperature


def sequence_logprobs(model, prompts, responses):
    """Summed log-probability of every response given its prompt (teacher forcing)."""
    previous = torch.cat([torch.full_like(responses[:, :1], bos), responses[:, :-1]], 1)
    positions = torch.arange(length).expand_as(responses)
    logits = model(prompts.unsqueeze(1).expand_as(responses), previous, positions)
    logp = logits.log_softmax(-1).gather(2, responses.unsqueeze(2)).squeeze(2)
    return logp.sum(1)


def generate(model, prompts):
    tokens = torch.full((len(prompts),), bos)
    out = []
    for t in range(length):
        logits = model(prompts, tokens, torch.full_like(prompts, t))
        tokens = torch.distributions.Categorical(logits=logits).sample()
        out.append(tokens)
    return torch.stack(out, 1)


def score(prompts, responses):
    pattern = (prompts.unsqueeze(1) + 2 * torch.arange(length)) % vocab
    return (responses == pattern).float().sum(1)


policy = TinyLM()
ref_policy = copy.deepcopy(policy)
optimizer = torch.optim.AdamW(policy.parameters(), lr=args.lr, eps=1e-5)

for update in range(1, args.updates + 1):
    frac = 1.0 - (update - 1.0) / args.updates
    optimizer.param_groups[0]["lr"] = frac * args.lr

    # rollouts: two completions per prompt, their log-probabilities and rewards, all constants
    with torch.no_grad():
        prompts = torch.randint(0, n_prompts, (args.batch_size,))
        responses = torch.stack([generate(policy, prompts), generate(policy, prompts)], 1)
        pair_prompts = prompts.unsqueeze(1).expand(-1, 2)
        logprobs = sequence_logprobs(policy, pair_prompts.reshape(-1), responses.flatten(0, 1))
        ref_logprobs = sequence_logprobs(ref_policy, pair_prompts.reshape(-1),
                                         responses.flatten(0, 1))
        scores = score(pair_prompts.reshape(-1), responses.flatten(0, 1))
        kl = logprobs - ref_logprobs
        rewards = (scores - args.kl_coef * kl).view(args.batch_size, 2)
        logprobs = logprobs.view(args.batch_size, 2)

    # regress the difference of log-ratios onto the difference of rewards
    mb = args.minibatch_size
    for epoch in range(args.noptepochs):
        perm = torch.randperm(args.batch_size)
        optimizer.zero_grad()
        for start in range(0, args.batch_size, mb):
            idx = perm[start:start + mb]
            mb_prompts = torch.cat([prompts[idx], prompts[idx]])
            mb_responses = torch.cat([responses[idx, 0], responses[idx, 1]])
            mb_logprobs = torch.cat([logprobs[idx, 0], logprobs[idx, 1]])
            mb_rewards = torch.cat([rewards[idx, 0], rewards[idx, 1]])
            new_logprobs = sequence_logprobs(policy, mb_prompts, mb_responses)
            ratio_logprob = new_logprobs - mb_logprobs
            ratio_logprob = ratio_logprob[:mb] - ratio_logprob[mb:]
            reg_diff = ratio_logprob - args.eta * (mb_rewards[:mb] - mb_rewards[mb:])
            loss = (reg_diff ** 2).mean()
            loss.backward()
            optimizer.step()
    if update % 4 == 0:
        print(f"update {update} loss {loss.item():.4f} score {scores.mean().item():.3f} "
              f"kl {kl.mean().item():.4f}")

if args.out:
    torch.save({"policy": policy.state_dict()}, args.out)
