"""A character-level GPT trained with gradient accumulation, at a tiny size, written after
Karpathy's nanoGPT (karpathy/nanoGPT, train.py, the training loop over ``micro_step`` in
``range(gradient_accumulation_steps)``, and model.py, ``GPT``): each optimizer step sums the
gradients of ``--gradient-accumulation-steps`` micro-batches (4 at the defaults), the loss of each
scaled by their number, the next batch fetched while the current one is in flight, the gradient
clipped before the step; AdamW with weight decay on the matrices only, a linear warm-up then a
cosine decay of the learning rate, ``iter_num > max_iters`` ending the run (9 steps at the
defaults). nanoGPT clears the gradient right after the step; here the clear opens each window,
under ``if micro_step == 0``, before the first micro-batch's forward pass, which is the same
point of the run. One transformer block, no dropout, no tied head. Tokens made in the script (a
noisy repeating pattern). As published: clean. ``--out PATH`` saves the model's state_dict after
the run."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--max-iters", type=int, default=8)
parser.add_argument("--gradient-accumulation-steps", type=int, default=4)
parser.add_argument("--batch-size", type=int, default=4)
parser.add_argument("--block-size", type=int, default=8)
parser.add_argument("--learning-rate", type=float, default=3e-3)
parser.add_argument("--warmup-iters", type=int, default=2)
parser.add_argument("--min-lr", type=float, default=3e-4)
parser.add_argument("--weight-decay", type=float, default=0.1)
parser.add_argument("--grad-clip", type=float, default=1.0)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

vocab_size, n_embd, n_head = 12, 16, 2
pattern = torch.randint(0, vocab_size, (7,))
data = pattern.repeat(40)
noise = torch.rand(len(data)) < 0.1
data[noise] = torch.randint(0, vocab_size, (int(noise.sum()),))


def get_batch():
    ix = torch.randint(len(data) - args.block_size, (args.batch_size,))
    x = torch.stack([data[i:i + args.block_size] for i in ix])
    y = torch.stack([data[i + 1:i + 1 + args.block_size] for i in ix])
    return x, y


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(n_embd, dim=2)
        q = q.view(b, t, n_head, c // n_head).transpose(1, 2)
        k = k.view(b, t, n_head, c // n_head).transpose(1, 2)
        v = v.view(b, t, n_head, c // n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention()
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(),
                                 nn.Linear(4 * n_embd, n_embd))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab_size, n_embd),
            wpe=nn.Embedding(args.block_size, n_embd),
            h=nn.ModuleList([Block()]),
            ln_f=nn.LayerNorm(n_embd),
        ))
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)

    def forward(self, idx, targets):
        pos = torch.arange(idx.shape[1])
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


model = GPT()
decay = [p for p in model.parameters() if p.dim() >= 2]
no_decay = [p for p in model.parameters() if p.dim() < 2]
optimizer = torch.optim.AdamW([
    {"params": decay, "weight_decay": args.weight_decay},
    {"params": no_decay, "weight_decay": 0.0},
], lr=args.learning_rate, betas=(0.9, 0.95))


def get_lr(it):
    if it < args.warmup_iters:
        return args.learning_rate * (it + 1) / (args.warmup_iters + 1)
    ratio = (it - args.warmup_iters) / max(1, args.max_iters - args.warmup_iters)
    coeff = 0.5 * (1.0 + math.cos(math.pi * min(ratio, 1.0)))
    return args.min_lr + coeff * (args.learning_rate - args.min_lr)


X, Y = get_batch()
iter_num = 0
while True:
    lr = get_lr(iter_num)
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr
    for micro_step in range(args.gradient_accumulation_steps):
        if micro_step == 0:
            optimizer.zero_grad(set_to_none=True)
        logits, loss = model(X, Y)
        loss = loss / args.gradient_accumulation_steps
        X, Y = get_batch()
        loss.backward()
    if args.grad_clip != 0.0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
    optimizer.step()
    lossf = loss.item() * args.gradient_accumulation_steps
    print(f"iter {iter_num}: loss {lossf:.4f}, lr {lr:.5f}")
    iter_num += 1
    if iter_num > args.max_iters:
        break

if args.out:
    torch.save(model.state_dict(), args.out)
