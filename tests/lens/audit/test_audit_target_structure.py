"""Targets found by structure, not by name (issue 62, item 3), on steps none of the corpus
holds: a difference under any even function (``(target - pred).abs().pow(2)``,
``torch.norm(a - b)``), and a product with a surrogate gradient computed from the other
factor. Which side is the target is read from the graph, whatever the argument order: the
side computed by arithmetic on a network's output (``r + γ max Q(s')``). The oracle is a
real ``backward()``: the tensors the audit names are those whose gradient changes when the
target is cut, and the step written with the cut is clean; look-alikes that compare nothing
(a quadratic form, a square of one value, a contrastive loss) stay clean.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from steps_on_disk import load
from torch import nn

from toolkit import audit_step
from toolkit.audit.fixes.edits import apply_edits


def _grads(loss: Callable[[], torch.Tensor], params: dict[str, torch.Tensor]
           ) -> dict[str, torch.Tensor]:
    got = torch.autograd.grad(loss(), list(params.values()), allow_unused=True)
    return {k: torch.zeros_like(p) if g is None else g for (k, p), g in zip(params.items(), got)}


def _changed(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> set[str]:
    return {k for k in a if not torch.allclose(a[k], b[k], rtol=1e-5, atol=1e-7)}


_DISTANCES: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "abs_pow": lambda target, pred: (target - pred).abs().pow(2).mean(),
    "norm": lambda target, pred: torch.linalg.vector_norm(target - pred),
    "root_of_squares": lambda target, pred: ((target - pred) ** 2 + 1e-6).sqrt().mean(),
    "huber_by_hand": lambda target, pred: torch.where(
        (target - pred).abs() < 1, 0.5 * (target - pred) ** 2,
        (target - pred).abs() - 0.5).mean(),
}


def _td(distance: str, cut: bool, seed: int = 0):
    """Fitted Q-iteration with one network (no target network), the target written first:
    ``r + γ max Q(s')`` is a constant of the regression (Riedmiller 2005)."""
    torch.manual_seed(seed)
    q = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = torch.optim.SGD(q.parameters(), lr=0.1)
    s, s2, r = torch.randn(6, 3), torch.randn(6, 3), torch.randn(6)

    def step() -> torch.Tensor:
        pred = q(s).max(1).values
        target = r + 0.9 * q(s2).max(1).values
        if cut:
            target = target.detach()
        return _DISTANCES[distance](target, pred)

    return step, opt, {f"q.{k}": v for k, v in q.named_parameters()}


@pytest.mark.parametrize("distance", sorted(_DISTANCES))
def test_a_target_compared_through_any_even_function_of_a_difference(distance: str) -> None:
    step, opt, params = _td(distance, cut=False)
    audit = audit_step(step, opt)
    (target,) = audit.targets
    # the oracle: the tensors whose gradient the cut changes
    fixed, opt_fixed, fixed_params = _td(distance, cut=True)
    assert sorted(target.parameters) == sorted(
        _changed(_grads(step, params), _grads(fixed, fixed_params)))
    # the target side is read from the graph (arithmetic on a network's output: r + γ max
    # Q(s')), not from the argument order
    assert target.lines and target.lines[0].text == "target = r + 0.9 * q(s2).max(1).values"
    assert audit_step(fixed, opt_fixed).ok


def _sds(cut: bool, seed: int = 0):
    """Score distillation (Poole et al. 2022, DreamFusion, eq. 3): a generator's output ``x``
    is trained by the surrogate ``(x * g).sum()``, whose gradient is ``g = w (ε̂(x_t) − ε)``,
    computed by a frozen denoiser and meant as a constant (``g.detach()`` in the published
    code)."""
    torch.manual_seed(seed)
    generator, denoiser = nn.Linear(4, 6), nn.Linear(6, 6)
    denoiser.requires_grad_(False)
    opt = torch.optim.Adam(generator.parameters(), lr=1e-3)
    z = torch.randn(5, 4)

    def step() -> torch.Tensor:
        x = generator(z)
        noise = torch.randn_like(x)
        g = 0.5 * (denoiser(x + noise) - noise)
        if cut:
            g = g.detach()
        return (x * g).sum()

    return step, opt, {f"generator.{k}": v for k, v in generator.named_parameters()}


def test_a_surrogate_whose_gradient_carries_the_trained_model_is_a_target() -> None:
    step, opt, params = _sds(cut=False)
    audit = audit_step(step, opt)
    (target,) = audit.targets
    assert target.form == "a product with a surrogate gradient computed from the other factor"
    assert target.lines and target.lines[0].text == "g = 0.5 * (denoiser(x + noise) - noise)"
    fixed, opt_fixed, fixed_params = _sds(cut=True)
    torch.manual_seed(1)
    buggy_grads = _grads(step, params)
    torch.manual_seed(1)
    fixed_grads = _grads(fixed, fixed_params)
    assert sorted(target.parameters) == sorted(_changed(buggy_grads, fixed_grads))
    assert audit_step(fixed, opt_fixed).ok


def test_products_that_compare_nothing_stay_clean() -> None:
    torch.manual_seed(0)
    net = nn.Linear(4, 4)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    z, A = torch.randn(3, 4), torch.randn(4, 4)
    A = A @ A.T

    def quadratic_form() -> torch.Tensor:  # x^T A x: a function of x, no surrogate
        x = net(z)
        return (x * (x @ A)).sum()

    def square() -> torch.Tensor:
        x = net(z)
        return (x * x).sum() + (x - 1).pow(2).mean()

    def gated() -> torch.Tensor:  # SiLU in the head: x * sigmoid(x)
        x = net(z)
        return (x * torch.sigmoid(x)).mean()

    for step in (quadratic_form, square, gated):
        assert audit_step(step, opt).ok, step.__name__


@pytest.mark.parametrize("build", ["abs_pow", "norm", "sds"])
def test_the_printed_edit_trains_as_the_published_fix(build: str, tmp_path: Path) -> None:
    # the edits written into a copy of this file by apply_edits, the edited step built from
    # the copy: on both calls every stepped tensor gets the published fix's gradient
    def make(module: Any, cut: bool) -> Any:
        return module._sds(cut) if build == "sds" else module._td(build, cut)

    step, opt, _ = make(sys.modules[__name__], False)
    audit = audit_step(step, opt)
    (target,) = audit.targets
    assert target.edits and {e.file for e in target.edits} == {Path(__file__).name}
    text = apply_edits(Path(__file__).read_text("utf-8"), list(target.edits))
    edited = load(tmp_path / Path(__file__).name, text, "edited_target_structure")
    step_e, opt_e, params_e = make(edited, False)
    fixed, _, params_f = make(sys.modules[__name__], True)
    assert audit_step(step_e, opt_e).ok
    for call in range(2):
        torch.manual_seed(call)
        got = _grads(step_e, params_e)
        torch.manual_seed(call)
        want = _grads(fixed, params_f)
        assert not _changed(got, want)


def test_a_metric_learning_loss_that_also_pushes_pairs_apart_has_no_target() -> None:
    # a Siamese network trained by the contrastive loss of Hadsell, Chopra & LeCun (2006),
    # eq. 4: similar pairs pulled together, dissimilar ones pushed apart to a margin; both
    # sides are the same encoder and both are meant to be trained
    torch.manual_seed(0)
    encoder = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 3))
    opt = torch.optim.SGD(encoder.parameters(), lr=0.1)
    x1, x2, same = torch.randn(6, 5), torch.randn(6, 5), torch.randint(0, 2, (6,)).float()

    def contrastive() -> torch.Tensor:
        d = torch.nn.functional.pairwise_distance(encoder(x1), encoder(x2))
        return (same * d.pow(2) + (1 - same) * torch.relu(1.0 - d).pow(2)).mean()

    def pulled_only() -> torch.Tensor:  # the same pairs, only pulled: a target question
        return torch.nn.functional.pairwise_distance(encoder(x1), encoder(x2)).pow(2).mean()

    assert audit_step(contrastive, opt).ok
    assert not audit_step(pulled_only, opt).ok


