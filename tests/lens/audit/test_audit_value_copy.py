"""``torch.tensor(...)`` of a tensor that requires grad (issue 53): the values are copied and
the graph is not, so what the tensor is computed from gets no gradient. The audit names the
user's ``torch.tensor(`` line, and its edit (``torch.stack`` of ``torch.as_tensor``) trains
as the step written with ``torch.stack`` does; the oracle is a real ``backward()``."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from toolkit import audit_step
from toolkit.lens.audit.edits import apply_edits

_STEP = textwrap.dedent('''
    import torch
    from torch import nn


    def build(seed, stacked=False):
        torch.manual_seed(seed)
        net = nn.Linear(3, 2)
        log_t = nn.Parameter(torch.zeros(()))
        opt = torch.optim.Adam([*net.parameters(), log_t], lr=1e-2)
        x = torch.randn(5, 3)

        def step():
            if stacked:
                scale = torch.stack([torch.as_tensor(1.0), log_t.exp()])
            else:
                scale = torch.tensor([1.0, log_t.exp()])
            return (net(x) * scale).pow(2).mean()

        return step, opt, net, log_t
''')


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    return module


def _grads(step, opt) -> list[torch.Tensor | None]:
    params = [p for g in opt.param_groups for p in g["params"]]
    for p in params:
        p.grad = None
    step().backward()
    return [None if p.grad is None else p.grad.clone() for p in params]


# torch's own warning on the step's torch.tensor of a tensor that requires grad
@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad")
def test_a_tensor_copied_by_torch_tensor_is_dead_at_that_line_and_the_edit_trains_it(
        tmp_path: Path, seed: int) -> None:
    path = tmp_path / "value_step.py"
    path.write_text(_STEP, "utf-8")
    module = _load(path, "value_step")
    step, opt, _, _ = module.build(seed)
    assert _grads(step, opt)[-1] is None  # the oracle: log_t gets no gradient
    audit = audit_step(step, opt)
    (dead,) = audit.dead
    assert dead.kind == "value_copy" and dead.shape == ()
    (line,) = dead.lines
    assert line.file == "value_step.py" and "torch.tensor([1.0, log_t.exp()])" in line.text
    (edit,) = dead.edits
    assert f"edit: {edit}" in str(audit)
    fixed = tmp_path / "fixed"
    fixed.mkdir()
    (fixed / "value_step.py").write_text(apply_edits(_STEP, [edit]), "utf-8")
    edited = _load(fixed / "value_step.py", "value_step_edited")
    step, opt, _, _ = edited.build(seed)
    want_step, want_opt, _, _ = module.build(seed, stacked=True)
    for got, want in zip(_grads(step, opt), _grads(want_step, want_opt)):
        assert got is not None and torch.equal(got, want)
    again = edited.build(seed)
    assert audit_step(again[0], again[1]).ok
