"""Every algorithm: one named cut, owned by the core, and the difference theory predicts.

For each module or package under ``toolkit/algorithms``:

- it exports ``BLOCK``, a dotted name that starts with the algorithm's name;
- its source never decides a cut itself (``.detach(``, ``is_block_disabled``,
  ``set_grad_enabled``), and every ``stop_gradient``/``as_constant``/``require_block`` call passes
  ``BLOCK`` (or another of its named ``*_BLOCK`` constants);
- a small scenario records exactly its block(s), and inside ``disable_blocks(BLOCK)`` the
  gradient changes where theory says it does and stays equal (to rounding) where it does not.
"""

from __future__ import annotations

import ast
import importlib
import math
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from torch import nn

from toolkit import disable_blocks, record_blocks

ROOT = Path(__file__).resolve().parents[2] / "toolkit" / "algorithms"
#: modules of toolkit/algorithms that are no algorithm: the training loops' shared record of
#: where a value became non-finite
SHARED = {"divergence"}
ALGORITHMS = sorted(p.stem if p.is_file() else p.name for p in ROOT.iterdir()
                    if ((p.suffix == ".py" and p.stem != "__init__")
                        or (p.is_dir() and (p / "__init__.py").exists()))
                    and (p.stem if p.is_file() else p.name) not in SHARED)
CUT_CALLS = {"stop_gradient", "as_constant", "require_block"}
FORBIDDEN = (".detach(", "is_block_disabled", "set_grad_enabled")


def _sources(name: str) -> list[Path]:
    path = ROOT / name
    return sorted(path.rglob("*.py")) if path.is_dir() else [ROOT / f"{name}.py"]


def test_every_algorithm_is_listed() -> None:
    assert {"softmax", "em", "rbm", "adversarial"} <= set(ALGORITHMS)
    assert set(ALGORITHMS) <= set(SCENARIOS), "add a scenario for each new algorithm"


@pytest.mark.parametrize("name", ALGORITHMS)
def test_exports_block(name: str) -> None:
    module = importlib.import_module(f"toolkit.algorithms.{name}")
    assert isinstance(module.BLOCK, str)
    assert module.BLOCK.split(".")[0] == name, module.BLOCK
    assert "BLOCK" in module.__all__


@pytest.mark.parametrize("name", ALGORITHMS)
def test_no_cut_decided_outside_the_core(name: str) -> None:
    for path in _sources(name):
        text = path.read_text(encoding="utf-8")
        for word in FORBIDDEN:
            assert word not in text, f"{path.name} contains {word!r}"


def _block_argument(call: ast.Call) -> ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg == "name":
            return keyword.value
    func = call.func.id if isinstance(call.func, ast.Name) else call.func.attr
    if func == "require_block" and call.args:
        return call.args[0]
    if func == "stop_gradient" and len(call.args) > 1:
        return call.args[1]
    return None


@pytest.mark.parametrize("name", ALGORITHMS)
def test_every_cut_names_a_block_constant(name: str) -> None:
    calls = 0
    for path in _sources(name):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if called not in CUT_CALLS:
                continue
            calls += 1
            arg = _block_argument(node)
            assert isinstance(arg, ast.Name) and (arg.id == "BLOCK" or arg.id.endswith("_BLOCK")), (
                f"{path.name}:{node.lineno}: {called}(...) must pass BLOCK")
    assert calls >= 1, f"{name} makes no cut through toolkit.core"


# --------------------------------------------------------------------------------------------
# scenarios: () -> flat gradient of a small loss, computed through the public functions


def _flat(grads: tuple[torch.Tensor, ...]) -> torch.Tensor:
    return torch.cat([g.reshape(-1) for g in grads])


def _softmax() -> torch.Tensor:
    from toolkit.algorithms.softmax import log_softmax, stable_softmax

    x = torch.tensor([[1.0, 3.0, 3.0, -2.0], [0.5, 0.1, 2.0, 2.0]], dtype=torch.float64,
                     requires_grad=True)
    w = torch.linspace(-1, 1, 8, dtype=torch.float64).reshape(2, 4)
    loss = (stable_softmax(x) * w).sum() + (log_softmax(x) * w).sum()
    return _flat(torch.autograd.grad(loss, x))


def _em() -> torch.Tensor:
    from toolkit.algorithms.em import expected_complete_loglik

    X = torch.tensor([[0.0, 0.1], [0.4, -0.2], [2.0, 2.1], [1.1, 0.9]], dtype=torch.float64)
    weights = torch.tensor([0.5, 0.5], dtype=torch.float64, requires_grad=True)
    means = torch.tensor([[0.0, 0.0], [1.5, 1.5]], dtype=torch.float64, requires_grad=True)
    prec = torch.ones(2, 2, dtype=torch.float64)
    q = expected_complete_loglik(X, weights, means, prec, covariance_type="diag")
    return _flat(torch.autograd.grad(q, (weights, means)))


