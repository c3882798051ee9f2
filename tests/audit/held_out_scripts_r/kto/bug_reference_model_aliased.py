"""Kahneman-Tversky Optimization (KTO) of a tiny autoregressive policy, written after Ethayarajh,
Xu, Muennighoff, Jurafsky and Kiela, "KTO: Model Alignment as Prospect Theory-Guided
Optimization" (ICML 2024, arXiv:2402.01306): from completions labelled only desirable or
undesirable, the policy is trained against a frozen reference model (the supervised fine-tuned
one) on the value v = lambda_D * sigmoid(beta * (r - z_ref)) for desirable and lambda_U *
sigmoid(beta * (z_ref - r)) for undesirable completions, r = log pi(y|x) - log pi_ref(y|x) the
implied reward and z_ref a batch estimate of KL(pi || pi_ref), taken on mismatched pairs (a
prompt with another example's completion), that serves as the reference point and is not
differentiated. Two phases: supervised fine-tuning on the desirable completions, then KTO. With
huggingface/trl (https://github.com/huggingface/trl, trl/trainer/kto_trainer.py KTOTrainer:
forward computes the sequence log-probabilities of the completions and, under torch.no_grad(),
of the KL completions (each prompt paired with a different example's completion);
get_batch_loss_metrics computes all the reference model's log-probabilities under
torch.no_grad() from ref_model, a separate copy that is never stepped; kto_loss takes KL =
(policy_KL_logps - reference_KL_logps).mean().detach(), gathered and clamped at zero, and the
losses 1 - sigmoid(beta * (chosen_logratios - KL)) and 1 - sigmoid(beta * (KL -
rejected_logratios)) weighted by desirable_weight and undesirable_weight, averaged over the
batch). Here the completions and the KL completions go through the policy in one batched pass
and the KL estimate is detached after it, which gives the same values and gradients. The
prompts are integers, the completions four tokens, the labels come from a rule made in the
script, and the policy is a small MLP over the prompt, the previous token and the position.
Bug: the reference model is bound to the policy itself, ref_model = policy, where a frozen copy of
the fine-tuned weights is meant (copy.deepcopy(policy); trl's KTOTrainer takes ref_model as a
separate model, or the policy with its adapters disabled, and never steps it), so from the
second KTO step on the reference log-probabilities, computed under torch.no_grad(), are the
policy's own: the implied rewards r = log pi - log pi_ref and the KL reference point are zero at
every step, the losses sit at 1 - sigmoid(0) and only push desirable log-probabilities up and
undesirable ones down, with nothing holding the policy near its fine-tuned start."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--sft-steps", type=int, default=5)
parser.add_argument("--kto-steps", type=int, default=40)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--beta", type=float, default=0.1)
parser.add_argument("--desirable-weight", type=float, default=1.0)
parser.add_argument("--undesirable-weight", type=float, default=1.0)
parser.add_argument("--out", default=None, help="where to save the policy and the reference")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_prompts, vocab, length, hidden = 10, 5, 4, 32
bos = vocab

# labelled completions: three quarters follow the pattern (p mod 2 + 2t) mod vocab of the prompt's
# family with noise, a quarter are uniform; a completion is desirable when at least two of its
# tokens follow the pattern
n_data = 400
prompts_all = torch.randint(0, n_prompts, (n_data,))
pattern = (prompts_all.unsqueeze(1) % 2 + 2 * torch.arange(length)) % vocab
noisy = torch.where(torch.rand(n_data, length) < 0.5,
                    torch.randint(0, vocab, (n_data, length)), pattern)
uniform = torch.randint(0, vocab, (n_data, length))
completions_all = torch.where(torch.arange(n_data).unsqueeze(1) < 3 * n_data // 4, noisy, uniform)
labels_all = (completions_all == pattern).sum(1) >= 2
desirable_idx = labels_all.nonzero().squeeze(1)


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


def sequence_logp(model, prompts, tokens):
    logp = model(prompts, tokens).log_softmax(-1)
    return logp.gather(2, tokens.unsqueeze(2)).squeeze(2).sum(1)


policy = Policy()

# phase 1: a short supervised fine-tuning on the desirable completions
sft_optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
for step in range(args.sft_steps):
    idx = desirable_idx[torch.randint(0, len(desirable_idx), (32,))]
    logits = policy(prompts_all[idx], completions_all[idx])
    sft_loss = F.cross_entropy(logits.reshape(-1, vocab), completions_all[idx].reshape(-1))
    sft_optimizer.zero_grad()
    sft_loss.backward()
    sft_optimizer.step()
    if step % 2 == 0:
        print(f"sft {step} loss {sft_loss.item():.3f}")

# phase 2: KTO against the frozen SFT policy
ref_model = policy
kto_optimizer = torch.optim.Adam(policy.parameters(), lr=5e-3)
for step in range(args.kto_steps):
    idx = torch.randint(0, n_data, (args.batch_size,))
    prompts, completions, labels = prompts_all[idx], completions_all[idx], labels_all[idx]
    kl_completions = completions.roll(1, 0)  # each prompt with another example's completion
    both = torch.cat([completions, kl_completions])
    with torch.no_grad():
        ref_both = sequence_logp(ref_model, prompts.repeat(2), both)
    policy_both = sequence_logp(policy, prompts.repeat(2), both)
    policy_logps, policy_kl_logps = policy_both.split(args.batch_size)
    ref_logps, ref_kl_logps = ref_both.split(args.batch_size)
    kl = (policy_kl_logps - ref_kl_logps).mean().detach().clamp(min=0)
    logratios = policy_logps - ref_logps
    desirable_losses = 1 - torch.sigmoid(args.beta * (logratios - kl))
    undesirable_losses = 1 - torch.sigmoid(args.beta * (kl - logratios))
    losses = torch.where(labels, args.desirable_weight * desirable_losses,
                         args.undesirable_weight * undesirable_losses)
    kto_loss = losses.mean()
    kto_optimizer.zero_grad()
    kto_loss.backward()
    kto_optimizer.step()
    if step % 10 == 0:
        print(f"kto {step} loss {kto_loss.item():.4f} kl {kl.item():.4f}")

if args.out:
    torch.save({"policy": policy.state_dict(), "ref_model": ref_model.state_dict()}, args.out)
