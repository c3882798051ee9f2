"""Fast adversarial training at a tiny size, written after Wong et al., "Fast is better than
free: Revisiting adversarial training" (arXiv:2001.03994) and locuslab/fast_adversarial
(https://github.com/locuslab/fast_adversarial/blob/master/MNIST/train_mnist.py): a perturbation
``delta`` drawn uniformly in the epsilon ball is made to require grad, one backward of the
loss gives its gradient, read by hand (``delta.grad``) for one FGSM step, and the model is then
trained on the perturbed inputs. The perturbation requires grad on purpose and no optimizer
holds it: no finding. Data: two Gaussian classes made in the script."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--epsilon", type=float, default=0.3)
parser.add_argument("--alpha", type=float, default=0.375)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(0)

y_all = torch.arange(96) % 2
x_all = torch.randn(96, 8) + 1.5 * y_all[:, None].float()
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)

for epoch in range(args.epochs):
    for i in range(0, len(x_all), args.batch_size):
        X, y = x_all[i:i + args.batch_size], y_all[i:i + args.batch_size]
        delta = torch.zeros_like(X).uniform_(-args.epsilon, args.epsilon)
        delta.requires_grad = True
        output = model(X + delta)
        loss = F.cross_entropy(output, y)
        loss.backward()
        grad = delta.grad.detach()
        delta.data = torch.clamp(delta + args.alpha * torch.sign(grad), -args.epsilon,
                                 args.epsilon)
        delta = delta.detach()
        output = model(X + delta)
        loss = F.cross_entropy(output, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
