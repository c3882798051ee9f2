"""Representation-learning and sequence training steps from public code: BYOL as its README uses
it (with and without the hidden-layer hook that leaves the ResNet's ``fc`` unused), the reference
sparse GCN, and a tutorial RNN whose hidden state is carried between batches (with and without
the line that cuts it).

Each builder takes ``seed`` and returns a :class:`RealCase`; the text is ours, the structure
(modules, optimizers, order of calls, bug) is the repository's.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from functools import wraps
from typing import Any

import numpy as np
import torch
from realcode_common import RealCase
from torch import nn
from torch.nn import functional as F

# --- lucidrains/byol-pytorch byol_pytorch/byol_pytorch.py@299312613c1f44923e7869d1c82be7d536c2c42b
# The README's usage: NetWrapper with a forward hook on the hidden layer; a projector built lazily
# (simplicial embedding, then an MLP with BatchNorm); the target encoder a deepcopy with
# requires_grad False, registered as a submodule (so it is in learner.parameters(), frozen); the
# target projections under no_grad and detached; the EMA written by `ma_params.data = ...` after
# opt.step(); the optimizer over learner.parameters(), as in the README.
#   byol (hidden_layer=-1: the net's output is the representation): correct.
#   byol_readme (hidden_layer='avgpool', the README's choice for a ResNet): the ResNet's fc runs
#   in forward but its output is discarded, and fc is in the optimizer with requires_grad=True:
#   truth "dead", read from the code (no loss reaches net.fc); AndrewAtanov/simclr-pytorch#14
#   discards the fc layer the same way.


def singleton(cache_key: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def inner_fn(fn: Callable[..., Any]) -> Callable[..., Any]:
        @wraps(fn)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            instance = getattr(self, cache_key)
            if instance is not None:
                return instance
            instance = fn(self, *args, **kwargs)
            setattr(self, cache_key, instance)
            return instance
        return wrapper
    return inner_fn


def set_requires_grad(model: nn.Module, val: bool) -> None:
    for p in model.parameters():
        p.requires_grad = val


def cosine_loss_fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x, y = F.normalize(x, dim=-1, p=2), F.normalize(y, dim=-1, p=2)
    return 2 - 2 * (x * y).sum(dim=-1)


class SEM(nn.Module):
    def __init__(self, dim: int, temperature: float = 0.1, dim_simplex: int = 8) -> None:
        super().__init__()
        self.dim, self.dim_simplex, self.temperature = dim, dim_simplex, temperature

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        shape = t.shape
        t = t.reshape(*shape[:-1], -1, self.dim_simplex)
        t = (t / self.temperature).softmax(dim=-1)
        return t.reshape(shape)


def byol_mlp(dim: int, projection_size: int, hidden_size: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(dim, hidden_size), nn.BatchNorm1d(hidden_size),
                         nn.ReLU(inplace=True), nn.Linear(hidden_size, projection_size))


class NetWrapper(nn.Module):
    def __init__(self, net: nn.Module, projection_size: int, projection_hidden_size: int,
                 layer: int | str = -2, sem_num_simplices: int = 2, sem_simplex_dim: int = 4,
                 sem_temperature: float = 0.1) -> None:
        super().__init__()
        self.net, self.layer = net, layer
        self.projector = None
        self.projection_size = projection_size
        self.projection_hidden_size = projection_hidden_size
        self.sem_num_simplices, self.sem_simplex_dim = sem_num_simplices, sem_simplex_dim
        self.sem_temperature = sem_temperature
        self.hidden: dict[torch.device, torch.Tensor] = {}
        self.hook_registered = False

    def _find_layer(self) -> nn.Module | None:
        if isinstance(self.layer, str):
            return dict([*self.net.named_modules()]).get(self.layer, None)
        if isinstance(self.layer, int):
            return [*self.net.children()][self.layer]
        return None

    def _hook(self, _: nn.Module, input: tuple[torch.Tensor, ...], output: torch.Tensor
              ) -> None:
        self.hidden[input[0].device] = output.reshape(output.shape[0], -1)

    def _register_hook(self) -> None:
        layer = self._find_layer()
        assert layer is not None
        layer.register_forward_hook(self._hook)
        self.hook_registered = True

    @singleton("projector")
    def _get_projector(self, hidden: torch.Tensor) -> nn.Module:
        _, dim = hidden.shape
        sem_dim = self.sem_num_simplices * self.sem_simplex_dim
        projector = byol_mlp(sem_dim, self.projection_size, self.projection_hidden_size)
        embedder = nn.Sequential(nn.Linear(dim, sem_dim), nn.BatchNorm1d(sem_dim))
        sem = SEM(sem_dim, temperature=self.sem_temperature, dim_simplex=self.sem_simplex_dim)
        return nn.Sequential(embedder, sem, projector).to(hidden)

    def get_representation(self, x: torch.Tensor) -> torch.Tensor:
        if self.layer == -1:
            return self.net(x)
        if not self.hook_registered:
            self._register_hook()
        self.hidden.clear()
        _ = self.net(x)  # audit: fix here
        hidden = self.hidden[x.device]
        self.hidden.clear()
        return hidden

    def forward(self, x: torch.Tensor, return_projection: bool = True) -> Any:
        representation = self.get_representation(x)
        if not return_projection:
            return representation
        projector = self._get_projector(representation)
        return projector(representation), representation


class EMA:
    def __init__(self, beta: float) -> None:
        self.beta = beta

    def update_average(self, old: torch.Tensor | None, new: torch.Tensor) -> torch.Tensor:
        return new if old is None else old * self.beta + (1 - self.beta) * new


class BYOL(nn.Module):
    def __init__(self, net: nn.Module, image_size: int, hidden_layer: int | str = -2,
                 projection_size: int = 4, projection_hidden_size: int = 8,
                 augment_fn: Callable[[torch.Tensor], torch.Tensor] | None = None,
                 moving_average_decay: float = 0.99) -> None:
        super().__init__()
        self.net = net
        self.augment1 = augment_fn
        self.augment2 = augment_fn
        self.online_encoder = NetWrapper(net, projection_size, projection_hidden_size,
                                         layer=hidden_layer)
        self.use_momentum = True
        self.target_encoder = None
        self.target_ema_updater = EMA(moving_average_decay)
        self.online_predictor = byol_mlp(projection_size, projection_size,
                                         projection_hidden_size)
        self.forward(torch.randn(2, 3, image_size, image_size))  # instantiate singletons

    @singleton("target_encoder")
    def _get_target_encoder(self) -> NetWrapper:
        target_encoder = copy.deepcopy(self.online_encoder)
        set_requires_grad(target_encoder, False)
        return target_encoder

    def update_moving_average(self) -> None:
        for current_params, ma_params in zip(self.online_encoder.parameters(),
                                             self.target_encoder.parameters()):
            old_weight, up_weight = ma_params.data, current_params.data
            ma_params.data = self.target_ema_updater.update_average(old_weight, up_weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        image_one, image_two = self.augment1(x), self.augment2(x)
        images = torch.cat((image_one, image_two), dim=0)
        online_projections, _ = self.online_encoder(images)
        online_predictions = self.online_predictor(online_projections)
        online_pred_one, online_pred_two = online_predictions.chunk(2, dim=0)
        with torch.no_grad():
            target_encoder = self._get_target_encoder()
            target_projections, _ = target_encoder(images)
            target_projections = target_projections.detach()
            target_proj_one, target_proj_two = target_projections.chunk(2, dim=0)
        loss_one = cosine_loss_fn(online_pred_one, target_proj_two.detach())
        loss_two = cosine_loss_fn(online_pred_two, target_proj_one.detach())
        return (loss_one + loss_two).mean()


class TinyResNet(nn.Module):
    """torchvision's ResNet layout in miniature: conv1, bn1, relu, avgpool, fc."""

    def __init__(self, width: int = 4, num_classes: int = 5) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.avgpool(self.relu(self.bn1(self.conv1(x))))
        return self.fc(torch.flatten(x, 1))  # audit: fix here [byol_readme]


