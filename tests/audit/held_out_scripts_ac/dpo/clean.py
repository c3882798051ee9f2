"""Direct Preference Optimization (DPO) of a tiny causal language model, after an SFT phase.

Paper: Rafael Rafailov, Archit Sharma, Eric Mitchell, Stefano Ermon, Christopher D. Manning and
Chelsea Finn, "Direct Preference Optimization: Your Language Model is Secretly a Reward Model",
arXiv:2305.18290, NeurIPS 2023.
Reference implementation: eric-mitchell/direct-preference-optimization, trainers.py (dpo_loss:
-logsigmoid(beta * ((pi_chosen - pi_rejected) - (ref_chosen - ref_rejected))) with the rewards
detached for logging; _get_batch_logps: labels shifted by one, prompt tokens masked with -100,
summed per-token log-probabilities; concatenated_inputs / BasicTrainer.concatenated_forward: the
chosen and rejected sequences run as one batch; BasicTrainer.get_batch_metrics: the reference
model's log-probabilities under torch.no_grad(), the SFT loss -logp(chosen); BasicTrainer.train:
one optimizer over policy.parameters() only, LambdaLR linear warm-up, gradient accumulation over
micro-batches with (loss / gradient_accumulation_steps).backward(), clip_gradient, step, scheduler
step, zero_grad after the step), train.py (main: the policy and the reference model loaded from
the same SFT archive, disable_dropout) and config/config.yaml (RMSprop, warmup_steps,
max_grad_norm 10, beta 0.1).

The synthetic preference data: a prompt of four tokens, a separator, and a four-token response;
the chosen response is the prompt sorted ascending, the rejected one the prompt sorted
descending. The model is a two-layer GPT-style decoder (token and position embeddings, causal
self-attention, MLP, pre-LayerNorm, linear head) without dropout. Phase 1 (SFT) trains the policy
on the chosen responses with its own RMSprop and warm-up. Phase 2 (DPO) takes the reference model
as a deep copy of the SFT policy, kept in eval mode and only ever run under torch.no_grad() (it is
in no optimizer), and trains the policy with a fresh RMSprop on the DPO loss over concatenated
chosen/rejected batches, two accumulated micro-batches per update, clipping at max_grad_norm.
As published: clean.
"""
import argparse
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--sft_steps", type=int, default=30)
parser.add_argument("--dpo_steps", type=int, default=30)
parser.add_argument("--batch_size", type=int, default=16)
parser.add_argument("--grad_accum", type=int, default=2)
parser.add_argument("--n_train", type=int, default=256)
parser.add_argument("--vocab", type=int, default=12)
parser.add_argument("--prompt_len", type=int, default=4)
parser.add_argument("--d_model", type=int, default=32)
parser.add_argument("--n_head", type=int, default=2)
parser.add_argument("--n_layer", type=int, default=2)
parser.add_argument("--sft_lr", type=float, default=1e-3)
parser.add_argument("--dpo_lr", type=float, default=5e-4)
parser.add_argument("--warmup", type=int, default=5)
parser.add_argument("--beta", type=float, default=0.1)
parser.add_argument("--max_grad_norm", type=float, default=10.0)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

SEP = 1
SEQ_LEN = 2 * args.prompt_len + 1


def make_pairs(n):
    prompts = torch.randint(2, args.vocab, (n, args.prompt_len))
    ascending = prompts.sort(dim=1).values
    descending = ascending.flip(1)
    sep = torch.full((n, 1), SEP)
    batch = {}
    for name, response in (("chosen", ascending), ("rejected", descending)):
        ids = torch.cat([prompts, sep, response], 1)
        labels = ids.clone()
        labels[:, :args.prompt_len + 1] = -100
        batch[f"{name}_input_ids"] = ids
        batch[f"{name}_labels"] = labels
    return batch


def slice_batch(batch, start, stop):
    return {k: v[start:stop] for k, v in batch.items()}


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_head, max_len):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(d_model, 3 * d_model)
        self.c_proj = nn.Linear(d_model, d_model)
        self.register_buffer("mask", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q = q.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        k = k.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        v = v.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        att = q @ k.transpose(-2, -1) / (k.shape[-1] ** 0.5)
        att = att.masked_fill(~self.mask[:t, :t], float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        return self.c_proj(y)


class Block(nn.Module):
    def __init__(self, d_model, n_head, max_len):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_head, max_len)
        self.ln_2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(),
                                 nn.Linear(4 * d_model, d_model))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab, d_model, n_head, n_layer, max_len):
        super().__init__()
        self.wte = nn.Embedding(vocab, d_model)
        self.wpe = nn.Embedding(max_len, d_model)
        self.h = nn.ModuleList([Block(d_model, n_head, max_len) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1])
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def get_batch_logps(logits, labels):
    labels = labels[:, 1:].clone()
    logits = logits[:, :-1, :]
    loss_mask = labels != -100
    labels[labels == -100] = 0
    per_token_logps = torch.gather(logits.log_softmax(-1), 2, labels.unsqueeze(2)).squeeze(2)
    return (per_token_logps * loss_mask).sum(-1)


