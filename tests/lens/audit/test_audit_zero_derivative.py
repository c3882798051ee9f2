"""Dead in effect (issue 53): tensors reached only through operations whose derivative is zero
(``torch.sign``, ``torch.round``) get a gradient of exact zeros. The oracle is a real
``backward()``; the fix the audit prints (a straight-through estimator, Bengio, Léonard and
Courville 2013, https://arxiv.org/abs/1308.3432) is applied and checked: every stepped tensor
then gets a gradient, the forward values are the same, and the gradients that were not zero
are unchanged.
"""

from __future__ import annotations

import inspect

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from toolkit import audit_step, stop_gradient
from toolkit.audit.verify.in_process import edited_step


class _BinarizeLinear(nn.Linear):
    """itayhubara/BinaryNet.pytorch, models/binarized_modules.py@master (``BinarizeLinear``):
    a linear layer whose forward uses the sign of its weight. Written without the repository's
    straight-through mechanism (its full-precision ``weight.org`` copy), the naive version
    whose weight gradient is exactly zero; ``ste=True`` is the printed fix."""

    def __init__(self, *args, ste: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.ste = ste

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.ste:
            weight = self.weight + (torch.sign(self.weight) - self.weight).detach()
        else:
            weight = torch.sign(self.weight)
        return F.linear(x, weight, self.bias)


def _binary_net(seed: int, ste: bool):
    torch.manual_seed(seed)
    net = nn.Sequential(_BinarizeLinear(4, 8, ste=ste), nn.Hardtanh(),
                        _BinarizeLinear(8, 3, ste=ste))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    x, y = torch.randn(6, 4), torch.randint(0, 3, (6,))
    return net, opt, lambda: F.cross_entropy(net(x), y)


def _fake_quant(seed: int, ste: bool):
    """Quantisation-aware training's fake quantisation with a learned scale, rounding without
    a straight-through estimator: the weights get exactly zero gradient, the scale does not."""
    torch.manual_seed(seed)
    weight = nn.Parameter(torch.randn(3, 4))
    scale = nn.Parameter(torch.tensor(0.1))
    opt = torch.optim.SGD([weight, scale], lr=0.1)
    x = torch.randn(5, 4)

    def step() -> torch.Tensor:
        scaled = weight / scale
        q = scaled + stop_gradient(torch.round(scaled) - scaled) if ste else torch.round(scaled)
        return (x @ (q * scale).t()).pow(2).mean()

    return {"weight": weight, "scale": scale}, opt, step


def _named(model) -> dict[str, torch.Tensor]:
    return dict(model.named_parameters()) if isinstance(model, nn.Module) else model


def _grads(step, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    for t in tensors.values():
        t.grad = None
    step().backward()
    out = {k: torch.zeros_like(t) if t.grad is None else t.grad.clone()
           for k, t in tensors.items()}
    for t in tensors.values():
        t.grad = None
    return out


@pytest.mark.parametrize(("build", "prefix", "text", "feeds"), [
    (_binary_net, "net.", "weight = torch.sign(self.weight)", set()),
    (_fake_quant, "", "q = scaled + stop_gradient(", {"scale"}),
], ids=["binary_net", "fake_quant"])
def test_a_tensor_behind_a_zero_derivative_op_is_dead_and_the_ste_revives_it(
        build, prefix: str, text: str, feeds: set[str], seed: int) -> None:
    # feeds: live tensors that also feed the rounded value, whose gradient gains the
    # straight-through term (the learned scale of fake quantisation)
    model, opt, step = build(seed, ste=False)
    tensors = _named(model)
    before = _grads(step, tensors)
    zero = {k for k, g in before.items() if not g.any()}  # the oracle: exact zeros
    assert zero and zero != set(tensors)
    audit = audit_step(step, opt)
    assert {d.kind for d in audit.dead} == {"zero_derivative"}, str(audit)
    assert {d.parameter for d in audit.dead} == {prefix + k for k in zero}
    lines = {x for d in audit.dead for x in d.lines}
    source, first = inspect.getsourcelines(build if prefix == "" else _BinarizeLinear.forward)
    assert {x.number for x in lines} == {first + i for i, s in enumerate(source) if text in s}
    assert all("straight-through" in d.fix for d in audit.dead)
    # follow the fix: the same values forward, every tensor trained, nothing else changed
    fixed_model, fixed_opt, fixed_step = build(seed, ste=True)
    torch.testing.assert_close(fixed_step(), step())
    assert audit_step(fixed_step, fixed_opt).ok
    after = _grads(fixed_step, _named(fixed_model))
    assert all(after[k].any() for k in zero)
    for k in set(tensors) - zero - feeds:
        torch.testing.assert_close(after[k], before[k])


def test_a_tensor_also_reached_by_a_path_with_gradient_is_alive(seed: int) -> None:
    torch.manual_seed(seed)
    w = nn.Parameter(torch.randn(3))
    opt = torch.optim.SGD([w], lr=0.1)
    audit = audit_step(lambda: (torch.sign(w) * w).sum(), opt)  # d/dw = sign(w) != 0
    assert audit.ok, str(audit)


def _gumbel_case(seed: int, ste: bool):
    """A discrete VAE's hard Gumbel-softmax sample written by hand (the one-hot of the argmax,
    as ``F.gumbel_softmax(..., hard=True)`` computes it), without the straight-through term
    that ``ste=True`` adds: the encoder's values reach the decoder only as an integer index."""
    torch.manual_seed(seed)
    model = nn.ModuleDict({"enc": nn.Linear(10, 5), "dec": nn.Linear(5, 10)})
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, noise = torch.randn(6, 10), torch.rand(6, 5).clamp_min(1e-6)

    def step() -> torch.Tensor:
        y_soft = (model["enc"](x) - (-noise.log()).log()).softmax(-1)
        y_hard = torch.zeros_like(y_soft).scatter_(-1, y_soft.argmax(-1, keepdim=True), 1.0)
        z = y_soft + stop_gradient(y_hard - y_soft) if ste else y_hard
        return F.mse_loss(model["dec"](z), x)

    return model, opt, step


def test_an_integer_result_is_named_with_a_straight_through_edit_never_a_leave_out(
        seed: int) -> None:
    model, opt, step = _gumbel_case(seed, ste=False)
    audit = audit_step(step, opt, modules={"model": model})
    assert sorted(d.parameter for d in audit.dead) == ["model.enc.bias", "model.enc.weight"]
    (kind,) = {d.kind for d in audit.dead}
    assert kind == "integer_result", str(audit)
    # the one edit: the float value made from the argmax, with y_soft's gradient back
    (edit,) = {e for d in audit.dead for e in d.edits}
    assert edit.new == f"y_soft + ({edit.old} - y_soft).detach()", str(audit)
    assert edit.old.startswith("torch.zeros_like(y_soft).scatter_(")
    (line,) = {x for d in audit.dead for x in d.lines}
    source, first = inspect.getsourcelines(_gumbel_case)
    assert "argmax" in line.text and line.number == first + next(
        i for i, text in enumerate(source) if "y_soft.argmax(" in text)
    assert "straight-through" in audit.dead[0].fix and "argmax" in audit.dead[0].cut
    # the oracle: real backward gives the encoder no gradient; the estimator gives it one, the
    # forward unchanged and the decoder's gradient as it was
    loss = step()
    loss.backward()
    assert model["enc"].weight.grad is None
    dec_grad = model["dec"].weight.grad.clone()
    model_ste, opt_ste, step_ste = _gumbel_case(seed, ste=True)
    assert audit_step(step_ste, opt_ste, modules={"model": model_ste}).ok
    loss_ste = step_ste()
    loss_ste.backward()
    torch.testing.assert_close(loss_ste, loss)
    torch.testing.assert_close(model_ste["dec"].weight.grad, dec_grad)
    assert model_ste["enc"].weight.grad.abs().sum() > 0
    # the edited step trains as the estimator written by hand
    model_ed, _, step_ed = _gumbel_case(seed, ste=False)
    edited = edited_step(step_ed, [edit])
    assert edited is not None
    edited().backward()
    for key, p in model_ste.named_parameters():
        torch.testing.assert_close(dict(model_ed.named_parameters())[key].grad, p.grad)
