"""Self- and semi-supervised steps from public code: SimCLR's InfoNCE, FixMatch's confident
pseudo-labels (and a soft pseudo-label kept with its graph), VQ-VAE-2's two codebooks updated
as exponential moving averages, CLIP's contrastive loss with a learned temperature.

Each builder takes ``seed`` and returns a :class:`RealCase`; the text is ours, the structure
(modules, optimizers, order of calls, bug) is the repository's.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

import torch
from realcode_common import RealCase
from torch import nn
from torch.nn import functional as F

# --- sthalles/SimCLR simclr.py, models/resnet_simclr.py, run.py@1848fc934ad844ae630e6c452300433fe
# 99acfd9: the backbone's fc replaced by Linear-ReLU-fc (the projection head), both views in one
# batch, info_nce_loss builds the positives and negatives from the similarity matrix with the
# diagonal removed, cross-entropy against index 0; Adam with weight decay. A four-layer convnet
# stands in for the ResNet-18.


class SimCLRNet(nn.Module):
    def __init__(self, out_dim: int = 4, width: int = 6) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, width, 3, padding=1, bias=False),
                                      nn.BatchNorm2d(width), nn.ReLU(inplace=True),
                                      nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.fc = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, out_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.backbone(x))


def simclr(seed: int, *, batch_size: int = 3, n_views: int = 2, temperature: float = 0.07
           ) -> RealCase:
    torch.manual_seed(seed)
    model = SimCLRNet()
    optimizer = torch.optim.Adam(model.parameters(), 3e-4, weight_decay=1e-4)
    criterion = nn.CrossEntropyLoss()
    views = [torch.randn(batch_size, 3, 6, 6) for _ in range(n_views)]

    def info_nce_loss(features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        labels = torch.cat([torch.arange(batch_size) for _ in range(n_views)], dim=0)
        labels = (labels.unsqueeze(0) == labels.unsqueeze(1)).float()
        features = F.normalize(features, dim=1)
        similarity_matrix = torch.matmul(features, features.T)
        mask = torch.eye(labels.shape[0], dtype=torch.bool)
        labels = labels[~mask].view(labels.shape[0], -1)
        similarity_matrix = similarity_matrix[~mask].view(similarity_matrix.shape[0], -1)
        positives = similarity_matrix[labels.bool()].view(labels.shape[0], -1)
        negatives = similarity_matrix[~labels.bool()].view(similarity_matrix.shape[0], -1)
        logits = torch.cat([positives, negatives], dim=1)
        return logits / temperature, torch.zeros(logits.shape[0], dtype=torch.long)

    def step() -> torch.Tensor:
        images = torch.cat([v + 0.1 * torch.randn_like(v) for v in views], dim=0)
        logits, labels = info_nce_loss(model(images))
        return criterion(logits, labels)

    return RealCase("simclr", "sthalles/SimCLR simclr.py@1848fc934ad844ae630e6c452300433fe99acfd9",
                    "https://arxiv.org/abs/2002.05709 (Chen et al. 2020, the NT-Xent loss it "
                    "implements)", "correct", step, optimizer, {"model": model})


# --- kekmodel/FixMatch-pytorch train.py, models/ema.py@040be3b8950300b052f810df31a0c6c09561e09f:
# labeled, weakly and strongly augmented unlabeled images interleaved in one batch; the pseudo-
# label is softmax(logits_u_w.detach() / T), kept where its maximum passes the threshold; SGD
# (nesterov) with no weight decay on biases and BatchNorm; ModelEMA updated after the step
# under no_grad. The soft twin is ours: the unlabeled loss is the cross-entropy against the
# whole sharpened distribution, written without the detach, as the pseudo-labels of
# AlanChou/Deep-Co-Training-for-Semi-Supervised-Image-Recognition were until #1 ("a detach
# operation is indeed needed"): the target is then trained (truth "targets").


def interleave(x: torch.Tensor, size: int) -> torch.Tensor:
    s = list(x.shape)
    return x.reshape([-1, size, *s[1:]]).transpose(0, 1).reshape([-1, *s[1:]])


def de_interleave(x: torch.Tensor, size: int) -> torch.Tensor:
    s = list(x.shape)
    return x.reshape([size, -1, *s[1:]]).transpose(0, 1).reshape([-1, *s[1:]])


class TinyWideResNet(nn.Module):
    def __init__(self, num_classes: int = 3, width: int = 4) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width, momentum=0.001)
        self.conv2 = nn.Conv2d(width, width, 3, stride=2, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width, momentum=0.001)
        self.fc = nn.Linear(width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.leaky_relu(self.bn1(self.conv1(x)), 0.1)
        x = F.leaky_relu(self.bn2(self.conv2(x)), 0.1)
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


def fixmatch(seed: int, *, soft: bool = False, batch_size: int = 2, mu: int = 2,
             T: float = 1.0, threshold: float = 0.95, lambda_u: float = 1.0,
             ema_decay: float = 0.999) -> RealCase:
    torch.manual_seed(seed)
    model = TinyWideResNet()
    no_decay = ["bias", "bn"]
    grouped_parameters = [
        {"params": [p for n, p in model.named_parameters()
                    if not any(nd in n for nd in no_decay)], "weight_decay": 5e-4},
        {"params": [p for n, p in model.named_parameters()
                    if any(nd in n for nd in no_decay)], "weight_decay": 0.0}]
    optimizer = torch.optim.SGD(grouped_parameters, lr=0.03, momentum=0.9, nesterov=True)
    ema = copy.deepcopy(model).eval()  # ModelEMA
    for p in ema.parameters():
        p.requires_grad_(False)
    inputs_x, targets_x = torch.randn(batch_size, 3, 6, 6), torch.randint(0, 3, (batch_size,))
    inputs_u = torch.randn(mu * batch_size, 3, 6, 6)

    def ema_update() -> None:
        with torch.no_grad():
            msd, esd = model.state_dict(), ema.state_dict()
            for k, _ in ema.named_parameters():
                esd[k].copy_(esd[k] * ema_decay + (1.0 - ema_decay) * msd[k].detach())
            for k, _ in ema.named_buffers():
                esd[k].copy_(msd[k])

    def step() -> torch.Tensor:
        inputs_u_w = inputs_u + 0.05 * torch.randn_like(inputs_u)
        inputs_u_s = inputs_u + 0.5 * torch.randn_like(inputs_u)
        inputs = interleave(torch.cat((inputs_x, inputs_u_w, inputs_u_s)), 2 * mu + 1)
        logits = de_interleave(model(inputs), 2 * mu + 1)
        logits_x = logits[:batch_size]
        logits_u_w, logits_u_s = logits[batch_size:].chunk(2)
        Lx = F.cross_entropy(logits_x, targets_x, reduction="mean")
        if soft:
            pseudo_label = torch.softmax(logits_u_w / T, dim=-1)  # audit: fix here
            max_probs, _ = torch.max(pseudo_label, dim=-1)
            mask = max_probs.ge(threshold).float()
            Lu = (-(pseudo_label * F.log_softmax(logits_u_s, dim=-1)).sum(-1) * mask).mean()
        else:
            pseudo_label = torch.softmax(logits_u_w.detach() / T, dim=-1)
            max_probs, targets_u = torch.max(pseudo_label, dim=-1)
            mask = max_probs.ge(threshold).float()
            Lu = (F.cross_entropy(logits_u_s, targets_u, reduction="none") * mask).mean()
        ema_update()  # after optimizer.step() in train.py
        return Lx + lambda_u * Lu

    return RealCase(f"fixmatch{'_soft_no_detach' if soft else ''}",
                    "kekmodel/FixMatch-pytorch train.py@040be3b8950300b052f810df31a0c6c09561e09f",
                    "https://github.com/AlanChou/Deep-Co-Training-for-Semi-Supervised-Image-"
                    "Recognition/issues/1" if soft else "https://arxiv.org/abs/2001.07685 "
                    "(Sohn et al. 2020, eq. 2: the pseudo-label is a stop-gradient argmax)",
                    "targets" if soft else "correct", step, optimizer,
                    {"model": model, "ema": ema})


# --- rosinality/vq-vae-2-pytorch vqvae.py, train_vqvae.py@ef5f67c46f93624163776caec9e0d95063910eca:
# two levels (top and bottom), each Quantize keeps its codebook as buffers (embed, cluster_size,
# embed_avg) updated by exponential moving averages through .data, the straight-through
# estimator input + (quantize - input).detach(), the commitment loss (quantize.detach() -
# input)^2; loss = MSE(reconstruction) + 0.25 * latent loss; Adam over model.parameters().


class Quantize(nn.Module):
    def __init__(self, dim: int, n_embed: int, decay: float = 0.99, eps: float = 1e-5) -> None:
        super().__init__()
        self.dim, self.n_embed, self.decay, self.eps = dim, n_embed, decay, eps
        embed = torch.randn(dim, n_embed)
        self.register_buffer("embed", embed)
        self.register_buffer("cluster_size", torch.zeros(n_embed))
        self.register_buffer("embed_avg", embed.clone())

    def forward(self, input: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        flatten = input.reshape(-1, self.dim)
        dist = (flatten.pow(2).sum(1, keepdim=True) - 2 * flatten @ self.embed
                + self.embed.pow(2).sum(0, keepdim=True))
        _, embed_ind = (-dist).max(1)
        embed_onehot = F.one_hot(embed_ind, self.n_embed).type(flatten.dtype)
        embed_ind = embed_ind.view(*input.shape[:-1])
        quantize = F.embedding(embed_ind, self.embed.transpose(0, 1))
        if self.training:
            embed_onehot_sum = embed_onehot.sum(0)
            embed_sum = flatten.transpose(0, 1) @ embed_onehot
            self.cluster_size.data.mul_(self.decay).add_(embed_onehot_sum, alpha=1 - self.decay)
            self.embed_avg.data.mul_(self.decay).add_(embed_sum, alpha=1 - self.decay)
            n = self.cluster_size.sum()
            cluster_size = (self.cluster_size + self.eps) / (n + self.n_embed * self.eps) * n
            self.embed.data.copy_(self.embed_avg / cluster_size.unsqueeze(0))
        diff = (quantize.detach() - input).pow(2).mean()
        quantize = input + (quantize - input).detach()
        return quantize, diff, embed_ind


class VQVAE(nn.Module):
    """Two-level VQ-VAE with one residual-free convolution per encoder and decoder stage."""

    def __init__(self, channel: int = 4, embed_dim: int = 3, n_embed: int = 5) -> None:
        super().__init__()
        self.enc_b = nn.Sequential(nn.Conv2d(3, channel, 4, stride=2, padding=1), nn.ReLU(),
                                   nn.Conv2d(channel, channel, 4, stride=2, padding=1),
                                   nn.ReLU())
        self.enc_t = nn.Sequential(nn.Conv2d(channel, channel, 4, stride=2, padding=1),
                                   nn.ReLU())
        self.quantize_conv_t = nn.Conv2d(channel, embed_dim, 1)
        self.quantize_t = Quantize(embed_dim, n_embed)
        self.dec_t = nn.Sequential(nn.Conv2d(embed_dim, channel, 3, padding=1), nn.ReLU(),
                                   nn.ConvTranspose2d(channel, embed_dim, 4, stride=2,
                                                      padding=1))
        self.quantize_conv_b = nn.Conv2d(embed_dim + channel, embed_dim, 1)
        self.quantize_b = Quantize(embed_dim, n_embed)
        self.upsample_t = nn.ConvTranspose2d(embed_dim, embed_dim, 4, stride=2, padding=1)
        self.dec = nn.Sequential(nn.Conv2d(2 * embed_dim, channel, 3, padding=1), nn.ReLU(),
                                 nn.ConvTranspose2d(channel, channel, 4, stride=2, padding=1),
                                 nn.ReLU(),
                                 nn.ConvTranspose2d(channel, 3, 4, stride=2, padding=1))

    def forward(self, input: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        enc_b = self.enc_b(input)
        enc_t = self.enc_t(enc_b)
        quant_t, diff_t, _ = self.quantize_t(self.quantize_conv_t(enc_t).permute(0, 2, 3, 1))
        quant_t = quant_t.permute(0, 3, 1, 2)
        enc_b = torch.cat([self.dec_t(quant_t), enc_b], 1)
        quant_b, diff_b, _ = self.quantize_b(self.quantize_conv_b(enc_b).permute(0, 2, 3, 1))
        quant_b = quant_b.permute(0, 3, 1, 2)
        dec = self.dec(torch.cat([self.upsample_t(quant_t), quant_b], 1))
        return dec, diff_t.unsqueeze(0) + diff_b.unsqueeze(0)


def vqvae2(seed: int, *, batch: int = 2, latent_loss_weight: float = 0.25) -> RealCase:
    torch.manual_seed(seed)
    model = VQVAE()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-4)
    criterion = nn.MSELoss()
    img = torch.randn(batch, 3, 8, 8)

    def step() -> torch.Tensor:
        out, latent_loss = model(img)
        return criterion(out, img) + latent_loss_weight * latent_loss.mean()

    return RealCase("vqvae2", "rosinality/vq-vae-2-pytorch vqvae.py@ef5f67c46f93624163776caec9e0d9"
                    "5063910eca", "https://arxiv.org/abs/1906.00446 (Razavi et al. 2019, the EMA"
                    " codebook update of its appendix)", "correct", step, optimizer,
                    {"model": model})


# --- mlfoundations/open_clip src/open_clip/loss.py, src/open_clip_train/train.py@89fb801f1e60878
# 80e951fc8354b8a2077b79c6d: CLIP's symmetric contrastive loss (ClipLoss, one process) on
# normalised image and text features scaled by exp(logit_scale), a learned temperature clamped
# to [0, log 100] under no_grad at each step; AdamW without weight decay on gains, biases and
# logit_scale. A linear image tower and a mean-pooled embedding text tower stand in for the
# ViT and the text transformer.


class TinyCLIP(nn.Module):
    def __init__(self, embed_dim: int = 4, vocab: int = 10, width: int = 6) -> None:
        super().__init__()
        self.visual = nn.Sequential(nn.Flatten(), nn.Linear(3 * 4 * 4, width), nn.GELU(),
                                    nn.LayerNorm(width), nn.Linear(width, embed_dim))
        self.token_embedding = nn.Embedding(vocab, width)
        self.ln_final = nn.LayerNorm(width)
        self.text_projection = nn.Parameter(torch.randn(width, embed_dim) * width ** -0.5)
        self.logit_scale = nn.Parameter(torch.ones([]) * math.log(1 / 0.07))

    def forward(self, image: torch.Tensor, text: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        image_features = F.normalize(self.visual(image), dim=-1)
        x = self.ln_final(self.token_embedding(text)).mean(1)
        text_features = F.normalize(x @ self.text_projection, dim=-1)
        return image_features, text_features, self.logit_scale.exp()


def open_clip(seed: int, *, batch: int = 3) -> RealCase:
    torch.manual_seed(seed)
    model = TinyCLIP()

    def exclude(n: str, p: torch.Tensor) -> bool:
        return p.ndim < 2 or "bn" in n or "ln" in n or "bias" in n or "logit_scale" in n

    named = list(model.named_parameters())
    optimizer = torch.optim.AdamW([
        {"params": [p for n, p in named if exclude(n, p) and p.requires_grad],
         "weight_decay": 0.0},
        {"params": [p for n, p in named if not exclude(n, p) and p.requires_grad],
         "weight_decay": 0.2}], lr=5e-4, betas=(0.9, 0.98), eps=1e-6)
    images, texts = torch.randn(batch, 3, 4, 4), torch.randint(0, 10, (batch, 5))

    def step() -> torch.Tensor:
        with torch.no_grad():  # clamp_logit_scale, after the previous optimizer step
            model.logit_scale.clamp_(0, math.log(100))
        image_features, text_features, logit_scale = model(images, texts)
        logits_per_image = logit_scale * image_features @ text_features.T
        logits_per_text = logit_scale * text_features @ image_features.T
        labels = torch.arange(logits_per_image.shape[0], dtype=torch.long)
        return (F.cross_entropy(logits_per_image, labels)
                + F.cross_entropy(logits_per_text, labels)) / 2

    return RealCase("open_clip", "mlfoundations/open_clip src/open_clip/loss.py@89fb801f1e6087880"
                    "e951fc8354b8a2077b79c6d", "https://arxiv.org/abs/2103.00020 (Radford et al. "
                    "2021, fig. 3: the symmetric loss with a learned temperature)", "correct",
                    step, optimizer, {"model": model})


CASES: dict[str, Callable[[int], RealCase]] = {
    "simclr": simclr, "fixmatch": fixmatch,
    "fixmatch_soft_no_detach": lambda s: fixmatch(s, soft=True), "vqvae2": vqvae2,
    "open_clip": open_clip,
}
