"""Adversarial training and robustness evaluation: accuracies, history, determinism, errors."""

from __future__ import annotations

import contextlib
import functools

import pytest
import torch
from adversarial_testutil import DISABLE, blobs, gen, tiny_batch, tiny_mlp, trained_digits_mlp

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


def test_catastrophic_overfitting_is_flagged_and_can_stop_training():
    data = blobs()
    net = tiny_mlp(2, 16, 3)
    opt = torch.optim.SGD(net.parameters(), lr=0.0)  # no learning: only the sabotage acts

    def sabotage(epoch, record):
        if epoch == 0:  # from now on the network predicts class 0 for every input
            with torch.no_grad():
                net[2].weight.zero_()
                net[2].bias.copy_(torch.tensor([10.0, 0.0, 0.0]))

    torch.manual_seed(0)
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
])
def test_adversarial_training_rejects_bad_input(kwargs, match):
    net = tiny_mlp(2, 4, 2)
    args = {"data": (torch.rand(5, 2), torch.zeros(5, dtype=torch.long))}
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        adversarial_training(net, args.pop("data"), torch.optim.SGD(net.parameters(), lr=0.1),
                             **args)


def test_evaluate_robustness_rejects_bad_input():
    net = tiny_mlp()
    x, y = tiny_batch()
    with pytest.raises(TypeError, match=r"evaluate_robustness: data must be a pair \(X, y\)"):
        evaluate_robustness(net, x, {})
    with pytest.raises(ValueError, match=r"evaluate_robustness: attack name 'clean' is reserved"):
        evaluate_robustness(net, (x, y), {"clean": fgsm})


