"""VSE++ with the hardest negatives at a tiny size, written after Faghri, Fleet, Kiros and
Fidler, "VSE++: Improving Visual-Semantic Embeddings with Hard Negatives" (BMVC 2018,
arXiv:1707.05612) and fartashf/vsepp (model.py, ``ContrastiveLoss.forward`` with
``max_violation``): the loss sums the hardest-negative hinge cost of each image (``cost_s``,
its row maximum) and of each caption (``cost_im``, its column maximum), both training both
encoders. Bug twin of vsepp_max_violation.py. Injected bug: the helper ``contrastive_loss``
detaches the caption-side costs where they are made (``cost_im = (...).masked_fill(eye,
0).detach()``); their column maxima (``hardest_im, _ = cost_im.max(dim=0)``) are then cut
values only, a term that changes the printed loss and trains nothing. The fix is that line of
the helper, without ``.detach()``. ``--out PATH`` saves both encoders' weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--margin", type=float, default=0.2)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

n, img_dim, txt_dim, emb = 64, 10, 14, 8
concepts = torch.randn(n, 6)
images = concepts @ torch.randn(6, img_dim) + 0.1 * torch.randn(n, img_dim)
captions = concepts @ torch.randn(6, txt_dim) + 0.1 * torch.randn(n, txt_dim)

img_enc = nn.Linear(img_dim, emb)
txt_enc = nn.Sequential(nn.Linear(txt_dim, 16), nn.ReLU(), nn.Linear(16, emb))
optimizer = torch.optim.Adam([*img_enc.parameters(), *txt_enc.parameters()], lr=0.01)


def contrastive_loss(im, s, margin):
    scores = im @ s.t()
    diagonal = scores.diag().view(-1, 1)
    eye = torch.eye(len(im), dtype=torch.bool)
    cost_s = (margin + scores - diagonal).clamp(min=0).masked_fill(eye, 0)
    cost_im = (margin + scores - diagonal.t()).clamp(min=0).masked_fill(eye, 0).detach()
    hardest_s, _ = cost_s.max(dim=1)
    hardest_im, _ = cost_im.max(dim=0)
    return hardest_s.sum() + hardest_im.sum()


for step in range(args.steps):
    i = 16 * (step % 4)
    im = F.normalize(img_enc(images[i:i + 16]), dim=1)
    s = F.normalize(txt_enc(captions[i:i + 16]), dim=1)
    loss = contrastive_loss(im, s, args.margin)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    state = {f"img_enc.{k}": v for k, v in img_enc.state_dict().items()}
    state.update({f"txt_enc.{k}": v for k, v in txt_enc.state_dict().items()})
    torch.save(state, args.out)
