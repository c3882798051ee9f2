"""A learned scalar kept as a plain tensor, which the script bounds in place: CLIP's logit scale
(``self.logit_scale = nn.Parameter(torch.ones([]) * np.log(1 / 0.07))`` in openai/CLIP's
``model.py``, clamped to ``[0, ln 100]`` after each step in mlfoundations/open_clip's training
loop) and ALBEF's temperature (``self.temp = nn.Parameter(torch.ones([]) * 0.07)``, clamped to
``[0.001, 0.5]`` under ``no_grad`` in the model's forward, salesforce/ALBEF) are learned; made
without the ``nn.Parameter`` wrapper, no gradient reaches them and the clamp bounds a constant.
A bound is for a value that moves: a tensor only a clamp writes was meant to learn.

Guards: both as published (parameters the clamp bounds); an adversarial example clamped to the
image range (data, held by no module); a running variance floored in place after the running
update that moves it (a buffer something else writes)."""

from __future__ import annotations

import pytest
from script_audit import applied, assert_trains_as, audit, cli, failures, twins

HEAD = """\
import argparse
import math
import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(0)
images, texts = torch.randn(16, 12), torch.randn(16, 10)
"""

CLIP = HEAD + """

class TwoTowers(nn.Module):
    def __init__(self):
        super().__init__()
        self.visual = nn.Linear(12, 8)
        self.text = nn.Linear(10, 8)
        self.logit_scale = SCALE

    def forward(self, image, text):
        a = F.normalize(self.visual(image), dim=-1)
        b = F.normalize(self.text(text), dim=-1)
        return self.logit_scale.exp() * a @ b.t()


model = TwoTowers()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
labels = torch.arange(16)
for step in range(5):
    logits = model(images, texts)
    loss = (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        model.logit_scale.clamp_(0, math.log(100))
if args.out:
    torch.save(model.state_dict(), args.out)
"""

ALBEF = HEAD + """

class Aligner(nn.Module):
    def __init__(self):
        super().__init__()
        self.image_proj = nn.Linear(12, 8)
        self.text_proj = nn.Linear(10, 8)
        self.temp = TEMP

    def forward(self, image, text):
        with torch.no_grad():
            self.temp.clamp_(0.001, 0.5)
        a = F.normalize(self.image_proj(image), dim=-1)
        b = F.normalize(self.text_proj(text), dim=-1)
        sim = a @ b.t() / self.temp
        target = torch.arange(len(sim))
        return (F.cross_entropy(sim, target) + F.cross_entropy(sim.t(), target)) / 2


model = Aligner()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(5):
    loss = model(images, texts)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
if args.out:
    torch.save(model.state_dict(), args.out)
"""

BUGS = {
    "clip-logit-scale": (CLIP.replace("SCALE", "nn.Parameter(torch.ones([]) * math.log(1 / 0.07))"),
                         CLIP.replace("SCALE", "torch.ones([]) * math.log(1 / 0.07)"),
                         "logit_scale"),
    "albef-temperature": (ALBEF.replace("TEMP", "nn.Parameter(torch.ones([]) * 0.07)"),
                          ALBEF.replace("TEMP", "torch.ones([]) * 0.07"), "temp"),
}


@pytest.mark.parametrize("case", sorted(BUGS))
def test_a_bounded_constant_is_named_and_made_a_parameter(tmp_path, case):
    published, buggy, tensor = BUGS[case]
    folder = twins(tmp_path, published, buggy)
    assert audit(tmp_path, folder / "published.py", "--watch", "1")[0] == 0
    code, report = audit(tmp_path, folder / "train.py", "--watch", "1")
    found = failures(report)
    assert code == 1 and [f["kind"] for f in found] == ["unlearned"], report["findings"]
    assert any(tensor in n for n in found[0]["names"]), found[0]["names"]
    assert found[0]["edits"], found[0]
    applied(folder, "unlearned", "--watch", "1")
    assert cli("--watch", "1", "train.py", cwd=folder).returncode == 0
    assert_trains_as(folder)


ADVERSARIAL = HEAD + """
model = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
y = torch.randint(0, 3, (16,))
for step in range(5):
    x_adv = images.clone().requires_grad_(True)
    attack = F.cross_entropy(model(x_adv), y)
    grad, = torch.autograd.grad(attack, x_adv)
    x_adv = (images + 0.1 * grad.sign()).detach()
    x_adv.clamp_(-1, 1)
    loss = F.cross_entropy(model(x_adv), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""

RUNNING = HEAD + """

class Whitening(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(12, 3)
        self.running_var = torch.ones(12)

    def forward(self, x):
        if self.training:
            with torch.no_grad():
                self.running_var.mul_(0.9).add_(0.1 * x.var(0))
                self.running_var.clamp_(min=1e-3)
        return self.linear(x / self.running_var.sqrt())


model = Whitening()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
y = torch.randint(0, 3, (16,))
for step in range(5):
    loss = F.cross_entropy(model(images * (1 + step)), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""

GUARDS = {"clip-as-published": BUGS["clip-logit-scale"][0],
          "albef-as-published": BUGS["albef-temperature"][0],
          "adversarial-example-clamped": ADVERSARIAL, "running-variance-floored": RUNNING}


@pytest.mark.parametrize("case", sorted(GUARDS))
def test_a_bound_on_what_moves_is_no_finding(tmp_path, case):
    script = tmp_path / "train.py"
    script.write_text(GUARDS[case], encoding="utf-8")
    code, report = audit(tmp_path, script, "--watch", "1")
    assert code == 0 and not failures(report), report["findings"]
