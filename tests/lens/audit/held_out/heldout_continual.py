"""Continual learning: elastic weight consolidation's penalty to the previous task's weights,
and iCaRL's class means of exemplars kept for nearest-mean classification.

The text is ours, at tiny sizes; the structure is the source's.
"""

from __future__ import annotations

import torch
from realcode_common import RealCase
from torch import nn
from torch.nn import functional as F

# --- moskomule/ewc.pytorch utils.py@234e64f4452ccafa12b07e0b45b8544bcb2d660a (class EWC): at the
# end of a task the means are copies of the parameters' data and the diagonal Fisher is the mean
# of squared log-likelihood gradients; the next task's loss adds
# importance * sum F (p - mean)^2.
EWC = "moskomule/ewc.pytorch utils.py@234e64f4452ccafa12b07e0b45b8544bcb2d660a"
EWC_URL = ("https://github.com/moskomule/ewc.pytorch/blob/234e64f4452ccafa12b07e0b45b8544bcb2d660"
           "a/utils.py")


# The bug: the means are kept as p.clone() (not p.detach().clone()): each anchor is the live
# parameter through a CloneBackward, so (p - mean)^2 has derivative 2(p - mean)(1 - 1) = 0 and
# the penalty never pulls the weights back (truth "targets": a target carrying the gradient of
# the tensors it is compared with; the penalty's gradient cancels to exactly zero).
def ewc(seed: int, *, bug: bool = False) -> RealCase:
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    params = dict(model.named_parameters())
    means = {n: (p.clone() if bug else p.detach().clone()) for n, p in params.items()}
    fisher = {n: torch.rand(p.shape, generator=gen) for n, p in params.items()}
    with torch.no_grad():  # the first steps on the new task moved the weights
        for p in params.values():
            p.add_(0.1 * torch.randn(p.shape, generator=gen))

    def step() -> torch.Tensor:
        x = torch.randn(5, 4, generator=gen)
        y = torch.randint(0, 3, (5,), generator=gen)
        penalty = sum((fisher[n] * (p - means[n]) ** 2).sum() for n, p in params.items())
        return F.cross_entropy(model(x), y) + 100.0 * penalty

    return RealCase("ewc_means_clone" if bug else "ewc", EWC, EWC_URL,
                    "targets" if bug else "correct", step, optimizer, {"model": model})


# --- donlee90/icarl model.py@91dbb7374ffe8f7d16dc73f463ca463c753190d4 (compute_means,
# classify, update_representation): the feature extractor is trained with classification plus
# distillation to the previous outputs (BCE), and the class means of the exemplars' normalized
# features are recomputed for nearest-mean-of-exemplars classification, under no_grad.
ICARL = "donlee90/icarl model.py@91dbb7374ffe8f7d16dc73f463ca463c753190d4"
ICARL_URL = ("https://github.com/donlee90/icarl/blob/91dbb7374ffe8f7d16dc73f463ca463c753190d4/"
             "model.py")


class ICaRLNet(nn.Module):
    def __init__(self, classes: int) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Linear(5, 6), nn.ReLU(), nn.Linear(6, 4))
        self.fc = nn.Linear(4, classes)
        self.register_buffer("class_means", torch.zeros(classes, 4))


# The bug: the class means are written into the model's buffer (copy_) with grad on: the buffer
# holds the graph of the feature extractor after the step (truth "held").
def icarl(seed: int, *, bug: bool = False) -> RealCase:
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    classes = 3
    model = ICaRLNet(classes)
    old_outputs = torch.rand(8, classes, generator=gen)
    optimizer = torch.optim.SGD(model.parameters(), lr=2.0, weight_decay=1e-5)
    exemplars = torch.randn(classes, 2, 5, generator=gen)

    def compute_means() -> None:
        feats = F.normalize(model.features(exemplars.flatten(0, 1)), dim=1)
        model.class_means.copy_(F.normalize(feats.view(classes, 2, -1).mean(1), dim=1))

    def step() -> torch.Tensor:
        x = torch.randn(8, 5, generator=gen)
        y = torch.randint(0, classes, (8,), generator=gen)
        logits = model.fc(model.features(x))
        target = F.one_hot(y, classes).float()
        target[:, :2] = old_outputs[:, :2]
        loss = F.binary_cross_entropy_with_logits(logits, target)
        if bug:
            compute_means()
        else:
            with torch.no_grad():
                compute_means()
        return loss

    return RealCase("icarl_means_graph" if bug else "icarl", ICARL, ICARL_URL,
                    "held" if bug else "correct", step, optimizer, {"model": model})


CASES = {"ewc": ewc, "ewc_means_clone": lambda seed: ewc(seed, bug=True),
         "icarl": icarl, "icarl_means_graph": lambda seed: icarl(seed, bug=True)}
TWINS = {"ewc_means_clone": "ewc", "icarl_means_graph": "icarl"}
FIELD = "continual learning"
