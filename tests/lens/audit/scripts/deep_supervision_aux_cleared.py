"""Deep supervision with companion classifiers whose outputs the model keeps in a list attribute,
at a tiny size, written after Lee et al., "Deeply-Supervised Nets" (AISTATS 2015,
arXiv:1409.5185: a companion classifier on each hidden layer, its loss added to the output's
with a weight that decays over training) and the auxiliary classifiers of Szegedy et al.,
"Going Deeper with Convolutions" (CVPR 2015, arXiv:1409.4842: auxiliary losses weighted 0.3,
used in training only). The model appends each companion head's logits to
``model.aux_logits`` during a training forward pass; the loop reads the list for the companion
losses, backpropagates the total, steps, and empties the list with ``.clear()``; every 4 steps
an evaluation pass in ``eval()`` mode under ``torch.no_grad()`` records nothing. The network:
three hidden linear layers with ReLU, companions on the first two. The data, in the script: 4
Gaussian classes in 10 dimensions, drawn afresh for each batch of 32. 12 steps. ``--out PATH``
saves the model's state_dict."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--dim", type=int, default=10)
parser.add_argument("--width", type=int, default=24)
parser.add_argument("--classes", type=int, default=4)
parser.add_argument("--aux-weight", type=float, default=0.3)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

centres = 2.0 * torch.randn(args.classes, args.dim)


def get_batch():
    y = torch.randint(0, args.classes, (args.batch_size,))
    return centres[y] + torch.randn(args.batch_size, args.dim), y


class DeeplySupervisedNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.ModuleList([nn.Linear(args.dim, args.width),
                                     nn.Linear(args.width, args.width),
                                     nn.Linear(args.width, args.width)])
        self.companions = nn.ModuleList([nn.Linear(args.width, args.classes)
                                         for _ in range(2)])
        self.classifier = nn.Linear(args.width, args.classes)
        self.aux_logits = []

    def forward(self, x):
        for k, layer in enumerate(self.hidden):
            x = F.relu(layer(x))
            if self.training and k < len(self.companions):
                self.aux_logits.append(self.companions[k](x))
        return self.classifier(x)


model = DeeplySupervisedNet()
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

for step in range(args.steps):
    model.train()
    x, y = get_batch()
    output = model(x)
    alpha = args.aux_weight * (1 - step / args.steps)
    aux_loss = sum(F.cross_entropy(logits, y) for logits in model.aux_logits)
    loss = F.cross_entropy(output, y) + alpha * aux_loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    model.aux_logits.clear()
    if step % 4 == 3:
        model.eval()
        with torch.no_grad():
            x, y = get_batch()
            accuracy = (model(x).argmax(1) == y).float().mean().item()
        print(f"step {step}: loss {loss.item():.4f} accuracy {accuracy:.2f}")

if args.out:
    torch.save({"model": model.state_dict()}, args.out)
