"""Rectified flow with one reflow, on a two-dimensional toy, written after Liu, Gong and Liu,
"Flow Straight and Fast: Learning to Generate and Transfer Data with Rectified Flow" (ICLR 2023,
arXiv:2209.03003): a velocity field v(x, t) is fitted by least squares to the direction X1 - X0
of the straight line X_t = t X1 + (1 - t) X0 between a noise sample X0 ~ N(0, I) and a data
sample X1, drawn independently (the 1-rectified flow); then the "reflow" step draws new noise
Z0, pushes it through the learnt ODE dZ/dt = v(Z, t) from t = 0 to 1 with no gradient, and
fits a second velocity field, started from the first one's weights, to the straight lines
between the coupled pairs (Z0, Z1) (the 2-rectified flow), whose paths are straighter. With the
authors' code, gnobitab/RectifiedFlow (https://github.com/gnobitab/RectifiedFlow,
ImageGeneration/losses.py get_rectified_flow_loss_fn: t uniform in [eps, 1], eps = 1e-3,
perturbed_data = t * batch + (1 - t) * z0, target = batch - z0, the squared error of the model's
output against the target averaged; get_step_fn: optimizer.zero_grad(), loss.backward(),
optimize_fn's optimizer.step(); sde_lib.py RectifiedFlow.euler_ode, decorated with
@torch.no_grad(), N Euler steps x = x.detach().clone() + pred * dt; run_lib_reflow.py
finetune_reflow with reflow_type 'train_online_reflow': score_model loaded from the 1-rectified
flow checkpoint and given its own Adam optimizer, the pairs made online at every step by
sde.euler_ode(z0, ema_score_model, N=20) from a separate model holding the first flow, which is
never stepped, and batch = [z0, data] passed to the same loss with reflow_t_schedule 'uniform').
Here the first phase trains flow_1 on independent pairs, the second trains flow_2, a deep copy
of flow_1, on pairs that flow_1 (raw weights, no EMA) makes online with 20 Euler steps under
torch.no_grad(); flow_1 is left as it was after the first phase. The velocity networks are
small MLPs over (x, t); the data: a mixture of four Gaussians in the plane, made in the script.
Bug: the second flow is bound to the first, flow_2 = flow_1, where reflow starts a new network
from a copy of the first flow's weights (copy.deepcopy(flow_1); run_lib_reflow.py finetune_reflow
loads the checkpoint into score_model and keeps the first flow in ema_score_model, a separate
model that is never stepped), so the network that euler_ode integrates to make the pairs is the
one being trained: from the second reflow step on the targets come from the moving 2-RF itself,
which fits straight lines to its own endpoints and drifts away from the data, and the first
flow's weights are overwritten by the reflow updates."""

import argparse
import copy

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=300, help="1-rectified flow steps")
parser.add_argument("--reflow-steps", type=int, default=150, help="reflow (2-RF) steps")
parser.add_argument("--batch-size", type=int, default=128)
parser.add_argument("--ode-steps", type=int, default=20)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--out", default=None, help="where to save both velocity networks")
args = parser.parse_args()
torch.manual_seed(args.seed)

eps = 1e-3
centres = torch.tensor([[2.0, 2.0], [-2.0, 2.0], [2.0, -2.0], [-2.0, -2.0]])


def sample_data(n):
    return centres[torch.randint(0, 4, (n,))] + 0.3 * torch.randn(n, 2)


class Velocity(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(3, hidden), nn.SiLU(), nn.Linear(hidden, hidden),
                                 nn.SiLU(), nn.Linear(hidden, 2))

    def forward(self, x, t):
        return self.net(torch.cat([x, t.unsqueeze(1)], 1))


def rectified_flow_loss(model, z0, z1):
    t = torch.rand(z1.shape[0]) * (1.0 - eps) + eps
    x_t = t.unsqueeze(1) * z1 + (1.0 - t.unsqueeze(1)) * z0
    target = z1 - z0
    v = model(x_t, t)
    return (v - target).pow(2).sum(1).mean()


@torch.no_grad()
def euler_ode(model, z0, n_steps):
    x = z0.clone()
    dt = 1.0 / n_steps
    for i in range(n_steps):
        t = torch.full((x.shape[0],), i / n_steps * (1.0 - eps) + eps)
        x = x + model(x, t) * dt
    return x


# phase 1: the 1-rectified flow, on independent (noise, data) pairs
flow_1 = Velocity()
optimizer_1 = torch.optim.Adam(flow_1.parameters(), lr=args.lr)
for step in range(args.steps):
    z1 = sample_data(args.batch_size)
    z0 = torch.randn_like(z1)
    loss = rectified_flow_loss(flow_1, z0, z1)
    optimizer_1.zero_grad()
    loss.backward()
    optimizer_1.step()
    if step % 100 == 0:
        print(f"1-RF step {step} loss {loss.item():.4f}")

# phase 2: reflow; flow_2 starts from flow_1's weights and is fitted to the pairs that the
# first flow's ODE makes from fresh noise
flow_2 = flow_1
optimizer_2 = torch.optim.Adam(flow_2.parameters(), lr=args.lr)
for step in range(args.reflow_steps):
    z0 = torch.randn(args.batch_size, 2)
    z1 = euler_ode(flow_1, z0, args.ode_steps)
    loss = rectified_flow_loss(flow_2, z0, z1)
    optimizer_2.zero_grad()
    loss.backward()
    optimizer_2.step()
    if step % 50 == 0:
        print(f"reflow step {step} loss {loss.item():.4f}")

with torch.no_grad():
    z0 = torch.randn(512, 2)
    one_step = z0 + flow_2(z0, torch.full((512,), eps))
    straightness = (one_step - euler_ode(flow_2, z0, args.ode_steps)).pow(2).sum(1).mean()
print(f"2-RF one-step vs {args.ode_steps}-step gap {straightness.item():.4f}")

if args.out:
    torch.save({"flow_1": flow_1.state_dict(), "flow_2": flow_2.state_dict()}, args.out)