def byol(seed: int, *, hidden_layer: int | str = -1, batch: int = 4, image_size: int = 6
         ) -> RealCase:
    torch.manual_seed(seed)
    resnet = TinyResNet()

    def augment(x: torch.Tensor) -> torch.Tensor:
        # stands in for the default SimCLR augmentation (torchvision)
        return x + 0.1 * torch.randn_like(x)

    learner = BYOL(resnet, image_size=image_size, hidden_layer=hidden_layer, augment_fn=augment)
    opt = torch.optim.Adam(learner.parameters(), lr=3e-4)
    images = torch.randn(batch, 3, image_size, image_size)

    def step() -> torch.Tensor:
        loss = learner(images)
        learner.update_moving_average()
        return loss

    readme = hidden_layer == "avgpool"
    return RealCase("byol_readme" if readme else "byol",
                    "lucidrains/byol-pytorch byol_pytorch/byol_pytorch.py@299312613c1f44923e7869"
                    "d1c82be7d536c2c42b",
                    "https://github.com/AndrewAtanov/simclr-pytorch/issues/14 (fc unused; the "
                    "README's usage, arXiv:2006.07733)" if readme else
                    "https://arxiv.org/abs/2006.07733 (the README's usage)",
                    "dead" if readme else "correct", step, opt, {"learner": learner})


