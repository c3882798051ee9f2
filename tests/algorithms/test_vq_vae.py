"""VQ-VAE's three cuts: what reaches the encoder and the codebook with and without each."""

from __future__ import annotations

import math
import pathlib

import pytest
import torch

from toolkit import disable_blocks, record_blocks
from toolkit.algorithms import vq_vae as vq

F64 = torch.float64


@pytest.fixture()
def model() -> vq.VQVAE:
    torch.manual_seed(0)
    m = vq.VQVAE(12, n_latents=2, latent_dim=3, n_codes=5, hidden=16, dtype=F64)
    m.init_codebook(torch.randn(20, 12, dtype=F64), generator=torch.Generator().manual_seed(0))
    return m


def test_nearest_codes_against_cdist(seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    z, codebook = torch.randn(7, 3, 4, generator=g), torch.randn(6, 4, generator=g)
    expected = torch.cdist(z.reshape(-1, 4), codebook).argmin(1).reshape(7, 3)
    assert torch.equal(vq.nearest_codes(z, codebook), expected)


def test_straight_through_copies_the_gradient_and_without_it_nothing_reaches_z_e(seed: int) -> None:
    g = torch.Generator().manual_seed(seed + 1)
    z_e = torch.randn(4, 2, 3, generator=g, dtype=F64, requires_grad=True)
    codebook = torch.randn(5, 3, generator=g, dtype=F64, requires_grad=True)
    upstream = torch.randn(4, 2, 3, generator=g, dtype=F64)
    z_q, e, idx = vq.quantize(z_e, codebook)
    assert torch.equal(e, codebook[idx]) and torch.allclose(z_q, e, rtol=0, atol=1e-15)
    gz, gc = torch.autograd.grad((z_q * upstream).sum(), [z_e, codebook], allow_unused=True,
                                 materialize_grads=True)
    assert torch.equal(gz, upstream) and gc.abs().max() == 0  # identity to z_e, none to codes
    with disable_blocks(vq.BLOCK):
        z_q, _, idx = vq.quantize(z_e, codebook)
        gz, gc = torch.autograd.grad((z_q * upstream).sum(), [z_e, codebook])
    assert torch.count_nonzero(gz) == 0  # exactly zero: I − I
    expected = torch.zeros_like(codebook).index_add_(0, idx.reshape(-1), upstream.reshape(-1, 3))
    torch.testing.assert_close(gc, expected, rtol=1e-14, atol=0)  # to the chosen codes


def test_codebook_and_commitment_cuts(seed: int) -> None:
    g = torch.Generator().manual_seed(seed + 2)
    z_e = torch.randn(6, 3, generator=g, dtype=F64, requires_grad=True)
    e = torch.randn(6, 3, generator=g, dtype=F64, requires_grad=True)
    diff = (z_e - e).detach()
    m = 6  # latent vectors averaged over
    with record_blocks() as seen:
        codebook, commitment = vq.vq_losses(z_e, e)
    assert seen == [vq.CODEBOOK_BLOCK, vq.COMMITMENT_BLOCK]
    torch.testing.assert_close(codebook, (diff**2).sum(1).mean())
    torch.testing.assert_close(codebook, commitment)  # the same value, different gradients
    ge = torch.autograd.grad(codebook, [z_e, e], allow_unused=True, materialize_grads=True)
    assert ge[0].abs().max() == 0 and torch.allclose(ge[1], -2 * diff / m)
    gc = torch.autograd.grad(commitment, [z_e, e], allow_unused=True, materialize_grads=True)
    assert torch.allclose(gc[0], 2 * diff / m) and gc[1].abs().max() == 0
    with disable_blocks(vq.CODEBOOK_BLOCK, vq.COMMITMENT_BLOCK):
        codebook, commitment = vq.vq_losses(z_e, e)
    for loss in (codebook, commitment):
        g_z, g_e = torch.autograd.grad(loss, [z_e, e])
        assert torch.allclose(g_z, 2 * diff / m) and torch.allclose(g_e, -2 * diff / m)


def test_the_encoder_gets_exactly_zero_reconstruction_gradient_without_the_block(
        model: vq.VQVAE, seed: int) -> None:
    x = torch.randn(8, 12, dtype=F64, generator=torch.Generator().manual_seed(seed + 3))
    with record_blocks() as seen:
        blocked = vq.encoder_recon_grad_norm(model, x)
    assert set(seen) == {vq.BLOCK, vq.CODEBOOK_BLOCK, vq.COMMITMENT_BLOCK}
    with disable_blocks(vq.BLOCK):
        unblocked = vq.encoder_recon_grad_norm(model, x)
    assert blocked > 1e-3 and unblocked == 0.0
    # with the block the encoder's gradient is the decoder's gradient at z_q, copied to z_e
    out = model(x)
    z_q = out.z_q.detach().requires_grad_(True)
    (g_zq,) = torch.autograd.grad(torch.nn.functional.mse_loss(model.decode(z_q), x), z_q)
    (g_ze,) = torch.autograd.grad(out.recon, out.z_e)
    torch.testing.assert_close(g_ze, g_zq, rtol=1e-12, atol=1e-15)


def test_perplexity_closed_forms() -> None:
    assert vq.perplexity(torch.arange(8), 8) == pytest.approx(8.0)
    assert vq.perplexity(torch.zeros(5, dtype=torch.long), 8) == pytest.approx(1.0)
    # usage (½, ¼, ¼): exp(H) = exp(1.5 log 2) = 2√2
    assert vq.perplexity(torch.tensor([0, 0, 1, 2]), 4) == pytest.approx(2 * math.sqrt(2))


def test_training_lowers_the_loss_and_reports_each_epoch(model: vq.VQVAE, seed: int) -> None:
    X = torch.rand(64, 12, dtype=F64, generator=torch.Generator().manual_seed(seed + 4))
    seen = []
    history = vq.train_vq_vae(model, X, epochs=15, batch_size=16, lr=3e-3,
                              generator=torch.Generator().manual_seed(seed),
                              callback=lambda epoch, row: seen.append(epoch))
    assert seen == list(range(1, 16)) and len(history) == 15
    assert history[-1]["recon"] < 0.5 * history[0]["recon"]
    assert set(history[0]) == {"loss", "recon", "codebook", "commitment"}


def test_argument_errors(model: vq.VQVAE) -> None:
    with pytest.raises(ValueError, match="VQVAE: n_codes must be an int >= 1, got 0"):
        vq.VQVAE(4, n_codes=0)
    with pytest.raises(TypeError, match=r"VQVAE: dtype must be a floating torch\.dtype"):
        vq.VQVAE(4, dtype="float32")
    with pytest.raises(ValueError, match=r"quantize: codebook must have shape \(n_codes, 3\) "
                                         r"with n_codes >= 1 for z_e of shape \(2, 3\), got "
                                         r"\(5, 2\)"):
        vq.quantize(torch.zeros(2, 3), torch.zeros(5, 2))
    with pytest.raises(ValueError, match="train_vq_vae: lr must be a number > 0, got 0"):
        vq.train_vq_vae(model, torch.zeros(4, 12), epochs=1, lr=0,
                        generator=torch.Generator())
    with pytest.raises(ValueError, match="train_vq_vae: X must be 2-D, got shape"):
        vq.train_vq_vae(model, torch.zeros(12), epochs=1, generator=torch.Generator())
    with pytest.raises(ValueError, match=r"VQVAE\.init_codebook: x must give at least n_codes "
                                         r"= 5 latent vectors, got 4"):
        model.init_codebook(torch.zeros(2, 12, dtype=F64), generator=torch.Generator())
    with pytest.raises(ValueError, match="perplexity: n_codes must be an int >= 1, got 0"):
        vq.perplexity(torch.zeros(1, dtype=torch.long), 0)


def test_no_hand_made_cut_in_the_module() -> None:
    source = pathlib.Path(vq.__file__).read_text()
    for word in (".detach(", "is_block_disabled", "set_grad_enabled"):
        assert word not in source


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA device"))])
def test_model_is_created_on_the_cpu_and_trains_where_it_was_moved(device: str, seed: int) -> None:
    # like any nn.Module: created on the CPU whatever devices exist; the data follow the model
    m = vq.VQVAE(12, n_latents=2, latent_dim=3, n_codes=5, hidden=16)
    assert all(p.device.type == "cpu" for p in m.parameters())
    m = m.to(device)
    X = torch.rand(40, 12)  # on the CPU
    m.init_codebook(X.to(device), generator=torch.Generator().manual_seed(seed))
    rows = vq.train_vq_vae(m, X, epochs=2, batch_size=16, generator=torch.Generator().manual_seed(seed))
    assert len(rows) == 2 and all(math.isfinite(v) for v in rows[-1].values())
    assert all(p.device.type == device for p in m.parameters())
