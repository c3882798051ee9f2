"""A block that runs only in iterations the audit does not record: stochastic depth (Huang et
al. 2016, arXiv:1603.09382) drops residual blocks at random, and a block may be dropped in
every iteration the audit watches (the first ones of each loop) and run in those between. Its
tensors then get no gradient at the watched steps, yet they got one at a step between: a part
that runs at other times (``idle``, information), not one no loss ever reaches (``dead``).
A block that never runs is still ``dead``. (The stochastic-depth ResNet of the held-out scripts
pre-trains, then fine-tunes; two of its blocks, dropped in every iteration watched, were called
dead there.)"""

from __future__ import annotations

from script_audit import audit, failures

SCRIPT = """\
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
stem, block, head = nn.Linear(4, 8), nn.Linear(8, 8), nn.Linear(8, 3)
model = nn.ModuleList([stem, block, head])
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(32, 4), torch.randint(0, 3, (32,))


def forward(run_block):
    h = torch.tanh(stem(x))
    if run_block:   # the draw of stochastic depth, written out
        h = h + torch.tanh(block(h))
    return head(h)


for step in range(6):   # the block survives only the draw of step 3
    loss = F.cross_entropy(forward(RUNS_FIRST), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
for step in range(4):   # a second loop (fine-tuning) without the block
    loss = F.cross_entropy(forward(False), y) * 0.5
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_a_block_that_runs_only_between_the_watched_iterations_is_no_failure(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.replace("RUNS_FIRST", "step == 3"))
    code, report = audit(tmp_path, script)
    assert code == 0 and not failures(report), [f["message"] for f in failures(report)]
    idle = [f for f in report["findings"] if f["kind"] == "idle"]
    assert any({"model.1.weight", "model.1.bias"} <= set(f["names"]) for f in idle), \
        [(f["kind"], f["names"]) for f in report["findings"]]


def test_a_block_that_never_runs_is_dead(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.replace("RUNS_FIRST", "False"))
    code, report = audit(tmp_path, script)
    dead = [f for f in failures(report) if f["kind"] == "dead"]
    assert code == 1 and any({"model.1.weight", "model.1.bias"} <= set(f["names"]) for f in dead), \
        [(f["kind"], f["names"]) for f in report["findings"]]


def test_a_block_dropped_after_steps_between_is_idle_not_unused(tmp_path):
    """The window where a block's forward would have run for a step begins at its last step,
    watched or not: a block that ran at the first iterations of the run and is dropped in the
    first iteration the audit watches in the second loop did not run "with a graph" there."""
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.replace("RUNS_FIRST", "True")
                      .replace("forward(False), y) * 0.5", "forward(step >= 2), y) * 0.5"))
    code, report = audit(tmp_path, script)
    assert code == 0 and not failures(report), [f["message"] for f in failures(report)]
    about = [f["kind"] for f in report["findings"] if "model.1.weight" in f["names"]]
    assert about == ["idle"], [(f["kind"], f["message"]) for f in report["findings"]]
