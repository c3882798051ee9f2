"""JTT, Just Train Twice, a two-stage method for worst-group accuracy without group labels in
training, on a tiny synthetic task with a spurious attribute, written after Liu, Haghgoo, Chen,
Raghunathan, Koh, Sagawa, Liang and Finn, "Just Train Twice: Improving Group Robustness without
Training Group Information" (ICML 2021, arXiv:2107.09044): stage 1 trains an identification model
by ERM for a few epochs, its error set (the training examples it misclassifies) is computed
without gradient, and stage 2 trains a new model from scratch by ERM on the training set with the
error set upsampled lambda_up times. With the authors' code, anniesch/jtt
(https://github.com/anniesch/jtt: generate_downstream.py generate_downstream_commands writes the
ERM run with up_weight 0 and the JTT runs with up_weights [20, 50, 100]; process_training.py main
reads the ERM model's predictions at the chosen final epoch and sets wrong_1_times = (y_pred !=
y_true); run_expt.py main takes aug_indices, the training points with wrong_1_times == 1, builds
Subset(train_data, list(aug_indices) * up_weight_factor) concatenated to the training set with
ConcatDataset, and calls get_model for a new model; train.py train builds torch.optim.SGD over
the model's parameters that require grad with momentum 0.9 and weight decay, and run_epoch calls
optimizer.zero_grad(), loss.backward() and optimizer.step() for every batch). Here both stages run
in one script: the identification model is trained for a few epochs, then used in eval mode
under torch.no_grad() to mark the error set, and a freshly initialised final model with
its own SGD optimizer is trained on the upsampled set; lambda_up is 6, fitted to the tiny data.
The data: two labels y and a spurious attribute a, the attribute agreeing with the label in 90% of
the examples and carried by a clean feature, the label by a noisier one.
Bug: the stage-2 optimizer is built over the identification model's parameters,
torch.optim.SGD([p for p in id_model.parameters() if p.requires_grad], ...), a line carried over
from stage 1, where anniesch/jtt's train.py train builds it over the parameters of the model that
run_expt.py main has just made for the JTT run, so the final model's gradients of the upsampled
loss are never applied (they pile up in its .grad, as optimizer.zero_grad() clears only the
identification model's) and the identification model, which gets no gradient, is not moved
either: the final model stays at its random initialisation."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--id-epochs", type=int, default=2, help="T, the identification epochs")
parser.add_argument("--final-epochs", type=int, default=4)
parser.add_argument("--up-weight", type=int, default=6, help="lambda_up")
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--weight-decay", type=float, default=1e-3)
parser.add_argument("--out", default=None, help="where to save both models")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_train, dim, hidden = 1024, 10, 32


def make_data(n):
    y = torch.randint(0, 2, (n,))
    agree = torch.rand(n) < 0.9
    a = torch.where(agree, y, 1 - y)
    x = torch.randn(n, dim)
    x[:, 0] += 1.0 * (2 * y - 1)
    x[:, 1] += 2.0 * (2 * a - 1)
    return x, y, 2 * y + a


def make_model():
    return nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, 2))


def worst_group_accuracy(model, x, y, g):
    with torch.no_grad():
        correct = (model(x).argmax(1) == y).float()
    return min(correct[g == k].mean().item() for k in range(4)), correct.mean().item()


x_train, y_train, g_train = make_data(n_train)
x_test, y_test, g_test = make_data(2048)

# stage 1: the identification model, ERM for a few epochs
id_model = make_model()
id_optimizer = torch.optim.SGD([p for p in id_model.parameters() if p.requires_grad], lr=args.lr,
                               momentum=0.9, weight_decay=args.weight_decay)
for epoch in range(args.id_epochs):
    perm = torch.randperm(n_train)
    for start in range(0, n_train, args.batch_size):
        idx = perm[start:start + args.batch_size]
        loss = F.cross_entropy(id_model(x_train[idx]), y_train[idx])
        id_optimizer.zero_grad()
        loss.backward()
        id_optimizer.step()
    print(f"identification epoch {epoch} loss {loss.item():.4f}")
print("identification model worst-group / mean accuracy",
      worst_group_accuracy(id_model, x_test, y_test, g_test))

# the error set, without gradient
id_model.eval()
with torch.no_grad():
    wrong = id_model(x_train).argmax(1) != y_train
aug_indices = wrong.nonzero().squeeze(1)
print(f"error set {len(aug_indices)} of {n_train}")
train_indices = torch.cat([torch.arange(n_train), aug_indices.repeat(args.up_weight)])

# stage 2: a new model by ERM on the set with the error set upsampled
final_model = make_model()
optimizer = torch.optim.SGD([p for p in id_model.parameters() if p.requires_grad], lr=args.lr,
                            momentum=0.9, weight_decay=args.weight_decay)
for epoch in range(args.final_epochs):
    perm = train_indices[torch.randperm(len(train_indices))]
    for start in range(0, len(perm), args.batch_size):
        idx = perm[start:start + args.batch_size]
        loss = F.cross_entropy(final_model(x_train[idx]), y_train[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"final epoch {epoch} loss {loss.item():.4f}")
print("final model worst-group / mean accuracy",
      worst_group_accuracy(final_model, x_test, y_test, g_test))

if args.out:
    torch.save({"id_model": id_model.state_dict(), "final_model": final_model.state_dict()},
               args.out)