def _rotate(cut: bool, seed: int = 0):
    """TransE trained with self-adversarial negative sampling (Sun et al. 2019, RotatE, eq. 5):
    the weight of each negative is ``softmax(α · score)``, a constant of the loss (``detach()``
    in the published code), times that negative's ``log σ(−score)``."""
    torch.manual_seed(seed)
    ent, rel = nn.Embedding(20, 8), nn.Embedding(5, 8)
    opt = torch.optim.Adam([*ent.parameters(), *rel.parameters()], lr=1e-3)
    h, r, t = torch.randint(0, 20, (6,)), torch.randint(0, 5, (6,)), torch.randint(0, 20, (6,))
    negatives = torch.randint(0, 20, (6, 4))

    def score(hh: torch.Tensor, rr: torch.Tensor, tt: torch.Tensor) -> torch.Tensor:
        return 6.0 - (ent(hh) + rel(rr) - ent(tt)).norm(p=1, dim=-1)

    def step() -> torch.Tensor:
        positive = score(h, r, t)
        negative = score(h[:, None], r[:, None], negatives)
        weight = torch.softmax(negative * 1.0, dim=1)
        if cut:
            weight = weight.detach()
        negative_loss = -(weight * torch.nn.functional.logsigmoid(-negative)).sum(1).mean()
        return (-torch.nn.functional.logsigmoid(positive).mean() + negative_loss) / 2

    return step, opt, {**{f"ent.{k}": v for k, v in ent.named_parameters()},
                       **{f"rel.{k}": v for k, v in rel.named_parameters()}}


