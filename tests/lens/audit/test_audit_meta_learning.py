"""Meta-learning steps (issue 53): an inner loop run on a copy of the model, and lines of the
standard library never named as where a fix goes.

The oracle is a real ``backward()`` of the outer loss: which meta-parameters get ``.grad``.
"""

from __future__ import annotations

import copy
import inspect
import os
import sysconfig

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from toolkit import audit_step


def _line_of(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def _task(seed: int):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 1))
    meta_opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    support = torch.randn(5, 2), torch.randn(5, 1)
    query = torch.randn(5, 2), torch.randn(5, 1)
    return model, meta_opt, support, query


def _deepcopy_step(model, support, query, inner_lr: float = 0.1):
    """A MAML inner loop run on ``copy.deepcopy(model)``, the pattern learn2learn's
    ``clone_module`` exists to replace (learnables/learn2learn, learn2learn/utils/__init__.py
    @master: "unlike copy.deepcopy, the cloned module ... gradients flow back to the
    original"): the outer loss reaches the copy's leaves, never ``model``'s parameters."""

    def step() -> torch.Tensor:
        fast = copy.deepcopy(model)
        inner = (fast(support[0]) - support[1]).pow(2).mean()
        grads = torch.autograd.grad(inner, list(fast.parameters()))
        with torch.no_grad():
            for p, g in zip(fast.parameters(), grads):
                p.sub_(inner_lr * g)
        return (fast(query[0]) - query[1]).pow(2).mean()

    return step


def _functional_step(model, support, query, inner_lr: float = 0.1):
    """The fix the audit names: the adapted weights computed from ``model``'s own parameters
    (``torch.func.functional_call``), with ``create_graph=True`` for the second-order term."""

    def step() -> torch.Tensor:
        params = dict(model.named_parameters())
        inner = (functional_call(model, params, support[0]) - support[1]).pow(2).mean()
        grads = torch.autograd.grad(inner, list(params.values()), create_graph=True)
        fast = {k: p - inner_lr * g for (k, p), g in zip(params.items(), grads)}
        return (functional_call(model, fast, query[0]) - query[1]).pow(2).mean()

    return step


def test_an_inner_loop_on_a_deepcopy_is_dead_at_the_copy_line_of_the_users_code(
        seed: int) -> None:
    model, meta_opt, support, query = _task(seed)
    step = _deepcopy_step(model, support, query)
    audit = audit_step(step, meta_opt)
    assert {d.kind for d in audit.dead} == {"copy"}
    assert {d.parameter for d in audit.dead} == {f"model.{k}" for k, _ in
                                                  model.named_parameters()}
    (line,) = {x for d in audit.dead for x in d.lines}
    assert line.number == _line_of(step, "fast = copy.deepcopy(model)") and line.text
    assert all("functional_call" in d.fix and "copy_initial_weights=False" in d.fix
               for d in audit.dead)
    # the oracle: real backward gives the meta-parameters no gradient
    step().backward()
    assert all(p.grad is None for p in model.parameters())
    # the fix: every meta-parameter reached, audit clean, real backward gives each a gradient
    fixed = _functional_step(model, support, query)
    assert audit_step(fixed, meta_opt).ok
    fixed().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())


def test_no_printed_line_is_in_the_standard_library_or_an_installed_package(seed: int) -> None:
    model, meta_opt, support, query = _task(seed)
    audit = audit_step(_deepcopy_step(model, support, query), meta_opt)
    printed = [x for finding in [*audit.leaks, *audit.dead] for x in finding.lines]
    assert printed
    stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"])
    for line in printed:
        path = os.path.realpath(line.path)
        assert not path.startswith(stdlib + os.sep), line
        assert "site-packages" not in path and "dist-packages" not in path, line
        assert line.file == os.path.basename(__file__)


class _Learner(nn.Module):
    """dragen1860/MAML-Pytorch, learner.py@master: a network whose forward takes its weights
    as an argument (``vars=None`` means its own parameters)."""

    def __init__(self) -> None:
        super().__init__()
        self.vars = nn.ParameterList([nn.Parameter(torch.randn(8, 2) * 0.5),
                                      nn.Parameter(torch.zeros(8)),
                                      nn.Parameter(torch.randn(1, 8) * 0.5),
                                      nn.Parameter(torch.zeros(1))])

    def forward(self, x: torch.Tensor, vars=None) -> torch.Tensor:
        w1, b1, w2, b2 = self.vars if vars is None else vars
        return F.linear(torch.tanh(F.linear(x, w1, b1)), w2, b2)


def _maml_step(net, support, query, create_graph: bool, update_lr: float = 0.4):
    """dragen1860/MAML-Pytorch, meta.py@master (``Meta.forward``): the inner gradient is taken
    with ``torch.autograd.grad(loss, self.net.parameters())``, without ``create_graph``, and the
    fast weights are ``p - update_lr * g``: the meta-gradient silently drops MAML's
    second-order term."""

    def step() -> torch.Tensor:
        loss = F.mse_loss(net(support[0]), support[1])
        grad = torch.autograd.grad(loss, net.parameters(), create_graph=create_graph)
        fast_weights = [p - update_lr * g for g, p in zip(grad, net.parameters())]
        return F.mse_loss(net(query[0], fast_weights), query[1])

    return step


def test_an_inner_gradient_without_create_graph_is_noted_at_its_line(seed: int) -> None:
    torch.manual_seed(seed)
    net = _Learner()
    meta_opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    support = torch.randn(6, 2), torch.randn(6, 1)
    query = torch.randn(6, 2), torch.randn(6, 1)
    step = _maml_step(net, support, query, create_graph=False)
    audit = audit_step(step, meta_opt)
    (note,) = [n for n in audit.notes if "create_graph=True" in n]
    grad_line = _line_of(_maml_step, "grad = torch.autograd.grad(")
    assert f"{os.path.basename(__file__)}:{grad_line}" in note and "first order" in note
    # the oracle: real backward, with and without create_graph, differ by the second-order term
    first = torch.autograd.grad(step(), list(net.parameters()))
    fixed = _maml_step(net, support, query, create_graph=True)
    second = torch.autograd.grad(fixed(), list(net.parameters()))
    assert any(not torch.allclose(a, b) for a, b in zip(first, second))
    # following the note: no note, and the audit is as clean as before
    after = audit_step(fixed, meta_opt)
    assert after.ok == audit.ok and not any("create_graph=True" in n for n in after.notes)


def test_an_attack_step_without_create_graph_is_no_inner_loop(seed: int) -> None:
    # adversarial training's PGD (torchattacks, attacks/pgd.py): the gradient is taken of the
    # input, and the model's weights are never updated with it
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(5, 4), torch.randint(0, 3, (5,))

    def step() -> torch.Tensor:
        adv = x.clone().requires_grad_(True)
        for _ in range(2):
            cost = F.cross_entropy(model(adv), y)
            grad = torch.autograd.grad(cost, adv)[0]
            adv = (adv.detach() + 0.1 * grad.sign()).clamp(x - 0.3, x + 0.3).requires_grad_(True)
        return F.cross_entropy(model(adv.detach()), y)

    audit = audit_step(step, opt)
    assert not any("create_graph" in n for n in audit.notes), audit.notes
