"""Supervised contrastive learning at a tiny size, written after Khosla et al., "Supervised
Contrastive Learning" (NeurIPS 2020, arXiv:2004.11362) and HobbitLong/SupContrast (losses.py,
``SupConLoss.forward`` with ``contrast_mode='all'``; networks/resnet_big.py, ``SupConResNet``).
Bug twin of supcon.py: in the loss helper the loop calls, the contrast side of the similarity
matrix is detached (``anchor_feature @ contrast_feature.T.detach()``). Every feature is still
an anchor, so the loss moves each anchor towards its positives and away from its negatives, but
the features as keys are cut: half of the gradient the method gives the encoder and the head is
lost (anchors and contrast features are the same features, made by the same network in the
same step). The detached row maxima are as published (numerical stability only). The fix is
that line, without the ``.detach()``. Points made in the script, views by masking and noise.
``--out PATH`` saves the model's weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--temperature", type=float, default=0.1)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 10, 4
centers = 1.5 * torch.randn(classes, dim)
labels = torch.randint(0, classes, (96,))
points = centers[labels] + 0.7 * torch.randn(96, dim)


class SupConNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, 16))
        self.head = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 8))

    def forward(self, x):
        return F.normalize(self.head(self.encoder(x)), dim=1)


def supcon_loss(features, labels, temperature, base_temperature=0.07):
    contrast_count = features.shape[1]
    mask = torch.eq(labels.view(-1, 1), labels.view(1, -1)).float()
    contrast_feature = torch.cat(torch.unbind(features, dim=1), dim=0)
    anchor_feature = contrast_feature
    anchor_dot_contrast = anchor_feature @ contrast_feature.T.detach() / temperature
    logits_max, _ = torch.max(anchor_dot_contrast, dim=1, keepdim=True)
    logits = anchor_dot_contrast - logits_max.detach()
    mask = mask.repeat(contrast_count, contrast_count)
    logits_mask = 1 - torch.eye(len(logits))
    mask = mask * logits_mask
    exp_logits = torch.exp(logits) * logits_mask
    log_prob = logits - torch.log(exp_logits.sum(1, keepdim=True))
    mean_log_prob_pos = (mask * log_prob).sum(1) / mask.sum(1)
    return -(temperature / base_temperature) * mean_log_prob_pos.mean()


def augment(x):
    return x * (torch.rand_like(x) > 0.2) + 0.1 * torch.randn_like(x)


model = SupConNet()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

for step in range(args.steps):
    x = points[16 * (step % 6):16 * (step % 6) + 16]
    y = labels[16 * (step % 6):16 * (step % 6) + 16]
    features = torch.stack([model(augment(x)), model(augment(x))], dim=1)
    loss = supcon_loss(features, y, args.temperature)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({f"model.{k}": v for k, v in model.state_dict().items()}, args.out)
