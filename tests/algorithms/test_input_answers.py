"""What the public entry points answer to inputs a tester of scikit-learn's estimator checks
would try (issue 55): the exception class a scikit-learn or torch user catches, in one line
naming the function, the argument, what was expected and what came; where the answer gives
advice, the advice is followed and the problem is gone. One test per row of the issue's table
(the RBM's values outside [0, 1] are in tests/algorithms/rbm/test_rbm_estimator_sklearn.py)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from sklearn.mixture import GaussianMixture as SkGaussianMixture
from sklearn.preprocessing import MaxAbsScaler
from torch import nn

from toolkit import compare_gradients
from toolkit._utils.memory import allocation_errors
from toolkit.algorithms.adversarial import pgd
from toolkit.algorithms.em import GaussianMixture
from toolkit.algorithms.rbm import BernoulliRBM
from toolkit.algorithms.softmax import log_softmax, stable_softmax


def _blobs(seed: int, n: int = 60, d: int = 3) -> np.ndarray:
    rng = np.random.RandomState(seed)
    return np.vstack([rng.randn(n // 2, d), rng.randn(n - n // 2, d) + 5.0])


def test_data_whose_covariances_overflow_is_a_value_error_saying_so(seed: int) -> None:
    X = _blobs(seed)
    with pytest.raises(ValueError, match=r"^GaussianMixture\.fit: X overflows torch\.float64: "
                                         r"its values reach \S+e\+300 in absolute value, and the "
                                         r"covariances .* are not finite; scale X first, e\.g\. "
                                         r"with sklearn\.preprocessing\.MaxAbsScaler"):
        with warnings.catch_warnings():  # the k-means start meets the overflow first
            warnings.simplefilter("ignore")
            GaussianMixture(2, random_state=seed).fit(X * 1e300)
    # scikit-learn's estimator fails on the same data with a ValueError too
    with pytest.raises(ValueError), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        SkGaussianMixture(2, random_state=seed).fit(X * 1e300)
    # the advice, followed: the scaled data fit as the data scaled from their original size do
    scaled = GaussianMixture(2, random_state=seed).fit(MaxAbsScaler().fit_transform(X * 1e300))
    ref = GaussianMixture(2, random_state=seed).fit(MaxAbsScaler().fit_transform(X))
    np.testing.assert_allclose(scaled.means_, ref.means_, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("estimator", [GaussianMixture(2), BernoulliRBM(2, n_iter=1)],
                         ids=["GaussianMixture", "BernoulliRBM"])
def test_a_meta_tensor_is_a_value_error_naming_the_device(estimator) -> None:
    name = type(estimator).__name__
    with pytest.raises(ValueError, match=rf"^{name}\.fit: X is on the 'meta' device, which holds "
                                         r"a shape but no values; create it on a device with "
                                         r"data \('cpu' or 'cuda'\)$"):
        estimator.fit(torch.empty(10, 3, device="meta"))
    estimator.fit(torch.rand(10, 3, device="cpu", dtype=torch.float64))  # the advice works


@pytest.mark.parametrize("estimator", [GaussianMixture(2), BernoulliRBM(2, n_iter=1)],
                         ids=["GaussianMixture", "BernoulliRBM"])
@pytest.mark.parametrize("dtype", [object, str])
def test_strings_are_a_value_error_as_in_sklearn(estimator, dtype: type) -> None:
    text = np.array([["a", "b"], ["c", "d"], ["e", "f"]], dtype=dtype)
    name = type(estimator).__name__
    with pytest.raises(ValueError, match=rf"^{name}\.fit: X must hold numbers; could not convert "
                                         r"string to float: .*'a'"):
        estimator.fit(text)
    with pytest.raises(ValueError, match="could not convert string to float"):
        SkGaussianMixture(2).fit(text)  # the class scikit-learn users catch
    # numbers written as text convert, as in scikit-learn
    numbers = np.array([["0.1", "0.9"], ["0.2", "0.8"], ["0.7", "0.3"]], dtype=dtype)
    assert estimator.fit(numbers).n_features_in_ == 2


def test_predict_proba_warns_about_rows_without_probabilities(seed: int) -> None:
    gm = GaussianMixture(2, random_state=seed).fit(_blobs(seed))
    far = _blobs(seed + 1, n=6) * 1e200
    with pytest.warns(RuntimeWarning, match=r"^GaussianMixture\.predict_proba: 6 of 6 rows of X "
                                            r"have no defined responsibilities \(their "
                                            r"probabilities are NaN\): their log-densities are "
                                            r"-inf or NaN under every component \(e\.g\. row 0"):
        proba = gm.predict_proba(far)
    assert np.isnan(proba).all()
    with pytest.warns(RuntimeWarning, match=r"^GaussianMixture\.predict: 6 of 6 rows .*labels "
                                            r"are arbitrary"):
        gm.predict(far)
    # rows the model can place: no warning, probabilities that sum to one
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_allclose(gm.predict_proba(_blobs(seed)).sum(1), 1.0, rtol=1e-12)


def test_warm_start_with_other_features_names_n_features(seed: int) -> None:
    X = _blobs(seed)
    gm = GaussianMixture(2, warm_start=True, random_state=seed).fit(X)
    with pytest.raises(ValueError, match=r"^GaussianMixture\.fit: X has 2 features, but "
                                         r"GaussianMixture is expecting 3 features as input: "
                                         r"warm_start=True continues the previous fit "
                                         r"\(n_features_in_=3\); set warm_start=False to fit "
                                         r"afresh$"):
        gm.fit(X[:, :2])
    np.testing.assert_array_equal(gm.means_.shape, (2, 3))  # the fitted model is untouched
    assert gm.set_params(warm_start=False).fit(X[:, :2]).n_features_in_ == 2  # the advice works


def test_an_impossible_allocation_is_a_memory_error(seed: int) -> None:
    rbm = BernoulliRBM(2, n_iter=1, random_state=seed).fit(np.random.RandomState(seed).rand(10, 3))
    # 2**58 rows of 3 float64 features: 6 EiB, more than any address space (torch's allocator)
    with pytest.raises(MemoryError, match=r"^BernoulliRBM\.sample: not enough memory for "
                                          r"n_samples=288230376151711744 of 3 features \(it "
                                          r"asked for 6 EiB\); use smaller sizes"):
        rbm.sample(2**58)
    # a weight matrix of 2**37 × 2**20 float64 entries, 1 EiB (numpy's allocator)
    with pytest.raises(MemoryError, match=r"^BernoulliRBM\.fit: not enough memory for X of shape "
                                          r"\(2, 1048576\) with n_components=137438953472"):
        BernoulliRBM(2**37, n_iter=1).fit(np.zeros((2, 2**20)))
    gm = GaussianMixture(2, random_state=seed).fit(_blobs(seed))
    with pytest.raises(MemoryError, match=r"^GaussianMixture\.sample: not enough memory for "
                                          r"n_samples=288230376151711744 of 3 features"):
        gm.sample(2**58)


def test_allocation_errors_translates_only_allocation_failures() -> None:
    torch_cpu = RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: "
                             "can't allocate memory: you tried to allocate 16000000000000 bytes. "
                             "Error code 12 (Cannot allocate memory)")
    with pytest.raises(MemoryError, match=r"^f: not enough memory for X of shape \(10, 1000000\) "
                                          r"\(it asked for 14\.6 TiB\); use smaller sizes"):
        with allocation_errors("f", "X of shape (10, 1000000)"):
            raise torch_cpu
    cuda = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
    with pytest.raises(MemoryError, match=r"^g: not enough memory for n=5 \(it asked for "
                                          r"20\.00 GiB\)"):
        with allocation_errors("g", "n=5"):
            raise cuda
    with pytest.raises(RuntimeError, match=r"^shapes do not match$"):  # other errors pass through
        with allocation_errors("f", "X"):
            raise RuntimeError("shapes do not match")
    # the innermost entry point's message is kept
    with pytest.raises(MemoryError, match=r"^inner: "):
        with allocation_errors("outer", "X"), allocation_errors("inner", "Y"):
            raise torch_cpu


@pytest.mark.parametrize("fn", [stable_softmax, log_softmax])
def test_softmax_of_a_sparse_tensor_is_refused_naming_the_conversion(fn) -> None:
    dense = torch.tensor([[1.0, 0.0, 2.0], [0.0, 0.0, -1.0]])
    name = fn.__name__
    with pytest.raises(TypeError, match=rf"^{name}: x must be a dense tensor, got layout "
                                        r"torch\.sparse_coo; convert it with x\.to_dense\(\)$"):
        fn(dense.to_sparse(), dim=1)
    with pytest.raises(TypeError, match=r"got layout torch\.sparse_csr"), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch: CSR support is in beta
        fn(dense.to_sparse_csr(), dim=1)
    # the advice, followed, gives torch's dense result
    expected = torch.softmax(dense, 1) if fn is stable_softmax else torch.log_softmax(dense, 1)
    torch.testing.assert_close(fn(dense.to_sparse().to_dense(), dim=1), expected)


class _TwoHeads(nn.Module):
    """A model returning (logits, features), as many vision models do."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.body(x), x