# --- tkipf/pygcn pygcn/layers.py, models.py, train.py@1600b5b748b3976413d1e307540ccc62605b4d6d ---
# Correct (the author's reference GCN, arXiv:1609.02907): GraphConvolution is torch.mm then
# torch.spmm with a sparse row-normalized adjacency; Adam with weight decay; train() runs
# model.train(), the forward and the NLL on idx_train, then (fastmode False) model.eval() and a
# second forward for the validation loss (with its graph, printed, not backpropagated).


class GraphConvolution(nn.Module):
    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.FloatTensor(in_features, out_features))
        self.bias = nn.Parameter(torch.FloatTensor(out_features)) if bias else None
        stdv = 1.0 / math.sqrt(self.weight.size(1))
        self.weight.data.uniform_(-stdv, stdv)
        if self.bias is not None:
            self.bias.data.uniform_(-stdv, stdv)

    def forward(self, input: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        support = torch.mm(input, self.weight)
        output = torch.spmm(adj, support)
        return output + self.bias if self.bias is not None else output


class GCN(nn.Module):
    def __init__(self, nfeat: int, nhid: int, nclass: int, dropout: float) -> None:
        super().__init__()
        self.gc1, self.gc2 = GraphConvolution(nfeat, nhid), GraphConvolution(nhid, nclass)
        self.dropout = dropout

    def forward(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.gc1(x, adj))
        x = F.dropout(x, self.dropout, training=self.training)
        return F.log_softmax(self.gc2(x, adj), dim=1)


def pygcn(seed: int, *, n_nodes: int = 8, nfeat: int = 5, nhid: int = 4, nclass: int = 3
          ) -> RealCase:
    torch.manual_seed(seed)
    edges = torch.randint(0, n_nodes, (2, 12))
    dense = torch.zeros(n_nodes, n_nodes)
    dense[edges[0], edges[1]] = 1.0
    dense = torch.maximum(dense, dense.t()) + torch.eye(n_nodes)  # symmetric, self loops
    dense = dense / dense.sum(1, keepdim=True)  # utils.normalize (by row)
    adj = dense.to_sparse()
    features = torch.rand(n_nodes, nfeat)
    features = features / features.sum(1, keepdim=True)
    labels = torch.randint(0, nclass, (n_nodes,))
    idx_train, idx_val = torch.arange(0, 4), torch.arange(4, 8)
    model = GCN(nfeat, nhid, nclass, dropout=0.5)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)

    def step() -> torch.Tensor:
        model.train()
        output = model(features, adj)
        loss_train = F.nll_loss(output[idx_train], labels[idx_train])
        model.eval()
        output = model(features, adj)
        _loss_val = F.nll_loss(output[idx_val], labels[idx_val])  # printed by the source
        return loss_train

    return RealCase("pygcn", "tkipf/pygcn pygcn/train.py@1600b5b748b3976413d1e307540ccc62605b4d"
                    "6d", "https://arxiv.org/abs/1609.02907 (author's reference implementation)",
                    "correct", step, optimizer, {"model": model})


