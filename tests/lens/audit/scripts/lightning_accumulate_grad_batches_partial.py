"""An autoencoder trained with ``accumulate_grad_batches``, at a tiny size, Lightning's automatic
optimization written out in plain torch after Lightning-AI/pytorch-lightning
(src/lightning/pytorch/loops/optimization/automatic.py: ``Closure.closure`` runs the training
step, then the zero-grad function, then the backward pass, and ``_make_zero_grad_fn`` gives a
zero-grad function only when ``batch_idx % accumulate_grad_batches == 0``, the first batch of a
window; the loss is divided by ``accumulate_grad_batches``;
src/lightning/pytorch/loops/training_epoch_loop.py, ``_should_accumulate``: no step until the
window is full or the epoch's last batch is through). The clear runs after the forward pass
and before the backward pass of a window's first batch. 8 batches an epoch, windows of 3 (3, 3
and a last one of 2, whose loss is still divided by 3), 2 epochs: 6 steps; the batch index, and
with it the windows, start again each epoch. An ``encoder`` and a ``decoder``. Vectors made in
the script. Adam. As published: clean. ``--out PATH`` saves the model's state_dict after the
run."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--max-epochs", type=int, default=2)
parser.add_argument("--batch-size", type=int, default=4)
parser.add_argument("--accumulate-grad-batches", type=int, default=3)
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, code = 12, 3
data = torch.randn(32, code) @ torch.randn(code, dim) + 0.05 * torch.randn(32, dim)


class LitAutoEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(dim, 16), nn.ReLU(), nn.Linear(16, code))
        self.decoder = nn.Sequential(nn.Linear(code, 16), nn.ReLU(), nn.Linear(16, dim))

    def training_step(self, x):
        return F.mse_loss(self.decoder(self.encoder(x)), x)


model = LitAutoEncoder()
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
num_batches = len(data) // args.batch_size
global_step = 0

for epoch in range(args.max_epochs):
    order = torch.randperm(len(data))
    for batch_idx in range(num_batches):
        batch = data[order[batch_idx * args.batch_size:(batch_idx + 1) * args.batch_size]]
        is_last_batch = batch_idx == num_batches - 1
        should_accumulate = (batch_idx + 1) % args.accumulate_grad_batches != 0 \
            and not is_last_batch
        # the closure: training step, zero grad on a window's first batch, backward
        closure_loss = model.training_step(batch) / args.accumulate_grad_batches
        is_first_batch_to_accumulate = batch_idx % args.accumulate_grad_batches == 0
        if is_first_batch_to_accumulate:
            optimizer.zero_grad()
        closure_loss.backward()
        if not should_accumulate:
            optimizer.step()
            global_step += 1
            print(f"epoch {epoch} step {global_step}: "
                  f"loss {closure_loss.item() * args.accumulate_grad_batches:.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
