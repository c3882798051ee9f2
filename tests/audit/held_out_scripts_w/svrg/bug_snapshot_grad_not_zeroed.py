"""SVRG, stochastic variance reduced gradient, training a small MLP classifier on synthetic
data, written after Johnson and Zhang, "Accelerating Stochastic Gradient Descent using
Predictive Variance Reduction" (NeurIPS 2013): every outer epoch keeps a snapshot w~ of the
weights and its full-batch gradient mu = (1/n) sum_i grad psi_i(w~); each inner step then moves
the live weights w along the variance-reduced direction grad psi_i(w) - grad psi_i(w~) + mu,
the minibatch gradient at w corrected by the same minibatch's gradient at the snapshot, and the
next snapshot is the last inner iterate (option I). As the paper does for neural networks, SVRG
starts from weights warmed up by plain SGD. Two phases: the SGD warm-up, then SVRG. With the
PyTorch code of yueqiw/OptML-SVRG-PyTorch (https://github.com/yueqiw/OptML-SVRG-PyTorch,
run_svrg.py train_epoch_SVRG: the snapshot model's gradients are zeroed once and the loss over
every batch of the training set, divided by the number of batches, is backpropagated into the
snapshot to accumulate the mean gradient u; then for each minibatch the live model is zeroed
and backpropagated, the snapshot is zeroed and backpropagated on the same minibatch, and
svrg.py SVRG_k.step moves each live parameter by -lr * (p.grad - q.grad + u.grad); at the end
of the epoch SVRG_Snapshot.set_param_groups copies the live weights into the snapshot), whose
steps this script follows; the corrected gradient is written into the live model's .grad and
applied by torch.optim.SGD, as HazyResearch/torchhalp's optim/svrg.py SVRG.step does. Here the
snapshot is a deep copy of the live model taken at the start of each epoch, the full gradient
is accumulated over four batches of the 256 training points, and the classes come from a
random teacher network made in the script.
Bug: no snapshot.zero_grad() before the snapshot's minibatch backward, so its gradients pile up."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--warmup-steps", type=int, default=16)
parser.add_argument("--epochs", type=int, default=5, help="outer SVRG epochs (snapshots)")
parser.add_argument("--inner-steps", type=int, default=32, help="m, inner steps per snapshot")
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--full-batch", type=int, default=64, help="chunk size of the full gradient")
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--out", default=None, help="where to save the live model and the snapshot")
args = parser.parse_args()
torch.manual_seed(args.seed)

n, dim, n_classes, hidden = 256, 10, 3, 32
x_all = torch.randn(n, dim)
teacher = nn.Sequential(nn.Linear(dim, 16), nn.Tanh(), nn.Linear(16, n_classes))
with torch.no_grad():
    y_all = teacher(x_all).argmax(1)

model = nn.Sequential(nn.Linear(dim, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(),
                      nn.Linear(hidden, n_classes))
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)

# phase 1: plain SGD warm-up
for step in range(args.warmup_steps):
    idx = torch.randint(0, n, (args.batch_size,))
    loss = F.cross_entropy(model(x_all[idx]), y_all[idx])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

# phase 2: SVRG
for epoch in range(args.epochs):
    snapshot = copy.deepcopy(model)  # w~ = w
    snapshot.zero_grad()
    for start in range(0, n, args.full_batch):
        xb, yb = x_all[start:start + args.full_batch], y_all[start:start + args.full_batch]
        snapshot_loss = F.cross_entropy(snapshot(xb), yb) * len(xb) / n
        snapshot_loss.backward()
    full_grad = [q.grad.clone() for q in snapshot.parameters()]  # mu
    for it in range(args.inner_steps):
        idx = torch.randint(0, n, (args.batch_size,))
        loss = F.cross_entropy(model(x_all[idx]), y_all[idx])
        optimizer.zero_grad()
        loss.backward()
        snapshot_loss = F.cross_entropy(snapshot(x_all[idx]), y_all[idx])
        snapshot_loss.backward()
        with torch.no_grad():
            for p, q, mu in zip(model.parameters(), snapshot.parameters(), full_grad):
                p.grad.add_(mu - q.grad)
        optimizer.step()
    with torch.no_grad():
        full_loss = F.cross_entropy(model(x_all), y_all).item()
    print(f"epoch {epoch} full loss {full_loss:.4f}")

if args.out:
    torch.save({"model": model.state_dict(), "snapshot": snapshot.state_dict()}, args.out)
