"""A classifier trained with an exponential moving average of its weights kept for evaluation,
written after timm's ``ModelEmaV2`` (timm/utils/model_ema.py,
https://github.com/huggingface/pytorch-image-models) and the way its training script keeps one
beside the model: a trainer object holds the model and its average as attributes
(``self.model``, ``self.model_ema``), updates the average after each optimizer step, and logs
the online model's accuracy on a held-back batch under ``torch.no_grad()``. Nothing reads the
average while training: it is meant for evaluation, and is no target. Data: two Gaussian
blobs, made in the script."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=2)
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--decay", type=float, default=0.9)
args = parser.parse_args()
torch.manual_seed(args.seed)


class ModelEma:
    def __init__(self, model, decay):
        self.module = copy.deepcopy(model).eval()
        self.decay = decay

    @torch.no_grad()
    def update(self, model):
        for e, m in zip(self.module.state_dict().values(), model.state_dict().values()):
            e.copy_(self.decay * e + (1 - self.decay) * m)


class Trainer:
    def __init__(self):
        self.model = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 2))
        self.model_ema = ModelEma(self.model, args.decay)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1, momentum=0.9)

    def train_step(self, x, y):
        loss = F.cross_entropy(self.model(x), y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.model_ema.update(self.model)
        return loss.item()

    def accuracy(self, x, y):
        with torch.no_grad():
            return (self.model(x).argmax(1) == y).float().mean().item()


def blobs(n):
    y = torch.randint(0, 2, (n,))
    return torch.randn(n, 2) + 2.0 * y[:, None].float() - 1.0, y


trainer = Trainer()
x_val, y_val = blobs(32)
for step in range(args.steps):
    x, y = blobs(16)
    loss = trainer.train_step(x, y)
    print(f"step {step} loss {loss:.4f} accuracy {trainer.accuracy(x_val, y_val):.3f}")
