"""CLIP's two towers trained jointly at a tiny size, written after Radford et al., "Learning
Transferable Visual Models From Natural Language Supervision" (ICML 2021, arXiv:2103.00020) and
mlfoundations/open_clip (src/open_clip/loss.py, ``ClipLoss``; src/open_clip/model.py,
``CLIP.forward``). Bug twin of clip_two_tower.py: the text tower's features are detached where
they are made (``text_features = F.normalize(text_tower(tokens), dim=-1).detach()``). Both
cross-entropies still train the image tower and the logit scale, but the text side, keys of the
images' softmax and queries of its own, is cut: the text tower never moves, while the method
trains both towers jointly, in the same step. This is not LiT (there the image tower is a
frozen pre-trained network). The fix is that line, without the ``.detach()``. ``--out PATH``
saves both towers' weights and the logit scale."""

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


class TextTower(nn.Module):
    def __init__(self):
        super().__init__()
        self.token_embedding = nn.EmbeddingBag(vocab, width, mode="mean")
        self.text_projection = nn.Linear(width, embed, bias=False)

    def forward(self, tokens):
        return self.text_projection(self.token_embedding(tokens))


image_tower = nn.Sequential(nn.Linear(dim, width), nn.ReLU(), nn.Linear(width, embed))
text_tower = TextTower()
logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))
optimizer = torch.optim.Adam([*image_tower.parameters(), *text_tower.parameters(), logit_scale],
                             lr=3e-3)


def pairs(n):
    c = torch.randint(0, concepts, (n,))
    images = image_means[c] + 0.3 * torch.randn(n, dim)
    tokens = concept_words[c].gather(1, torch.randint(0, 6, (n, 4)))
    return images, tokens


for step in range(args.steps):
    images, tokens = pairs(16)
    image_features = F.normalize(image_tower(images), dim=-1)
    text_features = F.normalize(text_tower(tokens), dim=-1).detach()
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
    torch.save({**{f"image_tower.{k}": v for k, v in image_tower.state_dict().items()},
                **{f"text_tower.{k}": v for k, v in text_tower.state_dict().items()},
                "logit_scale": logit_scale.detach()}, args.out)
