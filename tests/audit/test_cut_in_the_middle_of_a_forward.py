"""A forward that goes on from values the user's own code cut: a helper decorated with
``@torch.no_grad()`` (or a ``with torch.no_grad():`` block inside a forward) mixes hidden
states between two layers that train, as Manifold Mixup's ``mixup_process`` does (Verma et al.
2019) when the decorator is added as if it were data augmentation. The layers before the mix
get no gradient at the steps that mix after them, and gradients at the others (the layer is
drawn at random), which is no method's alternation: ``dead``, whose edit takes the decorator
off (or the statement out of its block), after which the script trains as the published one. A
block inside a forward that only keeps a statistic of the hidden states (read by no layer)
stays no finding."""

from __future__ import annotations

import pytest
from script_audit import applied_and_trains, cli, twins

pytestmark = pytest.mark.slow

SCRIPT = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="")
args = parser.parse_args()
torch.manual_seed(0)


HELPER


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(4, 8)
        self.second = nn.Linear(8, 8)
        self.head = nn.Linear(8, 2)
        self.register_buffer("seen", torch.zeros(8))

    def forward(self, x, at):
        h = torch.tanh(self.first(x))
        if at == 1:
            h = mix(h)
        h = torch.tanh(self.second(h))
        if at == 2:
            h = mix(h)
FORWARD        return self.head(h)


net = Net()
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
x, y = torch.randn(16, 4), torch.randint(0, 2, (16,))
for step in range(6):
    loss = F.cross_entropy(net(x, int(torch.randint(0, 3, ()))), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save({"net": net.state_dict()}, args.out)
"""

MIX = """\
def mix(h):
    order = torch.arange(h.shape[0] - 1, -1, -1)
    return 0.7 * h + 0.3 * h[order]
"""

STATISTIC = """\
        with torch.no_grad():
            self.seen.mul_(0.9).add_(0.1 * h.mean(0))
"""

PUBLISHED = SCRIPT.replace("HELPER", MIX).replace("FORWARD", STATISTIC)


def test_a_decorated_helper_mid_forward_is_dead_and_loses_its_decorator(tmp_path):
    folder = twins(tmp_path, PUBLISHED, PUBLISHED.replace("def mix", "@torch.no_grad()\ndef mix"))
    done = applied_and_trains(folder, "dead", "--watch", "1")
    assert "`@torch.no_grad()` on `mix` at train.py:12 cuts them off" in done.stdout
    assert "train.py:12: remove: @torch.no_grad()" in done.stdout


def test_a_block_mid_forward_is_dead_and_its_statement_moves_out(tmp_path):
    bug = SCRIPT.replace("HELPER", MIX.replace(
        "    return 0.7", "    with torch.no_grad():\n        return 0.7")).replace(
        "FORWARD", STATISTIC)
    folder = twins(tmp_path, PUBLISHED, bug)
    done = applied_and_trains(folder, "dead", "--watch", "1")
    assert "under `with torch.no_grad()` at train.py:" in done.stdout


def test_a_statistic_kept_under_no_grad_in_a_forward_is_no_finding(tmp_path):
    folder = twins(tmp_path, PUBLISHED, PUBLISHED)
    done = cli("--watch", "1", "train.py", cwd=folder)
    assert done.returncode == 0, done.stdout
    assert "0 failures, 0 notes" in done.stdout, done.stdout


DEQ = """\
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)


class Implicit(nn.Module):
    def __init__(self):
        super().__init__()
        self.inject, self.W, self.head = nn.Linear(4, 8), nn.Linear(8, 8), nn.Linear(8, 2)

    def forward(self, x):
        u = self.inject(x)
        with torch.no_grad():
            z = torch.zeros_like(u)
            for _ in range(5):
                z = torch.tanh(self.W(z) + u)
            z = torch.tanh(self.W(z) + u)
        return self.head(z)


model = Implicit()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
x, y = torch.randn(16, 4), torch.randint(0, 2, (16,))
for step in range(3):
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_a_value_free_op_in_the_block_is_no_cut(tmp_path):
    """A deep equilibrium model's fixed point found under no_grad from ``torch.zeros_like(u)``,
    its last step (the attach) left in the block: one cut, the attach, keeps both the injection
    and the layer from the loss; ``zeros_like`` holds none of ``u``'s values and cuts
    nothing (Bai et al. 2019)."""
    folder = twins(tmp_path, DEQ, DEQ)
    done = cli("--watch", "1", "train.py", cwd=folder)
    dead = [block for block in done.stdout.split("FAIL    ")[1:] if block.startswith("dead:")]
    assert len(dead) == 1, done.stdout
    assert "model.inject.weight" in dead[0] and "model.W.weight" in dead[0], done.stdout
    assert "zeros_like" not in dead[0], done.stdout


SUPERLOSS = """\
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)


class Confident(nn.Module):
    def forward(self, logits, targets):
        loss = F.cross_entropy(logits, targets, reduction="none")
        with torch.no_grad():
            sigma = torch.exp(-(loss - loss.mean()).clamp(min=-1.0))
        return ((loss - 1.0) * sigma + 0.1 * sigma.log().pow(2)).mean()


model = nn.Linear(4, 3)
criterion = Confident()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(16, 4), torch.randint(0, 3, (16,))
for step in range(3):
    loss = criterion(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_a_loss_module_s_own_stop_gradient_is_no_constant_term(tmp_path):
    """A loss module whose forward weighs each example by a confidence computed under
    ``no_grad`` and adds a term of it (SuperLoss, Castells et al. 2020): the module's own
    stop-gradient, not a constant term of the step's."""
    folder = twins(tmp_path, SUPERLOSS, SUPERLOSS)
    done = cli("--watch", "1", "train.py", cwd=folder)
    assert done.returncode == 0 and "0 failures" in done.stdout, done.stdout
