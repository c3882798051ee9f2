"""Declared constraints (_param_validation); devices, tensors, generators (_array_validation)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from toolkit._utils.array_validation import (
    as_tensor,
    check_dtype,
    check_X,
    numpy_random_state,
    resolve_device,
    resolve_dtype,
    resolve_generator,
    to_output,
)
from toolkit._utils.param_validation import (
    Bool,
    Instance,
    Integer,
    Options,
    Real,
    check,
    check_params,
    is_int,
)


@pytest.mark.parametrize("value", [0, 3, np.int64(2), np.int32(-1)])
def test_is_int_accepts_python_and_numpy_ints(value):
    assert is_int(value)


@pytest.mark.parametrize("value", [True, np.bool_(False), 1.0, "1", None])
def test_is_int_rejects_bools_floats_and_others(value):
    assert not is_int(value)


@pytest.mark.parametrize(("value", "constraints", "error", "message"), [
    (0, [Integer(1)], ValueError, "f: n must be an int >= 1, got 0"),
    (True, [Integer(1)], TypeError, "f: n must be an int >= 1, got True"),
    (2.0, [Integer(1)], TypeError, "f: n must be an int >= 1, got 2.0"),
    (11, [Integer(1, 10)], ValueError, r"f: n must be an int in \[1, 10\], got 11"),
    (-0.5, [Real(0)], ValueError, "f: n must be a number >= 0, got -0.5"),
    (0.0, [Real(0, closed="neither")], ValueError, "f: n must be a number > 0, got 0.0"),
    (float("nan"), [Real(0)], ValueError, "f: n must be a number >= 0, got nan"),
    (float("inf"), [Real()], ValueError, "f: n must be a finite number, got inf"),
    ("1e-3", [Real(0)], TypeError, "f: n must be a number >= 0, got '1e-3'"),
    (1.0, [Real(0, 1, closed="left")], ValueError, r"f: n must be a number in \[0, 1\), got 1.0"),
    ("kmeans+", [Options("kmeans", "random")], ValueError,
     "f: n must be one of 'kmeans', 'random', got 'kmeans\\+'"),
    (3, [Options("kmeans", "random")], TypeError, "f: n must be one of 'kmeans', 'random', got 3"),
    (0, [None, Integer(1)], ValueError, "f: n must be None or an int >= 1, got 0"),
    ("x", [Bool], TypeError, "f: n must be a bool, got 'x'"),
    ([1], [Instance(tuple)], TypeError, r"f: n must be a tuple, got list \[1\]"),
])
def test_check_messages_and_exception_types(value, constraints, error, message):
    with pytest.raises(error, match=f"^{message}$"):
        check("f", "n", value, constraints)


@pytest.mark.parametrize(("value", "constraints"), [
    (1, [Integer(1)]), (np.int64(5), [Integer(1, 5)]), (0.5, [Real(0, 1)]), (1, [Real(0)]),
    (None, [None, Integer(1)]), ("random", [Options("kmeans", "random")]), (False, [Bool]),
])
def test_check_returns_valid_values(value, constraints):
    assert check("f", "n", value, constraints) is value


def test_check_params_checks_each_declared_name():
    constraints = {"n_components": [Integer(1)], "tol": [Real(0)]}
    check_params("GM", {"n_components": 2, "tol": 0.1, "other": object()}, constraints)
    with pytest.raises(ValueError, match="GM: tol must be a number >= 0, got -1"):
        check_params("GM", {"n_components": 2, "tol": -1}, constraints)


def test_resolve_device_one_meaning_of_none_and_auto():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device(None).type == expected
    assert resolve_device("auto").type == expected
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")


def test_resolve_device_errors():
    with pytest.raises(TypeError, match="f: device must be None, 'auto', a string"):
        resolve_device(3, where="f")
    with pytest.raises(ValueError, match="f: device 'gpu' is not a valid device"):
        resolve_device("gpu", where="f")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="asks for CUDA, but torch reports no CUDA device"):
            resolve_device("cuda", where="f")


def test_as_tensor_converts_lists_arrays_and_frames():
    assert as_tensor([[1, 2]], where="f").dtype == torch.float64
    assert as_tensor(np.ones((2, 2), dtype=np.float32), where="f").dtype == torch.float32
    assert as_tensor(np.ones((2, 2)), where="f", dtype=torch.float32).dtype == torch.float32
    t = torch.ones(2, 3)
    assert as_tensor(t, where="f") is t  # no copy when nothing changes
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"a": [1.0, 2.0], "b": [3.0, 4.0]})
    assert as_tensor(frame, where="f").shape == (2, 2)


def test_as_tensor_errors():
    with pytest.raises(TypeError, match="f: X must be an array-like of numbers or a tensor"):
        as_tensor(object(), where="f")
    with pytest.raises(TypeError, match=r"f: X must hold real numbers, got dtype torch\.complex64"):
        as_tensor(torch.ones(2, dtype=torch.complex64), where="f")
    with pytest.raises(ValueError, match=r"f: X must be 2-D, got shape \(3,\); reshape"):
        as_tensor([1.0, 2.0, 3.0], where="f", ndim=2)
    with pytest.raises(ValueError, match="f: X contains NaN or infinity"):
        as_tensor([[1.0, float("nan")]], where="f", finite=True)
    with pytest.raises(ValueError, match=r"f: X must have at least 2 row\(s\)"):
        as_tensor([[1.0]], where="f", min_rows=2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), None])
def test_finite_inputs_are_told_from_others_whatever_their_sum(dtype, bad):
    # entries whose sum overflows are finite all the same; inf and -inf together sum to nan
    big = torch.finfo(dtype).max
    values = torch.tensor([[big, big], [-big, 1.0]], dtype=dtype)
    assert not torch.isfinite(values.sum())
    if bad is None:
        assert as_tensor(values, where="f", finite=True) is not None
        assert as_tensor(torch.empty(0, 2, dtype=dtype), where="f", finite=True).numel() == 0
        return
    for position in [(0, 0), (1, 1)]:
        given = values.clone()
        given[position] = bad
        with pytest.raises(ValueError, match="f: X contains NaN or infinity"):
            as_tensor(given, where="f", finite=True)
        small = torch.ones(3, 2, dtype=dtype)
        small[position] = bad
        with pytest.raises(ValueError, match="f: X contains NaN or infinity"):
            as_tensor(small, where="f", finite=True)


def test_check_dtype():
    assert check_dtype("f", torch.float32) is torch.float32
    with pytest.raises(TypeError, match=r"f: dtype must be a floating torch\.dtype"):
        check_dtype("f", "float32")
    with pytest.raises(ValueError, match=r"got torch\.int64"):
        check_dtype("f", torch.int64)


def test_resolve_generator_seeds_and_passes_generators_through():
    a = resolve_generator(7, where="f")
    b = resolve_generator(np.int64(7), where="f")
    assert torch.equal(torch.rand(3, generator=a), torch.rand(3, generator=b))
    g = torch.Generator()
    assert resolve_generator(g, where="f") is g
    rs = resolve_generator(np.random.RandomState(0), where="f")
    rs2 = resolve_generator(np.random.RandomState(0), where="f")
    assert torch.equal(torch.rand(2, generator=rs), torch.rand(2, generator=rs2))
    assert isinstance(resolve_generator(None, where="f"), torch.Generator)


def test_resolve_generator_errors():
    with pytest.raises(TypeError, match="f: random_state must be None, an int"):
        resolve_generator("0", where="f")
    with pytest.raises(ValueError, match="f: random_state must be a non-negative int seed"):
        resolve_generator(-1, where="f")


def test_estimator_helpers_dtype_rule_random_states_and_output_kind():
    assert resolve_dtype(None, np.zeros(2, np.float32)) == torch.float32
    assert resolve_dtype(None, np.zeros(2, np.int64)) == torch.float64
    assert resolve_dtype("float32", torch.zeros(2, dtype=torch.float64)) == torch.float32
    # scikit-learn's meanings: an int seeds afresh, a RandomState is used as it is
    assert numpy_random_state(3, where="f").rand() == np.random.RandomState(3).rand()
    rs = np.random.RandomState(0)
    assert numpy_random_state(rs, where="f") is rs
    assert numpy_random_state(None, where="f") is np.random.mtrand._rand
    a = numpy_random_state(torch.Generator().manual_seed(1), where="f").rand()
    assert a == numpy_random_state(torch.Generator().manual_seed(1), where="f").rand()
    with pytest.raises(ValueError, match=r"f: random_state must be an int in \[0, 2\*\*32 - 1\]"):
        numpy_random_state(-1, where="f")
    with pytest.raises(TypeError, match="f: random_state must be None, an int, a numpy"):
        numpy_random_state(1.5, where="f")
    t = torch.ones(2)
    assert isinstance(to_output(t, np.zeros(1)), np.ndarray)
    assert to_output(t, [1.0]).dtype == np.float32
    assert to_output(t, torch.zeros(1)) is t


def test_check_X_messages():
    kw = {"device": torch.device("cpu"), "dtype": torch.float64}
    X = check_X("Est.fit", [[1, 2], [3, 4]], **kw)
    assert X.dtype == torch.float64 and X.shape == (2, 2)
    with pytest.raises(ValueError, match=r"Est.transform: X has 2 features, but Est is "
                                         r"expecting 3 features as input"):
        check_X("Est.transform", X, n_features=3, **kw)
    with pytest.raises(ValueError, match=r"Est.fit: X must be 2-D .*Reshape your data"):
        check_X("Est.fit", np.zeros(3), **kw)
    with pytest.raises(ValueError, match=r"0 feature\(s\) \(shape=\(3, 0\)\) while a minimum"):
        check_X("Est.fit", np.zeros((3, 0)), **kw)
    with pytest.raises(ValueError, match=r"Est.fit: X must have at least 2 samples"):
        check_X("Est.fit", np.zeros((1, 2)), min_samples=2, **kw)
    with pytest.raises(ValueError, match="Complex data not supported"):
        check_X("Est.fit", np.ones((2, 2), dtype=complex), **kw)
    with pytest.raises(ValueError, match=r"Est\.fit: X contains NaN or infinity"):
        check_X("Est.fit", [[np.nan, 1.0]], **kw)
    # text that is no number: a ValueError, as scikit-learn's (issue 55); numbers as text convert
    for text in (np.array([["a", "b"]], dtype=object), np.array([["a", "b"]])):
        with pytest.raises(ValueError, match=r"Est\.fit: X must hold numbers; could not convert "
                                             r"string to float"):
            check_X("Est.fit", text, **kw)
    np.testing.assert_array_equal(check_X("Est.fit", np.array([["1", "2.5"]]), **kw).numpy(),
                                  [[1.0, 2.5]])
    with pytest.raises(TypeError, match=r"Est\.fit: X must be an array-like of numbers or a "
                                        r"tensor \(float\(\) argument"):
        check_X("Est.fit", np.array([[{}, 1.0]], dtype=object), **kw)
    with pytest.raises(ValueError, match=r"Est\.fit: X must be a rectangular array of numbers"):
        check_X("Est.fit", [[1.0, 2.0], [3.0]], **kw)
    # a meta tensor has no values; a sparse tensor is refused naming the conversion
    with pytest.raises(ValueError, match=r"Est\.fit: X is on the 'meta' device, which holds a "
                                         r"shape but no values"):
        check_X("Est.fit", torch.empty(3, 2, device="meta"), **kw)
    with pytest.raises(TypeError, match=r"Est\.fit: X must be a dense tensor, got layout "
                                        r"torch\.sparse_coo; convert it with X\.to_dense\(\)"):
        check_X("Est.fit", torch.eye(2).to_sparse(), **kw)
    assert check_X("Est.fit", torch.eye(2).to_sparse().to_dense(), **kw).shape == (2, 2)
    import scipy.sparse

    with pytest.raises(TypeError, match=r"Est.fit: X must be dense; sparse input is not "):
        check_X("Est.fit", scipy.sparse.csr_matrix(np.eye(2)), **kw)
