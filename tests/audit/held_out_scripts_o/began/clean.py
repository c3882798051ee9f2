"""BEGAN at a tiny size, written after Berthelot, Schumm and Metz, "BEGAN: Boundary Equilibrium
Generative Adversarial Networks" (arXiv:1703.10717, 2017), section 3 (an autoencoder as the
discriminator, scored by its reconstruction loss L(v) = |v - D(v)|; the discriminator minimises
L(x) - k_t L(G(z)), the generator L(G(z)), and the proportional control k_{t+1} = k_t + lambda_k
(gamma L(x) - L(G(z))) keeps k_t in [0, 1]; the convergence measure M_global = L(x) + |gamma L(x)
- L(G(z))|), with carpedm20/BEGAN-tensorflow (https://github.com/carpedm20/BEGAN-tensorflow,
trainer.py Trainer.build_model: d_loss_real = mean |AE_x - x|, d_loss_fake = mean |AE_G - G|,
d_loss = d_loss_real - k_t * d_loss_fake minimised over D_var alone, g_loss = mean |AE_G - G|
over G_var alone, the balance, and k_update, a tf.assign of the non-trainable k_t clipped by
tf.clip_by_value to [0, 1] after both optimisers) and its PyTorch ports
eriklindernoren/PyTorch-GAN (implementations/began/began.py: the discriminator reconstructs
gen_imgs.detach() and is scored against gen_imgs.detach(), and k = min(max(k + lambda_k *
diff.item(), 0), 1) from the detached balance) and anantzoid/BEGAN-pytorch (main.py BEGAN.train:
the discriminator's step first, then the generator's through the stepped discriminator). Both
optimisers are cleared once at the top of each iteration. Data: 16-dimensional vectors around
four patterns, made in the script; small MLPs with ELUs, the generator shaped as the
autoencoder's decoder. As published: clean."""

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=25)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--gamma", type=float, default=0.5)
parser.add_argument("--lambda-k", type=float, default=0.05)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

x_dim, h_dim, hidden_dim = 16, 4, 32
z_dim = h_dim
patterns = torch.randn(4, x_dim)


def sample_real(n):
    return torch.tanh(2 * patterns[torch.randint(0, 4, (n,))] + 0.3 * torch.randn(n, x_dim))


def decoder():
    return nn.Sequential(nn.Linear(h_dim, hidden_dim), nn.ELU(),
                         nn.Linear(hidden_dim, x_dim))


class AutoEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(x_dim, hidden_dim), nn.ELU(),
                                     nn.Linear(hidden_dim, h_dim))
        self.decoder = decoder()

    def forward(self, x):
        return self.decoder(self.encoder(x))


G, D = decoder(), AutoEncoder()
g_optimizer = torch.optim.Adam(G.parameters(), lr=args.lr, betas=(0.5, 0.999))
d_optimizer = torch.optim.Adam(D.parameters(), lr=args.lr, betas=(0.5, 0.999))


def reset_grad():
    g_optimizer.zero_grad()
    d_optimizer.zero_grad()


k_t = 0.0
for step in range(args.steps):
    x = sample_real(args.batch_size)
    z = 2 * torch.rand(args.batch_size, z_dim) - 1
    reset_grad()
    fake = G(z)

    # discriminator: reconstruct the real batch, and push the samples' loss up by k_t
    ae_x = D(x)
    ae_g = D(fake.detach())
    d_loss_real = torch.mean(torch.abs(ae_x - x))
    d_loss_fake = torch.mean(torch.abs(ae_g - fake.detach()))
    d_loss = d_loss_real - k_t * d_loss_fake
    d_loss.backward()
    d_optimizer.step()

    # generator: the stepped autoencoder's reconstruction loss on the samples
    fake = G(z)
    g_loss = torch.mean(torch.abs(D(fake) - fake))
    g_loss.backward()
    g_optimizer.step()

    # proportional control of k_t from the detached losses, kept in [0, 1]
    balance = (args.gamma * d_loss_real - d_loss_fake).item()
    k_t = min(max(k_t + args.lambda_k * balance, 0.0), 1.0)
    measure = d_loss_real.item() + abs(balance)
    print(f"step {step} D {d_loss.item():.4f} G {g_loss.item():.4f} k {k_t:.4f} M {measure:.4f}")

if args.out:
    weights = {f"G.{k}": v.detach().clone() for k, v in G.state_dict().items()}
    weights.update({f"D.{k}": v.detach().clone() for k, v in D.state_dict().items()})
    weights["k_t"] = torch.tensor(k_t)
    torch.save(weights, args.out)
