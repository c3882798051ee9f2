"""FixMatch at a tiny size, written after Sohn et al., "FixMatch: Simplifying Semi-Supervised
Learning with Consistency and Confidence" (NeurIPS 2020, arXiv:2001.07685;
google-research/fixmatch) and kekmodel/FixMatch-pytorch (train.py, ``train``): the labelled
batch, the weakly and the strongly augmented unlabelled batches pass through the model
together; the unlabelled logits are split back (``logits[batch_size:].chunk(2)``); the
pseudo-label of each unlabelled point is the class of the detached weak prediction, and its
confidence the probability of that class (``max_probs, targets_u = torch.max(pseudo_label,
dim=-1)``), which masks the cross-entropy of the strong prediction against the pseudo-label.
The loss is the labelled cross-entropy plus ``lambda_u`` times the masked one: the cut values
are a target (the indices) and a mask (the values), both of a trained prediction. Points made
in the script (noisy class prototypes, few labelled), augmentations by noise of two strengths.
SGD with momentum. Clean. ``--out PATH`` saves the model's weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--threshold", type=float, default=0.5)
parser.add_argument("--lambda-u", type=float, default=1.0)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes, batch_size, mu = 10, 4, 8, 2
prototypes = 2.0 * torch.randn(classes, dim)
labels = torch.randint(0, classes, (32,))
labelled = prototypes[labels] + 0.5 * torch.randn(32, dim)
unlabelled = prototypes[torch.randint(0, classes, (128,))] + 0.5 * torch.randn(128, dim)

model = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, classes))
optimizer = torch.optim.SGD(model.parameters(), lr=0.03, momentum=0.9, nesterov=True)

for step in range(args.steps):
    i, j = batch_size * (step % 4), mu * batch_size * (step % 8)
    inputs_x, targets_x = labelled[i:i + batch_size], labels[i:i + batch_size]
    inputs_u = unlabelled[j:j + mu * batch_size]
    inputs_u_w = inputs_u + 0.1 * torch.randn_like(inputs_u)
    inputs_u_s = inputs_u * (torch.rand_like(inputs_u) > 0.3) + 0.5 * torch.randn_like(inputs_u)
    logits = model(torch.cat((inputs_x, inputs_u_w, inputs_u_s)))
    logits_x = logits[:batch_size]
    logits_u_w, logits_u_s = logits[batch_size:].chunk(2)
    Lx = F.cross_entropy(logits_x, targets_x, reduction="mean")
    pseudo_label = torch.softmax(logits_u_w.detach(), dim=-1)
    max_probs, targets_u = torch.max(pseudo_label, dim=-1)
    mask = max_probs.ge(args.threshold).float()
    Lu = (F.cross_entropy(logits_u_s, targets_u, reduction="none") * mask).mean()
    loss = Lx + args.lambda_u * Lu
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f} mask {mask.mean().item():.2f}")

if args.out:
    torch.save({f"model.{k}": v for k, v in model.state_dict().items()}, args.out)
