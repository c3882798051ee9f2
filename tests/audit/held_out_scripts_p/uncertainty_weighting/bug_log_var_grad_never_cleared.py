"""Multi-task learning with the task losses weighted by learned homoscedastic uncertainty at a tiny
size, written after Kendall, Gal and Cipolla, "Multi-Task Learning Using Uncertainty to Weigh
Losses for Scene Geometry and Semantics" (CVPR 2018, arXiv:1705.07115), section 3.2, equations 7
and 10: each task's loss scaled by a precision, 1 / (2 sigma^2) for a regression and 1 / sigma^2
for a classification, plus log sigma, with s = log sigma^2 learnt for every task beside the
network's weights (1/2 exp(-s) L + 1/2 s for a regression, exp(-s) L + 1/2 s for a
classification). With yaringal/multi-task-learning-example
(https://github.com/yaringal/multi-task-learning-example, multi-task-learning-example-pytorch.ipynb:
Net, a shared fully connected layer and one linear head per output; log_var_a and log_var_b made
as torch.zeros((1,), requires_grad=True); all the model's parameters and the log variances handed
to the optimizer; criterion, for each output exp(-log_var) times the squared error plus log_var;
per batch optimizer.zero_grad(), the loss, loss.backward(), optimizer.step()). The log variances
are kept in an Adam of their own here, with its own learning rate, zeroed and stepped beside the
network's. A shared MLP trunk with three heads on inputs made in the script: a noisy regression
(noise 1.0), a nearly noiseless one (noise 0.1) and a three-way classification.
Bug: the log variances' own Adam is never zeroed, log_var_optimizer.zero_grad() left out beside
optimizer.zero_grad() (the notebook's optimizer.zero_grad() before every backward clears the log
variances with the model's parameters, as they are in the same optimizer), so from the second
update on log_vars.grad is the running sum of every batch's gradient so far: the first update is
the clean one, then Adam steps the log variances, and with them the weights of the three task
losses in the network's gradient, on that growing sum, which keeps pushing them the way the
first batches did."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--lr", type=float, default=5e-3)
parser.add_argument("--log-var-lr", type=float, default=2e-2)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

in_dim, hidden_dim, n_classes = 8, 32, 3
w_a, w_b, w_c = torch.randn(in_dim, 1), torch.randn(in_dim, 1), torch.randn(in_dim, n_classes)
train_x = torch.randn(1024, in_dim)
train_a = torch.sin(train_x @ w_a) * 2 + 1.0 * torch.randn(1024, 1)
train_b = torch.tanh(train_x @ w_b) + 0.1 * torch.randn(1024, 1)
train_c = (train_x @ w_c).argmax(1)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(in_dim, hidden_dim), nn.ReLU(),
                                   nn.Linear(hidden_dim, hidden_dim), nn.ReLU())
        self.head_a = nn.Linear(hidden_dim, 1)
        self.head_b = nn.Linear(hidden_dim, 1)
        self.head_c = nn.Linear(hidden_dim, n_classes)

    def forward(self, x):
        h = self.trunk(x)
        return self.head_a(h), self.head_b(h), self.head_c(h)


def criterion(outputs, targets, log_vars):
    """Equations 7 and 10: 1/2 exp(-s) L + 1/2 s per regression, exp(-s) L + 1/2 s for the
    classification, with s the task's log variance."""
    out_a, out_b, out_c = outputs
    y_a, y_b, y_c = targets
    task_losses = [F.mse_loss(out_a, y_a), F.mse_loss(out_b, y_b), F.cross_entropy(out_c, y_c)]
    scales = [0.5, 0.5, 1.0]
    loss = 0
    for i, task_loss in enumerate(task_losses):
        precision = torch.exp(-log_vars[i])
        loss = loss + scales[i] * precision * task_loss + 0.5 * log_vars[i]
    return loss, task_losses


model = Net()
log_vars = torch.zeros(3, requires_grad=True)
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
log_var_optimizer = torch.optim.Adam([log_vars], lr=args.log_var_lr)

for step in range(args.steps):
    idx = torch.randint(0, len(train_x), (args.batch_size,))
    outputs = model(train_x[idx])
    loss, task_losses = criterion(outputs, (train_a[idx], train_b[idx], train_c[idx]), log_vars)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    log_var_optimizer.step()
    if step % 10 == 0:
        print(f"step {step} loss {loss.item():.4f} tasks "
              + " ".join(f"{t.item():.4f}" for t in task_losses)
              + " sigma " + " ".join(f"{s:.3f}" for s in (0.5 * log_vars).exp().tolist()))

if args.out:
    torch.save({**{f"model.{k}": v for k, v in model.state_dict().items()},
                "log_vars": log_vars.detach().clone()}, args.out)