def test_pgd_answers_what_torch_users_pass_by_mistake(seed: int) -> None:
    torch.manual_seed(seed)
    model = nn.Linear(3, 2)
    x, y = torch.rand(4, 3), torch.tensor([0, 1, 0, 1])
    kw = {"eps": 0.1, "alpha": 0.05, "steps": 2, "generator": torch.Generator().manual_seed(seed)}
    with pytest.raises(TypeError, match=r"^pgd: y must hold integer class labels \(int64\) for "
                                        r"the default cross-entropy loss, got dtype "
                                        r"torch\.float32; pass y\.long\(\)"):
        pgd(model, x, y.float(), **kw)
    two = _TwoHeads()
    with pytest.raises(TypeError, match=r"^pgd: model must return a tensor of logits "
                                        r"\(n, n_classes\), got tuple; wrap a model with several "
                                        r"outputs, e\.g\. lambda x: model\(x\)\[0\]$"):
        pgd(two, x, y, **kw)
    with pytest.raises(ValueError, match=r"^pgd: model must return logits of shape \(4, "
                                         r"n_classes\) for the default cross-entropy loss, got "
                                         r"shape \(4,\)"):
        pgd(lambda z: model(z)[:, 0], x, y, **kw)
    with pytest.raises(ValueError, match=r"^pgd: model's output must depend on x through "
                                         r"autograd, got an output with no gradient path to x"):
        pgd(lambda z: model(z).detach(), x, y, **kw)
    with pytest.raises(ValueError, match=r"^pgd: y must have shape \(4,\) to match x"):
        pgd(model, x, y[:3], **kw)
    # the advice, followed: the same attack as on a plain model
    reference = pgd(model, x, y, **{**kw, "generator": torch.Generator().manual_seed(seed)})
    fixed = pgd(model, x, y.float().long(), **{**kw, "generator": torch.Generator().manual_seed(seed)})
    torch.testing.assert_close(fixed, reference, rtol=0, atol=0)
    two.body.load_state_dict(model.state_dict())
    wrapped = pgd(lambda z: two(z)[0], x, y, **{**kw, "generator": torch.Generator().manual_seed(seed)})
    torch.testing.assert_close(wrapped, reference, rtol=0, atol=0)