def concatenated_forward(model, batch):
    ids = torch.cat([batch["chosen_input_ids"], batch["rejected_input_ids"]], 0)
    labels = torch.cat([batch["chosen_labels"], batch["rejected_labels"]], 0)
    all_logps = get_batch_logps(model(ids), labels)
    n = batch["chosen_input_ids"].shape[0]
    return all_logps[:n], all_logps[n:]


def dpo_loss(policy_chosen_logps, policy_rejected_logps, reference_chosen_logps,
             reference_rejected_logps, beta):
    pi_logratios = policy_chosen_logps - policy_rejected_logps
    ref_logratios = reference_chosen_logps - reference_rejected_logps
    logits = pi_logratios - ref_logratios
    losses = -F.logsigmoid(beta * logits)
    chosen_rewards = beta * (policy_chosen_logps - reference_chosen_logps).detach()
    rejected_rewards = beta * (policy_rejected_logps - reference_rejected_logps).detach()
    return losses, chosen_rewards, rejected_rewards


def get_batch_metrics(policy, reference_model, batch, loss_name):
    metrics = {}
    if loss_name == "dpo":
        policy_chosen_logps, policy_rejected_logps = concatenated_forward(policy, batch)
        with torch.no_grad():
            reference_chosen_logps, reference_rejected_logps = concatenated_forward(
                reference_model, batch)
        losses, chosen_rewards, rejected_rewards = dpo_loss(
            policy_chosen_logps, policy_rejected_logps, reference_chosen_logps,
            reference_rejected_logps, beta=args.beta)
        metrics["reward_acc"] = (chosen_rewards > rejected_rewards).float().mean().item()
        metrics["margin"] = (chosen_rewards - rejected_rewards).mean().item()
        policy_rejected_logps = policy_rejected_logps.detach()
        metrics["logps_rejected"] = policy_rejected_logps.mean().item()
    else:
        logits = policy(batch["chosen_input_ids"])
        policy_chosen_logps = get_batch_logps(logits, batch["chosen_labels"])
        losses = -policy_chosen_logps
    policy_chosen_logps = policy_chosen_logps.detach()
    metrics["logps_chosen"] = policy_chosen_logps.mean().item()
    return losses.mean(), metrics


train_data = make_pairs(args.n_train)
eval_data = make_pairs(128)
micro_size = args.batch_size // args.grad_accum


def get_batch(step):
    start = (step * args.batch_size) % args.n_train
    return slice_batch(train_data, start, start + args.batch_size)


policy = TinyGPT(args.vocab, args.d_model, args.n_head, args.n_layer, SEQ_LEN)

# Phase 1: supervised fine-tuning on the chosen responses.
sft_optimizer = torch.optim.RMSprop(policy.parameters(), lr=args.sft_lr)
sft_scheduler = torch.optim.lr_scheduler.LambdaLR(
    sft_optimizer, lr_lambda=lambda step: min(1.0, (step + 1) / (args.warmup + 1)))
for step in range(args.sft_steps):
    policy.train()
    batch = get_batch(step)
    for micro in range(args.grad_accum):
        microbatch = slice_batch(batch, micro * micro_size, (micro + 1) * micro_size)
        loss, metrics = get_batch_metrics(policy, None, microbatch, "sft")
        (loss / args.grad_accum).backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), args.max_grad_norm)
    sft_optimizer.step()
    sft_scheduler.step()
    sft_optimizer.zero_grad()
    if step % 10 == 0 or step == args.sft_steps - 1:
        print(f"sft step {step:3d} loss {loss.item():.4f} grad_norm {grad_norm.item():.3f}")

# Phase 2: DPO against a frozen copy of the SFT policy.
reference_model = copy.deepcopy(policy)
reference_model.eval()
optimizer = torch.optim.RMSprop(policy.parameters(), lr=args.dpo_lr)
scheduler = torch.optim.lr_scheduler.LambdaLR(
    optimizer, lr_lambda=lambda step: min(1.0, (step + 1) / (args.warmup + 1)))
for step in range(args.dpo_steps):
    policy.train()
    batch = get_batch(args.sft_steps + step)
    for micro in range(args.grad_accum):
        microbatch = slice_batch(batch, micro * micro_size, (micro + 1) * micro_size)
        loss, metrics = get_batch_metrics(policy, reference_model, microbatch, "dpo")
        (loss / args.grad_accum).backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), args.max_grad_norm)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()
    if step % 10 == 0 or step == args.dpo_steps - 1:
        print(f"dpo step {step:3d} loss {loss.item():.4f} acc {metrics['reward_acc']:.2f} "
              f"margin {metrics['margin']:.3f} logp_rej {metrics['logps_rejected']:.2f}")

policy.eval()
with torch.no_grad():
    eval_loss, eval_metrics = get_batch_metrics(policy, reference_model, eval_data, "dpo")
print(f"eval dpo loss {eval_loss.item():.4f} reward acc {eval_metrics['reward_acc']:.2f}")

if args.out:
    torch.save({"policy": policy.state_dict(),
                "reference_model": reference_model.state_dict()}, args.out)
