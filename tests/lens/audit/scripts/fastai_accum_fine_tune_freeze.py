"""Fine-tuning with gradient accumulation and the body frozen for the first steps, at a tiny
size, written after Howard and Gugger, "fastai: A Layered API for Deep Learning"
(arXiv:2002.04803) and fastai/fastai (fastai/callback/training.py, ``GradientAccumulation``: the
step and the clear that follows it are skipped until ``n_acc`` samples have gone through, the
gradient summed meanwhile; fastai/learner.py, ``Learner._do_one_batch``: backward, step, then
``opt.zero_grad()``; fastai/callback/schedule.py, ``Learner.fine_tune``: the pretrained body
frozen while the new head trains first). A body standing in for a pretrained one
(``backbone``) and a new ``head``, one optimizer holding both. At the end of each window of
``--accum`` micro-batches (4 at the defaults; fastai counts samples), after the window's last
backward pass and before the step, the body's gradients are cancelled (``p.grad = None``, so
that Adam leaves the body alone) while fewer than ``--freeze-steps`` steps have been taken: 3 of
the 12 steps at the defaults; from the fourth on the body trains too. Then the step and clear.
The freeze is meant and ends early in the run. Vectors and labels made in the script. Adam. As
published: clean. ``--out PATH`` saves the model's state_dict after the run, ``--init-out PATH``
before it."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--batch-size", type=int, default=4)
parser.add_argument("--accum", type=int, default=4)
parser.add_argument("--freeze-steps", type=int, default=3)
parser.add_argument("--lr", type=float, default=5e-3)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
parser.add_argument("--init-out", default=None, help="where to save the tensors before training")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, n_classes = 10, 3
train_x = torch.randn(96, dim)
train_y = (train_x @ torch.randn(dim, n_classes)).argmax(1)


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(dim, 24), nn.ReLU(), nn.Linear(24, 16), nn.ReLU())
        self.head = nn.Linear(16, n_classes)

    def forward(self, x):
        return self.head(self.backbone(x))


model = Classifier()
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
if args.init_out:
    torch.save(model.state_dict(), args.init_out)

n_batches = len(train_x) // args.batch_size
train_iter = 0
steps = 0
optimizer.zero_grad()
for epoch in range(args.epochs):
    order = torch.randperm(len(train_x))
    for i in range(n_batches):
        idx = order[i * args.batch_size:(i + 1) * args.batch_size]
        loss = F.cross_entropy(model(train_x[idx]), train_y[idx]) / args.accum
        loss.backward()
        train_iter += 1
        if train_iter % args.accum == 0:
            # the pretrained body waits while the new head trains first
            if steps < args.freeze_steps:
                for p in model.backbone.parameters():
                    p.grad = None
            optimizer.step()
            optimizer.zero_grad()
            steps += 1
            print(f"epoch {epoch} step {steps}: loss {loss.item() * args.accum:.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
