"""Every argument of every public entry point answers a value of the wrong kind (issue 65).

``tests/test_fuzz_entry_points.py`` draws many values for one data argument per entry point;
this sweep gives EVERY argument, in turn, the mistakes a user makes with any argument: ``None``,
a string, a plain ``object()`` and a function (that returns ``None``), the other arguments valid.
The answer is what scikit-learn and torch give: a ``TypeError`` or ``ValueError`` whose one
line starts with the function's name (or a callee's the function hands the argument to) and
names the argument, never a raw error from deep inside (``'int' object is not callable``) and
never a silent result. A value may be returned only where it is of an accepted kind: ``None``
where ``None`` is the default, a string where the annotation says ``str``, a function where it
says ``Callable``.
"""

from __future__ import annotations

import inspect
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch
from test_fuzz_entry_points import (
    MODULES,
    NOT_FUZZED,
    _codebook,
    _data,
    _fitted_gmm,
    _fitted_rbm,
    _gen,
    _gmm_params,
    _inside,
    _labels,
    _loss,
    _model,
    _rbm_params,
    _simsiam,
    _step_fixture,
    _vqvae,
    _w,
    _x,
)

import toolkit
from toolkit.algorithms import adversarial, dice, divergence, em, rbm, simsiam, softmax, td, vq_vae


@dataclass(frozen=True)
class Call:
    """``fn(**valid())`` returns; ``where``: the name messages start with (also ``callees``)."""

    where: str
    fn: Callable[..., Any]
    valid: Callable[[], dict[str, Any]]
    callees: tuple[str, ...] = ()
    #: the signature to read annotations and defaults from, when ``fn`` wraps it
    signature_of: Callable[..., Any] | None = None


def _f64(*shape: int) -> torch.Tensor:
    return torch.rand(*shape, dtype=torch.float64, generator=_gen())


def _gmm_call() -> dict[str, Any]:
    w, m, _, p = _gmm_params()
    return {"X": torch.as_tensor(_data()), "weights": w, "means": m, "precisions_cholesky": p,
            "covariance_type": "full"}


def _flow() -> dict[str, Any]:
    w = _w()
    return {"loss_fn": lambda: _loss(w), "groups": {"w": w}}


def _path() -> dict[str, Any]:
    w = _w()
    return {"loss": _loss(w), "tensor": w}


def _unused() -> dict[str, Any]:
    model = _model()
    return {"model": model, "step": lambda: model(_x()).sum()}


def _training() -> dict[str, Any]:
    model = _model()
    return {"model": model, "data": (_x(), _labels()),
            "optimizer": torch.optim.SGD(model.parameters(), lr=0.1), "epochs": 1, "steps": 1,
            "generator": _gen()}


def _enter_eval_mode(**kwargs: Any) -> None:
    _inside(adversarial.eval_mode(**kwargs))


def _enter_observe_cuts(**kwargs: Any) -> None:
    _inside(toolkit.observe_cuts(**kwargs))


def _fit_gmm(**kwargs: Any) -> em.GaussianMixture:
    """The constructor's arguments are checked at fit, as scikit-learn checks them."""
    return em.GaussianMixture(**kwargs).fit(_data())


def _fit_rbm(**kwargs: Any) -> rbm.BernoulliRBM:
    return rbm.BernoulliRBM(**kwargs).fit(_data())


def _rbm(**more: Any) -> Callable[[], dict[str, Any]]:
    return lambda: {"params": _rbm_params(), **{k: v() if callable(v) else v
                                                for k, v in more.items()}}


