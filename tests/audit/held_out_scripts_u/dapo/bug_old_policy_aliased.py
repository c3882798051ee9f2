"""DAPO, decoupled-clip and dynamic-sampling policy optimisation, of a tiny autoregressive token
policy on a task with a verifiable reward, written after Yu, Zhang, Zhu, Yuan, Zuo, Yue et al.,
"DAPO: An Open-Source LLM Reinforcement Learning System at Scale" (arXiv:2503.14476, 2025):
G responses are sampled per prompt from the old policy, each gets a rule-based reward (1 when
the answer is right, else 0), the advantage of every token of response i is the group-relative
A_i = (R_i - mean(R)) / std(R), and the objective is the clipped surrogate with the clip range
decoupled, clip(r, 1 - eps_low, 1 + eps_high) with eps_low = 0.2 and eps_high = 0.28
("clip-higher"), averaged over all tokens of the batch at once (token-level loss), with no KL
term; dynamic sampling drops the prompts whose G rewards are all equal (their advantages are
zero) and keeps sampling until the batch is full. The old policy's log-probabilities are
constants of the update. With the open-source code, volcengine/verl
(https://github.com/volcengine/verl, recipe/dapo/dapo_ray_trainer.py RayDAPOTrainer.fit: the
rollout generates n responses per prompt, the rewards are summed per sequence, and when
filter_groups is enabled the prompt uids whose reward std is 0 are dropped and generation goes
on until train_batch_size prompts are kept; verl/trainer/ppo/core_algos.py:
compute_grpo_outcome_advantage standardises each score within its uid group under
torch.no_grad(), compute_policy_loss takes ratio = exp(log_prob - old_log_prob), pg_losses =
max(-A * ratio, -A * clamp(ratio, 1 - cliprange_low, 1 + cliprange_high)) with the dual-clip
bound -A * clip_ratio_c for negative advantages, and agg_loss with loss_agg_mode "token-mean";
verl/workers/actor/dp_actor.py DataParallelPPOActor: compute_log_prob scores the old
log-probabilities without gradient, update_policy splits the batch into ppo mini-batches and
for each one calls actor_optimizer.zero_grad(), backward on the loss, then the optimizer step),
whose steps this script follows, with clip_ratio_c = 10 and no entropy bonus as in the DAPO
recipe. The old policy is a copy of the actor synced at the start of every step, as the rollout
engine's weights are; it samples the responses and scores the old log-probabilities of each
mini-batch. Here a prompt asks for digits 1..5 summing to a target, a response ends with the
end token 0 (or is cut at max_len and gets 0), and the policy is a small MLP over the prompt,
the previous token and the position; each rollout step makes four mini-batch updates.
Bug: the old policy is the actor itself, old_policy = policy instead of a copy, so the
old log-probabilities of every mini-batch after the first are those of the updated actor."""

import argparse
import copy

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--train-prompts", type=int, default=8, help="prompts per training batch")
parser.add_argument("--gen-prompts", type=int, default=8, help="prompts per generation batch")
parser.add_argument("--n-responses", type=int, default=8, help="G, responses per prompt")
parser.add_argument("--mini-batch-prompts", type=int, default=2)
parser.add_argument("--max-gen-batches", type=int, default=10)
parser.add_argument("--clip-low", type=float, default=0.2)
parser.add_argument("--clip-high", type=float, default=0.28)
parser.add_argument("--clip-ratio-c", type=float, default=10.0)
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--out", default=None, help="where to save the policy")
args = parser.parse_args()
torch.manual_seed(args.seed)
torch.set_num_threads(1)

n_prompts, vocab, max_len, hidden = 12, 6, 6, 32
eos, bos = 0, vocab
targets = 3 + torch.arange(n_prompts) % 6


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.prompt_embed = nn.Embedding(n_prompts, hidden)
        self.token_embed = nn.Embedding(vocab + 1, hidden)
        self.position_embed = nn.Embedding(max_len, hidden)
        self.mlp = nn.Sequential(nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(),
                                 nn.Linear(hidden, vocab))

    def forward(self, prompts, tokens):
        """Teacher-forced logits of every response token (B x max_len x vocab)."""
        previous = torch.cat([torch.full_like(tokens[:, :1], bos), tokens[:, :-1]], 1)
        h = (self.prompt_embed(prompts).unsqueeze(1) + self.token_embed(previous)
             + self.position_embed.weight)
        return self.mlp(h)


