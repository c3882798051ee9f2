"""Every hook the watch installs comes off when the run ends, even where the watch's own
closing rules raise: a later audit in the same process (a test session, a notebook) must find
torch as it was, not the first watch's wrappers calling into it."""

from __future__ import annotations

import torch

from toolkit.audit.script.runner import run_script
from toolkit.audit.script.session import Watch

SCRIPT = """\
import torch
w = torch.ones(3, requires_grad=True)
optimizer = torch.optim.SGD([w], lr=0.1)
for _ in range(2):
    loss = (w * 2).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


class _Failing(Watch):
    def close(self) -> None:
        super().close()
        raise RuntimeError("a rule failed at the end")


def test_the_hooks_come_off_when_the_closing_rules_raise(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT, encoding="utf-8")
    before = (torch.Tensor.backward, torch.autograd.backward, torch.autograd.grad,
              torch.optim.Optimizer.zero_grad, vars(torch.Tensor).get("grad"))
    outcome = run_script(str(script), [], _Failing(every=1))
    assert isinstance(outcome.error, RuntimeError), outcome.error
    after = (torch.Tensor.backward, torch.autograd.backward, torch.autograd.grad,
             torch.optim.Optimizer.zero_grad, vars(torch.Tensor).get("grad"))
    assert after == before
    # and a second audit in the process sees its own run only
    watch = Watch(every=1)
    run_script(str(script), [], watch)
    assert watch.backwards == 2 and not watch.findings
