"""PACT quantization-aware fine-tuning of a small MLP classifier after full-precision
pre-training, written after Choi, Wang, Venkataramani, Chuang, Srinivasan and Gopalakrishnan,
"PACT: Parameterized Clipping Activation for Quantized Neural Networks" (arXiv:1805.06085, 2018):
the ReLU is replaced by a clipping activation with a learnable upper bound alpha per layer,
y = 0.5 * (|x| - |x - alpha| + alpha) = clip(x, 0, alpha), whose output is quantized to k bits,
y_q = round(y * (2^k - 1) / alpha) * alpha / (2^k - 1), with the straight-through estimator
dy_q/dy = 1, so that dy_q/dalpha = 1 where x >= alpha and 0 elsewhere (the paper's eq. 3) and
alpha is learned by the task loss together with an L2 penalty lambda_alpha * alpha^2; the weights
are quantized with DoReFa-Net's scheme, w_q = 2 * quantize_k(tanh(w) / (2 max|tanh(w)|) + 0.5) - 1,
also with a straight-through gradient to the full-precision weights that the optimizer updates.
With the public reimplementation KwangHoonAn/PACT (https://github.com/KwangHoonAn/PACT, module.py:
ActFn, a torch.autograd.Function whose forward clamps x to [0, alpha.item()] and rounds to k bits
and whose backward passes dL/dy_q to x inside [0, alpha] and sums it over x >= alpha for alpha;
DoReFaQuant, whose backward returns the gradient unchanged, used by its Linear and Conv2d layers;
resnet.py: alpha = nn.Parameter(torch.tensor(10.)) per activation, 8-bit weights for the first and
last layers and K bits elsewhere; trainer.py train: the loss plus lambda_alpha = 0.0002 times the
sum of alpha^2 over the parameters named alpha, then optimizer.zero_grad(), loss.backward(),
optimizer.step() with SGD, momentum 0.9, weight decay 2e-4, over model.parameters()), whose steps
this script follows, writing the two straight-through estimators with .detach() instead of custom
autograd Functions, and starting alpha at 3 rather than 10 to suit the small pre-activations. Two
phases, as quantization-aware training is often run from a trained model: a full-precision ReLU
MLP is pre-trained, then copied into the quantized MLP (4-bit hidden weights and activations)
and fine-tuned. The data are 20-D Gaussians with 4 classes given by a random two-layer network.
As published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--fp-steps", type=int, default=120)
parser.add_argument("--qat-steps", type=int, default=120)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--bits", type=int, default=4, help="k for the hidden weights and activations")
parser.add_argument("--alpha-init", type=float, default=3.0)
parser.add_argument("--lambda-alpha", type=float, default=2e-4)
parser.add_argument("--out", default=None, help="where to save the full-precision and PACT models")
args = parser.parse_args()
torch.manual_seed(args.seed)

n, x_dim, n_classes, hidden = 1024, 20, 4, 64

# synthetic data: labels from a random two-layer network
x_all = torch.randn(n, x_dim)
label_net = nn.Sequential(nn.Linear(x_dim, 32), nn.Tanh(), nn.Linear(32, n_classes))
with torch.no_grad():
    y_all = label_net(x_all).argmax(1)


def quantize_k(r, bits):
    scale = 2 ** bits - 1
    return torch.round(r * scale) / scale


def dorefa_weight(w, bits):
    """DoReFa k-bit weights in [-1, 1] with a straight-through gradient to w."""
    t = torch.tanh(w)
    w_q = 2 * quantize_k(t / (2 * t.abs().max()) + 0.5, bits) - 1
    return w + (w_q - w).detach()


class QLinear(nn.Linear):
    def __init__(self, in_features, out_features, bits):
        super().__init__(in_features, out_features)
        self.bits = bits

    def forward(self, x):
        return F.linear(x, dorefa_weight(self.weight, self.bits), self.bias)


class PACT(nn.Module):
    """Clip to [0, alpha] with a learnable alpha, quantize to k bits, straight-through rounding."""

    def __init__(self, bits, alpha_init):
        super().__init__()
        self.bits = bits
        self.alpha = nn.Parameter(torch.tensor(alpha_init))

    def forward(self, x):
        y = 0.5 * (x.abs() - (x - self.alpha).abs() + self.alpha)
        scale = (2 ** self.bits - 1) / self.alpha
        y_q = torch.round(y * scale) / scale
        return y + (y_q - y).detach()


class FPNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = (nn.Linear(x_dim, hidden), nn.Linear(hidden, hidden),
                                        nn.Linear(hidden, n_classes))

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class PACTNet(nn.Module):
    def __init__(self, bits, alpha_init):
        super().__init__()
        self.fc1 = QLinear(x_dim, hidden, 8)
        self.act1 = PACT(bits, alpha_init)
        self.fc2 = QLinear(hidden, hidden, bits)
        self.act2 = PACT(bits, alpha_init)
        self.fc3 = QLinear(hidden, n_classes, 8)

    def forward(self, x):
        return self.fc3(self.act2(self.fc2(self.act1(self.fc1(x)))))


# phase 1: full-precision pre-training
fp_net = FPNet()
fp_optimizer = torch.optim.SGD(fp_net.parameters(), lr=0.05, momentum=0.9, weight_decay=2e-4)
for step in range(args.fp_steps):
    idx = torch.randint(0, n, (args.batch_size,))
    fp_loss = F.cross_entropy(fp_net(x_all[idx]), y_all[idx])
    fp_optimizer.zero_grad()
    fp_loss.backward()
    fp_optimizer.step()
    if step % 50 == 0:
        print(f"fp {step} loss {fp_loss.item():.4f}")

# phase 2: PACT quantization-aware fine-tuning, starting from the full-precision weights
qnet = PACTNet(args.bits, args.alpha_init)
qnet.load_state_dict(fp_net.state_dict(), strict=False)
optimizer = torch.optim.SGD(qnet.parameters(), lr=0.02, momentum=0.9, weight_decay=2e-4)
for step in range(args.qat_steps):
    idx = torch.randint(0, n, (args.batch_size,))
    logits = qnet(x_all[idx])
    loss = F.cross_entropy(logits, y_all[idx])
    l2_alpha = sum(p.pow(2) for name, p in qnet.named_parameters() if "alpha" in name)
    loss = loss + args.lambda_alpha * l2_alpha
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 50 == 0:
        acc = (logits.argmax(1) == y_all[idx]).float().mean().item()
        print(f"qat {step} loss {loss.item():.4f} acc {acc:.3f} "
              f"alpha {qnet.act1.alpha.item():.3f} {qnet.act2.alpha.item():.3f}")

if args.out:
    torch.save({"fp_net": fp_net.state_dict(), "qnet": qnet.state_dict()}, args.out)
