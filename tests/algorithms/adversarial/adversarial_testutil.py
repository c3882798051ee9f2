"""Helpers of the adversarial tests: tiny models and batches, seeded generators, a trained MLP."""

from __future__ import annotations

import functools

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset

from toolkit.lab.data import digits, train_test_split

#: what the tests switch off: the package's one block
DISABLE = ("adversarial.examples",)


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def tiny_mlp(n_in: int = 6, n_hidden: int = 8, n_out: int = 3, *, seed: int = 0,
             dtype: torch.dtype = torch.float32) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(n_in, n_hidden), nn.Tanh(),
                         nn.Linear(n_hidden, n_out)).to(dtype)


def tiny_batch(n: int = 10, d: int = 6, k: int = 3, seed: int = 0,
               dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    g = gen(seed)
    return torch.rand(n, d, generator=g, dtype=dtype), torch.randint(0, k, (n,), generator=g)


@functools.cache
def trained_digits_mlp() -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    """A small MLP fitted on 1000 digits (full-batch Adam), and 400 held-out digits."""
    train, test = train_test_split(digits(), 400 / 1797, seed=0)
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    for _ in range(150):
        opt.zero_grad()
        F.cross_entropy(net(train.X), train.y).backward()
        opt.step()
    return net, test.X, test.y


def blobs() -> tuple[torch.Tensor, torch.Tensor]:
    """240 points in [0, 1]^2 from three well separated blobs."""
    from sklearn.datasets import make_blobs

    X, y = make_blobs(240, centers=[[0.3, 0.3], [0.7, 0.7], [0.3, 0.7]], cluster_std=0.08,
                      random_state=1)
    return torch.as_tensor(X, dtype=torch.float32).clamp(0, 1), torch.as_tensor(y)


class PairItems(Dataset):
    """A map-style Dataset of (numpy x, int y) items, as a user's own Dataset might be."""

    def __init__(self, X: torch.Tensor, y: torch.Tensor) -> None:
        self.X, self.y = X.double().numpy(), y.tolist()

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[np.ndarray, int]:
        return self.X[i], self.y[i]
