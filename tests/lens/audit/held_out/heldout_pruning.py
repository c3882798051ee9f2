"""Pruning: finding a subnetwork by learned scores (edge-popup), the weights fixed and each
layer's mask the top-k of its scores, the scores trained through a straight-through estimator.

Written from allenai/hidden-networks simple_mnist_example.py@edcffd0b2f0e6b5cae7a991ff2d9ee6355
4e718c (GetSubnet: an autograd.Function whose forward is the top-k mask of |scores| and whose
backward passes the gradient through unchanged; SupermaskConv with the weights'
requires_grad False; the optimizer over the parameters that require grad). The text is ours.
"""

from __future__ import annotations

import torch
from realcode_common import RealCase
from torch import nn
from torch.nn import functional as F

SOURCE = "allenai/hidden-networks simple_mnist_example.py@edcffd0b2f0e6b5cae7a991ff2d9ee63554e718c"
CONFIRMS = ("https://github.com/allenai/hidden-networks/blob/edcffd0b2f0e6b5cae7a991ff2d9ee63554e"
            "718c/simple_mnist_example.py")


class GetSubnet(torch.autograd.Function):
    """The top-k mask forward, the identity backward (straight-through)."""

    @staticmethod
    def forward(ctx, scores: torch.Tensor, k: float) -> torch.Tensor:
        out = torch.zeros_like(scores)
        _, idx = scores.flatten().sort()
        j = int((1 - k) * scores.numel())
        out.flatten()[idx[j:]] = 1.0
        return out

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> tuple[torch.Tensor, None]:
        return g, None


class SupermaskLinear(nn.Linear):
    def __init__(self, *args, straight_through: bool, **kwargs) -> None:
        super().__init__(*args, bias=False, **kwargs)
        self.scores = nn.Parameter(torch.rand(self.weight.shape))
        self.weight.requires_grad = False
        self.straight_through = straight_through

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.straight_through:
            mask = GetSubnet.apply(self.scores.abs(), 0.5)
        else:  # the top half by a threshold at the median: a comparison, no gradient
            scores = self.scores.abs()
            mask = (scores >= scores.flatten().median()).float()
        return F.linear(x, self.weight * mask)


# The bug: the mask is computed by a comparison with the median instead of the
# straight-through GetSubnet: the scores, the only tensors the optimizer steps, get no
# gradient (truth "dead").
def edge_popup(seed: int, *, bug: bool = False) -> RealCase:
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = nn.Sequential(SupermaskLinear(5, 6, straight_through=not bug), nn.ReLU(),
                          SupermaskLinear(6, 3, straight_through=not bug))
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1,
                                momentum=0.9, weight_decay=5e-4)

    def step() -> torch.Tensor:
        x = torch.randn(6, 5, generator=gen)
        y = torch.randint(0, 3, (6,), generator=gen)
        return F.cross_entropy(model(x), y)

    return RealCase("edge_popup_threshold" if bug else "edge_popup", SOURCE, CONFIRMS,
                    "dead" if bug else "correct", step, optimizer, {"model": model})


CASES = {"edge_popup": edge_popup, "edge_popup_threshold": lambda seed: edge_popup(seed, bug=True)}
TWINS = {"edge_popup_threshold": "edge_popup"}
FIELD = "pruning (supermasks)"
