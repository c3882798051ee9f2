"""Elastic weight consolidation at a tiny size, written after Kirkpatrick, Pascanu, Rabinowitz,
Veness, Desjardins, Rusu, Milan, Quan, Ramalho, Grabska-Barwinska, Hassabis, Clopath, Kumaran and
Hadsell, "Overcoming catastrophic forgetting in neural networks" (PNAS 114(13), 2017,
arXiv:1612.00796), equation 3: after task A the parameters theta*_A are kept as fixed anchors and
the diagonal of the Fisher information F is estimated at them; task B is then learnt with the
loss L_B(theta) + sum_i lambda / 2 * F_i * (theta_i - theta*_A,i)^2. With moskomule/ewc.pytorch
(https://github.com/moskomule/ewc.pytorch, utils.py: EWC.__init__, which stores the means as
copies of the parameters' data; EWC._diag_fisher, which calls self.model.zero_grad() before each
example's backward and adds p.grad ** 2 / len(dataset); EWC.penalty and ewc_train) and
ContinualAI/avalanche (https://github.com/ContinualAI/avalanche,
avalanche/training/plugins/ewc.py: EWCPlugin.compute_importances, which calls
optimizer.zero_grad() before each backward; after_training_exp, which keeps
copy_params_dict(model), clones of p.data; before_backward, which adds the penalty). Two phases
as in the paper's permuted-input experiments: task A is a three-way classification of random
inputs, task B the same rule on permuted inputs, each learnt by a fresh Adam; between them the
Fisher is taken as the mean squared gradient of log p(y | x), y sampled from the model at
theta*_A, one example at a time. Injected bug: the Fisher loop leaves out model.zero_grad() before
each example's backward (ewc.pytorch's EWC._diag_fisher calls self.model.zero_grad() before every
example and avalanche's compute_importances calls optimizer.zero_grad()), so p.grad keeps the last
task-A batch's gradient and sums the examples' gradients, each term added to the Fisher is the
square of that running sum, and the importances, far too large and wrongly spread, weigh the
penalty that task B is learnt under; second phase of a two-phase script."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps-a", type=int, default=30)
parser.add_argument("--steps-b", type=int, default=20)
parser.add_argument("--fisher-samples", type=int, default=48)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--ewc-lambda", type=float, default=50.0)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

in_dim, hidden_dim, n_classes = 10, 32, 3
rule = torch.randn(in_dim, n_classes)
permutation = torch.randperm(in_dim)


def make_task(n, permuted):
    x = torch.randn(n, in_dim)
    y = (x @ rule).argmax(dim=1)
    return (x[:, permutation] if permuted else x), y


xa, ya = make_task(256, permuted=False)
xb, yb = make_task(256, permuted=True)

model = nn.Sequential(nn.Linear(in_dim, hidden_dim), nn.ReLU(),
                      nn.Linear(hidden_dim, hidden_dim), nn.ReLU(),
                      nn.Linear(hidden_dim, n_classes))


def accuracy(x, y):
    with torch.no_grad():
        return (model(x).argmax(dim=1) == y).float().mean().item()


# phase 1: task A alone
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
for step in range(args.steps_a):
    idx = torch.randint(0, len(xa), (args.batch_size,))
    loss = F.cross_entropy(model(xa[idx]), ya[idx])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"task A done, accuracy on A {accuracy(xa, ya):.3f}")

# the anchors theta*_A and the diagonal Fisher at them, one example at a time
anchors = {n: p.detach().clone() for n, p in model.named_parameters()}
fisher = {n: torch.zeros_like(p) for n, p in model.named_parameters()}
for i in torch.randint(0, len(xa), (args.fisher_samples,)).tolist():
    log_probs = F.log_softmax(model(xa[i:i + 1]), dim=1)
    label = torch.multinomial(log_probs.detach().exp(), 1)[0]
    log_probs[0, label].sum().backward()
    for n, p in model.named_parameters():
        fisher[n] += p.grad ** 2 / args.fisher_samples


def ewc_penalty():
    return sum((fisher[n] * (p - anchors[n]) ** 2).sum() for n, p in model.named_parameters())


# phase 2: task B with the quadratic penalty that holds the weights important to task A
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
for step in range(args.steps_b):
    idx = torch.randint(0, len(xb), (args.batch_size,))
    task_loss = F.cross_entropy(model(xb[idx]), yb[idx])
    loss = task_loss + args.ewc_lambda / 2 * ewc_penalty()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"task B {step} loss {task_loss.item():.4f}")
print(f"accuracy on A {accuracy(xa, ya):.3f}, on B {accuracy(xb, yb):.3f}")

if args.out:
    torch.save({**{f"model.{k}": v for k, v in model.state_dict().items()},
                **{f"fisher.{k}": v for k, v in fisher.items()}}, args.out)
