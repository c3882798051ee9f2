"""MoCo with a queue of keys at a tiny size, written after He, Fan, Wu, Xie and Girshick,
"Momentum Contrast for Unsupervised Visual Representation Learning" (CVPR 2020,
arXiv:1911.05722) and facebookresearch/moco (moco/builder.py, ``MoCo.forward``,
``_momentum_update_key_encoder`` and ``_dequeue_and_enqueue``): the queries come from
``encoder_q``; the keys come from ``encoder_k``, a momentum copy of it that the optimizer does
not hold, computed under ``torch.no_grad()``; each query is scored against its own key (the
positive) and against a queue of keys from earlier iterations (the negatives), a cross-entropy
with the positive at index 0. The keys are cut on purpose: they come from another network and,
in the queue, from other steps. Vectors made in the script, views by masking and noise. SGD
with momentum. As published: clean. ``--out PATH`` saves both encoders' weights."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--K", type=int, default=48)
parser.add_argument("--m", type=float, default=0.99)
parser.add_argument("--T", type=float, default=0.2)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, feat = 12, 8
prototypes = torch.randn(6, dim)
data = prototypes[torch.randint(0, 6, (96,))] + 0.3 * torch.randn(96, dim)

encoder_q = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, feat))
encoder_k = copy.deepcopy(encoder_q)
for param_k in encoder_k.parameters():
    param_k.requires_grad = False
queue = F.normalize(torch.randn(feat, args.K), dim=0)
queue_ptr = 0
optimizer = torch.optim.SGD(encoder_q.parameters(), lr=0.05, momentum=0.9)


def augment(x):
    return x * (torch.rand_like(x) > 0.2) + 0.1 * torch.randn_like(x)


for step in range(args.steps):
    batch = data[16 * (step % 6):16 * (step % 6) + 16]
    im_q, im_k = augment(batch), augment(batch)
    q = F.normalize(encoder_q(im_q), dim=1)
    with torch.no_grad():
        for param_q, param_k in zip(encoder_q.parameters(), encoder_k.parameters()):
            param_k.data = param_k.data * args.m + param_q.data * (1.0 - args.m)
        k = F.normalize(encoder_k(im_k), dim=1)
    l_pos = torch.einsum("nc,nc->n", q, k).unsqueeze(-1)
    l_neg = torch.einsum("nc,ck->nk", q, queue.clone().detach())
    logits = torch.cat([l_pos, l_neg], dim=1) / args.T
    loss = F.cross_entropy(logits, torch.zeros(len(q), dtype=torch.long))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    queue[:, queue_ptr:queue_ptr + len(k)] = k.T
    queue_ptr = (queue_ptr + len(k)) % args.K
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({**{f"encoder_q.{k}": v for k, v in encoder_q.state_dict().items()},
                **{f"encoder_k.{k}": v for k, v in encoder_k.state_dict().items()}}, args.out)
