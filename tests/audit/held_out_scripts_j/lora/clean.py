"""Low-rank adaptation at a tiny size, written after Hu, Shen, Wallis, Allen-Zhu, Li, Wang, Wang
and Chen, "LoRA: Low-Rank Adaptation of Large Language Models" (ICLR 2022, arXiv:2106.09685),
section 4.1, with microsoft/LoRA (https://github.com/microsoft/LoRA, loralib/layers.py Linear:
a subclass of nn.Linear whose pretrained weight is set to requires_grad = False in the
constructor, lora_A initialised by kaiming_uniform_, lora_B by zeros_, scaling = lora_alpha / r,
and forward = F.linear(x, weight, bias) + (x @ lora_A.T @ lora_B.T) * scaling; loralib/utils.py
mark_only_lora_as_trainable, which sets requires_grad = False on every parameter whose name holds
no 'lora_', biases included; the README's recipe: build the model with loralib layers, load the
pretrained checkpoint with strict=False, mark only LoRA as trainable, then train). Two phases: a
small MLP of nn.Linear layers is first trained in full on task 1 (a regression to a random
teacher, standing in for the pretrained checkpoint); then the same MLP is rebuilt with LoRA
layers for its two hidden projections (the output layer stays a plain nn.Linear), the pretrained
weights are loaded into it, only lora_A and lora_B are left trainable, and Adam over the
parameters that require gradient adapts it to task 2, whose teacher differs from task 1's by a
low-rank change of its first weight. Data made in the script. As published: clean."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--pretrain-steps", type=int, default=40)
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--rank", type=int, default=4)
parser.add_argument("--lora-alpha", type=float, default=8.0)
parser.add_argument("--pretrain-lr", type=float, default=1e-2)
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

in_dim, hidden_dim, out_dim = 8, 32, 4
teacher_w1, teacher_w2 = torch.randn(16, in_dim) / 2, torch.randn(out_dim, 16) / 4
delta_w1 = 0.8 * torch.randn(16, 2) @ torch.randn(2, in_dim) / 2


def make_task(n, delta):
    x = torch.randn(n, in_dim)
    return x, torch.tanh(x @ (teacher_w1 + delta).t()) @ teacher_w2.t()


x1, y1 = make_task(512, 0.0)
x2, y2 = make_task(512, delta_w1)


class LoRALinear(nn.Linear):
    """A dense layer with a trainable low-rank update B A of its frozen pretrained weight."""

    def __init__(self, in_features, out_features, r, lora_alpha):
        super().__init__(in_features, out_features)
        self.lora_A = nn.Parameter(self.weight.new_zeros(r, in_features))
        self.lora_B = nn.Parameter(self.weight.new_zeros(out_features, r))
        self.scaling = lora_alpha / r
        self.weight.requires_grad = False
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        nn.init.zeros_(self.lora_B)

    def forward(self, x):
        result = F.linear(x, self.weight, self.bias)
        return result + (x @ self.lora_A.t() @ self.lora_B.t()) * self.scaling


class MLP(nn.Module):
    def __init__(self, make_linear):
        super().__init__()
        self.fc1 = make_linear(in_dim, hidden_dim)
        self.fc2 = make_linear(hidden_dim, hidden_dim)
        self.out = nn.Linear(hidden_dim, out_dim)

    def forward(self, x):
        return self.out(torch.tanh(self.fc2(torch.tanh(self.fc1(x)))))


def mark_only_lora_as_trainable(model):
    for name, p in model.named_parameters():
        if "lora_" not in name:
            p.requires_grad = False


# phase 1: the base network, every weight trained on task 1
base = MLP(nn.Linear)
pretrain_optimizer = torch.optim.Adam(base.parameters(), lr=args.pretrain_lr)
for step in range(args.pretrain_steps):
    idx = torch.randint(0, len(x1), (args.batch_size,))
    loss = F.mse_loss(base(x1[idx]), y1[idx])
    pretrain_optimizer.zero_grad()
    loss.backward()
    pretrain_optimizer.step()
    print(f"pretrain {step} loss {loss.item():.4f}")

# phase 2: LoRA layers loaded with the pretrained weights, only the low-rank factors trained
model = MLP(lambda n_in, n_out: LoRALinear(n_in, n_out, args.rank, args.lora_alpha))
model.load_state_dict(base.state_dict(), strict=False)
mark_only_lora_as_trainable(model)
optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=args.lr)
for step in range(args.steps):
    idx = torch.randint(0, len(x2), (args.batch_size,))
    loss = F.mse_loss(model(x2[idx]), y2[idx])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"lora {step} loss {loss.item():.4f}")

with torch.no_grad():
    print(f"task 2 loss: base {F.mse_loss(base(x2), y2).item():.4f} "
          f"adapted {F.mse_loss(model(x2), y2).item():.4f}")

if args.out:
    torch.save({"base": base.state_dict(), "model": model.state_dict()}, args.out)
