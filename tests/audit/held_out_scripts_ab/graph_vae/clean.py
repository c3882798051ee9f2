"""Variational graph auto-encoder (VGAE) trained for edge reconstruction on a synthetic graph.

Paper: Thomas N. Kipf and Max Welling, "Variational Graph Auto-Encoders", NIPS 2016 Workshop on
Bayesian Deep Learning, arXiv:1611.07308 (2016).
Reference implementation: tkipf/gae, gae/model.py (GCNModelVAE: a shared ReLU graph convolution,
then two linear graph convolutions for z_mean and z_log_std, z = z_mean + noise * exp(z_log_std),
InnerProductDecoder logits z z^T), gae/layers.py (GraphConvolution: adj @ (x @ W) with Glorot
weights and no bias), gae/optimizer.py (OptimizerVAE: norm * mean weighted cross-entropy with
logits and pos_weight, minus the KL term (0.5 / N) * mean_i sum_j (1 + 2 log_std - mu^2 -
std^2)), gae/preprocessing.py (preprocess_graph: D^-1/2 (A + I) D^-1/2; mask_test_edges) and
gae/train.py (labels A_train + I, pos_weight and norm from A_train, one Adam step per epoch, ROC
AUC of held-out edges from z_mean); the PyTorch port DaehanKim/vgae_pytorch, model.py (VGAE,
GraphConvSparse, glorot_init, dot_product_decode) and train.py (zero_grad, loss, backward, step).

The graph is a four-block stochastic block model on 60 nodes; 10% of its edges (and as many
non-edges) are held out for testing and 5% for validation, and the encoder sees only the
training graph. The nodes are featureless (identity features, the reference's --features 0).
The encoder is a 32-unit ReLU graph convolution followed by two 16-unit graph convolutions for
the mean and the log standard deviation of q(z | X, A); z is drawn with the reparameterization
trick (Normal.rsample), so the reconstruction loss reaches the encoder through z. One Adam
optimizer over all three weight matrices; each epoch runs zero_grad, forward, the weighted
reconstruction loss minus the KL term, backward and the step; the AUC is computed from z_mean
under torch.no_grad().
As published: clean.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--epochs", type=int, default=60)
parser.add_argument("--num_nodes", type=int, default=60)
parser.add_argument("--blocks", type=int, default=4)
parser.add_argument("--p_in", type=float, default=0.5)
parser.add_argument("--p_out", type=float, default=0.02)
parser.add_argument("--hidden1", type=int, default=32)
parser.add_argument("--hidden2", type=int, default=16)
parser.add_argument("--lr", type=float, default=0.01)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)


def sbm_graph(n, blocks, p_in, p_out):
    labels = torch.arange(n) * blocks // n
    same = labels[:, None] == labels[None, :]
    probs = torch.where(same, torch.tensor(p_in), torch.tensor(p_out))
    upper = torch.triu((torch.rand(n, n) < probs).float(), diagonal=1)
    return upper + upper.t()


def mask_test_edges(adj, val_frac=0.05, test_frac=0.10):
    n = adj.shape[0]
    iu = torch.triu_indices(n, n, offset=1)
    is_edge = adj[iu[0], iu[1]] > 0
    edges = iu[:, is_edge].t()
    non_edges = iu[:, ~is_edge].t()
    edges = edges[torch.randperm(edges.shape[0])]
    non_edges = non_edges[torch.randperm(non_edges.shape[0])]
    n_test = int(edges.shape[0] * test_frac)
    n_val = int(edges.shape[0] * val_frac)
    test_edges, val_edges = edges[:n_test], edges[n_test:n_test + n_val]
    train_edges = edges[n_test + n_val:]
    test_false, val_false = non_edges[:n_test], non_edges[n_test:n_test + n_val]
    adj_train = torch.zeros(n, n)
    adj_train[train_edges[:, 0], train_edges[:, 1]] = 1.0
    adj_train = adj_train + adj_train.t()
    return adj_train, val_edges, val_false, test_edges, test_false


def preprocess_graph(adj):
    adj_ = adj + torch.eye(adj.shape[0])
    d_inv_sqrt = adj_.sum(1).pow(-0.5)
    return d_inv_sqrt[:, None] * adj_ * d_inv_sqrt[None, :]


class GraphConvolution(nn.Module):
    def __init__(self, in_dim, out_dim, act=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(in_dim, out_dim))
        nn.init.xavier_uniform_(self.weight)
        self.act = act

    def forward(self, x, adj):
        out = adj @ (x @ self.weight)
        return self.act(out) if self.act is not None else out


class VGAE(nn.Module):
    def __init__(self, in_dim, hidden1, hidden2):
        super().__init__()
        self.base_gcn = GraphConvolution(in_dim, hidden1, act=F.relu)
        self.gcn_mean = GraphConvolution(hidden1, hidden2)
        self.gcn_logstd = GraphConvolution(hidden1, hidden2)

    def encode(self, x, adj):
        hidden = self.base_gcn(x, adj)
        return self.gcn_mean(hidden, adj), self.gcn_logstd(hidden, adj)

    def forward(self, x, adj):
        mu, logstd = self.encode(x, adj)
        q_z = torch.distributions.Normal(mu, torch.exp(logstd))
        z = q_z.rsample()
        logits = z @ z.t()
        return logits, mu, logstd


def roc_auc(emb, pos, neg):
    scores = torch.sigmoid(emb @ emb.t())
    s_pos = scores[pos[:, 0], pos[:, 1]]
    s_neg = scores[neg[:, 0], neg[:, 1]]
    diff = s_pos[:, None] - s_neg[None, :]
    return ((diff > 0).float() + 0.5 * (diff == 0).float()).mean().item()


adj = sbm_graph(args.num_nodes, args.blocks, args.p_in, args.p_out)
adj_train, val_edges, val_false, test_edges, test_false = mask_test_edges(adj)
adj_norm = preprocess_graph(adj_train)
adj_label = adj_train + torch.eye(args.num_nodes)
features = torch.eye(args.num_nodes)

n = args.num_nodes
pos_weight = torch.tensor((n * n - adj_train.sum().item()) / adj_train.sum().item())
norm = n * n / float((n * n - adj_train.sum().item()) * 2)

model = VGAE(features.shape[1], args.hidden1, args.hidden2)
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

for epoch in range(args.epochs):
    model.train()
    optimizer.zero_grad()
    logits, mu, logstd = model(features, adj_norm)
    recon = norm * F.binary_cross_entropy_with_logits(logits.view(-1), adj_label.view(-1),
                                                      pos_weight=pos_weight)
    kl = 0.5 / n * (1 + 2 * logstd - mu.pow(2) - torch.exp(logstd).pow(2)).sum(1).mean()
    loss = recon - kl
    loss.backward()
    optimizer.step()
    if epoch % 15 == 0 or epoch == args.epochs - 1:
        model.eval()
        with torch.no_grad():
            z_mean, _ = model.encode(features, adj_norm)
            val_auc = roc_auc(z_mean, val_edges, val_false)
        print(f"epoch {epoch:3d} loss {loss.item():.4f} kl {kl.item():.4f} val_auc {val_auc:.3f}")

model.eval()
with torch.no_grad():
    z_mean, _ = model.encode(features, adj_norm)
    test_auc = roc_auc(z_mean, test_edges, test_false)
print(f"test auc {test_auc:.3f}")

if args.out:
    torch.save({"model": model.state_dict()}, args.out)
