"""Adversarial weight perturbation at a tiny size, written after Wu, Xia and Wang, "Adversarial
Weight Perturbation Helps Robust Generalization" (NeurIPS 2020, arXiv:2004.05884), section 4 and
algorithm 1 (AWP on TRADES): each step first crafts adversarial inputs x' by PGD, then finds a
weight perturbation v by one gradient ascent step of the robust loss on the weights, scaled
layer by layer to gamma times the norm of each weight, trains the weights w + v and takes v off
again. With csdongxian/AWP (https://github.com/csdongxian/AWP, trades_AWP/utils_awp.py TradesAWP:
calc_awp loads the model's state_dict into a separate proxy network, calls proxy_optim.zero_grad()
and steps the proxy's own SGD on the negated TRADES loss, then diff_in_weights returns each
weight matrix's change scaled to that weight's norm; perturb and restore add and subtract gamma
times it under torch.no_grad(); trades_AWP/train_trades_cifar.py: perturb_input crafts x' by
PGD on the KL term with torch.autograd.grad, train calls calc_awp and perturb from epoch
--awp-warmup on, then optimizer.zero_grad(), the TRADES loss's backward and optimizer.step() at
the perturbed weights, then restore; main builds the proxy as a second network of the same
architecture with its own optim.SGD; here a deep copy of the model, whose weights calc_awp
overwrites each step). Two phases as with --awp-warmup: plain TRADES training, then
TRADES-AWP. Inputs in [0, 1]^10 with a three-way rule, made in the script; a small MLP. Bug: the
proxy is bound to the model itself, proxy = model, for a network of its own (csdongxian/AWP's main
builds proxy as a second network and proxy_optim = optim.SGD(proxy.parameters(), ...), "a proxy
model to calculate AWP"), so calc_awp's load_state_dict copies the model onto itself, proxy_optim's
ascent step on the negated TRADES loss moves the model's own weights and is never taken off, and
diff_in_weights compares the model with itself: every perturbation v is zero, and the model trains
on alternating ascent and descent steps instead of at w + v; second phase of a two-phase script."""

import argparse
import copy
from collections import OrderedDict

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--warmup-steps", type=int, default=8)
parser.add_argument("--awp-steps", type=int, default=8)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--epsilon", type=float, default=0.08)
parser.add_argument("--pgd-steps", type=int, default=4)
parser.add_argument("--beta", type=float, default=6.0)
parser.add_argument("--awp-gamma", type=float, default=0.01)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

in_dim, hidden_dim, n_classes, EPS = 10, 32, 3, 1e-20
rule = torch.randn(in_dim, n_classes)


def batch(n):
    x = torch.rand(n, in_dim)
    return x, ((x - 0.5) @ rule).argmax(dim=1)


def make_net():
    return nn.Sequential(nn.Linear(in_dim, hidden_dim), nn.ReLU(),
                         nn.Linear(hidden_dim, hidden_dim), nn.ReLU(),
                         nn.Linear(hidden_dim, n_classes))


def perturb_input(net, x_natural):
    """PGD on the KL between the outputs at x' and at x, inside the l_inf ball."""
    step_size = args.epsilon / 2
    x_adv = x_natural.detach() + 0.001 * torch.randn(x_natural.shape)
    for _ in range(args.pgd_steps):
        x_adv.requires_grad_()
        loss_kl = F.kl_div(F.log_softmax(net(x_adv), dim=1), F.softmax(net(x_natural), dim=1),
                           reduction="sum")
        grad = torch.autograd.grad(loss_kl, [x_adv])[0]
        x_adv = x_adv.detach() + step_size * torch.sign(grad.detach())
        x_adv = torch.min(torch.max(x_adv, x_natural - args.epsilon), x_natural + args.epsilon)
        x_adv = torch.clamp(x_adv, 0.0, 1.0)
    return x_adv


def trades_loss(net, x_natural, x_adv, y):
    loss_robust = F.kl_div(F.log_softmax(net(x_adv), dim=1), F.softmax(net(x_natural), dim=1),
                           reduction="batchmean")
    return F.cross_entropy(net(x_natural), y) + args.beta * loss_robust


def diff_in_weights(net, proxy):
    diff = OrderedDict()
    for (old_k, old_w), (_, new_w) in zip(net.state_dict().items(), proxy.state_dict().items()):
        if old_w.dim() > 1 and "weight" in old_k:
            diff_w = new_w - old_w
            diff[old_k] = old_w.norm() / (diff_w.norm() + EPS) * diff_w
    return diff


def add_into_weights(net, diff, coeff):
    with torch.no_grad():
        for name, param in net.named_parameters():
            if name in diff:
                param.add_(coeff * diff[name])


class TradesAWP:
    def __init__(self, net, proxy, proxy_optim, gamma):
        self.net, self.proxy, self.proxy_optim, self.gamma = net, proxy, proxy_optim, gamma

    def calc_awp(self, x_adv, x_natural, y):
        self.proxy.load_state_dict(self.net.state_dict())
        loss = -1.0 * trades_loss(self.proxy, x_natural, x_adv, y)
        self.proxy_optim.zero_grad()
        loss.backward()
        self.proxy_optim.step()
        return diff_in_weights(self.net, self.proxy)

    def perturb(self, diff):
        add_into_weights(self.net, diff, self.gamma)

    def restore(self, diff):
        add_into_weights(self.net, diff, -self.gamma)


model = make_net()
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
proxy = model
proxy_optim = torch.optim.SGD(proxy.parameters(), lr=args.lr)
awp_adversary = TradesAWP(model, proxy, proxy_optim, args.awp_gamma)

for step in range(args.warmup_steps + args.awp_steps):
    x_natural, y = batch(args.batch_size)
    x_adv = perturb_input(model, x_natural)
    use_awp = step >= args.warmup_steps
    if use_awp:
        awp = awp_adversary.calc_awp(x_adv, x_natural, y)
        awp_adversary.perturb(awp)
    loss = trades_loss(model, x_natural, x_adv, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if use_awp:
        awp_adversary.restore(awp)
    print(f"step {step} awp {use_awp} loss {loss.item():.4f}")

with torch.no_grad():
    x, y = batch(500)
    print(f"natural accuracy {(model(x).argmax(1) == y).float().mean().item():.3f}")

if args.out:
    torch.save({f"model.{k}": v for k, v in model.state_dict().items()}, args.out)
