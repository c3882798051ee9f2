"""Semantic segmentation with the sum of a cross-entropy and a soft Dice loss at a tiny size,
written after Isensee, Jaeger, Kohl, Petersen and Maier-Hein, "nnU-Net: a self-configuring
method for deep learning-based biomedical image segmentation" (Nature Methods 2021;
MIC-DKFZ/nnUNet, its DC_and_CE_loss and SoftDiceLoss): both terms read the same logits as
predictions against the label map, the Dice one through the softmax of the logits. Here each
term has its own backward (the first keeps the graph), and one SGD step follows both. A small
convolutional network on 8x8 label maps made in the script (three classes, noisy images).
As published: clean. Both backward calls train the network through its logits as a prediction;
the softmax the Dice term reads is the prediction's, and the labels are the only target.
``--out PATH`` saves the network's weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

side, classes = 8, 3


def batch(n):
    """Label maps of smoothed noise cut into three bands, and noisy images of them."""
    field = F.avg_pool2d(torch.randn(n, 1, side + 2, side + 2), 3, stride=1)
    labels = (field > -0.2).long()[:, 0] + (field > 0.2).long()[:, 0]
    images = labels[:, None].float() + 0.4 * torch.randn(n, 1, side, side)
    return images, labels


def soft_dice_loss(logits, labels, smooth=1e-5):
    probs = F.softmax(logits, dim=1)
    onehot = F.one_hot(labels, classes).permute(0, 3, 1, 2).float()
    intersect = (probs * onehot).sum(dim=(0, 2, 3))
    denominator = probs.sum(dim=(0, 2, 3)) + onehot.sum(dim=(0, 2, 3))
    return 1 - ((2 * intersect + smooth) / (denominator + smooth)).mean()


model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1),
                      nn.ReLU(), nn.Conv2d(8, classes, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

for step in range(args.steps):
    images, labels = batch(args.batch_size)
    logits = model(images)
    ce = F.cross_entropy(logits, labels)
    optimizer.zero_grad()
    ce.backward(retain_graph=True)
    dice = soft_dice_loss(logits, labels)
    dice.backward()
    optimizer.step()
    print(f"step {step} ce {ce.item():.4f} dice {dice.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
