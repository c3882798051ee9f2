"""TRADES adversarial training (L2 threat model) of a small CNN on synthetic images.

Paper: Hongyang Zhang, Yaodong Yu, Jiantao Jiao, Eric P. Xing, Laurent El Ghaoui and Michael I.
Jordan, "Theoretically Principled Trade-off between Robustness and Accuracy", ICML 2019,
arXiv:1901.08573.
Reference implementation: yaodongyu/TRADES, trades.py (trades_loss, distance='l_2' branch: the
inner maximisation runs perturb_steps SGD steps on a perturbation delta, each one zeroing delta's
gradient, back-propagating -KL(f(x + delta) || f(x)) with loss.backward(), dividing delta's
gradient by its per-example L2 norm (a random direction where that norm is zero), stepping, and
projecting x + delta back into [0, 1] and delta onto the epsilon ball; then model.train(), the
"# zero gradient" optimizer.zero_grad() that clears the parameter gradients the attack's
backward calls left behind, and loss = CE(f(x), y) + beta * KL(f(x') || f(x)) / batch_size with
gradient through both f(x) and f(x')), models/small_cnn.py (SmallCNN: a convolutional
feature_extractor and an MLP classifier with dropout, Kaiming init, zero-initialised last layer)
and train_trades_cifar10.py (train: zero_grad, trades_loss, backward, SGD step with momentum and
weight decay; adjust_learning_rate: a step decay of the learning rate by epoch).

The data are 8x8 single-channel images in [0, 1], four classes, each a fixed random template plus
noise. The attack runs with the network in eval mode (dropout off) and trains in train mode. One
SGD optimizer (momentum 0.9, weight decay 2e-4) holds every parameter; the learning rate drops
tenfold for the last epoch. Natural and robust accuracy (an L2 PGD on the cross-entropy, input
gradients only through torch.autograd.grad) are measured at the end.
Bug: in the training loop optimizer.zero_grad() sits between loss.backward() and
optimizer.step(), so every step discards the TRADES gradient and SGD only applies weight decay.
"""
import argparse
from collections import OrderedDict

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--epochs", type=int, default=5)
parser.add_argument("--n_train", type=int, default=192)
parser.add_argument("--batch_size", type=int, default=32)
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--momentum", type=float, default=0.9)
parser.add_argument("--weight_decay", type=float, default=2e-4)
parser.add_argument("--epsilon", type=float, default=0.5)
parser.add_argument("--num_steps", type=int, default=5)
parser.add_argument("--beta", type=float, default=6.0)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

N_CLASSES = 4


def make_data(n, templates):
    y = torch.randint(0, N_CLASSES, (n,))
    x = templates[y] + 0.15 * torch.randn(n, 1, 8, 8)
    return x.clamp(0.0, 1.0), y


class SmallCNN(nn.Module):
    def __init__(self, drop=0.5):
        super().__init__()
        self.feature_extractor = nn.Sequential(OrderedDict([
            ("conv1", nn.Conv2d(1, 8, 3, padding=1)),
            ("relu1", nn.ReLU()),
            ("conv2", nn.Conv2d(8, 8, 3, padding=1)),
            ("relu2", nn.ReLU()),
            ("maxpool1", nn.MaxPool2d(2, 2)),
        ]))
        self.classifier = nn.Sequential(OrderedDict([
            ("fc1", nn.Linear(8 * 4 * 4, 32)),
            ("relu1", nn.ReLU()),
            ("drop", nn.Dropout(drop)),
            ("fc2", nn.Linear(32, 32)),
            ("relu2", nn.ReLU()),
            ("fc3", nn.Linear(32, N_CLASSES)),
        ]))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight)
                nn.init.constant_(m.bias, 0.0)
        nn.init.constant_(self.classifier.fc3.weight, 0.0)
        nn.init.constant_(self.classifier.fc3.bias, 0.0)

    def forward(self, x):
        features = self.feature_extractor(x)
        return self.classifier(features.view(-1, 8 * 4 * 4))


