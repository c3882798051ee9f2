"""A supervised predictive coding network at a tiny size, written after Whittington and Bogacz, "An
Approximation of the Error Backpropagation Algorithm in a Predictive Coding Network with Local
Hebbian Synaptic Plasticity" (Neural Computation 29(5), 2017), section 2 (the energy F = sum_l 1/2
||x_{l+1} - W_l f(x_l)||^2, the value nodes x_l relaxed by dx_l = -eps_l + f'(x_l) * W_l^T eps_{l+1}
with the input and the output clamped and the weights fixed, then the Hebbian update dW_l =
eps_{l+1} f(x_l)^T at the relaxed values), and Millidge, Tschantz and Buckley, "Predictive Coding
Approximates Backprop along Arbitrary Computation Graphs" (arXiv:2006.04182), algorithm 1, with
BerenMillidge/PredictiveCodingBackprop (https://github.com/BerenMillidge/PredictiveCodingBackprop,
cnn.py PCNet.infer: the value nodes mus initialised by a forward sweep, the last one set to the
label, n_inference_steps updates of mus[j] -= inference_learning_rate * (2 * dx_l) from the
prediction errors and layer.backward, the whole of it under torch.no_grad(), then update_weights
from each layer's own prediction error; layers.py FCLayer.update_weights) and
RobertRosenbaum/Torch2PC (https://github.com/RobertRosenbaum/Torch2PC, TorchSeq2PC.py
StrictPCPredErrs, which starts from a copy of the forward activations made under torch.no_grad();
SetPCGrads). The relaxation is written by hand as in the reference; the weight update is the
gradient of the energy at the relaxed value nodes, which are constants of it, so that each W_l sees
only its own error eps_{l+1} and its own input f(x_l) (the local Hebbian rule), stepped by SGD. A
regression task made in the script by a random teacher network. Injected bug: infer is written
without the reference's torch.no_grad() (PCNet.infer runs the forward sweep and the relaxation under
it, and Torch2PC's StrictPCPredErrs starts from activations copied under it), so the value nodes
keep the graph of the feedforward sweep and of every relaxation step, both of which read the
weights: the energy at the relaxed values no longer holds them constant, its backward also sends
each layer's prediction error back through the value nodes into the weights below and through the
relaxation's reads of W_l^T, and the SGD steps that non-local gradient for the local Hebbian one."""

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--inference-steps", type=int, default=20)
parser.add_argument("--inference-lr", type=float, default=0.1)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

sizes = [6, 16, 16, 2]  # input, two layers of value nodes, the output clamped to the target
teacher = nn.Sequential(nn.Linear(sizes[0], 12), nn.Tanh(), nn.Linear(12, sizes[-1]))
with torch.no_grad():
    data_x = torch.randn(512, sizes[0])
    data_y = teacher(data_x)

layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes, sizes[1:]))
depth = len(layers)


def predict(l, v):
    """The prediction of layer l + 1 from the value nodes of layer l: W_l f(x_l) + b_l, with f
    the identity on the input and tanh above it."""
    return layers[l](v if l == 0 else torch.tanh(v))


def energy(values):
    return sum(0.5 * ((values[l + 1] - predict(l, values[l])) ** 2).sum()
               for l in range(depth)) / len(values[0])


def infer(x, y):
    """Value nodes start at the feedforward sweep, the output is clamped to y, and the hidden
    ones relax down the energy with the weights fixed."""
    values = [x]
    for l in range(depth):
        values.append(predict(l, values[-1]))
    values[-1] = y.clone()
    for t in range(args.inference_steps):
        errors = [None] + [values[l + 1] - predict(l, values[l]) for l in range(depth)]
        for l in range(1, depth):
            feedback = (errors[l + 1] @ layers[l].weight) * (1 - torch.tanh(values[l]) ** 2)
            values[l] -= args.inference_lr * (errors[l] - feedback)
    return values


def feedforward_mse(x, y):
    with torch.no_grad():
        h = x
        for l in range(depth):
            h = predict(l, h)
        return ((h - y) ** 2).sum(1).mean().item()


optimizer = torch.optim.SGD(layers.parameters(), lr=args.lr)
for step in range(args.steps):
    idx = torch.randint(0, len(data_x), (args.batch_size,))
    values = infer(data_x[idx], data_y[idx])
    loss = energy(values)  # each layer's prediction error at the relaxed value nodes
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 10 == 0:
        print(f"step {step} energy {loss.item():.4f} "
              f"feedforward mse {feedforward_mse(data_x, data_y):.4f}")

if args.out:
    torch.save({f"layers.{k}": v.detach().clone() for k, v in layers.state_dict().items()},
               args.out)