CALLS: list[Call] = [
    # the primitive and the lens
    Call("stop_gradient", toolkit.stop_gradient, lambda: {"x": _x(), "name": "kinds.x"}),
    Call("is_block_disabled", toolkit.is_block_disabled, lambda: {"name": "kinds.x"}),
    Call("require_block", toolkit.require_block,
         lambda: {"name": "kinds.x", "where": "f", "why": "w"}),
    Call("as_constant", toolkit.as_constant, lambda: {"fn": _x, "name": "kinds.c"}),
    Call("observe_cuts", _enter_observe_cuts,
         lambda: {"on_cut": lambda *a: None, "on_open": lambda *a: None},
         signature_of=toolkit.observe_cuts),
    Call("compare_gradients", toolkit.compare_gradients,
         lambda: {"loss_fn": lambda: _x().sum(), "params": [_w()]}),
    Call("has_gradient_path", toolkit.has_gradient_path,
         lambda: {"output": _path()["loss"], "tensor": _w()}),
    Call("assert_blocked", toolkit.assert_blocked,
         lambda: {"output": _loss(_w()), "tensor": _w(), "name": "n"},
         callees=("has_gradient_path",)),
    Call("count_graph_nodes", toolkit.count_graph_nodes, lambda: {"output": _loss(_w())}),
    Call("gradient_path", toolkit.gradient_path, _path),
    Call("assert_no_gradient", toolkit.assert_no_gradient,
         lambda: {"loss": _x().sum(), "params": [_w()], "why": "w"}),
    Call("gradient_flow", toolkit.gradient_flow, _flow),
    Call("gradient_graph", toolkit.gradient_graph, lambda: {"loss": _loss(_w())}),
    Call("draw_gradient_graph", toolkit.draw_gradient_graph,
         lambda: {"loss": _loss(_w()), "collapse": 3, "max_nodes": 40, "layout": "auto",
                  "title": "t", "fontsize": 9.0}, callees=("gradient_graph",)),
    Call("audit_step", toolkit.audit_step,
         lambda: dict(zip(("step", "optimizers"), _step_fixture(), strict=True))),
    Call("assert_clean_step", toolkit.assert_clean_step,
         lambda: dict(zip(("step", "optimizers"), _step_fixture(), strict=True)),
         callees=("audit_step",)),
    Call("explain_unused_parameters", toolkit.explain_unused_parameters, _unused,
         callees=("audit_step",)),
    # softmax
    *[Call(fn.__name__, fn, lambda: {"x": _x(), "dim": -1, "dtype": torch.float64})
      for fn in (softmax.stable_softmax, softmax.log_softmax, softmax.logsumexp,
                 softmax.naive_softmax)],
    # EM
    Call("e_step", em.e_step, _gmm_call),
    Call("log_likelihood", em.log_likelihood, _gmm_call),
    Call("expected_complete_loglik", em.expected_complete_loglik, _gmm_call),
    Call("m_step", em.m_step, lambda: {"X": torch.as_tensor(_data(4)), "log_resp": torch.full(
        (4, 2), math.log(0.5), dtype=torch.float64), "covariance_type": "full",
        "reg_covar": 1e-6}),
    Call("gradient_m_step", em.gradient_m_step,
         lambda: {"X": torch.as_tensor(_data()), "log_resp": None, "params": _gmm_params(),
                  "n_steps": 1}, callees=("to_unconstrained",)),
    Call("precisions_cholesky_from_covariances", em.precisions_cholesky_from_covariances,
         lambda: {"covariances": _gmm_params()[2], "covariance_type": "full"}),
    Call("to_unconstrained", em.to_unconstrained,
         lambda: {"params": _gmm_params(), "covariance_type": "full"}),
    Call("from_unconstrained", em.from_unconstrained,
         lambda: {"theta": em.to_unconstrained(_gmm_params()), "covariance_type": "full"}),
    Call("GaussianMixture", _fit_gmm, lambda: {
        "n_components": 2, "covariance_type": "full", "tol": 1e-3, "reg_covar": 1e-6,
        "max_iter": 5, "n_init": 1, "init_params": "kmeans", "random_state": 0,
        "warm_start": False, "verbose": 0, "verbose_interval": 10, "m_step": "closed_form",
        "device": "cpu", "dtype": "float64"},
         callees=("GaussianMixture.fit",), signature_of=em.GaussianMixture),
    Call("GaussianMixture.fit", lambda **kw: em.GaussianMixture(2, random_state=0).fit(**kw),
         lambda: {"X": _data(), "sample_weight": np.ones(8)},
         signature_of=em.GaussianMixture.fit),
    Call("GaussianMixture.sample", lambda **kw: _fitted_gmm().sample(**kw),
         lambda: {"n_samples": 3}, signature_of=em.GaussianMixture.sample),
    # RBM
    Call("BernoulliRBM", _fit_rbm, lambda: {
        "n_components": 2, "learning_rate": 0.1, "batch_size": 4, "n_iter": 1, "verbose": 0,
        "random_state": 0, "method": "pcd", "k": 1, "chain": "sampled", "momentum": 0.0,
        "weight_decay": 0.0, "shuffle": False, "init": "normal", "device": "cpu",
        "dtype": "float64"}, callees=("BernoulliRBM.fit",), signature_of=rbm.BernoulliRBM),
    Call("BernoulliRBM.log_partition", lambda **kw: _fitted_rbm().log_partition(**kw),
         lambda: {"method": "exact", "n_runs": 2, "betas": 3},
         signature_of=rbm.BernoulliRBM.log_partition),
    Call("BernoulliRBM.log_likelihood", lambda **kw: _fitted_rbm().log_likelihood(**kw),
         lambda: {"X": _data().round(), "log_partition": 1.0},
         signature_of=rbm.BernoulliRBM.log_likelihood),
    Call("BernoulliRBM.sample", lambda **kw: _fitted_rbm().sample(**kw),
         lambda: {"n_samples": 2, "n_steps": 1}, signature_of=rbm.BernoulliRBM.sample),
    Call("free_energy", rbm.free_energy, _rbm(v=lambda: _f64(4, 3))),
    Call("pseudo_log_likelihood", rbm.pseudo_log_likelihood,
         _rbm(v=lambda: _f64(4, 3).round())),
    Call("log_likelihood", rbm.log_likelihood, _rbm(v=lambda: _f64(4, 3).round())),
    Call("exact_log_likelihood_gradient", rbm.exact_log_likelihood_gradient,
         _rbm(v_data=lambda: _f64(4, 3).round())),
    Call("exact_log_partition", rbm.exact_log_partition, _rbm(chunk_elements=100)),
    Call("sample_hidden", rbm.sample_hidden, _rbm(v=lambda: _f64(4, 3), generator=_gen)),
    Call("sample_visible", rbm.sample_visible, _rbm(h=lambda: _f64(4, 2), generator=_gen)),
    Call("gibbs_chain", rbm.gibbs_chain,
         _rbm(v=lambda: _f64(4, 3), k=1, mean_field=False, generator=_gen)),
    Call("negative_samples", rbm.negative_samples,
         _rbm(start=lambda: _f64(4, 3), k=1, chain="sampled", from_hidden=False,
              generator=_gen)),
    Call("cd_loss", rbm.cd_loss, _rbm(v_data=lambda: _f64(4, 3), v_model=lambda: _f64(4, 3))),
    Call("cd_gradient", rbm.cd_gradient,
         _rbm(v_data=lambda: _f64(4, 3), v_model=lambda: _f64(4, 3))),
    Call("ais_log_partition", rbm.ais_log_partition,
         _rbm(n_runs=2, betas=3, generator=_gen)),
    Call("init_params", rbm.init_params,
         lambda: {"n_visible": 3, "n_hidden": 2, "init": "normal", "generator": _gen(),
                  "dtype": torch.float64}),
    Call("train_cd", rbm.train_cd,
         _rbm(X=lambda: _f64(4, 3).round(), method="cd", k=1, chain="sampled",
              learning_rate=0.1, batch_size=2, epochs=1, generator=_gen)),
    # adversarial examples
    Call("pgd", adversarial.pgd,
         lambda: {"model": _model(), "x": _x(), "y": _labels(), "eps": 0.1, "alpha": 0.01,
                  "steps": 1, "norm": "linf", "random_start": True, "restarts": 1,
                  "targeted": False, "generator": _gen()}),
    Call("fgsm", adversarial.fgsm,
         lambda: {"model": _model(), "x": _x(), "y": _labels(), "eps": 0.1, "targeted": False,
                  "norm": "linf"}),
    Call("predict", adversarial.predict, lambda: {"model": _model(), "x": _x()}),
    Call("evaluate_robustness", adversarial.evaluate_robustness,
         lambda: {"model": _model(), "data": (_x(), _labels()),
                  "attacks": {"fgsm": adversarial.fgsm}, "batch_size": 2}),
    Call("adversarial_training", adversarial.adversarial_training, _training),
    Call("eval_mode", _enter_eval_mode, lambda: {"model": _model(), "enabled": True},
         signature_of=adversarial.eval_mode),
    # TD learning
    Call("td_errors", td.td_errors,
         lambda: {"values": torch.ones(4), "rewards": torch.ones(4),
                  "next_values": torch.ones(4), "gamma": 0.9}),
    Call("td_loss", td.td_loss,
         lambda: {"values": torch.ones(4), "rewards": torch.ones(4),
                  "next_values": torch.ones(4), "gamma": 0.9}, callees=("td_errors",)),
    Call("gradient_descent", td.gradient_descent,
         lambda: {"loss_fn": lambda w: (w ** 2).sum(), "w0": torch.ones(3), "lr": 0.1,
                  "n_steps": 2}),
    Call("random_chain", td.random_chain,
         lambda: {"n_states": 4, "n_features": 2, "gamma": 0.9, "generator": _gen()}),
    Call("baird_counterexample", td.baird_counterexample,
         lambda: {"gamma": 0.9, "dtype": torch.float64}),
    Call("a_split", td.a_split, lambda: {"dtype": torch.float64}),
    # SimSiam
    Call("negative_cosine", simsiam.negative_cosine, lambda: {"p": _x(), "z": _x()}),
    Call("simsiam_loss", simsiam.simsiam_loss,
         lambda: {"p1": _x(), "p2": _x(), "z1": _x(), "z2": _x()},
         callees=("negative_cosine",)),
    Call("output_std", simsiam.output_std, lambda: {"z": _x()}),
    Call("knn_accuracy", simsiam.knn_accuracy,
         lambda: {"train_X": _x(), "train_y": _labels(), "test_X": _x(),
                  "test_y": _labels(), "k": 1}),
    Call("train_simsiam", simsiam.train_simsiam,
         lambda: {"model": _simsiam(), "X": _x(), "epochs": 1, "batch_size": 2, "lr": 0.1,
                  "augment": simsiam.Augment(image_shape=(1, 3)), "generator": _gen()}),
    Call("SimSiam", simsiam.SimSiam,
         lambda: {"n_features": 3, "hidden": 4, "dim": 4, "pred_hidden": 2,
                  "dtype": torch.float32}),
    # VQ-VAE
    Call("nearest_codes", vq_vae.nearest_codes, lambda: {"z_e": _x(), "codebook": _codebook()}),
    Call("quantize", vq_vae.quantize, lambda: {"z_e": _x(), "codebook": _codebook()}),
    Call("vq_losses", vq_vae.vq_losses, lambda: {"z_e": _x(), "e": _x()}),
    Call("perplexity", vq_vae.perplexity,
         lambda: {"indices": torch.tensor([0, 1, 2, 3]), "n_codes": 4}),
    Call("encoder_recon_grad_norm", vq_vae.encoder_recon_grad_norm,
         lambda: {"model": _vqvae(), "x": _x()}),
    Call("train_vq_vae", vq_vae.train_vq_vae,
         lambda: {"model": _vqvae(), "X": _x(), "epochs": 1, "batch_size": 2, "lr": 0.01,
                  "beta": 0.25, "generator": _gen()}),
    Call("VQVAE", vq_vae.VQVAE,
         lambda: {"n_features": 3, "n_latents": 2, "latent_dim": 2, "n_codes": 4,
                  "hidden": 4}),
    # DiCE
    Call("magic_box", dice.magic_box, lambda: {"tau": torch.zeros(4)}),
    Call("dice_objective", dice.dice_objective,
         lambda: {"log_probs": torch.zeros(4, 3), "costs": torch.ones(4, 3)}),
    Call("surrogate_objective", dice.surrogate_objective,
         lambda: {"log_probs": torch.zeros(4, 3), "costs": torch.ones(4, 3)}),
    Call("derivatives", dice.derivatives,
         lambda: {"objective": lambda t: (t ** 3).sum(), "theta": torch.ones(3)}),
    Call("two_step_problem", dice.two_step_problem,
         lambda: {"n_actions": 3, "generator": _gen()}),
    # divergence records
    Call("check_finite", divergence.check_finite, lambda: {"tensors": {"w": _x()}}),
]

