"""DoRA fine-tuning of a small pre-trained MLP, in two phases.

Paper: Shih-Yang Liu, Chien-Yi Wang, Hongxu Yin, Pavlo Molchanov, Yu-Chiang Frank Wang,
Kwang-Ting Cheng, Min-Hung Chen, "DoRA: Weight-Decomposed Low-Rank Adaptation", ICML 2024,
arXiv:2402.09353. Reference implementations: NVlabs/DoRA, and huggingface/peft,
src/peft/tuners/lora/dora.py (DoraLinearLayer.get_weight_norm, DoraLinearLayer.forward).

Phase 1 pre-trains a three-layer MLP regressor on a synthetic teacher. Phase 2 adapts it to a
shifted teacher with DoRA. Each linear layer keeps its pre-trained weight W0 and bias frozen
and gains a low-rank update B A (B starts at zero) and a magnitude vector m, one entry per
output unit, initialised to the row norms of W0. The layer uses the weight
m * (W0 + s B A) / ||W0 + s B A||, with the norm taken per output unit. Following section 4.3
of the paper (and peft), the norm is detached: it tracks B A in the forward pass but is a
constant for backpropagation, so gradients reach m, A and B only through the numerator and
the scale factor. The phase-2 optimizer holds exactly A, B and m of every adapted layer.
Bug: the trainable parameters are selected by the LoRA name filter alone ("lora_"), so
the magnitude vectors m get gradients but are never in the optimizer and stay fixed.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self, d_in=8, d_hid=32, d_out=4):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hid)
        self.fc2 = nn.Linear(d_hid, d_hid)
        self.fc3 = nn.Linear(d_hid, d_out)

    def forward(self, x):
        h = torch.tanh(self.fc1(x))
        h = torch.tanh(self.fc2(h))
        return self.fc3(h)


class DoRALinear(nn.Module):
    def __init__(self, base, rank=4, alpha=8.0):
        super().__init__()
        self.base = base
        self.base.requires_grad_(False)
        self.scaling = alpha / rank
        self.lora_A = nn.Parameter(torch.empty(rank, base.in_features))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank))
        self.magnitude = nn.Parameter(base.weight.detach().norm(p=2, dim=1).clone())

    def forward(self, x):
        weight = self.base.weight + self.scaling * (self.lora_B @ self.lora_A)
        weight_norm = weight.norm(p=2, dim=1, keepdim=True).detach()
        weight = (self.magnitude.unsqueeze(1) / weight_norm) * weight
        return F.linear(x, weight, self.base.bias)


def make_teacher(shift=None):
    teacher = MLP()
    if shift is not None:
        teacher.load_state_dict(shift.state_dict())
        with torch.no_grad():
            for p in teacher.parameters():
                p.add_(0.3 * torch.randn_like(p))
    teacher.requires_grad_(False)
    return teacher


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=str, default=None)
    parser.add_argument("--pre_steps", type=int, default=150)
    parser.add_argument("--ft_steps", type=int, default=120)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)

    teacher_a = make_teacher()
    teacher_b = make_teacher(shift=teacher_a)
    model = MLP()

    # phase 1: pre-training of the base model
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for step in range(args.pre_steps):
        x = torch.randn(args.batch, 8)
        loss = F.mse_loss(model(x), teacher_a(x))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0 or step == args.pre_steps - 1:
            print(f"pretrain step {step:4d} loss {loss.item():.5f}")

    # phase 2: DoRA adaptation to the shifted teacher
    for name in ("fc1", "fc2", "fc3"):
        setattr(model, name, DoRALinear(getattr(model, name)))
    dora_params = [p for n, p in model.named_parameters() if "lora_" in n]
    opt = torch.optim.AdamW(dora_params, lr=5e-3, weight_decay=0.0)
    for step in range(args.ft_steps):
        x = torch.randn(args.batch, 8)
        loss = F.mse_loss(model(x), teacher_b(x))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 40 == 0 or step == args.ft_steps - 1:
            print(f"dora step {step:4d} loss {loss.item():.5f}")

    if args.out:
        torch.save({"model": model.state_dict()}, args.out)


if __name__ == "__main__":
    main()
