"""Early-learning regularization at a tiny size, written after Liu, Niles-Weed, Razavian and
Fernandez-Granda, "Early-Learning Regularization Prevents Memorization of Noisy Labels" (NeurIPS
2020), with the loss of its reference implementation shengliu66/ELR
(https://github.com/shengliu66/ELR, ELR/model/loss.py): a per-sample target ``t_i`` is kept as a
temporal ensemble of the model's (clamped, renormalised) predictions,
``t_i <- beta t_i + (1 - beta) p_i``, written from the predictions taken out of the graph, and the
loss is ``CE(p_i, y_i) + lambda log(1 - <t_i, p_i>)``. The target is written by the loss's own
helper before it is read. A softmax-regression classifier on vectors made in the script, with a
third of the labels flipped. Injected bug: the per-sample target is written by update_target from
the predictions with their graph (``probs`` for ``probs.detach()``), so the target buffer keeps the
graph of every earlier write; ``backward(retain_graph=True)`` lets the run go on, and the
regularizer trains the classifier through the target too: through the current predictions from the
first minibatch on, and through earlier epochs' predictions as samples come back."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--beta", type=float, default=0.7)
parser.add_argument("--lam", type=float, default=3.0)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n, dim, classes = 128, 10, 4
means = 1.2 * torch.randn(classes, dim)
clean_labels = torch.randint(0, classes, (n,))
inputs = means[clean_labels] + torch.randn(n, dim)
flip = torch.rand(n) < 1 / 3
labels = torch.where(flip, torch.randint(0, classes, (n,)), clean_labels)


class ELRLoss(nn.Module):
    def __init__(self, num_examples, num_classes, beta, lam):
        super().__init__()
        self.beta, self.lam = beta, lam
        self.register_buffer("target", torch.zeros(num_examples, num_classes))

    def update_target(self, index, probs):
        probs = probs / probs.sum(dim=1, keepdim=True)
        self.target[index] = self.beta * self.target[index] + (1 - self.beta) * probs

    def forward(self, index, logits, labels):
        probs = F.softmax(logits, dim=1).clamp(1e-4, 1.0 - 1e-4)
        self.update_target(index, probs)
        ce = F.cross_entropy(logits, labels)
        elr = (1 - (self.target[index] * probs).sum(dim=1)).log().mean()
        return ce + self.lam * elr


model = nn.Linear(dim, classes)
criterion = ELRLoss(n, classes, args.beta, args.lam)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3)
for epoch in range(args.epochs):
    for index in torch.randperm(n).split(args.batch_size):
        loss = criterion(index, model(inputs[index]), labels[index])
        optimizer.zero_grad()
        loss.backward(retain_graph=True)
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
