"""VQ-VAE: vector quantisation with the straight-through estimator behind ``"vq_vae.straight_through"``.

The encoder's output ``z_e`` is replaced by its nearest codebook vector ``e = e_k``,
``k = argmin_j ‖z_e − e_j‖²``. The argmin has no gradient, so van den Oord et al. (2017) copy
the decoder's gradient from ``z_q`` to ``z_e`` (the straight-through estimator, Bengio et al.
2013) and train the codebook and the encoder with two extra terms:

.. math::

    z_q = z_e + \\mathrm{sg}(e - z_e), \\qquad
    L = \\underbrace{\\|x - \\mathrm{dec}(z_q)\\|^2}_{\\text{reconstruction}}
      + \\underbrace{\\|\\mathrm{sg}(z_e) - e\\|^2}_{\\text{codebook}}
      + \\beta \\underbrace{\\|z_e - \\mathrm{sg}(e)\\|^2}_{\\text{commitment}} .

Three named cuts, one per ``sg``:

- :data:`BLOCK` (``"vq_vae.straight_through"``), the algorithm's block: ``z_q`` equals ``e`` going
  forward and ``∂z_q/∂z_e = I`` going backward. Without it ``z_q = z_e + e − z_e = e`` and
  ``∂z_q/∂z_e = I − I = 0``: the encoder receives exactly zero reconstruction gradient, and the
  decoder's gradient goes to the chosen codes instead.
- :data:`CODEBOOK_BLOCK` (``"vq_vae.codebook"``): the codebook term moves the codes toward the
  encoder outputs only. Without it the term also pulls the encoder toward the codes (weight
  ``1 + β`` instead of ``β``).
- :data:`COMMITMENT_BLOCK` (``"vq_vae.commitment"``): the commitment term keeps the encoder's
  output near its code only. Without it the term also moves the codes (weight ``1 + β``).

Shapes: ``x`` ``(n, n_features)``; ``z_e``, ``z_q`` ``(n, n_latents, latent_dim)``; codebook
``(n_codes, latent_dim)``; indices ``(n, n_latents)``.

References:
    - A. van den Oord, O. Vinyals, K. Kavukcuoglu. Neural discrete representation learning.
      NeurIPS 2017, https://arxiv.org/abs/1711.00937
    - Y. Bengio, N. Léonard, A. Courville. Estimating or propagating gradients through
      stochastic neurons for conditional computation. 2013, https://arxiv.org/abs/1308.3432
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from toolkit._utils.array_validation import as_tensor, check_dtype, check_tensor, resolve_device
from toolkit._utils.memory import sized_by
from toolkit._utils.param_validation import Callable_, Generator, Integer, Real, check, check_params
from toolkit.algorithms.divergence import History, UpdateCheck, check_step_fits
from toolkit.core import stop_gradient

__all__ = ["BLOCK", "CODEBOOK_BLOCK", "COMMITMENT_BLOCK", "VQVAE", "VQOutput",
           "encoder_recon_grad_norm", "nearest_codes", "perplexity", "quantize", "train_vq_vae",
           "vq_losses"]

#: The algorithm's block: the straight-through copy of the decoder's gradient to the encoder
#: (``z_q = z_e + sg(e − z_e)``); without it the encoder gets no reconstruction gradient.
BLOCK = "vq_vae.straight_through"
#: The codebook term's cut, ``‖sg(z_e) − e‖²``: only the codes move toward the encoder.
CODEBOOK_BLOCK = "vq_vae.codebook"
#: The commitment term's cut, ``‖z_e − sg(e)‖²``: only the encoder commits to its codes.
COMMITMENT_BLOCK = "vq_vae.commitment"


def nearest_codes(z_e: torch.Tensor, codebook: torch.Tensor) -> torch.Tensor:
    """``argmin_k ‖z_e − e_k‖²`` for each vector of ``z_e`` ``(..., D)``: indices ``(...)``."""
    _check_codes("nearest_codes", z_e, codebook)
    distances = (z_e.unsqueeze(-2) - codebook).pow(2).sum(-1)
    return distances.argmin(-1)


def quantize(z_e: torch.Tensor, codebook: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(z_q, e, indices)`` with ``e`` the nearest codes and ``z_q = z_e + sg(e − z_e)``.

    >>> z_e = torch.tensor([[0.9, 0.1]], requires_grad=True)
    >>> z_q, e, idx = quantize(z_e, torch.eye(2))
    >>> z_q.tolist(), idx.tolist(), torch.autograd.grad(z_q.sum(), z_e)[0].tolist()
    ([[1.0, 0.0]], [0], [[1.0, 1.0]])
    """
    _check_codes("quantize", z_e, codebook)
    indices = nearest_codes(z_e, codebook)
    e = codebook[indices]
    # Straight-through: forward z_q = e; backward the decoder's gradient goes to z_e unchanged.
    z_q = z_e + stop_gradient(e - z_e, name=BLOCK)
    return z_q, e, indices


