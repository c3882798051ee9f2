"""Co-regularised training of several models at a tiny size, written after Zhou and Chen,
"Learning from Noisy Labels for Entity-Centric Information Extraction" (EMNLP 2021,
arXiv:2104.08656) and wzhouad/NLL-IE (``NLLModel.forward``: the models' mean cross-entropy plus
``alpha_t`` times the mean over models of ``kl_div(avg_prob, prob)``, the KL from the models'
average prediction to each model's, where ``avg_prob = torch.stack(probs, dim=0).mean(0)`` is
not cut: the agreement trains every model, the average included, on purpose). Two models of one
shape from different initialisations, one Adam optimizer over both, labels of a quarter of the
points flipped. Points made in the script. Clean. ``--out PATH`` saves both models' weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 8, 4
centers = 1.5 * torch.randn(classes, dim)
labels = torch.randint(0, classes, (96,))
points = centers[labels] + 0.7 * torch.randn(96, dim)

flip = torch.rand(96) < 0.25
labels = torch.where(flip, torch.randint(0, classes, (96,)), labels)
models = nn.ModuleList([
    nn.Sequential(nn.Linear(dim, 16), nn.ReLU(), nn.Linear(16, classes)) for _ in range(2)
])
optimizer = torch.optim.Adam(models.parameters(), lr=0.01)
alpha_t = 2.0


def kl_div(p, q):
    return (p * ((p + 1e-5).log() - (q + 1e-5).log())).sum(-1)


for step in range(args.steps):
    lo = 16 * (step % 6)
    x, y = points[lo:lo + 16], labels[lo:lo + 16]
    logits = [m(x) for m in models]
    loss = sum(F.cross_entropy(z, y) for z in logits) / len(models)
    probs = [F.softmax(z, dim=-1) for z in logits]
    avg_prob = torch.stack(probs, dim=0).mean(0)
    reg_loss = sum(kl_div(avg_prob, prob) for prob in probs) / len(models)
    loss = loss + alpha_t * reg_loss.mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f} reg {reg_loss.mean().item():.4f}")

if args.out:
    torch.save({f"models.{k}": v for k, v in models.state_dict().items()}, args.out)
