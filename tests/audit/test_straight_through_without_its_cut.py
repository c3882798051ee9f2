"""A straight-through estimator written without its cut: ``z_q = z + (z_q - z)`` is the
quantised value with a gradient that cancels for ``z`` (the difference subtracts what the sum
adds), so the encoder gets no gradient from the reconstruction, which VQ-VAE passes to it
through ``z + (z_q - z).detach()`` (van den Oord et al. 2017, arXiv:1711.00937; as in
CompVis/taming-transformers, ``taming/modules/vqvae/quantize.py``). Both audits name the sum
and cut the difference; the same sum with the difference cut, a sum of two other values, or a
difference that subtracts another value is no finding."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from script_audit import cli, twins
from torch import nn

from toolkit.audit import audit_step

torch.manual_seed(0)
encoder = nn.Linear(4, 2)
codebook = nn.Embedding(8, 2)
decoder = nn.Linear(2, 4)
optimizer = torch.optim.SGD([*encoder.parameters(), *codebook.parameters(),
                             *decoder.parameters()], lr=0.1)
X = torch.randn(16, 4)


def codes() -> tuple[torch.Tensor, torch.Tensor]:
    z = encoder(X)
    return z, codebook(torch.cdist(z, codebook.weight).argmin(1))


def uncut() -> torch.Tensor:
    z, z_q = codes()
    return F.mse_loss(decoder(z + (z_q - z)), X)


def cut() -> torch.Tensor:
    z, z_q = codes()
    return F.mse_loss(decoder(z + (z_q - z).detach()), X)


def another_value() -> torch.Tensor:
    z, z_q = codes()
    return F.mse_loss(decoder(z + (z_q - codebook.weight.mean(0))), X)


def test_the_step_audit_names_the_sum_and_cuts_the_difference():
    (found,) = audit_step(uncut, optimizer).constant_terms
    assert found.cut == "cancel" and set(found.through) == {"encoder.weight", "encoder.bias"}
    (edit,) = found.edits
    assert (edit.old, edit.new) == ("(z_q - z)", "(z_q - z).detach()")


@pytest.mark.parametrize("step", [cut, another_value], ids=["difference-cut", "another-value"])
def test_a_cut_difference_or_another_value_is_no_finding(step):
    audit = audit_step(step, optimizer)
    assert audit.constant_terms == (), str(audit)


SCRIPT = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)
encoder = nn.Linear(4, 2)
decoder = nn.Linear(2, 4)
codebook = nn.Embedding(8, 2)
optimizer = torch.optim.Adam([*encoder.parameters(), *decoder.parameters(),
                              *codebook.parameters()], lr=0.01)
for step in range(4):
    x = torch.randn(16, 4)
    z = encoder(x)
    index = torch.cdist(z, codebook.weight).argmin(1)
    z_q = codebook(index)
    codebook_loss = F.mse_loss(z_q, z.detach()) + 0.25 * F.mse_loss(z, z_q.detach())
STRAIGHT
    loss = F.mse_loss(decoder(z_q), x) + codebook_loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save({"encoder": encoder.state_dict(), "decoder": decoder.state_dict(),
                "codebook": codebook.state_dict()}, args.out)
"""


@pytest.mark.slow
def test_the_script_audit_cuts_the_difference_as_the_estimator_does(tmp_path):
    clean = SCRIPT.replace("STRAIGHT", "    z_q = z + (z_q - z).detach()")
    folder = twins(tmp_path, clean, SCRIPT.replace("STRAIGHT", "    z_q = z + (z_q - z)"))
    done = cli("--watch", "1", "--apply", "train.py", cwd=folder)
    assert done.returncode == 1, done.stdout
    assert "FAIL    constant_term: `loss` adds `z` to `z_q - z` (train.py:21)" in done.stdout, \
        done.stdout
    assert "train.py:21: (z_q - z) -> (z_q - z).detach()" in done.stdout, done.stdout
    assert (folder / "train.py").read_text(encoding="utf-8") == clean
