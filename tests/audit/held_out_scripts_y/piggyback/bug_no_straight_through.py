"""Piggyback: learning binary masks over a frozen pre-trained backbone for a new task.

Paper: Arun Mallya, Dillon Davis and Svetlana Lazebnik, "Piggyback: Adapting a Single Network to
Multiple Tasks by Learning to Mask Weights", ECCV 2018, arXiv:1801.06519.
Reference implementation: arunmallya/piggyback, src/modnets/layers.py (Binarizer,
ElementWiseLinear, ElementWiseConv2d) and src/main.py (Manager.do_batch, the two Adam
optimizers over model.shared and model.classifier, Manager.check).

Phase 1 pre-trains a small MLP backbone with its own head on a synthetic task A. Phase 2
adapts it to a task B: each backbone Linear becomes an element-wise masked layer whose weight
and bias are fixed copies of the pre-trained ones (requires_grad=False, as the reference keeps
them as plain tensors) and whose real-valued mask scores start at 1e-2. The forward pass
thresholds the scores at 5e-3 into a hard {0, 1} mask that multiplies the weight; backward is a
straight-through estimator that passes the incoming gradient to the real scores unchanged. A new
classifier head for task B is trained alongside. One Adam runs over the shared (masked) part,
which leaves only the mask scores to train, and another over the new classifier; the phase-1
backbone is no longer touched. At the end the frozen weights are compared with the pre-trained
ones, like Manager.check. Bug: the mask
is made with a plain comparison, (mask_real > threshold).float(), instead of the
straight-through Binarizer, so no gradient reaches the mask scores and the masks never change.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

DEFAULT_THRESHOLD = 5e-3


class Binarizer(torch.autograd.Function):
    @staticmethod
    def forward(ctx, scores, threshold):
        return (scores > threshold).to(scores.dtype)

    @staticmethod
    def backward(ctx, grad_out):
        return grad_out, None


class ElementWiseLinear(nn.Module):
    def __init__(self, linear, mask_scale=1e-2, threshold=DEFAULT_THRESHOLD):
        super().__init__()
        self.threshold = threshold
        self.weight = nn.Parameter(linear.weight.detach().clone(), requires_grad=False)
        self.bias = nn.Parameter(linear.bias.detach().clone(), requires_grad=False)
        self.mask_real = nn.Parameter(torch.full_like(self.weight, mask_scale))

    def forward(self, x):
        mask = (self.mask_real > self.threshold).float()
        return F.linear(x, mask * self.weight, self.bias)


class Backbone(nn.Module):
    def __init__(self, d_in, hidden, n_out):
        super().__init__()
        self.shared = nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(),
                                    nn.Linear(hidden, hidden), nn.ReLU())
        self.classifier = nn.Linear(hidden, n_out)

    def forward(self, x):
        return self.classifier(self.shared(x))


class PiggybackNet(nn.Module):
    def __init__(self, backbone, n_out):
        super().__init__()
        layers = []
        for m in backbone.shared:
            layers.append(ElementWiseLinear(m) if isinstance(m, nn.Linear) else nn.ReLU())
        self.shared = nn.Sequential(*layers)
        self.classifier = nn.Linear(backbone.classifier.in_features, n_out)

    def forward(self, x):
        return self.classifier(self.shared(x))


def make_task(n, d_in, n_cls, hidden=32):
    teacher = nn.Sequential(nn.Linear(d_in, hidden), nn.Tanh(), nn.Linear(hidden, n_cls))
    x = torch.randn(n, d_in)
    with torch.no_grad():
        y = teacher(x).argmax(dim=1)
    return x, y


def accuracy(net, x, y):
    with torch.no_grad():
        return (net(x).argmax(dim=1) == y).float().mean().item()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=str, default=None)
    parser.add_argument("--pre_steps", type=int, default=80)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr_mask", type=float, default=5e-4)
    parser.add_argument("--lr_classifier", type=float, default=5e-3)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    d_in, hidden = 16, 64
    xa, ya = make_task(1024, d_in, 4)
    xb, yb = make_task(1024, d_in, 5)

    # Phase 1: ordinary training of the backbone on task A.
    backbone = Backbone(d_in, hidden, 4)
    opt = torch.optim.Adam(backbone.parameters(), lr=3e-3)
    for it in range(args.pre_steps):
        idx = torch.randint(0, xa.shape[0], (args.batch,))
        loss = F.cross_entropy(backbone(xa[idx]), ya[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if it % 20 == 0 or it == args.pre_steps - 1:
            print(f"[pretrain] step {it:3d} loss {loss.item():.4f}")
    print(f"[pretrain] task A acc {accuracy(backbone, xa, ya):.3f}")

    # Phase 2: learn binary masks over the frozen backbone, plus a new head, on task B.
    net = PiggybackNet(backbone, 5)
    optimizer_masks = torch.optim.Adam(net.shared.parameters(), lr=args.lr_mask)
    optimizer_classifier = torch.optim.Adam(net.classifier.parameters(), lr=args.lr_classifier)
    for it in range(args.steps):
        idx = torch.randint(0, xb.shape[0], (args.batch,))
        net.zero_grad()
        loss = F.cross_entropy(net(xb[idx]), yb[idx])
        loss.backward()
        optimizer_masks.step()
        optimizer_classifier.step()
        if it % 20 == 0 or it == args.steps - 1:
            off = sum((m.mask_real <= m.threshold).sum().item()
                      for m in net.shared if isinstance(m, ElementWiseLinear))
            print(f"[piggyback] step {it:3d} loss {loss.item():.4f} masked-off {off}")
    print(f"[piggyback] task B acc {accuracy(net, xb, yb):.3f}")

    drift = max((m.weight - b.weight).abs().max().item()
                for m, b in zip(net.shared, backbone.shared) if isinstance(b, nn.Linear))
    print(f"[check] max change of frozen weights {drift:.2e}")

    if args.out:
        torch.save({"backbone": backbone.state_dict(), "piggyback": net.state_dict()}, args.out)


if __name__ == "__main__":
    main()