#: Entry points swept elsewhere, with where.
ELSEWHERE = {
    "disable_blocks": "takes names only (*patterns): tests/core, and the fuzz of patterns",
}

#: Where a value of any kind is right: with the reason.
ANYTHING_GOES = {
    ("stop_gradient", "x"): "a nested structure: leaves that are not tensors pass through, "
                            "as jax.lax.stop_gradient's tree_map",
}


class _Opaque:
    def __repr__(self) -> str:
        return "<object>"


def _none_returning(*args: Any, **kwargs: Any) -> None:
    return None


WRONG = {"None": None, "str": "text", "object": _Opaque(), "function": _none_returning}


def _accepts(call: Call, arg: str, kind: str) -> bool:
    """Whether ``arg`` is declared to take a value of ``kind`` (so returning is right)."""
    if (call.where, arg) in ANYTHING_GOES:
        return True
    param = inspect.signature(call.signature_of or call.fn).parameters[arg]
    note = str(param.annotation)
    if kind == "None":
        return param.default is None or "None" in note
    if kind == "str":
        return "str" in note or note in ("Any", "T")
    if kind == "function":  # a callable argument, or a model (any callable)
        return any(word in note for word in ("Callable", "Model", "Attack", "LossFn", "Hook"))
    return False


CASES = [(call, arg) for call in CALLS for arg in call.valid()]


