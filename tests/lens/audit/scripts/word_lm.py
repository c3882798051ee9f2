"""An LSTM word language model at a tiny size, written after pytorch/examples
word_language_model/main.py (https://github.com/pytorch/examples/blob/
cd01f93000a6679e768700dd29e417a1e5fd10e5/word_language_model/main.py): truncated BPTT over a
token stream, the hidden state carried from batch to batch and cut by ``repackage_hidden``,
gradient clipping, plain SGD written as ``p.data.add_`` there (torch.optim.SGD here). As
published: clean."""

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--ntokens", type=int, default=50)
parser.add_argument("--emsize", type=int, default=16)
parser.add_argument("--nhid", type=int, default=16)
parser.add_argument("--bptt", type=int, default=5)
parser.add_argument("--batch-size", type=int, default=4)
parser.add_argument("--batches", type=int, default=6)
parser.add_argument("--lr", type=float, default=1.0)
parser.add_argument("--clip", type=float, default=0.25)
parser.add_argument("--seed", type=int, default=1111)
args = parser.parse_args()
torch.manual_seed(args.seed)


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid):
        super().__init__()
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid)
        self.decoder = nn.Linear(nhid, ntoken)

    def forward(self, input, hidden):
        output, hidden = self.rnn(self.encoder(input), hidden)
        return self.decoder(output).view(-1, self.decoder.out_features), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(1, bsz, self.rnn.hidden_size),
                weight.new_zeros(1, bsz, self.rnn.hidden_size))


def repackage_hidden(h):
    """Wraps hidden states in new Tensors, to detach them from their history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


stream = torch.randint(0, args.ntokens, (args.bptt * args.batches + 1, args.batch_size))
model = RNNModel(args.ntokens, args.emsize, args.nhid)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
model.train()
hidden = model.init_hidden(args.batch_size)
for batch, i in enumerate(range(0, stream.size(0) - 1, args.bptt)):
    data, targets = stream[i:i + args.bptt], stream[i + 1:i + 1 + args.bptt].reshape(-1)
    hidden = repackage_hidden(hidden)
    model.zero_grad()
    output, hidden = model(data, hidden)
    loss = criterion(output, targets)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
    optimizer.step()
    print(f"| batch {batch} | loss {loss.item():5.2f}")
