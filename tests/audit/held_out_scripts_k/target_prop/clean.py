"""Difference target propagation at a tiny size, written after Lee, Zhang, Fischer and Bengio,
"Difference Target Propagation" (ECML-PKDD 2015, arXiv:1412.7525), section 2 and algorithm 1
(the output target h_L - beta * dL/dh_L, the targets h_{i-1} + g_i(target_i) - g_i(h_i) of the
difference correction, each layer trained on its local loss ||f_i(h_{i-1}) - target_i||^2 with
its input and its target held constant, and the feedback functions g_i trained to invert f_i on
corrupted activations), with the PyTorch code of Meulemans, Carzaniga, Suykens, Sacramento and
Grewe, "A Theoretical Framework for Target Propagation" (NeurIPS 2020, arXiv:2006.14331),
meulemansalex/theoretical_framework_for_target_propagation
(https://github.com/meulemansalex/theoretical_framework_for_target_propagation, lib/networks.py
DTPNetwork: compute_output_target, the gradient of the loss to the output activations by
torch.autograd.grad, .detach()-ed; backward_all, which walks the targets down through
DTPLayer.backward; compute_feedback_gradients, which corrupts each layer's input with sigma *
randn; lib/dtp_layers.py DTPLayer.compute_forward_gradients, the local gradient of the layer's own
weights from its input and its target, and compute_feedback_gradients, the reconstruction loss
1 / sigma^2 * mse(g(f(h + noise)), h + noise) with the forward layer read as dummy_forward;
lib/train.py train_forward_parameters and train_feedback_parameters, each clearing its own
optimizer before its gradients are computed, and train_only_feedback_parameters, the epochs_fb
pre-training of the feedback weights). Two phases: the feedback weights alone are pre-trained on
the untrained network's activations, then each mini-batch takes a forward step on the local
losses and a feedback step. The local losses are written with autograd on the layer's input cut
from the graph (as the Theano code of Lee et al. does with consider_constant). A classification
task made in the script by a random teacher network. As published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--fb-steps", type=int, default=30, help="feedback pre-training steps")
parser.add_argument("--steps", type=int, default=60)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--target-stepsize", type=float, default=0.05)
parser.add_argument("--sigma", type=float, default=0.1)
parser.add_argument("--lr", type=float, default=2e-3)
parser.add_argument("--fb-lr", type=float, default=3e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

sizes = [10, 32, 32, 32, 4]
teacher = nn.Sequential(nn.Linear(sizes[0], 16), nn.Tanh(), nn.Linear(16, sizes[-1]))
with torch.no_grad():
    data_x = torch.randn(1024, sizes[0])
    data_y = teacher(data_x).argmax(dim=1)


class DTPNet(nn.Module):
    """Forward layers f_i (tanh, a linear output) and feedback layers g_i from layer i's output
    back to its input, for every layer above the first."""

    def __init__(self):
        super().__init__()
        self.forward_layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes, sizes[1:]))
        self.feedback_layers = nn.ModuleList(nn.Linear(b, a)
                                             for a, b in zip(sizes[1:-1], sizes[2:]))
        self.depth = len(self.forward_layers)

    def f(self, i, h):
        out = self.forward_layers[i](h)
        return out if i == self.depth - 1 else torch.tanh(out)

    def g(self, i, h):
        return torch.tanh(self.feedback_layers[i - 1](h))

    def forward(self, x):
        hs = [x]
        for i in range(self.depth):
            hs.append(self.f(i, hs[-1]))
        return hs


def feedback_step(hs):
    """Each g_i learns to reconstruct the corrupted input of layer i from f_i of it."""
    fb_loss = 0.0
    for i in range(1, net.depth):
        h_corrupted = hs[i].detach() + args.sigma * torch.randn_like(hs[i])
        with torch.no_grad():
            h_current = net.f(i, h_corrupted)
        fb_loss = fb_loss + F.mse_loss(net.g(i, h_current), h_corrupted) / args.sigma ** 2
    feedback_optimizer.zero_grad()
    fb_loss.backward()
    feedback_optimizer.step()
    return fb_loss.item()


def forward_step(hs, y):
    """Output target by a gradient step on the output, targets below by the difference
    correction, and each layer stepped on its own local loss."""
    loss = F.cross_entropy(hs[-1], y, reduction="sum")
    grad = torch.autograd.grad(loss, hs[-1])[0]
    targets = [None] * (net.depth + 1)
    with torch.no_grad():
        targets[net.depth] = hs[net.depth] - args.target_stepsize * grad
        for i in range(net.depth - 1, 0, -1):
            targets[i] = hs[i] + net.g(i, targets[i + 1]) - net.g(i, hs[i + 1])
    local_loss = sum(F.mse_loss(net.f(i, hs[i].detach()), targets[i + 1], reduction="sum")
                     for i in range(net.depth)) / len(y)
    forward_optimizer.zero_grad()
    local_loss.backward()
    forward_optimizer.step()
    return loss.item() / len(y)


net = DTPNet()
forward_optimizer = torch.optim.Adam(net.forward_layers.parameters(), lr=args.lr)
feedback_optimizer = torch.optim.Adam(net.feedback_layers.parameters(), lr=args.fb_lr)
for step in range(args.fb_steps):  # phase 1: the feedback weights alone
    idx = torch.randint(0, len(data_x), (args.batch_size,))
    fb_loss = feedback_step(net(data_x[idx]))
print(f"feedback pre-training done, reconstruction {fb_loss:.4f}")
for step in range(args.steps):  # phase 2: forward and feedback weights on every mini-batch
    idx = torch.randint(0, len(data_x), (args.batch_size,))
    hs = net(data_x[idx])
    loss = forward_step(hs, data_y[idx])
    fb_loss = feedback_step(hs)
    if step % 10 == 0:
        with torch.no_grad():
            accuracy = (net(data_x)[-1].argmax(1) == data_y).float().mean().item()
        print(f"step {step} loss {loss:.4f} reconstruction {fb_loss:.4f} accuracy {accuracy:.3f}")

if args.out:
    torch.save({k: v.detach().clone() for k, v in net.state_dict().items()}, args.out)
