"""Decoupled neural interfaces at a tiny size, written after Jaderberg, Czarnecki, Osindero,
Vinyals, Graves, Silver and Kavukcuoglu, "Decoupled Neural Interfaces using Synthetic Gradients"
(ICML 2017, arXiv:1608.05343), with koz4k/dni-pytorch (https://github.com/koz4k/dni-pytorch,
dni.py BackwardInterface, BasicSynthesizer, defer_backward, examples/mnist-mlp/main.py) and
andrewliao11/dni.pytorch (https://github.com/andrewliao11/dni.pytorch, train.py, model.py: one
optimizer per part, the true gradients saved by tensor hooks). A classifier split in two at its
hidden activation ``h``: a synthesizer ``M``, conditioned on the label (cDNI) and with its last layer
zero-initialised as in the paper, predicts dL/dh from ``h.detach()``; the lower part is trained by
that synthetic gradient alone (``M(h).detach()`` fed back from ``h``), the upper part by the task
loss on a copy of ``h`` cut from the graph (``h.detach().requires_grad_()``), the two backward
passes made in one ``torch.autograd.backward`` call as dni.defer_backward does. The true gradient
dL/dh, read by a hook on the cut copy, is a constant target that ``M`` regresses onto by a mean
squared error, with its own optimizer. Gaussian inputs labelled by a random linear map, made in the
script. As published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--synthesizer-lr", type=float, default=3e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, hidden, n_classes, n_points = 12, 32, 3, 512
inputs = torch.randn(n_points, dim)
labels = (inputs @ torch.randn(dim, n_classes)).argmax(dim=1)


class Synthesizer(nn.Module):
    """M(h, y): a small MLP on the activation and the one-hot label, zero-initialised output."""

    def __init__(self):
        super().__init__()
        self.input_trigger = nn.Linear(hidden, hidden)
        self.input_context = nn.Linear(n_classes, hidden)
        self.output = nn.Linear(hidden, hidden)
        nn.init.zeros_(self.output.weight)
        nn.init.zeros_(self.output.bias)

    def forward(self, trigger, context):
        return self.output(F.relu(self.input_trigger(trigger) + self.input_context(context)))


layer1 = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU())
layer2 = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, n_classes))
synthesizer = Synthesizer()
optimizer1 = torch.optim.Adam(layer1.parameters(), lr=args.lr)
optimizer2 = torch.optim.Adam(layer2.parameters(), lr=args.lr)
synthesizer_optimizer = torch.optim.Adam(synthesizer.parameters(), lr=args.synthesizer_lr)

true_gradients = {}


def save_true_gradient(grad):
    true_gradients["h"] = grad


for step in range(args.steps):
    idx = torch.randint(0, n_points, (args.batch_size,))
    x, y = inputs[idx], labels[idx]
    context = F.one_hot(y, n_classes).float()
    h = layer1(x)
    synthetic_gradient = synthesizer(h.detach(), context)
    h_in = h.detach().requires_grad_()
    h_in.register_hook(save_true_gradient)
    loss = F.cross_entropy(layer2(h_in), y)
    optimizer1.zero_grad()
    optimizer2.zero_grad()
    # the lower part from the synthetic gradient, the upper part from the loss, in one call
    torch.autograd.backward([h, loss], [synthetic_gradient.detach(), None])
    optimizer1.step()
    optimizer2.step()
    # the synthesizer regresses onto the true gradient, a constant (scaled by the batch size)
    target = true_gradients["h"] * args.batch_size
    synthetic_loss = F.mse_loss(synthetic_gradient * args.batch_size, target)
    synthesizer_optimizer.zero_grad()
    synthetic_loss.backward()
    synthesizer_optimizer.step()
    print(f"step {step} loss {loss.item():.4f} synthetic gradient loss {synthetic_loss.item():.6f}")

if args.out:
    torch.save({"layer1": layer1.state_dict(), "layer2": layer2.state_dict(),
                "synthesizer": synthesizer.state_dict()}, args.out)
