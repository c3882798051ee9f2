"""BinaryConnect at a tiny size, written after Courbariaux, Bengio and David, "BinaryConnect:
Training Deep Neural Networks with binary weights during propagations" (NeurIPS 2015,
arXiv:1511.00363), algorithm 1: the forward and backward passes use weights binarised to +-H,
deterministically by their sign or stochastically with probability hard_sigmoid(w / H) of +H,
the gradient with respect to the binary weights is applied to real-valued latent weights (a
straight-through estimator), and after each update the latent weights are clipped to [-H, H] so
that they stay where the binarisation can still flip. With MatthieuCourbariaux/BinaryConnect
(https://github.com/MatthieuCourbariaux/BinaryConnect, binary_connect.py: DenseLayer initialises
W uniformly in [-H, H] with H = sqrt(6 / (fan_in + fan_out)) / 2 and, in get_output_for, forms
Wb from hard_sigmoid(W / H), a binomial draw (stochastic) or rounding (deterministic), mapped to
+-H; compute_grads takes the gradient of the loss with respect to Wb for every W and with
respect to the parameter itself otherwise; weights_clipping clips the updated W to [-H, H];
mnist.py: dense layers with batch normalisation, a squared hinge loss on +-1 targets, one Adam
update of the W's on the gradients of their Wb's followed by the clipping, and a second Adam
update of the other parameters, biases and batch-norm scales and shifts). Here the
straight-through estimator is written as w + (wb - w).detach(), whose gradient with respect to
w is that with respect to wb; the latent weights' Adam has one group per layer with the
learning rate scaled by 1 / H, the reference's Glorot scaling. Data: four classes labelled by a
random teacher network, made in the script.
Bug: other_optimizer.zero_grad() is left out beside w_optimizer.zero_grad(), so the gradients of
the biases and batch-norm parameters are never cleared (the reference's Theano updates take the
gradient of the current minibatch's loss for both the binary and the other parameters): from the
second step on, other_optimizer steps them on the running sum of all gradients so far, while the
latent weights are stepped on the current one."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=60)
parser.add_argument("--batch-size", type=int, default=100)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--deterministic", action="store_true", help="binarise by sign, not by sampling")
parser.add_argument("--out", default=None, help="where to save the trained network")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_data, d_in, n_classes, width = 2000, 20, 4, 64
teacher = nn.Sequential(nn.Linear(d_in, 32), nn.Tanh(), nn.Linear(32, n_classes))
x_data = torch.randn(n_data, d_in)
with torch.no_grad():
    y_data = teacher(x_data).argmax(1)
targets = 2.0 * F.one_hot(y_data, n_classes).float() - 1.0  # +-1 for the squared hinge loss


class BinaryLinear(nn.Module):
    def __init__(self, fan_in, fan_out):
        super().__init__()
        self.H = math.sqrt(6.0 / (fan_in + fan_out)) / 2.0
        self.weight = nn.Parameter(torch.empty(fan_out, fan_in).uniform_(-self.H, self.H))
        self.bias = nn.Parameter(torch.zeros(fan_out))

    def binarize(self, w):
        if args.deterministic:
            sign = (w >= 0).float()
        else:
            sign = torch.bernoulli(((w / self.H + 1.0) / 2.0).clamp(0.0, 1.0).detach())
        wb = self.H * (2.0 * sign - 1.0)
        delta = (wb - w).detach()
        return w + delta  # forward: +-H; backward: straight through to w

    def forward(self, x):
        return F.linear(x, self.binarize(self.weight), self.bias)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.bn1 = BinaryLinear(d_in, width), nn.BatchNorm1d(width, momentum=0.15)
        self.fc2, self.bn2 = BinaryLinear(width, width), nn.BatchNorm1d(width, momentum=0.15)
        self.fc3, self.bn3 = BinaryLinear(width, n_classes), nn.BatchNorm1d(n_classes, momentum=0.15)

    def forward(self, x):
        h = F.relu(self.bn1(self.fc1(x)))
        h = F.relu(self.bn2(self.fc2(h)))
        return self.bn3(self.fc3(h))


model = Net()
binary_layers = [model.fc1, model.fc2, model.fc3]
latent_weights = [layer.weight for layer in binary_layers]
other_params = [p for p in model.parameters() if all(p is not w for w in latent_weights)]
w_optimizer = torch.optim.Adam([{"params": [layer.weight], "lr": args.lr / layer.H}
                                for layer in binary_layers], lr=args.lr)
other_optimizer = torch.optim.Adam(other_params, lr=args.lr)

for step in range(args.steps):
    idx = torch.randint(0, n_data, (args.batch_size,))
    out = model(x_data[idx])
    loss = F.relu(1.0 - targets[idx] * out).pow(2).mean()  # squared hinge loss
    w_optimizer.zero_grad()
    loss.backward()
    w_optimizer.step()
    other_optimizer.step()
    with torch.no_grad():  # keep the latent weights where the binarisation can flip them
        for layer in binary_layers:
            layer.weight.clamp_(-layer.H, layer.H)
    if step % 20 == 0:
        acc = (out.argmax(1) == y_data[idx]).float().mean().item()
        print(f"step {step} loss {loss.item():.3f} acc {acc:.2f}")

if args.out:
    torch.save({f"model.{name}": v for name, v in model.state_dict().items()}, args.out)
