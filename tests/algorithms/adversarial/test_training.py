"""Adversarial training and robustness evaluation: accuracies, history, determinism, errors."""

from __future__ import annotations

import contextlib
import functools

import numpy as np
import pytest
import torch
from adversarial_testutil import (
    DISABLE,
    PairItems,
    blobs,
    gen,
    tiny_batch,
    tiny_mlp,
    trained_digits_mlp,
)
from torch.utils.data import DataLoader, TensorDataset

from toolkit import disable_blocks
from toolkit.algorithms.adversarial import (
    CatastrophicOverfittingWarning,
    adversarial_training,
    evaluate_robustness,
    fgsm,
    pgd,
)

# --- evaluation and training ---------------------------------------------------------------


def test_evaluate_robustness_matches_direct_computation():
    net, X, y = trained_digits_mlp()
    attack = functools.partial(pgd, eps=0.1, alpha=0.02, steps=5, random_start=False)
    acc = evaluate_robustness(net, (X, y), {"fgsm": functools.partial(fgsm, eps=0.1),
                                            "pgd": attack}, batch_size=128)
    with torch.no_grad():
        clean = (net(X).argmax(1) == y).float().mean()
        robust = (net(attack(net, X, y)).argmax(1) == y).float().mean()
    assert acc["clean"] == pytest.approx(float(clean))
    assert acc["pgd"] == pytest.approx(float(robust))
    assert acc["worst_case"] <= min(acc["fgsm"], acc["pgd"]) <= acc["clean"]
    assert acc["pgd"] < acc["clean"] - 0.2  # an undefended model is not robust


@pytest.mark.parametrize("method", ["standard", "pgd", "fgsm_rs", "fgsm"])
def test_adversarial_training_history_and_determinism(method):
    data = blobs()

    def train():
        net = tiny_mlp(2, 16, 3)
        opt = torch.optim.Adam(net.parameters(), lr=0.02)
        seen = []
        hist = adversarial_training(net, data, opt, method=method, epochs=3, eps=0.05,
                                    batch_size=64, generator=gen(),
                                    callback=lambda e, r: seen.append((e, r["loss"])))
        return net, hist, seen

    net, hist, seen = train()
    assert hist.epoch == [0, 1, 2] and [e for e, _ in seen] == [0, 1, 2]
    for key in ("loss", "train_acc", "clean_acc", "robust_acc", "seconds",
                "catastrophic_overfitting"):
        assert len(getattr(hist, key)) == 3
    assert all(0 <= a <= 1 for a in hist.robust_acc + hist.clean_acc)
    assert hist.steps == {"standard": 0, "pgd": 10, "fgsm_rs": 1, "fgsm": 1}[method]
    assert hist.alpha == pytest.approx({"standard": 0.05, "pgd": 0.0125, "fgsm_rs": 0.0625,
                                        "fgsm": 0.05}[method])
    assert hist.loss[-1] < hist.loss[0]
    assert net.training
    net2, hist2, _ = train()
    assert hist2.loss == hist.loss
    assert all(torch.equal(a, b) for a, b in zip(net.parameters(), net2.parameters()))
    assert hist.to_dict()["overfitting_epoch"] is None


def test_pgd_training_gains_robustness_over_standard_training():
    data = blobs()
    results = {}
    for method in ("standard", "pgd"):
        net = tiny_mlp(2, 32, 3)
        opt = torch.optim.Adam(net.parameters(), lr=0.02)
        adversarial_training(net, data, opt, method=method, epochs=15, eps=0.12,
                             batch_size=60, generator=gen())
        attack = functools.partial(pgd, eps=0.12, alpha=0.03, steps=10, generator=gen(2))
        results[method] = evaluate_robustness(net, data, {"pgd": attack})["pgd"]
    assert results["pgd"] > results["standard"] + 0.1


def test_unblocked_linf_training_follows_the_same_trajectory():
    data = blobs()
    hist = {}
    for blocked in (True, False):
        net = tiny_mlp(2, 16, 3, dtype=torch.float64)
        opt = torch.optim.SGD(net.parameters(), lr=0.5)
        X, y = data
        with contextlib.nullcontext() if blocked else disable_blocks(*DISABLE):
            hist[blocked] = adversarial_training(net, (X.double(), y), opt, method="pgd",
                                                 epochs=2, eps=0.05, steps=3, batch_size=80,
                                                 generator=gen())
    assert hist[True].loss == pytest.approx(hist[False].loss, rel=1e-10)


