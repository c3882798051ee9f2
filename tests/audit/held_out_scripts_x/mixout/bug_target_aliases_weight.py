"""Mixout fine-tuning of a small pre-trained MLP on a new synthetic task, written after Lee,
Cho and Kang, "Mixout: Effective Regularization to Finetune Large-scale Pretrained Language
Models" (ICLR 2020, arXiv:1909.11299): mixout(u, p) generalises dropout by replacing, with
probability p, all the outgoing parameters of a randomly chosen input neuron by those of a
target model u instead of by zero, and rescales so that the mixed weight has expectation w,
W_mix = ((1 - M) u + M w - p u) / (1 - p) with M ~ Bernoulli(1 - p) per input neuron; with u
the pre-trained weights it acts as an adaptive L2 penalty towards them, keeping fine-tuning
close to the pre-trained model. The target u is a fixed tensor, not a parameter: only w trains.
Two phases: pre-training of the MLP on task A, then fine-tuning on task B (few examples, a new
output layer) with mixout. With the authors' code, bloodwass/mixout
(https://github.com/bloodwass/mixout, mixout.py: the Mixout function draws one Bernoulli(1 - p)
mask row over the input features, repeats it over the output rows, and returns ((1 - noise) *
target + noise * input - p * target) / (1 - p), returning no gradient for the target;
mixlinear.py MixLinear: F.linear(input, mixout(self.weight, self.target, self.p,
self.training), self.bias), the bias not mixed; example.py: the nn.Linear right after each
nn.Dropout is replaced by a MixLinear whose target is that layer's weight, the state dict is
loaded into it, the dropouts are set to Dropout(0), and Adam is built over model.parameters()
after the swap), whose steps this script follows. Here the mixing is written with ordinary
autograd operations (the weight's gradient is the mask over (1 - p) times that of the mixed
weight, where the reference's hand-written backward leaves out the 1 / (1 - p)), the target is
held in a buffer (a copy, fixed), and the new output layer, which has no pre-trained weights,
mixes towards its own initial weights.
Bug: the target is taken as self.weight.detach(), the layer's own weight without a copy,
where bloodwass/mixout's example.py takes it from the replaced layer's state dict (and
example_huggingface.py deep-copies it) so that it stays at the pre-trained values: .detach()
shares storage, every in-place Adam update of the weight moves the target with it, the mixed
weight ((1 - M) w + M w - p w) / (1 - p) equals w, and mixout no longer regularises towards the
pre-trained weights; it only masks the weight's gradient (from the second fine-tuning update on:
the first starts with the weight equal to the target and is the clean one)."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--pretrain-steps", type=int, default=150)
parser.add_argument("--finetune-steps", type=int, default=100)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--mixout", type=float, default=0.7, help="p, the mix probability")
parser.add_argument("--out", default=None, help="where to save both models")
args = parser.parse_args()
torch.manual_seed(args.seed)
torch.set_num_threads(1)

in_dim, hidden, classes_a, classes_b = 16, 48, 4, 3

# two related tasks on the same inputs: both label a shared random feature map, task A
# (plenty of data) by one read-out and task B (few examples) by another
feature_map = torch.randn(in_dim, 8)
read_a, read_b = torch.randn(8, classes_a), torch.randn(8, classes_b)
x_a = torch.randn(2000, in_dim)
y_a = (torch.tanh(x_a @ feature_map) @ read_a).argmax(1)
x_b = torch.randn(96, in_dim)
y_b = (torch.tanh(x_b @ feature_map) @ read_b + 0.3 * torch.randn(96, classes_b)).argmax(1)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(in_dim, hidden)
        self.drop1 = nn.Dropout(0.1)
        self.fc2 = nn.Linear(hidden, hidden)
        self.drop2 = nn.Dropout(0.1)
        self.head = nn.Linear(hidden, classes_a)

    def forward(self, x):
        h = self.drop1(F.relu(self.fc1(x)))
        h = self.drop2(F.relu(self.fc2(h)))
        return self.head(h)


class MixLinear(nn.Module):
    """A linear layer whose weight is mixed out towards a fixed target at training time."""

    def __init__(self, linear, p):
        super().__init__()
        self.weight = nn.Parameter(linear.weight.detach().clone())
        self.bias = nn.Parameter(linear.bias.detach().clone())
        self.register_buffer("target", self.weight.detach())
        self.p = p

    def forward(self, x):
        weight = self.weight
        if self.training and self.p > 0:
            noise = torch.bernoulli(torch.full((1, self.weight.size(1)), 1 - self.p))
            weight = ((1 - noise) * self.target + noise * weight - self.p * self.target) / (1 - self.p)
        return F.linear(x, weight, self.bias)


# phase 1: pre-training on task A
pretrained = MLP()
pre_optimizer = torch.optim.Adam(pretrained.parameters(), lr=3e-3)
for step in range(args.pretrain_steps):
    idx = torch.randint(0, len(x_a), (args.batch_size,))
    loss = F.cross_entropy(pretrained(x_a[idx]), y_a[idx])
    pre_optimizer.zero_grad()
    loss.backward()
    pre_optimizer.step()
    if step % 50 == 0:
        print(f"pretrain {step} loss {loss.item():.4f}")

# phase 2: fine-tuning on task B with a new output layer; the dropout layers become Dropout(0)
# and the linear layer right after each of them a MixLinear mixing towards its current weights
model = copy.deepcopy(pretrained)
model.head = nn.Linear(hidden, classes_b)
model.drop1, model.drop2 = nn.Dropout(0.0), nn.Dropout(0.0)
model.fc2 = MixLinear(model.fc2, args.mixout)
model.head = MixLinear(model.head, args.mixout)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
model.train()
for step in range(args.finetune_steps):
    idx = torch.randint(0, len(x_b), (args.batch_size,))
    loss = F.cross_entropy(model(x_b[idx]), y_b[idx])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 50 == 0:
        print(f"finetune {step} loss {loss.item():.4f}")

if args.out:
    torch.save({"pretrained": pretrained.state_dict(), "model": model.state_dict()}, args.out)
