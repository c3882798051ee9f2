"""A small convolutional classifier trained with gradient accumulation, at a tiny size: the
accumulation loop of HuggingFace transformers' ``run_clm_no_trainer.py``
(https://github.com/huggingface/transformers/blob/v4.10.0/examples/pytorch/language-modeling/run_clm_no_trainer.py):
each micro-batch's loss divided by ``gradient_accumulation_steps`` and ``backward()``, then,
every ``gradient_accumulation_steps`` micro-batches or at the last one, ``optimizer.step()``,
``lr_scheduler.step()`` and ``optimizer.zero_grad()``. The model is a LeNet-like network (LeCun
et al., "Gradient-Based Learning Applied to Document Recognition", Proc. IEEE 1998) on 8x8
images of a horizontal or a vertical bar in noise, made in the script. Written
variation, clean: ``optimizer.zero_grad(set_to_none=True)`` once per update, at its first
micro-batch, before the first ``backward()`` it sums (no gradient is cleared unused)."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--micro-batches", type=int, default=6)
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--gradient-accumulation-steps", type=int, default=3)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)


def make_batch(n):
    labels = torch.randint(0, 2, (n,))
    images = 0.3 * torch.randn(n, 1, 8, 8)
    where = torch.randint(1, 7, (n,))
    for i in range(n):
        if labels[i] == 0:
            images[i, 0, where[i], :] += 1.0
        else:
            images[i, 0, :, where[i]] += 1.0
    return images, labels


class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 2 * 2, 2)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


train_batches = [make_batch(args.batch_size) for _ in range(args.micro_batches)]
model = LeNet()
optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
updates = args.epochs * -(-len(train_batches) // args.gradient_accumulation_steps)
lr_scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1 - s / updates)
completed_steps = 0
for epoch in range(args.epochs):
    model.train()
    for step, (images, labels) in enumerate(train_batches):
        if step % args.gradient_accumulation_steps == 0:
            optimizer.zero_grad(set_to_none=True)
        logits = model(images)
        loss = F.cross_entropy(logits, labels)
        loss = loss / args.gradient_accumulation_steps
        loss.backward()
        if (step + 1) % args.gradient_accumulation_steps == 0 or step == len(train_batches) - 1:
            optimizer.step()
            lr_scheduler.step()
            completed_steps += 1
    print(f"epoch {epoch}: loss {loss.item() * args.gradient_accumulation_steps:.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
