"""Dead by principle (#62, item 1): a stepped tensor whose real gradient is ``None`` or exactly
zero on both calls is dead, named where it becomes so, and the edit printed for it trains.

- a gradient taken by ``torch.autograd.grad`` without ``create_graph=True`` and used in the
  loss (forces as ``-dE/dx``, as schnetpack's ``task.py`` computes them): what the
  differentiated value was computed from gets none; the edit asks for the graph.

Each oracle is a real ``backward()``; each edit is written into a copy of the step and trained
against the step written correctly by hand.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from toolkit import audit_step
from toolkit.lens.audit.fixes.verify import edited_step


def _grads(step, model: nn.Module) -> dict[str, torch.Tensor | None]:
    model.zero_grad(set_to_none=True)
    step().backward()
    return {k: None if p.grad is None else p.grad.clone() for k, p in model.named_parameters()}


def _potential(seed: int, create_graph: bool):
    """A learned potential trained on forces only, the forces ``-dE/dpos`` by
    ``torch.autograd.grad`` (schnetpack ``src/schnetpack/atomistic/response.py``, ``Forces``)."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1, bias=False))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step() -> torch.Tensor:
        pos = torch.randn(5, 3).requires_grad_(True)
        energy = model(pos).sum()
        (grad,) = torch.autograd.grad(energy, pos, create_graph=create_graph)
        return F.mse_loss(-grad, torch.randn(5, 3))

    return model, opt, step


@pytest.mark.parametrize("seed", [0, 1])
def test_a_gradient_taken_without_create_graph_and_used_in_the_loss_is_edited_to_keep_it(seed):
    model, opt, step = _potential(seed, create_graph=False)
    audit = audit_step(step, opt, modules={"model": model})
    assert sorted(d.parameter for d in audit.dead) == [
        "model.0.bias", "model.0.weight", "model.2.weight"], str(audit)
    assert {d.kind for d in audit.dead} == {"first_order"}, str(audit)
    (edit,) = {e for d in audit.dead for e in d.edits}
    assert (edit.old, edit.new) == ("create_graph", "True"), str(audit)
    (line,) = {x for d in audit.dead for x in d.lines}
    assert "torch.autograd.grad(" in line.text
    model_ed, _, step_ed = _potential(seed, create_graph=False)
    edited = edited_step(step_ed, [edit])
    assert edited is not None
    model_ok, opt_ok, step_ok = _potential(seed, create_graph=True)
    torch.manual_seed(seed + 10)
    after = _grads(edited, model_ed)
    torch.manual_seed(seed + 10)
    want = _grads(step_ok, model_ok)
    assert after.keys() == want.keys()
    for k in want:
        assert (after[k] is None) == (want[k] is None)
        if want[k] is not None:
            torch.testing.assert_close(after[k], want[k])
    assert audit_step(step_ok, opt_ok, modules={"model": model_ok}).ok
