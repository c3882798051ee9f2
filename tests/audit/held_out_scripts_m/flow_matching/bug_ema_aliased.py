"""Conditional flow matching with minibatch optimal-transport couplings at a tiny size, written
after Lipman, Chen, Ben-Hamu, Nickel and Le, "Flow Matching for Generative Modeling" (ICLR 2023,
arXiv:2210.02747), section 4 (regress a velocity field v_theta(t, x_t) onto the conditional
velocity of a probability path between noise and data), and Tong, Fatras, Malkin, Huguet, Zhang,
Rector-Brooks, Wolf and Bengio, "Improving and generalizing flow-based generative models with
minibatch optimal transport" (2023, arXiv:2302.00482), algorithm 1 and section 3.2 (OT-CFM: the
noise and data of a minibatch are paired by an optimal-transport plan on the squared Euclidean
cost, x_t = t x1 + (1 - t) x0 + sigma eps, target u_t = x1 - x0), with atong01/conditional-flow-
matching (https://github.com/atong01/conditional-flow-matching, torchcfm/optimal_transport.py
OTPlanSampler: get_map, which hands M.detach() of torch.cdist(x0, x1) ** 2 to the solver, here
method "sinkhorn", and sample_map, which draws index pairs from the flattened plan with
replacement; torchcfm/conditional_flow_matching.py ConditionalFlowMatcher
sample_location_and_conditional_flow, compute_mu_t and compute_conditional_flow;
torchcfm/models/models.py MLP with time_varying=True; examples/images/cifar10/train_cifar10.py
train: ema_model = copy.deepcopy(net_model), optim.zero_grad() at the top of each step,
loss = torch.mean((vt - ut) ** 2), clip_grad_norm_, optim.step(), then ema(net_model, ema_model,
decay); utils_cifar.py ema, which writes the average into the target's state_dict tensors, and
generate_samples, an Euler ODE solve of the EMA model under torch.no_grad()). Without the
learning-rate warm-up. Standard normal noise carried to two interleaved half-moons, made in the
script. Injected bug: the EMA copy is bound to the network itself, ema_model = net_model, for
copy.deepcopy(net_model), so ema(net_model, ema_model, decay) averages every tensor with itself
and the model kept for sampling is the online network with no averaging: the saved EMA weights are
the last iterate's and the samples are drawn from it."""

import argparse
import copy
import math

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--lr", type=float, default=2e-3)
parser.add_argument("--sigma", type=float, default=0.05)
parser.add_argument("--ot-reg", type=float, default=0.05)
parser.add_argument("--grad-clip", type=float, default=1.0)
parser.add_argument("--ema-decay", type=float, default=0.9)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, width = 2, 64


def sample_moons(n):
    angle = math.pi * torch.rand(n)
    upper = torch.rand(n) < 0.5
    x = torch.where(upper, angle.cos(), 1 - angle.cos())
    y = torch.where(upper, angle.sin(), 0.5 - angle.sin())
    return torch.stack([x - 0.5, y - 0.25], dim=1) * 1.5 + 0.05 * torch.randn(n, 2)


def sinkhorn_plan(cost, reg, iters=60):
    """Entropic OT plan between two uniform minibatches, in the log domain."""
    log_a = torch.full((cost.shape[0],), -math.log(cost.shape[0]))
    log_b = torch.full((cost.shape[1],), -math.log(cost.shape[1]))
    f, g = torch.zeros_like(log_a), torch.zeros_like(log_b)
    for _ in range(iters):
        f = reg * (log_a - torch.logsumexp((g[None, :] - cost) / reg, dim=1))
        g = reg * (log_b - torch.logsumexp((f[:, None] - cost) / reg, dim=0))
    return torch.exp((f[:, None] + g[None, :] - cost) / reg)


def sample_plan(x0, x1):
    cost = torch.cdist(x0, x1) ** 2
    plan = sinkhorn_plan(cost.detach(), args.ot_reg)
    choices = torch.multinomial(plan.flatten() / plan.sum(), len(x0), replacement=True)
    i, j = choices // plan.shape[1], choices % plan.shape[1]
    return x0[i], x1[j]


def sample_location_and_conditional_flow(x0, x1):
    x0, x1 = sample_plan(x0, x1)
    t = torch.rand(len(x0))
    eps = torch.randn_like(x0)
    xt = t[:, None] * x1 + (1 - t[:, None]) * x0 + args.sigma * eps
    ut = x1 - x0
    return t, xt, ut


class MLP(nn.Module):
    def __init__(self, dim, w):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim + 1, w), nn.SELU(), nn.Linear(w, w), nn.SELU(),
                                 nn.Linear(w, w), nn.SELU(), nn.Linear(w, dim))

    def forward(self, t, x):
        return self.net(torch.cat([x, t[:, None]], dim=-1))


def ema(source, target, decay):
    source_dict = source.state_dict()
    target_dict = target.state_dict()
    for key in source_dict.keys():
        target_dict[key].data.copy_(
            target_dict[key].data * decay + source_dict[key].data * (1 - decay))


net_model = MLP(dim, width)
ema_model = net_model
optim = torch.optim.Adam(net_model.parameters(), lr=args.lr)
for step in range(args.steps):
    optim.zero_grad()
    x1 = sample_moons(args.batch_size)
    x0 = torch.randn_like(x1)
    t, xt, ut = sample_location_and_conditional_flow(x0, x1)
    vt = net_model(t, xt)
    loss = torch.mean((vt - ut) ** 2)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(net_model.parameters(), args.grad_clip)
    optim.step()
    ema(net_model, ema_model, args.ema_decay)
    print(f"step {step} loss {loss.item():.4f}")

with torch.no_grad():
    x, n_steps = torch.randn(256, dim), 20
    for k in range(n_steps):
        x = x + ema_model(torch.full((256,), k / n_steps), x) / n_steps
print(f"EMA samples: mean {x.mean(0).tolist()}, std {x.std(0).tolist()}")

if args.out:
    weights = {f"net.{k}": v.detach().clone() for k, v in net_model.state_dict().items()}
    weights.update({f"ema.{k}": v.detach().clone() for k, v in ema_model.state_dict().items()})
    torch.save(weights, args.out)
