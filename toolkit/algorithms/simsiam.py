"""SimSiam: a Siamese network whose target branch is behind the block ``"simsiam.target"``.

Two augmented views ``x₁, x₂`` of a batch pass through the same encoder ``f`` and projector
``g`` (``z = g(f(x))``) and a predictor ``h`` (``p = h(z)``). Chen & He (2021) minimise

.. math::

    L = \\tfrac12 D(p_1, \\mathrm{sg}(z_2)) + \\tfrac12 D(p_2, \\mathrm{sg}(z_1)), \\qquad
    D(p, z) = -\\frac{p}{\\|p\\|_2} \\cdot \\frac{z}{\\|z\\|_2} .

- **with the block** each view's projection is a fixed target for the other's prediction; the
  representation does not collapse: the per-channel std of ``z/‖z‖`` stays near ``1/√d``
  (the value for isotropic Gaussian ``z``; Chen & He, Figure 2);
- **without it** (``disable_blocks("simsiam.*")``) the loss can reach its minimum −1 by making
  every output the same vector: the std of ``z/‖z‖`` falls to 0 (collapse). On ImageNet the
  paper's linear accuracy is 67.7 % with the block and 0.1 % without.

The networks are small MLPs for vectors such as scikit-learn's 8×8 digits: the encoder
``n_features → hidden → hidden`` (BatchNorm, ReLU), the projector ``hidden → dim → dim`` with
BatchNorm on every layer, as the paper describes it (the output's keeps its affine part; the
authors' released code drops it), and the predictor a bottleneck ``dim → pred_hidden → dim``. :class:`Augment` makes the views (small shifts, masked
pixels, noise); :func:`knn_accuracy` and :func:`output_std` measure the result.

Reference:
    X. Chen, K. He. Exploring simple Siamese representation learning. CVPR 2021,
    https://arxiv.org/abs/2011.10566
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from toolkit._utils.array_validation import as_tensor, check_dtype, check_tensor, resolve_device
from toolkit._utils.memory import sized_by
from toolkit._utils.param_validation import (
    Callable_,
    Generator,
    Integer,
    Real,
    check,
    check_params,
    show_value,
)
from toolkit.algorithms.divergence import History, UpdateCheck, check_step_fits
from toolkit.core import stop_gradient

__all__ = ["BLOCK", "Augment", "SimSiam", "knn_accuracy", "negative_cosine", "output_std",
           "simsiam_loss", "train_simsiam"]

#: The module's one block: the other view's projection ``z`` is a target, a constant for the
#: prediction ``p``; without the cut both branches move toward each other and collapse.
BLOCK = "simsiam.target"


def negative_cosine(p: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """``D(p, z) = −mean_i cos(p_i, sg(z_i))`` for rows of ``p``, ``z`` ``(n, d)``; in [−1, 1].

    >>> p = torch.tensor([[1.0, 0.0]], requires_grad=True)
    >>> z = torch.tensor([[1.0, 1.0]], requires_grad=True)
    >>> loss = negative_cosine(p, z)
    >>> round(loss.item(), 4), torch.autograd.grad(loss, [p, z], allow_unused=True)[1]
    (-0.7071, None)
    """
    check_tensor("negative_cosine", "p", p)
    check_tensor("negative_cosine", "z", z, like=p, like_name="p")
    if p.shape != z.shape or p.ndim != 2:
        raise ValueError(f"negative_cosine: p and z must have the same shape (n, d), got "
                         f"{tuple(p.shape)} and {tuple(z.shape)}")
    # The other view's projection is the target: the prediction moves toward it, not it toward
    # the prediction.
    return -F.cosine_similarity(p, stop_gradient(z, name=BLOCK), dim=-1).mean()


def simsiam_loss(p1: torch.Tensor, p2: torch.Tensor, z1: torch.Tensor, z2: torch.Tensor
                 ) -> torch.Tensor:
    """The symmetrised loss ``½ D(p₁, sg(z₂)) + ½ D(p₂, sg(z₁))``; shapes ``(n, d)``."""
    for arg, t in (("p1", p1), ("p2", p2), ("z1", z1), ("z2", z2)):
        check_tensor("simsiam_loss", arg, t, like=None if arg == "p1" else p1, like_name="p1")
    return 0.5 * negative_cosine(p1, z2) + 0.5 * negative_cosine(p2, z1)


def output_std(z: torch.Tensor) -> float:
    """The per-channel std of ``z/‖z‖₂`` over the rows of ``z`` ``(n, d)``, averaged over
    channels: about ``1/√d`` for isotropic Gaussian ``z``, 0 for a collapsed output."""
    z = as_tensor(z, where="output_std", arg="z", ndim=2, min_rows=2)
    return float(F.normalize(z, dim=1).std(0).mean())


def knn_accuracy(train_X: torch.Tensor, train_y: torch.Tensor, test_X: torch.Tensor,
                 test_y: torch.Tensor, *, k: int = 5) -> float:
    """Accuracy of a ``k``-nearest-neighbour vote with cosine similarity (ties: lowest label).

    ``train_X`` ``(n, d)``, ``train_y`` ``(n,)`` int labels, ``test_X`` ``(m, d)``,
    ``test_y`` ``(m,)``. Equal to scikit-learn's ``KNeighborsClassifier(k, metric="cosine")``
    up to ties between equidistant neighbours.
    """
    check("knn_accuracy", "k", k, [Integer(1)])
    train_X = as_tensor(train_X, where="knn_accuracy", arg="train_X", ndim=2, min_rows=k)
    test_X = as_tensor(test_X, where="knn_accuracy", arg="test_X", ndim=2, min_rows=1,
                       dtype=train_X.dtype, device=train_X.device)
    if train_X.shape[1] != test_X.shape[1]:
        raise ValueError(f"knn_accuracy: test_X must have {train_X.shape[1]} columns like "
                         f"train_X, got {test_X.shape[1]}")
    train_y, test_y = (as_tensor(y, where="knn_accuracy", arg=arg, ndim=1, finite=True)
                       for arg, y in (("train_y", train_y), ("test_y", test_y)))
    for arg, y, X in (("train_y", train_y, train_X), ("test_y", test_y, test_X)):
        if len(y) != len(X):
            rows = "train_X" if arg == "train_y" else "test_X"
            raise ValueError(f"knn_accuracy: {arg} must hold one label per row of {rows} "
                             f"({len(X)}), got {len(y)}")
    train_y, test_y = train_y.long(), test_y.long()
    similarity = F.normalize(test_X, dim=1) @ F.normalize(train_X, dim=1).T
    neighbours = train_y.to(similarity.device)[similarity.topk(k, dim=1).indices]
    n_classes = int(max(train_y.max(), test_y.max())) + 1
    votes = F.one_hot(neighbours, n_classes).sum(1)
    return float((votes.argmax(1).cpu() == test_y.cpu()).double().mean())


def _view(where: str, augment: Callable[..., torch.Tensor], x: torch.Tensor,
          generator: torch.Generator | None) -> torch.Tensor:
    """``augment(x, generator=generator)``, checked: a tensor of ``x``'s shape."""
    view = augment(x, generator=generator)
    if not isinstance(view, torch.Tensor) or view.shape != x.shape:
        error = ValueError if isinstance(view, torch.Tensor) else TypeError
        raise error(f"{where}: augment must return a view of x, a tensor of shape "
                    f"{tuple(x.shape)}, got {show_value(view)}")
    return view


