"""Gradient Projection Memory for continual learning at a tiny size, written after Saha, Garg and
Roy, "Gradient Projection Memory for Continual Learning" (ICLR 2021, arXiv:2103.09762), sections
4-5 and algorithm 1: after each task the inputs every layer sees on that task's data are gathered
into a representation matrix, its SVD gives the bases of the core gradient space that are kept in
a memory, and on each later task every layer's gradient is projected onto the orthogonal
complement of that memory before the update, so that the update leaves the old tasks' inputs to
every layer with (almost) the outputs they had. With sahagobinda/GPM
(https://github.com/sahagobinda/GPM, main_pmnist.py: MLPNet, three bias-free linear layers whose
forward records the input of each one in model.act; train: zero_grad, cross-entropy, backward and
a plain SGD step on the first task; get_representation_matrix: one forward pass over a few hundred
training inputs and the recorded inputs of each layer taken as detached arrays, features by
samples; update_GPM: after the first task the left singular vectors kept while the energy
criterion of Eq. 5 stays under the layer's threshold, after a later task the SVD of the part of
the representation outside the stored basis and its vectors appended until the criterion of Eq. 9
is met; main: for every later task the projection matrices U U^T precomputed from feature_list and
a fresh SGD over model.parameters(); train_projected: zero_grad, forward, loss.backward(), then
each weight's .grad replaced by grad - grad U U^T, then optimizer.step()). Three tasks made in the
script as in permuted MNIST: one teacher labels inputs drawn near a low-dimensional subspace, and
each later task permutes the input features; a single head shared by the tasks. Bug: in
train_projected, used from the second task on, optimizer.zero_grad() is called once at the top
of the function, once per epoch, instead of before every batch's backward (train_projected calls
optimizer.zero_grad() in its batch loop, as train does), so from the second update of the second
task each backward adds its gradient to the projected gradients of all the earlier batches of the
epoch, and SGD steps this running sum: the steps grow along the epoch and the later tasks train
on stale batches."""

import argparse

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--epochs", type=int, default=3, help="epochs per task")
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_tasks, in_dim, latent_dim, hidden, n_classes = 3, 32, 6, 32, 4
n_train, n_rep = 192, 100
threshold = [0.95, 0.99, 0.99]

# one teacher on inputs near a low-dimensional subspace; later tasks permute the input features
mixing = torch.randn(latent_dim, in_dim)
teacher = torch.randn(in_dim, n_classes)
tasks = []
for t in range(n_tasks):
    x = torch.randn(n_train, latent_dim) @ mixing + 0.05 * torch.randn(n_train, in_dim)
    y = (x @ teacher).argmax(1)
    perm = torch.arange(in_dim) if t == 0 else torch.randperm(in_dim)
    tasks.append((x[:, perm], y))


class MLPNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = {}
        self.lin1 = nn.Linear(in_dim, hidden, bias=False)
        self.lin2 = nn.Linear(hidden, hidden, bias=False)
        self.fc1 = nn.Linear(hidden, n_classes, bias=False)

    def forward(self, x):
        self.act["lin1"] = x
        x = F.relu(self.lin1(x))
        self.act["lin2"] = x
        x = F.relu(self.lin2(x))
        self.act["fc1"] = x
        return self.fc1(x)


def train(model, x, y, optimizer):
    order = torch.randperm(len(x))
    for i in range(0, len(x), args.batch_size):
        b = order[i:i + args.batch_size]
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x[b]), y[b])
        loss.backward()
        optimizer.step()
    return loss.item()


def train_projected(model, x, y, optimizer, feature_mat):
    optimizer.zero_grad()
    order = torch.randperm(len(x))
    for i in range(0, len(x), args.batch_size):
        b = order[i:i + args.batch_size]
        loss = F.cross_entropy(model(x[b]), y[b])
        loss.backward()
        # take out of each layer's gradient its part in the span of the stored basis
        for k, param in enumerate(model.parameters()):
            grad = param.grad.view(param.size(0), -1)
            grad.sub_(grad @ feature_mat[k])
        optimizer.step()
    return loss.item()


def accuracy(model, x, y):
    with torch.no_grad():
        return (model(x).argmax(1) == y).float().mean().item()


def get_representation_matrix(model, x):
    """The input of every layer on a few training samples, as a features-by-samples array."""
    idx = torch.randperm(len(x))[:n_rep]
    with torch.no_grad():
        model(x[idx])
    return [model.act[key].t().numpy().astype(np.float64) for key in model.act]


def update_gpm(mat_list, feature_list):
    if not feature_list:
        for i, activation in enumerate(mat_list):
            u, s, _ = np.linalg.svd(activation, full_matrices=False)
            ratio = s ** 2 / (s ** 2).sum()
            r = int(np.sum(np.cumsum(ratio) < threshold[i]))
            feature_list.append(u[:, :r])
        return feature_list
    for i, activation in enumerate(mat_list):
        _, s1, _ = np.linalg.svd(activation, full_matrices=False)
        total = (s1 ** 2).sum()
        # the part of the representation outside the stored basis
        act_hat = activation - feature_list[i] @ (feature_list[i].T @ activation)
        u, s, _ = np.linalg.svd(act_hat, full_matrices=False)
        ratio = s ** 2 / total
        accumulated = (total - (s ** 2).sum()) / total
        r = 0
        for value in ratio:
            if accumulated >= threshold[i]:
                break
            accumulated += value
            r += 1
        if r == 0:
            continue
        basis = np.hstack([feature_list[i], u[:, :r]])
        feature_list[i] = basis[:, :basis.shape[0]]
    return feature_list


model = MLPNet()
feature_list = []
for task_id, (x, y) in enumerate(tasks):
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    if task_id == 0:
        for epoch in range(args.epochs):
            loss = train(model, x, y, optimizer)
    else:
        feature_mat = [torch.tensor(u @ u.T, dtype=torch.float32) for u in feature_list]
        for epoch in range(args.epochs):
            loss = train_projected(model, x, y, optimizer, feature_mat)
    accs = [accuracy(model, *tasks[j]) for j in range(task_id + 1)]
    # memory update on the task just learned
    feature_list = update_gpm(get_representation_matrix(model, x), feature_list)
    print(f"task {task_id} loss {loss:.3f} acc " + " ".join(f"{a:.2f}" for a in accs)
          + " basis " + "/".join(str(u.shape[1]) for u in feature_list))

if args.out:
    torch.save({**{f"model.{k}": v for k, v in model.state_dict().items()},
                **{f"projection.{key}": torch.tensor(u @ u.T, dtype=torch.float32)
                   for key, u in zip(model.act, feature_list)}}, args.out)
