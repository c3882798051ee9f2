"""StarGAN at a tiny size, written after Choi, Choi, Kim, Ha, Kim and Choo, "StarGAN: Unified
Generative Adversarial Networks for Multi-Domain Image-to-Image Translation" (CVPR 2018,
arXiv:1711.09020), section 3 (one generator G(x, c) conditioned on a target domain label c, a
discriminator D with a source head D_src and an auxiliary domain classifier D_cls, the
Wasserstein adversarial loss with gradient penalty, the domain classification losses on real
images for D and on fakes for G, and the cycle reconstruction loss G(G(x, c), c')), with
yunjey/stargan (https://github.com/yunjey/stargan, solver.py Solver: build_model, one Adam for G
and one for D; reset_grad, which clears both optimizers; gradient_penalty, which takes
torch.autograd.grad(outputs=y, inputs=x, grad_outputs=weight, retain_graph=True,
create_graph=True, only_inputs=True); train, the discriminator's loss on x_real, on
self.D(x_fake.detach()) and on x_hat made from x_real.data and x_fake.data with requires_grad_,
then, every n_critic iterations, the generator's loss on self.D(x_fake) and on the reconstruction
self.G(x_fake, c_org), each after self.reset_grad(); model.py Generator, which concatenates the
label to the image, and Discriminator with its conv1 and conv2 heads; classification_loss, a
cross-entropy for RaFD). Tiny 4x4 single-channel images, flattened, in three domains (a pattern
per domain plus content noise), made in the script; small MLPs.
Bug: reset_grad clears the generator's optimizer alone, g_optimizer.zero_grad(), without
d_optimizer.zero_grad() (yunjey/stargan's Solver.reset_grad clears both), so D's .grad is never
cleared: each critic step adds its gradient to those of the earlier critic steps and to the
gradient that every generator backward leaves in D's parameters through self.D(x_fake), and Adam
steps D on the sum from the second iteration on."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iters", type=int, default=12)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--n-critic", type=int, default=2)
parser.add_argument("--lambda-cls", type=float, default=1.0)
parser.add_argument("--lambda-rec", type=float, default=10.0)
parser.add_argument("--lambda-gp", type=float, default=10.0)
parser.add_argument("--g-lr", type=float, default=1e-3)
parser.add_argument("--d-lr", type=float, default=1e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, c_dim, hidden_dim = 16, 3, 32
patterns = torch.randn(c_dim, dim)


def sample_batch(n):
    """Images of random domains: the domain's pattern over random content."""
    label = torch.randint(0, c_dim, (n,))
    return torch.tanh(patterns[label] + 0.5 * torch.randn(n, dim)), label


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(nn.Linear(dim + c_dim, hidden_dim), nn.ReLU(),
                                  nn.Linear(hidden_dim, hidden_dim), nn.ReLU(),
                                  nn.Linear(hidden_dim, dim), nn.Tanh())

    def forward(self, x, c):
        return self.main(torch.cat([x, c], dim=1))


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(nn.Linear(dim, hidden_dim), nn.LeakyReLU(0.01),
                                  nn.Linear(hidden_dim, hidden_dim), nn.LeakyReLU(0.01))
        self.conv1 = nn.Linear(hidden_dim, 1)  # D_src
        self.conv2 = nn.Linear(hidden_dim, c_dim)  # D_cls

    def forward(self, x):
        h = self.main(x)
        return self.conv1(h), self.conv2(h)


G, D = Generator(), Discriminator()
g_optimizer = torch.optim.Adam(G.parameters(), args.g_lr, [0.5, 0.999])
d_optimizer = torch.optim.Adam(D.parameters(), args.d_lr, [0.5, 0.999])


def reset_grad():
    g_optimizer.zero_grad()


def gradient_penalty(y, x):
    """(||dy/dx||_2 - 1)^2, with the graph of the gradient kept for D's backward."""
    weight = torch.ones(y.size())
    dydx = torch.autograd.grad(outputs=y, inputs=x, grad_outputs=weight, retain_graph=True,
                               create_graph=True, only_inputs=True)[0]
    dydx = dydx.view(dydx.size(0), -1)
    dydx_l2norm = torch.sqrt(torch.sum(dydx ** 2, dim=1))
    return torch.mean((dydx_l2norm - 1) ** 2)


for i in range(args.iters):
    x_real, label_org = sample_batch(args.batch_size)
    rand_idx = torch.randperm(label_org.size(0))
    label_trg = label_org[rand_idx]
    c_org = F.one_hot(label_org, c_dim).float()
    c_trg = F.one_hot(label_trg, c_dim).float()

    # train the discriminator
    out_src, out_cls = D(x_real)
    d_loss_real = -torch.mean(out_src)
    d_loss_cls = F.cross_entropy(out_cls, label_org)
    x_fake = G(x_real, c_trg)
    out_src, out_cls = D(x_fake.detach())
    d_loss_fake = torch.mean(out_src)
    alpha = torch.rand(x_real.size(0), 1)
    x_hat = (alpha * x_real.data + (1 - alpha) * x_fake.data).requires_grad_(True)
    out_src, _ = D(x_hat)
    d_loss_gp = gradient_penalty(out_src, x_hat)
    d_loss = d_loss_real + d_loss_fake + args.lambda_cls * d_loss_cls + args.lambda_gp * d_loss_gp
    reset_grad()
    d_loss.backward()
    d_optimizer.step()
    log = f"iter {i} D {d_loss.item():.4f} gp {d_loss_gp.item():.4f}"

    # train the generator every n_critic iterations
    if (i + 1) % args.n_critic == 0:
        x_fake = G(x_real, c_trg)
        out_src, out_cls = D(x_fake)
        g_loss_fake = -torch.mean(out_src)
        g_loss_cls = F.cross_entropy(out_cls, label_trg)
        x_reconst = G(x_fake, c_org)
        g_loss_rec = torch.mean(torch.abs(x_real - x_reconst))
        g_loss = g_loss_fake + args.lambda_rec * g_loss_rec + args.lambda_cls * g_loss_cls
        reset_grad()
        g_loss.backward()
        g_optimizer.step()
        log += f" G {g_loss.item():.4f} rec {g_loss_rec.item():.4f}"
    print(log)

if args.out:
    weights = {f"G.{k}": v.detach().clone() for k, v in G.state_dict().items()}
    weights.update({f"D.{k}": v.detach().clone() for k, v in D.state_dict().items()})
    torch.save(weights, args.out)
