"""DeepJDOT: deep joint distribution optimal transport for unsupervised domain adaptation.

Paper: Bharath Bhushan Damodaran, Benjamin Kellenberger, Remi Flamary, Devis Tuia and Nicolas
Courty, "DeepJDOT: Deep Joint Distribution Optimal Transport for Unsupervised Domain
Adaptation", ECCV 2018, arXiv:1803.10081.
Reference implementation: bbdamodaran/deepJDOT, deepjdot_demo.py (2D blobs: a source model is
first trained on the labelled source data alone, then a target model with two outputs, the
class probabilities and the feature layer, is given the source model's weights and adapted),
Deepjdot.py (class Deepjdot: classifier_cat_loss, L2_dist, align_loss, fit); and its PyTorch
port msseibel/DeepJDOT-pytorch, DeepJDOT.py (Deepjdot.fit: the plan is solved under
torch.no_grad() with the net in eval mode, then the net is run again in train mode for the
loss, zero_grad, backward and an SGD step over all its parameters).

Three Gaussian classes in 2D form the labelled source domain; the unlabelled target domain is
the same mixture rotated and shifted. The network is a feature extractor g (two ReLU layers)
and a classifier f (one hidden ReLU layer, linear logits). Phase 1 trains a source model with
cross-entropy on source batches (SGD with momentum, its own loop). Phase 2 copies it into the
target model and runs DeepJDOT: each iteration draws a source and a target batch, computes
without gradient the JDOT ground cost C = alpha * ||g(xs_i) - g(xt_j)||^2 + ||ys_i -
softmax(f(g(xt_j)))||^2, solves the exact optimal transport between the two uniform batches
(with equal batch sizes the EMD plan is a permutation divided by the batch size, found here by
the Hungarian algorithm) and holds the plan gamma fixed; the network is then run again with
gradient and trained on sloss * source cross-entropy + tloss * sum_ij gamma_ij * CE(ys_i,
f(g(xt_j))) + alpha * sum_ij gamma_ij * ||g(xs_i) - g(xt_j)||^2, where both the source and
the target features and the target predictions carry gradient into g and f.
As published: clean.
"""
import argparse
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--n", type=int, default=600)
parser.add_argument("--steps_src", type=int, default=30)
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--batch_size", type=int, default=32)
parser.add_argument("--hidden", type=int, default=64)
parser.add_argument("--feat", type=int, default=32)
parser.add_argument("--lr_src", type=float, default=0.05)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--jdot_alpha", type=float, default=0.1)
parser.add_argument("--sloss", type=float, default=2.0)
parser.add_argument("--tloss", type=float, default=1.0)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

N_CLASS = 3


def make_domain(n, angle, shift):
    labels = torch.randint(0, N_CLASS, (n,))
    centers = torch.tensor([[0.0, 0.0], [2.0, 0.0], [1.0, 1.7]])
    x = centers[labels] + 0.35 * torch.randn(n, 2)
    angle = torch.tensor(angle)
    rot = torch.stack([torch.stack([angle.cos(), -angle.sin()]),
                       torch.stack([angle.sin(), angle.cos()])])
    return x @ rot.t() + torch.tensor(shift), labels


class FeatureExtractor(nn.Module):
    def __init__(self, n_in, hidden, feat):
        super().__init__()
        self.fc1 = nn.Linear(n_in, hidden)
        self.fc2 = nn.Linear(hidden, feat)

    def forward(self, x):
        return F.relu(self.fc2(F.relu(self.fc1(x))))


class Classifier(nn.Module):
    def __init__(self, feat, hidden, n_class):
        super().__init__()
        self.fc1 = nn.Linear(feat, hidden)
        self.fc2 = nn.Linear(hidden, n_class)

    def forward(self, g):
        return self.fc2(F.relu(self.fc1(g)))


class JDOTNet(nn.Module):
    """Returns the class logits and the intermediate features, like the two-output model."""

    def __init__(self, n_in, hidden, feat, n_class):
        super().__init__()
        self.fe = FeatureExtractor(n_in, hidden, feat)
        self.cl = Classifier(feat, hidden, n_class)

    def forward(self, x):
        g = self.fe(x)
        return self.cl(g), g


def l2_dist(x, y):
    """Squared Euclidean distances between the rows of x and the rows of y."""
    dist = x.pow(2).sum(1).reshape(-1, 1) + y.pow(2).sum(1).reshape(1, -1)
    return dist - 2.0 * x @ y.t()