def test_catastrophic_overfitting_is_flagged_and_can_stop_training(seed: int):
    data = blobs()
    net = tiny_mlp(2, 16, 3)
    opt = torch.optim.SGD(net.parameters(), lr=0.0)  # no learning: only the sabotage acts

    def sabotage(epoch, record):
        if epoch == 0:  # from now on the network predicts class 0 for every input
            with torch.no_grad():
                net[2].weight.zero_()
                net[2].bias.copy_(torch.tensor([10.0, 0.0, 0.0]))

    torch.manual_seed(seed)
    with pytest.warns(CatastrophicOverfittingWarning, match="catastrophic overfitting at epoch 1"):
        hist = adversarial_training(net, data, opt, method="fgsm", epochs=4, eps=0.05,
                                    generator=gen(), callback=sabotage, co_drop=0.2,
                                    stop_on_overfitting=True)
    assert hist.catastrophic_overfitting == [False, True]
    assert hist.overfitting_epoch == 1 and hist.stopped_early
    assert hist.robust_acc[0] > 0.5 and hist.robust_acc[1] < 0.4


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"method": "trades"}, r"adversarial_training: method must be one of 'standard', 'pgd', "
                           r"'fgsm_rs', 'fgsm', got 'trades'"),
    ({"eps": 0}, r"adversarial_training: eps must be a number > 0, got 0"),
    ({"alpha": -1.0}, r"adversarial_training: alpha must be None or a number > 0, got -1.0"),
    ({"steps": 0}, r"adversarial_training: steps must be None or an int >= 1, got 0"),
    ({"epochs": 0}, r"adversarial_training: epochs must be an int >= 1, got 0"),
    ({"norm": "linf2"}, r"adversarial_training: norm must be one of"),
    ({"data": (torch.rand(5, 2), torch.zeros(4, dtype=torch.long))},
     r"adversarial_training: data must hold X \(n, ...\) and y \(n,\)"),
    ({"data": (torch.rand(5, 2) + 2, torch.zeros(5, dtype=torch.long))},
     r"adversarial_training: x must lie within bounds"),
    ({"data": (torch.full((5, 2), float("nan")), torch.zeros(5, dtype=torch.long))},
     r"adversarial_training: x contains NaN or infinity; remove or impute those values"),
    ({"data": (torch.rand(5, 2), torch.tensor([0, 1, -1, 0, 1]))},
     r"adversarial_training: y must hold class labels >= 0, got -1"),
    ({"data": (torch.rand(5, 2), torch.tensor([0, 1, 2, 0, 1]))},
     r"adversarial_training: y holds the label 2, but the model gives 2 logits; labels must lie "
     r"in \[0, 1\]"),
    ({"check_data": (torch.rand(3, 2), torch.tensor([0, 1, 7]))},
     r"adversarial_training: y holds the label 7, but the model gives 2 logits"),
    ({"data": (torch.rand(5, 2), torch.tensor([0, 1, 0, 0, 4])), "batch_size": 2},
     r"adversarial_training: y holds the label 4"),  # in the last batch: found at the first
])
def test_adversarial_training_rejects_bad_input(kwargs, match):
    net = tiny_mlp(2, 4, 2)
    args = {"data": (torch.rand(5, 2), torch.zeros(5, dtype=torch.long))}
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        adversarial_training(net, args.pop("data"), torch.optim.SGD(net.parameters(), lr=0.1),
                             **args)


@pytest.mark.parametrize("method", ["standard", "pgd"])
def test_a_bad_label_anywhere_in_a_pair_stops_before_the_first_step(method):
    net = tiny_mlp(2, 4, 2)
    before = [p.detach().clone() for p in net.parameters()]
    y = torch.tensor([0, 1, 0, 0, 1, 0, 1, 2])  # the bad label sits in the last batch
    with pytest.raises(ValueError, match=r"adversarial_training: y holds the label 2, but the "
                                         r"model gives 2 logits"):
        adversarial_training(net, (torch.rand(8, 2), y), torch.optim.SGD(net.parameters(), lr=1.0),
                             method=method, batch_size=2, generator=gen())
    assert all(torch.equal(a, b) for a, b in zip(before, net.parameters()))


