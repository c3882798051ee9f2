"""A character-level minGRU language model at a tiny size, written after Feng, Tung, Ahmed,
Bengio and Hajimirsadeghi, "Were RNNs All We Needed?" (arXiv:2410.01201), the minGRU of its
section 3.1 (``z_t = sigmoid(Linear_z(x_t))``, ``h~_t = Linear_h(x_t)``,
``h_t = (1 - z_t) * h_{t-1} + z_t * h~_t``: the gates read only the input), run sequentially and
trained with truncated backpropagation through time over one long character stream: the hidden
state is carried from one window of ``--bptt`` characters to the next and cut from its history
between them, as char-rnn training loops do. One-hot characters in, a linear read-out over the
vocabulary, gradient clipping and Adam. The stream (a repeating phrase with typos) is made in the
script. Injected bug: the cut between windows left out (no ``hidden = hidden.detach()``), so each
window's graph reaches back through every earlier window; ``backward(retain_graph=True)`` lets the
run go on, and every window trains the earlier windows' gates and candidates as well."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--bptt", type=int, default=12)
parser.add_argument("--batch-size", type=int, default=4)
parser.add_argument("--hidden", type=int, default=32)
parser.add_argument("--windows", type=int, default=16)
parser.add_argument("--clip", type=float, default=1.0)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

phrase = "the quick brown fox jumps over the lazy dog. "
vocab = sorted(set(phrase))
length = args.bptt * args.windows + 1
text = torch.tensor([vocab.index(c) for c in phrase * (length * args.batch_size // len(phrase) + 1)])
text = text[: length * args.batch_size]
typos = torch.rand(text.shape) < 0.05
text[typos] = torch.randint(0, len(vocab), (int(typos.sum()),))
stream = text.view(args.batch_size, length).t()  # (time, batch)


class MinGRU(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.linear_z = nn.Linear(input_size, hidden_size)
        self.linear_h = nn.Linear(input_size, hidden_size)

    def forward(self, x, h):
        outputs = []
        for x_t in x:
            z = torch.sigmoid(self.linear_z(x_t))
            h = (1 - z) * h + z * self.linear_h(x_t)
            outputs.append(h)
        return torch.stack(outputs), h


class CharModel(nn.Module):
    def __init__(self, vocab_size, hidden_size):
        super().__init__()
        self.rnn = MinGRU(vocab_size, hidden_size)
        self.decoder = nn.Linear(hidden_size, vocab_size)

    def forward(self, chars, h):
        output, h = self.rnn(F.one_hot(chars, len(vocab)).float(), h)
        return self.decoder(output), h


model = CharModel(len(vocab), args.hidden)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
model.train()
hidden = torch.zeros(args.batch_size, args.hidden)
for window, i in enumerate(range(0, length - 1, args.bptt)):
    inputs, targets = stream[i:i + args.bptt], stream[i + 1:i + 1 + args.bptt]
    logits, hidden = model(inputs, hidden)
    loss = F.cross_entropy(logits.reshape(-1, len(vocab)), targets.reshape(-1))
    optimizer.zero_grad()
    loss.backward(retain_graph=True)
    torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
    optimizer.step()
    print(f"window {window} loss {loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
