"""Property: every public entry point answers whatever it is given (issue 55).

Each entry point is called with one argument replaced by a value drawn from the kinds of input
users pass, by design or by mistake: numpy arrays of every dtype (text, objects, datetimes,
complex, float16), tensors of every dtype, on the ``meta`` device, sparse, non-contiguous or
requiring grad, scipy.sparse matrices, pandas frames, ragged and nested lists, scalars, ``None``,
strings, dicts, sets and plain objects; shapes from empty to 3-D; values from 0 and 1 to NaN,
infinity and 1e300. Every call either returns (and then, where a peer computes the same thing,
gives the peer's result) or raises ``ValueError``, ``TypeError`` or ``MemoryError`` whose one
line starts with the function's name and names the argument: never a raw torch or NumPy error.

The default run tries a few examples per entry point (a few seconds in all); the test marked
``slow`` (``-m slow``) runs the long profile, as ``TOOLKIT_FUZZ=long`` does by hand:
``TOOLKIT_FUZZ=long python -m pytest -n 0 tests/test_fuzz_entry_points.py``.
"""

from __future__ import annotations

import copy
import functools
import inspect
import math
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.mixture import GaussianMixture as SkGaussianMixture
from sklearn.neural_network import BernoulliRBM as SkBernoulliRBM
from torch import nn

import toolkit
from toolkit.algorithms import adversarial, dice, divergence, em, rbm, simsiam, softmax, td, vq_vae

settings.register_profile("entry-points-default", max_examples=4, deadline=None, database=None,
                          suppress_health_check=list(HealthCheck))
settings.register_profile("entry-points-long", max_examples=120, deadline=None, database=None,
                          suppress_health_check=list(HealthCheck))
PROFILE = f"entry-points-{os.environ.get('TOOLKIT_FUZZ', 'default')}"
LONG = "entry-points-long"

# ---------------------------------------------------------------------------------------------
# what users pass

#: values that reach the numerics: ordinary ones, the ends of [0, 1], NaN, infinity, overflow
FLOATS = st.sampled_from([0.0, 1.0, 0.5, 0.25, -1.0, 2.0, 16.0, 1e-320, 1e300, -1e300,
                          math.nan, math.inf, -math.inf])
NP_DTYPES = ["float64", "float32", "float16", "int64", "int32", "uint8", "bool", "complex128",
             "object", "str", "datetime64[s]"]
TORCH_DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64,
                torch.int32, torch.uint8, torch.bool, torch.complex64]


@st.composite
def shapes(draw: st.DrawFn, like: tuple[int, ...]) -> tuple[int, ...]:
    """``like`` (the valid shape) most of the time, else 0-D to 3-D shapes with 0 to 4 entries
    per dimension."""
    if draw(st.booleans()):
        return like
    return tuple(draw(st.lists(st.integers(0, 4), min_size=0, max_size=3)))


@st.composite
def numbers(draw: st.DrawFn, shape: tuple[int, ...]) -> np.ndarray:
    """float64 values of ``shape``, mostly in [0, 1], sometimes anything of FLOATS."""
    n = int(np.prod(shape)) if shape else 1
    if draw(st.booleans()):
        values = draw(st.lists(st.sampled_from([0.0, 1.0, 0.25, 0.5, 0.75]), min_size=n,
                               max_size=n))
    else:
        values = draw(st.lists(FLOATS, min_size=n, max_size=n))
    return np.asarray(values, dtype=np.float64).reshape(shape)


def _numpy(values: np.ndarray, dtype: str) -> np.ndarray:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        if dtype == "object":
            return values.astype(object)
        if dtype == "str":
            return values.astype(str)
        if dtype.startswith("datetime"):
            return np.zeros(values.shape, dtype=dtype)
        return values.astype(dtype)


def _tensor(values: np.ndarray, dtype: torch.dtype, draw: st.DrawFn) -> torch.Tensor:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if dtype.is_floating_point or dtype.is_complex:
            t = torch.as_tensor(values).to(dtype)
        else:
            finite = np.nan_to_num(values, nan=0.0, posinf=2.0, neginf=-1.0).clip(-1, 2)
            t = torch.as_tensor(finite).to(dtype)
    form = draw(st.sampled_from(["plain", "plain", "meta", "sparse_coo", "sparse_csr",
                                 "requires_grad", "transposed"]))
    if form == "meta":
        return torch.empty(t.shape, dtype=t.dtype, device="meta")
    if form == "sparse_coo" and t.ndim >= 1:
        return t.to_sparse()
    if form == "sparse_csr" and t.ndim == 2:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return t.to_sparse_csr()
    if form == "requires_grad" and (t.is_floating_point() or t.is_complex()):
        return t.clone().requires_grad_(True)
    if form == "transposed" and t.ndim == 2:
        return t.T.contiguous().T
    return t


