"""Manifold Mixup at a tiny size, written after Verma, Lamb, Beckham, Najafi, Mitliagkas,
Lopez-Paz and Bengio, "Manifold Mixup: Better Representations by Interpolating Hidden States"
(ICML 2019, arXiv:1806.05236), section 2: at every minibatch a layer k is drawn at random from a
set of eligible layers (the input included), the batch is run up to layer k, the hidden states
of the batch are interpolated with those of a shuffled copy of the same batch with a weight lam
drawn from Beta(alpha, alpha), the one-hot labels are interpolated with the same weight and
permutation, and the rest of the network is run on the mixed states, the loss being taken
against the mixed labels; gradients flow through the whole network, the layers before k
included. With vikasverma1077/manifold_mixup (https://github.com/vikasverma1077/manifold_mixup,
supervised/models/preresnet.py PreActResNet.forward: with mixup_hidden, layer_mix =
random.randint(0, 2), lam from get_lambda(mixup_alpha), target_reweighted = to_one_hot(target),
and mixup_process applied to the input (layer_mix 0), after layer1 (1) or after layer2 (2);
supervised/models/utils.py mixup_process: a permutation of the batch, out * lam +
out[indices] * (1 - lam), and the same mix of the one-hot targets; supervised/main.py train:
output, reweighted_target = model(input, target, mixup_hidden=True, mixup_alpha=...), loss =
bce_loss(softmax(output), reweighted_target), then optimizer.zero_grad(), loss.backward() and
optimizer.step() of a Nesterov SGD with weight decay at every batch). The data: 8x8 images of
four classes made in the script (a class template, randomly shifted, scaled and noised), a small
pre-activation residual network with three stages, a few epochs over a fixed training set.
Bug: mixup_process is decorated with @torch.no_grad(), as a data augmentation helper that
only mixes tensors and labels (supervised/models/utils.py mixup_process runs with gradient, and
the paper backpropagates through the whole network, the layers before the mixing layer
included), so whenever the drawn layer is 1 or 2 the mixed hidden state leaves the helper
without a graph: conv1 and layer1 (and layer2 when the mix is after it) get no gradient from that
batch and only keep moving by SGD's momentum and weight decay, while the layers after the mix
train on the mixed states; a mix at the input (layer 0) trains as in the clean script."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--mixup-alpha", type=float, default=2.0)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

image_size, num_classes, n_train = 8, 4, 512


def make_data(n, templates):
    labels = torch.randint(0, num_classes, (n,))
    x = templates[labels] * (0.6 + 0.8 * torch.rand(n, 1, 1, 1))
    shifts = torch.randint(-1, 2, (n, 2))
    x = torch.stack([torch.roll(xi, (int(s[0]), int(s[1])), dims=(1, 2)) for xi, s in zip(x, shifts)])
    return x + 0.5 * torch.randn_like(x), labels


templates = F.avg_pool2d(torch.randn(num_classes, 1, image_size + 2, image_size + 2), 3, stride=1)
templates = templates / templates.std(dim=(1, 2, 3), keepdim=True)
train_x, train_y = make_data(n_train, templates)


class PreActBlock(nn.Module):
    def __init__(self, in_planes, planes, stride=1):
        super().__init__()
        self.bn1, self.bn2 = nn.BatchNorm2d(in_planes), nn.BatchNorm2d(planes)
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
        self.shortcut = None
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Conv2d(in_planes, planes, 1, stride=stride, bias=False)

    def forward(self, x):
        out = F.relu(self.bn1(x))
        shortcut = self.shortcut(out) if self.shortcut is not None else x
        out = self.conv1(out)
        out = self.conv2(F.relu(self.bn2(out)))
        return out + shortcut


def to_one_hot(target, n):
    return torch.zeros(target.shape[0], n).scatter_(1, target.unsqueeze(1), 1.0)


@torch.no_grad()
def mixup_process(out, target_reweighted, lam):
    indices = torch.randperm(out.shape[0])
    out = out * lam + out[indices] * (1 - lam)
    target_reweighted = target_reweighted * lam + target_reweighted[indices] * (1 - lam)
    return out, target_reweighted


class PreActResNet(nn.Module):
    def __init__(self, width=8):
        super().__init__()
        self.conv1 = nn.Conv2d(1, width, 3, padding=1, bias=False)
        self.layer1 = PreActBlock(width, width)
        self.layer2 = PreActBlock(width, 2 * width, stride=2)
        self.layer3 = PreActBlock(2 * width, 4 * width, stride=2)
        self.bn = nn.BatchNorm2d(4 * width)
        self.linear = nn.Linear(4 * width, num_classes)

    def forward(self, x, target=None, mixup_hidden=False, mixup_alpha=None):
        layer_mix = int(torch.randint(0, 3, ())) if mixup_hidden else None
        out = x
        if mixup_alpha is not None:
            lam = torch.distributions.Beta(mixup_alpha, mixup_alpha).sample()
        if target is not None:
            target_reweighted = to_one_hot(target, num_classes)
        if layer_mix == 0:
            out, target_reweighted = mixup_process(out, target_reweighted, lam)
        out = self.layer1(self.conv1(out))
        if layer_mix == 1:
            out, target_reweighted = mixup_process(out, target_reweighted, lam)
        out = self.layer2(out)
        if layer_mix == 2:
            out, target_reweighted = mixup_process(out, target_reweighted, lam)
        out = self.layer3(out)
        out = F.adaptive_avg_pool2d(F.relu(self.bn(out)), 1).flatten(1)
        out = self.linear(out)
        if target is not None:
            return out, target_reweighted
        return out


model = PreActResNet()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4, nesterov=True)
bce_loss = nn.BCELoss()

step = 0
for epoch in range(args.epochs):
    model.train()
    perm = torch.randperm(n_train)
    for start in range(0, n_train, args.batch_size):
        idx = perm[start:start + args.batch_size]
        output, reweighted_target = model(train_x[idx], train_y[idx], mixup_hidden=True,
                                          mixup_alpha=args.mixup_alpha)
        loss = bce_loss(F.softmax(output, dim=1), reweighted_target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
    model.eval()
    with torch.no_grad():
        acc = (model(train_x).argmax(1) == train_y).float().mean().item()
    print(f"epoch {epoch} step {step} loss {loss.item():.4f} train acc {acc:.3f}")

if args.out:
    torch.save({f"model.{k}": v for k, v in model.state_dict().items()}, args.out)
