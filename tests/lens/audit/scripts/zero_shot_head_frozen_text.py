"""An image tower fine-tuned against a zero-shot head of frozen text embeddings at a tiny size,
written after Radford et al., "Learning Transferable Visual Models From Natural Language
Supervision" (ICML 2021, arXiv:2103.00020; openai/CLIP, the zero-shot classifier of
notebooks/Prompt_Engineering_for_ImageNet.ipynb, ``zeroshot_classifier``) and Wortsman et al.,
"Robust fine-tuning of zero-shot models" (CVPR 2022, arXiv:2109.01903; mlfoundations/wise-ft,
src/models/zeroshot.py, ``get_zeroshot_classifier``): the class embeddings are computed ONCE,
before training, from a frozen text tower under ``torch.no_grad()`` (the mean of the normalised
embeddings of a few prompts per class); the image tower is trained with the cross-entropy of
a softmax over its features' similarities to every class embedding. The keys are cut on
purpose: fixed class prototypes from another, frozen network. Points and prompts made in the
script. SGD with momentum. As published: clean. ``--out PATH`` saves the image tower's
weights and the class embeddings."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, vocab, classes, width, embed = 12, 40, 5, 24, 8
centers = 1.5 * torch.randn(classes, dim)
labels = torch.randint(0, classes, (96,))
points = centers[labels] + 0.7 * torch.randn(96, dim)
prompts = torch.randint(0, vocab, (classes, 3, 5))

text_tower = nn.Sequential(nn.EmbeddingBag(vocab, width, mode="mean"),
                           nn.Linear(width, embed, bias=False))
text_tower.requires_grad_(False)
with torch.no_grad():
    class_embeddings = F.normalize(text_tower(prompts.view(-1, 5)), dim=-1).view(classes, 3, -1)
    zeroshot_weights = F.normalize(class_embeddings.mean(1), dim=-1)

image_tower = nn.Sequential(nn.Linear(dim, width), nn.ReLU(), nn.Linear(width, embed))
optimizer = torch.optim.SGD(image_tower.parameters(), lr=0.01, momentum=0.9)

for step in range(args.steps):
    x = points[16 * (step % 6):16 * (step % 6) + 16]
    y = labels[16 * (step % 6):16 * (step % 6) + 16]
    image_features = F.normalize(image_tower(x), dim=-1)
    logits = 100.0 * image_features @ zeroshot_weights.T
    loss = F.cross_entropy(logits, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({**{f"image_tower.{k}": v for k, v in image_tower.state_dict().items()},
                "zeroshot_weights": zeroshot_weights}, args.out)