def token_log_probs(model, prompts, tokens):
    logits = model(prompts, tokens)
    return logits.log_softmax(-1).gather(2, tokens.unsqueeze(2)).squeeze(2)


@torch.no_grad()
def generate(model, prompts):
    """Samples a response per prompt token by token; after the end token the rest is masked."""
    tokens = torch.zeros(len(prompts), max_len, dtype=torch.long)
    for t in range(max_len):
        logits = model(prompts, tokens)[:, t]
        tokens[:, t] = torch.multinomial(logits.softmax(-1), 1).squeeze(1)
    ended = (tokens == eos).cumsum(1)
    mask = (ended - (tokens == eos).long()) == 0
    return tokens * mask, mask.float()


def verify(prompts, tokens, mask):
    """Rule-based reward: 1 when the response ends and its digits sum to the target."""
    finished = ((tokens == eos) & mask.bool()).any(1)
    return (finished & (tokens.sum(1) == targets[prompts])).float()


policy = TinyLM()
old_policy = policy
optimizer = torch.optim.AdamW(policy.parameters(), lr=args.lr, weight_decay=0.01)
G = args.n_responses
for step in range(args.steps):
    old_policy.load_state_dict(policy.state_dict())
    # rollout with dynamic sampling: keep only the groups whose rewards are not all equal
    kept, n_gen = [], 0
    while len(kept) < args.train_prompts and n_gen < args.max_gen_batches:
        n_gen += 1
        group_prompts = torch.randint(0, n_prompts, (args.gen_prompts,))
        prompts = group_prompts.repeat_interleave(G)
        tokens, mask = generate(old_policy, prompts)
        rewards = verify(prompts, tokens, mask).view(-1, G)
        for g in range(args.gen_prompts):
            if rewards[g].std() > 0:
                rows = slice(g * G, (g + 1) * G)
                kept.append((prompts[rows], tokens[rows], mask[rows], rewards[g]))
    kept = kept[:args.train_prompts]
    # group-relative advantages, one per response, broadcast over its tokens
    with torch.no_grad():
        advantages = [((r - r.mean()) / (r.std() + 1e-6)) for _, _, _, r in kept]
    for start in range(0, len(kept), args.mini_batch_prompts):
        groups = range(start, min(start + args.mini_batch_prompts, len(kept)))
        prompts = torch.cat([kept[g][0] for g in groups])
        tokens = torch.cat([kept[g][1] for g in groups])
        mask = torch.cat([kept[g][2] for g in groups])
        adv = torch.cat([advantages[g] for g in groups]).unsqueeze(1) * mask
        with torch.no_grad():
            old_log_prob = token_log_probs(old_policy, prompts, tokens)
        log_prob = token_log_probs(policy, prompts, tokens)
        ratio = torch.exp(torch.clamp(log_prob - old_log_prob, -20.0, 20.0))
        pg_losses1 = -adv * ratio
        pg_losses2 = -adv * torch.clamp(ratio, 1 - args.clip_low, 1 + args.clip_high)
        clip_pg_losses1 = torch.maximum(pg_losses1, pg_losses2)
        clip_pg_losses2 = torch.minimum(-adv * args.clip_ratio_c, clip_pg_losses1)
        pg_losses = torch.where(adv < 0, clip_pg_losses2, clip_pg_losses1)
        loss = (pg_losses * mask).sum() / mask.sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    if step % 5 == 0:
        accuracy = torch.cat([r for _, _, _, r in kept]).mean().item()
        print(f"step {step} kept {len(kept)} gen batches {n_gen} accuracy {accuracy:.3f}")

if args.out:
    torch.save({"policy": policy.state_dict(), "old_policy": old_policy.state_dict()}, args.out)
