"""Locked-image text tuning (LiT) at a tiny size, written after Zhai et al., "LiT: Zero-Shot
Transfer with Locked-image Text Tuning" (CVPR 2022, arXiv:2111.07991) and mlfoundations/open_clip
(src/open_clip/model.py, ``CLIP.lock_image_tower``; src/open_clip/loss.py, ``ClipLoss``): the
CLIP contrastive loss over every image and every text of the batch, but the image tower is a
frozen, pre-trained network (its parameters locked, not in the optimizer, run under
``torch.no_grad()``) and only the text tower and the logit scale are trained. The image
features are keys and queries of the loss, cut on purpose: they come from another, frozen
network. Pairs made in the script (a vector and a bag of tokens per concept, plus noise). Adam.
As published: clean. ``--out PATH`` saves the text tower's weights and the logit scale."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, vocab, concepts, width, embed = 12, 40, 8, 24, 8
image_means = torch.randn(concepts, dim)
concept_words = torch.randint(0, vocab, (concepts, 6))

image_tower = nn.Sequential(nn.Linear(dim, width), nn.ReLU(), nn.Linear(width, embed))
for param in image_tower.parameters():
    param.requires_grad = False
image_tower.eval()
text_tower = nn.Sequential(nn.EmbeddingBag(vocab, width, mode="mean"),
                           nn.Linear(width, embed, bias=False))
logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))
optimizer = torch.optim.Adam([*text_tower.parameters(), logit_scale], lr=3e-3)


def pairs(n):
    c = torch.randint(0, concepts, (n,))
    images = image_means[c] + 0.3 * torch.randn(n, dim)
    tokens = concept_words[c].gather(1, torch.randint(0, 6, (n, 4)))
    return images, tokens


for step in range(args.steps):
    images, tokens = pairs(16)
    with torch.no_grad():
        image_features = F.normalize(image_tower(images), dim=-1)
    text_features = F.normalize(text_tower(tokens), dim=-1)
    scale = logit_scale.exp().clamp(max=100)
    logits_per_image = scale * image_features @ text_features.T
    logits_per_text = scale * text_features @ image_features.T
    labels = torch.arange(len(images))
    loss = (F.cross_entropy(logits_per_image, labels) + F.cross_entropy(logits_per_text, labels)) / 2
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f} scale {scale.item():.2f}")

if args.out:
    torch.save({**{f"text_tower.{k}": v for k, v in text_tower.state_dict().items()},
                "logit_scale": logit_scale.detach()}, args.out)
