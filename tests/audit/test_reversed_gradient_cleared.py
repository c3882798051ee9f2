"""``toolkit audit SCRIPT``: gradient sent through a gradient reversal and cleared before the
optimizer of the tensors below it steps (:mod:`toolkit.audit.record.reversal`, the ``lost``
rule). Scripts written for it in the shape of minimax entropy domain adaptation (Saito et al.
2019, "Semi-supervised Domain Adaptation via Minimax Entropy"): a feature extractor and a
classifier with their own optimizers, the classifier maximising the entropy of unlabelled
predictions and the extractor, through the reversal, minimising it.

- The extractor's step left out after the entropy's backward: a failure at the backward, whose
  edit inserts that step after the classifier's, and trains as the published loop.
- No finding: the published loop; a discriminator's loss that reaches the generator with no
  reversal, whose part there the generator's own step never meant to use (a GAN's); a custom
  function that scales the gradient without reversing it.
- :func:`~toolkit.audit.record.reversal._reversed` itself: a negative multiple of the gradient
  in, and nothing else, is a reversal.
"""

from __future__ import annotations

import pytest
import torch
from script_audit import assert_trains_as, audit, check_fix, failures, twins

from toolkit.audit.record.reversal import _reversed

PUBLISHED = '''\
import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
parser.add_argument("--sign", type=float, default=-1.0)
args = parser.parse_args()
torch.manual_seed(0)


class Reverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad * args.sign * 0.5


extractor = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 8))
classifier = nn.Linear(8, 3)
opt_g = torch.optim.SGD(extractor.parameters(), lr=0.05)
opt_f = torch.optim.SGD(classifier.parameters(), lr=0.05)
x, y = torch.randn(32, 6), torch.randint(0, 3, (32,))
x_unl = torch.randn(32, 6) + 1.0
for step in range(4):
    opt_g.zero_grad()
    opt_f.zero_grad()
    F.cross_entropy(classifier(extractor(x)), y).backward()
    opt_g.step()
    opt_f.step()
    opt_g.zero_grad()
    opt_f.zero_grad()
    p = F.softmax(classifier(Reverse.apply(extractor(x_unl))), dim=1)
    neg_entropy = (p * torch.log(p + 1e-5)).sum(1).mean()
    neg_entropy.backward()
    opt_f.step()
    opt_g.step()
    opt_g.zero_grad()
    opt_f.zero_grad()
if args.out:
    torch.save({"g": extractor.state_dict(), "f": classifier.state_dict()}, args.out)
'''

#: the extractor's step after the entropy's backward left out
BUGGY = PUBLISHED.replace("    opt_f.step()\n    opt_g.step()\n    opt_g.zero_grad()\n    "
                          "opt_f.zero_grad()\nif",
                          "    opt_f.step()\n    opt_g.zero_grad()\n    opt_f.zero_grad()\nif")

#: a GAN's discriminator step: its loss reaches the generator, with no reversal, and only the
#: discriminator steps with it (the generator's own loss follows)
GAN = '''\
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
G = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 6))
D = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 1))
opt_g = torch.optim.Adam(G.parameters(), lr=1e-3)
opt_d = torch.optim.Adam(D.parameters(), lr=1e-3)
real = torch.randn(32, 6)
for step in range(4):
    fake = G(torch.randn(32, 4))
    ones, zeros = torch.ones(32, 1), torch.zeros(32, 1)
    d_loss = F.binary_cross_entropy_with_logits(D(real), ones) + \\
        F.binary_cross_entropy_with_logits(D(fake), zeros)
    opt_d.zero_grad()
    d_loss.backward(retain_graph=True)
    opt_d.step()
    opt_g.zero_grad()
    g_loss = F.binary_cross_entropy_with_logits(D(fake), ones)
    g_loss.backward()
    opt_g.step()
'''


def test_the_step_left_out_after_a_reversed_loss_is_a_failure_at_its_backward(tmp_path):
    (tmp_path / "train.py").write_text(BUGGY, encoding="utf-8")
    code, report = audit(tmp_path, tmp_path / "train.py", "--watch", "1")
    assert code == 1
    (found,) = failures(report)
    assert found["kind"] == "cleared" and found["iteration"] == 0
    assert "gradient reversal" in found["message"]
    assert sorted(found["names"]) == ["extractor.0.bias", "extractor.0.weight",
                                      "extractor.2.bias", "extractor.2.weight"]
    assert found["at"][1] == "train.py:40: neg_entropy.backward()"
    (edit,) = found["edits"]
    assert edit["start"] == [42, 0] and edit["new"].strip() == "opt_g.step()"


@pytest.mark.parametrize(("text", "args"), [(PUBLISHED, ()), (GAN, ()),
                                            (BUGGY, ("--sign", "1.0"))],
                         ids=["published", "gan-without-reversal", "scaled-not-reversed"])
def test_no_failure_without_a_reversal_or_with_its_step(tmp_path, text, args):
    (tmp_path / "train.py").write_text(text, encoding="utf-8")
    code, report = audit(tmp_path, tmp_path / "train.py", "--watch", "1", args=args)
    assert code == 0 and failures(report) == [], [f["message"] for f in failures(report)]


@pytest.mark.slow
def test_the_inserted_step_trains_as_the_published_loop(tmp_path):
    folder = twins(tmp_path, PUBLISHED, BUGGY)
    check_fix(tmp_path, folder, "cleared", "--watch", "1")
    assert_trains_as(folder)


@pytest.mark.parametrize(("back", "reversal"), [
    (lambda g: -0.3 * g, True),
    (lambda g: g.neg(), True),
    (lambda g: 2.0 * g, False),                  # scaled, not reversed
    (lambda g: g, False),                        # the identity
    (lambda g: -g * torch.arange(1.0, 5.0), False),  # no one constant
    (lambda g: torch.zeros_like(g), False),      # blocked
])
def test_a_reversal_is_a_negative_multiple_of_the_gradient_in(back, reversal):
    given = torch.tensor([1.0, -2.0, 0.5, 3.0])
    assert _reversed((back(given),), (given,)) is reversal


def test_a_zero_gradient_in_or_several_inputs_are_no_reversal():
    g = torch.ones(3)
    assert not _reversed((-g,), (torch.zeros(3),))
    assert not _reversed((-g, -g), (g,))
    assert not _reversed((None,), (g,))
