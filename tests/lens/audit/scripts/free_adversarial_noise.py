"""Adversarial training "for free" at a tiny size, written after Shafahi et al., "Adversarial
Training for Free!" (arXiv:1904.12843) and mahyarnajibi/FreeAdv
(https://github.com/mahyarnajibi/FreeAdv/blob/master/main_free.py): each minibatch is replayed
``m`` times; one backward gives both the model's gradient (stepped by the optimizer) and the
gradient of a perturbation kept across minibatches, moved by hand (an FGSM step, clamped to
the epsilon ball) after each replay. Here the perturbation is a plain tensor that requires
grad held by a wrapper module around the classifier: the loss reaches it, no optimizer holds
it, and the script moves it itself: no finding. Data: two Gaussian classes made in the
script."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--replays", type=int, default=2)
parser.add_argument("--epsilon", type=float, default=0.3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(0)

y_all = torch.arange(96) % 2
x_all = torch.randn(96, 8) + 1.5 * y_all[:, None].float()


class FreeAdversarial(nn.Module):
    def __init__(self, net, batch_size, n_features):
        super().__init__()
        self.net = net
        self.noise = torch.zeros(batch_size, n_features, requires_grad=True)

    def forward(self, x):
        return self.net(x + self.noise[:x.size(0)])


model = FreeAdversarial(nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2)),
                        args.batch_size, 8)
optimizer = torch.optim.SGD(model.net.parameters(), lr=0.05, momentum=0.9)
for epoch in range(args.epochs):
    for i in range(0, len(x_all), args.batch_size):
        X, y = x_all[i:i + args.batch_size], y_all[i:i + args.batch_size]
        for _ in range(args.replays):
            loss = F.cross_entropy(model(X), y)
            optimizer.zero_grad()
            loss.backward()
            pert = args.epsilon * torch.sign(model.noise.grad)
            model.noise.data += pert
            model.noise.data.clamp_(-args.epsilon, args.epsilon)
            model.noise.grad = None
            optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")

if args.out:
    torch.save(model.net.state_dict(), args.out)
