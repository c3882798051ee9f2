"""Dead by principle (#62, item 1): a stepped tensor whose real gradient is ``None`` or exactly
zero on both calls is dead, named where it becomes so, and the edit printed for it trains.

- an operation whose derivative to an input is zero for any values (``grid_sample`` in
  ``mode="nearest"`` to its grid), judged by running the operation again at random inputs, not
  by its name; a zero that holds only for the recorded values (a ReLU off for a whole small
  batch, a factor still at zero) is no finding;
- an index picked by ``max(dim=)`` whose values, the gate, the step leaves unused (a top-1
  router that does not scale its experts' outputs): the fix says to weight by those values and
  prints no edit (which output to weight is the user's code to decide);
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
from toolkit.audit.truth.truth import vanishes
from toolkit.audit.verify.in_process import edited_step


def _warp_3d(seed: int, mode: str):
    """A voxel spatial transformer (an affine grid predicted from the volume, Jaderberg et al.
    2015, arXiv:1506.02025) in front of a small classifier, in 3D."""
    torch.manual_seed(seed)
    locator = nn.Sequential(nn.Flatten(), nn.Linear(27, 12))
    head = nn.Sequential(nn.Flatten(), nn.Linear(27, 2))
    opt = torch.optim.SGD([*locator.parameters(), *head.parameters()], lr=0.1)
    eye = torch.eye(3, 4)

    def step() -> torch.Tensor:
        volume = torch.rand(4, 1, 3, 3, 3)
        theta = locator(volume).view(-1, 3, 4) + eye
        grid = F.affine_grid(theta, list(volume.shape), align_corners=False)
        moved = F.grid_sample(volume, grid, mode=mode, align_corners=False)
        return F.cross_entropy(head(moved), torch.tensor([0, 1, 0, 1]))

    return locator, head, opt, step


def _grads(step, model: nn.Module) -> dict[str, torch.Tensor | None]:
    model.zero_grad(set_to_none=True)
    step().backward()
    return {k: None if p.grad is None else p.grad.clone() for k, p in model.named_parameters()}


@pytest.mark.parametrize("seed", [0, 1])
def test_a_mode_whose_derivative_is_zero_for_any_values_is_dead_and_its_default_trains(seed):
    locator, head, opt, step = _warp_3d(seed, "nearest")
    # the oracle: a real backward gives the locator exact zeros
    assert all(not g.any() for g in _grads(step, locator).values())
    audit = audit_step(step, opt, modules={"locator": locator, "head": head})
    assert sorted(d.parameter for d in audit.dead) == ["locator.1.bias", "locator.1.weight"]
    assert {d.kind for d in audit.dead} == {"zero_derivative"}, str(audit)
    assert all("GridSampler3D" in d.cut for d in audit.dead), str(audit)
    (line,) = {x for d in audit.dead for x in d.lines}
    assert "F.grid_sample(" in line.text
    (edit,) = {e for d in audit.dead for e in d.edits}
    assert (edit.old, edit.new) == ("mode", "'bilinear'"), str(audit)
    # the edited step trains as the step written with bilinear sampling
    locator_ed, head_ed, _, step_ed = _warp_3d(seed, "nearest")
    edited = edited_step(step_ed, [edit])
    assert edited is not None
    locator_ok, head_ok, opt_ok, step_ok = _warp_3d(seed, "bilinear")
    assert audit_step(step_ok, opt_ok, modules={"locator": locator_ok, "head": head_ok}).ok
    for model, twin in ((locator_ed, locator_ok), (head_ed, head_ok)):
        torch.manual_seed(seed + 10)  # the same volume for both
        after = _grads(edited, model)
        torch.manual_seed(seed + 10)
        want = _grads(step_ok, twin)
        for k in want:
            torch.testing.assert_close(after[k], want[k])
        assert all(g.any() for g in after.values())


def test_a_relu_off_for_the_whole_batch_on_both_calls_is_no_finding():
    """Exact zeros that these values make (every unit off, a factor at zero at init): the
    operations' derivatives are not zero for other values, so nothing is dead by structure."""
    torch.manual_seed(0)
    first, third = nn.Linear(3, 4), nn.Linear(3, 4)
    gate, second = nn.Parameter(torch.zeros(4)), nn.Linear(4, 1)
    with torch.no_grad():
        first.bias.fill_(-100.0)  # every unit off for inputs of this size
    opt = torch.optim.SGD([*first.parameters(), *third.parameters(), gate,
                           *second.parameters()], lr=0.1)

    def step() -> torch.Tensor:
        x = torch.rand(2, 3)
        h = torch.relu(first(x)) + third(x) * gate
        return second(h).pow(2).mean()

    grads = torch.autograd.grad(step(), [*first.parameters(), *third.parameters()])
    assert all(not g.any() for g in grads)  # exact zeros, as said
    audit = audit_step(step, opt, modules={"first": first, "third": third, "second": second})
    assert audit.ok, str(audit)


