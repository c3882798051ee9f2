"""Adversarial training with the fast gradient sign method at a tiny size, written after
Goodfellow, Shlens and Szegedy, "Explaining and Harnessing Adversarial Examples" (ICLR 2015,
arXiv:1412.6572), the attack as Harry24k/adversarial-attacks-pytorch writes it
(torchattacks/attacks/fgsm.py): the gradient of the cross-entropy with respect to the images,
taken with ``torch.autograd.grad(..., retain_graph=False, create_graph=False)``, its sign times
``eps`` added to the images, clamped to [0, 1] and detached. The classifier is then trained on
the clean and the adversarial cross-entropy, half each (the paper's alpha = 0.5), with one Adam.
Data: two classes of 2-D points in the unit square, made in the script. As published: clean;
the first-order gradient only perturbs the inputs, it is no term of the loss.
``--out PATH`` saves the classifier's weights."""

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--iterations", type=int, default=10)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--eps", type=float, default=0.05)
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(args.seed)

labels_all = torch.arange(256) % 2
centers = torch.tensor([[0.3, 0.3], [0.7, 0.7]])
images_all = (centers[labels_all] + 0.12 * torch.randn(256, 2)).clamp(0, 1)

model = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 2))
loss = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)


def fgsm(images, labels, eps):
    images = images.clone().detach()
    labels = labels.clone().detach()
    images.requires_grad = True
    outputs = model(images)
    cost = loss(outputs, labels)
    grad = torch.autograd.grad(cost, images, retain_graph=False, create_graph=False)[0]
    adv_images = images + eps * grad.sign()
    adv_images = torch.clamp(adv_images, min=0, max=1).detach()
    return adv_images


for it in range(args.iterations):
    index = torch.randint(0, len(images_all), (args.batch_size,))
    images, labels = images_all[index], labels_all[index]
    adv_images = fgsm(images, labels, args.eps)
    cost = 0.5 * loss(model(images), labels) + 0.5 * loss(model(adv_images), labels)
    optimizer.zero_grad()
    cost.backward()
    optimizer.step()
    print(f"iteration {it} loss {cost.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
