"""Sliced score matching (SSM) for a deep energy model at a tiny size, written after Song, Garg,
Shi and Ermon, "Sliced Score Matching: A Scalable Approach to Density and Score Estimation"
(UAI 2019, arXiv:1905.07088): the intractable trace of the Hessian of the log density in the
score-matching objective is replaced by its projection on random directions v,
v^T (d s / dx) v + 0.5 (v^T s)^2 with s = -dE/dx, which needs one Jacobian-vector product per
direction: a first autograd.grad for the score and a second one of v^T s, both with
create_graph=True so that the loss stays differentiable in the energy's parameters.
With ermongroup/sliced_score_matching (https://github.com/ermongroup/sliced_score_matching,
losses/sliced_sm.py: sliced_score_matching repeats the batch n_particles times, marks it
requires_grad_(True), draws Gaussian directions normalised to unit length, takes
grad1 = autograd.grad(-energy.sum(), x, create_graph=True), the projected term
0.5 * (grad1 . v)^2 and grad2 = autograd.grad((grad1 * v).sum(), x, create_graph=True), the
trace term (v * grad2).sum(-1), each averaged over the particles; runners/dkef_runner.py:
DKEFRunner.train_stage1 zeroes the gradients, backpropagates the mean loss, clips the gradient
norm at 100 and steps an Adam over all of the model's parameters; DKEFRunner.finalize then
builds a second Adam over the few parameters whose name holds "lambd" alone and refits them by
the same loss on the validation split, the rest of the model kept as stage 1 left it). Here the
energy is an MLP feature body with a linear head plus a Gaussian base measure of learnt
precision; the finalize phase freezes the feature body and refits the head and the base
precision on the validation split. The data: a mixture of eight Gaussians on a ring, made in
the script.
As published: clean."""

import argparse
import math

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=60, help="stage-1 steps over all parameters")
parser.add_argument("--finalize-steps", type=int, default=20, help="stage-2 steps, body frozen")
parser.add_argument("--batch-size", type=int, default=128)
parser.add_argument("--n-particles", type=int, default=2, help="projections per data point")
parser.add_argument("--out", default=None, help="where to save the trained energy model")
args = parser.parse_args()
torch.manual_seed(args.seed)

# data: eight Gaussian blobs on a circle of radius 2, a training and a validation split
angles = torch.randint(0, 8, (768,)).float() * (2 * math.pi / 8)
data = 2.0 * torch.stack([angles.cos(), angles.sin()], 1) + 0.25 * torch.randn(768, 2)
train_data, val_data = data[:512], data[512:]


class EnergyNet(nn.Module):
    def __init__(self, dim=2, hidden=32):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(dim, hidden), nn.Softplus(), nn.Linear(hidden, hidden),
                                  nn.Softplus())
        self.head = nn.Linear(hidden, 1)
        self.log_prec = nn.Parameter(torch.tensor(-1.0))

    def forward(self, x):
        base = 0.5 * self.log_prec.exp() * x.pow(2).sum(-1)
        return self.head(self.body(x)).squeeze(-1) + base


def sliced_score_matching(energy, samples, n_particles):
    x = samples.unsqueeze(0).expand(n_particles, -1, -1).reshape(-1, samples.shape[-1])
    x = x.clone().requires_grad_(True)
    vectors = torch.randn_like(x)
    vectors = vectors / vectors.norm(dim=-1, keepdim=True)
    score = torch.autograd.grad(-energy(x).sum(), x, create_graph=True)[0]
    score_v = (score * vectors).sum(-1)
    loss1 = 0.5 * score_v.pow(2)
    # Jacobian-vector product of the score along v, kept differentiable in the parameters
    jvp = torch.autograd.grad(score_v.sum(), x,
                              create_graph=True)[0]
    loss2 = (vectors * jvp).sum(-1)
    loss1 = loss1.view(n_particles, -1).mean(0)
    loss2 = loss2.view(n_particles, -1).mean(0)
    return (loss1 + loss2).mean()


energy = EnergyNet()
optimizer = torch.optim.Adam(energy.parameters(), lr=3e-3)

# stage 1: all parameters by sliced score matching on the training split
for step in range(args.steps):
    batch = train_data[torch.randint(0, len(train_data), (args.batch_size,))]
    loss = sliced_score_matching(energy, batch, args.n_particles)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(energy.parameters(), 100.0)
    optimizer.step()
    if step % 20 == 0:
        print(f"stage 1 step {step} ssm {loss.item():.4f}")

# stage 2 (finalize): the feature body frozen, head and base precision refit on validation data
energy.body.requires_grad_(False)
finalize_opt = torch.optim.Adam([p for p in energy.parameters() if p.requires_grad], lr=1e-2)
for step in range(args.finalize_steps):
    loss = sliced_score_matching(energy, val_data, args.n_particles)
    finalize_opt.zero_grad()
    loss.backward()
    finalize_opt.step()
    if step % 10 == 0:
        print(f"finalize step {step} ssm {loss.item():.4f} "
              f"prec {energy.log_prec.exp().item():.3f}")

if args.out:
    torch.save({f"energy.{k}": v.detach().clone() for k, v in energy.state_dict().items()},
               args.out)
