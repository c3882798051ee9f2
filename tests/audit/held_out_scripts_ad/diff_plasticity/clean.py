"""Differentiable plasticity: a plastic recurrent network trained on binary pattern completion.

Paper: Thomas Miconi, Jeff Clune and Kenneth O. Stanley, "Differentiable plasticity: training
plastic neural networks with backpropagation", ICML 2018, arXiv:1804.02464 (Section 4.1, the
binary pattern memorization and completion task; Section S1, the plasticity code).
Reference implementation: uber-research/differentiable-plasticity, simple/simple.py (NETWORK:
fixed weights w, plasticity coefficients alpha and a shared trainable plasticity rate eta;
forward: y_out = tanh(y_in (w + alpha * hebb) + input), hebb = (1 - eta) * hebb + eta *
outer(y_in, y_out); initialZeroState, initialZeroHebb; generateInputsAndTarget; the episode
loop: zero state and zero Hebbian trace, zero_grad, run the whole episode, squared error of
the last output against the full pattern, backward through the episode, Adam step over w,
alpha and eta) and simple/simplest.py (the same loop without the class).

Each episode shows a few random +-1 patterns (half of the bits +1) twice, each for a few time
steps with zero-input gaps between them, then a copy of one of them with half of its bits
zeroed; an extra always-on bias neuron is appended and every input is scaled by 20. The
network has one neuron per bit. Within an episode the Hebbian trace hebb is carried from step
to step as part of the graph, so backpropagation through the episode trains w, alpha and eta
through every trace update; the state and the trace are reset to zero at each episode. w,
alpha and eta are nn.Parameters of the module, and one Adam optimizer holds them all.
As published: clean.
"""
import argparse

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--episodes", type=int, default=45)
parser.add_argument("--pattern_size", type=int, default=24)
parser.add_argument("--n_patterns", type=int, default=3)
parser.add_argument("--n_pres_cycles", type=int, default=2)
parser.add_argument("--pres_time", type=int, default=3)
parser.add_argument("--pres_time_test", type=int, default=3)
parser.add_argument("--inter_pres_delay", type=int, default=2)
parser.add_argument("--prob_degrade", type=float, default=0.5)
parser.add_argument("--lr", type=float, default=3e-3)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

PATTERN_SIZE = args.pattern_size
N_NEUR = PATTERN_SIZE + 1  # one neuron per bit plus a bias neuron
N_STEPS = (args.n_pres_cycles * (args.pres_time + args.inter_pres_delay) * args.n_patterns
           + args.pres_time_test)


def generate_inputs_and_target():
    """Inputs of shape (N_STEPS, 1, N_NEUR) and the full pattern to be completed."""
    seed_pattern = torch.ones(PATTERN_SIZE)
    seed_pattern[:PATTERN_SIZE // 2] = -1.0
    patterns = [seed_pattern[torch.randperm(PATTERN_SIZE)] for _ in range(args.n_patterns)]
    test_pattern = patterns[torch.randint(0, args.n_patterns, (1,)).item()].clone()
    keep = torch.ones(PATTERN_SIZE)
    keep[:int(args.prob_degrade * PATTERN_SIZE)] = 0.0
    degraded = test_pattern * keep[torch.randperm(PATTERN_SIZE)]

    inputs = torch.zeros(N_STEPS, 1, N_NEUR)
    period = args.pres_time + args.inter_pres_delay
    for cycle in range(args.n_pres_cycles):
        order = torch.randperm(args.n_patterns).tolist()
        for slot, k in enumerate(order):
            start = cycle * args.n_patterns * period + slot * period
            inputs[start:start + args.pres_time, 0, :PATTERN_SIZE] = patterns[k]
    inputs[N_STEPS - args.pres_time_test:, 0, :PATTERN_SIZE] = degraded
    inputs[:, 0, -1] = 1.0  # bias neuron
    return 20.0 * inputs, test_pattern


class PlasticNetwork(nn.Module):
    """Each column of w and alpha holds the incoming weights of one neuron."""

    def __init__(self, n):
        super().__init__()
        self.n = n
        self.w = nn.Parameter(0.01 * torch.randn(n, n))      # fixed (slow) weights
        self.alpha = nn.Parameter(0.01 * torch.randn(n, n))  # plasticity coefficients
        self.eta = nn.Parameter(0.01 * torch.ones(1))        # plasticity rate, shared

    def forward(self, inp, y_in, hebb):
        y_out = torch.tanh(y_in @ (self.w + self.alpha * hebb) + inp)
        hebb = (1 - self.eta) * hebb + self.eta * torch.outer(y_in[0], y_out[0])
        return y_out, hebb

    def initial_zero_state(self):
        return torch.zeros(1, self.n)

    def initial_zero_hebb(self):
        return torch.zeros(self.n, self.n)


net = PlasticNetwork(N_NEUR)
optimizer = torch.optim.Adam(net.parameters(), lr=args.lr)

err_sum = 0.0
for episode in range(args.episodes):
    y = net.initial_zero_state()
    hebb = net.initial_zero_hebb()
    optimizer.zero_grad()
    inputs, target = generate_inputs_and_target()
    for step in range(N_STEPS):
        y, hebb = net(inputs[step], y, hebb)
    loss = (y[0, :PATTERN_SIZE] - target).pow(2).sum()
    loss.backward()
    optimizer.step()

    err_sum += (torch.sign(y[0, :PATTERN_SIZE].detach()) != target).float().mean().item()
    if (episode + 1) % 15 == 0:
        print(f"episode {episode + 1:3d} loss {loss.item():.3f} "
              f"error rate {err_sum / 15:.3f} eta {net.eta.item():.4f}")
        err_sum = 0.0

if args.out:
    torch.save({"w": net.w.detach().clone(), "alpha": net.alpha.detach().clone(),
                "eta": net.eta.detach().clone()}, args.out)