def test_evaluate_robustness_rejects_bad_input():
    net = tiny_mlp()
    x, y = tiny_batch()
    with pytest.raises(TypeError, match=r"evaluate_robustness: data must be a DataLoader, an "
                                        r"iterable of \(x, y\) batches, a map-style Dataset of "
                                        r"\(x, y\) items or a pair \(X, y\) of tensors or "
                                        r"arrays, got Tensor"):
        evaluate_robustness(net, x, {})
    with pytest.raises(ValueError, match=r"evaluate_robustness: x contains NaN or infinity"):
        evaluate_robustness(net, (x.masked_fill(x > 0.9, float("inf")), y), {})
    with pytest.raises(ValueError, match=r"evaluate_robustness: y holds the label 5, but the "
                                         r"model gives 3 logits"):
        evaluate_robustness(net, [(x, y), (x, y + 3)], {})  # found in the second batch
    with pytest.raises(ValueError, match=r"evaluate_robustness: data must hold at least one "
                                         r"example, got none"):
        evaluate_robustness(net, [], {})
    with pytest.raises(ValueError, match=r"evaluate_robustness: data must hold at least one "
                                         r"example, got none"):
        evaluate_robustness(net, [([], [])], {"fgsm": fgsm})  # one empty batch, no shape
    # an empty batch among others is skipped: the accuracies are those of the others
    empty = (x[:0], y[:0])
    assert evaluate_robustness(net, [empty, (x, y)], {}) == evaluate_robustness(net, (x, y), {})
    with pytest.raises(ValueError, match=r"evaluate_robustness: attack name 'clean' is reserved"):
        evaluate_robustness(net, (x, y), {"clean": fgsm})




# --- PyTorch data: DataLoader, Dataset, iterables of batches, pairs ---------------------------


def train(data, *, epochs=2, method="pgd", dtype=torch.float32, **kwargs):
    net = tiny_mlp(2, 16, 3, dtype=dtype)
    opt = torch.optim.SGD(net.parameters(), lr=0.3)
    hist = adversarial_training(net, data, opt, method=method, epochs=epochs, eps=0.05, steps=3,
                                batch_size=40, generator=gen(), **kwargs)
    return net, hist


def test_tensor_dataset_and_pair_give_the_same_run():
    X, y = blobs()
    net_a, hist_a = train((X, y))
    net_b, hist_b = train(TensorDataset(X, y))
    assert hist_a.loss == hist_b.loss and hist_a.robust_acc == hist_b.robust_acc
    assert all(torch.equal(a, b) for a, b in zip(net_a.parameters(), net_b.parameters()))


def test_numpy_pair_and_own_dataset_are_batched_in_the_model_dtype():
    X, y = blobs()
    _, hist_t = train((X.double(), y), dtype=torch.float64)
    _, hist_n = train((X.double().numpy(), y.numpy().astype(np.int32)), dtype=torch.float64)
    assert hist_n.loss == hist_t.loss  # arrays become tensors of the model's dtype, int64 labels
    # a Dataset of numpy items, shuffled by the generator like the pair: the same order
    _, hist_d = train(PairItems(X, y), dtype=torch.float64)
    assert hist_d.loss == pytest.approx(hist_t.loss, rel=1e-12)
    # float32 model, float64 arrays: cast to the model's dtype instead of a dtype error
    _, hist_32 = train((X.double().numpy(), y.numpy()))
    assert len(hist_32.loss) == 2


@pytest.mark.parametrize("kind", ["dataloader", "list", "generator"])
def test_iterables_of_batches_train_and_evaluate(kind):
    X, y = blobs()
    loader = DataLoader(TensorDataset(X, y), batch_size=48, shuffle=True, generator=gen(3))
    if kind == "dataloader":
        data, epochs = loader, 3
    elif kind == "list":
        data, epochs = [(X[i:i + 60], y[i:i + 60]) for i in range(0, 240, 60)], 3
    else:
        data, epochs = ((X[i:i + 60], y[i:i + 60]) for i in range(0, 240, 60)), 1
    net, hist = train(data, epochs=epochs, check_size=100)
    assert hist.epoch == list(range(epochs))
    if epochs > 1:
        assert hist.loss[-1] < hist.loss[0]
    # the default check set: the first 100 examples the first epoch drew, fixed afterwards
    assert all(0 <= a <= 1 for a in hist.clean_acc)
    attack = functools.partial(pgd, eps=0.05, alpha=0.02, steps=3, random_start=False)
    reference = evaluate_robustness(net, (X, y), {"pgd": attack}, batch_size=50)
    for same in (loader, TensorDataset(X, y), [(X[:100], y[:100]), (X[100:], y[100:])],
                 ((X[i:i + 7], y[i:i + 7]) for i in range(0, 240, 7))):
        assert evaluate_robustness(net, same, {"pgd": attack}) == pytest.approx(reference)


