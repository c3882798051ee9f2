"""A learned LSTM optimizer at a tiny size, written after Andrychowicz, Denil, Gomez, Hoffman,
Pfau, Schaul, Shillingford and de Freitas, "Learning to learn by gradient descent by gradient
descent" (NeurIPS 2016, arXiv:1606.04474), sections 2 and 3 (the optimizee's update
theta_{t+1} = theta_t + g_t, with [g_t, h_{t+1}] = m(grad_t, h_t, phi) a coordinatewise
two-layer LSTM shared by all coordinates, the loss L(phi) = sum_t w_t f(theta_t) over a truncated
unroll with w_t = 1, the second derivatives dropped by taking the optimizee's gradient as an input
with no gradient of its own (the dashed edges of figure 2), and the LogAndSign preprocessing of
appendix A), with deepmind/learning-to-learn (https://github.com/deepmind/learning-to-learn,
meta.py MetaOptimizer.meta_loss: time_step takes tf.gradients of the loss and
tf.stop_gradient of them unless second_derivatives, the loss is tf.reduce_sum of the unroll's
f values and the final one; meta_minimize with one Adam over the network's variables; the update
ops that write x_final and the final LSTM state into variables, so that the next truncation
starts from them as constants; networks.py CoordinateWiseDeepLSTM with its list of LSTM cores
and a linear output scaled by `scale`; preprocess.py LogAndSign; problems.py quadratic, random
W and y and f(theta) = mean_batch ||W theta - y||^2; train.py with num_steps split into unrolls
of unroll_length) and the PyTorch layout of ikostrikov/pytorch-meta-optimizer
(https://github.com/ikostrikov/pytorch-meta-optimizer, main.py: the truncated BPTT loop, one
loss_sum.backward() and Adam step per truncation; meta_optimizer.py MetaOptimizer.reset_lstm,
which keeps the hidden states as Variable(h.data) between truncations, and meta_update, which
feeds the optimizee's gradients in as .grad.data). Each epoch a fresh batch of quadratics is
optimised for a number of steps by the LSTM, in truncations: the optimizee and the LSTM state
are cut from the graph at the start of each. As published: clean."""

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--epochs", type=int, default=5)
parser.add_argument("--num-steps", type=int, default=12, help="optimizee steps per epoch")
parser.add_argument("--unroll", type=int, default=4, help="steps per truncation")
parser.add_argument("--batch", type=int, default=4, help="quadratics optimised together")
parser.add_argument("--dims", type=int, default=6)
parser.add_argument("--hidden", type=int, default=16)
parser.add_argument("--scale", type=float, default=0.1)
parser.add_argument("--lr", type=float, default=3e-2)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)


def sample_problem():
    return torch.randn(args.batch, args.dims, args.dims), torch.randn(args.batch, args.dims)


def quadratic(theta, w, y):
    return ((w @ theta.unsqueeze(-1)).squeeze(-1) - y).pow(2).sum(-1).mean()


def log_and_sign(grad, k=5.0):
    """Appendix A: (log|g| / k, sign(g)), both clamped to [-1, 1]."""
    log = (grad.abs() + 1e-20).log().div(k).clamp(min=-1.0, max=1.0)
    sign = (grad * torch.exp(torch.tensor(k))).clamp(-1.0, 1.0)
    return torch.stack([log, sign], dim=-1)


class CoordinateWiseLSTM(nn.Module):
    """Two LSTM cells applied to every coordinate with shared weights, a scaled linear output."""

    def __init__(self):
        super().__init__()
        self.cells = nn.ModuleList([nn.LSTMCell(2, args.hidden),
                                    nn.LSTMCell(args.hidden, args.hidden)])
        self.linear = nn.Linear(args.hidden, 1)

    def initial_state(self, n):
        return [(torch.zeros(n, args.hidden), torch.zeros(n, args.hidden)) for _ in self.cells]

    def forward(self, grad, state):
        x = log_and_sign(grad.reshape(-1))
        new_state = []
        for cell, hc in zip(self.cells, state):
            h, c = cell(x, hc)
            new_state.append((h, c))
            x = h
        return args.scale * self.linear(x).view_as(grad), new_state


opt_net = CoordinateWiseLSTM()
meta_optimizer = torch.optim.Adam(opt_net.parameters(), lr=args.lr)

for epoch in range(args.epochs):
    w, y = sample_problem()
    theta = 0.01 * torch.randn(args.batch, args.dims)
    state = opt_net.initial_state(theta.numel())
    for k in range(args.num_steps // args.unroll):
        # truncated BPTT: the optimizee and the LSTM state enter each truncation as constants
        theta = theta.detach().requires_grad_(True)
        state = [(h.detach(), c.detach()) for h, c in state]
        meta_loss = 0.0
        for t in range(args.unroll):
            loss = quadratic(theta, w, y)
            meta_loss = meta_loss + loss
            # the optimizee's gradient as an input: no graph, second derivatives dropped
            grad, = torch.autograd.grad(loss, theta, retain_graph=True)
            update, state = opt_net(grad, state)
            theta = theta + update
        meta_loss = meta_loss + quadratic(theta, w, y)
        meta_optimizer.zero_grad()
        meta_loss.backward()
        meta_optimizer.step()
    print(f"epoch {epoch} meta loss {meta_loss.item():.4f} final f {loss.item():.4f}")

if args.out:
    cells = {f"cells.{i}.{k}": v for i, cell in enumerate(opt_net.cells)
             for k, v in cell.state_dict().items()}
    torch.save({"opt_net": {**opt_net.state_dict(), **cells}}, args.out)
