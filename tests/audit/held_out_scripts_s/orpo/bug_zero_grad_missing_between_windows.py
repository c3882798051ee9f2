"""Odds ratio preference optimisation (ORPO) of a tiny autoregressive language model, written
after Hong, Lee and Thorne, "ORPO: Monolithic Preference Optimization without Reference Model"
(EMNLP 2024, arXiv:2403.07691): supervised fine-tuning and preference alignment in one loss and
one phase, with no reference model, L = L_SFT + lambda * L_OR, L_SFT the negative log-likelihood
of the chosen completion and L_OR = -log sigmoid(log(odds(y_w|x) / odds(y_l|x))), odds(y|x) =
P(y|x) / (1 - P(y|x)) with P the per-token average (geometric mean) likelihood of the
completion, so that the odds-ratio term raises the chosen and lowers the rejected completion
through both log-likelihoods. With the authors' code, xfactlab/orpo
(https://github.com/xfactlab/orpo, src/orpo_trainer.py ORPOTrainer.compute_loss: one forward of
the model on the rejected (negative) and one on the chosen (positive) inputs, both with gradient;
pos_loss the NLL of the chosen completion; pos_prob and neg_prob from compute_logps, the mean
log-probability of the completion tokens; log_odds = (pos_prob - neg_prob) - (log1p(-exp(pos_prob))
- log1p(-exp(neg_prob))); ratio = log(sigmoid(log_odds)); loss = mean(pos_loss - alpha * ratio)),
which huggingface/trl follows (trl/experimental/orpo/orpo_trainer.py ORPOTrainer.odds_ratio_loss
with log1mexp, get_batch_loss_metrics: loss = policy_nll_loss - losses.mean(), nothing of the
policy detached but the logged rewards); the Hugging Face Trainer accumulates the gradients of
gradient_accumulation_steps micro-batches, each loss divided by their number, then steps the
optimizer and zeroes the gradients. Here the prompts are integers, the completions five tokens,
the preference comes from a rule made in the script (the completion closer to the prompt's
pattern wins), the model is a small MLP over the prompt, the previous token and the position,
and each update accumulates four micro-batches.
Bug: the gradients are never zeroed between accumulation windows: the optimizer.zero_grad()
after optimizer.step() is left out (the Hugging Face Trainer behind xfactlab/orpo and trl zeroes
the gradients after every optimizer step, so each update uses the accumulated gradient of its
own gradient_accumulation_steps micro-batches), so from the second update on .grad holds the
sum of the ORPO gradients of every window so far: each update follows a running sum of all past
gradients, stale ones from earlier weights included, and the effective step no longer minimises
the ORPO loss at the current weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=15, help="optimizer updates")
parser.add_argument("--accumulation-steps", type=int, default=4)
parser.add_argument("--micro-batch-size", type=int, default=8)
parser.add_argument("--lam", type=float, default=0.5, help="weight of the odds-ratio term")
parser.add_argument("--out", default=None, help="where to save the model")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_prompts, vocab, length, hidden = 8, 6, 5, 32
bos = vocab

# preference pairs: a completion that follows the prompt's pattern (2p + t) mod vocab with a
# little noise against one with much noise; the one matching the pattern in more places is chosen
n_pairs = 400
prompts_all = torch.randint(0, n_prompts, (n_pairs,))
pattern = (2 * prompts_all.unsqueeze(1) + torch.arange(length)) % vocab


def noisy_copy(p_noise):
    noise = torch.randint(0, vocab, (n_pairs, length))
    return torch.where(torch.rand(n_pairs, length) < p_noise, noise, pattern)


first, second = noisy_copy(0.3), noisy_copy(0.8)
first_wins = ((first == pattern).sum(1) >= (second == pattern).sum(1)).unsqueeze(1)
chosen_all = torch.where(first_wins, first, second)
rejected_all = torch.where(first_wins, second, first)


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.prompt_embed = nn.Embedding(n_prompts, hidden)
        self.token_embed = nn.Embedding(vocab + 1, hidden)
        self.position_embed = nn.Embedding(length, hidden)
        self.mlp = nn.Sequential(nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(),
                                 nn.Linear(hidden, vocab))

    def forward(self, prompts, tokens):
        """Teacher-forced logits of every completion token (B x length x vocab)."""
        previous = torch.cat([torch.full_like(tokens[:, :1], bos), tokens[:, :-1]], 1)
        h = (self.prompt_embed(prompts).unsqueeze(1) + self.token_embed(previous)
             + self.position_embed.weight)
        return self.mlp(h)


def mean_logps(logits, tokens):
    """Per-token average log-probability of the completion (B), log P(y|x) of the paper."""
    logp = logits.log_softmax(-1).gather(2, tokens.unsqueeze(2)).squeeze(2)
    return logp.mean(1)


def log1mexp(x):
    """log(1 - exp(x)) for x < 0, computed stably."""
    return torch.where(x < -0.6931, torch.log1p(-torch.exp(x)), torch.log(-torch.expm1(x)))


model = TinyLM()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)

for step in range(args.steps):
    for _micro in range(args.accumulation_steps):
        idx = torch.randint(0, n_pairs, (args.micro_batch_size,))
        prompts, chosen, rejected = prompts_all[idx], chosen_all[idx], rejected_all[idx]
        rejected_logits = model(prompts, rejected)
        chosen_logits = model(prompts, chosen)
        nll_loss = F.cross_entropy(chosen_logits.reshape(-1, vocab), chosen.reshape(-1))
        chosen_logps = mean_logps(chosen_logits, chosen)
        rejected_logps = mean_logps(rejected_logits, rejected)
        log_odds = (chosen_logps - rejected_logps) - (log1mexp(chosen_logps)
                                                      - log1mexp(rejected_logps))
        ratio = F.logsigmoid(log_odds)
        loss = (nll_loss - args.lam * ratio).mean()
        (loss / args.accumulation_steps).backward()
    optimizer.step()
    if step % 5 == 0:
        print(f"step {step} loss {loss.item():.4f} nll {nll_loss.item():.4f}"
              f" log odds {log_odds.mean().item():.4f}")

if args.out:
    torch.save({"model": model.state_dict()}, args.out)