@st.composite
def inputs(draw: st.DrawFn, like: tuple[int, ...] = (4, 3)) -> Any:
    """One value a user might pass where an array of shape ``like`` is expected."""
    kind = draw(st.sampled_from(["numpy", "numpy", "tensor", "tensor", "scipy", "list",
                                 "ragged", "frame", "scalar", "odd"]))
    shape = draw(shapes(like))
    values = draw(numbers(shape))
    if kind == "numpy":
        return _numpy(values, draw(st.sampled_from(NP_DTYPES)))
    if kind == "tensor":
        return _tensor(values, draw(st.sampled_from(TORCH_DTYPES)), draw)
    if kind == "scipy" and values.ndim == 2:
        return draw(st.sampled_from([sp.csr_matrix, sp.coo_matrix, sp.csc_array]))(values)
    if kind == "list":
        return values.tolist()
    if kind == "ragged" and values.ndim == 2 and values.shape[0] > 1:
        rows = values.tolist()
        return [rows[0][:-1] if rows[0] else [1.0], *rows[1:]]
    if kind == "frame" and values.ndim == 2:
        return pd.DataFrame(values)
    if kind == "scalar":
        # small counts, and counts no memory holds (none in between: a count that fits but
        # takes minutes is the user's choice, not a mistake to answer)
        return draw(st.one_of(FLOATS, st.integers(-3, 10), st.sampled_from([2**62, 10**20]),
                              st.booleans(), st.sampled_from([np.float32(0.5), np.int64(3)])))
    return draw(st.sampled_from([None, "X", b"bytes", {"a": 1}, {1, 2}, (), [], object(),
                                 (i for i in range(3)), [[None, None]], [["0.5", "1"]]]))


# ---------------------------------------------------------------------------------------------
# the entry points, each with valid arguments around the one that is drawn


@dataclass(frozen=True)
class Case:
    """``call(value)`` runs ``where`` with ``value`` as its argument ``arg``; ``peer(value,
    result)`` checks a result against a peer library, where one computes the same thing."""

    where: str
    arg: str
    call: Callable[[Any], Any]
    like: tuple[int, ...] = (4, 3)
    peer: Callable[[Any, Any], None] | None = None
    #: other entry points whose message may answer (a wrapper's callee: fit_predict → fit)
    callees: tuple[str, ...] = ()
    #: other words that name the argument in an answer (a callee's name for it)
    aliases: tuple[str, ...] = ()
    #: where the entry point lives, when two modules export the same name
    module: Any = None

    @property
    def id(self) -> str:
        return f"{self.where}[{self.arg}]"


def _inside(context: Any) -> None:
    """Enter and leave a context manager (nothing it switches may outlive the case)."""
    with context:
        pass


def _gen() -> torch.Generator:
    return torch.Generator().manual_seed(0)


def _data(n: int = 8, d: int = 3) -> np.ndarray:
    return np.random.RandomState(0).rand(n, d)


def _rbm_params() -> rbm.RBMParams:
    return rbm.init_params(3, 2, generator=_gen(), dtype=torch.float64)


def _fresh(fit: Callable[[], Any]) -> Callable[[], Any]:
    """``fit()`` made once (its seeded fit is the same every time): each call gets a copy of
    that fitted object, as it would get a new fit, without paying for the fit per example."""
    fitted = functools.cache(fit)
    return functools.wraps(fit)(lambda: copy.deepcopy(fitted()))


@_fresh
def _fitted_gmm() -> em.GaussianMixture:
    return em.GaussianMixture(2, random_state=0).fit(_data())


@_fresh
def _fitted_rbm() -> rbm.BernoulliRBM:
    return rbm.BernoulliRBM(2, n_iter=1, random_state=0).fit(_data())


@_fresh
def _fitted_sk_gmm() -> SkGaussianMixture:
    return SkGaussianMixture(2).fit(_data())


