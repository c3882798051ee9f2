"""Energy-based models: JEM's step, a classifier whose logits define an energy, trained on
labels and by contrastive divergence against Langevin samples kept in a replay buffer.

Written from wgrathwohl/JEM train_wrn_ebm.py@7f0779a0541256a77c50c52971ecdb50a8ce2e66
(sample_p_0 draws from the buffer or noise, sample_q runs SGLD on the input with
torch.autograd.grad(f.sum(), x_k) and writes the final samples back into the buffer detached;
loss = -(logsumexp f(x) - logsumexp f(x_q)) + cross-entropy). The text is ours, at tiny sizes.
"""

from __future__ import annotations

import torch
from realcode_common import RealCase
from torch import nn
from torch.nn import functional as F

SOURCE = "wgrathwohl/JEM train_wrn_ebm.py@7f0779a0541256a77c50c52971ecdb50a8ce2e66"
CONFIRMS = ("https://github.com/wgrathwohl/JEM/blob/7f0779a0541256a77c50c52971ecdb50a8ce2e66/"
            "train_wrn_ebm.py")


# The bug: the SGLD steps are written out of place with a clamp, and the final samples go back
# into the replay buffer (a plain tensor) with their graph; the next call draws them from the
# buffer and its loss reaches the previous call's freed graph (truth "carried"). The twin
# writes them back detached, as the source does.
def jem(seed: int, *, bug: bool = False) -> RealCase:
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    dim, classes, buffer_size = 4, 3, 6
    f = nn.Sequential(nn.Linear(dim, 8), nn.SiLU(), nn.Linear(8, classes))
    optimizer = torch.optim.Adam(f.parameters(), lr=1e-4)
    buffer = torch.rand(buffer_size, dim, generator=gen) * 2 - 1

    def sample_q(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        index = torch.randint(0, buffer_size, (n,), generator=gen)
        x_k = buffer[index].clone().requires_grad_(True)
        for _ in range(3):
            (grad,) = torch.autograd.grad(f(x_k).logsumexp(1).sum(), x_k)
            x_k = (x_k + grad + 0.01 * torch.randn(x_k.shape, generator=gen)).clamp(-1.5, 1.5)
        return (x_k if bug else x_k.detach()), index

    def step() -> torch.Tensor:
        x = torch.randn(3, dim, generator=gen)
        y = torch.randint(0, classes, (3,), generator=gen)
        x_q, index = sample_q(3)
        buffer[index] = x_q
        logits = f(x)
        l_pxy = F.cross_entropy(logits, y)
        l_px = -(logits.logsumexp(1).mean() - f(x_q).logsumexp(1).mean())
        return l_px + l_pxy

    return RealCase("jem_buffer_graph" if bug else "jem", SOURCE, CONFIRMS,
                    "carried" if bug else "correct", step, optimizer, {"f": f})


CASES = {"jem": jem, "jem_buffer_graph": lambda seed: jem(seed, bug=True)}
TWINS = {"jem_buffer_graph": "jem"}
FIELD = "energy-based models"
