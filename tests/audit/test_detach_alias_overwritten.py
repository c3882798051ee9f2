"""A ``.detach()`` taken for a buffer of fresh values, without a copy: ``detach`` shares the
storage of what it cuts, so filling the result in place (``noise.normal_()``) overwrites the
tensor it was taken from, and every later read of that tensor reads the noise. The published
scripts draw into a tensor of its own (``torch.randn_like(x)``, or ``x.detach().clone()``).

Written after Cohen et al. 2019 (randomized smoothing: training on Gaussian perturbations of the
inputs, ``inputs + torch.randn_like(inputs) * sigma`` in locuslab/smoothing's ``train.py``) and
Gutmann & Hyvarinen 2010 (noise-contrastive estimation: a logistic regression of data against
noise samples drawn afresh). Guards: weights initialised through ``.detach()`` in place (meant
to write them); the buffer taken with ``.clone()``; an alias filled and read alone, the tensor
it was taken from never read again."""

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
"""

SMOOTHING = HEAD + """
inputs = torch.randn(64, 10)
labels = (inputs[:, 0] > 0).long()
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
noise = inputs.detach()NOISE
for step in range(5):
    noise.normal_()
    loss = F.cross_entropy(model(inputs + 0.25 * noise), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save(model.state_dict(), args.out)
"""

NCE = HEAD + """
data = torch.randn(128, 2) * 0.5 + torch.tensor([1.0, -1.0])
model = nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(5):
    noise = data.detach()NOISE
    noise.normal_()
    logits = model(torch.cat([data, noise])).squeeze(-1)
    targets = torch.cat([torch.ones(128), torch.zeros(128)])
    loss = F.binary_cross_entropy_with_logits(logits, targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save(model.state_dict(), args.out)
"""

BUGS = {
    "smoothing-noise-buffer": (SMOOTHING.replace("NOISE", ".clone()"),
                               SMOOTHING.replace("NOISE", "")),
    "nce-noise-samples": (NCE.replace("NOISE", ".clone()"), NCE.replace("NOISE", "")),
}


@pytest.mark.parametrize("case", sorted(BUGS))
def test_a_filled_alias_is_named_and_copied(tmp_path, case):
    published, buggy = BUGS[case]
    folder = twins(tmp_path, published, buggy)
    assert audit(tmp_path, folder / "published.py", "--watch", "1")[0] == 0
    code, report = audit(tmp_path, folder / "train.py", "--watch", "1")
    found = failures(report)
    assert code == 1 and [f["kind"] for f in found] == ["aliased"], report["findings"]
    assert found[0]["edits"], found[0]
    applied(folder, "aliased", "--watch", "1")
    assert ".detach().clone()" in (folder / "train.py").read_text(encoding="utf-8")
    assert cli("--watch", "1", "train.py", cwd=folder).returncode == 0
    assert_trains_as(folder)


INIT = HEAD + """
inputs = torch.randn(64, 10)
labels = (inputs[:, 0] > 0).long()
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(5):
    if step == 2:   # re-initialise the head in place, as a reset does
        model[2].weight.detach().normal_(0, 0.02)
        model[2].bias.detach().zero_()
    loss = F.cross_entropy(model(inputs), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""

ALONE = HEAD + """
inputs = torch.randn(64, 10)
labels = (inputs[:, 0] > 0).long()
scratch = torch.empty(64, 10)
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(5):
    noise = scratch.detach()
    noise.normal_()
    loss = F.cross_entropy(model(inputs + 0.25 * noise), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""

GUARDS = {"smoothing-as-published": BUGS["smoothing-noise-buffer"][0],
          "nce-as-published": BUGS["nce-noise-samples"][0],
          "weights-initialised-through-detach": INIT,
          "alias-read-alone": ALONE}


@pytest.mark.parametrize("case", sorted(GUARDS))
def test_an_alias_written_as_meant_is_no_finding(tmp_path, case):
    script = tmp_path / "train.py"
    script.write_text(GUARDS[case], encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 0 and not failures(report), report["findings"]
