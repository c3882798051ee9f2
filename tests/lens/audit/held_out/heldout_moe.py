"""Mixture of experts: top-1 routing with a load-balancing term.

Written from davidmrau/mixture-of-experts moe.py@f662999727109357c42074997e9a6cd72806f668 (a
gating network, top-k gates, the experts' outputs combined weighted by the gate values, a
balancing loss on the gates) with the Switch Transformer's balancing term (arXiv:2101.03961):
N * sum_i f_i P_i, f_i the fraction of tokens routed to expert i (an argmax count, without
gradient) and P_i the mean router probability. The text is ours, at tiny sizes.
"""

from __future__ import annotations

import torch
from realcode_common import RealCase
from torch import nn
from torch.nn import functional as F

SOURCE = "davidmrau/mixture-of-experts moe.py@f662999727109357c42074997e9a6cd72806f668"
CONFIRMS = ("https://github.com/davidmrau/mixture-of-experts/blob/f662999727109357c42074997e9a6cd"
            "72806f668/moe.py")


# The bug: the tokens are dispatched by the argmax of the router, but the experts' outputs are
# not scaled by the gate values (and no balancing term is used): the router's only path to the
# loss is the argmax, so it gets no gradient (truth "dead"). The twin scales by the gate. A
# third, correct step adds the Switch balancing term, whose f_i is an argmax count (a trap: no
# gradient there is right).
def switch_router(seed: int, *, bug: bool = False, balance: bool = False) -> RealCase:
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    dim, n_experts = 4, 3
    router = nn.Linear(dim, n_experts)
    experts = nn.ModuleList(nn.Sequential(nn.Linear(dim, 8), nn.ReLU(), nn.Linear(8, dim))
                            for _ in range(n_experts))
    head = nn.Linear(dim, 2)
    modules = {"router": router, "experts": experts, "head": head}
    optimizer = torch.optim.Adam([p for m in modules.values() for p in m.parameters()], lr=1e-3)

    def step() -> torch.Tensor:
        tokens = torch.randn(9, dim, generator=gen)
        labels = torch.randint(0, 2, (9,), generator=gen)
        probs = router(tokens).softmax(dim=-1)
        gate, choice = probs.max(dim=-1)
        out = torch.zeros_like(tokens)
        for i, expert in enumerate(experts):
            mask = choice == i
            if mask.any():
                y = expert(tokens[mask])
                out[mask] = y if bug else y * gate[mask, None]
        loss = F.cross_entropy(head(tokens + out), labels)
        if not balance:
            return loss
        fraction = F.one_hot(choice, n_experts).float().mean(dim=0)
        balancing = n_experts * (fraction * probs.mean(dim=0)).sum()
        return loss + 0.01 * balancing

    name = "switch_router_unscaled" if bug else "switch_router_balanced" if balance else \
        "switch_router"
    return RealCase(name, SOURCE, CONFIRMS,
                    "dead" if bug else "correct", step, optimizer, modules)


CASES = {"switch_router": switch_router,
         "switch_router_unscaled": lambda seed: switch_router(seed, bug=True),
         "switch_router_balanced": lambda seed: switch_router(seed, balance=True)}
TWINS = {"switch_router_unscaled": "switch_router"}
FIELD = "mixture of experts"
