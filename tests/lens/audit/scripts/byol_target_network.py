"""BYOL at a tiny size, written after Grill et al., "Bootstrap Your Own Latent: A New Approach to
Self-Supervised Learning" (NeurIPS 2020, arXiv:2006.07733) and lucidrains/byol-pytorch
(byol_pytorch/byol_pytorch.py, ``BYOL.forward`` and ``loss_fn``): an online network (encoder,
projector and predictor) and a target network (encoder and projector), an exponential moving
average of the online one; both views go through both networks, the target's projections are
computed under ``torch.no_grad()`` and detached, and they are only the targets of the online
predictions (``loss_fn(online_pred_one, target_proj_two) + loss_fn(online_pred_two,
target_proj_one)``). Vectors made in the script (prototypes plus noise). Adam on the online
network. Clean: the cut outputs are comparison targets of trained predictions. ``--out PATH``
saves the online and the target weights."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--tau", type=float, default=0.99)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, proj = 12, 8
prototypes = torch.randn(5, dim)
data = prototypes[torch.randint(0, 5, (96,))] + 0.2 * torch.randn(96, dim)

online = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, proj))
predictor = nn.Sequential(nn.Linear(proj, 16), nn.ReLU(), nn.Linear(16, proj))
target = copy.deepcopy(online)
target.requires_grad_(False)
optimizer = torch.optim.Adam([*online.parameters(), *predictor.parameters()], lr=0.003)


def loss_fn(x, y):
    x, y = F.normalize(x, dim=-1), F.normalize(y, dim=-1)
    return 2 - 2 * (x * y).sum(dim=-1)


def augment(x):
    return x * (torch.rand_like(x) > 0.2) + 0.1 * torch.randn_like(x)


for step in range(args.steps):
    x = data[16 * (step % 6):16 * (step % 6) + 16]
    one, two = augment(x), augment(x)
    online_pred_one, online_pred_two = predictor(online(one)), predictor(online(two))
    with torch.no_grad():
        target_proj_one, target_proj_two = target(one).detach(), target(two).detach()
    loss = (loss_fn(online_pred_one, target_proj_two) + loss_fn(online_pred_two, target_proj_one))
    loss = loss.mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        for p_o, p_t in zip(online.parameters(), target.parameters()):
            p_t.mul_(args.tau).add_((1 - args.tau) * p_o)
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({**{f"online.{k}": v for k, v in online.state_dict().items()},
                **{f"predictor.{k}": v for k, v in predictor.state_dict().items()},
                **{f"target.{k}": v for k, v in target.state_dict().items()}}, args.out)
