"""SimPO, simple preference optimisation with a reference-free reward, of a tiny autoregressive
policy on synthetic chosen/rejected pairs, after a supervised fine-tuning warm-up, written after
Meng, Xia and Chen, "SimPO: Simple Preference Optimization with a Reference-Free Reward"
(NeurIPS 2024, arXiv:2405.14734): the implicit reward of a completion is its length-normalised
log-likelihood, r(x, y) = beta / |y| * log pi(y | x), the average per-token log-probability
times beta, with no reference model, and the loss is the Bradley-Terry loss with a target
margin gamma, L = -log sigmoid(beta * (avg_logp(y_w) - avg_logp(y_l) - gamma / beta)), which
both raises the chosen and lowers the rejected completion. Two phases: supervised fine-tuning
on the chosen completions (SimPO starts from an SFT model), then SimPO on a copy of the SFT
model. With the authors' code, princeton-nlp/SimPO (https://github.com/princeton-nlp/SimPO,
scripts/simpo_trainer.py SimPOTrainer: concatenated_forward runs the model once on the chosen
and rejected inputs concatenated along the batch and splits get_batch_logps(...,
average_log_prob=True), the masked mean of the per-token log-probabilities, into chosen_logps
and rejected_logps, both with gradient; simpo_loss takes pi_logratios = chosen - rejected,
logits = pi_logratios - gamma_beta_ratio and losses = -logsigmoid(beta * logits) for the
"sigmoid" loss type, detaching only the logged chosen_rewards and rejected_rewards;
get_batch_loss_metrics returns losses.mean(), sft_weight 0 by default; the Hugging Face
Trainer zeroes, backpropagates and steps the optimizer over the model's parameters), whose
steps this script follows, with beta = 2 and gamma_beta_ratio = 0.5 as in its
training_configs. Here the prompts are integers, completions have three to six tokens (padded,
masked out of the average), the preference comes from a rule made in the script (the
completion that matches the prompt's pattern in more places wins) and the model is a small MLP
over the prompt, the previous token and the position.
Bug: the rejected completions' average log-probability is cut from the graph,
rejected_logps = all_logps[n:].detach(), as the logged rejected_rewards are, where
princeton-nlp/SimPO's SimPOTrainer.concatenated_forward returns rejected_logps with gradient and
simpo_loss detaches only the logged rewards, so the loss -log sigmoid(beta * (chosen - rejected -
gamma/beta)) keeps its value but differentiates only through the chosen completions: SimPO
never pushes the rejected completions down, and the policy can only widen the margin by
raising the chosen ones (and, through the shared weights, drifts the rejected ones with them)."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--sft-steps", type=int, default=30)
parser.add_argument("--simpo-steps", type=int, default=40)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--beta", type=float, default=2.0)
parser.add_argument("--gamma-beta-ratio", type=float, default=0.5)
parser.add_argument("--out", default=None, help="where to save the SFT model and the policy")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_prompts, vocab, max_len, hidden = 8, 6, 6, 32
bos = vocab

# preference pairs: completions of three to six tokens, noisy copies of the prompt's pattern
# (3p + t) mod vocab; the one matching the pattern in the larger share of its tokens is chosen
n_pairs = 400
prompts_all = torch.randint(0, n_prompts, (n_pairs,))
pattern = (3 * prompts_all.unsqueeze(1) + torch.arange(max_len)) % vocab


def noisy_completion(p_noise):
    tokens = torch.where(torch.rand(n_pairs, max_len) < p_noise,
                         torch.randint(0, vocab, (n_pairs, max_len)), pattern)
    lengths = torch.randint(3, max_len + 1, (n_pairs, 1))
    mask = torch.arange(max_len) < lengths
    return tokens * mask, mask


first, first_mask = noisy_completion(0.3)
second, second_mask = noisy_completion(0.7)
first_score = ((first == pattern) & first_mask).sum(1) / first_mask.sum(1)
second_score = ((second == pattern) & second_mask).sum(1) / second_mask.sum(1)
first_wins = (first_score >= second_score).unsqueeze(1)
chosen_all = torch.where(first_wins, first, second)
chosen_mask_all = torch.where(first_wins, first_mask, second_mask)
rejected_all = torch.where(first_wins, second, first)
rejected_mask_all = torch.where(first_wins, second_mask, first_mask)


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.prompt_embed = nn.Embedding(n_prompts, hidden)
        self.token_embed = nn.Embedding(vocab + 1, hidden)
        self.position_embed = nn.Embedding(max_len, hidden)
        self.mlp = nn.Sequential(nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(),
                                 nn.Linear(hidden, vocab))

    def forward(self, prompts, tokens):
        """Teacher-forced logits of every completion token (B x max_len x vocab)."""
        previous = torch.cat([torch.full_like(tokens[:, :1], bos), tokens[:, :-1]], 1)
        h = (self.prompt_embed(prompts).unsqueeze(1) + self.token_embed(previous)
             + self.position_embed.weight)
        return self.mlp(h)


def average_logps(logits, tokens, mask):
    """Masked mean of the completion tokens' log-probabilities (B), as average_log_prob=True."""
    logp = logits.log_softmax(-1).gather(2, tokens.unsqueeze(2)).squeeze(2)
    return (logp * mask).sum(1) / mask.sum(1)


# phase 1: supervised fine-tuning on the chosen completions
sft_model = TinyLM()
sft_optimizer = torch.optim.AdamW(sft_model.parameters(), lr=1e-2)
for step in range(args.sft_steps):
    idx = torch.randint(0, n_pairs, (args.batch_size,))
    chosen, chosen_mask = chosen_all[idx], chosen_mask_all[idx]
    logits = sft_model(prompts_all[idx], chosen)
    token_nll = F.cross_entropy(logits.reshape(-1, vocab), chosen.reshape(-1), reduction="none")
    sft_loss = (token_nll * chosen_mask.reshape(-1)).sum() / chosen_mask.sum()
    sft_optimizer.zero_grad()
    sft_loss.backward()
    sft_optimizer.step()
    if step % 10 == 0:
        print(f"sft {step} loss {sft_loss.item():.4f}")

# phase 2: SimPO on a copy of the SFT model, no reference model
policy = copy.deepcopy(sft_model)
optimizer = torch.optim.AdamW(policy.parameters(), lr=5e-3)
for step in range(args.simpo_steps):
    idx = torch.randint(0, n_pairs, (args.batch_size,))
    n = len(idx)
    prompts = prompts_all[idx].repeat(2)
    tokens = torch.cat([chosen_all[idx], rejected_all[idx]])
    masks = torch.cat([chosen_mask_all[idx], rejected_mask_all[idx]])
    all_logps = average_logps(policy(prompts, tokens), tokens, masks)
    chosen_logps = all_logps[:n]
    rejected_logps = all_logps[n:].detach()
    logits = (chosen_logps - rejected_logps) - args.gamma_beta_ratio
    loss = -F.logsigmoid(args.beta * logits).mean()
    chosen_rewards = args.beta * chosen_logps.detach()
    rejected_rewards = args.beta * rejected_logps.detach()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 10 == 0:
        accuracy = (chosen_rewards > rejected_rewards).float().mean().item()
        margin = (chosen_rewards - rejected_rewards).mean().item()
        print(f"simpo {step} loss {loss.item():.4f} accuracy {accuracy:.2f} margin {margin:.3f}")

if args.out:
    torch.save({"sft_model": sft_model.state_dict(), "policy": policy.state_dict()}, args.out)
