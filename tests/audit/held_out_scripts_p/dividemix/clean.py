"""DivideMix, learning with noisy labels as semi-supervised learning, at a tiny size, written after
Li, Socher and Hoi, "DivideMix: Learning with Noisy Labels as Semi-supervised Learning" (ICLR
2020, arXiv:2002.07394), section 3 and algorithm 1: two networks are warmed up on the noisy labels;
then, every epoch, each network fits a two-component Gaussian mixture to its per-sample losses,
and the clean probabilities of one network split the data for the other (co-divide) into a
labelled set, whose labels are refined with the network's own predictions, and an unlabelled
set, whose labels are guessed by both networks; each network is then trained with MixMatch on the
division of its peer. With LiJunnan1992/DivideMix (https://github.com/LiJunnan1992/DivideMix,
Train_CIFAR.py: warmup, cross-entropy on the noisy labels for each network with its own SGD;
eval_train, per-sample cross-entropy under torch.no_grad(), normalised to [0, 1], and
GaussianMixture(n_components=2, max_iter=10, tol=1e-2, reg_covar=5e-4) whose lower-mean component
gives the clean probability; the main loop, prob2 and pred2 = prob2 > p_threshold for the division
on which train(epoch, net1, net2, optimizer1, ...) trains net1, then prob1 for
train(epoch, net2, net1, optimizer2, ...); train: under torch.no_grad() the co-guessing of the
unlabelled batch from the softmax of both networks on two augmentations and the co-refinement
w_x * labels_x + (1 - w_x) * px of the labelled batch, both sharpened with temperature T and
detached; then mixup with l = max(l, 1 - l) over the labelled and unlabelled inputs and targets,
one forward of the mixed inputs, SemiLoss (soft cross-entropy on the labelled part, mean squared
error on the unlabelled part weighted by linear_rampup) plus the uniform-prior penalty, and
zero_grad, backward and step of the network's own optimizer). Four Gaussian classes made in the
script, symmetric label noise, Gaussian jitter as the augmentation; the mixture is fitted by a
few EM steps written here in place of scikit-learn's. As published: clean."""

import argparse

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--warm-up", type=int, default=3, help="warm-up epochs")
parser.add_argument("--num-epochs", type=int, default=6)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--r", type=float, default=0.4, help="noise ratio")
parser.add_argument("--alpha", type=float, default=4.0)
parser.add_argument("--lambda-u", type=float, default=25.0)
parser.add_argument("--p-threshold", type=float, default=0.5)
parser.add_argument("--T", type=float, default=0.5)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

num_class, in_dim, n_train = 4, 10, 320
centres = 1.5 * torch.randn(num_class, in_dim)
true_labels = torch.randint(0, num_class, (n_train,))
train_x = centres[true_labels] + torch.randn(n_train, in_dim)
flip = torch.rand(n_train) < args.r
noisy_labels = torch.where(flip, torch.randint(0, num_class, (n_train,)), true_labels)
test_labels = torch.randint(0, num_class, (256,))
test_x = centres[test_labels] + torch.randn(256, in_dim)


def augment(x):
    return x + 0.3 * torch.randn_like(x)


