"""Data of every PyTorch kind as batches on the model's device, and the checks of a batch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from adversarial_testutil import PairItems, blobs, gen
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from toolkit.algorithms.adversarial.batches import (
    Batches,
    check_bounds,
    check_inputs,
    check_labels,
    model_device,
    model_dtype,
)

NET = nn.Linear(2, 3)


def collect(batches):
    xs, ys = zip(*batches)
    return torch.cat(xs), torch.cat(ys)


def kinds(X, y):
    """The same 240 examples, in storage order, as every accepted kind of data."""
    return {
        "pair": (X, y),
        "toolkit.lab.data.Dataset-like list": [X, y],
        "numpy pair": (X.numpy(), y.numpy()),
        "TensorDataset": TensorDataset(X, y),
        "own Dataset": PairItems(X, y),
        "DataLoader": DataLoader(TensorDataset(X, y), batch_size=50),
        "list of batches": [(X[i:i + 70], y[i:i + 70]) for i in range(0, 240, 70)],
        "generator": ((X[i:i + 70], y[i:i + 70]) for i in range(0, 240, 70)),
    }


@pytest.mark.parametrize("kind", list(kinds(*blobs())))
def test_every_kind_yields_the_same_examples(kind):
    X, y = blobs()
    batches = Batches("f", "data", kinds(X, y)[kind], model=NET, batch_size=64)
    got_x, got_y = collect(batches)
    torch.testing.assert_close(got_x, X)  # float32 model: numpy float64 comes back float32
    assert torch.equal(got_y, y) and got_y.dtype == torch.int64


def test_shuffled_order_comes_from_the_generator_every_pass():
    X, y = blobs()
    orders = []
    for data in ((X, y), TensorDataset(X, y), PairItems(X, y)):
        g = gen(7)
        batches = Batches("f", "data", data, model=NET, batch_size=64, shuffle=True, generator=g)
        first, second = collect(batches)[1], collect(batches)[1]
        orders.append((first, second))
    g = gen(7)
    expected = [y[torch.randperm(240, generator=g)] for _ in range(2)]
    for first, second in orders:
        assert torch.equal(first, expected[0]) and torch.equal(second, expected[1])
        assert not torch.equal(first, second)  # a fresh order each epoch
    assert [len(b) for _, b in Batches("f", "d", (X, y), model=NET, batch_size=64)] == \
        [64, 64, 64, 48]


def test_arrays_take_the_model_dtype_tensors_keep_theirs():
    X, y = blobs()
    double = nn.Linear(2, 3).double()
    (xb, yb), = Batches("f", "data", [(X.numpy(), y.numpy().astype(np.int32))], model=double,
                        batch_size=8)
    assert xb.dtype == torch.float64 and yb.dtype == torch.int64
    (xb, _), = Batches("f", "data", [(X, y)], model=double, batch_size=8)
    assert xb.dtype == torch.float32  # a tensor is used as given
    assert model_dtype(double) == torch.float64 and model_dtype(lambda v: v) is None
    (xb, _), = Batches("f", "data", [(X.double().numpy(), y)], model=lambda v: v, batch_size=8)
    assert xb.dtype == torch.float64  # no model dtype: numpy's


def test_batches_move_to_the_model_device():
    # a model on the meta device: no numbers, but every batch must land there
    meta = nn.Linear(2, 3, device="meta")
    assert model_device(meta).type == "meta" and model_device(lambda v: v) is None
    X, y = blobs()
    for data in kinds(X, y).values():
        for xb, yb in Batches("f", "data", data, model=meta, batch_size=64):
            assert xb.device.type == "meta" and yb.device.type == "meta"
    plain = Batches("f", "data", (X, y), model=lambda v: v, batch_size=64)  # no parameters
    assert all(xb.device == X.device for xb, _ in plain)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_batches_move_to_cuda():
    X, y = blobs()
    for data in kinds(X, y).values():
        for xb, yb in Batches("f", "data", data, model=nn.Linear(2, 3).cuda(), batch_size=64):
            assert xb.is_cuda and yb.is_cuda


def test_re_iterable_data_for_several_passes_one_shot_for_one():
    X, y = blobs()
    loader = DataLoader(TensorDataset(X, y), batch_size=50)
    batches = Batches("f", "data", loader, model=NET, batch_size=1, passes=3)
    assert [len(collect(batches)[1]) for _ in range(3)] == [240, 240, 240]
    one_shot = iter(loader)
    with pytest.raises(TypeError, match=r"f: data is a one-shot iterator \(_SingleProcess"
                                        r"DataLoaderIter\), which cannot be iterated for 3 "
                                        r"epochs; pass a DataLoader, a list of batches or another "
                                        r"re-iterable object, or use epochs=1"):
        Batches("f", "data", one_shot, model=NET, batch_size=1, passes=3)
    assert len(collect(Batches("f", "data", one_shot, model=NET, batch_size=1))[1]) == 240


def test_head_is_the_first_examples_in_storage_order():
    X, y = blobs()
    for data in ((X, y), TensorDataset(X, y), PairItems(X, y)):
        head = Batches("f", "data", data, model=NET, batch_size=8, shuffle=True,
                       generator=gen()).head(30)
        torch.testing.assert_close(head[0], X[:30])
        assert torch.equal(head[1], y[:30])
    assert Batches("f", "data", [(X, y)], model=NET, batch_size=8).head(30) is None


def test_checks_of_a_batch():
    x, y = torch.rand(4, 2), torch.tensor([0, 1, 2, 1])
    check_inputs("f", x, y, (0.0, 1.0), False)
    with pytest.raises(ValueError, match=r"f: x contains NaN or infinity; remove or impute"):
        check_inputs("f", x.masked_fill(x > 0.5, float("nan")), y, None, False)
    with pytest.raises(ValueError, match=r"f: y must hold class labels >= 0, got -2"):
        check_inputs("f", x, torch.tensor([0, -2, 1, 1]), None, False)
    with pytest.raises(ValueError, match=r"f: y must have shape \(4,\) to match x of shape "
                                         r"\(4, 2\), got \(4, 3\)"):
        check_inputs("f", x, torch.zeros(4, 3), None, False)
    check_inputs("f", x, torch.zeros(4, 3), None, True)  # soft targets for a custom loss
    with pytest.raises(TypeError, match=r"f: x must be a floating-point tensor of shape "
                                        r"\(n, ...\), got list"):
        check_inputs("f", [[0.5]], y, None, False)
    with pytest.raises(TypeError, match=r"f: y must be a tensor of labels, got list"):
        check_inputs("f", x, [0, 1, 2, 1], None, False)
    with pytest.raises(ValueError, match=r"f: x must lie within bounds \(0.0, 0.5\)"):
        check_inputs("f", x + 0.6, y, (0.0, 0.5), False)
    check_labels("f", y, torch.zeros(4, 3))
    with pytest.raises(ValueError, match=r"f: y holds the label 2, but the model gives 2 logits; "
                                         r"labels must lie in \[0, 1\]"):
        check_labels("f", y, torch.zeros(4, 2))
    assert check_bounds("f", None) is None and check_bounds("f", [0, 1]) == (0.0, 1.0)
    with pytest.raises(ValueError, match=r"f: bounds must satisfy lo < hi, got \(1, 1\)"):
        check_bounds("f", (1, 1))


@pytest.mark.parametrize(("data", "error", "match"), [
    (torch.rand(4, 2), TypeError, r"f: data must be a DataLoader, an iterable of \(x, y\) "
                                  r"batches, a map-style Dataset of \(x, y\) items or a pair "
                                  r"\(X, y\) of tensors or arrays, got Tensor"),
    (np.zeros((4, 2)), TypeError, r"f: data must be a DataLoader, .* got ndarray"),
    ("xy", TypeError, r"f: data must be a DataLoader, .* got str"),
    (None, TypeError, r"f: data must be a DataLoader, .* got NoneType"),
    ((torch.rand(4, 2), torch.zeros(3)), ValueError,
     r"f: data must hold X \(n, ...\) and y \(n,\) with n >= 1, got \(4, 2\) and \(3,\)"),
    ((torch.rand(4, 2), np.array(["a", "b", "c", "d"], dtype=object)), TypeError,
     r"f: data must hold labels as a tensor or array, got ndarray"),
])
def test_bad_data(data, error, match):
    with pytest.raises(error, match=match):
        list(Batches("f", "data", data, model=NET, batch_size=2))
