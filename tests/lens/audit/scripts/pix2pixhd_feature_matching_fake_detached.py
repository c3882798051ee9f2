"""A conditional GAN with the discriminator feature-matching loss at a tiny size, written after
Wang, Liu, Zhu, Tao, Kautz and Catanzaro, "High-Resolution Image Synthesis and Semantic
Manipulation with Conditional GANs" (CVPR 2018, arXiv:1711.11585) and NVIDIA/pix2pixHD
(models/pix2pixHD_model.py, ``Pix2PixHDModel.forward``, ``loss_G_GAN_Feat``), the feature
matching of Salimans et al. (arXiv:1606.03498): the generator's loss is its least-squares GAN
loss plus the L1 distance between the discriminator's features of the fake and of the real
output, the real side a fixed target and the fake side trained. Bug twin of
pix2pixhd_feature_matching.py: the helper ``feature_matching`` detaches the fake features too
(``F.l1_loss(f.detach(), r.detach())``), so the feature-matching term is made of cut values
only: it changes the printed generator loss and trains nothing, and the generator is trained
by the GAN loss alone. The fix is that line of the helper, with ``f`` as published. ``--out
PATH`` saves both networks' weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--lambda-feat", type=float, default=10.0)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

cond_dim, out_dim = 4, 8
mapping = torch.randn(cond_dim, out_dim)
conditions = torch.randn(96, cond_dim)
outputs = torch.tanh(conditions @ mapping) + 0.05 * torch.randn(96, out_dim)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(cond_dim + out_dim, 32)
        self.l2 = nn.Linear(32, 16)
        self.score = nn.Linear(16, 1)

    def forward(self, c, x):
        h1 = F.leaky_relu(self.l1(torch.cat([c, x], 1)), 0.2)
        h2 = F.leaky_relu(self.l2(h1), 0.2)
        return [h1, h2], self.score(h2)


def feature_matching(fake_features, real_features):
    """pix2pixHD's GAN feature loss: the real features are the fixed target."""
    return sum(F.l1_loss(f.detach(), r.detach()) for f, r in zip(fake_features, real_features))


G = nn.Sequential(nn.Linear(cond_dim, 32), nn.ReLU(), nn.Linear(32, out_dim), nn.Tanh())
D = Discriminator()
g_optimizer = torch.optim.Adam(G.parameters(), lr=0.002, betas=(0.5, 0.999))
d_optimizer = torch.optim.Adam(D.parameters(), lr=0.002, betas=(0.5, 0.999))

for step in range(args.steps):
    c = conditions[16 * (step % 6):16 * (step % 6) + 16]
    real = outputs[16 * (step % 6):16 * (step % 6) + 16]
    fake = G(c)
    _, score_real = D(c, real)
    _, score_fake = D(c, fake.detach())
    d_loss = 0.5 * (F.mse_loss(score_real, torch.ones_like(score_real))
                    + F.mse_loss(score_fake, torch.zeros_like(score_fake)))
    d_optimizer.zero_grad()
    d_loss.backward()
    d_optimizer.step()
    fake_features, score_fake = D(c, fake)
    real_features, _ = D(c, real)
    g_gan = F.mse_loss(score_fake, torch.ones_like(score_fake))
    g_loss = g_gan + args.lambda_feat * feature_matching(fake_features, real_features)
    g_optimizer.zero_grad()
    g_loss.backward()
    g_optimizer.step()
    print(f"step {step} d_loss {d_loss.item():.4f} g_loss {g_loss.item():.4f}")

if args.out:
    torch.save({**{f"G.{k}": v for k, v in G.state_dict().items()},
                **{f"D.{k}": v for k, v in D.state_dict().items()}}, args.out)
