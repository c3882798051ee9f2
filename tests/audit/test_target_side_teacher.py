"""``toolkit audit SCRIPT``: a frozen teacher that computes a target with gradients (data2vec's
targets made outside ``torch.no_grad()``, from the student's own embedding). The target is the
failure; the teacher's tensors, which the loss reaches only through that target and no optimizer
holds, are work done in vain (information), not a part left out of the optimizer: adding them
to it would train the teacher through the student's loss. Tensors are named as the script holds
the networks (``student.pos``, through the method that reads it), not as a method's ``self``."""

from __future__ import annotations

import textwrap

from script_audit import audit, failures

SCRIPT = textwrap.dedent('''\
    import copy

    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.manual_seed(0)


    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Linear(3, 8)
            self.pos = nn.Parameter(torch.zeros(8))
            self.body = nn.Linear(8, 8)

        def embed_tokens(self, x):
            return self.embed(x) + self.pos


    student = Encoder()
    head = nn.Linear(8, 8)
    teacher = copy.deepcopy(student.body)
    teacher.requires_grad_(True)
    optimizer = torch.optim.SGD([*student.parameters(), *head.parameters()], lr=0.1)
    for step in range(4):
        x = torch.randn(16, 3)
        targets = teacher(student.embed_tokens(x))
        prediction = head(student.body(student.embed_tokens(x + 0.1 * torch.randn(16, 3))))
        loss = F.mse_loss(prediction, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
''')


def test_a_teacher_reached_only_through_the_target_is_wasted_work_and_the_target_fails(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    code, report = audit(tmp_path, script, "--steps", "2")
    assert code == 1
    kinds = [f["kind"] for f in failures(report)]
    assert kinds == ["target"], [f["message"] for f in failures(report)]
    (target,) = failures(report)
    assert {"student.pos", "student.embed.weight"} <= set(target["names"]), target["names"]
    wasted = [f for f in report["findings"] if f["kind"] == "wasted"]
    assert wasted and all(n.startswith("teacher.") for f in wasted for n in f["names"])
    assert all("through the target" in f["message"] for f in wasted)