@dataclass(frozen=True)
class Augment:
    """Random views of flattened images ``(n, h·w)``: a shift of up to ``max_shift`` pixels in
    each direction (zero fill), each pixel masked (set to 0) with probability ``mask``, then
    Gaussian noise of std ``noise``."""

    image_shape: tuple[int, int] = (8, 8)
    max_shift: int = 1
    mask: float = 0.2
    noise: float = 0.1

    def __post_init__(self) -> None:
        check_params("Augment", {"max_shift": self.max_shift, "mask": self.mask,
                                 "noise": self.noise},
                     {"max_shift": [Integer(0)], "mask": [Real(0, 1, closed="left")],
                      "noise": [Real(0)]})

    def __call__(self, x: torch.Tensor, *, generator: torch.Generator) -> torch.Tensor:
        h, w = self.image_shape
        if x.ndim != 2 or x.shape[1] != h * w:
            raise ValueError(f"Augment: x must have shape (n, {h * w}) for images of "
                             f"{h}x{w}, got {tuple(x.shape)}")
        n, s = len(x), self.max_shift
        img = F.pad(x.reshape(n, h, w), (s, s, s, s))
        dy = torch.randint(0, 2 * s + 1, (n, 1), generator=generator).to(x.device)
        dx = torch.randint(0, 2 * s + 1, (n, 1), generator=generator).to(x.device)
        rows = (dy + torch.arange(h, device=x.device))[:, :, None].expand(n, h, w + 2 * s)
        img = img.gather(1, rows)
        cols = (dx + torch.arange(w, device=x.device))[:, None, :].expand(n, h, w)
        out = img.gather(2, cols).reshape(n, h * w)
        keep = torch.rand(n, h * w, generator=generator) >= self.mask
        noise = torch.randn(n, h * w, generator=generator, dtype=x.dtype)
        return out * keep.to(x) + self.noise * noise.to(x.device)


