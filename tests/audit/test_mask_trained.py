"""A pruning mask an optimizer trains: a layer multiplies its weight by a mask of the same shape
(``weight * mask``), the mask made an ``nn.Parameter`` of zeros and ones that requires grad, so
the optimizer built over ``parameters()`` steps it with the weight. The methods keep the mask
fixed (Han et al. 2015, "Learning both Weights and Connections", prune and retrain with fixed
masks; Mocanu et al. 2018, SET's sparse Erdos-Renyi connectivity, fixed between its rewiring
steps; ``torch.nn.utils.prune`` registers ``weight_mask`` as a buffer): a trained mask is a
second multiplicative weight, and the pruned connections come back as it drifts from zero.

Guards: the same layers with the mask as a buffer, or frozen before the optimizer is built; a
mask the method learns through a function of scores (continuous sparsification,
``sigmoid(scores / t)``); a weight normalisation's per-row gain of ones (not the weight's
shape); a network with batch norm, whose weights are ones."""

from __future__ import annotations

import pytest
from script_audit import applied, assert_trains_as, audit, cli, failures, twins

HEAD = """\
import argparse
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
x = torch.randn(64, 1, 8, 8)
y = torch.randint(0, 3, (64,))
"""

PRUNE = HEAD + """

class PrunableConv(nn.Conv2d):
    def __init__(self, *shape):
        super().__init__(*shape, padding=1)
        MASK

    def forward(self, x):
        return F.conv2d(x, self.weight * self.mask, self.bias, padding=1)


net = nn.Sequential(PrunableConv(1, 4, 3), nn.ReLU(), PrunableConv(4, 4, 3), nn.ReLU(),
                    nn.Flatten(), nn.Linear(256, 3))
for phase in range(2):
    if phase == 1:   # prune the smallest half of each layer's weights, then retrain
        with torch.no_grad():
            for layer in (net[0], net[2]):
                cut = layer.weight.abs().flatten().kthvalue(layer.weight.numel() // 2).values
                layer.mask[layer.weight.abs() <= cut] = 0.0
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    for step in range(3):
        loss = F.cross_entropy(net(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
if args.out:
    torch.save(net.state_dict(), args.out)
"""

SPARSE = HEAD + """

class SparseLinear(nn.Linear):
    def __init__(self, n_in, n_out, density=0.3):
        super().__init__(n_in, n_out)
        MASK
        with torch.no_grad():
            self.weight.mul_(self.connectivity)

    def forward(self, x):
        return F.linear(x, self.weight * self.connectivity, self.bias)


net = nn.Sequential(nn.Flatten(), SparseLinear(64, 32), nn.ReLU(), SparseLinear(32, 3))
optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
for step in range(5):
    loss = F.cross_entropy(net(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save(net.state_dict(), args.out)
"""

_PRUNE_BUFFER = 'self.register_buffer("mask", torch.ones_like(self.weight))'
_PRUNE_PARAMETER = "self.mask = nn.Parameter(torch.ones_like(self.weight))"
_SPARSE_BUFFER = ('self.register_buffer("connectivity", '
                  '(torch.rand(n_out, n_in) < density).float())')
_SPARSE_PARAMETER = "self.connectivity = nn.Parameter((torch.rand(n_out, n_in) < density).float())"

BUGS = {
    # magnitude pruning's mask made a parameter: trained from the first step
    "prune-and-retrain": (PRUNE.replace("MASK", _PRUNE_BUFFER),
                          PRUNE.replace("MASK", _PRUNE_PARAMETER)),
    # a fixed sparse connectivity made a parameter
    "sparse-connectivity": (SPARSE.replace("MASK", _SPARSE_BUFFER),
                            SPARSE.replace("MASK", _SPARSE_PARAMETER)),
}


@pytest.mark.parametrize("case", sorted(BUGS))
def test_a_trained_mask_is_named_and_frozen(tmp_path, case):
    published, buggy = BUGS[case]
    folder = twins(tmp_path, published, buggy)
    assert audit(tmp_path, folder / "published.py", "--watch", "1")[0] == 0
    code, report = audit(tmp_path, folder / "train.py", "--watch", "1")
    found = failures(report)
    assert code == 1 and [f["kind"] for f in found] == ["trained_mask"], report["findings"]
    assert found[0]["edits"], found[0]
    applied(folder, "trained_mask", "--watch", "1")
    assert cli("--watch", "1", "train.py", cwd=folder).returncode == 0
    assert_trains_as(folder)


LEARNED = HEAD + """

class SoftMaskedLinear(nn.Linear):
    def __init__(self, n_in, n_out):
        super().__init__(n_in, n_out)
        self.scores = nn.Parameter(torch.ones(n_out, n_in))

    def forward(self, x, temperature=0.5):
        return F.linear(x, self.weight * torch.sigmoid(self.scores / temperature), self.bias)


net = nn.Sequential(nn.Flatten(), SoftMaskedLinear(64, 32), nn.ReLU(), SoftMaskedLinear(32, 3))
optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
for step in range(5):
    loss = F.cross_entropy(net(x), y) + 1e-3 * sum(
        torch.sigmoid(m.scores).sum() for m in net if isinstance(m, SoftMaskedLinear))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""

WEIGHT_NORM = HEAD + """

class WNLinear(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.v = nn.Parameter(torch.randn(n_out, n_in) * 0.1)
        self.g = nn.Parameter(torch.ones(n_out, 1))
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        return F.linear(x, self.g * self.v / self.v.norm(dim=1, keepdim=True), self.bias)


net = nn.Sequential(nn.Flatten(), WNLinear(64, 32), nn.ReLU(), WNLinear(32, 3))
optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
for step in range(5):
    loss = F.cross_entropy(net(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""

BATCH_NORM = HEAD + """
net = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                    nn.Linear(256, 3))
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
for step in range(5):
    loss = F.cross_entropy(net(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""

FROZEN_FIRST = PRUNE.replace("MASK", _PRUNE_PARAMETER).replace(
    "    optimizer = torch.optim.SGD(", "    for layer in (net[0], net[2]):\n"
    "        layer.mask.requires_grad_(False)\n    optimizer = torch.optim.SGD(")

GUARDS = {"prune-as-published": BUGS["prune-and-retrain"][0],
          "sparse-as-published": BUGS["sparse-connectivity"][0],
          "mask-frozen-before-its-optimizer": FROZEN_FIRST,
          "learned-soft-mask": LEARNED, "weight-norm-gain": WEIGHT_NORM,
          "batch-norm-weights": BATCH_NORM}


@pytest.mark.parametrize("case", sorted(GUARDS))
def test_a_fixed_or_learned_gain_is_no_finding(tmp_path, case):
    script = tmp_path / "train.py"
    script.write_text(GUARDS[case], encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 0 and not failures(report), report["findings"]
