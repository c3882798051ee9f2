"""IndRNN trained on the adding problem.

Paper: Shuai Li, Wanqing Li, Chris Cook, Ce Zhu, Yanbo Gao, "Independently Recurrent Neural
Network (IndRNN): Building A Longer and Deeper RNN", CVPR 2018, arXiv:1803.04831.
Reference implementation: Sunnydreamrain/IndRNN_pytorch -- IndRNN_onlyrecurrent.py
(IndRNNCell_onlyrecurrent, IndRNN_onlyrecurrent), Indrnn_plainnet.py (stackedIndRNN_encoder)
and pixelMNIST/Indrnn_mnist_train.py (train, clip_weight, clip_gradient); the adding-problem
batches follow batzner/indrnn, examples/addition_rnn.py (get_batch).

A stack of IndRNN layers, h_t = relu(W x_t + b + u * h_{t-1}) with a recurrent vector u (one
weight per neuron, element-wise product), reads a sequence of (value, marker) pairs and
regresses the sum of the two marked values from the last hidden state of the top layer.
Every update follows the reference training loop: zero the gradients, clamp each recurrent
vector u to [-U, U] with U = 2^(1/T) in place and outside autograd, run the whole sequence,
back-propagate the MSE through all T steps (the hidden state is never cut inside a sequence),
clamp every gradient element, and take an Adam step. Input weights get weight decay; the
recurrent vectors and the biases are optimized without it.
Bug: inside IndRNNLayer.forward the previous hidden state is detached at every time step,
so the loss only reaches each layer through one step of recurrence: the recurrent vectors u get
a one-step gradient and nothing is back-propagated through time.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--seq_len", type=int, default=20)
parser.add_argument("--hidden", type=int, default=32)
parser.add_argument("--layers", type=int, default=2)
parser.add_argument("--batch", type=int, default=32)
parser.add_argument("--steps", type=int, default=80)
parser.add_argument("--lr", type=float, default=2e-3)
parser.add_argument("--decay", type=float, default=1e-4)
parser.add_argument("--gradclip", type=float, default=1.0)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

U_BOUND = 2.0 ** (1.0 / args.seq_len)


class IndRNNLayer(nn.Module):
    """Recurrent part only; the input projection is done by the Linear before it."""

    def __init__(self, hidden_size):
        super().__init__()
        self.hidden_size = hidden_size
        self.weight_hh = nn.Parameter(torch.empty(hidden_size))
        nn.init.uniform_(self.weight_hh, 0.0, U_BOUND)

    def forward(self, x):
        h = x.new_zeros(x.size(1), self.hidden_size)
        outputs = []
        for x_t in x.unbind(0):
            h = F.relu(x_t + self.weight_hh * h.detach())
            outputs.append(h)
        return torch.stack(outputs, 0)


class StackedIndRNN(nn.Module):
    def __init__(self, input_size, hidden_size, num_layers):
        super().__init__()
        self.dense = nn.ModuleList()
        self.rnns = nn.ModuleList()
        for i in range(num_layers):
            self.dense.append(nn.Linear(input_size if i == 0 else hidden_size, hidden_size))
            self.rnns.append(IndRNNLayer(hidden_size))
        self.classifier = nn.Linear(hidden_size, 1)
        for name, p in self.named_parameters():
            if "bias" in name:
                nn.init.zeros_(p)

    def forward(self, x):
        for dense, rnn in zip(self.dense, self.rnns):
            x = rnn(dense(x))
        return self.classifier(x[-1]).squeeze(-1)


def adding_batch(batch, seq_len):
    values = torch.rand(seq_len, batch)
    markers = torch.zeros(seq_len, batch)
    half = seq_len // 2
    cols = torch.arange(batch)
    markers[torch.randint(0, half, (batch,)), cols] = 1.0
    markers[torch.randint(half, seq_len, (batch,)), cols] = 1.0
    inputs = torch.stack([values, markers], -1)
    targets = (values * markers).sum(0)
    return inputs, targets


def clip_weight(model, bound):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "weight_hh" in name:
                p.clamp_(-bound, bound)


model = StackedIndRNN(2, args.hidden, args.layers)
named = list(model.named_parameters())
param_decay = [p for n, p in named if n.endswith(".weight")]
param_nodecay = [p for n, p in named if n.endswith(".bias") or n.endswith("weight_hh")]
optimizer = torch.optim.Adam([
    {"params": param_nodecay},
    {"params": param_decay, "weight_decay": args.decay},
], lr=args.lr)
criterion = nn.MSELoss()

for step in range(1, args.steps + 1):
    inputs, targets = adding_batch(args.batch, args.seq_len)
    model.zero_grad()
    clip_weight(model, U_BOUND)
    output = model(inputs)
    loss = criterion(output, targets)
    loss.backward()
    torch.nn.utils.clip_grad_value_(model.parameters(), args.gradclip)
    optimizer.step()
    if step % 20 == 0:
        print(f"step {step:4d}  mse {loss.item():.4f}")

clip_weight(model, U_BOUND)
if args.out is not None:
    torch.save({"model": model.state_dict()}, args.out)
