"""LightningModules written from public code, tiny, for the callback's tests.

Each keeps the structure (and the bug) of the code it cites; sizes are cut to a few units so
that a ``fit`` of three batches takes well under a second.
"""

from __future__ import annotations

import torch
from lightning.pytorch import LightningModule
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

N_FEATURES, N_LATENT = 6, 3


def loader(seed: int, n_batches: int = 3, batch_size: int = 8) -> DataLoader:
    """``(src, drv)`` pairs (images of the pose-transfer GAN, flattened), in a fixed order."""
    g = torch.Generator().manual_seed(seed)
    n = n_batches * batch_size
    data = TensorDataset(torch.randn(n, N_FEATURES, generator=g),
                         torch.randn(n, N_FEATURES, generator=g))
    return DataLoader(data, batch_size=batch_size, shuffle=False)


class Generator(nn.Module):
    """``generator(src_img, drv_img)``: a small MLP on both images, with BatchNorm and dropout
    so that the state the audit must put back is real."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2 * N_FEATURES, 16), nn.BatchNorm1d(16), nn.ReLU(),
                                 nn.Dropout(0.2), nn.Linear(16, N_FEATURES), nn.Tanh())

    def forward(self, src: torch.Tensor, drv: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([src, drv], dim=1))


class Discriminator(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(N_FEATURES, 16), nn.LeakyReLU(0.2), nn.Dropout(0.2),
                                 nn.Linear(16, 1))

    def forward(self, img: torch.Tensor) -> torch.Tensor:
        return self.net(img)


class PoseGAN(LightningModule):
    """Manual optimization as in the ``training_step`` of Lightning-AI/pytorch-lightning#20034
    ("GAN training crashes with unused parameters"): the generator's image is made once,
    the discriminator is stepped on ``gen_img.detach()`` with ``retain_graph=True``, then the
    generator on ``gen_img``; each ``zero_grad`` comes before its ``manual_backward``.
    ``detach_fake=False`` is the bug the audit must catch: the discriminator's loss then
    reaches the generator. (The issue's DDP error came from the correct version: see
    :func:`toolkit.explain_unused_parameters`.)
    """

    def __init__(self, detach_fake: bool = True, lr: float = 0.05) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.detach_fake, self.lr = detach_fake, lr
        self.generator, self.discriminator = Generator(), Discriminator()

    def gan_loss(self, drv_img: torch.Tensor, gen_img: torch.Tensor, opt_d: bool
                 ) -> dict[str, torch.Tensor]:
        fake = self.discriminator(gen_img)
        if opt_d:
            real = self.discriminator(drv_img)
            err = (F.binary_cross_entropy_with_logits(real, torch.ones_like(real))
                   + F.binary_cross_entropy_with_logits(fake, torch.zeros_like(fake)))
            return {"errD": err}
        return {"errG_GAN": F.binary_cross_entropy_with_logits(fake, torch.ones_like(fake))}

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        g_opt, d_opt = self.optimizers()
        src_img, drv_img = batch
        gen_img = self.generator(src_img, drv_img)

        fake = gen_img.detach() if self.detach_fake else gen_img
        errD = self.gan_loss(drv_img, fake, opt_d=True)["errD"]
        d_opt.zero_grad(set_to_none=True)
        self.manual_backward(errD, retain_graph=True)
        d_opt.step()

        errG = self.gan_loss(drv_img, gen_img, opt_d=False)["errG_GAN"] \
            + F.l1_loss(gen_img, drv_img)
        g_opt.zero_grad(set_to_none=True)
        self.manual_backward(errG)
        g_opt.step()
        self.log_dict({"errD": errD, "errG": errG})

    def configure_optimizers(self) -> list[torch.optim.Optimizer]:
        return [torch.optim.Adam(self.generator.parameters(), lr=self.lr),
                torch.optim.Adam(self.discriminator.parameters(), lr=self.lr)]


class TutorialGAN(LightningModule):
    """The ``training_step`` of Lightning's basic GAN tutorial (Lightning-AI/tutorials,
    ``lightning_examples/basic-gan``; the module of Lightning-AI/pytorch-lightning#20328):
    ``toggle_optimizer`` around each network's step, the generator stepped first, the fake
    batch made again inside the discriminator's step. ``detach_fake=False`` forgets the
    ``detach`` there, which is harmless *because* of the toggle: the generator does not
    require grad while it is recomputed, so no graph reaches it.
    """

    def __init__(self, detach_fake: bool = True) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.detach_fake = detach_fake
        self.generator = nn.Sequential(nn.Linear(N_LATENT, 16), nn.LeakyReLU(0.2),
                                       nn.Linear(16, N_FEATURES), nn.Tanh())
        self.discriminator = Discriminator()

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.generator(z)

    def adversarial_loss(self, y_hat: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.binary_cross_entropy_with_logits(y_hat, y)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor]) -> None:
        imgs, _ = batch
        optimizer_g, optimizer_d = self.optimizers()
        z = torch.randn(imgs.shape[0], N_LATENT).type_as(imgs)

        self.toggle_optimizer(optimizer_g)
        self.generated_imgs = self(z)
        valid = torch.ones(imgs.size(0), 1).type_as(imgs)
        g_loss = self.adversarial_loss(self.discriminator(self(z)), valid)
        self.log("g_loss", g_loss, prog_bar=True)
        self.manual_backward(g_loss)
        optimizer_g.step()
        optimizer_g.zero_grad()
        self.untoggle_optimizer(optimizer_g)

        self.toggle_optimizer(optimizer_d)
        real_loss = self.adversarial_loss(self.discriminator(imgs), valid)
        fake = torch.zeros(imgs.size(0), 1).type_as(imgs)
        fake_imgs = self(z).detach() if self.detach_fake else self(z)
        fake_loss = self.adversarial_loss(self.discriminator(fake_imgs), fake)
        d_loss = (real_loss + fake_loss) / 2
        self.log("d_loss", d_loss, prog_bar=True)
        self.manual_backward(d_loss)
        optimizer_d.step()
        optimizer_d.zero_grad()
        self.untoggle_optimizer(optimizer_d)

    def configure_optimizers(self) -> list[torch.optim.Optimizer]:
        return [torch.optim.Adam(self.generator.parameters(), lr=0.01),
                torch.optim.Adam(self.discriminator.parameters(), lr=0.01)]


class BoringModel(LightningModule):
    """Automatic optimization, from the example in Lightning-AI/pytorch-lightning#18457: a
    second layer defined next to the first and never used by ``training_step`` (its term is
    commented out of the loss), while ``configure_optimizers`` passes every parameter. Under
    DDP this is the "parameters that were not used in producing the loss" error;
    ``use_layer2=True`` is the fixed twin. A BatchNorm and dropout give the audit state to
    put back.
    """

    def __init__(self, use_layer2: bool = False) -> None:
        super().__init__()
        self.use_layer2 = use_layer2
        self.layer = nn.Sequential(nn.Linear(N_FEATURES, 8), nn.BatchNorm1d(8), nn.Dropout(0.3),
                                   nn.Linear(8, 2))
        # this layer 2 is "unused"
        self.layer2 = nn.Linear(N_FEATURES, 2)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int
                      ) -> dict[str, torch.Tensor]:
        x, _ = batch
        loss = self.layer(x).pow(2).sum()
        if self.use_layer2:
            loss = loss + self.layer2(x).pow(2).sum()
        self.log("loss", loss)
        return {"loss": loss}

    def configure_optimizers(self) -> torch.optim.Optimizer:
        # note: we are passing in all params, including the one that is not used
        return torch.optim.SGD(self.parameters(), lr=0.01)


class ClosureGAN(LightningModule):
    """The "more advanced example" of ``LightningOptimizer.step``'s docstring (Lightning,
    ``lightning/pytorch/core/optimizer.py``): each network's loss is computed and
    backpropagated inside a closure handed to ``opt.step(closure=...)``, under
    ``opt.toggle_model()``, with gradients accumulated over two batches. The generator's
    closure calls ``loss.backward()`` itself instead of ``manual_backward`` (which Lightning
    allows without mixed precision): the audit must record both without running them.
    """

    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.generator = nn.Sequential(nn.Linear(N_LATENT, 16), nn.Tanh(),
                                       nn.Linear(16, N_FEATURES))
        self.discriminator = Discriminator()

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        opt_gen, opt_dis = self.optimizers()
        real, _ = batch
        z = torch.randn(real.shape[0], N_LATENT)
        accumulated_grad_batches = batch_idx % 2 == 0

        def closure_gen() -> None:
            loss_gen = F.softplus(-self.discriminator(self.generator(z))).mean()
            loss_gen.backward()
            if accumulated_grad_batches:
                opt_gen.zero_grad()

        with opt_gen.toggle_model(sync_grad=accumulated_grad_batches):
            opt_gen.step(closure=closure_gen)

        def closure_dis() -> None:
            fake = self.generator(z).detach()
            loss_dis = (F.softplus(-self.discriminator(real))
                        + F.softplus(self.discriminator(fake))).mean()
            self.manual_backward(loss_dis)
            if accumulated_grad_batches:
                opt_dis.zero_grad()

        with opt_dis.toggle_model(sync_grad=accumulated_grad_batches):
            opt_dis.step(closure=closure_dis)

    def configure_optimizers(self) -> list[torch.optim.Optimizer]:
        return [torch.optim.SGD(self.generator.parameters(), lr=0.1, momentum=0.9),
                torch.optim.SGD(self.discriminator.parameters(), lr=0.1, momentum=0.9)]


class SkipsFirstBatch(BoringModel):
    """Lightning skips a batch whose ``training_step`` returns ``None`` (its documented way to
    skip one); the audit then moves to the next batch."""

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int
                      ) -> dict[str, torch.Tensor] | None:
        return None if batch_idx == 0 else super().training_step(batch, batch_idx)