def trades_loss(model, x_natural, y, optimizer, epsilon, perturb_steps, beta):
    criterion_kl = nn.KLDivLoss(reduction="sum")
    model.eval()
    batch_size = len(x_natural)
    # inner maximisation of the KL divergence over an L2 ball
    delta = (0.001 * torch.randn(x_natural.shape)).requires_grad_()
    optimizer_delta = optim.SGD([delta], lr=epsilon / perturb_steps * 2)
    for _ in range(perturb_steps):
        adv = x_natural + delta
        optimizer_delta.zero_grad()
        loss = (-1) * criterion_kl(F.log_softmax(model(adv), dim=1),
                                   F.softmax(model(x_natural), dim=1))
        loss.backward()
        grad_norms = delta.grad.view(batch_size, -1).norm(p=2, dim=1)
        delta.grad.div_(grad_norms.view(-1, 1, 1, 1))
        if (grad_norms == 0).any():
            delta.grad[grad_norms == 0] = torch.randn_like(delta.grad[grad_norms == 0])
        optimizer_delta.step()
        with torch.no_grad():
            delta.add_(x_natural)
            delta.clamp_(0.0, 1.0).sub_(x_natural)
            delta.renorm_(p=2, dim=0, maxnorm=epsilon)
    x_adv = (x_natural + delta).detach()
    model.train()

    x_adv = torch.clamp(x_adv, 0.0, 1.0)
    # zero gradient: the attack's backward calls also filled the parameters' .grad
    optimizer.zero_grad()
    # calculate robust loss
    logits = model(x_natural)
    loss_natural = F.cross_entropy(logits, y)
    loss_robust = (1.0 / batch_size) * criterion_kl(F.log_softmax(model(x_adv), dim=1),
                                                    F.softmax(model(x_natural), dim=1))
    loss = loss_natural + beta * loss_robust
    return loss


def pgd_l2_eval(model, x, y, epsilon, steps):
    x_adv = x.clone()
    for _ in range(steps):
        x_adv.requires_grad_()
        with torch.enable_grad():
            loss = F.cross_entropy(model(x_adv), y)
        grad = torch.autograd.grad(loss, [x_adv])[0]
        norms = grad.view(len(x), -1).norm(p=2, dim=1).clamp_min(1e-12)
        x_adv = x_adv.detach() + (epsilon / steps * 2) * grad / norms.view(-1, 1, 1, 1)
        x_adv = x + (x_adv - x).renorm(p=2, dim=0, maxnorm=epsilon)
        x_adv = x_adv.clamp(0.0, 1.0)
    return x_adv.detach()


def adjust_learning_rate(optimizer, epoch):
    lr = args.lr
    if epoch >= args.epochs:
        lr = args.lr * 0.1
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr


templates = (torch.rand(N_CLASSES, 1, 8, 8) > 0.5).float() * 0.6 + 0.2
x_train, y_train = make_data(args.n_train, templates)
x_test, y_test = make_data(128, templates)

model = SmallCNN()
optimizer = optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                      weight_decay=args.weight_decay)

for epoch in range(1, args.epochs + 1):
    adjust_learning_rate(optimizer, epoch)
    model.train()
    perm = torch.randperm(args.n_train)
    for batch_idx in range(args.n_train // args.batch_size):
        idx = perm[batch_idx * args.batch_size:(batch_idx + 1) * args.batch_size]
        data, target = x_train[idx], y_train[idx]
        loss = trades_loss(model, data, target, optimizer, args.epsilon, args.num_steps,
                           args.beta)
        loss.backward()
        optimizer.zero_grad()
        optimizer.step()
        if batch_idx % 4 == 0:
            print(f"epoch {epoch} batch {batch_idx} loss {loss.item():.4f}")

model.eval()
with torch.no_grad():
    nat_acc = (model(x_test).argmax(1) == y_test).float().mean()
x_pgd = pgd_l2_eval(model, x_test, y_test, args.epsilon, 10)
with torch.no_grad():
    rob_acc = (model(x_pgd).argmax(1) == y_test).float().mean()
print(f"natural acc {nat_acc.item():.3f} robust acc {rob_acc.item():.3f}")

if args.out:
    torch.save({"model": model.state_dict()}, args.out)
