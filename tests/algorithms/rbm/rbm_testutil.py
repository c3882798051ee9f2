"""Shared helpers of the RBM tests: random parameters, enumeration, references in numpy."""

from __future__ import annotations

import itertools

import numpy as np
import torch

from toolkit.algorithms.rbm import RBMParams

F64 = torch.float64


def random_params(n_visible: int, n_hidden: int, scale: float = 1.0, seed: int = 0,
                  requires_grad: bool = False) -> RBMParams:
    g = torch.Generator().manual_seed(seed)
    W = torch.randn(n_hidden, n_visible, generator=g, dtype=F64) * scale
    b = torch.randn(n_visible, generator=g, dtype=F64) * scale
    c = torch.randn(n_hidden, generator=g, dtype=F64) * scale
    return RBMParams(*(t.requires_grad_(requires_grad) for t in (W, b, c)))


def all_binary(n: int) -> torch.Tensor:
    return torch.tensor(list(itertools.product([0.0, 1.0], repeat=n)), dtype=F64)


def brute_force_log_z(p: RBMParams) -> float:
    """log Σ_{v,h} exp(v·b + h·c + hᵀWv), every joint state listed explicitly (numpy)."""
    W, b, c = (t.detach().numpy() for t in p)
    V, H = all_binary(W.shape[1]).numpy(), all_binary(W.shape[0]).numpy()
    neg_energy = (V @ b)[:, None] + (H @ c)[None, :] + V @ W.T @ H.T  # (2^V, 2^H)
    m = neg_energy.max()
    return float(m + np.log(np.exp(neg_energy - m).sum()))


def numpy_cd_statistics(p: RBMParams, v_data: torch.Tensor, v_model: torch.Tensor
                        ) -> list[np.ndarray]:
    """Negated CD update −(⟨p(h|v) vᵀ⟩_data − ⟨p(h|v) vᵀ⟩_model), written out in numpy."""
    W, _, c = (t.detach().numpy() for t in p)
    vd, vm = v_data.detach().numpy(), v_model.detach().numpy()
    hd = 1 / (1 + np.exp(-(vd @ W.T + c)))
    hm = 1 / (1 + np.exp(-(vm @ W.T + c)))
    dW = -(hd.T @ vd / len(vd) - hm.T @ vm / len(vm))
    db = -(vd.mean(0) - vm.mean(0))
    dc = -(hd.mean(0) - hm.mean(0))
    return [dW, db, dc]


def sklearn_rbm(p: RBMParams, n_visible: int, seed: int):
    from sklearn.neural_network import BernoulliRBM as SkRBM

    sk = SkRBM(n_components=p.weights.shape[0], random_state=seed)
    sk.fit(np.zeros((2, n_visible)))  # creates the attributes; replaced below
    sk.components_ = p.weights.numpy().copy()
    sk.intercept_visible_ = p.visible_bias.numpy().copy()
    sk.intercept_hidden_ = p.hidden_bias.numpy().copy()
    return sk
