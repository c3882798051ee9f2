"""Survival analysis: DeepSurv's Cox partial likelihood, as pycox writes it.

Written from havakv/pycox pycox/models/loss.py@b30832d9bd6d4d95a39c01f0f9800153779ff19e
(cox_ph_loss_sorted: gamma = log_h.max(), not detached, subtracted before the cumulative
log-sum-exp and added back after; the events' log hazards minus the log of their risk sets'
sums). The max carries gradient, but it cancels exactly in the value and in the derivative:
correct, though a max that is not cut reads like a leak (a false-alarm trap). A second trap
keeps a running concordance estimate in a plain dict, computed from detached values. The text
is ours, at tiny sizes.
"""

from __future__ import annotations

import torch
from realcode_common import RealCase
from torch import nn

SOURCE = "havakv/pycox pycox/models/loss.py@b30832d9bd6d4d95a39c01f0f9800153779ff19e"
CONFIRMS = ("https://github.com/havakv/pycox/blob/b30832d9bd6d4d95a39c01f0f9800153779ff19e/"
            "pycox/models/loss.py")


def cox_ph_loss_sorted(log_h: torch.Tensor, events: torch.Tensor, eps: float = 1e-7
                       ) -> torch.Tensor:
    log_h, events = log_h.view(-1), events.view(-1)
    gamma = log_h.max()
    log_cumsum_h = log_h.sub(gamma).exp().cumsum(0).add(eps).log().add(gamma)
    return -log_h.sub(log_cumsum_h).mul(events).sum().div(events.sum())


def deepsurv(seed: int) -> RealCase:
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.BatchNorm1d(8), nn.Dropout(0.1),
                        nn.Linear(8, 1, bias=False))
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
    running: dict[str, torch.Tensor] = {"risk": torch.zeros(())}

    def step() -> torch.Tensor:
        x = torch.randn(8, 4, generator=gen)
        durations = torch.rand(8, generator=gen)
        events = (torch.rand(8, generator=gen) < 0.7).float()
        events[0] = 1.0
        order = durations.argsort(descending=True)
        log_h = net(x[order])
        running["risk"] = 0.9 * running["risk"] + 0.1 * log_h.detach().mean()
        return cox_ph_loss_sorted(log_h, events[order])

    return RealCase("deepsurv_cox_max", SOURCE, CONFIRMS, "correct", step, optimizer,
                    {"net": net})


CASES = {"deepsurv_cox_max": deepsurv}
TWINS: dict[str, str] = {}
FIELD = "survival analysis"