@_fresh
def _fitted_sk_rbm() -> SkBernoulliRBM:
    return SkBernoulliRBM(2).fit(_data(2))


def _gmm_params() -> em.GMMParams:
    g = _fitted_gmm()
    return em.GMMParams(*(torch.as_tensor(a) for a in (g.weights_, g.means_, g.covariances_,
                                                       g.precisions_cholesky_)))


def _sk_gmm(ours: em.GaussianMixture) -> SkGaussianMixture:
    ref = _fitted_sk_gmm()
    for name in ("weights_", "means_", "covariances_", "precisions_cholesky_", "precisions_"):
        setattr(ref, name, np.asarray(getattr(ours, name)))
    return ref


def _same_as_peer(method: str, model: Callable[[], Any], peer: Callable[[Any], Any]
                  ) -> Callable[[Any, Any], None]:
    """The peer's ``method`` on the same (dense, numeric, finite) value gives the same result."""
    def check(value: Any, result: Any) -> None:
        if isinstance(value, torch.Tensor):  # numpy has no bfloat16: compare in float64
            value = value.detach().cpu().to(torch.float64).numpy()
        if sp.issparse(value):
            value = value.toarray()
        try:
            dense = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            return
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            expected = getattr(peer(model()), method)(dense)
        got = result.detach().cpu().numpy() if isinstance(result, torch.Tensor) else result
        np.testing.assert_allclose(np.asarray(got, dtype=np.float64), expected, rtol=1e-5,
                                   atol=1e-6, equal_nan=True)
    return check


def _sk_rbm(ours: rbm.BernoulliRBM) -> SkBernoulliRBM:
    ref = _fitted_sk_rbm()
    ref.components_, ref.intercept_visible_, ref.intercept_hidden_ = (
        ours.components_, ours.intercept_visible_, ours.intercept_hidden_)
    return ref


def _torch_softmax(fn: Callable[..., torch.Tensor]) -> Callable[[Any, Any], None]:
    def check(value: Any, result: Any) -> None:
        if not isinstance(value, torch.Tensor) or not value.is_floating_point() \
                or value.device.type == "meta" or value.ndim == 0:
            return
        x = value.detach()
        expected = fn(x, -1)
        got = result.detach()
        if fn is not torch.logsumexp:  # documented: an all -inf row is an empty row (torch: nan)
            keep = ~(x == -math.inf).all(-1, keepdim=True).expand_as(x)
            got, expected = got[keep], expected[keep]
        # a few units in the last place of the dtype (float16 and bfloat16 keep 3 and 2 digits)
        tol = 4 * torch.finfo(x.dtype).eps
        torch.testing.assert_close(got, expected, equal_nan=True, rtol=tol, atol=tol)
    return check


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 2))


def _labels() -> torch.Tensor:
    return torch.tensor([0, 1, 0, 1])


def _x() -> torch.Tensor:
    return torch.rand(4, 3, generator=_gen())


def _w() -> torch.Tensor:
    return torch.ones(3, requires_grad=True)


def _loss(w: torch.Tensor) -> torch.Tensor:
    return (w * toolkit.stop_gradient(w, name="fuzz.w")).sum()


def _step_fixture() -> tuple[Callable[[], Any], torch.optim.Optimizer]:
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step() -> torch.Tensor:
        opt.zero_grad()
        loss = model(_x()).sum()
        loss.backward()
        opt.step()
        return loss
    return step, opt


def _simsiam() -> simsiam.SimSiam:
    torch.manual_seed(0)
    return simsiam.SimSiam(3, hidden=4, dim=4, pred_hidden=2)


def _vqvae() -> vq_vae.VQVAE:
    torch.manual_seed(0)
    return vq_vae.VQVAE(3, n_latents=2, latent_dim=2, n_codes=4, hidden=4)


def _codebook() -> torch.Tensor:
    return torch.rand(4, 3, generator=_gen())


