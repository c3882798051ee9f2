"""A graph convolutional network at a tiny size, written after Kipf and Welling, "Semi-Supervised
Classification with Graph Convolutional Networks" (arXiv:1609.02907) and tkipf/pygcn
(https://github.com/tkipf/pygcn/blob/master/pygcn/layers.py, ``GraphConvolution`` with its
``weight`` and ``bias`` as ``Parameter`` and ``reset_parameters`` drawing them from
``uniform(-stdv, stdv)``; pygcn/train.py: full-batch Adam with weight decay, ``nll_loss`` on the
labelled nodes). The graph, two communities of a stochastic block model with noisy features, and
its symmetrically normalised adjacency are made in the script. Injected bug: each layer's bias is
made a plain tensor that requires grad, ``torch.empty(out_features, requires_grad=True)``, instead
of a ``Parameter``: it is not in ``model.parameters()``, so the loss reaches it and no optimizer
steps it."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.parameter import Parameter

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=42)
parser.add_argument("--epochs", type=int, default=40)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--weight-decay", type=float, default=5e-4)
parser.add_argument("--hidden", type=int, default=16)
parser.add_argument("--dropout", type=float, default=0.5)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n, n_feat = 40, 10
labels = torch.arange(n) % 2
p_edge = torch.where(labels[:, None] == labels[None, :], 0.3, 0.03)
upper = torch.triu((torch.rand(n, n) < p_edge).float(), diagonal=1)
adj = upper + upper.t() + torch.eye(n)
d_inv_sqrt = adj.sum(1).pow(-0.5)
adj = d_inv_sqrt[:, None] * adj * d_inv_sqrt[None, :]
features = torch.randn(n, n_feat) + labels[:, None].float()
idx_train = torch.arange(0, 20)


class GraphConvolution(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = Parameter(torch.empty(in_features, out_features))
        self.bias = torch.empty(out_features, requires_grad=True)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.weight.size(1))
        self.weight.data.uniform_(-stdv, stdv)
        self.bias.data.uniform_(-stdv, stdv)

    def forward(self, input, adj):
        return adj @ (input @ self.weight) + self.bias


class GCN(nn.Module):
    def __init__(self, nfeat, nhid, nclass, dropout):
        super().__init__()
        self.gc1 = GraphConvolution(nfeat, nhid)
        self.gc2 = GraphConvolution(nhid, nclass)
        self.dropout = dropout

    def forward(self, x, adj):
        x = F.relu(self.gc1(x, adj))
        x = F.dropout(x, self.dropout, training=self.training)
        return F.log_softmax(self.gc2(x, adj), dim=1)


model = GCN(n_feat, args.hidden, 2, args.dropout)
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
for epoch in range(args.epochs):
    model.train()
    optimizer.zero_grad()
    output = model(features, adj)
    loss_train = F.nll_loss(output[idx_train], labels[idx_train])
    loss_train.backward()
    optimizer.step()
    if epoch % 10 == 0:
        print(f"epoch {epoch} loss {loss_train.item():.4f}")

model.eval()
with torch.no_grad():
    acc = (model(features, adj).argmax(1)[20:] == labels[20:]).float().mean().item()
print(f"test accuracy {acc:.3f}")
if args.out:
    torch.save({f"{name}.{key}": getattr(layer, key).detach()
                for name, layer in (("gc1", model.gc1), ("gc2", model.gc2))
                for key in ("weight", "bias")}, args.out)
