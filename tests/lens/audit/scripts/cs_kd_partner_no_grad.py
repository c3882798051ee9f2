"""Class-wise self-knowledge distillation at a tiny size, written after Yun, Park, Lee and Shin,
"Regularizing Class-wise Predictions via Self-knowledge Distillation" (CVPR 2020,
arXiv:2003.13964; alinlab/cs-kd, train.py with its ``KDLoss``): each sample of a batch is paired
with another sample of the same class, and the network's softened prediction on the partner is
the soft target of its prediction on the sample, through a KL helper the script defines,
``kd_loss(student_logits, teacher_logits, T)``, added to the cross-entropy of the samples. As in
the reference's train.py, the partners' forward runs under ``torch.no_grad()``; here the loop
passes those logits to the helper as they are, with no ``.detach()`` at the call, since they have
no graph to cut. An MLP on Gaussian clusters made in the script, one SGD optimizer.
As published: clean.
``--out PATH`` saves the network's weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--temperature", type=float, default=4.0)
parser.add_argument("--lamda", type=float, default=1.0)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes, per_class = 10, 4, 60
means = 1.5 * torch.randn(classes, dim)
# the training set sorted by class: class c holds rows c * per_class to (c + 1) * per_class
labels = torch.arange(classes).repeat_interleave(per_class)
data = means[labels] + torch.randn(classes * per_class, dim)


def kd_loss(student_logits, teacher_logits, T):
    log_p = F.log_softmax(student_logits / T, dim=1)
    q = F.softmax(teacher_logits / T, dim=1)
    return F.kl_div(log_p, q, reduction="sum") * T**2 / student_logits.shape[0]


model = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, classes))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

for step in range(args.steps):
    idx = torch.randint(0, len(data), (args.batch_size,))
    y = labels[idx]
    partner = y * per_class + torch.randint(0, per_class, (args.batch_size,))
    logits = model(data[idx])
    with torch.no_grad():
        partner_logits = model(data[partner])
    consistency = kd_loss(logits, partner_logits, args.temperature)
    loss = F.cross_entropy(logits, y) + args.lamda * consistency
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