def vq_losses(z_e: torch.Tensor, e: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(‖sg(z_e) − e‖², ‖z_e − sg(e)‖²)``, each summed over the latent dimension and averaged
    over the latent vectors (multiply the second by ``β``)."""
    check_tensor("vq_losses", "z_e", z_e)
    check_tensor("vq_losses", "e", e, like=z_e, like_name="z_e")
    if z_e.shape != e.shape or z_e.ndim == 0:
        raise ValueError(f"vq_losses: z_e and e must have the same shape (..., D), got "
                         f"{tuple(z_e.shape)} and {tuple(e.shape)}")
    codebook = (stop_gradient(z_e, name=CODEBOOK_BLOCK) - e).pow(2).sum(-1).mean()
    commitment = (z_e - stop_gradient(e, name=COMMITMENT_BLOCK)).pow(2).sum(-1).mean()
    return codebook, commitment


def perplexity(indices: torch.Tensor, n_codes: int) -> float:
    """``exp(H(usage))`` of the codes' usage frequencies: 1 (one code) to ``n_codes`` (uniform)."""
    check("perplexity", "n_codes", n_codes, [Integer(1)])
    check_tensor("perplexity", "indices", indices, floating=False)
    if indices.is_floating_point() or indices.dtype == torch.bool:
        raise TypeError(f"perplexity: indices must be an integer tensor of code indices, got "
                        f"dtype {indices.dtype}")
    if indices.numel() and (int(indices.min()) < 0 or int(indices.max()) >= n_codes):
        raise ValueError(f"perplexity: indices must lie in [0, {n_codes}), got values in "
                         f"[{int(indices.min())}, {int(indices.max())}]")
    counts = torch.bincount(indices.reshape(-1), minlength=n_codes).double()
    p = counts[counts > 0] / counts.sum()
    return float(torch.exp(-(p * p.log()).sum()))


def _check_codes(where: str, z_e: Any, codebook: Any) -> None:
    """``z_e`` (..., D) and ``codebook`` (n_codes >= 1, D): floating tensors alike."""
    check_tensor(where, "z_e", z_e)
    check_tensor(where, "codebook", codebook, like=z_e, like_name="z_e")
    width = z_e.shape[-1] if z_e.ndim else "D"
    if z_e.ndim == 0 or codebook.ndim != 2 or codebook.shape != (codebook.shape[0], width) \
            or codebook.shape[0] == 0:
        raise ValueError(f"{where}: codebook must have shape (n_codes, {width}) with n_codes >= 1 "
                         f"for z_e of shape {tuple(z_e.shape)}, got {tuple(codebook.shape)}")


class VQOutput(NamedTuple):
    """What :meth:`VQVAE.forward` returns (losses are scalars)."""

    x_hat: torch.Tensor
    z_e: torch.Tensor
    z_q: torch.Tensor
    indices: torch.Tensor
    recon: torch.Tensor
    codebook: torch.Tensor
    commitment: torch.Tensor

    def loss(self, beta: float) -> torch.Tensor:
        """``recon + codebook + β commitment``."""
        return self.recon + self.codebook + beta * self.commitment


class VQVAE(nn.Module):
    """MLP encoder, codebook and MLP decoder; each input is coded by ``n_latents`` codes.

    ``encoder``: ``n_features → hidden → n_latents · latent_dim`` (ReLU); ``decoder`` the mirror
    image; ``codebook`` ``(n_codes, latent_dim)``, ``N(0, 1)`` until :meth:`init_codebook`.
    ``device``: where the parameters are created, the CPU by default as for any ``nn.Module``
    (move the model with ``.to``); the training loop moves the data to the parameters.
    """

    @sized_by("n_features", "n_latents", "latent_dim", "n_codes", "hidden", where="VQVAE")
    def __init__(self, n_features: int, *, n_latents: int = 4, latent_dim: int = 8,
                 n_codes: int = 32, hidden: int = 128, device: torch.device | str | None = None,
                 dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        check_params("VQVAE", locals(), {name: [Integer(1)] for name in (
            "n_features", "n_latents", "latent_dim", "n_codes", "hidden")})
        kw = {"device": resolve_device("cpu" if device is None else device, where="VQVAE"), "dtype": check_dtype("VQVAE",
                                                                                     dtype)}
        self.n_latents, self.latent_dim, self.n_codes = n_latents, latent_dim, n_codes
        self.encoder = nn.Sequential(nn.Linear(n_features, hidden, **kw), nn.ReLU(),
                                     nn.Linear(hidden, n_latents * latent_dim, **kw))
        self.decoder = nn.Sequential(nn.Linear(n_latents * latent_dim, hidden, **kw), nn.ReLU(),
                                     nn.Linear(hidden, n_features, **kw))
        self.codebook = nn.Parameter(torch.randn(n_codes, latent_dim, **kw))

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """``z_e`` ``(n, n_latents, latent_dim)``."""
        return self.encoder(x).reshape(len(x), self.n_latents, self.latent_dim)

    def decode(self, z_q: torch.Tensor) -> torch.Tensor:
        """``x̂`` ``(n, n_features)``."""
        return self.decoder(z_q.reshape(len(z_q), -1))

    def forward(self, x: torch.Tensor) -> VQOutput:
        z_e = self.encode(x)
        z_q, e, indices = quantize(z_e, self.codebook)
        x_hat = self.decode(z_q)
        codebook, commitment = vq_losses(z_e, e)
        return VQOutput(x_hat, z_e, z_q, indices, F.mse_loss(x_hat, x), codebook, commitment)

    def init_codebook(self, x: torch.Tensor, *, generator: torch.Generator) -> None:
        """Set the codes to encoder outputs of randomly chosen rows of ``x`` (a data-dependent
        start, as k-means seeding: codes far from every ``z_e`` would never be chosen)."""
        check("VQVAE.init_codebook", "generator", generator, [Generator])
        with torch.no_grad():  # initialisation, not a training step
            z = self.encode(x).reshape(-1, self.latent_dim)
            if len(z) < self.n_codes:
                raise ValueError(f"VQVAE.init_codebook: x must give at least n_codes = "
                                 f"{self.n_codes} latent vectors, got {len(z)}")
            pick = torch.randperm(len(z), generator=generator)[:self.n_codes]
            self.codebook.copy_(z[pick.to(z.device)])


def encoder_recon_grad_norm(model: VQVAE, x: torch.Tensor) -> float:
    """``‖∂ recon / ∂ θ_encoder‖``: the reconstruction gradient that reaches the encoder."""
    if not isinstance(model, VQVAE):
        raise TypeError(f"encoder_recon_grad_norm: model must be a VQVAE, got "
                        f"{type(model).__name__}")
    param = next(model.parameters())
    check_tensor("encoder_recon_grad_norm", "x", x, ndim=2, like=param)
    n_features = model.encoder[0].in_features
    if x.shape[1] != n_features:
        raise ValueError(f"encoder_recon_grad_norm: x must have shape (n, {n_features}), got "
                         f"{tuple(x.shape)}")
    params = list(model.encoder.parameters())
    grads = torch.autograd.grad(model(x).recon, params, allow_unused=True,
                                materialize_grads=True)
    return float(torch.cat([g.reshape(-1) for g in grads]).norm())


_TRAIN_ARGS = {"epochs": [Integer(0)], "batch_size": [Integer(1)],
               "lr": [Real(0, closed="neither")], "beta": [Real(0)], "generator": [Generator],
               "callback": [None, Callable_]}


def train_vq_vae(model: VQVAE, X: torch.Tensor, *, epochs: int, batch_size: int = 64,
                 lr: float = 2e-3, beta: float = 0.25, generator: torch.Generator,
                 callback: Callable[[int, dict[str, float]], None] | None = None
                 ) -> History:
    """Train with Adam on ``recon + codebook + β commitment`` (β = 0.25 as in the paper).

    Mini-batches are drawn by ``generator`` each epoch; ``callback(epoch, row)`` is called after
    each epoch with the epoch's mean losses. Returns those rows (a list; a
    :class:`~toolkit.algorithms.divergence.History`).

    At every update the loss and the gradients are checked before the Adam step and the
    parameters after it; on the first value that is not finite training stops there (nothing
    non-finite is applied; a step that overflows a parameter is the last one), the rows'
    ``divergence`` says where (epochs counted from 1, as for ``callback``) and a
    :class:`~toolkit.algorithms.divergence.DivergenceWarning` is issued once; the rows hold the epochs
    completed before it. Parameters that are not finite before training are an error.
    """
    where = "train_vq_vae"
    check_params(where, locals(), _TRAIN_ARGS)
    if not isinstance(model, VQVAE):
        raise TypeError(f"{where}: model must be a VQVAE, got {type(model).__name__}")
    X = as_tensor(X, where=where, arg="X", ndim=2, finite=True, min_rows=1)
    if X.shape[1] != model.encoder[0].in_features:
        raise ValueError(f"{where}: X must have shape (n, {model.encoder[0].in_features}) for "
                         f"the model, got {tuple(X.shape)}")
    param = next(model.parameters())
    check_step_fits(where, param.dtype, lr=lr)
    finite = UpdateCheck.for_module(where, model)
    finite.check_start()
    X = X.to(param.device, param.dtype)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    history = History()
    for epoch in range(1, epochs + 1):
        sums = {"loss": 0.0, "recon": 0.0, "codebook": 0.0, "commitment": 0.0}
        perm = torch.randperm(len(X), generator=generator).to(X.device)
        batches = perm.split(batch_size)
        for idx in batches:
            out = model(X[idx])
            loss = out.loss(beta)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            # the loss and the gradients before the step, the parameters after
            if finite.step(opt, ("loss", loss), epoch=epoch):
                history.divergence = finite.divergence
                return history
            for key, value in (("loss", loss), ("recon", out.recon), ("codebook", out.codebook),
                               ("commitment", out.commitment)):
                sums[key] += value.item() / len(batches)
        history.append(sums)
        if callback is not None:
            callback(epoch, sums)
    return history
