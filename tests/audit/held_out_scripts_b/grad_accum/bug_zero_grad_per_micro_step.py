"""Gradient accumulation with loss scaling at a tiny size, written after the training loop of
karpathy/nanoGPT (https://github.com/karpathy/nanoGPT/blob/master/train.py):
``gradient_accumulation_steps`` micro-batches per update, each loss divided by their number and
``scaler.scale(loss).backward()``, then ``scaler.unscale_``, ``clip_grad_norm_``, ``scaler.step``,
``scaler.update`` and ``optimizer.zero_grad(set_to_none=True)`` once per update.
``torch.amp.GradScaler("cpu")`` scales the float32 loss on the CPU. The model is a tiny MLP
language model after Bengio et al., "A Neural Probabilistic Language Model" (JMLR 2003): the
embeddings of a context of four characters predict the next. The text is made in the script from a
few repeated words. Injected bug: ``optimizer.zero_grad(set_to_none=True)`` is moved into the
micro-step loop, before each backward, so each update uses the last micro-batch's gradient only."""

import argparse
import random

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=1337)
parser.add_argument("--max-iters", type=int, default=12)
parser.add_argument("--gradient-accumulation-steps", type=int, default=4)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--block-size", type=int, default=4)
parser.add_argument("--grad-clip", type=float, default=1.0)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
random.seed(args.seed)
torch.manual_seed(args.seed)

words = ["gradient", "stop", "flow", "detach", "graph", "leaf"]
text = " ".join(random.choice(words) for _ in range(400))
chars = sorted(set(text))
stoi = {ch: i for i, ch in enumerate(chars)}
data = torch.tensor([stoi[ch] for ch in text])


def get_batch():
    ix = torch.randint(len(data) - args.block_size, (args.batch_size,))
    x = torch.stack([data[i:i + args.block_size] for i in ix])
    return x, data[ix + args.block_size]


class MLPLanguageModel(nn.Module):
    def __init__(self, vocab_size, n_embd=8, n_hidden=32):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.mlp = nn.Sequential(nn.Linear(args.block_size * n_embd, n_hidden), nn.Tanh(),
                                 nn.Linear(n_hidden, vocab_size))

    def forward(self, idx, targets):
        logits = self.mlp(self.wte(idx).flatten(1))
        return logits, F.cross_entropy(logits, targets)


model = MLPLanguageModel(len(chars))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1)
scaler = torch.amp.GradScaler("cpu")
X, Y = get_batch()
for iter_num in range(args.max_iters):
    for _micro_step in range(args.gradient_accumulation_steps):
        logits, loss = model(X, Y)
        loss = loss / args.gradient_accumulation_steps
        X, Y = get_batch()
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
    scaler.step(optimizer)
    scaler.update()
    if iter_num % 4 == 0:
        print(f"iter {iter_num}: loss {loss.item() * args.gradient_accumulation_steps:.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