# --- MorvanZhou/PyTorch-Tutorial tutorial-contents/403_RNN_regressor.py@dbe154a9e56635e51c6b0c2cc
# ea8ae36cfb585a7 --------------------------------------------------------------------------------
# Correct: nn.RNN (batch_first) predicting cos from sin; h_state is carried between batches and
# cut by `h_state = h_state.data` right after the forward ("repack the hidden state, break the
# connection from last iteration"). Without that line the second backward fails, as
# MorvanZhou/PyTorch-Tutorial#57 reports (truth "carried"). A batch of 4 phases instead of the
# tutorial's batch of 1; hidden size 6 instead of 32.


class MorvanRNN(nn.Module):
    def __init__(self, hidden: int = 6) -> None:
        super().__init__()
        self.rnn = nn.RNN(input_size=1, hidden_size=hidden, num_layers=1, batch_first=True)
        self.out = nn.Linear(hidden, 1)

    def forward(self, x: torch.Tensor, h_state: torch.Tensor | None
                ) -> tuple[torch.Tensor, torch.Tensor]:
        r_out, h_state = self.rnn(x, h_state)
        outs = [self.out(r_out[:, t, :]) for t in range(r_out.size(1))]
        return torch.stack(outs, dim=1), h_state


def morvan_rnn(seed: int, *, repack: bool = True, time_step: int = 5, batch: int = 4
               ) -> RealCase:
    torch.manual_seed(seed)
    rnn = MorvanRNN()
    optimizer = torch.optim.Adam(rnn.parameters(), lr=0.02)
    loss_func = nn.MSELoss()
    phase = torch.rand(batch, 1) * np.pi
    st: dict[str, Any] = {"h_state": None, "step": 0}

    def step() -> torch.Tensor:
        start, end = st["step"] * np.pi, (st["step"] + 1) * np.pi
        st["step"] += 1
        steps = torch.from_numpy(np.linspace(start, end, time_step, dtype=np.float32,
                                             endpoint=False))
        x = torch.sin(steps[None, :] + phase)[:, :, None]
        y = torch.cos(steps[None, :] + phase)[:, :, None]
        prediction, st["h_state"] = rnn(x, st["h_state"])  # audit: fix here
        if repack:
            st["h_state"] = st["h_state"].data
        return loss_func(prediction, y)

    return RealCase(f"morvan_rnn{'' if repack else '_no_repack'}",
                    "MorvanZhou/PyTorch-Tutorial tutorial-contents/403_RNN_regressor.py@dbe154a9e"
                    "56635e51c6b0c2ccea8ae36cfb585a7",
                    "https://github.com/MorvanZhou/PyTorch-Tutorial/issues/57",
                    "correct" if repack else "carried", step, optimizer, {"rnn": rnn})


CASES: dict[str, Callable[[int], RealCase]] = {
    "byol": byol,
    "byol_readme": lambda s: byol(s, hidden_layer="avgpool"),
    "pygcn": pygcn,
    "morvan_rnn": morvan_rnn,
    "morvan_rnn_no_repack": lambda s: morvan_rnn(s, repack=False),
}