def test_compare_gradients_names_a_loss_fn_that_is_not_callable() -> None:
    w = torch.ones(2, requires_grad=True)
    with pytest.raises(TypeError, match=r"^compare_gradients: loss_fn must be a callable, got 5$"):
        compare_gradients(5, [w])  # type: ignore[arg-type]
    assert compare_gradients(lambda: (w * w).sum(), [w]).overall.cosine == pytest.approx(1.0)


@pytest.mark.parametrize("fn", [stable_softmax, log_softmax])
def test_none_as_x_is_a_type_error_not_a_nan(fn) -> None:
    """numpy makes None an object array whose float64 is NaN: the softmax of nothing was
    ``tensor(nan)``; torch.softmax(None) is a TypeError, and so is ours, naming x."""
    with pytest.raises(TypeError, match=rf"^{fn.__name__}: x must be an array-like of numbers "
                                        r"or a tensor, got None$"):
        fn(None)


def test_a_model_that_is_not_callable_is_named_as_pgds_model(seed: int) -> None:
    """pgd(5, x, y) said "'int' object is not callable"; now it names pgd and model."""
    x, y = torch.rand(4, 3), torch.tensor([0, 1, 0, 1])
    with pytest.raises(TypeError, match=r"^pgd: model must be a callable returning logits \(an "
                                        r"nn\.Module or a function of x\), got 5$"):
        pgd(5, x, y)
    torch.manual_seed(seed)
    pgd(nn.Linear(3, 2), x, y, steps=1)  # the advice: a module
