"""Unrolled GAN at a tiny size, written after Metz, Poole, Pfau and Sohl-Dickstein, "Unrolled
Generative Adversarial Networks" (ICLR 2017, arXiv:1611.02163), section 2 (the surrogate loss
f_K(theta_G, theta_D) = f(theta_G, theta_D^K(theta_G, theta_D)) with the unrolled updates
theta_D^{k+1} = theta_D^k + eta^k df/dtheta_D^k: the generator descends df_K/dtheta_G, whose
second term runs back through the K unrolled discriminator updates, and so through the
discriminator's response to the samples, while the discriminator itself takes a plain step on
f) and section 3.1 (a mixture of eight Gaussians on a ring), with poolio/unrolled_gan
(https://github.com/poolio/unrolled_gan, "Unrolled GAN demo.ipynb": the discriminator's loss,
d_train_op built from the Adam updates of disc_vars, the unrolled loss made by graph_replace of
the loss with the update dict applied unrolling_steps times, so that the unrolled parameters
stay functions of the current ones and of the generator's samples, and g_train_op minimising
-unrolled_loss over gen_vars alone). The unrolled updates here are the paper's plain gradient
steps, taken with torch.autograd.grad(..., create_graph=True) on functional copies of the
discriminator's weights (torch.func.functional_call); the discriminator's own update is a plain
Adam step on the detached samples. Data made in the script; small MLPs. As published: clean."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iters", type=int, default=15)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--unrolling-steps", type=int, default=3, help="K")
parser.add_argument("--unroll-lr", type=float, default=0.1, help="eta of the unrolled steps")
parser.add_argument("--d-lr", type=float, default=1e-3)
parser.add_argument("--g-lr", type=float, default=1e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

z_dim, hidden_dim, n_mixture, radius, std = 8, 32, 8, 2.0, 0.02


def sample_mixture(n):
    """Eight Gaussians of std 0.02 on a circle of radius 2."""
    k = torch.randint(0, n_mixture, (n,)).float()
    centers = torch.stack([torch.cos(2 * math.pi * k / n_mixture),
                           torch.sin(2 * math.pi * k / n_mixture)], dim=1)
    return radius * centers + std * torch.randn(n, 2)


G = nn.Sequential(nn.Linear(z_dim, hidden_dim), nn.ReLU(),
                  nn.Linear(hidden_dim, hidden_dim), nn.ReLU(),
                  nn.Linear(hidden_dim, 2))
D = nn.Sequential(nn.Linear(2, hidden_dim), nn.ReLU(),
                  nn.Linear(hidden_dim, 1))
g_optimizer = torch.optim.Adam(G.parameters(), lr=args.g_lr, betas=(0.5, 0.999))
d_optimizer = torch.optim.Adam(D.parameters(), lr=args.d_lr, betas=(0.5, 0.999))


def discriminator_loss(params, x_real, x_fake):
    """-f: the cross-entropy of D with weights `params` on a real and a generated batch."""
    logits_real = functional_call(D, params, (x_real,))
    logits_fake = functional_call(D, params, (x_fake,))
    return (F.binary_cross_entropy_with_logits(logits_real, torch.ones_like(logits_real))
            + F.binary_cross_entropy_with_logits(logits_fake, torch.zeros_like(logits_fake)))


for it in range(args.iters):
    x_real = sample_mixture(args.batch_size)
    z = torch.randn(args.batch_size, z_dim)
    x_fake = G(z)

    # generator: the loss after K unrolled discriminator steps
    params = dict(D.named_parameters())
    for _ in range(args.unrolling_steps):
        unrolled_loss = discriminator_loss(params, x_real, x_fake)
        grads = torch.autograd.grad(unrolled_loss, list(params.values()), create_graph=True)
        params = {name: w - args.unroll_lr * g for (name, w), g in zip(params.items(), grads)}
    g_loss = -discriminator_loss(params, x_real, x_fake)
    g_optimizer.zero_grad()
    g_loss.backward()
    g_optimizer.step()

    # discriminator: a plain step on the same batch
    d_loss = discriminator_loss(dict(D.named_parameters()), x_real, x_fake.detach())
    d_optimizer.zero_grad()
    d_loss.backward()
    d_optimizer.step()
    print(f"it {it} D {d_loss.item():.4f} G (unrolled) {g_loss.item():.4f}")

if args.out:
    weights = {f"G.{k}": v.detach().clone() for k, v in G.state_dict().items()}
    weights.update({f"D.{k}": v.detach().clone() for k, v in D.state_dict().items()})
    torch.save(weights, args.out)