CASES: list[Case] = [
    # the primitive
    Case("stop_gradient", "x", lambda v: toolkit.stop_gradient(v, name="fuzz.x")),
    Case("stop_gradient", "name", lambda v: toolkit.stop_gradient(_x(), name=v)),
    Case("disable_blocks", "patterns", lambda v: _inside(toolkit.disable_blocks(v))),
    Case("is_block_disabled", "name", lambda v: toolkit.is_block_disabled(v)),
    Case("require_block", "name", lambda v: toolkit.require_block(v, where="f", why="w")),
    Case("as_constant", "fn", lambda v: toolkit.as_constant(v, name="fuzz.c")),
    Case("observe_cuts", "on_cut", lambda v: _inside(toolkit.observe_cuts(on_cut=v))),
    # the lens
    Case("compare_gradients", "loss_fn", lambda v: toolkit.compare_gradients(v, _w())),
    Case("compare_gradients", "params", lambda v: toolkit.compare_gradients(lambda: _x().sum(),
                                                                             v)),
    Case("has_gradient_path", "output", lambda v: toolkit.has_gradient_path(v, _w())),
    Case("has_gradient_path", "tensor", lambda v: toolkit.has_gradient_path(_loss(_w()), v)),
    Case("count_graph_nodes", "output", lambda v: toolkit.count_graph_nodes(v)),
    Case("gradient_path", "loss", lambda v: toolkit.gradient_path(v, _w())),
    Case("gradient_path", "tensor", lambda v: toolkit.gradient_path(_loss(_w()), v)),
    Case("assert_blocked", "output", lambda v: toolkit.assert_blocked(v, _w()),
         callees=("has_gradient_path",)),
    Case("assert_no_gradient", "loss", lambda v: toolkit.assert_no_gradient(v, _w())),
    Case("assert_no_gradient", "params", lambda v: toolkit.assert_no_gradient(_x().sum(), v)),
    Case("gradient_flow", "groups", lambda v: toolkit.gradient_flow(lambda: _loss(_w()), v)),
    Case("gradient_graph", "loss", lambda v: toolkit.gradient_graph(v)),
    Case("draw_gradient_graph", "loss", lambda v: toolkit.draw_gradient_graph(v)),
    Case("audit_step", "step", lambda v: toolkit.audit_step(v, _step_fixture()[1])),
    Case("audit_step", "optimizers", lambda v: toolkit.audit_step(_step_fixture()[0], v)),
    Case("assert_clean_step", "step", lambda v: toolkit.assert_clean_step(v,
                                                                           _step_fixture()[1]),
         callees=("audit_step",)),
    Case("explain_unused_parameters", "model",
         lambda v: toolkit.explain_unused_parameters(v, lambda: None)),
    # softmax
    *[Case(fn.__name__, "x", lambda v, fn=fn: fn(v), peer=_torch_softmax(ref))
      for fn, ref in ((softmax.stable_softmax, torch.softmax),
                      (softmax.log_softmax, torch.log_softmax),
                      (softmax.logsumexp, torch.logsumexp))],
    # the naive softmax overflows where torch's does not: that difference is what it shows
    Case("naive_softmax", "x", lambda v: softmax.naive_softmax(v)),
    Case("stable_softmax", "where", lambda v: softmax.stable_softmax(_x(), where=v)),
    Case("logsumexp", "b", lambda v: softmax.logsumexp(_x(), b=v)),
    # EM, functional
    Case("e_step", "X", lambda v: em.e_step(v, *_gmm_params()[:2], _gmm_params()[3], "full")),
    Case("log_likelihood", "X", lambda v: em.log_likelihood(v, *_gmm_params()[:2],
                                                            _gmm_params()[3], "full"),
         module=em),
    Case("expected_complete_loglik", "X",
         lambda v: em.expected_complete_loglik(v, *_gmm_params()[:2], _gmm_params()[3],
                                               covariance_type="full")),
    Case("m_step", "X", lambda v: em.m_step(v, torch.full((4, 2), math.log(0.5),
                                                          dtype=torch.float64))),
    Case("m_step", "log_resp", lambda v: em.m_step(torch.as_tensor(_data(4)), v), like=(4, 2)),
    Case("gradient_m_step", "X", lambda v: em.gradient_m_step(v, None, _gmm_params(),
                                                              n_steps=1)),
    Case("precisions_cholesky_from_covariances", "covariances",
         lambda v: em.precisions_cholesky_from_covariances(v, "full"), like=(2, 3, 3)),
    Case("to_unconstrained", "params", lambda v: em.to_unconstrained(v)),
    Case("from_unconstrained", "theta", lambda v: em.from_unconstrained(v)),
    # EM, the estimator
    Case("GaussianMixture.fit", "X", lambda v: em.GaussianMixture(2, random_state=0).fit(v)),
    Case("GaussianMixture.fit", "sample_weight",
         lambda v: em.GaussianMixture(2, random_state=0).fit(_data(4), sample_weight=v),
         like=(4,)),
    Case("GaussianMixture.fit_predict", "X",
         lambda v: em.GaussianMixture(2, random_state=0).fit_predict(v),
         callees=("GaussianMixture.fit",)),
    *[Case(f"GaussianMixture.{m}", "X", lambda v, m=m: getattr(_fitted_gmm(), m)(v),
           peer=_same_as_peer(m, _fitted_gmm, _sk_gmm) if m in ("score_samples",
                                                                 "predict_proba") else None)
      for m in ("score_samples", "score", "predict", "predict_proba", "bic", "aic")],
    Case("GaussianMixture.sample", "n_samples", lambda v: _fitted_gmm().sample(v), like=()),
    # RBM, functional
    *[Case(fn.__name__, "v", lambda v, fn=fn: fn(_rbm_params(), v))
      for fn in (rbm.free_energy, rbm.pseudo_log_likelihood, rbm.sample_hidden)],
    Case("exact_log_likelihood_gradient", "v_data",
         lambda v: rbm.exact_log_likelihood_gradient(_rbm_params(), v)),
    Case("sample_visible", "h", lambda v: rbm.sample_visible(_rbm_params(), v), like=(4, 2)),
    Case("log_likelihood", "v", lambda v: rbm.log_likelihood(_rbm_params(), v), module=rbm),
    Case("gibbs_chain", "v", lambda v: rbm.gibbs_chain(_rbm_params(), v, 1, generator=_gen())),
    Case("negative_samples", "start",
         lambda v: rbm.negative_samples(_rbm_params(), v, 1, generator=_gen())),
    Case("cd_loss", "v_data", lambda v: rbm.cd_loss(_rbm_params(), v,
                                                     torch.rand(4, 3, dtype=torch.float64))),
    Case("cd_gradient", "v_model", lambda v: rbm.cd_gradient(_rbm_params(), torch.rand(4, 3,
                                                             dtype=torch.float64), v)),
    Case("exact_log_partition", "params", lambda v: rbm.exact_log_partition(v)),
    Case("ais_log_partition", "base_visible_bias",
         lambda v: rbm.ais_log_partition(_rbm_params(), base_visible_bias=v, n_runs=2,
                                         betas=3, generator=_gen()), like=(3,)),
    Case("init_params", "n_visible", lambda v: rbm.init_params(v, 2, generator=_gen()),
         like=()),
    Case("train_cd", "X", lambda v: rbm.train_cd(_rbm_params(), v, epochs=1, generator=_gen())),
    # RBM, the estimator
    Case("BernoulliRBM.fit", "X", lambda v: rbm.BernoulliRBM(2, n_iter=1,
                                                             random_state=0).fit(v)),
    Case("BernoulliRBM.partial_fit", "X",
         lambda v: rbm.BernoulliRBM(2, random_state=0).partial_fit(v)),
    Case("BernoulliRBM.fit_transform", "X",
         lambda v: rbm.BernoulliRBM(2, n_iter=1, random_state=0).fit_transform(v),
         callees=("BernoulliRBM.fit",)),
    Case("BernoulliRBM.transform", "X", lambda v: _fitted_rbm().transform(v),
         peer=_same_as_peer("transform", _fitted_rbm, _sk_rbm)),
    *[Case(f"BernoulliRBM.{m}", "X", lambda v, m=m: getattr(_fitted_rbm(), m)(v))
      for m in ("score_samples", "log_likelihood")],
    # scikit-learn's gibbs(v) calls its data X in messages, as its other methods do
    Case("BernoulliRBM.gibbs", "v", lambda v: _fitted_rbm().gibbs(v), aliases=("X",)),
    Case("BernoulliRBM.sample", "n_samples", lambda v: _fitted_rbm().sample(v, n_steps=1),
         like=()),
    # adversarial examples
    Case("pgd", "x", lambda v: adversarial.pgd(_model(), v, _labels(), steps=1, generator=_gen())),
    Case("pgd", "y", lambda v: adversarial.pgd(_model(), _x(), v, steps=1, generator=_gen()),
         like=(4,)),
    Case("fgsm", "x", lambda v: adversarial.fgsm(_model(), v, _labels())),
    Case("predict", "x", lambda v: adversarial.predict(_model(), v)),
    # data: a DataLoader, batches, a Dataset or an (X, y) pair, whose parts messages call x, y
    Case("evaluate_robustness", "data",
         lambda v: adversarial.evaluate_robustness(_model(), v, {"fgsm": adversarial.fgsm}),
         aliases=("x", "y", "X")),
    Case("adversarial_training", "data",
         lambda v: adversarial.adversarial_training(
             (m := _model()), v, torch.optim.SGD(m.parameters(), lr=0.1), epochs=1,
             steps=1, generator=_gen()), aliases=("x", "y", "X")),
    Case("eval_mode", "model", lambda v: _inside(adversarial.eval_mode(v))),
    # TD learning
    Case("td_errors", "values", lambda v: td.td_errors(v, torch.ones(4), torch.ones(4), 0.9),
         like=(4,)),
    Case("td_loss", "rewards", lambda v: td.td_loss(torch.ones(4), v, torch.ones(4), 0.9),
         like=(4,), callees=("td_errors",)),
    Case("gradient_descent", "w0",
         lambda v: td.gradient_descent(lambda w: (w ** 2).sum(), v, lr=0.1, n_steps=2),
         like=(3,)),
    Case("random_chain", "n_states", lambda v: td.random_chain(v, 2, 0.9, generator=_gen()),
         like=()),
    Case("baird_counterexample", "gamma", lambda v: td.baird_counterexample(v), like=()),
    Case("a_split", "dtype", lambda v: td.a_split(dtype=v), like=()),
    # SimSiam
    Case("negative_cosine", "p", lambda v: simsiam.negative_cosine(v, _x())),
    Case("output_std", "z", lambda v: simsiam.output_std(v)),
    Case("simsiam_loss", "p1", lambda v: simsiam.simsiam_loss(v, _x(), _x(), _x()),
         callees=("negative_cosine",), aliases=("p",)),
    Case("knn_accuracy", "train_X",
         lambda v: simsiam.knn_accuracy(v, _labels(), _x(), _labels(), k=1)),
    Case("train_simsiam", "X",
         lambda v: simsiam.train_simsiam(_simsiam(), v, epochs=1, batch_size=2,
                                         augment=simsiam.Augment(image_shape=(1, 3)),
                                         generator=_gen())),
    Case("SimSiam", "n_features", lambda v: simsiam.SimSiam(v), like=()),
    # VQ-VAE
    Case("nearest_codes", "z_e", lambda v: vq_vae.nearest_codes(v, _codebook())),
    Case("quantize", "codebook", lambda v: vq_vae.quantize(_x(), v)),
    Case("vq_losses", "z_e", lambda v: vq_vae.vq_losses(v, _x())),
    Case("perplexity", "indices", lambda v: vq_vae.perplexity(v, 4), like=(4,)),
    Case("encoder_recon_grad_norm", "x", lambda v: vq_vae.encoder_recon_grad_norm(_vqvae(), v)),
    Case("train_vq_vae", "X", lambda v: vq_vae.train_vq_vae(_vqvae(), v, epochs=1, batch_size=2,
                                                            generator=_gen())),
    Case("VQVAE", "n_features", lambda v: vq_vae.VQVAE(v), like=()),
    # DiCE
    Case("magic_box", "tau", lambda v: dice.magic_box(v), like=(4,)),
    Case("dice_objective", "log_probs", lambda v: dice.dice_objective(v, torch.ones(4, 3))),
    Case("surrogate_objective", "costs",
         lambda v: dice.surrogate_objective(torch.zeros(4, 3), v)),
    Case("derivatives", "theta", lambda v: dice.derivatives(lambda t: t.sum(), v), like=(3,)),
    Case("two_step_problem", "n_actions", lambda v: dice.two_step_problem(v, generator=_gen()),
         like=()),
    # divergence records
    Case("check_finite", "tensors", lambda v: divergence.check_finite({"w": v})),
]

