"""Group relative policy optimisation at a tiny size, written after Shao, Wang, Zhu, Xu, Song,
Bi, Zhang, Zhang, Li, Wu and Guo, "DeepSeekMath: Pushing the Limits of Mathematical Reasoning in
Open Language Models" (arXiv:2402.03300, 2024), section 4.1 and algorithm 1 (G completions
sampled for each prompt, outcome rewards normalised within their group as the advantage of every
token, the clipped ratio against the old policy, and the KL penalty to the reference model with
the unbiased estimator pi_ref / pi_theta - log(pi_ref / pi_theta) - 1, the reference being the
SFT model), with Hugging Face TRL's GRPOTrainer (https://github.com/huggingface/trl,
trl/trainer/grpo_trainer.py: the reference model made by create_reference_model, a deep copy with
requires_grad False; _generate_and_score_completions, which computes the rewards, the group
means and standard deviations and ref_per_token_logps under torch.no_grad(); _compute_loss,
old_per_token_logps = per_token_logps.detach() when num_iterations is 1, coef_1 = exp(log_ratio),
coef_2 = clamp(coef_1, 1 - epsilon, 1 + epsilon), per_token_loss = -min(coef_1 * A, coef_2 * A) +
beta * per_token_kl, averaged over each completion's tokens). A tiny autoregressive policy over
eight tokens is built in the script: the next token from the prompt token, the previous token and
the position. Two phases: supervised fine-tuning on noisy demonstrations, then GRPO against the
frozen copy of the SFT model, with a fixed scoring function (the fraction of the completion that
counts up from the prompt token). Injected bug: the old policy's log-probabilities are taken
with their graph (old_logps = logps, no .detach()), so the ratio exp(logps - old_logps) is 1
with a zero gradient, the clipped surrogate gives the policy no gradient and GRPO trains the
policy by the KL penalty alone; second phase of a two-phase script."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--sft-steps", type=int, default=30)
parser.add_argument("--grpo-steps", type=int, default=20)
parser.add_argument("--n-prompts", type=int, default=8)
parser.add_argument("--group-size", type=int, default=8, help="G, completions per prompt")
parser.add_argument("--length", type=int, default=5, help="tokens per completion")
parser.add_argument("--epsilon", type=float, default=0.2)
parser.add_argument("--beta", type=float, default=0.1)
parser.add_argument("--sft-lr", type=float, default=1e-2)
parser.add_argument("--lr", type=float, default=5e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

vocab, hidden_dim, L = 8, 32, args.length


class TinyLM(nn.Module):
    """Logits of token j + 1 from the prompt token, token j and the position j."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden_dim)
        self.pos = nn.Embedding(L, hidden_dim)
        self.mix = nn.Linear(2 * hidden_dim, hidden_dim)
        self.head = nn.Linear(hidden_dim, vocab)

    def forward(self, tokens):
        e = self.embed(tokens)
        prompt = e[:, :1].expand_as(e)
        positions = self.pos(torch.arange(tokens.shape[1]))
        return self.head(torch.tanh(self.mix(torch.cat([prompt, e], dim=-1)) + positions))


def token_log_probs(model, seqs):
    logits = model(seqs[:, :-1])
    return torch.log_softmax(logits, dim=-1).gather(-1, seqs[:, 1:, None]).squeeze(-1)


def generate(model, prompts):
    seqs = prompts[:, None]
    for _ in range(L):
        logits = model(seqs)[:, -1]
        seqs = torch.cat([seqs, torch.multinomial(logits.softmax(-1), 1)], dim=1)
    return seqs


def score(seqs):
    """The fixed reward: the fraction of completion tokens that count up from the prompt."""
    wanted = (seqs[:, :1] + torch.arange(1, L + 1)) % vocab
    return (seqs[:, 1:] == wanted).float().mean(dim=1)


policy = TinyLM()
sft_optimizer = torch.optim.Adam(policy.parameters(), lr=args.sft_lr)
for step in range(args.sft_steps):  # phase 1: SFT on demonstrations right 40% of the time
    prompts = torch.randint(0, vocab, (32, 1))
    demos = (prompts + torch.arange(1, L + 1)) % vocab
    noise = torch.rand(32, L) < 0.6
    demos = torch.where(noise, torch.randint(0, vocab, (32, L)), demos)
    sft_loss = -token_log_probs(policy, torch.cat([prompts, demos], dim=1)).mean()
    sft_optimizer.zero_grad()
    sft_loss.backward()
    sft_optimizer.step()
print(f"sft done, loss {sft_loss.item():.4f}")

ref_model = copy.deepcopy(policy).requires_grad_(False)
optimizer = torch.optim.Adam(policy.parameters(), lr=args.lr)
G = args.group_size
for step in range(args.grpo_steps):  # phase 2: GRPO, one update per generation batch
    prompts = torch.randint(0, vocab, (args.n_prompts,)).repeat_interleave(G)
    with torch.no_grad():
        seqs = generate(policy, prompts)
        rewards = score(seqs)
        grouped = rewards.view(-1, G)
        mean = grouped.mean(dim=1).repeat_interleave(G)
        std = grouped.std(dim=1).repeat_interleave(G)
        advantages = ((rewards - mean) / (std + 1e-4))[:, None]
        ref_logps = token_log_probs(ref_model, seqs)
    logps = token_log_probs(policy, seqs)
    old_logps = logps
    coef_1 = torch.exp(logps - old_logps)
    coef_2 = coef_1.clamp(1 - args.epsilon, 1 + args.epsilon)
    kl = torch.exp(ref_logps - logps) - (ref_logps - logps) - 1
    per_token_loss = -torch.min(coef_1 * advantages, coef_2 * advantages) + args.beta * kl
    loss = per_token_loss.mean(dim=1).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} reward {rewards.mean().item():.4f} kl {kl.mean().item():.5f}")

if args.out:
    torch.save({**{f"policy.{k}": v.detach().clone() for k, v in policy.state_dict().items()},
                **{f"ref.{k}": v.detach().clone() for k, v in ref_model.state_dict().items()}},
               args.out)
