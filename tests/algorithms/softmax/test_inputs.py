"""Argument checks of the softmax functions: every error names the function and argument."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from toolkit.algorithms.softmax import log_softmax, logsumexp, naive_softmax, stable_softmax


@pytest.mark.parametrize("fn", [naive_softmax, stable_softmax, log_softmax, logsumexp])
def test_errors_name_function_and_argument(fn):
    name = fn.__name__
    x = torch.randn(2, 3)
    with pytest.raises(TypeError, match=rf"{name}: x must be a floating-point tensor, got torch.int64"):
        fn(torch.arange(3))
    with pytest.raises(TypeError, match=rf"{name}: x must be an array-like of numbers or a "
                                        r"tensor"):
        fn(object())
    with pytest.raises(ValueError, match=rf"{name}: x must hold numbers; could not convert "):
        fn(np.array(["a", "b"]))
    with pytest.raises(ValueError, match=rf"{name}: dim 2 is out of range for a tensor with 2"):
        fn(x, 2)
    with pytest.raises(TypeError, match=rf"{name}: dim must be an int or a tuple of ints, got str"):
        fn(x, "1")
    with pytest.raises(TypeError, match=rf"{name}: dim must be an int or a tuple of ints, got bool"):
        fn(x, True)
    with pytest.raises(ValueError, match=rf"{name}: dim must name at least one dimension"):
        fn(x, ())
    with pytest.raises(ValueError, match=rf"{name}: dim must not repeat a dimension, got \(1, -1\)"):
        fn(x, (1, -1))
    with pytest.raises(ValueError, match=rf"{name}: cannot reduce over dimension 1 of size 0"):
        fn(torch.zeros(2, 0))
    with pytest.raises(ValueError, match=rf"{name}: dtype must be a floating torch.dtype such as "
                                         r"torch.float32, got torch.int32"):
        fn(x, dtype=torch.int32)
    with pytest.raises(TypeError, match=rf"{name}: dtype must be a floating torch.dtype such as "
                                        r"torch.float32, got 'float32'"):
        fn(x, dtype="float32")
    # numpy integers are ints (never bools)
    torch.testing.assert_close(fn(x, np.int64(1)), fn(x, 1))


@pytest.mark.parametrize("fn", [stable_softmax, log_softmax, logsumexp])
def test_where_errors(fn):
    x = torch.randn(2, 3)
    name = fn.__name__
    with pytest.raises(TypeError, match=rf"{name}: where must be a boolean tensor, got torch.int64"):
        fn(x, where=torch.ones(2, 3, dtype=torch.int64))
    with pytest.raises(ValueError, match=rf"{name}: where of shape \(4,\) does not broadcast"):
        fn(x, where=torch.ones(4, dtype=torch.bool))
    with pytest.raises(ValueError, match=rf"{name}: where of shape \(2, 2, 3\) does not broadcast"):
        fn(x, where=torch.ones(2, 2, 3, dtype=torch.bool))


@pytest.mark.parametrize("fn", [stable_softmax, log_softmax])
def test_impl_error(fn):
    with pytest.raises(ValueError, match=rf"{fn.__name__}: impl must be one of 'reference', "
                                         r"'fused', got 'cuda'"):
        fn(torch.randn(3), impl="cuda")


def test_logsumexp_argument_errors():
    x = torch.randn(2, 3)
    with pytest.raises(ValueError, match=r"logsumexp: b of shape \(4,\) does not broadcast with x"):
        logsumexp(x, b=torch.ones(4))
    with pytest.raises(TypeError, match=r"logsumexp: keepdim must be a bool, got 1"):
        logsumexp(x, keepdim=1)
    with pytest.raises(TypeError, match=r"logsumexp: return_sign must be a bool, got 'yes'"):
        logsumexp(x, return_sign="yes")
    with pytest.raises(TypeError, match=r"logsumexp: b must be an array-like of numbers or a "
                                        r"tensor"):
        logsumexp(x, b=object())
    # integer weights are cast to x's dtype
    torch.testing.assert_close(logsumexp(x, b=torch.ones(3, dtype=torch.int64)), logsumexp(x))