#: Public names that take no input of their own to fuzz, with the reason.
NOT_FUZZED = {
    "BlockNotSwitchableError": "an exception class",
    "GradientLeakError": "an exception class",
    "CatastrophicOverfittingWarning": "a warning class",
    "DataRangeWarning": "a warning class",
    "DivergenceWarning": "a warning class",
    "seen_blocks": "takes no arguments",
    "reset_seen_blocks": "takes no arguments",
    "record_blocks": "takes no arguments",
    "trace_cuts": "takes no arguments",
    "warn_divergence": "issues the warning of a Divergence record made by the training loops",
    "check_step_fits": "the training loops' own check of their already validated arguments",
    **dict.fromkeys(
        ("CarriedGraph", "ConstantTerm", "CutKeys", "CutTrace", "DeadParameter", "FrozenTensor", "GradientComparison",
         "GradientFlow", "GradientGraph", "HeldGraph", "Leak", "ParameterComparison", "SharedTensor",
         "StepAudit", "TrainedTarget", "UnrolledLoop", "UnusedParameter", "UnusedParameters",
         "GMMParams",
         "AISResult", "CDStep", "RBMParams", "TrainState", "TrainingHistory", "Divergence",
         "History", "VQOutput", "TwoStepProblem", "TransitionTable", "MarkovRewardProcess",
         "UpdateCheck", "Augment"),
        "a record of results or parameters built by the toolkit, not an entry point for data"),
}

