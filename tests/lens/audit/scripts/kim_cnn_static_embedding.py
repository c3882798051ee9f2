"""A sentence CNN over fixed pretrained word vectors (CNN-static), at a tiny size, written after
Kim, "Convolutional Neural Networks for Sentence Classification" (EMNLP 2014, arXiv:1408.5882)
and yoonkim/CNN_sentence (conv_net_sentence.py, ``train_conv_net``: the word vectors are added
to the updated parameters only ``if non_static``): convolutions of widths 3, 4 and 5 over the
word vectors, max-over-time pooling, dropout and a softmax layer. In the static model, the
default here, the embedding is kept fixed ON PURPOSE for the whole run by leaving it out of the
optimizer: it still requires gradient and receives one, and the optimizer never steps it.
``--non-static`` adds it, as Kim's flag does. The pretrained word vectors are stood in for by
random ones. Token sequences and labels made in the script. Adadelta, as in the paper. As
published: clean. ``--out PATH`` saves the model's state_dict after the run, ``--init-out
PATH`` before it."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--batch-size", type=int, default=12)
parser.add_argument("--non-static", action="store_true")
parser.add_argument("--out", default=None, help="where to save the trained tensors")
parser.add_argument("--init-out", default=None, help="where to save the tensors before training")
args = parser.parse_args()
torch.manual_seed(args.seed)

vocab, seq_len, emb_dim, n_filters = 30, 12, 16, 8
tokens = torch.randint(0, vocab, (48, seq_len))
labels = ((tokens < vocab // 3).float().sum(1) > seq_len / 3).long()


class SentenceCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(vocab, emb_dim)
        self.convs = nn.ModuleList([nn.Conv1d(emb_dim, n_filters, h) for h in (3, 4, 5)])
        self.dropout = nn.Dropout(0.5)
        self.fc = nn.Linear(3 * n_filters, 2)

    def forward(self, x):
        e = self.embedding(x).transpose(1, 2)
        pooled = [F.relu(conv(e)).max(dim=2).values for conv in self.convs]
        return self.fc(self.dropout(torch.cat(pooled, dim=1)))


model = SentenceCNN()
params = [*model.fc.parameters(), *model.convs.parameters()]
if args.non_static:
    # if word vectors are allowed to change, add them as model parameters
    params += [*model.embedding.parameters()]
optimizer = torch.optim.Adadelta(params, lr=1.0, rho=0.95, eps=1e-6)
if args.init_out:
    torch.save(model.state_dict(), args.init_out)

iters_per_epoch = len(tokens) // args.batch_size
for epoch in range(args.epochs):
    model.train()
    order = torch.randperm(len(tokens))
    for i in range(iters_per_epoch):
        idx = order[i * args.batch_size:(i + 1) * args.batch_size]
        loss = F.cross_entropy(model(tokens[idx]), labels[idx])
        model.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"epoch {epoch} iteration {epoch * iters_per_epoch + i} loss {loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
