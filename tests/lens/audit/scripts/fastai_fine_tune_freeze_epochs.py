"""Fine-tuning with the body frozen for the first epoch, at a tiny size, written after Howard and
Gugger, "fastai: A Layered API for Deep Learning" (arXiv:2002.04803) and fastai/fastai
(fastai/callback/schedule.py, ``Learner.fine_tune``: the model is frozen, its new head trained
for ``freeze_epochs``, then unfrozen and trained whole; the linear probing then fine-tuning of
Kumar et al., arXiv:2202.10054): a body standing in for a pretrained one (``backbone``) and a
new classification head (``head``), one optimizer holding both, with a smaller learning rate
for the body. fastai freezes with ``requires_grad``; here the body's gradients are cancelled
(``p.grad = None``, after the backward pass, as SwAV cancels its prototypes') while the run's
iteration counter is below ``--freeze-epochs`` epochs' worth of batches: 4 of the 12 iterations
at the defaults (3 epochs of 4 batches), and the body trains from the fifth on. Constant
learning rates (no one-cycle schedule). Vectors and labels made in the script. Adam. As
published: clean. ``--out PATH`` saves the model's state_dict after the run, ``--init-out PATH``
before it."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--freeze-epochs", type=int, default=1)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--base-lr", type=float, default=1e-2)
parser.add_argument("--lr-mult", type=float, default=10.0)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
parser.add_argument("--init-out", default=None, help="where to save the tensors before training")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, n_classes = 12, 4
train_x = torch.randn(64, dim)
train_y = (train_x @ torch.randn(dim, n_classes)).argmax(1)


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, 16), nn.ReLU())
        self.head = nn.Linear(16, n_classes)

    def forward(self, x):
        return self.head(self.backbone(x))


model = Classifier()
optimizer = torch.optim.Adam([
    {"params": model.backbone.parameters(), "lr": args.base_lr / args.lr_mult},
    {"params": model.head.parameters(), "lr": args.base_lr},
])
if args.init_out:
    torch.save(model.state_dict(), args.init_out)

batches_per_epoch = len(train_x) // args.batch_size
for epoch in range(args.epochs):
    order = torch.randperm(len(train_x))
    for i in range(batches_per_epoch):
        iteration = epoch * batches_per_epoch + i
        idx = order[i * args.batch_size:(i + 1) * args.batch_size]
        loss = F.cross_entropy(model(train_x[idx]), train_y[idx])
        optimizer.zero_grad()
        loss.backward()
        # the body stays frozen for the first epochs: only the new head trains
        if iteration < args.freeze_epochs * batches_per_epoch:
            for p in model.backbone.parameters():
                p.grad = None
        optimizer.step()
        print(f"epoch {epoch} iteration {iteration} loss {loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
