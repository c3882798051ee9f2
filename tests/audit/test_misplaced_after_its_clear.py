"""An optimizer built over the wrong network, whose step follows backward calls of another
kind that reach the network it holds (CoopNets, Xie et al. 2018: samples revised by Langevin
steps on the descriptor, the generator's latent codes inferred by Langevin steps whose
``backward()`` writes into the generator's tensors too, then
the descriptor's optimizer, built over ``generator.parameters()`` where the descriptor's
belong, clears them and steps after the descriptor's loss): the step's own loss is the one
written after its clear, and it reaches none of the tensors the optimizer holds. The optimizer
is rebuilt over the network that loss trains, and the fixed script trains as the published
one."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, audit, failures, twins

pytestmark = pytest.mark.slow

SCRIPT = """\
import argparse
import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
generator = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 3))
descriptor = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 1))


def revise(x):
    for _ in range(3):
        x = x.detach().requires_grad_(True)
        descriptor(x).sum().backward()
        x = x + 0.1 * x.grad
    return x.detach()


def infer(z, x):
    for _ in range(3):
        z = z.detach().requires_grad_(True)
        ((x - generator(z)) ** 2).sum().backward()
        z = z - 0.1 * z.grad
    return z.detach()


gen_optimizer = torch.optim.Adam(generator.parameters(), lr=1e-2)
DESCRIPTOR
for step in range(4):
    data = torch.randn(8, 3)
    z = torch.randn(8, 2)
    with torch.no_grad():
        proposals = generator(z)
    revised = revise(proposals)
    z = infer(z, revised)
    des_loss = descriptor(revised).mean() - descriptor(data).mean()
    des_optimizer.zero_grad()
    des_loss.backward()
    des_optimizer.step()
    gen_loss = ((revised - generator(z)) ** 2).mean()
    gen_optimizer.zero_grad()
    gen_loss.backward()
    gen_optimizer.step()
if args.out:
    torch.save({"generator": generator.state_dict(), "descriptor": descriptor.state_dict()},
               args.out)
"""


def test_an_optimizer_whose_loss_after_its_clear_misses_it_is_rebuilt(tmp_path):
    built = "des_optimizer = torch.optim.Adam({}.parameters(), lr=1e-2)"
    folder = twins(tmp_path, SCRIPT.replace("DESCRIPTOR", built.format("descriptor")),
                   SCRIPT.replace("DESCRIPTOR", built.format("generator")))
    code, report = audit(tmp_path, folder / "train.py", "--watch", "1")
    found = failures(report)
    assert code == 1 and [f["kind"] for f in found] == ["unstepped"], report["findings"]
    assert found[0]["at"][0].startswith("train.py:30: des_optimizer"), found[0]["at"]
    applied_and_trains(folder, "unstepped", "--watch", "1")