def test_one_shot_iterator_is_refused_for_several_epochs():
    X, y = blobs()
    batches = ((X[i:i + 60], y[i:i + 60]) for i in range(0, 240, 60))
    with pytest.raises(TypeError, match=r"adversarial_training: data is a one-shot iterator "
                                        r"\(generator\), which cannot be iterated for 2 epochs; "
                                        r"pass a DataLoader, a list of batches"):
        train(batches, epochs=2)
    _, hist = train(batches, epochs=1)  # one pass is fine, and nothing was consumed above
    assert hist.epoch == [0] and hist.loss[0] > 0


def test_check_data_of_any_kind():
    X, y = blobs()
    pair = (X[:90], y[:90])
    _, hist_pair = train((X, y), check_data=pair)
    _, hist_loader = train((X, y), check_data=DataLoader(TensorDataset(*pair), batch_size=32))
    _, hist_gen = train((X, y), epochs=2, check_data=(b for b in [pair]))  # read once
    assert hist_pair.robust_acc == hist_loader.robust_acc == hist_gen.robust_acc


@pytest.mark.parametrize(("data", "error", "match"), [
    ({"x": 1}, TypeError, r"adversarial_training: data must be a DataLoader, an iterable of "
                          r"\(x, y\) batches, a map-style Dataset of \(x, y\) items or a pair "
                          r"\(X, y\) of tensors or arrays, got dict"),
    (3, TypeError, r"adversarial_training: data must be a DataLoader, .* got int"),
    ([torch.rand(4, 2)], TypeError, r"adversarial_training: each batch \(or item\) of data must "
                                    r"be a pair \(x, y\), got Tensor"),
    ([(torch.rand(4, 2), torch.zeros(4, dtype=torch.long), 1)], TypeError,
     r"adversarial_training: each batch \(or item\) of data must be a pair \(x, y\), got tuple "
     r"of 3"),
    (TensorDataset(torch.rand(4, 2)), TypeError,
     r"adversarial_training: each item of data must be a pair \(x, y\), got tuple"),
    (PairItems(torch.rand(0, 2), torch.zeros(0)), ValueError,
     r"adversarial_training: data must hold at least one example, got an empty PairItems"),
    (TensorDataset(torch.rand(0, 2), torch.zeros(0)), ValueError,
     r"adversarial_training: data must hold X \(n, ...\) and y \(n,\) with n >= 1, got "
     r"\(0, 2\) and \(0,\)"),
    ([], ValueError, r"adversarial_training: data must hold at least one example, got none in "
                     r"epoch 0"),
    ([(torch.rand(4, 2), torch.tensor([0, 1, 0, 3]))], ValueError,
     r"adversarial_training: y holds the label 3, but the model gives 3 logits; labels must lie "
     r"in \[0, 2\]"),
    ([(torch.rand(4, 2), torch.zeros(4, dtype=torch.long)),
      (torch.tensor([[0.5, float("nan")]]), torch.zeros(1, dtype=torch.long))], ValueError,
     r"adversarial_training: x contains NaN or infinity"),
])
def test_bad_data_is_rejected_with_a_clear_error(data, error, match):
    with pytest.raises(error, match=match):
        train(data, epochs=1, method="standard")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_model_trains_on_cpu_data():
    X, y = blobs()
    net = tiny_mlp(2, 16, 3).cuda()
    loader = DataLoader(TensorDataset(X, y), batch_size=48, shuffle=True, generator=gen())
    hist = adversarial_training(net, loader, torch.optim.SGD(net.parameters(), lr=0.3),
                                epochs=2, eps=0.05, steps=3, generator=gen())
    assert hist.epoch == [0, 1] and next(net.parameters()).is_cuda
    acc = evaluate_robustness(net, TensorDataset(X, y), {})
    assert 0 <= acc["clean"] <= 1
