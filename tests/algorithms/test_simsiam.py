"""SimSiam with and without the stop-gradient on the target branch."""

from __future__ import annotations

import copy
import math
import pathlib
from contextlib import nullcontext

import pytest
import torch
from sklearn.neighbors import KNeighborsClassifier

from toolkit import disable_blocks, record_blocks
from toolkit.algorithms import simsiam as ss
from toolkit.lab.data import digits

F64 = torch.float64


def test_negative_cosine_value_and_what_the_target_receives(seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    p = torch.randn(5, 4, generator=g, dtype=F64, requires_grad=True)
    z = torch.randn(5, 4, generator=g, dtype=F64, requires_grad=True)
    cos = (p * z).sum(1) / (p.norm(dim=1) * z.norm(dim=1))
    with record_blocks() as seen:
        loss = ss.negative_cosine(p, z)
    assert seen == [ss.BLOCK] == ["simsiam.target"]
    torch.testing.assert_close(loss, -cos.mean())
    g_p, g_z = torch.autograd.grad(loss, [p, z], allow_unused=True, materialize_grads=True)
    assert g_z.abs().max() == 0
    # ∂cos/∂p = z/(|p||z|) − cos p/|p|², averaged and negated
    pn, zn = p.norm(dim=1, keepdim=True), z.norm(dim=1, keepdim=True)
    expected = -(z / (pn * zn) - cos[:, None] * p / pn**2) / 5
    torch.testing.assert_close(g_p, expected.detach(), rtol=1e-12, atol=1e-14)
    with disable_blocks("simsiam.*"):
        g_z = torch.autograd.grad(ss.negative_cosine(p, z), z)[0]
    expected_z = -(p / (pn * zn) - cos[:, None] * z / zn**2) / 5  # symmetric in p and z
    torch.testing.assert_close(g_z, expected_z.detach(), rtol=1e-12, atol=1e-14)


def test_the_block_changes_what_the_encoder_receives(seed: int) -> None:
    torch.manual_seed(seed)
    model = ss.SimSiam(16, hidden=8, dim=8, pred_hidden=4, dtype=F64)
    x1, x2 = torch.randn(2, 10, 16, dtype=F64, generator=torch.Generator().manual_seed(seed + 1))
    params = list(model.encoder.parameters())
    blocked = torch.autograd.grad(model(x1, x2), params)
    with disable_blocks(ss.BLOCK):
        unblocked = torch.autograd.grad(model(x1, x2), params)
    diff = sum(float((a - b).norm()) for a, b in zip(blocked, unblocked))
    assert diff > 1e-3 * sum(float(a.norm()) for a in blocked)


@pytest.mark.slow
def test_without_the_block_the_output_collapses(seed: int) -> None:
    X = digits().X[:256]
    torch.manual_seed(seed)
    model = ss.SimSiam(64, hidden=32, dim=16, pred_hidden=4)
    result = {}
    for variant in ("blocked", "unblocked"):
        m = copy.deepcopy(model)
        switch = disable_blocks("simsiam.*") if variant == "unblocked" else nullcontext()
        with switch:
            history = ss.train_simsiam(m, X, epochs=40, batch_size=64,
                                       generator=torch.Generator().manual_seed(seed))
        result[variant] = (history[-1]["loss"], ss.output_std(m.embed(X)[1]) * math.sqrt(16))
    # Chen & He, Figure 2: std·√d near 1 with the block; 0 and the loss at −1 without it.
    # After these 40 short epochs, over seeds 0-59 and 77: 0.69 to 1 with the block, 0.01 to
    # 0.32 without (still falling), losses −0.62 to −0.35 and −1 to −0.98; the spread is told
    # apart at the midpoint of the two regimes
    assert result["unblocked"][1] < 0.5 < result["blocked"][1]
    assert result["unblocked"][0] < -0.95 < result["blocked"][0]


def test_output_std_closed_forms(seed: int) -> None:
    z = torch.randn(20_000, 16, dtype=F64, generator=torch.Generator().manual_seed(seed))
    assert ss.output_std(z) == pytest.approx(1 / math.sqrt(16), rel=0.02)
    assert ss.output_std(torch.ones(10, 4) * torch.tensor([1.0, 2.0, 3.0, 4.0])) == 0.0


def test_knn_accuracy_against_scikit_learn(seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    train_X, test_X = torch.randn(200, 5, generator=g), torch.randn(80, 5, generator=g)
    train_y = (train_X[:, 0] + 0.5 * torch.randn(200, generator=g) > 0).long() + (
        train_X[:, 1] > 0.5).long()
    test_y = (test_X[:, 0] > 0).long() + (test_X[:, 1] > 0.5).long()
    for k in (1, 5, 10):
        ref = KNeighborsClassifier(k, metric="cosine", algorithm="brute").fit(
            train_X.numpy(), train_y.numpy()).score(test_X.numpy(), test_y.numpy())
        assert ss.knn_accuracy(train_X, train_y, test_X, test_y, k=k) == pytest.approx(ref)


def test_augment_shifts_masks_and_adds_noise(seed: int) -> None:
    x = torch.rand(6, 16, generator=torch.Generator().manual_seed(seed))
    same = ss.Augment((4, 4), max_shift=0, mask=0.0, noise=0.0)
    assert torch.equal(same(x, generator=torch.Generator()), x)
    shifted = ss.Augment((4, 4), max_shift=1, mask=0.0, noise=0.0)(
        x, generator=torch.Generator().manual_seed(seed + 1))
    padded = torch.nn.functional.pad(x.reshape(6, 4, 4), (1, 1, 1, 1))
    for i in range(6):  # each view is one of the 9 shifted crops of its image
        crops = [padded[i, dy:dy + 4, dx:dx + 4].reshape(16) for dy in range(3)
                 for dx in range(3)]
        assert any(torch.equal(shifted[i], c) for c in crops)
    masked = ss.Augment((4, 4), max_shift=0, mask=0.5, noise=0.0)(
        torch.ones(400, 16), generator=torch.Generator().manual_seed(seed + 2))
    assert float((masked == 0).double().mean()) == pytest.approx(0.5, abs=0.02)


def test_training_restores_the_mode_and_reports_each_epoch(seed: int) -> None:
    torch.manual_seed(seed)
    model = ss.SimSiam(64, hidden=8, dim=8, pred_hidden=4).eval()
    epochs = []
    ss.train_simsiam(model, digits().X[:40], epochs=2, batch_size=16,
                     generator=torch.Generator().manual_seed(seed),
                     callback=lambda epoch, row: epochs.append((epoch, set(row))))
    assert not model.training and epochs == [(1, {"loss"}), (2, {"loss"})]


def test_argument_errors() -> None:
    with pytest.raises(ValueError, match=r"negative_cosine: p and z must have the same shape "
                                         r"\(n, d\), got \(2, 3\) and \(2, 4\)"):
        ss.negative_cosine(torch.zeros(2, 3), torch.zeros(2, 4))
    with pytest.raises(ValueError, match="SimSiam: dim must be an int >= 1, got 0"):
        ss.SimSiam(4, dim=0)
    with pytest.raises(ValueError, match=r"Augment: mask must be a number in \[0, 1\), got 1"):
        ss.Augment(mask=1)
    with pytest.raises(ValueError, match=r"Augment: x must have shape \(n, 64\) for images of "
                                         r"8x8, got \(2, 10\)"):
        ss.Augment()(torch.zeros(2, 10), generator=torch.Generator())
    with pytest.raises(ValueError, match="knn_accuracy: test_X must have 3 columns like "
                                         "train_X, got 2"):
        ss.knn_accuracy(torch.zeros(5, 3), torch.zeros(5), torch.zeros(2, 2), torch.zeros(2))
    with pytest.raises(ValueError, match=r"knn_accuracy: train_y must hold one label per row "
                                         r"of train_X \(5\), got 4"):
        ss.knn_accuracy(torch.zeros(5, 3), torch.zeros(4), torch.zeros(2, 3), torch.zeros(2))
    with pytest.raises(ValueError, match="train_simsiam: batch_size must be an int >= 2, got 1"):
        ss.train_simsiam(ss.SimSiam(4), torch.zeros(4, 4), epochs=1, batch_size=1,
                         generator=torch.Generator())
    with pytest.raises(ValueError, match="train_simsiam: X must have at least 128 row"):
        ss.train_simsiam(ss.SimSiam(4), torch.zeros(4, 4), epochs=1,
                         generator=torch.Generator())
    with pytest.raises(ValueError, match="output_std: z must have at least 2 row"):
        ss.output_std(torch.zeros(1, 3))


def test_no_hand_made_cut_in_the_module() -> None:
    source = pathlib.Path(ss.__file__).read_text()
    for word in (".detach(", "is_block_disabled", "set_grad_enabled"):
        assert word not in source


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA device"))])
def test_model_is_created_on_the_cpu_and_trains_where_it_was_moved(device: str, seed: int) -> None:
    # like any nn.Module: created on the CPU whatever devices exist; the data follow the model
    m = ss.SimSiam(16, hidden=8, dim=4, pred_hidden=2)
    assert all(p.device.type == "cpu" for p in m.parameters())
    m = m.to(device)
    X = torch.rand(32, 16)  # on the CPU
    rows = ss.train_simsiam(m, X, epochs=2, batch_size=16,
                            augment=ss.Augment((4, 4), max_shift=1, mask=0.1, noise=0.05),
                            generator=torch.Generator().manual_seed(seed))
    assert len(rows) == 2 and all(math.isfinite(v) for v in rows[-1].values())
    assert all(p.device.type == device for p in m.parameters())
