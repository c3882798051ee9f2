"""Image classification with gradient accumulation, at a tiny size, written after Wightman's
pytorch-image-models (huggingface/pytorch-image-models, train.py, ``train_one_epoch`` with
``--grad-accum-steps``): in each epoch, ``need_update`` marks the last micro-batch of a window
(``(batch_idx + 1) % accum_steps == 0``, or the epoch's last batch); the windows left at the end
of an epoch that does not divide are shorter, and their losses are scaled by
``last_accum_steps``; the backward pass is followed by the clipped step when ``need_update``
holds; then ``if not need_update: continue``, and past it the update is counted, the gradient
cleared (``optimizer.zero_grad()``) and the learning rate scheduled by update. The gradient is
also cleared once before each epoch. 10 batches an epoch, 3 micro-batches a window (windows of
3, 3, 3 and 1), 2 epochs: 8 updates. A small CNN (``conv_stem``, ``conv_head``,
``classifier``), no batch norm. Images and labels made in the script. SGD with Nesterov momentum
and weight decay, a cosine schedule. As published: clean. ``--out PATH`` saves the model's
state_dict after the run."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--batch-size", type=int, default=4)
parser.add_argument("--grad-accum-steps", type=int, default=3)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--weight-decay", type=float, default=1e-4)
parser.add_argument("--clip-grad", type=float, default=5.0)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

num_classes = 3
images = torch.randn(40, 1, 8, 8)
targets = torch.randint(0, num_classes, (40,))
images[:, :, :4, :4] += targets.view(-1, 1, 1, 1).float()


class TinyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv_stem = nn.Conv2d(1, 8, 3, padding=1)
        self.conv_head = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.classifier = nn.Linear(16, num_classes)

    def forward(self, x):
        x = F.relu(self.conv_head(F.relu(self.conv_stem(x))))
        return self.classifier(x.mean((2, 3)))


model = TinyNet()
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, nesterov=True,
                            weight_decay=args.weight_decay)
loader_len = len(images) // args.batch_size
updates_per_epoch = (loader_len + args.grad_accum_steps - 1) // args.grad_accum_steps
total_updates = args.epochs * updates_per_epoch


def step_update(num_updates):
    for group in optimizer.param_groups:
        group["lr"] = 0.5 * args.lr * (1 + math.cos(math.pi * num_updates / total_updates))


def train_one_epoch(epoch, num_updates):
    accum_steps = args.grad_accum_steps
    last_accum_steps = loader_len % accum_steps
    last_batch_idx = loader_len - 1
    last_batch_idx_to_accum = loader_len - last_accum_steps
    order = torch.randperm(len(images))
    model.train()
    optimizer.zero_grad()
    for batch_idx in range(loader_len):
        idx = order[batch_idx * args.batch_size:(batch_idx + 1) * args.batch_size]
        input, target = images[idx], targets[idx]
        last_batch = batch_idx == last_batch_idx
        need_update = last_batch or (batch_idx + 1) % accum_steps == 0
        if batch_idx >= last_batch_idx_to_accum:
            accum_steps = last_accum_steps
        output = model(input)
        loss = F.cross_entropy(output, target)
        if accum_steps > 1:
            loss = loss / accum_steps
        loss.backward()
        if need_update:
            if args.clip_grad is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip_grad)
            optimizer.step()
        if not need_update:
            continue
        num_updates += 1
        optimizer.zero_grad()
        step_update(num_updates)
        print(f"epoch {epoch} update {num_updates}: loss {loss.item() * accum_steps:.4f}")
    return num_updates


num_updates = 0
for epoch in range(args.epochs):
    num_updates = train_one_epoch(epoch, num_updates)

if args.out:
    torch.save(model.state_dict(), args.out)