def _rbm() -> torch.Tensor:
    from toolkit.algorithms.rbm import cd_loss, init_params, negative_samples

    p = init_params(6, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64,
                    scale=0.5, init="uniform")
    v = (torch.rand(5, 6, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
         < 0.5).to(torch.float64)
    loss = cd_loss(p, v, negative_samples(p, v, 2, chain="mean_field"))
    return _flat(torch.autograd.grad(loss, list(p)))


def _adversarial(norm: str) -> Callable[[], torch.Tensor]:
    def scenario() -> torch.Tensor:
        from toolkit.algorithms.adversarial import pgd

        torch.manual_seed(0)
        net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3)).double()
        x = torch.rand(6, 4, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
        y = torch.tensor([0, 1, 2, 0, 1, 2])
        eps, alpha = (0.1, 0.03) if norm == "linf" else (0.5, 0.2)
        x_adv = pgd(net, x, y, eps=eps, alpha=alpha, steps=3, norm=norm,
                    generator=torch.Generator().manual_seed(3))
        loss = nn.functional.cross_entropy(net(x_adv), y)
        return _flat(torch.autograd.grad(loss, list(net.parameters())))
    return scenario


def _td() -> torch.Tensor:
    from toolkit.algorithms.td import td_loss

    w = torch.tensor([0.3, -0.2, 0.5], dtype=torch.float64, requires_grad=True)
    phi = torch.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0], [1.0, 1.0, 0.0]], dtype=torch.float64)
    v, v_next = phi @ w, phi.roll(1, 0) @ w
    loss = td_loss(v, torch.tensor([1.0, 0.0, 0.5], dtype=torch.float64), v_next, 0.9)
    return _flat(torch.autograd.grad(loss, w))  # residual gradient differs from semi-gradient


def _dice() -> torch.Tensor:
    from toolkit.algorithms.dice import dice_objective

    theta = torch.tensor([0.2, -0.4], dtype=torch.float64, requires_grad=True)
    log_probs = torch.log_softmax(theta, 0)[[0, 1, 1]].reshape(1, 3)
    costs = torch.tensor([[1.0, -2.0, 0.5]], dtype=torch.float64)
    return _flat(torch.autograd.grad(dice_objective(log_probs, costs).sum(), theta,
                                     allow_unused=True, materialize_grads=True))


def _vq_vae() -> torch.Tensor:
    from toolkit.algorithms.vq_vae import quantize

    z_e = torch.tensor([[0.9, 0.1], [0.2, 0.7]], dtype=torch.float64, requires_grad=True)
    z_q, _, _ = quantize(z_e, torch.eye(2, dtype=torch.float64))
    w = torch.tensor([[1.0, -2.0], [0.5, 3.0]], dtype=torch.float64)
    return _flat(torch.autograd.grad((z_q * w).sum(), z_e, allow_unused=True,
                                     materialize_grads=True))  # 0 without straight-through


def _simsiam() -> torch.Tensor:
    from toolkit.algorithms.simsiam import simsiam_loss

    g = torch.Generator().manual_seed(0)
    z1, z2 = (torch.randn(4, 3, generator=g, dtype=torch.float64).requires_grad_()
              for _ in range(2))
    p1, p2 = 2 * z1 + 0.1, z2 - 0.3
    return _flat(torch.autograd.grad(simsiam_loss(p1, p2, z1, z2), (z1, z2)))


#: name → [(scenario, "equal" | "differ")]: what disabling the block does to the gradient.
SCENARIOS: dict[str, list[tuple[Callable[[], torch.Tensor], str]]] = {
    "softmax": [(_softmax, "equal")],          # shift invariance
    "em": [(_em, "differ")],                   # LL − H(r) instead of LL (Fisher)
    "rbm": [(_rbm, "differ")],                 # through the mean-field chain
    "adversarial": [(_adversarial("linf"), "equal"),  # sign has zero derivative
                    (_adversarial("l2"), "differ")],  # normalised steps do not
    "td": [(_td, "differ")],                   # residual gradient instead of semi-gradient
    "dice": [(_dice, "differ")],               # the box is the constant 1: no derivative
    "vq_vae": [(_vq_vae, "differ")],           # no gradient reaches the encoder
    "simsiam": [(_simsiam, "differ")],         # the target branch gets gradient too
}


@pytest.mark.parametrize(("name", "index"), [(n, i) for n in ALGORITHMS
                                             for i in range(len(SCENARIOS.get(n, [])))])
def test_disabling_the_block_changes_what_theory_says(name: str, index: int) -> None:
    module = importlib.import_module(f"toolkit.algorithms.{name}")
    scenario, expected = SCENARIOS[name][index]
    with record_blocks() as names:
        blocked = scenario()
    assert module.BLOCK in names
    with disable_blocks(module.BLOCK):
        unblocked = scenario()
    rel = float((blocked - unblocked).norm() / max(float(blocked.norm()), 1e-300))
    assert math.isfinite(rel)
    if expected == "equal":
        assert rel < 1e-10, f"{name}: the gradient changed by {rel:.3g} without the block"
    else:
        assert rel > 1e-3, f"{name}: the gradient did not change without the block ({rel:.3g})"
