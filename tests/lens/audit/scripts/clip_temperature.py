"""CLIP's contrastive pre-training at a tiny size, written after Radford et al., "Learning
Transferable Visual Models From Natural Language Supervision" (arXiv:2103.00020), openai/CLIP
(https://github.com/openai/CLIP/blob/main/clip/model.py: the learnable temperature
``self.logit_scale = nn.Parameter(torch.ones([]) * np.log(1 / 0.07))``, logits
``logit_scale.exp() * image_features @ text_features.t()``) and mlfoundations/open_clip
(src/open_clip/train.py: the symmetric cross-entropy over the batch, and the temperature
clamped to ``log(100)`` after each step). Two small encoders embed paired "images" and
"texts" (features made in the script, the texts a noisy linear map of the images). As
published: clean."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(0)

images = torch.randn(64, 12)
texts = images @ torch.randn(12, 10) + 0.1 * torch.randn(64, 10)


class CLIP(nn.Module):
    def __init__(self, image_dim, text_dim, embed_dim):
        super().__init__()
        self.visual = nn.Sequential(nn.Linear(image_dim, 32), nn.GELU(), nn.Linear(32, embed_dim))
        self.transformer = nn.Sequential(nn.Linear(text_dim, 32), nn.GELU(),
                                         nn.Linear(32, embed_dim))
        self.logit_scale = nn.Parameter(torch.ones([]) * math.log(1 / 0.07))

    def forward(self, image, text):
        image_features = F.normalize(self.visual(image), dim=-1)
        text_features = F.normalize(self.transformer(text), dim=-1)
        logit_scale = self.logit_scale.exp()
        logits_per_image = logit_scale * image_features @ text_features.t()
        return logits_per_image, logits_per_image.t()


model = CLIP(12, 10, 8)
optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
for epoch in range(args.epochs):
    for i in range(0, len(images), args.batch_size):
        logits_per_image, logits_per_text = model(images[i:i + args.batch_size],
                                                  texts[i:i + args.batch_size])
        labels = torch.arange(logits_per_image.size(0))
        loss = (F.cross_entropy(logits_per_image, labels)
                + F.cross_entropy(logits_per_text, labels)) / 2
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            model.logit_scale.clamp_(0, math.log(100))
    print(f"epoch {epoch} loss {loss.item():.4f} scale {model.logit_scale.exp().item():.2f}")

if args.out:
    torch.save({"state": model.state_dict(), "logit_scale": model.logit_scale.detach()},
               args.out)
