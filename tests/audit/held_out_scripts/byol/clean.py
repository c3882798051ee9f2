"""BYOL at a tiny size, written after Grill et al., "Bootstrap your own latent" (arXiv:2006.07733)
and lucidrains/byol-pytorch byol_pytorch/byol_pytorch.py (``EMA``, ``update_moving_average``,
``loss_fn`` as ``2 - 2 * cosine``, the symmetric loss over two views, the target encoder a
``copy.deepcopy`` of the online one with ``requires_grad`` set to False): an online network
(encoder, projector, predictor) regresses the target network's projection of the other view;
the target follows the online weights by an exponential moving average after each step. The
target is frozen by ``requires_grad_(False)``, so its projections need no ``detach``; the
moving average is written in place under ``torch.no_grad()``. Data: random vectors, two noisy
views each, made in the script. As published: clean."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--beta", type=float, default=0.9)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, hidden, proj = 10, 32, 8
data = torch.randn(256, dim)


def mlp(dim_in, dim_out):
    return nn.Sequential(nn.Linear(dim_in, hidden), nn.ReLU(), nn.Linear(hidden, dim_out))


class NetWrapper(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = mlp(dim, hidden)
        self.projector = mlp(hidden, proj)

    def forward(self, x):
        return self.projector(self.encoder(x))


def loss_fn(x, y):
    x = F.normalize(x, dim=-1, p=2)
    y = F.normalize(y, dim=-1, p=2)
    return 2 - 2 * (x * y).sum(dim=-1)


@torch.no_grad()
def update_moving_average(beta, ma_model, current_model):
    for current_params, ma_params in zip(current_model.parameters(), ma_model.parameters()):
        ma_params.mul_(beta).add_(current_params, alpha=1 - beta)


online_encoder = NetWrapper()
online_predictor = mlp(proj, proj)
target_encoder = copy.deepcopy(online_encoder)
target_encoder.requires_grad_(False)
optimizer = torch.optim.Adam([*online_encoder.parameters(), *online_predictor.parameters()],
                             lr=3e-3)

for step in range(args.steps):
    x = data[torch.randint(0, len(data), (args.batch_size,))]
    image_one = x + 0.2 * torch.randn_like(x)
    image_two = x * (1 + 0.2 * torch.randn_like(x))
    online_pred_one = online_predictor(online_encoder(image_one))
    online_pred_two = online_predictor(online_encoder(image_two))
    target_proj_one = target_encoder(image_one)
    target_proj_two = target_encoder(image_two)
    loss_one = loss_fn(online_pred_one, target_proj_two)
    loss_two = loss_fn(online_pred_two, target_proj_one)
    loss = (loss_one + loss_two).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    update_moving_average(args.beta, target_encoder, online_encoder)
    if step % 10 == 0:
        print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({"online_encoder": online_encoder.state_dict(),
                "online_predictor": online_predictor.state_dict(),
                "target_encoder": target_encoder.state_dict()}, args.out)