def create_model():
    return nn.Sequential(nn.Linear(in_dim, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                         nn.Linear(32, num_class))


def warmup(net, optimizer):
    net.train()
    order = torch.randperm(n_train)
    for i in range(0, n_train, 2 * args.batch_size):
        idx = order[i:i + 2 * args.batch_size]
        optimizer.zero_grad()
        loss = F.cross_entropy(net(augment(train_x[idx])), noisy_labels[idx])
        loss.backward()
        optimizer.step()
    return loss.item()


def gmm_clean_prob(losses, n_iter=10, reg_covar=5e-4):
    """A two-component 1-D Gaussian mixture by EM; the posterior of the lower-mean component."""
    x = losses.double()
    means = torch.stack([x.min(), x.max()])
    var = x.var().repeat(2) + reg_covar
    weights = torch.full((2,), 0.5, dtype=torch.float64)
    for _ in range(n_iter):
        log_p = -0.5 * ((x[:, None] - means) ** 2 / var + var.log()) + weights.log()
        resp = torch.softmax(log_p, dim=1)
        nk = resp.sum(0) + 1e-10
        weights = nk / len(x)
        means = (resp * x[:, None]).sum(0) / nk
        var = (resp * (x[:, None] - means) ** 2).sum(0) / nk + reg_covar
    log_p = -0.5 * ((x[:, None] - means) ** 2 / var + var.log()) + weights.log()
    return torch.softmax(log_p, dim=1)[:, means.argmin()].float()


def eval_train(net):
    net.eval()
    with torch.no_grad():
        losses = F.cross_entropy(net(train_x), noisy_labels, reduction="none")
    losses = (losses - losses.min()) / (losses.max() - losses.min())
    return gmm_clean_prob(losses)


def linear_rampup(current, rampup_length=16):
    return args.lambda_u * float(np.clip((current - args.warm_up) / rampup_length, 0.0, 1.0))


@torch.no_grad()
def co_guess(net, net2, inputs_x, inputs_x2, labels_x, w_x, inputs_u, inputs_u2):
    """Label co-guessing of the unlabelled batch and co-refinement of the labelled one."""
    pu = (net(inputs_u).softmax(1) + net(inputs_u2).softmax(1)
          + net2(inputs_u).softmax(1) + net2(inputs_u2).softmax(1)) / 4
    ptu = pu ** (1 / args.T)
    targets_u = ptu / ptu.sum(dim=1, keepdim=True)
    px = (net(inputs_x).softmax(1) + net(inputs_x2).softmax(1)) / 2
    px = w_x * labels_x + (1 - w_x) * px
    ptx = px ** (1 / args.T)
    targets_x = ptx / ptx.sum(dim=1, keepdim=True)
    return targets_x, targets_u


def train(epoch, net, net2, optimizer, pred, prob):
    net.train()
    net2.eval()  # fix one network and train the other
    labeled_idx, unlabeled_idx = pred.nonzero().squeeze(1), (~pred).nonzero().squeeze(1)
    labeled_idx = labeled_idx[torch.randperm(len(labeled_idx))]
    unlabeled_order = unlabeled_idx[torch.randperm(len(unlabeled_idx))]
    num_iter = len(labeled_idx) // args.batch_size + 1
    for batch_idx, i in enumerate(range(0, len(labeled_idx), args.batch_size)):
        idx_x = labeled_idx[i:i + args.batch_size]
        idx_u = unlabeled_order[torch.arange(i, i + args.batch_size) % len(unlabeled_order)]
        batch_size = len(idx_x)
        inputs_x, inputs_x2 = augment(train_x[idx_x]), augment(train_x[idx_x])
        inputs_u, inputs_u2 = augment(train_x[idx_u]), augment(train_x[idx_u])
        labels_x = F.one_hot(noisy_labels[idx_x], num_class).float()
        w_x = prob[idx_x].view(-1, 1)

        targets_x, targets_u = co_guess(net, net2, inputs_x, inputs_x2, labels_x, w_x,
                                        inputs_u, inputs_u2)

        # mixmatch
        lam = torch.distributions.Beta(args.alpha, args.alpha).sample().item()
        lam = max(lam, 1 - lam)
        all_inputs = torch.cat([inputs_x, inputs_x2, inputs_u, inputs_u2], dim=0)
        all_targets = torch.cat([targets_x, targets_x, targets_u, targets_u], dim=0)
        perm = torch.randperm(all_inputs.size(0))
        mixed_input = lam * all_inputs + (1 - lam) * all_inputs[perm]
        mixed_target = lam * all_targets + (1 - lam) * all_targets[perm]

        logits = net(mixed_input)
        logits_x, logits_u = logits[:batch_size * 2], logits[batch_size * 2:]
        Lx = -torch.mean(torch.sum(F.log_softmax(logits_x, dim=1) * mixed_target[:batch_size * 2],
                                   dim=1))
        Lu = torch.mean((torch.softmax(logits_u, dim=1) - mixed_target[batch_size * 2:]) ** 2)
        lamb = linear_rampup(epoch + batch_idx / num_iter)

        # regularization towards a uniform prediction on average
        prior = torch.ones(num_class) / num_class
        pred_mean = torch.softmax(logits, dim=1).mean(0)
        penalty = torch.sum(prior * torch.log(prior / pred_mean))

        loss = Lx + lamb * Lu + penalty
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return Lx.item(), Lu.item()


def test(net1, net2):
    with torch.no_grad():
        outputs = net1(test_x) + net2(test_x)
    return (outputs.argmax(1) == test_labels).float().mean().item()


net1, net2 = create_model(), create_model()
optimizer1 = torch.optim.SGD(net1.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
optimizer2 = torch.optim.SGD(net2.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
prob1 = prob2 = torch.zeros(n_train)

for epoch in range(args.num_epochs):
    if epoch < args.warm_up:
        loss1 = warmup(net1, optimizer1)
        loss2 = warmup(net2, optimizer2)
        print(f"epoch {epoch} warm-up CE {loss1:.3f} {loss2:.3f} test acc {test(net1, net2):.3f}")
    else:
        prob1 = eval_train(net1)
        prob2 = eval_train(net2)
        pred1 = prob1 > args.p_threshold
        pred2 = prob2 > args.p_threshold
        Lx1, Lu1 = train(epoch, net1, net2, optimizer1, pred2, prob2)  # net1 on net2's division
        Lx2, Lu2 = train(epoch, net2, net1, optimizer2, pred1, prob1)  # net2 on net1's division
        clean_found = (pred1 == ~flip).float().mean().item()
        print(f"epoch {epoch} Lx {Lx1:.3f} {Lx2:.3f} Lu {Lu1:.4f} {Lu2:.4f} "
              f"division acc {clean_found:.3f} test acc {test(net1, net2):.3f}")

if args.out:
    torch.save({**{f"net1.{k}": v for k, v in net1.state_dict().items()},
                **{f"net2.{k}": v for k, v in net2.state_dict().items()},
                "prob1": prob1, "prob2": prob2}, args.out)