MODULES = (toolkit, softmax, em, rbm, adversarial, td, simsiam, vq_vae, dice, divergence)


def test_every_public_entry_point_is_fuzzed_or_says_why_not() -> None:
    fuzzed = {case.where.split(".")[0] for case in CASES}
    missing = []
    for module in MODULES:
        for name in module.__all__:
            obj = getattr(module, name)
            if callable(obj) and name not in fuzzed and name not in NOT_FUZZED:
                missing.append(f"{module.__name__}.{name}")
    assert missing == [], f"entry points neither fuzzed nor listed in NOT_FUZZED: {missing}"
    stale = sorted(set(NOT_FUZZED) & fuzzed)
    assert stale == [], f"fuzzed, yet listed in NOT_FUZZED: {stale}"


# ---------------------------------------------------------------------------------------------
# the property

ANSWERS = (ValueError, TypeError, MemoryError)


def _answers(case: Case, value: Any) -> None:
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            result = case.call(value)
    except ANSWERS as err:
        message = str(err)
        head = case.where.split(".")[0]
        names = (case.where, head, *case.callees)
        assert message.startswith(tuple(f"{name}:" for name in names)), (
            f"{case.id} answered {type(err).__name__} without naming itself first: {message!r}")
        assert any(word in message for word in (case.arg, *case.aliases)), (
            f"{case.id} answered {type(err).__name__} without naming {case.arg}: {message!r}")
        assert "\n" not in message.strip(), f"{case.id}: not one line: {message!r}"
    except Exception as err:  # the property: nothing else comes out
        raise AssertionError(f"{case.id} raised {type(err).__module__}.{type(err).__name__}: "
                             f"{str(err)[:300]!r} for {_show(value)}") from err
    else:
        if case.peer is not None:
            case.peer(value, result)


def _show(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {value.layout} {value.dtype} tensor on {value.device} of shape {tuple(value.shape)}"
    if isinstance(value, np.ndarray):
        return f"a {value.dtype} array of shape {value.shape}"
    return f"{type(value).__name__} {value!r:.80}"


def _property(case: Case) -> Callable[[], None]:
    @given(value=inputs(case.like))
    def run(value: Any) -> None:
        _answers(case, value)
    return run


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_entry_point_answers_every_input(case: Case) -> None:
    settings(settings.get_profile(PROFILE))(_property(case))()


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_entry_point_answers_every_input_long(case: Case) -> None:
    settings(settings.get_profile(LONG))(_property(case))()


def test_the_signature_of_each_case_names_its_argument() -> None:
    # the drawn argument is a real parameter of the entry point (a renamed argument fails here)
    for case in CASES:
        head, _, method = case.where.partition(".")
        obj = None
        for module in (case.module,) if case.module is not None else MODULES:
            if head in getattr(module, "__all__", ()):
                obj = getattr(module, head)
                break
        assert obj is not None, case.where
        fn = getattr(obj, method) if method else obj
        names = set(inspect.signature(fn).parameters)
        assert case.arg in names or case.arg == "patterns", (case.id, sorted(names))
