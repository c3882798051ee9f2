"""A GPT language model at a tiny size, written after Radford et al., "Language Models are
Unsupervised Multitask Learners" (2019) as karpathy/nanoGPT writes it
(https://github.com/karpathy/nanoGPT/blob/master/model.py: pre-norm ``Block`` with causal
self-attention and an MLP, ``ln_f``, the ``lm_head`` tied to the token embedding; and
``configure_optimizers``: AdamW over two parameter groups, the tensors of two or more
dimensions with weight decay, the others (biases, LayerNorm weights) with ``weight_decay``
0.0). The optimizer's groups are built at the top level, as the script's training loop uses
them. Data: a repeating sequence of tokens with noise, made in the script. As published:
clean."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--iters", type=int, default=12)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(0)

vocab_size, block_size, n_embd, n_head = 11, 8, 16, 2
stream = torch.arange(400) % 7
stream = torch.where(torch.rand(400) < 0.1, torch.randint(0, vocab_size, (400,)), stream)


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size))
                             .view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(n_embd, dim=2)
        q, k, v = (t.view(B, T, n_head, C // n_head).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = F.softmax(att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf")), dim=-1)
        return self.c_proj((att @ v).transpose(1, 2).contiguous().view(B, T, C))


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
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.h = nn.ModuleList([Block()])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.wte.weight = self.lm_head.weight

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.size(1)))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


model = GPT()
weight_decay, learning_rate, betas = 0.1, 3e-3, (0.9, 0.95)
param_dict = {pn: p for pn, p in model.named_parameters() if p.requires_grad}
decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
optim_groups = [{"params": decay_params, "weight_decay": weight_decay},
                {"params": nodecay_params, "weight_decay": 0.0}]
optimizer = torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas)
for it in range(args.iters):
    ix = torch.randint(len(stream) - block_size - 1, (8,))
    x = torch.stack([stream[i:i + block_size] for i in ix])
    y = torch.stack([stream[i + 1:i + 1 + block_size] for i in ix])
    loss = model(x, y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    if it % 4 == 0:
        print(f"iter {it} loss {loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
