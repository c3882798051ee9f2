"""A growing neural cellular automaton at a tiny size, written after Mordvintsev, Randazzo,
Niklasson and Levin, "Growing Neural Cellular Automata" (Distill, 2020, doi:10.23915/distill.00023),
experiments 1 and 2, and its public notebook in google-research/self-organising-systems
(https://github.com/google-research/self-organising-systems, notebooks/growing_ca.ipynb: CAModel
with perceive, a depthwise convolution of the state with fixed identity and Sobel filters, dmodel,
two 1x1 convolutions the second of which starts at zero, the stochastic update mask at
CELL_FIRE_RATE and get_living_mask, a 3x3 max-pool of the alpha channel above 0.1 before and after
the update; loss_f, the mean squared error of the RGBA channels to the padded target; train_step,
which runs the CA for a number of steps drawn uniformly from a range inside one GradientTape and
normalises each parameter's gradient, g / (||g|| + 1e-8), before Adam's step; and the training loop
with SamplePool, whose sampled batch is sorted by loss, its worst state replaced by the seed, and
whose states are written back after the step as numbers, without their graph). Two phases, as the
article's first two experiments: the CA first learns to grow the target from the seed (every batch
starts at the seed), then it goes on training from a pool of its own states, so that the pattern
persists. The target, a small coloured diamond, is made in the script. Injected bug: the pool
phase's loop leaves out optimizer.zero_grad() before loss.backward() (the notebook's train_step
takes fresh gradients from its GradientTape at every step, and the growing phase here clears them),
so the first pool step adds the last growing step's gradient, already normalised in place, to its
own, and every later pool step normalises and steps on the sum of all the gradients of the phase so
far; second phase of a two-phase script."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--grow-steps", type=int, default=10, help="phase 1, from the seed")
parser.add_argument("--pool-steps", type=int, default=14, help="phase 2, from the pool")
parser.add_argument("--batch-size", type=int, default=4)
parser.add_argument("--pool-size", type=int, default=16)
parser.add_argument("--min-iter", type=int, default=8)
parser.add_argument("--max-iter", type=int, default=12)
parser.add_argument("--channels", type=int, default=8)
parser.add_argument("--hidden-dim", type=int, default=32)
parser.add_argument("--fire-rate", type=float, default=0.5)
parser.add_argument("--lr", type=float, default=2e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

size, channels = 12, args.channels
coords = torch.arange(size).float() - (size - 1) / 2
diamond = ((coords.view(-1, 1).abs() + coords.view(1, -1).abs()) <= 4).float()
colour = torch.stack([0.9 - 0.05 * coords.view(-1, 1).expand(size, size),
                      0.3 + 0.05 * coords.view(1, -1).expand(size, size),
                      torch.full((size, size), 0.5)])
target = torch.cat([colour * diamond, diamond.unsqueeze(0)])  # premultiplied RGB, alpha
seed_state = torch.zeros(1, channels, size, size)
seed_state[:, 3:, size // 2, size // 2] = 1.0


def living_mask(x):
    return F.max_pool2d(x[:, 3:4], 3, stride=1, padding=1) > 0.1


class CAModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.update = nn.Sequential(nn.Conv2d(3 * channels, args.hidden_dim, 1), nn.ReLU(),
                                    nn.Conv2d(args.hidden_dim, channels, 1))
        nn.init.zeros_(self.update[2].weight)
        nn.init.zeros_(self.update[2].bias)
        sobel_x = torch.outer(torch.tensor([1.0, 2.0, 1.0]), torch.tensor([-1.0, 0.0, 1.0])) / 8
        identity = torch.zeros(3, 3)
        identity[1, 1] = 1.0
        filters = torch.stack([identity, sobel_x, sobel_x.t()]).unsqueeze(1)
        self.register_buffer("filters", filters.repeat(channels, 1, 1, 1))

    def perceive(self, x):
        return F.conv2d(x, self.filters, padding=1, groups=channels)

    def forward(self, x):
        pre_life = living_mask(x)
        y = self.perceive(x)
        dx = self.update(y)
        fire = (torch.rand(x.shape[0], 1, size, size) <= args.fire_rate).float()
        x = x + dx * fire
        life = (pre_life & living_mask(x)).float()
        return x * life


def loss_f(x):
    return (x[:, :4] - target).pow(2).mean((1, 2, 3))


def rollout(x):
    for _ in range(int(torch.randint(args.min_iter, args.max_iter + 1, ()))):
        x = ca(x)
    return x


def normalise_grads_(model):
    for p in model.parameters():
        p.grad /= p.grad.norm() + 1e-8


ca = CAModel()
optimizer = torch.optim.Adam(ca.parameters(), lr=args.lr)
# phase 1: learning to grow, every batch starts from the seed
for step in range(args.grow_steps):
    x = rollout(seed_state.repeat(args.batch_size, 1, 1, 1))
    loss = loss_f(x).mean()
    optimizer.zero_grad()
    loss.backward()
    normalise_grads_(ca)
    optimizer.step()
    print(f"grow {step} loss {loss.item():.5f}")

# phase 2: training from a pool of the CA's own states, written back without their graph
pool = seed_state.repeat(args.pool_size, 1, 1, 1)
for step in range(args.pool_steps):
    idx = torch.randperm(args.pool_size)[:args.batch_size]
    idx = idx[loss_f(pool[idx]).argsort(descending=True)]
    x0 = pool[idx]
    x0[:1] = seed_state
    x = rollout(x0)
    loss = loss_f(x).mean()
    loss.backward()
    normalise_grads_(ca)
    optimizer.step()
    pool[idx] = x.detach()
    print(f"pool {step} loss {loss.item():.5f}")

if args.out:
    torch.save({"ca": ca.state_dict(), "pool": pool}, args.out)
