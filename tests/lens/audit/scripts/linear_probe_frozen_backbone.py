"""A linear probe over a frozen backbone, at a tiny size, written after He, Fan, Wu, Xie and
Girshick, "Momentum Contrast for Unsupervised Visual Representation Learning" (CVPR 2020,
arXiv:1911.05722) and facebookresearch/moco (main_lincls.py, ``main_worker``): every parameter
but the new classifier's (``fc.weight``, ``fc.bias``) is frozen with ``requires_grad_(False)``
once, before training and for the whole run, the classifier is initialised to small weights,
and the optimizer holds only the parameters that still require gradient (two, as MoCo asserts).
The backbone is frozen ON PURPOSE and unconditionally: the probe measures the representation,
it must not change it. The pretrained backbone is stood in for by random weights. Vectors and
labels made in the script. SGD with momentum. As published: clean. ``--out PATH`` saves the
model's state_dict after the run, ``--init-out PATH`` before it."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--lr", type=float, default=0.5)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
parser.add_argument("--init-out", default=None, help="where to save the tensors before training")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, n_classes = 12, 4
train_x = torch.randn(64, dim)
train_y = (train_x @ torch.randn(dim, n_classes)).argmax(1)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, 16), nn.ReLU())
        self.fc = nn.Linear(16, n_classes)

    def forward(self, x):
        return self.fc(self.backbone(x))


model = Net()
# freeze all layers but the last fc
for name, param in model.named_parameters():
    if name not in ["fc.weight", "fc.bias"]:
        param.requires_grad_(False)
# init the fc layer
with torch.no_grad():
    model.fc.weight.normal_(mean=0.0, std=0.01)
    model.fc.bias.zero_()

# optimize only the linear classifier
parameters = [p for p in model.parameters() if p.requires_grad]
assert len(parameters) == 2  # fc.weight, fc.bias
optimizer = torch.optim.SGD(parameters, lr=args.lr, momentum=0.9)
if args.init_out:
    torch.save(model.state_dict(), args.init_out)

iters_per_epoch = len(train_x) // args.batch_size
for epoch in range(args.epochs):
    # the frozen backbone's statistics stay as they are: evaluation mode for the whole pass
    model.eval()
    order = torch.randperm(len(train_x))
    for i in range(iters_per_epoch):
        idx = order[i * args.batch_size:(i + 1) * args.batch_size]
        loss = F.cross_entropy(model(train_x[idx]), train_y[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"epoch {epoch} iteration {epoch * iters_per_epoch + i} loss {loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
