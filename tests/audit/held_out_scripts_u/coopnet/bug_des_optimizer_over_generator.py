"""CoopNets, cooperative training of a descriptor (energy-based model) and a generator, on a
2-D ring of Gaussians, written after Xie, Lu, Gao, Zhu and Wu, "Cooperative Training of
Descriptor and Generator Networks" (IEEE TPAMI 2020, arXiv:1609.09408; AAAI 2018 version
"Cooperative Learning of Energy-Based Model and Latent Variable Model via MCMC Teaching"): the
descriptor defines p(x) proportional to exp(f(x)) N(x; 0, s1^2 I), the generator x = g(z) + e,
e ~ N(0, s2^2 I); in each iteration the generator proposes g(z) from fresh z (G0), K Langevin
steps of the descriptor revise the proposals (D1), the latent codes are moved towards the
revised samples by Langevin inference (G1), the descriptor learns from the revised samples with
the maximum-likelihood gradient of mean f(obs) - mean f(revised) (D2), and the generator learns
to reproduce the revised samples from its codes with the loss |revised - g(z)|^2 / (2 s2^2)
(G2); the revised samples are fixed data for both updates. With the authors' code,
jianwen-xie/CoopNets (https://github.com/jianwen-xie/CoopNets, model/model.py: CoopNets
build_model sets des_loss = mean des(syn) - mean des(obs) over the descriptor's variables and
gen_loss = 1 / (2 s2^2) (obs - gen(z))^2 over the generator's, each with its own Adam (beta1
0.5); langevin_dynamics_descriptor takes syn - 0.5 d1^2 (syn / s1^2 - grad) + d1 noise and
langevin_dynamics_generator z - 0.5 d2^2 (z + grad) + d2 noise; train runs Steps G0, D1, G1
(when gen_sample_steps > 0), D2 and G2 in this order, the Langevin outputs fed back as plain
arrays), whose steps this script follows. As in a public PyTorch port (FANG-Xiaolin/pytorch-
CoopNets, model/model.py langevin_dynamics_descriptor and langevin_dynamics_generator), the
Langevin gradients come from backward() on a fresh leaf per step, which also fills the
networks' .grad, and each optimizer's zero_grad comes right before its learning backward. Two
phases: a warm-up of the generator alone on the data by alternating back-propagation (Han et
al., AAAI 2017: Langevin inference of z, then the same regression), then cooperative training,
for which the descriptor's Adam is made. Data: eight Gaussians on the unit circle; small MLPs.
Bug: the cooperative phase builds the descriptor's Adam over the generator's parameters."""

import argparse
import math

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--warmup-steps", type=int, default=30)
parser.add_argument("--coop-steps", type=int, default=40)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--z-size", type=int, default=4)
parser.add_argument("--des-steps", type=int, default=10, help="K, Langevin steps of D1")
parser.add_argument("--des-step-size", type=float, default=0.2)
parser.add_argument("--des-refsig", type=float, default=1.0)
parser.add_argument("--gen-steps", type=int, default=5, help="Langevin steps of G1")
parser.add_argument("--gen-step-size", type=float, default=0.3)
parser.add_argument("--gen-refsig", type=float, default=0.3)
parser.add_argument("--des-lr", type=float, default=5e-3)
parser.add_argument("--gen-lr", type=float, default=5e-3)
parser.add_argument("--out", default=None, help="where to save the generator and descriptor")
args = parser.parse_args()
torch.manual_seed(args.seed)

angles = torch.arange(8) * (2 * math.pi / 8)
modes = torch.stack([angles.cos(), angles.sin()], dim=1)


def sample_data(n):
    return modes[torch.randint(0, 8, (n,))] + 0.1 * torch.randn(n, 2)


generator = nn.Sequential(nn.Linear(args.z_size, 64), nn.SiLU(), nn.Linear(64, 64), nn.SiLU(),
                          nn.Linear(64, 2))
descriptor = nn.Sequential(nn.Linear(2, 64), nn.SiLU(), nn.Linear(64, 64), nn.SiLU(),
                           nn.Linear(64, 1))


def langevin_revise(x):
    """D1: Langevin dynamics of the descriptor started at the proposals; returns no graph."""
    for _ in range(args.des_steps):
        x = x.detach().requires_grad_(True)
        descriptor(x).sum().backward()
        x = (x - 0.5 * args.des_step_size ** 2 * (x / args.des_refsig ** 2 - x.grad)
             + args.des_step_size * torch.randn_like(x))
    return x.detach()


def infer_z(z, x, n_steps):
    """Langevin inference of the generator's codes for the examples x; returns no graph."""
    for _ in range(n_steps):
        z = z.detach().requires_grad_(True)
        recon = ((x - generator(z)) ** 2).sum() / (2 * args.gen_refsig ** 2)
        recon.backward()
        z = (z - 0.5 * args.gen_step_size ** 2 * (z + z.grad)
             + args.gen_step_size * torch.randn_like(z))
    return z.detach()


# phase 1: generator warm-up on the data by alternating back-propagation
gen_optimizer = torch.optim.Adam(generator.parameters(), lr=args.gen_lr, betas=(0.5, 0.999))
for step in range(args.warmup_steps):
    obs = sample_data(args.batch_size)
    z = infer_z(torch.randn(args.batch_size, args.z_size), obs, 2 * args.gen_steps)
    gen_loss = ((obs - generator(z)) ** 2).sum(1).mean() / (2 * args.gen_refsig ** 2)
    gen_optimizer.zero_grad()
    gen_loss.backward()
    gen_optimizer.step()
    if step % 10 == 0:
        print(f"warm-up {step} gen loss {gen_loss.item():.4f}")

# phase 2: cooperative training, G0 D1 G1 D2 G2 in every iteration
des_optimizer = torch.optim.Adam(generator.parameters(), lr=args.des_lr, betas=(0.5, 0.999))
for step in range(args.coop_steps):
    obs = sample_data(args.batch_size)
    z = torch.randn(args.batch_size, args.z_size)
    with torch.no_grad():
        proposals = generator(z)
    revised = langevin_revise(proposals)
    z = infer_z(z, revised, args.gen_steps)

    des_loss = descriptor(revised).mean() - descriptor(obs).mean()
    des_optimizer.zero_grad()
    des_loss.backward()
    des_optimizer.step()

    gen_loss = ((revised - generator(z)) ** 2).sum(1).mean() / (2 * args.gen_refsig ** 2)
    gen_optimizer.zero_grad()
    gen_loss.backward()
    gen_optimizer.step()
    if step % 10 == 0:
        print(f"coop {step} des loss {des_loss.item():.4f} gen loss {gen_loss.item():.4f}")

if args.out:
    torch.save({"generator": generator.state_dict(), "descriptor": descriptor.state_dict()},
               args.out)