def _mlp(sizes: list[int], *, last_bn: bool, last_relu: bool, kw: dict) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(itertools.pairwise(sizes)):
        last = i == len(sizes) - 2
        layers.append(nn.Linear(a, b, bias=last and not last_bn, **kw))
        if not last or last_bn:
            layers.append(nn.BatchNorm1d(b, **kw))
        if not last or last_relu:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class SimSiam(nn.Module):
    """Encoder ``f``, projector ``g`` and predictor ``h`` (sizes in the module docstring).

    ``device``: where the parameters are created, the CPU by default as for any ``nn.Module``
    (move the model with ``.to``); the training loop moves the data to the parameters.
    """

    @sized_by("n_features", "hidden", "dim", "pred_hidden", where="SimSiam")
    def __init__(self, n_features: int, *, hidden: int = 128, dim: int = 64,
                 pred_hidden: int = 16, device: torch.device | str | None = None,
                 dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        check_params("SimSiam", locals(), {name: [Integer(1)] for name in (
            "n_features", "hidden", "dim", "pred_hidden")})
        kw = {"device": resolve_device("cpu" if device is None else device, where="SimSiam"),
              "dtype": check_dtype("SimSiam", dtype)}
        self.encoder = _mlp([n_features, hidden, hidden], last_bn=True, last_relu=True, kw=kw)
        self.projector = _mlp([hidden, dim, dim], last_bn=True, last_relu=False, kw=kw)
        self.predictor = _mlp([dim, pred_hidden, dim], last_bn=False, last_relu=False, kw=kw)

    def forward(self, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
        """The SimSiam loss of two views ``(n, n_features)`` of the same batch."""
        z1, z2 = self.projector(self.encoder(x1)), self.projector(self.encoder(x2))
        return simsiam_loss(self.predictor(z1), self.predictor(z2), z1, z2)

    def embed(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(f(x), g(f(x)))`` in eval mode without a graph (the mode is restored)."""
        was_training = self.training
        try:
            self.train(False)  # eval mode
            with torch.no_grad():  # evaluation only
                features = self.encoder(x)
                return features, self.projector(features)
        finally:
            self.train(was_training)


_TRAIN_ARGS = {"epochs": [Integer(0)], "batch_size": [Integer(2)],
               "lr": [Real(0, closed="neither")], "momentum": [Real(0, 1, closed="left")],
               "weight_decay": [Real(0)], "augment": [None, Callable_],
               "generator": [Generator], "callback": [None, Callable_]}


def train_simsiam(model: SimSiam, X: torch.Tensor, *, epochs: int, batch_size: int = 128,
                  lr: float = 0.1, momentum: float = 0.9, weight_decay: float = 1e-4,
                  augment: Callable[..., torch.Tensor] | None = None,
                  generator: torch.Generator,
                  callback: Callable[[int, dict[str, float]], None] | None = None
                  ) -> History:
    """SGD with momentum and weight decay on the SimSiam loss of two views per batch.

    The paper's recipe is ``lr = 0.05 · batch_size / 256`` with momentum 0.9 and weight decay
    1e-4 (cosine-decayed); the default here is a constant ``lr = 0.1`` (the digits experiment
    takes 0.4: without the block the collapse proceeds with ``lr × steps``). Batches are drawn by
    ``generator`` each epoch (a last batch smaller than ``batch_size`` is dropped: BatchNorm
    needs several rows); ``augment(x, generator=...)`` makes each view (default
    :class:`Augment`). ``callback(epoch, {"loss": mean loss})`` runs after each epoch.
    Returns those rows (a list; a :class:`~toolkit.algorithms.divergence.History`). The model is left in
    its previous train/eval mode.

    At every update the loss and the gradients are checked before the SGD step and the
    parameters after it; on the first value that is not finite training stops there (nothing
    non-finite is applied; a step that overflows a parameter is the last one), the rows'
    ``divergence`` says where (epochs counted from 1, as for ``callback``) and a
    :class:`~toolkit.algorithms.divergence.DivergenceWarning` is issued once; the rows hold the epochs
    completed before it. Parameters that are not finite before training are an error.
    """
    where = "train_simsiam"
    check_params(where, locals(), _TRAIN_ARGS)
    if not isinstance(model, SimSiam):
        raise TypeError(f"{where}: model must be a SimSiam, got {type(model).__name__}")
    X = as_tensor(X, where=where, arg="X", ndim=2, finite=True, min_rows=batch_size)
    n_features = model.encoder[0].in_features
    if X.shape[1] != n_features:
        raise ValueError(f"{where}: X must have shape (n, {n_features}) for the model, got "
                         f"{tuple(X.shape)}")
    param = next(model.parameters())
    check_step_fits(where, param.dtype, lr=lr, weight_decay=weight_decay)
    finite = UpdateCheck.for_module(where, model)
    finite.check_start()
    X = X.to(param.device, param.dtype)
    if augment is None:
        augment = Augment()
        h, w = augment.image_shape
        if n_features != h * w:
            raise ValueError(f"{where}: augment=None augments {h}x{w} images ({h * w} features), "
                             f"but X has {n_features}; pass augment=Augment(image_shape=(h, w)) "
                             f"with h * w = {n_features}, or an augment(x, generator=...) of "
                             f"your own")
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum,
                          weight_decay=weight_decay)
    history = History()
    was_training = model.training
    try:
        model.train()
        for epoch in range(1, epochs + 1):
            batches = torch.randperm(len(X), generator=generator).split(batch_size)
            batches = [b for b in batches if len(b) == batch_size]
            total = 0.0
            for idx in batches:
                x = X[idx.to(X.device)]
                loss = model(*(_view(where, augment, x, generator) for _ in range(2)))
                opt.zero_grad(set_to_none=True)
                loss.backward()
                # the loss and the gradients before the step, the parameters after
                if finite.step(opt, ("loss", loss), epoch=epoch):
                    history.divergence = finite.divergence
                    return history
                total += loss.item() / len(batches)
            history.append({"loss": total})
            if callback is not None:
                callback(epoch, history[-1])
    finally:
        model.train(was_training)
    return history
