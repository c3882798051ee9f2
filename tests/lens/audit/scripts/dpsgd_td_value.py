"""Private policy evaluation by DP-SGD at a tiny size: semi-gradient TD(0) (Sutton and Barto,
"Reinforcement Learning: An Introduction", 2nd ed., section 9.3: the target
``r + gamma * v(s')`` taken as fixed, no gradient through ``v(s')``) trained with Algorithm 1 of
Abadi, Chu, Goodfellow, McMahan, Mironov, Talwar and Zhang, "Deep Learning with Differential
Privacy" (CCS 2016, arXiv:1607.00133): each transition's gradient computed alone, here by
``torch.autograd.grad`` of its own loss, clipped to norm ``C``, the sum noised with
``N(0, sigma^2 C^2)`` and averaged over the lot, written into ``.grad`` before one optimizer
step (as pytorch/opacus's per-sample gradients are summed, noised and written into ``.grad``).
A random-walk chain of states with a reward at its right end, its transitions made in the
script. ``--out PATH`` saves the value network's weights. As published: clean: the bootstrap
value is cut where the target is made."""

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--lot-size", type=int, default=8)
parser.add_argument("--gamma", type=float, default=0.95)
parser.add_argument("--clip", type=float, default=1.0)
parser.add_argument("--noise-multiplier", type=float, default=0.3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_states = 9
codes = torch.eye(n_states)
value = nn.Sequential(nn.Linear(n_states, 16), nn.Tanh(), nn.Linear(16, 1))
params = list(value.parameters())
optimizer = torch.optim.SGD(params, lr=0.2)

for step in range(args.steps):
    s = torch.randint(1, n_states - 1, (args.lot_size,))
    s_next = s + 2 * torch.randint(0, 2, (args.lot_size,)) - 1
    reward = (s_next == n_states - 1).float()
    alive = ((s_next > 0) & (s_next < n_states - 1)).float()
    summed = [torch.zeros_like(p) for p in params]
    for i in range(args.lot_size):
        bootstrap = value(codes[s_next[i]]).squeeze()
        target = reward[i] + args.gamma * alive[i] * bootstrap.detach()
        loss = (value(codes[s[i]]).squeeze() - target) ** 2 / 2
        grads = torch.autograd.grad(loss, params)
        norm = torch.sqrt(sum(g.pow(2).sum() for g in grads))
        scale = (args.clip / (norm + 1e-6)).clamp(max=1.0)
        for total, g in zip(summed, grads):
            total.add_(g * scale)
    for total, p in zip(summed, params):
        noise = args.noise_multiplier * args.clip * torch.randn_like(total)
        p.grad = (total + noise) / args.lot_size
    optimizer.step()
    print(f"step {step} last loss {loss.item():.4f}")

if args.out:
    torch.save(value.state_dict(), args.out)
