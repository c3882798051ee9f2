"""Deep Sets regression of a population statistic (entropy of a rotated 2-D Gaussian).

Paper: Manzil Zaheer, Satwik Kottur, Siamak Ravanbakhsh, Barnabas Poczos, Ruslan Salakhutdinov
and Alexander Smola, "Deep Sets", NeurIPS 2017, arXiv:1703.06114 (section 4.1.1, estimation of
population statistics).
Reference implementation: manzilzaheer/DeepSets, PopStats/model.py (DeepSet: the per-element
feature extractor phi = Linear(d, 50), ELU, Linear(50, 100), ELU, Linear(100, 50), sum pooling
over the set dimension, and the regressor rho = Linear(50, 30), ELU, Linear(30, 30), ELU,
Linear(30, 10), ELU, Linear(10, 1)), PopStats/trainer.py (Trainer.fit: one Adam(lr=1e-3) over
model.parameters(); a first loop of epochs minimising the MSE with ReduceLROnPlateau(factor=0.5)
stepped on the best validation MSE after every epoch, then a second loop of epochs minimising the
L1 loss with the same optimizer; each batch runs zero_grad, forward, loss, backward, step; the
best-validation-MSE model is kept), PopStats/loader.py (DataIterator: the bags shuffled every
epoch, fixed-size batches) and PopStats/generator/generate_task1_dataset.m (task 1: one random
2x2 matrix A, rotation angles on [0, pi], each bag holds N samples of R(angle) A z with z standard
normal, and the label is 1/2 log(2 pi e s^2) with s = (R A A^T R^T)[0, 0]).

Each training and validation bag is a set of 32 two-dimensional points; the model is permutation
invariant because phi acts on every point and the features are summed over the set before rho.
Phase 1 trains the whole model with the MSE for a few epochs while the plateau scheduler watches
the best validation MSE; phase 2 continues with the L1 loss and the same Adam optimizer over the
whole model. Validation runs in eval mode under torch.no_grad(); the best-MSE weights are kept as
a deep copy of the state dict.
Bug: in phase 1 optimizer.zero_grad() is called once per epoch instead of once per batch,
so every MSE step uses the sum of all the epoch's gradients so far.
"""
import argparse
import copy
import math

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--n_train", type=int, default=128)
parser.add_argument("--n_valid", type=int, default=64)
parser.add_argument("--set_size", type=int, default=32)
parser.add_argument("--batch_size", type=int, default=16)
parser.add_argument("--epochs_mse", type=int, default=4)
parser.add_argument("--epochs_l1", type=int, default=3)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--patience", type=int, default=2)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)


def rotation(angle):
    c, s = math.cos(angle), math.sin(angle)
    return torch.tensor([[c, -s], [s, c]])


def make_task1(n_bags, set_size, A):
    """Bags of samples of a rotated Gaussian; label: entropy of the first coordinate."""
    angles = torch.linspace(0, math.pi, n_bags)
    X = torch.empty(n_bags, set_size, 2)
    y = torch.empty(n_bags, 1)
    for k, angle in enumerate(angles.tolist()):
        A_k = rotation(angle) @ A
        X[k] = (A_k @ torch.randn(2, set_size)).T
        s = (A_k @ A_k.T)[0, 0]
        y[k, 0] = 0.5 * torch.log(2 * math.pi * math.e * s ** 2)
    return X, y


class DeepSet(nn.Module):
    def __init__(self, in_features, set_features=50):
        super().__init__()
        self.feature_extractor = nn.Sequential(
            nn.Linear(in_features, 50), nn.ELU(inplace=True),
            nn.Linear(50, 100), nn.ELU(inplace=True),
            nn.Linear(100, set_features))
        self.regressor = nn.Sequential(
            nn.Linear(set_features, 30), nn.ELU(inplace=True),
            nn.Linear(30, 30), nn.ELU(inplace=True),
            nn.Linear(30, 10), nn.ELU(inplace=True),
            nn.Linear(10, 1))

    def forward(self, x):
        x = self.feature_extractor(x)  # (bags, set_size, set_features)
        x = x.sum(dim=1)               # permutation-invariant pooling
        return self.regressor(x)


A = torch.rand(2, 2)
X_train, y_train = make_task1(args.n_train, args.set_size, A)
X_valid, y_valid = make_task1(args.n_valid, args.set_size, A)

model = DeepSet(2)
l1 = nn.L1Loss()
l2 = nn.MSELoss()
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.5,
                                                       patience=args.patience)


def batches():
    perm = torch.randperm(args.n_train)
    for start in range(0, args.n_train - args.batch_size + 1, args.batch_size):
        idx = perm[start:start + args.batch_size]
        yield X_train[idx], y_train[idx]


def evaluate():
    model.eval()
    with torch.no_grad():
        y_pred = model(X_valid)
        mae, mse = l1(y_pred, y_valid).item(), l2(y_pred, y_valid).item()
    model.train()
    return mae, mse


best_mae, best_mse = 1.0e3, 1.0e6
best_state = copy.deepcopy(model.state_dict())
train_loss = 0.0

# Phase 1: mean squared error, learning rate halved on a plateau of the best validation MSE.
model.train()
for epoch in range(args.epochs_mse):
    optimizer.zero_grad()
    for X, y in batches():
        y_pred = model(X)
        loss = l2(y_pred, y)
        train_loss = 0.9 * train_loss + 0.1 * loss.item()
        loss.backward()
        optimizer.step()
    mae, mse = evaluate()
    best_mae = min(best_mae, mae)
    if mse < best_mse:
        best_mse = mse
        best_state = copy.deepcopy(model.state_dict())
    scheduler.step(best_mse)
    print(f"mse epoch {epoch}: train {train_loss:.4f} valid mae {mae:.4f} mse {mse:.4f}")

# Phase 2: L1 loss, same optimizer, whole model.
for epoch in range(args.epochs_l1):
    for X, y in batches():
        optimizer.zero_grad()
        y_pred = model(X)
        loss = l1(y_pred, y)
        train_loss = 0.9 * train_loss + 0.1 * loss.item()
        loss.backward()
        optimizer.step()
    mae, mse = evaluate()
    best_mae = min(best_mae, mae)
    if mse < best_mse:
        best_mse = mse
        best_state = copy.deepcopy(model.state_dict())
    print(f"l1 epoch {epoch}: train {train_loss:.4f} valid mae {mae:.4f} mse {mse:.4f}")

print(f"best valid mae {best_mae:.4f} mse {best_mse:.4f}")

if args.out:
    torch.save({"model": model.state_dict(), "best_model": best_state}, args.out)
