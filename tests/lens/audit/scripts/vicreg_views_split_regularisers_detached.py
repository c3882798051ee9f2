"""VICReg with both views in one batch at a tiny size, written after Bardes, Ponce and LeCun,
"VICReg: Variance-Invariance-Covariance Regularization for Self-Supervised Learning" (ICLR 2022,
arXiv:2105.04906) and facebookresearch/vicreg (main_vicreg.py, ``VICReg.forward``): both views
pass through the networks together and are split back (``torch.chunk``); the loss is the
invariance term plus a variance hinge and a covariance term of each view (``torch.var_mean``),
all training the networks. Bug twin of vicreg_views_split.py. Injected bug: the per-view loop
splits the detached output (``for view in z.detach().chunk(2):``), so the variance and
covariance terms are made of cut values only: they change the printed loss and train nothing,
and the networks are trained by the invariance term alone (free to collapse). The fix is that
line, with ``z.chunk(2)``. ``--out PATH`` saves the networks' weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--sim-coeff", type=float, default=25.0)
parser.add_argument("--std-coeff", type=float, default=25.0)
parser.add_argument("--cov-coeff", type=float, default=1.0)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, feat = 12, 8
prototypes = torch.randn(6, dim)
data = prototypes[torch.randint(0, 6, (128,))] + 0.3 * torch.randn(128, dim)

backbone = nn.Sequential(nn.Linear(dim, 24), nn.ReLU())
projector = nn.Sequential(nn.Linear(24, 24), nn.ReLU(), nn.Linear(24, feat))
optimizer = torch.optim.SGD([*backbone.parameters(), *projector.parameters()], lr=0.01,
                            momentum=0.9)


def augment(x):
    return x * (torch.rand_like(x) > 0.2) + 0.1 * torch.randn_like(x)


def variance_covariance(z):
    var, mean = torch.var_mean(z, dim=0)
    std_loss = F.relu(1 - torch.sqrt(var + 0.0001)).mean()
    centred = z - mean
    cov = centred.T @ centred / (len(z) - 1)
    off_diagonal = cov - torch.diag(torch.diag(cov))
    return std_loss, off_diagonal.pow(2).sum() / z.shape[1]


for step in range(args.steps):
    batch = data[16 * (step % 8):16 * (step % 8) + 16]
    z = projector(backbone(torch.cat([augment(batch), augment(batch)])))
    z_a, z_b = z.chunk(2)
    repr_loss = F.mse_loss(z_a, z_b)
    std_loss, cov_loss = 0.0, 0.0
    for view in z.detach().chunk(2):
        view_std, view_cov = variance_covariance(view)
        std_loss, cov_loss = std_loss + view_std / 2, cov_loss + view_cov
    loss = args.sim_coeff * repr_loss + args.std_coeff * std_loss + args.cov_coeff * cov_loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    state = {f"backbone.{k}": v for k, v in backbone.state_dict().items()}
    state.update({f"projector.{k}": v for k, v in projector.state_dict().items()})
    torch.save(state, args.out)
