"""SIREN fitted to a 2-D signal and to its spatial gradient.

Sitzmann, Martel, Bergman, Lindell, Wetzstein, "Implicit Neural Representations with Periodic
Activation Functions", NeurIPS 2020, arXiv:2006.09661. Reference implementation: GitHub
vsitzmann/siren, modules.py (Sine, FCBlock, SingleBVPNet, sine_init, first_layer_sine_init),
diff_operators.py (gradient), loss_functions.py (image_mse, gradients_mse) and training.py (train).

A sine-activated MLP, sin(omega_0 * (W x + b)) with omega_0 = 30, maps 2-D coordinates to a
scalar. The first layer is drawn from U(-1/n, 1/n), the others from
U(-sqrt(6/n)/omega_0, sqrt(6/n)/omega_0); the last layer is linear. The target is a synthetic
analytic field whose gradient is known in closed form. As in the reference, the coordinates
enter the network as a fresh leaf (clone().detach().requires_grad_(True)) so that the field's
gradient with respect to them can be taken with torch.autograd.grad(create_graph=True); that
gradient stays in the graph, so the gradient loss (as in gradients_mse, the Poisson
experiment) reaches every weight through a double backward. The image loss and the gradient
loss are summed, as training.train sums its loss dictionary, and one Adam over all the
network's parameters takes a step after zero_grad and backward. Bug: gradient() asks
torch.autograd.grad for retain_graph=True instead of create_graph=True, so the returned
field gradient is a constant outside the graph and the gradient loss sends nothing to the
weights; only the image loss trains the network.
"""
import argparse
import math

import torch
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--seed", type=int, default=0)
p.add_argument("--out", type=str, default=None)
p.add_argument("--steps", type=int, default=60)
p.add_argument("--lr", type=float, default=5e-4)
p.add_argument("--grad_weight", type=float, default=0.05)
args = p.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)


class SineLayer(nn.Module):
    def __init__(self, in_f, out_f, omega_0=30.0, is_first=False):
        super().__init__()
        self.omega_0 = omega_0
        self.linear = nn.Linear(in_f, out_f)
        with torch.no_grad():
            bound = 1.0 / in_f if is_first else math.sqrt(6.0 / in_f) / omega_0
            self.linear.weight.uniform_(-bound, bound)

    def forward(self, x):
        return torch.sin(self.omega_0 * self.linear(x))


class Siren(nn.Module):
    def __init__(self, in_f=2, hidden=48, n_hidden=2, out_f=1, omega_0=30.0):
        super().__init__()
        layers = [SineLayer(in_f, hidden, omega_0, is_first=True)]
        for _ in range(n_hidden):
            layers.append(SineLayer(hidden, hidden, omega_0))
        self.net = nn.Sequential(*layers)
        self.out = nn.Linear(hidden, out_f)
        with torch.no_grad():
            bound = math.sqrt(6.0 / hidden) / omega_0
            self.out.weight.uniform_(-bound, bound)

    def forward(self, coords):
        coords = coords.clone().detach().requires_grad_(True)
        return {"model_in": coords, "model_out": self.out(self.net(coords))}


def gradient(y, x):
    return torch.autograd.grad(y, [x], grad_outputs=torch.ones_like(y), retain_graph=True)[0]


def make_signal(side=24):
    lin = torch.linspace(-1.0, 1.0, side)
    xx, yy = torch.meshgrid(lin, lin, indexing="ij")
    coords = torch.stack([xx, yy], dim=-1).reshape(-1, 2)
    x, y = coords[:, :1], coords[:, 1:]
    a, b, c = 2.0 * math.pi, 1.5 * math.pi, 2.5 * math.pi
    f = 0.5 * torch.sin(a * x) * torch.cos(b * y) + 0.3 * torch.sin(c * (x + y))
    fx = 0.5 * a * torch.cos(a * x) * torch.cos(b * y) + 0.3 * c * torch.cos(c * (x + y))
    fy = -0.5 * b * torch.sin(a * x) * torch.sin(b * y) + 0.3 * c * torch.cos(c * (x + y))
    return coords, {"img": f, "gradients": torch.cat([fx, fy], dim=-1)}


coords, gt = make_signal()
model = Siren()
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

for step in range(args.steps):
    model_output = model(coords)
    pred = model_output["model_out"]
    grads = gradient(pred, model_output["model_in"])
    losses = {
        "img_loss": ((pred - gt["img"]) ** 2).mean(),
        "grad_loss": args.grad_weight * (grads - gt["gradients"]).pow(2).sum(-1).mean(),
    }
    train_loss = sum(losses.values())

    optimizer.zero_grad()
    train_loss.backward()
    optimizer.step()

    if step % 20 == 0 or step == args.steps - 1:
        print("step %d  img %.5f  grad %.5f  total %.5f" % (
            step, losses["img_loss"].item(), losses["grad_loss"].item(), train_loss.item()))

if args.out is not None:
    torch.save({"model": model.state_dict()}, args.out)