@pytest.mark.parametrize(("call", "arg"), CASES, ids=[f"{c.where}[{a}]" for c, a in CASES])
def test_every_argument_answers_a_value_of_the_wrong_kind(call: Call, arg: str) -> None:
    problems = []
    for kind, value in WRONG.items():
        kwargs = {**call.valid(), arg: value}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                call.fn(**kwargs)
        except (TypeError, ValueError) as err:
            message = str(err)
            names = (call.where, *call.callees)
            if not message.startswith(tuple(f"{name}:" for name in names)) or arg not in message:
                problems.append(f"{kind}: {type(err).__name__} not naming {call.where} and "
                                f"{arg}: {message[:160]!r}")
            elif "\n" in message.strip():
                problems.append(f"{kind}: not one line: {message[:160]!r}")
        except Exception as err:
            problems.append(f"{kind}: raw {type(err).__name__}: {str(err)[:160]!r}")
        else:
            if not _accepts(call, arg, kind):
                problems.append(f"{kind}: returned, though {arg} takes no {kind}")
    assert problems == [], f"{call.where}({arg}=...): " + "; ".join(problems)


def test_the_valid_calls_return() -> None:
    for call in CALLS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            call.fn(**call.valid())


def test_every_public_entry_point_is_swept_or_says_where() -> None:
    swept = {call.where.split(".")[0] for call in CALLS}
    missing = [f"{module.__name__}.{name}" for module in MODULES for name in module.__all__
               if callable(getattr(module, name)) and name not in swept
               and name not in NOT_FUZZED and name not in ELSEWHERE]
    assert missing == [], f"entry points neither swept nor listed in ELSEWHERE: {missing}"
