"""Set Transformer (ISAB encoder, PMA decoder) trained for amortized clustering of 2-D mixtures.

Paper: Juho Lee, Yoonho Lee, Jungtaek Kim, Adam R. Kosiorek, Seungjin Choi and Yee Whye Teh,
"Set Transformer: A Framework for Attention-based Permutation-Invariant Neural Networks",
ICML 2019, arXiv:1810.00825.
Reference implementation: juho-lee/set_transformer, modules.py (MAB: linear query/key/value
projections, heads split along the feature axis and stacked on the batch axis, softmax of
QK^T / sqrt(dim_V), the residual O = Q + AV, then O + relu(fc_o(O)); SAB; ISAB with its inducing
points I, an nn.Parameter of shape (1, m, d) initialised by xavier_uniform_, attended to the set
and attended back; PMA with its learned seed vectors S), models.py (SetTransformer: ISAB
encoder, decoder PMA -> SAB -> SAB -> Linear), mvn_diag.py (MultivariateNormalDiag: sample with
means in [-4, 4] and sigma 0.3, log_prob, parse: softmax mixing weights, means, softplus scales),
mixture_of_mvns.py (MixtureOfMVNs.sample with Dirichlet weights, log_prob as the mean
logsumexp over the components) and run.py (train: one Adam over net.parameters(), at each step
zero_grad, a fresh batch of B sets of N points, loss = -log-likelihood of the points under the
predicted mixture, backward, step; the learning rate multiplied by 0.1 at half of the steps).

Each training step draws B = 8 sets of N points (N uniform in [32, 64)) from random mixtures of
K = 4 isotropic Gaussians in 2-D (Dirichlet(1) weights, means uniform in [-4, 4], sigma 0.3).
The network reads a set and outputs K rows of (logit, mean, raw scale); the loss is the negative
mean log-likelihood of the set's points under the mixture it predicts. The encoder is two ISABs
(width 32, 4 heads, 8 inducing points each), the decoder PMA with K seeds, two SABs and a linear
layer; no layer norm, as in run.py's default. One Adam holds every parameter, including the
inducing points and the PMA seeds; its learning rate drops tenfold halfway. The eval
log-likelihood on held-out sets is computed under torch.no_grad().
Bug: optimizer.zero_grad() is missing from the training loop, so from the second step on every
backward adds to the gradients of all previous steps and Adam steps on their running sum.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Categorical, Dirichlet

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--num_steps", type=int, default=50)
parser.add_argument("--B", type=int, default=8)
parser.add_argument("--N_min", type=int, default=32)
parser.add_argument("--N_max", type=int, default=64)
parser.add_argument("--K", type=int, default=4)
parser.add_argument("--dim_hidden", type=int, default=32)
parser.add_argument("--num_heads", type=int, default=4)
parser.add_argument("--num_inds", type=int, default=8)
parser.add_argument("--lr", type=float, default=2e-3)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

D = 2


def sample_mog(B, N, K):
    pi = Dirichlet(torch.ones(K)).sample((B,))
    labels = Categorical(probs=pi).sample((N,)).transpose(0, 1).contiguous()
    mu = -4.0 + 8.0 * torch.rand(B, K, D)
    sigma = 0.3 * torch.ones(B, K, D)
    eps = torch.randn(B, N, D)
    idx = labels.unsqueeze(-1).repeat(1, 1, D)
    return torch.gather(mu, 1, idx) + eps * torch.gather(sigma, 1, idx)


def parse(raw):
    pi = torch.softmax(raw[..., 0], -1)
    mu = raw[..., 1:1 + D]
    sigma = F.softplus(raw[..., 1 + D:])
    return pi, mu, sigma


def mog_log_prob(X, pi, mu, sigma):
    diff = X.unsqueeze(2) - mu.unsqueeze(1)
    s = sigma.unsqueeze(1)
    ll = (-0.5 * math.log(2 * math.pi) - s.log() - 0.5 * diff.pow(2) / s.pow(2)).sum(-1)
    ll = ll + (pi + 1e-10).log().unsqueeze(-2)
    return ll.logsumexp(-1).mean()


class MAB(nn.Module):
    def __init__(self, dim_Q, dim_K, dim_V, num_heads):
        super().__init__()
        self.dim_V = dim_V
        self.num_heads = num_heads
        self.fc_q = nn.Linear(dim_Q, dim_V)
        self.fc_k = nn.Linear(dim_K, dim_V)
        self.fc_v = nn.Linear(dim_K, dim_V)
        self.fc_o = nn.Linear(dim_V, dim_V)

    def forward(self, Q, K):
        Q = self.fc_q(Q)
        K, V = self.fc_k(K), self.fc_v(K)
        split = self.dim_V // self.num_heads
        Q_ = torch.cat(Q.split(split, 2), 0)
        K_ = torch.cat(K.split(split, 2), 0)
        V_ = torch.cat(V.split(split, 2), 0)
        A = torch.softmax(Q_.bmm(K_.transpose(1, 2)) / math.sqrt(self.dim_V), 2)
        O = torch.cat((Q_ + A.bmm(V_)).split(Q.size(0), 0), 2)
        return O + F.relu(self.fc_o(O))


class SAB(nn.Module):
    def __init__(self, dim_in, dim_out, num_heads):
        super().__init__()
        self.mab = MAB(dim_in, dim_in, dim_out, num_heads)

    def forward(self, X):
        return self.mab(X, X)


class ISAB(nn.Module):
    def __init__(self, dim_in, dim_out, num_heads, num_inds):
        super().__init__()
        self.I = nn.Parameter(torch.empty(1, num_inds, dim_out))
        nn.init.xavier_uniform_(self.I)
        self.mab0 = MAB(dim_out, dim_in, dim_out, num_heads)
        self.mab1 = MAB(dim_in, dim_out, dim_out, num_heads)

    def forward(self, X):
        H = self.mab0(self.I.repeat(X.size(0), 1, 1), X)
        return self.mab1(X, H)


class PMA(nn.Module):
    def __init__(self, dim, num_heads, num_seeds):
        super().__init__()
        self.S = nn.Parameter(torch.empty(1, num_seeds, dim))
        nn.init.xavier_uniform_(self.S)
        self.mab = MAB(dim, dim, dim, num_heads)

    def forward(self, X):
        return self.mab(self.S.repeat(X.size(0), 1, 1), X)


class SetTransformer(nn.Module):
    def __init__(self, dim_input, num_outputs, dim_output, num_inds, dim_hidden, num_heads):
        super().__init__()
        self.enc = nn.Sequential(
            ISAB(dim_input, dim_hidden, num_heads, num_inds),
            ISAB(dim_hidden, dim_hidden, num_heads, num_inds))
        self.dec = nn.Sequential(
            PMA(dim_hidden, num_heads, num_outputs),
            SAB(dim_hidden, dim_hidden, num_heads),
            SAB(dim_hidden, dim_hidden, num_heads),
            nn.Linear(dim_hidden, dim_output))

    def forward(self, X):
        return self.dec(self.enc(X))


net = SetTransformer(D, args.K, 1 + 2 * D, args.num_inds, args.dim_hidden, args.num_heads)
bench = [sample_mog(args.B, 48, args.K) for _ in range(4)]

optimizer = torch.optim.Adam(net.parameters(), lr=args.lr)
for t in range(1, args.num_steps + 1):
    if t == int(0.5 * args.num_steps):
        optimizer.param_groups[0]["lr"] *= 0.1
    net.train()
    N = int(torch.randint(args.N_min, args.N_max, (1,)))
    X = sample_mog(args.B, N, args.K)
    ll = mog_log_prob(X, *parse(net(X)))
    loss = -ll
    loss.backward()
    optimizer.step()
    if t % 20 == 0 or t == 1:
        print(f"step {t:3d} lr {optimizer.param_groups[0]['lr']:.1e} train ll {ll.item():.4f}")

net.eval()
with torch.no_grad():
    test_ll = sum(mog_log_prob(X, *parse(net(X))).item() for X in bench) / len(bench)
print(f"test ll {test_ll:.4f}")

if args.out:
    # the inducing points by themselves, registered or not
    inducing = {n: m.I.detach().clone() for n, m in net.named_modules() if hasattr(m, "I")}
    torch.save({"net": {k: v for k, v in net.state_dict().items() if not k.endswith(".I")},
                "inducing": inducing}, args.out)
