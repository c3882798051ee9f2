"""BitFit at a tiny size, written after Ben Zaken, Ravfogel and Goldberg, "BitFit: Simple
Parameter-efficient Fine-tuning for Transformer-based Masked Language-models" (ACL 2022,
arXiv:2106.10199), section 3: a pretrained encoder is fine-tuned on a downstream task with all
of its weights frozen except the bias terms, while the task's new classification layer is
trained in full. With benzakenelad/BitFit (https://github.com/benzakenelad/BitFit,
glue_evaluator.py GLUEvaluator.training_preparation: the model loaded with a fresh classifier,
_deactivate_relevant_gradients setting requires_grad = False on every parameter and back to True
on those whose names contain a trainable component, 'bias' for BitFit, with 'classifier' always
added, then Adam or AdamW over self.model.parameters(); GLUEvaluator._train: loss.backward(),
clip_grad_norm_ over the model's parameters, optimizer.step(), then self.model.zero_grad()).
Two phases: a pretraining phase in the script, every parameter of a small residual MLP encoder
with layer norms trained on a twelve-way pretraining task, then the BitFit phase on a
three-way downstream task over the same inputs, with the pretraining head replaced by a fresh
classifier. As published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--pretrain-steps", type=int, default=30)
parser.add_argument("--bitfit-steps", type=int, default=20)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--pretrain-lr", type=float, default=3e-3)
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

in_dim, hidden_dim, n_pretrain_classes, n_classes = 12, 32, 12, 3
pretrain_rule = torch.randn(in_dim, n_pretrain_classes)
task_rule = torch.randn(n_pretrain_classes, n_classes)


def pretrain_batch(n):
    x = torch.randn(n, in_dim)
    return x, (x @ pretrain_rule).argmax(dim=1)


def task_batch(n):
    x = torch.randn(n, in_dim)
    return x, (F.relu(x @ pretrain_rule) @ task_rule + 0.5).argmax(dim=1)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(hidden_dim)
        self.intermediate = nn.Linear(hidden_dim, 2 * hidden_dim)
        self.output = nn.Linear(2 * hidden_dim, hidden_dim)

    def forward(self, h):
        return h + self.output(F.gelu(self.intermediate(self.norm(h))))


class Model(nn.Module):
    def __init__(self, n_out):
        super().__init__()
        self.embed = nn.Linear(in_dim, hidden_dim)
        self.layers = nn.ModuleList([Block(), Block()])
        self.final_norm = nn.LayerNorm(hidden_dim)
        self.classifier = nn.Linear(hidden_dim, n_out)

    def forward(self, x):
        h = self.embed(x)
        for layer in self.layers:
            h = layer(h)
        return self.classifier(self.final_norm(h))


model = Model(n_pretrain_classes)

# phase 1: pretraining, every parameter trained
optimizer = torch.optim.AdamW(model.parameters(), lr=args.pretrain_lr)
for step in range(args.pretrain_steps):
    x, y = pretrain_batch(args.batch_size)
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    model.zero_grad()
print(f"pretraining done, loss {loss.item():.4f}")
pretrained = {k: v.clone() for k, v in model.state_dict().items()}

# phase 2: BitFit, a fresh classifier and only the bias terms of the encoder trained
model.classifier = nn.Linear(hidden_dim, n_classes)
trainable_components = ["bias", "classifier"]
for param in model.parameters():
    param.requires_grad = False
for name, param in model.named_parameters():
    if any(component in name for component in trainable_components):
        param.requires_grad = True
optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
for step in range(args.bitfit_steps):
    x, y = task_batch(args.batch_size)
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    model.zero_grad()
    print(f"bitfit {step} loss {loss.item():.4f}")

with torch.no_grad():
    x, y = task_batch(500)
    print(f"downstream accuracy {(model(x).argmax(1) == y).float().mean().item():.3f}")
    changed = [k for k, v in model.state_dict().items()
               if not k.startswith("classifier") and not torch.equal(v, pretrained[k])]
    print(f"encoder tensors changed by BitFit: {changed}")

if args.out:
    torch.save({f"model.{k}": v for k, v in model.state_dict().items()}, args.out)