def emd_uniform(cost):
    """Exact OT plan between two uniform batches of the same size (Hungarian algorithm)."""
    n = cost.shape[0]
    c = cost.tolist()
    inf = float("inf")
    u, v = [0.0] * (n + 1), [0.0] * (n + 1)
    row_of = [0] * (n + 1)
    prev = [0] * (n + 1)
    for i in range(1, n + 1):
        row_of[0] = i
        col = 0
        best = [inf] * (n + 1)
        done = [False] * (n + 1)
        while True:
            done[col] = True
            r, delta, nxt = row_of[col], inf, 0
            for j in range(1, n + 1):
                if not done[j]:
                    reduced = c[r - 1][j - 1] - u[r] - v[j]
                    if reduced < best[j]:
                        best[j], prev[j] = reduced, col
                    if best[j] < delta:
                        delta, nxt = best[j], j
            for j in range(n + 1):
                if done[j]:
                    u[row_of[j]] += delta
                    v[j] -= delta
                else:
                    best[j] -= delta
            col = nxt
            if row_of[col] == 0:
                break
        while col != 0:
            back = prev[col]
            row_of[col] = row_of[back]
            col = back
    gamma = torch.zeros(n, n)
    for j in range(1, n + 1):
        gamma[row_of[j] - 1, j - 1] = 1.0 / n
    return gamma


def accuracy(net, x, y):
    net.eval()
    with torch.no_grad():
        logits, _ = net(x)
    return (logits.argmax(1) == y).float().mean().item()


xs_all, ys_all = make_domain(args.n, 0.0, (0.0, 0.0))
xt_all, yt_all = make_domain(args.n, 0.6, (1.0, 0.5))  # target labels: evaluation only

# Phase 1: source model trained on the labelled source domain only.
source_model = JDOTNet(2, args.hidden, args.feat, N_CLASS)
opt_src = torch.optim.SGD(source_model.parameters(), lr=args.lr_src, momentum=0.9)
source_model.train()
for step in range(args.steps_src):
    idx = torch.randint(0, args.n, (2 * args.batch_size,))
    opt_src.zero_grad()
    logits, _ = source_model(xs_all[idx])
    loss = F.cross_entropy(logits, ys_all[idx])
    loss.backward()
    opt_src.step()
    if step % 10 == 0 or step == args.steps_src - 1:
        print(f"source step {step:3d} ce {loss.item():.4f}")
print(f"source model: source acc {accuracy(source_model, xs_all, ys_all):.3f} "
      f"target acc {accuracy(source_model, xt_all, yt_all):.3f}")

# Phase 2: DeepJDOT adaptation of a target model that starts from the source weights.
model = copy.deepcopy(source_model)
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
n = args.batch_size
for it in range(args.steps):
    s_ind = torch.randint(0, args.n, (n,))
    t_ind = torch.randint(0, args.n, (n,))
    xs, ys = xs_all[s_ind], ys_all[s_ind]
    xt = xt_all[t_ind]
    ys_cat = F.one_hot(ys, N_CLASS).float()
    batch = torch.cat([xs, xt])

    # JDOT coupling on the batch, computed without gradient and then held fixed.
    model.eval()
    with torch.no_grad():
        logits, feats = model(batch)
        gs, gt = feats[:n], feats[n:]
        ft_pred = F.softmax(logits[n:], dim=1)
        C0 = l2_dist(gs, gt)
        C1 = l2_dist(ys_cat, ft_pred)
        C = args.jdot_alpha * C0 + C1
        gamma = emd_uniform(C)

    model.train()
    optimizer.zero_grad()
    logits, feats = model(batch)
    gs, gt = feats[:n], feats[n:]
    fs_logits = logits[:n]
    ft_pred = F.softmax(logits[n:], dim=1)
    source_loss = F.cross_entropy(fs_logits, ys)
    target_loss = torch.sum(gamma * -(ys_cat @ torch.log(ft_pred).t()))
    cat_loss = args.tloss * target_loss + args.sloss * source_loss
    align_loss = args.jdot_alpha * torch.sum(gamma * l2_dist(gs, gt))
    loss = cat_loss + align_loss
    loss.backward()
    optimizer.step()
    if it % 10 == 0 or it == args.steps - 1:
        print(f"jdot it {it:3d} cat {cat_loss.item():.4f} align {align_loss.item():.4f} "
              f"total {loss.item():.4f}")

print(f"deepjdot model: source acc {accuracy(model, xs_all, ys_all):.3f} "
      f"target acc {accuracy(model, xt_all, yt_all):.3f}")

if args.out:
    torch.save({"source_model": source_model.state_dict(), "model": model.state_dict()},
               args.out)
