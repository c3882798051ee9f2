"""ULMFiT's gradual unfreezing of a text classifier, at a tiny size, written after Howard and
Ruder, "Universal Language Model Fine-tuning for Text Classification" (ACL 2018,
arXiv:1801.06146) and fastai/fastai (``Learner.freeze_to``, which turns ``requires_grad`` off
for the layer groups below a cut and on for the rest): an embedding, an LSTM and a classifier
over its concat pooling, three layer groups in one Adam optimizer with discriminative learning
rates; the top group trains from the first epoch and one more group is meant to be unfrozen
each epoch: before each batch a group is frozen (``requires_grad_(False)``) while its depth is
below the cut and unfrozen (``requires_grad_(True)``) after. BUG INJECTED: the epochs done are
reckoned from ``it``, the index of the batch within the epoch, which starts again at 0 each
epoch, not from the run's ``iteration`` counter: ``it // iters_per_epoch`` is 0 at every
iteration, the cut never falls, and the embedding and the LSTM never train, though the
optimizer holds them and the loss gives them gradient. The fix is the condition's line. Token
sequences and labels made in the script. ``--out PATH`` saves the model's state_dict after the
run, ``--init-out PATH`` before it."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--batch-size", type=int, default=12)
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
parser.add_argument("--init-out", default=None, help="where to save the tensors before training")
args = parser.parse_args()
torch.manual_seed(args.seed)

vocab, seq_len, emb_dim, hidden = 20, 10, 16, 24
tokens = torch.randint(0, vocab, (36, seq_len))
labels = ((tokens < vocab // 2).float().mean(1) > 0.5).long()


class TextClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(vocab, emb_dim)
        self.rnn = nn.LSTM(emb_dim, hidden, batch_first=True)
        self.head = nn.Linear(3 * hidden, 2)

    def forward(self, x):
        out, _ = self.rnn(self.embedding(x))
        pooled = torch.cat([out[:, -1], out.max(1).values, out.mean(1)], dim=1)
        return self.head(pooled)


model = TextClassifier()
groups = [model.embedding, model.rnn, model.head]
optimizer = torch.optim.Adam(
    [{"params": group.parameters(), "lr": args.lr / 2.6 ** (len(groups) - 1 - depth)}
     for depth, group in enumerate(groups)], betas=(0.8, 0.99))
if args.init_out:
    torch.save(model.state_dict(), args.init_out)

iters_per_epoch = len(tokens) // args.batch_size
for epoch in range(args.epochs):
    order = torch.randperm(len(tokens))
    for it in range(iters_per_epoch):
        iteration = epoch * iters_per_epoch + it
        # gradual unfreezing: the cut falls by one layer group each epoch of the run
        for depth, group in enumerate(groups):
            if depth < len(groups) - 1 - it // iters_per_epoch:
                group.requires_grad_(False)
            else:
                group.requires_grad_(True)
        idx = order[it * args.batch_size:(it + 1) * args.batch_size]
        loss = F.cross_entropy(model(tokens[idx]), labels[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"epoch {epoch} iteration {iteration} loss {loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
