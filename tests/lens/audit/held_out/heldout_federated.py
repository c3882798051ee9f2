"""Federated learning: a client's local step under FedProx (a proximal term to the global
model) and under MOON (a model-contrastive term between the local, global and previous models).

Written from Xtra-Computing/NIID-Bench experiments.py@90cc8de74736d647b835664c0b77ec5372b4ffd4
(train_net_fedprox) and QinbinLi/MOON main.py@8fcba3c4efc9a47eb24687a91ba94cfb2005103f
(train_net_fedcon). The text is ours, at tiny sizes.
"""

from __future__ import annotations

import copy

import torch
from realcode_common import RealCase
from torch import nn
from torch.nn import functional as F

FEDPROX = ("Xtra-Computing/NIID-Bench experiments.py@90cc8de74736d647b835664c0b77ec5372b4ffd4")
FEDPROX_URL = ("https://github.com/Xtra-Computing/NIID-Bench/blob/90cc8de74736d647b835664c0b77ec5"
               "372b4ffd4/experiments.py")
MOON = "QinbinLi/MOON main.py@8fcba3c4efc9a47eb24687a91ba94cfb2005103f"
MOON_URL = ("https://github.com/QinbinLi/MOON/blob/8fcba3c4efc9a47eb24687a91ba94cfb2005103f/"
            "main.py")


def small_net() -> nn.Sequential:
    return nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3))


# The source collects global_weight_collector = list(global_net.parameters()): the global
# model's own parameters, which require grad, so the proximal term mu/2 ||w - w_g||^2 sends a
# gradient into the global model that no optimizer of the client steps (truth "leaks"). The
# twin collects detached copies.
def fedprox(seed: int, *, bug: bool = False) -> RealCase:
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    global_net = small_net()
    net = copy.deepcopy(global_net)
    with torch.no_grad():  # the client has already taken some local steps
        for p in net.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=gen))
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    if bug:
        global_weight_collector = list(global_net.parameters())
    else:
        global_weight_collector = [p.detach().clone() for p in global_net.parameters()]
    mu = 0.01

    def step() -> torch.Tensor:
        x = torch.randn(6, 4, generator=gen)
        target = torch.randint(0, 3, (6,), generator=gen)
        loss = F.cross_entropy(net(x), target)
        fed_prox_reg = 0.0
        for index, param in enumerate(net.parameters()):
            fed_prox_reg += (mu / 2) * torch.norm(param - global_weight_collector[index]) ** 2
        return loss + fed_prox_reg

    return RealCase("fedprox_global_params" if bug else "fedprox", FEDPROX, FEDPROX_URL,
                    "leaks" if bug else "correct", step, optimizer,
                    {"net": net, "global_net": global_net})


class MoonNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Linear(4, 6), nn.ReLU())
        self.projection = nn.Linear(6, 5)
        self.head = nn.Linear(5, 3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = self.projection(self.features(x))
        return z, self.head(z)


# train_net_fedcon: the global and previous models' projections are positives and negatives
# of a contrastive term; the source sets requires_grad False on both before the loop. The bug
# leaves them trainable and calls them with grad: the contrastive term's backward fills the
# global and previous models' gradients (truth "leaks").
def moon(seed: int, *, bug: bool = False) -> RealCase:
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    global_net = MoonNet()
    previous = MoonNet()
    net = copy.deepcopy(global_net)
    if not bug:
        for p in [*global_net.parameters(), *previous.parameters()]:
            p.requires_grad = False
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-5)
    temperature, mu = 0.5, 5.0

    def step() -> torch.Tensor:
        x = torch.randn(6, 4, generator=gen)
        target = torch.randint(0, 3, (6,), generator=gen)
        z, out = net(x)
        z_glob, _ = global_net(x)
        z_prev, _ = previous(x)
        pos = F.cosine_similarity(z, z_glob, dim=-1)
        neg = F.cosine_similarity(z, z_prev, dim=-1)
        logits = torch.stack([pos, neg], dim=1) / temperature
        labels = torch.zeros(len(x), dtype=torch.long)
        return F.cross_entropy(out, target) + mu * F.cross_entropy(logits, labels)

    return RealCase("moon_global_grad" if bug else "moon", MOON, MOON_URL,
                    "leaks" if bug else "correct", step, optimizer,
                    {"net": net, "global_net": global_net, "previous": previous})


CASES = {"fedprox": fedprox, "fedprox_global_params": lambda seed: fedprox(seed, bug=True),
         "moon": moon, "moon_global_grad": lambda seed: moon(seed, bug=True)}
TWINS = {"fedprox_global_params": "fedprox", "moon_global_grad": "moon"}
FIELD = "federated learning"
