"""MoCo at a tiny size, written after He et al., "Momentum Contrast for Unsupervised Visual
Representation Learning" (arXiv:1911.05722) and facebookresearch/moco (moco/builder.py,
main_moco.py): a query encoder and a key encoder that starts as its copy and follows it by
momentum, the keys and the momentum update under ``torch.no_grad()``, a queue of negative
keys as a buffer refreshed by ``_dequeue_and_enqueue``, InfoNCE as cross entropy with the
positive at index 0, and SGD built over the whole ``MoCo`` module as main_moco.py builds it.
The builder's ``param_k.requires_grad = False`` is left out: ``no_grad`` alone guards the keys.
Data: random vectors, two noisy views each, made in the script. Injected bug: only the
momentum update is under ``torch.no_grad()``; the keys are computed outside it, so the loss
trains the key encoder through ``l_pos`` and SGD, built over the whole module, steps it."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=24)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--moco-k", type=int, default=64)
parser.add_argument("--moco-m", type=float, default=0.99)
parser.add_argument("--moco-t", type=float, default=0.2)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, feat = 12, 8
data = torch.randn(512, dim)


def encoder():
    return nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, feat))


class MoCo(nn.Module):
    def __init__(self, K, m, T):
        super().__init__()
        self.K, self.m, self.T = K, m, T
        self.encoder_q = encoder()
        self.encoder_k = encoder()
        for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            param_k.data.copy_(param_q.data)
        self.register_buffer("queue", F.normalize(torch.randn(feat, K), dim=0))
        self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))

    @torch.no_grad()
    def _momentum_update_key_encoder(self):
        for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            param_k.data = param_k.data * self.m + param_q.data * (1.0 - self.m)

    @torch.no_grad()
    def _dequeue_and_enqueue(self, keys):
        ptr = int(self.queue_ptr)
        self.queue[:, ptr:ptr + keys.shape[0]] = keys.T
        self.queue_ptr[0] = (ptr + keys.shape[0]) % self.K

    def forward(self, im_q, im_k):
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


model = MoCo(args.moco_k, args.moco_m, args.moco_t)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)

for step in range(args.steps):
    x = data[torch.randint(0, len(data), (args.batch_size,))]
    im_q = x + 0.3 * torch.randn_like(x)
    im_k = x + 0.3 * torch.randn_like(x)
    output, target = model(im_q=im_q, im_k=im_k)
    loss = criterion(output, target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 8 == 0:
        print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
