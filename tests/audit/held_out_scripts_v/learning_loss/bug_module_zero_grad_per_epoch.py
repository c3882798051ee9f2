"""Learning loss for active learning: a target classifier MLP and a loss-prediction module trained
jointly over two active-learning cycles on a synthetic pool, written after Yoo and Kweon,
"Learning Loss for Active Learning" (CVPR 2019, arXiv:1905.03677): a small loss-prediction
module reads the target model's hidden features at several depths (each through its own
fully connected layer and ReLU, concatenated, then one linear output) and predicts the target
loss of each sample; it is trained with a margin ranking loss on pairs of samples of the
mini-batch (the predicted losses must be ordered as the true losses are, with the true losses
taken as constants) added to the target loss, L = L_target + lambda * L_loss; the samples of an
unlabelled subset with the largest predicted losses are then labelled for the next cycle. The
module's gradient reaches the target model through the features during the first epochs only;
after a given epoch the features it reads are detached, so from then on it no longer trains
the target model. With the code of Mephisto405/Learning-Loss-for-Active-Learning
(https://github.com/Mephisto405/Learning-Loss-for-Active-Learning, models/lossnet.py LossNet:
global average pooling, FC and ReLU per feature map, concatenation and a final Linear;
main.py LossPredLoss: pairs the i-th and the mirrored (B - 1 - i)-th samples of the batch,
detaches the true-loss differences, takes their sign as +1/-1 and returns the mean of
clamp(margin - sign * predicted difference, min=0); train_epoch: zero_grad on both the
backbone's and the module's optimizers, target_loss = CrossEntropyLoss(reduction='none'), and
if epoch > epoch_loss each of the four features is replaced by its .detach() before the module
reads them, loss = mean target loss + WEIGHT * LossPredLoss(..., margin=MARGIN), one backward
and a step of both SGD optimizers; the main loop re-creates both optimizers each cycle, ranks a
random unlabelled subset by the module's predictions under torch.no_grad() and labels the top
ADDENDUM samples), whose steps this script follows with MARGIN = WEIGHT = 1 and SGD with
momentum 0.9 and weight decay 5e-4; epoch_loss = 6 of 10 epochs keeps the reference's 120 of
200. The pool holds noisy points around four class centres, some with flipped labels.
Bug: the loss module's optimizer is zeroed once per epoch, above the batch loop, where the
reference's train_epoch zeroes both optimizers every iteration: within an epoch the module's
gradients pile up and its SGD steps on their running sum."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--cycles", type=int, default=2)
parser.add_argument("--epochs", type=int, default=10)
parser.add_argument("--epoch-loss", type=int, default=6, help="detach the features after this")
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--initial", type=int, default=128, help="initially labelled samples")
parser.add_argument("--subset", type=int, default=256, help="unlabelled samples ranked per cycle")
parser.add_argument("--addendum", type=int, default=64, help="samples labelled per cycle")
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--margin", type=float, default=1.0)
parser.add_argument("--weight", type=float, default=1.0, help="lambda, weight of the loss-prediction loss")
parser.add_argument("--out", default=None, help="where to save the backbone and the loss module")
args = parser.parse_args()
torch.manual_seed(args.seed)

in_dim, n_classes, n_pool, hidden = 12, 4, 1024, 32
centres = 1.2 * torch.randn(n_classes, in_dim)
labels_pool = torch.randint(0, n_classes, (n_pool,))
inputs_pool = centres[labels_pool] + torch.randn(n_pool, in_dim)
flip = torch.rand(n_pool) < 0.1
labels_pool = torch.where(flip, torch.randint(0, n_classes, (n_pool,)), labels_pool)


class Backbone(nn.Module):
    """The target model: four hidden stages whose outputs the loss module reads."""

    def __init__(self):
        super().__init__()
        dims = [in_dim, hidden, hidden, hidden, hidden]
        self.stages = nn.ModuleList([nn.Sequential(nn.Linear(dims[i], dims[i + 1]), nn.ReLU())
                                     for i in range(4)])
        self.linear = nn.Linear(hidden, n_classes)

    def forward(self, x):
        features = []
        for stage in self.stages:
            x = stage(x)
            features.append(x)
        return self.linear(x), features


class LossNet(nn.Module):
    def __init__(self, num_channels=(hidden, hidden, hidden, hidden), interm_dim=16):
        super().__init__()
        self.fcs = nn.ModuleList([nn.Linear(c, interm_dim) for c in num_channels])
        self.linear = nn.Linear(len(num_channels) * interm_dim, 1)

    def forward(self, features):
        outs = [F.relu(fc(f)) for fc, f in zip(self.fcs, features)]
        return self.linear(torch.cat(outs, 1))


def loss_pred_loss(pred, target, margin=1.0):
    """Margin ranking loss on the pairs (i, B - 1 - i) of the batch; the true losses are constants."""
    pred = (pred - pred.flip(0))[:len(pred) // 2]
    target = (target - target.flip(0))[:len(target) // 2]
    target = target.detach()
    one = 2 * torch.sign(torch.clamp(target, min=0)) - 1
    return torch.clamp(margin - one * pred, min=0).sum() / pred.size(0)


backbone = Backbone()
loss_module = LossNet()


def train_epoch(epoch, labeled, optim_backbone, optim_module):
    order = labeled[torch.randperm(len(labeled))]
    optim_module.zero_grad()
    for start in range(0, len(order), args.batch_size):
        idx = order[start:start + args.batch_size]
        inputs, labels = inputs_pool[idx], labels_pool[idx]
        optim_backbone.zero_grad()
        scores, features = backbone(inputs)
        target_loss = F.cross_entropy(scores, labels, reduction="none")
        if epoch > args.epoch_loss:
            # from here on the loss module's gradient no longer reaches the target model
            for i in range(len(features)):
                features[i] = features[i].detach()
        pred_loss = loss_module(features).view(-1)
        backbone_loss = target_loss.sum() / target_loss.size(0)
        module_loss = loss_pred_loss(pred_loss, target_loss, margin=args.margin)
        loss = backbone_loss + args.weight * module_loss
        loss.backward()
        optim_backbone.step()
        optim_module.step()
    return backbone_loss.item(), module_loss.item()


perm = torch.randperm(n_pool)
labeled, unlabeled = perm[:args.initial], perm[args.initial:]
for cycle in range(args.cycles):
    optim_backbone = torch.optim.SGD(backbone.parameters(), lr=args.lr, momentum=0.9,
                                     weight_decay=5e-4)
    optim_module = torch.optim.SGD(loss_module.parameters(), lr=args.lr, momentum=0.9,
                                   weight_decay=5e-4)
    for epoch in range(args.epochs):
        backbone_loss, module_loss = train_epoch(epoch, labeled, optim_backbone, optim_module)
    print(f"cycle {cycle} labelled {len(labeled)} target loss {backbone_loss:.4f} "
          f"loss-prediction loss {module_loss:.4f}")
    # rank a random unlabelled subset by the predicted loss and label the top samples
    unlabeled = unlabeled[torch.randperm(len(unlabeled))]
    subset = unlabeled[:args.subset]
    with torch.no_grad():
        _, features = backbone(inputs_pool[subset])
        uncertainty = loss_module(features).view(-1)
    arg = torch.argsort(uncertainty)
    labeled = torch.cat([labeled, subset[arg][-args.addendum:]])
    unlabeled = torch.cat([subset[arg][:-args.addendum], unlabeled[args.subset:]])

if args.out:
    torch.save({"backbone": backbone.state_dict(), "module": loss_module.state_dict()}, args.out)
