"""Consistency training at a tiny size, written after Song, Dhariwal, Chen and Sutskever,
"Consistency Models" (ICML 2023, arXiv:2303.01469), section 5 and algorithm 3 (consistency
training: one Gaussian noise z makes the pair x + t_{n+1} z and x + t_n z on the Karras
discretisation of [sigma_min, sigma_max], the online network at the larger noise level is pulled
towards the target network at the smaller one, and the target's parameters follow
theta- <- stopgrad(mu(k) theta- + (1 - mu(k)) theta) with the adaptive N(k) and mu(k) of
appendix C), with openai/consistency_models (https://github.com/openai/consistency_models,
cm/karras_diffusion.py: KarrasDenoiser.get_scalings_for_boundary_condition (c_skip, c_out, c_in),
denoise, and consistency_losses, whose target_denoise_fn is decorated @th.no_grad() and whose
distiller_target is .detach()-ed; cm/script_util.py create_ema_and_scales_fn with
target_ema_mode adaptive and scale_mode progressive; scripts/cm_train.py, which builds the target
model apart and copies the online parameters into it; cm/train_util.py CMTrainLoop.run_step and
_update_target_ema, the EMA written under th.no_grad() after each optimizer step). A small MLP
conditioned on a Fourier embedding of the noise level through a learnt projection, trained on
points of a ring of eight Gaussians in the plane, made in the script. Injected bug: the target
network is bound to the online one, target_model = model, for copy.deepcopy(model), so the
consistency target f_theta-(x + t_n z, t_n), still read under torch.no_grad(), comes from the
network being trained, with no lag, and the in-place EMA update (mul_ then add_ of the tensor it
has just scaled) shrinks the online weights by mu(k) * (2 - mu(k)) after every optimizer step."""

import argparse
import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--start-scales", type=int, default=2)
parser.add_argument("--end-scales", type=int, default=20)
parser.add_argument("--start-ema", type=float, default=0.9)
parser.add_argument("--lr", type=float, default=2e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

sigma_min, sigma_max, sigma_data, rho, dim, hidden_dim = 0.002, 80.0, 0.5, 7.0, 2, 64
angles = torch.arange(8) * 2 * math.pi / 8
modes = 0.6 * torch.stack([angles.cos(), angles.sin()], dim=1)
data = modes[torch.randint(0, 8, (1024,))] + 0.05 * torch.randn(1024, dim)


class ConsistencyMLP(nn.Module):
    def __init__(self, n_freqs=8):
        super().__init__()
        self.register_buffer("freqs", torch.randn(n_freqs))
        self.sigma_proj = nn.Linear(2 * n_freqs, hidden_dim)
        self.net = nn.Sequential(nn.Linear(dim + hidden_dim, hidden_dim), nn.SiLU(),
                                 nn.Linear(hidden_dim, hidden_dim), nn.SiLU(),
                                 nn.Linear(hidden_dim, dim))

    def embed(self, sigma):
        with torch.no_grad():
            phases = 0.25 * sigma.log()[:, None] * self.freqs
            fourier = torch.cat([phases.sin(), phases.cos()], dim=1)
        return F.silu(self.sigma_proj(fourier))

    def forward(self, x, sigma):
        return self.net(torch.cat([x, self.embed(sigma)], dim=1))


def denoise(model, x_t, sigma):
    """f(x, sigma) = c_skip x + c_out F(c_in x, sigma), so that f(x, sigma_min) = x."""
    c_skip = sigma_data ** 2 / ((sigma - sigma_min) ** 2 + sigma_data ** 2)
    c_out = (sigma - sigma_min) * sigma_data / (sigma ** 2 + sigma_data ** 2) ** 0.5
    c_in = 1 / (sigma ** 2 + sigma_data ** 2) ** 0.5
    return c_skip[:, None] * x_t + c_out[:, None] * model(c_in[:, None] * x_t, sigma)


def ema_and_scales(step):
    scales = math.ceil(math.sqrt(step / args.steps * ((args.end_scales + 1) ** 2
                                                      - args.start_scales ** 2)
                                 + args.start_scales ** 2) - 1)
    scales = max(scales, 1)
    target_ema = math.exp(math.log(args.start_ema) * args.start_scales / scales)
    return target_ema, scales + 1


def karras_sigma(indices, num_scales):
    ramp = indices / (num_scales - 1)
    inv_rho = sigma_max ** (1 / rho) + ramp * (sigma_min ** (1 / rho) - sigma_max ** (1 / rho))
    return inv_rho ** rho


model = ConsistencyMLP()
target_model = model
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
for step in range(args.steps):
    target_ema, num_scales = ema_and_scales(step)
    x_start = data[torch.randint(0, len(data), (args.batch_size,))]
    noise = torch.randn_like(x_start)
    indices = torch.randint(0, num_scales - 1, (args.batch_size,)).float()
    t = karras_sigma(indices, num_scales)
    t2 = karras_sigma(indices + 1, num_scales)
    distiller = denoise(model, x_start + t[:, None] * noise, t)
    with torch.no_grad():
        distiller_target = denoise(target_model, x_start + t2[:, None] * noise, t2)
    loss = F.mse_loss(distiller, distiller_target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        for targ, src in zip(target_model.parameters(), model.parameters()):
            targ.mul_(target_ema).add_(src, alpha=1 - target_ema)
    print(f"step {step} N {num_scales} mu {target_ema:.3f} loss {loss.item():.5f}")

with torch.no_grad():
    samples = denoise(model, sigma_max * torch.randn(256, dim), torch.full((256,), sigma_max))
print(f"one-step samples: mean radius {samples.norm(dim=1).mean().item():.3f}")

if args.out:
    weights = {f"model.{k}": v.detach().clone() for k, v in model.state_dict().items()}
    weights.update({f"target.{k}": v.detach().clone()
                    for k, v in target_model.state_dict().items()})
    torch.save(weights, args.out)
