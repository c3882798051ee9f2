"""Identity preference optimisation (IPO) of a tiny autoregressive policy, written after Azar,
Rowland, Piot, Guo, Calandriello, Valko and Munos, "A General Theoretical Paradigm to Understand
Learning from Human Preferences" (AISTATS 2024, arXiv:2310.12036): from pairs of a preferred and
a dispreferred completion of the same prompt, the policy is trained against a frozen reference
model on the squared loss (h - 1/(2 tau))^2 of Eq. 17, h = log(pi(y_w|x) / pi_ref(y_w|x)) -
log(pi(y_l|x) / pi_ref(y_l|x)), which regresses the log-likelihood-ratio margin onto the fixed
target 1/(2 tau) instead of pushing it to infinity as DPO's logistic loss does. Two phases: a
short supervised fine-tuning (SFT) on the preferred completions, then IPO with the SFT policy's
frozen copy as the reference. With huggingface/trl (https://github.com/huggingface/trl,
trl/trainer/dpo_trainer.py DPOTrainer with loss_type="ipo": __init__ keeps ref_model as a
separate model and refuses `ref_model is model`; _compute_loss runs the policy on the
concatenated [chosen, rejected] batch with gradient, sums the per-token log-probabilities of the
completion tokens, runs the reference under torch.no_grad() on the same batch, takes
chosen_logratios = chosen_logps - ref_chosen_logps and rejected_logratios likewise, divides each
by its completion length for IPO ("average per token", as the IPO authors confirmed), and takes
per_sequence_loss = (ipo_delta - 1 / (2 * self.beta)) ** 2 with beta the paper's tau, averaged
over the batch; the Trainer then calls backward and the optimizer step). Here the completions
all have four tokens, the prompts are integers, the preference comes from a rule made in the
script (the completion that follows the prompt's pattern in more places wins), and the policy is
a small MLP over the prompt, the previous token and the position.
Bug: the reference model is bound to the policy itself, ref_model = policy, where a frozen
copy of the fine-tuned weights is meant (copy.deepcopy(policy); trl's DPOTrainer keeps ref_model
a separate model, never steps it, and raises an error when ref_model is model), so from the
second IPO step on the reference log-probabilities, computed under torch.no_grad(), are the
policy's own: the log-ratio margin h is zero at every step, the loss sits at (1/(2 tau))^2 and
its gradient, -(1/tau) times the gradient of the policy's own chosen-minus-rejected margin, pushes
that margin up at a constant rate with nothing pulling the policy back to the SFT model: IPO's
regularisation towards the reference, the point of the method, is gone."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--sft-steps", type=int, default=10)
parser.add_argument("--ipo-steps", type=int, default=40)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--tau", type=float, default=0.5, help="IPO regularisation (trl's beta)")
parser.add_argument("--out", default=None, help="where to save the policy and the reference")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_prompts, vocab, length, hidden = 8, 6, 4, 32
bos = vocab

# preference pairs: two noisy copies of the prompt's pattern (p + t) mod vocab; the completion
# that matches the pattern in more places is chosen (ties broken by the first)
n_pairs = 300
prompts_all = torch.randint(0, n_prompts, (n_pairs,))
pattern = (prompts_all.unsqueeze(1) + torch.arange(length)) % vocab


def noisy_copy(p_noise):
    noise = torch.randint(0, vocab, (n_pairs, length))
    return torch.where(torch.rand(n_pairs, length) < p_noise, noise, pattern)


first, second = noisy_copy(0.4), noisy_copy(0.7)
first_wins = ((first == pattern).sum(1) >= (second == pattern).sum(1)).unsqueeze(1)
chosen_all = torch.where(first_wins, first, second)
rejected_all = torch.where(first_wins, second, first)


class Policy(nn.Module):
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


def sequence_logps(model, prompts, tokens):
    """Summed log-probabilities of the completion tokens (B)."""
    logp = model(prompts, tokens).log_softmax(-1)
    return logp.gather(2, tokens.unsqueeze(2)).squeeze(2).sum(1)


policy = Policy()

# phase 1: supervised fine-tuning on the chosen completions
sft_optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
for step in range(args.sft_steps):
    idx = torch.randint(0, n_pairs, (32,))
    logits = policy(prompts_all[idx], chosen_all[idx])
    sft_loss = F.cross_entropy(logits.reshape(-1, vocab), chosen_all[idx].reshape(-1))
    sft_optimizer.zero_grad()
    sft_loss.backward()
    sft_optimizer.step()
    if step % 5 == 0:
        print(f"sft {step} loss {sft_loss.item():.3f}")

# phase 2: IPO against the frozen SFT policy
ref_model = policy
ipo_optimizer = torch.optim.Adam(policy.parameters(), lr=5e-3)
for step in range(args.ipo_steps):
    idx = torch.randint(0, n_pairs, (args.batch_size,))
    prompts = prompts_all[idx].repeat(2)
    both = torch.cat([chosen_all[idx], rejected_all[idx]])  # [chosen, rejected]
    policy_logps = sequence_logps(policy, prompts, both)
    with torch.no_grad():
        ref_logps = sequence_logps(ref_model, prompts, both)
    chosen_logps, rejected_logps = policy_logps.chunk(2)
    ref_chosen_logps, ref_rejected_logps = ref_logps.chunk(2)
    chosen_logratios = (chosen_logps - ref_chosen_logps) / length
    rejected_logratios = (rejected_logps - ref_rejected_logps) / length
    ipo_delta = chosen_logratios - rejected_logratios
    ipo_loss = ((ipo_delta - 1 / (2 * args.tau)) ** 2).mean()
    ipo_optimizer.zero_grad()
    ipo_loss.backward()
    ipo_optimizer.step()
    if step % 10 == 0:
        print(f"ipo {step} loss {ipo_loss.item():.4f} margin {ipo_delta.mean().item():.4f}")

if args.out:
    torch.save({"policy": policy.state_dict(), "ref_model": ref_model.state_dict()}, args.out)
