"""Each pass of a loop is an iteration of its own, however the script's loops follow one another:
a warm-up's loop, then a main loop, at module level or in functions called in turn each epoch
(ENAS's ``train_shared`` and ``train_controller``, after carpedm20/ENAS-pytorch's
``Trainer.train``). Before, a later loop's first pass joined the last pass of the loop before it,
so every later finding was named one iteration early, and a loop that came back each epoch
joined the other loop's last pass again. The losses of one pass, in a method the loop calls,
stay one iteration (SAC's entropy, critic and actor losses, each with its step)."""

from __future__ import annotations

import pytest
from script_audit import audit

HEAD = """\
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
a, b = nn.Linear(3, 1), nn.Linear(3, 1)
opt_a = torch.optim.SGD(a.parameters(), lr=0.1)
opt_b = torch.optim.SGD(b.parameters(), lr=0.1)
x, y = torch.randn(16, 3), torch.randn(16, 1)


def train_a(n):
    for _ in range(n):
        loss = F.mse_loss(a(x), y)
        opt_a.zero_grad()
        loss.backward()
        opt_a.step()


def train_b(n):
    for _ in range(n):
        loss = F.mse_loss(b(x), y)
        opt_b.zero_grad()
        loss.backward()
        opt_b.step()


"""

MODULE_LOOPS = """\
for _ in range(3):
    loss = F.mse_loss(a(x), y)
    opt_a.zero_grad()
    loss.backward()
    opt_a.step()
for _ in range(4):
    loss = F.mse_loss(b(x), y)
    opt_b.zero_grad()
    loss.backward()
    opt_b.step()
for _ in range(2):
    loss = F.mse_loss(a(x), y) + F.mse_loss(b(x), y)
    opt_a.zero_grad()
    opt_b.zero_grad()
    loss.backward()
    opt_a.step()
    opt_b.step()
"""

IN_TURN = """\
train_a(3)
train_b(2)
for epoch in range(2):
    train_a(2)
    train_b(2)
"""

ONE_PASS = """\
def update():
    loss = F.mse_loss(a(x), y)
    opt_a.zero_grad()
    loss.backward()
    opt_a.step()
    loss = F.mse_loss(b(x), y)
    opt_b.zero_grad()
    loss.backward()
    opt_b.step()


for _ in range(5):
    update()
"""


@pytest.mark.parametrize(("body", "passes"), [(MODULE_LOOPS, 9), (IN_TURN, 13), (ONE_PASS, 5)],
                         ids=["three-module-loops", "functions-in-turn", "one-pass-two-losses"])
def test_each_pass_is_an_iteration(tmp_path, body, passes):
    (tmp_path / "train.py").write_text(HEAD + body, encoding="utf-8")
    code, report = audit(tmp_path, tmp_path / "train.py", "--watch", "1")
    assert code == 0, report["findings"]
    assert report["iterations"] == passes, report["iterations"]
