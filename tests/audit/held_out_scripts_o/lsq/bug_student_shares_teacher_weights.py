"""Learned step size quantization at a tiny size, written after Esser, McKinstry, Bablani,
Appuswamy and Modha, "Learned Step Size Quantization" (ICLR 2020, arXiv:1902.08153), section 2:
weights and activations quantized as v_hat = round(clip(v / s, -Q_N, Q_P)) * s, the round
passed straight through, with a step size s per layer learnt by backpropagation, initialised to
2 <|v|> / sqrt(Q_P) on the initial weights or the first batch of activations, and its gradient
scaled by g = 1 / sqrt(N * Q_P); the quantized network fine-tuned from a trained full-precision
one, which also serves as a distillation teacher. With zhutmost/lsq-net
(https://github.com/zhutmost/lsq-net, quan/quantizer/lsq.py: grad_scale, which returns
(y - y_grad).detach() + y_grad with y_grad = x * scale, round_pass, (y - y_grad).detach() + y_grad
with y = x.round() and y_grad = x, and LsqQuan.forward, which divides by the scaled step size,
clamps to [thd_neg, thd_pos], rounds and multiplies back; quan/func.py: QuanLinear, which takes
nn.Parameter(m.weight.detach()) and the bias of the full-precision layer it replaces and
quantizes its weight and its input in forward). Two phases: a full-precision MLP trained on a
five-class problem made in the script, then a quantized copy of it (3-bit hidden layers, 8-bit
first and last layers, the network input left unquantized) trained by SGD on the cross-entropy
plus the KL divergence to the frozen full-precision teacher's softmax, its activation step sizes
set from the first batch before the optimizer is built.
Bug: the quantized network is made from the full-precision network itself, quantize(fp_model), for
a copy of it, and QuanLinear's nn.Parameter(m.weight.detach()) shares its storage with the
teacher's weight (lsq-net replaces the full-precision model and keeps no teacher; with the
full-precision network kept as the teacher the student must be built from copy.deepcopy of it), so
every SGD step of the quantized weights and biases also moves the frozen teacher's: from the second
step on the distillation target is the softmax of the student's own full-precision weights."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--fp-steps", type=int, default=60)
parser.add_argument("--qat-steps", type=int, default=20)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--bits", type=int, default=3)
parser.add_argument("--fp-lr", type=float, default=1e-2)
parser.add_argument("--lr", type=float, default=0.005)
parser.add_argument("--momentum", type=float, default=0.9)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

in_dim, hidden_dim, n_classes = 16, 48, 5
rule = torch.randn(in_dim, n_classes)
train_x = torch.randn(1024, in_dim)
train_y = (torch.tanh(train_x) @ rule).argmax(1)


def grad_scale(x, scale):
    y = x
    y_grad = x * scale
    return (y - y_grad).detach() + y_grad


def round_pass(x):
    y = x.round()
    y_grad = x
    return (y - y_grad).detach() + y_grad


class LsqQuan(nn.Module):
    def __init__(self, bit, all_positive):
        super().__init__()
        if all_positive:
            self.thd_neg, self.thd_pos = 0, 2 ** bit - 1
        else:
            self.thd_neg, self.thd_pos = -2 ** (bit - 1), 2 ** (bit - 1) - 1
        self.s = nn.Parameter(torch.ones(1))

    def init_from(self, x):
        with torch.no_grad():
            self.s.copy_(x.abs().mean() * 2 / self.thd_pos ** 0.5)

    def forward(self, x, n):
        s_scale = grad_scale(self.s, 1.0 / (self.thd_pos * n) ** 0.5)
        x = torch.clamp(x / s_scale, self.thd_neg, self.thd_pos)
        return round_pass(x) * s_scale


class QuanLinear(nn.Module):
    def __init__(self, m, w_bit, a_bit=None):
        super().__init__()
        self.weight = nn.Parameter(m.weight.detach())
        self.bias = nn.Parameter(m.bias.detach())
        self.quan_w_fn = LsqQuan(w_bit, all_positive=False)
        self.quan_w_fn.init_from(m.weight)
        self.quan_a_fn = LsqQuan(a_bit, all_positive=True) if a_bit else None

    def forward(self, x):
        quantized_weight = self.quan_w_fn(self.weight, self.weight.numel())
        quantized_act = self.quan_a_fn(x, x.shape[1]) if self.quan_a_fn is not None else x
        return F.linear(quantized_act, quantized_weight, self.bias)


def quantize(model):
    """The linear layers replaced: the first and last at 8 bits, the others at args.bits."""
    linears = [m for m in model if isinstance(m, nn.Linear)]
    layers = []
    for m in model:
        if isinstance(m, nn.Linear):
            first, last = m is linears[0], m is linears[-1]
            w_bit = 8 if first or last else args.bits
            a_bit = None if first else 8 if last else args.bits
            layers.append(QuanLinear(m, w_bit, a_bit))
        else:
            layers.append(m)
    return nn.Sequential(*layers)


def batch():
    idx = torch.randint(0, len(train_x), (args.batch_size,))
    return train_x[idx], train_y[idx]


# phase 1: the full-precision network
fp_model = nn.Sequential(nn.Linear(in_dim, hidden_dim), nn.ReLU(),
                         nn.Linear(hidden_dim, hidden_dim), nn.ReLU(),
                         nn.Linear(hidden_dim, n_classes))
fp_optimizer = torch.optim.Adam(fp_model.parameters(), lr=args.fp_lr)
for step in range(args.fp_steps):
    x, y = batch()
    loss = F.cross_entropy(fp_model(x), y)
    fp_optimizer.zero_grad()
    loss.backward()
    fp_optimizer.step()
print(f"full precision done, loss {loss.item():.4f}")

# phase 2: the quantized network from a copy of it, the full-precision network as teacher
model = quantize(fp_model)
teacher = fp_model
teacher.requires_grad_(False)
teacher.eval()
with torch.no_grad():
    h = batch()[0]
    for layer in model:
        if isinstance(layer, QuanLinear) and layer.quan_a_fn is not None:
            layer.quan_a_fn.init_from(h)
        h = layer(h)
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
for step in range(args.qat_steps):
    x, y = batch()
    output = model(x)
    with torch.no_grad():
        teacher_output = teacher(x)
    loss_kd = F.kl_div(F.log_softmax(output, 1), F.softmax(teacher_output, 1),
                       reduction="batchmean")
    loss = 0.5 * F.cross_entropy(output, y) + 0.5 * loss_kd
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 5 == 0:
        print(f"step {step} loss {loss.item():.4f} kd {loss_kd.item():.4f}")

if args.out:
    torch.save({**{f"model.{k}": v for k, v in model.state_dict().items()},
                **{f"teacher.{k}": v for k, v in teacher.state_dict().items()}},
               args.out)
