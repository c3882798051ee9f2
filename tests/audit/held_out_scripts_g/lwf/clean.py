"""Learning without Forgetting at a tiny size, written after Li and Hoiem, "Learning without
Forgetting" (ECCV 2016, TPAMI 2017, arXiv:1606.09282), Algorithm 1, with the LwF of
ContinualAI/avalanche (https://github.com/ContinualAI/avalanche,
avalanche/training/regularization.py LearningWithoutForgetting, avalanche/training/plugins/lwf.py
LwFPlugin, avalanche/models/dynamic_modules.py MultiHeadClassifier). A shared backbone and the old
task's head are first trained by cross-entropy on task 1; at the end of the task a deep copy of the
model is kept (LearningWithoutForgetting.update) and a head for task 2 is added, with an optimizer
over all the parameters. Then, as in the paper's Algorithm 1, a warm-up trains the new head alone
(the backbone and the old head frozen with requires_grad_(False)), after which everything is
unfrozen and trained jointly by cross-entropy on the new head plus the distillation loss of the old
head: the KL divergence, at temperature T, from the old head's softened outputs to those of the kept
copy on the same task-2 inputs, computed under torch.no_grad(). Gaussian clusters in a low-dimensional space, lifted by a
random map, one set per task, made in the script. As published: clean."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--task1-steps", type=int, default=12)
parser.add_argument("--warmup-steps", type=int, default=5)
parser.add_argument("--task2-steps", type=int, default=10)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--temperature", type=float, default=2.0)
parser.add_argument("--lambda-old", type=float, default=1.0)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, hidden, n_classes, n_points = 16, 32, 3, 384


def make_task():
    lift = torch.randn(4, dim)
    labels = torch.randint(0, n_classes, (n_points,))
    points = 2 * torch.randn(n_classes, 4)[labels] + torch.randn(n_points, 4)
    return torch.tanh(points @ lift / 2), labels


x1, y1 = make_task()
x2, y2 = make_task()


class MultiHeadNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(),
                                      nn.Linear(hidden, hidden), nn.ReLU())
        self.heads = nn.ModuleList()

    def add_head(self, n_out):
        self.heads.append(nn.Linear(hidden, n_out))

    def forward(self, x):
        features = self.backbone(x)
        return [head(features) for head in self.heads]


def distillation_loss(out, prev_out, temperature):
    log_p = F.log_softmax(out / temperature, dim=1)
    q = F.softmax(prev_out / temperature, dim=1)
    return F.kl_div(log_p, q, reduction="batchmean")


model = MultiHeadNet()
model.add_head(n_classes)

# phase 1: task 1, backbone and old head
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
for step in range(args.task1_steps):
    idx = torch.randint(0, n_points, (args.batch_size,))
    loss = F.cross_entropy(model(x1[idx])[0], y1[idx])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"task 1 step {step} loss {loss.item():.4f}")

# end of task 1: keep the old model; task 2 gets a new head
prev_model = copy.deepcopy(model)
prev_model.eval()
model.add_head(n_classes)
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

# phase 2: warm-up, the new head alone
model.backbone.requires_grad_(False)
model.heads[0].requires_grad_(False)
for step in range(args.warmup_steps):
    idx = torch.randint(0, n_points, (args.batch_size,))
    loss = F.cross_entropy(model(x2[idx])[1], y2[idx])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"warm-up step {step} loss {loss.item():.4f}")

# phase 3: joint optimisation of the backbone and both heads
model.requires_grad_(True)
for step in range(args.task2_steps):
    idx = torch.randint(0, n_points, (args.batch_size,))
    inputs, labels = x2[idx], y2[idx]
    with torch.no_grad():
        old_targets = prev_model(inputs)[0]
    outputs = model(inputs)
    loss_new = F.cross_entropy(outputs[1], labels)
    loss_old = distillation_loss(outputs[0], old_targets, args.temperature)
    loss = loss_new + args.lambda_old * loss_old
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"joint step {step} new {loss_new.item():.4f} distillation {loss_old.item():.4f}")

if args.out:
    torch.save({"model": model.state_dict()}, args.out)