def test_vanishes_runs_the_operation_again_it_does_not_read_its_name():
    x = torch.rand(1, 1, 4, 4, requires_grad=True)
    grid = torch.rand(1, 3, 3, 2, requires_grad=True) * 2 - 1
    for mode, zero in (("nearest", True), ("bilinear", False)):
        node = F.grid_sample(x, grid, mode=mode, align_corners=False).grad_fn
        assert vanishes(node, node.next_functions[1][0]) is zero  # to the grid
        assert not vanishes(node, node.next_functions[0][0])  # to the image
    off = torch.relu(x - 10.0).grad_fn  # zero here, not for other values
    assert not vanishes(off, off.next_functions[0][0])
    flat = (x + 0).clamp(min=3.0).grad_fn
    assert not vanishes(flat, flat.next_functions[0][0])


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


def _router(seed: int, scaled: bool):
    """A top-1 mixture of experts (Shazeer et al. 2017, arXiv:1701.06538; Fedus et al. 2021,
    arXiv:2101.03961): tokens dispatched by the router's argmax, each expert's output weighted
    by its gate value when ``scaled``."""
    torch.manual_seed(seed)
    router = nn.Linear(4, 2)
    experts = nn.ModuleList(nn.Linear(4, 4) for _ in range(2))
    opt = torch.optim.Adam([*router.parameters(), *experts.parameters()], lr=1e-3)
    tokens, target = torch.randn(8, 4), torch.randn(8, 4)

    def step() -> torch.Tensor:
        gate, choice = router(tokens).softmax(-1).max(dim=-1)
        out = torch.zeros_like(tokens)
        for i, expert in enumerate(experts):
            picked = choice == i
            y = expert(tokens[picked])
            out[picked] = y * gate[picked, None] if scaled else y
        return F.mse_loss(tokens + out, target)

    return router, experts, opt, step


def test_an_index_whose_picked_values_go_unused_says_to_weight_by_them():
    router, experts, opt, step = _router(0, scaled=False)
    assert all(g is None for g in torch.autograd.grad(step(), [*router.parameters()],
                                                      allow_unused=True))
    audit = audit_step(step, opt, modules={"router": router, "experts": experts})
    assert sorted(d.parameter for d in audit.dead) == ["router.bias", "router.weight"]
    assert {d.kind for d in audit.dead} == {"integer_result"}, str(audit)
    assert all("also returned the values it picked" in d.cut and "gate" in d.fix
               and not d.edits for d in audit.dead), str(audit)
    # the advice followed: weighted by the gate, the router trains
    router_ok, experts_ok, opt_ok, step_ok = _router(0, scaled=True)
    assert audit_step(step_ok, opt_ok, modules={"router": router_ok, "experts": experts_ok}).ok
    assert all(g.any() for g in torch.autograd.grad(step_ok(), [*router_ok.parameters()]))
