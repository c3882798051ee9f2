"""Self-supervised training steps from public code: SimSiam (a frozen bias left in its
optimizer) and MoCo (an EMA key encoder left in its optimizer, frozen, written by averaging).

Each builder takes ``seed`` and returns a :class:`RealCase`; the text is ours, the structure
(modules, optimizers, order of calls) is the repository's. The ResNet backbones are replaced by
a tiny convolutional encoder with the same ``fc`` head the builders rewire.
"""

from __future__ import annotations

import torch
from realcode_common import RealCase
from torch import nn
from torch.nn import functional as F


class TinyResNet(nn.Module):
    """A stand-in for torchvision's ResNet: a conv stem, pooling, and the ``fc`` classifier."""

    def __init__(self, num_classes: int = 8, width: int = 8, **_: object) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.fc = nn.Linear(width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn1(self.conv1(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


# --- facebookresearch/simsiam simsiam/builder.py@39ac33e618948b88cbe43a65e31f142537073e55,
# main_simsiam.py@a7bc1772896d0dad0806c51f0bb6f3b16d290468 ------------------------------------
# Correct (the paper's official code): the projector's last bias is set requires_grad = False
# ("not use bias as followed by BN") and stays in SGD's param groups; z is detached in forward.
# simsiam_no_stop_grad: the same step with forward returning z1, z2 undetached, the paper's
# "w/o stop-grad" ablation (§4.1, Figure 2: the representation collapses at once).


class SimSiam(nn.Module):
    def __init__(self, base_encoder: type, dim: int = 8, pred_dim: int = 4,
                 stop_grad: bool = True) -> None:
        super().__init__()
        self.stop_grad = stop_grad
        self.encoder = base_encoder(num_classes=dim, zero_init_residual=True)
        prev_dim = self.encoder.fc.weight.shape[1]
        self.encoder.fc.bias.requires_grad = False
        self.encoder.fc = nn.Sequential(nn.Linear(prev_dim, prev_dim, bias=False),
                                        nn.BatchNorm1d(prev_dim), nn.ReLU(inplace=True),
                                        nn.Linear(prev_dim, prev_dim, bias=False),
                                        nn.BatchNorm1d(prev_dim), nn.ReLU(inplace=True),
                                        self.encoder.fc, nn.BatchNorm1d(dim, affine=False))
        self.predictor = nn.Sequential(nn.Linear(dim, pred_dim, bias=False),
                                       nn.BatchNorm1d(pred_dim), nn.ReLU(inplace=True),
                                       nn.Linear(pred_dim, dim))

    def forward(self, x1: torch.Tensor, x2: torch.Tensor) -> tuple[torch.Tensor, ...]:
        z1, z2 = self.encoder(x1), self.encoder(x2)
        p1, p2 = self.predictor(z1), self.predictor(z2)
        if not self.stop_grad:
            return p1, p2, z1, z2
        return p1, p2, z1.detach(), z2.detach()


def simsiam(seed: int, *, batch: int = 4, stop_grad: bool = True) -> RealCase:
    torch.manual_seed(seed)
    model = SimSiam(TinyResNet, stop_grad=stop_grad)
    criterion = nn.CosineSimilarity(dim=1)
    optim_params = [{"params": model.encoder.parameters(), "fix_lr": False},
                    {"params": model.predictor.parameters(), "fix_lr": True}]
    optimizer = torch.optim.SGD(optim_params, 0.05, momentum=0.9, weight_decay=1e-4)
    images = [torch.randn(batch, 3, 8, 8), torch.randn(batch, 3, 8, 8)]

    def step() -> torch.Tensor:
        p1, p2, z1, z2 = model(x1=images[0], x2=images[1])
        return -(criterion(p1, z2).mean() + criterion(p2, z1).mean()) * 0.5  # audit: fix here

    return RealCase("simsiam" if stop_grad else "simsiam_no_stop_grad",
                    "facebookresearch/simsiam simsiam/builder.py@39ac33e618948b88cbe4"
                    "3a65e31f142537073e55", "https://arxiv.org/abs/2011.10566 (the paper's "
                    "official implementation" + ("" if stop_grad else "; §4.1, w/o stop-grad")
                    + ")", "correct" if stop_grad else "targets", step, optimizer,
                    {"model": model})


# --- facebookresearch/moco moco/builder.py@7397dfe146c7ca6bbb58e9c382498069178ba764,
# main_moco.py@3b42c2a12afd20da783501e87c3ea837c054397c --------------------------------------
# Correct (official): encoder_k copied from encoder_q, requires_grad = False, momentum-updated
# by param_k.data = param_k.data * m + param_q.data * (1 - m); main_moco builds
# SGD(model.parameters()), which holds encoder_k too. The DDP batch shuffle and all_gather are
# identities on one process.


class MoCo(nn.Module):
    def __init__(self, base_encoder: type, dim: int = 8, K: int = 16, m: float = 0.999,
                 T: float = 0.07, mlp: bool = True) -> None:
        super().__init__()
        self.K, self.m, self.T = K, m, T
        self.encoder_q = base_encoder(num_classes=dim)
        self.encoder_k = base_encoder(num_classes=dim)
        if mlp:
            dim_mlp = self.encoder_q.fc.weight.shape[1]
            self.encoder_q.fc = nn.Sequential(nn.Linear(dim_mlp, dim_mlp), nn.ReLU(),
                                              self.encoder_q.fc)
            self.encoder_k.fc = nn.Sequential(nn.Linear(dim_mlp, dim_mlp), nn.ReLU(),
                                              self.encoder_k.fc)
        for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            param_k.data.copy_(param_q.data)
            param_k.requires_grad = False
        self.register_buffer("queue", F.normalize(torch.randn(dim, K), dim=0))
        self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))

    @torch.no_grad()
    def _momentum_update_key_encoder(self) -> None:
        for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            param_k.data = param_k.data * self.m + param_q.data * (1.0 - self.m)

    @torch.no_grad()
    def _dequeue_and_enqueue(self, keys: torch.Tensor) -> None:
        batch_size = keys.shape[0]
        ptr = int(self.queue_ptr)
        self.queue[:, ptr:ptr + batch_size] = keys.T
        self.queue_ptr[0] = (ptr + batch_size) % self.K

    def forward(self, im_q: torch.Tensor, im_k: torch.Tensor) -> tuple[torch.Tensor, ...]:
        q = F.normalize(self.encoder_q(im_q), dim=1)
        with torch.no_grad():
            self._momentum_update_key_encoder()
            k = F.normalize(self.encoder_k(im_k), dim=1)
        l_pos = torch.einsum("nc,nc->n", [q, k]).unsqueeze(-1)
        l_neg = torch.einsum("nc,ck->nk", [q, self.queue.clone().detach()])
        logits = torch.cat([l_pos, l_neg], dim=1) / self.T
        labels = torch.zeros(logits.shape[0], dtype=torch.long)
        self._dequeue_and_enqueue(k)
        return logits, labels


def moco(seed: int, *, batch: int = 4) -> RealCase:
    torch.manual_seed(seed)
    model = MoCo(TinyResNet)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), 0.03, momentum=0.9, weight_decay=1e-4)
    images = [torch.randn(batch, 3, 8, 8), torch.randn(batch, 3, 8, 8)]

    def step() -> torch.Tensor:
        output, target = model(im_q=images[0], im_k=images[1])
        return criterion(output, target)

    return RealCase("moco", "facebookresearch/moco moco/builder.py@7397dfe146c7ca6bbb58e9c38249"
                    "8069178ba764", "https://arxiv.org/abs/1911.05722 (the paper's official "
                    "implementation)", "correct", step, optimizer, {"model": model})


CASES = {"simsiam": simsiam, "moco": moco,
         "simsiam_no_stop_grad": lambda seed: simsiam(seed, stop_grad=False)}
