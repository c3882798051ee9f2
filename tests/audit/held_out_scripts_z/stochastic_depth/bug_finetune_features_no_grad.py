"""Residual network with stochastic depth: pre-training, then fine-tuning on a new label set.

Huang, Sun, Liu, Sedra, Weinberger, "Deep Networks with Stochastic Depth", ECCV 2016,
arXiv:1603.09382. Reference implementation: GitHub yueatsprograms/Stochastic_Depth,
ResidualDrop.lua (nn.ResidualDrop: updateOutput, updateGradInput, accGradParameters) and
main.lua (death rates for deathMode 'lin_decay', gate sampling per mini-batch, sgdState);
torchvision.ops.stochastic_depth is the per-sample, train-time-rescaled variant of the same idea.

A small residual network (3x3 stem, six residual blocks of conv-BN-ReLU-conv-BN with an identity
shortcut and a ReLU after the addition, global average pooling, linear head) classifies
synthetic 8x8 images built from noisy class prototypes. Block l of L has death rate
l / L * (1 - p_L) with p_L = 0.5. Before every mini-batch one gate per block is drawn; a closed
block outputs only its shortcut, so its branch is neither run nor reached by the gradient,
while an open block adds its branch as usual; in eval mode every branch runs and is scaled by
its survival probability. Phase 1 pre-trains the network on one set of classes with SGD
(Nesterov momentum, weight decay), zeroing the gradients before every backward. Phase 2 swaps
in a fresh head for a new set of classes and fine-tunes the whole network, stochastic depth
still active, with a new SGD over all parameters; nothing is cut there either: the loss reaches
the head and every block that survives the draw. Bug: in phase 2 the backbone
features are computed under torch.no_grad() and only the new head model.fc sees the loss,
so the pre-trained stem and residual blocks get no gradient and stay as pre-trained
although the optimizer holds them.
"""
import argparse

import torch
import torch.nn.functional as F
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--seed", type=int, default=0)
p.add_argument("--out", type=str, default=None)
p.add_argument("--pretrain_steps", type=int, default=40)
p.add_argument("--finetune_steps", type=int, default=25)
p.add_argument("--batch_size", type=int, default=32)
p.add_argument("--p_last", type=float, default=0.5)
args = p.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)


class ResidualDrop(nn.Module):
    def __init__(self, channels, death_rate):
        super().__init__()
        self.death_rate = death_rate
        self.gate = True
        self.net = nn.Sequential(
            nn.Conv2d(channels, channels, 3, padding=1), nn.BatchNorm2d(channels), nn.ReLU(),
            nn.Conv2d(channels, channels, 3, padding=1), nn.BatchNorm2d(channels))
        for m in self.net:
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
                nn.init.zeros_(m.bias)

    def forward(self, x):
        if self.training:
            out = x + self.net(x) if self.gate else x
        else:
            out = x + (1.0 - self.death_rate) * self.net(x)
        return F.relu(out)


class ResNetSD(nn.Module):
    def __init__(self, in_ch=3, width=8, n_blocks=6, n_classes=4, p_last=0.5):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(in_ch, width, 3, padding=1),
                                  nn.BatchNorm2d(width), nn.ReLU())
        self.blocks = nn.ModuleList(
            [ResidualDrop(width, (l + 1) / n_blocks * (1.0 - p_last)) for l in range(n_blocks)])
        self.fc = nn.Linear(width, n_classes)

    def features(self, x):
        x = self.stem(x)
        for block in self.blocks:
            x = block(x)
        return x.mean(dim=(2, 3))

    def forward(self, x):
        return self.fc(self.features(x))


def resample_gates(model):
    for block in model.blocks:
        block.gate = bool(torch.rand(()) >= block.death_rate)


def make_task(n_classes):
    protos = torch.randn(n_classes, 3, 8, 8)
    protos = F.avg_pool2d(F.pad(protos, (1, 1, 1, 1), mode="circular"), 3, stride=1)

    def batch(n):
        y = torch.randint(0, n_classes, (n,))
        return protos[y] * 2.0 + 1.0 * torch.randn(n, 3, 8, 8), y
    return batch


@torch.no_grad()
def evaluate(model, batch_fn, n=256):
    model.eval()
    x, y = batch_fn(n)
    acc = (model(x).argmax(-1) == y).float().mean().item()
    model.train()
    return acc


task_a = make_task(4)
task_b = make_task(3)
model = ResNetSD(n_classes=4, p_last=args.p_last)

# phase 1: pre-training with stochastic depth
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                            weight_decay=1e-4)
model.train()
for step in range(args.pretrain_steps):
    resample_gates(model)
    x, y = task_a(args.batch_size)
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 10 == 0 or step == args.pretrain_steps - 1:
        print("pretrain step %d  loss %.4f  open %d/%d" % (
            step, loss.item(), sum(b.gate for b in model.blocks), len(model.blocks)))
print("pretrain eval acc %.3f" % evaluate(model, task_a))

# phase 2: new head, fine-tune the whole network
model.fc = nn.Linear(model.fc.in_features, 3)
optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9, nesterov=True,
                            weight_decay=1e-4)
model.train()
for step in range(args.finetune_steps):
    resample_gates(model)
    x, y = task_b(args.batch_size)
    with torch.no_grad():
        feats = model.features(x)
    logits = model.fc(feats)
    loss = F.cross_entropy(logits, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 10 == 0 or step == args.finetune_steps - 1:
        print("finetune step %d  loss %.4f" % (step, loss.item()))
print("finetune eval acc %.3f" % evaluate(model, task_b))

if args.out is not None:
    torch.save({"model": model.state_dict()}, args.out)
