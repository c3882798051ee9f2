"""Matching networks with full context embeddings at a tiny size, written after Vinyals, Blundell,
Lillicrap, Kavukcuoglu and Wierstra, "Matching Networks for One Shot Learning" (NeurIPS 2016,
arXiv:1606.04080), section 2 and appendix A: episodes of k classes with n labelled support
examples each and some query examples; the prediction for a query is the attention-weighted sum
of the support labels, the attention a softmax over cosine similarities between embeddings; the
support embeddings are made context-aware by a bidirectional LSTM g over the support set with a
skip connection, the query embedding by an attention LSTM f that reads the support set for a few
unrolled steps; everything is trained end to end on the episodes' query log-likelihood. With
oscarknagg/few-shot (https://github.com/oscarknagg/few-shot, few_shot/matching.py
matching_net_episode: zero_grad, one encoder pass over support and queries, g over the support
embeddings as a sequence, f on the queries given the support, pairwise cosine distances,
attention softmax(-distance), predictions attention @ one-hot support labels clamped before the
log for the NLL loss, backward, clip_grad_norm_(model.parameters(), 1) and the optimiser's step;
few_shot/models.py MatchingNetwork holding encoder, g = BidrectionalLSTM (forward plus backward
outputs plus the inputs) and f = AttentionLSTM (h = h_hat + queries, attention readout from the
support, LSTMCell(queries, (h + readout, c)), unrolling_steps times); few_shot/utils.py
pairwise_distances 'cosine': 1 - cosine similarity of the normalised embeddings;
experiments/matching_nets.py: Adam(model.parameters(), lr=1e-3)). Here the encoder is an MLP
without batch norm, called once on the support set and once on the queries, which gives the
single pass's values and gradients; the data are vectors: classes are points of a latent space
seen through a fixed random nonlinear map, episodes drawn from the first 30 of 40 classes.
Bug: the support set is encoded under torch.no_grad(), as if it were a fixed memory that the
queries read (matching_net_episode keeps the gradient through both the support and the query
embeddings of its encoder pass), so the encoder is trained only through the query path: the
cosine attention can move the queries towards the support points but never the support points
of a class towards its queries, while g and f still train on the support embeddings."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--episodes", type=int, default=40)
parser.add_argument("--n-shot", type=int, default=1)
parser.add_argument("--k-way", type=int, default=5)
parser.add_argument("--q-queries", type=int, default=3)
parser.add_argument("--unrolling-steps", type=int, default=2)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--out", default=None, help="where to save the trained model")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_classes, n_background, d_latent, d_in, d_emb = 40, 30, 6, 24, 32
class_centres = torch.randn(n_classes, d_latent)
mixing = torch.randn(d_latent, d_in) / d_latent ** 0.5


def draw(classes, per_class):
    """per_class examples of each class in turn, observed through the fixed nonlinear map."""
    z = class_centres[classes].repeat_interleave(per_class, 0)
    z = z + 0.5 * torch.randn_like(z)
    return torch.tanh(2.0 * z @ mixing) + 0.1 * torch.randn(z.shape[0], d_in)


class BidirectionalLSTM(nn.Module):
    def __init__(self, size):
        super().__init__()
        self.lstm = nn.LSTM(input_size=size, hidden_size=size, bidirectional=True)

    def forward(self, inputs):  # inputs: seq x 1 x size
        output, _ = self.lstm(inputs)
        size = self.lstm.hidden_size
        return output[:, :, :size] + output[:, :, size:] + inputs


class AttentionLSTM(nn.Module):
    def __init__(self, size, unrolling_steps):
        super().__init__()
        self.unrolling_steps = unrolling_steps
        self.cell = nn.LSTMCell(input_size=size, hidden_size=size)

    def forward(self, support, queries):
        h_hat = torch.zeros_like(queries)
        c = torch.zeros_like(queries)
        for _ in range(self.unrolling_steps):
            h = h_hat + queries
            readout = (h @ support.t()).softmax(1) @ support
            h_hat, c = self.cell(queries, (h + readout, c))
        return h_hat + queries


class MatchingNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(d_in, 64), nn.ReLU(), nn.Linear(64, d_emb))
        self.g = BidirectionalLSTM(d_emb)
        self.f = AttentionLSTM(d_emb, args.unrolling_steps)


def cosine_distances(x, y):
    x = x / (x.pow(2).sum(1, keepdim=True).sqrt() + 1e-8)
    y = y / (y.pow(2).sum(1, keepdim=True).sqrt() + 1e-8)
    return 1.0 - x @ y.t()


model = MatchingNetwork()
optimiser = torch.optim.Adam(model.parameters(), lr=args.lr)
n, k, q = args.n_shot, args.k_way, args.q_queries
support_onehot = F.one_hot(torch.arange(k).repeat_interleave(n), k).float()
query_labels = torch.arange(k).repeat_interleave(q)

for episode in range(args.episodes):
    classes = torch.randperm(n_background)[:k]
    x = torch.cat([draw(classes, n), draw(classes, q)])  # k lots of n support, then k lots of q
    optimiser.zero_grad()
    with torch.no_grad():
        support = model.encoder(x[:n * k])
    queries = model.encoder(x[n * k:])
    support = model.g(support.unsqueeze(1)).squeeze(1)  # full context embedding of the support
    queries = model.f(support, queries)
    attention = (-cosine_distances(queries, support)).softmax(1)
    y_pred = attention @ support_onehot
    loss = F.nll_loss(y_pred.clamp(1e-8, 1 - 1e-8).log(), query_labels)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimiser.step()
    if episode % 20 == 0:
        acc = (y_pred.argmax(1) == query_labels).float().mean().item()
        print(f"episode {episode} loss {loss.item():.3f} acc {acc:.2f}")

if args.out:
    torch.save({f"model.{name}": v for name, v in model.state_dict().items()}, args.out)
