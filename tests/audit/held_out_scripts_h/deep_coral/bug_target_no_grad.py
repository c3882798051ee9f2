"""Deep CORAL at a tiny size, written after Sun and Saenko, "Deep CORAL: Correlation Alignment for
Deep Domain Adaptation" (ECCV 2016 Workshops, arXiv:1607.01719), section 3 (the CORAL loss
||C_S - C_T||_F^2 / (4 d^2) between the covariances of the source and target activations of the
last layer, with its gradient taken with respect to both the source and the target activations,
equations 3 and 4), with the PyTorch DeepCORAL of SSARCandy/DeepCORAL
(https://github.com/SSARCandy/DeepCORAL, models.py CORAL, feature_covariance_mat and
DeepCORAL.forward, which sends the source and the target batch through the same sharedNet and the
same source_fc; main.py train, the loss classification_loss + _lambda * coral_loss, and the SGD
with momentum over the shared net and, at ten times its learning rate, the last layer). Two
phases: a source-only warm-up by cross-entropy on the labelled source domain (the source-only
baseline, _lambda = 0 in main.py), then the Deep CORAL phase, a new SGD with the paper's two
learning rates, cleared at every step, over the cross-entropy of the source batch plus lambda
times the CORAL loss between the class scores of the source and of the unlabelled target batch,
both computed with their graphs through the one shared network, so that the alignment moves both
domains. Gaussian clusters in a low-dimensional space, lifted by a random map, and a target domain
made from them by a random linear shift, made in the script. Injected bug: in the Deep CORAL
phase the target batch's class scores are computed under torch.no_grad() (the target has no labels,
so its outputs were taken for statistics only), so the CORAL loss has no gradient with respect to
the target activations (the paper's equation 4, t_gradient in SSARCandy's CORAL.backward) and
moves only the source covariance towards a target covariance held fixed; the shared network is
never trained on the target domain; second phase of a two-phase script."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--warmup-steps", type=int, default=15)
parser.add_argument("--steps", type=int, default=15)
parser.add_argument("--source-batch", type=int, default=64)
parser.add_argument("--target-batch", type=int, default=32)
parser.add_argument("--warmup-lr", type=float, default=0.05)
parser.add_argument("--lr", type=float, default=0.005)
parser.add_argument("--coral-weight", type=float, default=10.0)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, hidden, n_classes, n_points = 16, 32, 4, 512

lift = torch.randn(4, dim)
centres = 2 * torch.randn(n_classes, 4)
shift_map = torch.eye(4) + 0.5 * torch.randn(4, 4)
shift = torch.randn(4)


def make_domain(target):
    labels = torch.randint(0, n_classes, (n_points,))
    points = centres[labels] + torch.randn(n_points, 4)
    if target:
        points = points @ shift_map + shift
    return torch.tanh(points @ lift / 2), labels


x_source, y_source = make_domain(target=False)
x_target, _ = make_domain(target=True)


class DeepCORAL(nn.Module):
    def __init__(self):
        super().__init__()
        self.shared_net = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(),
                                        nn.Linear(hidden, hidden), nn.ReLU())
        self.fc = nn.Linear(hidden, n_classes)
        self.fc.weight.data.normal_(0, 0.005)

    def forward(self, x):
        return self.fc(self.shared_net(x))


def covariance(x):
    centred = x - x.mean(0, keepdim=True)
    return centred.t() @ centred / (x.size(0) - 1)


def coral(source, target):
    d = source.size(1)
    return ((covariance(source) - covariance(target)) ** 2).sum() / (4 * d * d)


model = DeepCORAL()

# phase 1: source-only warm-up
optimizer = torch.optim.SGD(model.parameters(), lr=args.warmup_lr, momentum=0.9)
for step in range(args.warmup_steps):
    idx = torch.randint(0, n_points, (args.source_batch,))
    loss = F.cross_entropy(model(x_source[idx]), y_source[idx])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"warm-up step {step} classification {loss.item():.4f}")

# phase 2: Deep CORAL, the last layer at ten times the learning rate
optimizer = torch.optim.SGD([{"params": model.shared_net.parameters()},
                             {"params": model.fc.parameters(), "lr": 10 * args.lr}],
                            lr=args.lr, momentum=0.9, weight_decay=5e-4)
for step in range(args.steps):
    source_idx = torch.randint(0, n_points, (args.source_batch,))
    target_idx = torch.randint(0, n_points, (args.target_batch,))
    out_source = model(x_source[source_idx])
    with torch.no_grad():
        out_target = model(x_target[target_idx])
    classification_loss = F.cross_entropy(out_source, y_source[source_idx])
    coral_loss = coral(out_source, out_target)
    loss = classification_loss + args.coral_weight * coral_loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} classification {classification_loss.item():.4f} "
          f"coral {coral_loss.item():.6f}")

if args.out:
    torch.save({"model": model.state_dict()}, args.out)