def _gradcache(cut: bool, seed: int = 0):
    """GradCache (Gao et al. 2021): the contrastive loss's gradient with respect to the
    representations is computed once on a first pass and cached, then a second pass trains
    the encoder by ``torch.dot(encoder(x), cached)``; the cache is a constant (the first pass
    runs without a graph). Kept with its graph, the cache trains the encoder a second way."""
    torch.manual_seed(seed)
    encoder = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 4))
    opt = torch.optim.Adam(encoder.parameters(), lr=1e-3)
    q, p = torch.randn(5, 6), torch.randn(5, 6)

    def step() -> torch.Tensor:
        if cut:
            with torch.no_grad():
                q_reps, p_reps = encoder(q), encoder(p)
            q_reps.requires_grad_()
            p_reps.requires_grad_()
        else:
            q_reps, p_reps = encoder(q), encoder(p)
        logits = q_reps @ p_reps.T / 0.1
        loss = torch.nn.functional.cross_entropy(logits, torch.arange(5))
        q_grad, p_grad = torch.autograd.grad(loss, [q_reps, p_reps], create_graph=not cut)
        return (torch.dot(encoder(q).flatten(), q_grad.flatten())
                + torch.dot(encoder(p).flatten(), p_grad.flatten()))

    return step, opt, {f"encoder.{k}": v for k, v in encoder.named_parameters()}


@pytest.mark.parametrize("build", [_rotate, _gradcache])
def test_a_weight_or_a_cached_gradient_that_carries_the_trained_model(build: Any) -> None:
    step, opt, params = build(False)
    audit = audit_step(step, opt)
    assert audit.targets and not audit.ok
    fixed, opt_fixed, fixed_params = build(True)
    changed = _changed(_grads(step, params), _grads(fixed, fixed_params))
    assert set().union(*(t.parameters for t in audit.targets)) == changed
    assert audit_step(fixed, opt_fixed).ok


def test_a_focal_loss_weight_is_part_of_the_loss() -> None:
    # Lin et al. 2017, eq. 5: FL(p) = -(1 - p)^γ log p, differentiated through (1 - p)^γ
    torch.manual_seed(0)
    net = nn.Linear(4, 3)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    x, y = torch.randn(6, 4), torch.randint(0, 3, (6,))

    def focal() -> torch.Tensor:
        z = net(x)
        p = torch.softmax(z, 1).gather(1, y[:, None]).squeeze(1)
        log_p = torch.log_softmax(z, 1).gather(1, y[:, None]).squeeze(1)
        return (-(1 - p) ** 2 * log_p).mean()

    assert audit_step(focal, opt).ok


@pytest.mark.parametrize("distance", sorted(_DISTANCES))
def test_a_forecast_scaled_back_by_a_learnt_level_compared_with_data_is_clean(
        distance: str) -> None:
    """ES-RNN's output (Smyl 2020): a network's forecast of the series divided by a learnt
    level, scaled back by that level (``f(y / level) * level``), compared with the future
    values, which are data: a product inside the measured value is its own arithmetic, no
    loss's product of two terms whose one side would be a target."""
    torch.manual_seed(0)
    net, level = nn.Linear(4, 4), nn.Parameter(torch.rand(4) + 1)
    opt = torch.optim.Adam([*net.parameters(), level], lr=1e-2)
    history, future = torch.rand(8, 4) + 1, torch.rand(8, 4) + 1

    def step() -> torch.Tensor:
        return _DISTANCES[distance](future, net(history / level) * level)

    assert audit_step(step, opt).ok
