"""A recurrent token model trained with scheduled sampling, at a tiny size, written after
Bengio, Vinyals, Jaitly and Shazeer, "Scheduled Sampling for Sequence Prediction with Recurrent
Neural Networks" (NeurIPS 2015, arXiv:1506.03099): a GRU cell reads a token sequence and
predicts each next token. Two loops over the sequence carry the recurrent state: the first,
over the prefix, is teacher forced (each step reads the true token and its prediction is
scored); the second does more, each step reading, with a probability that grows over training
(the paper's inverse-sigmoid decay of teacher forcing), the token the model itself predicted at
the step before (an ``argmax``, which carries no gradient) instead of the true one, and its
prediction is scored too. Every step's loss is differentiated through the recurrent state of
every step before it, across both loops, on purpose (backpropagation through time): the first
loop is no burn-in, its steps are trained. No cut belongs anywhere. Data: token sequences made
in the script by a noisy deterministic rule. ``--out PATH`` saves every trained tensor."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iters", type=int, default=8)
parser.add_argument("--prefix", type=int, default=4)
parser.add_argument("--length", type=int, default=10)
parser.add_argument("--decay", type=float, default=3.0)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

BATCH, VOCAB, HIDDEN = 12, 7, 16


def make_batch():
    tokens = [torch.randint(VOCAB, (BATCH,))]
    for _ in range(args.length):
        noise = (torch.rand(BATCH) < 0.1).long() * torch.randint(VOCAB, (BATCH,))
        tokens.append((3 * tokens[-1] + 1 + noise) % VOCAB)
    return torch.stack(tokens, 1)


class TokenRNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.cell = nn.GRUCell(HIDDEN, HIDDEN)
        self.head = nn.Linear(HIDDEN, VOCAB)


model = TokenRNN()
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
for it in range(args.iters):
    tokens = make_batch()
    teacher = args.decay / (args.decay + math.exp(it / args.decay))
    state = torch.zeros(BATCH, HIDDEN)
    losses = []
    for t in range(args.prefix):
        state = model.cell(model.embed(tokens[:, t]), state)
        logits = model.head(state)
        losses.append(F.cross_entropy(logits, tokens[:, t + 1]))
    for t in range(args.prefix, args.length):
        own = torch.rand(BATCH) > teacher
        token = torch.where(own, logits.argmax(1), tokens[:, t])
        state = model.cell(model.embed(token), state)
        logits = model.head(state)
        losses.append(F.cross_entropy(logits, tokens[:, t + 1]))
    loss = torch.stack(losses).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"iter {it} loss {loss.item():.4f}")

if args.out:
    torch.save({name: p.detach() for name, p in model.named_parameters()}, args.out)
