"""Mixed-precision training with a ``GradScaler`` and a ``DataLoader`` of worker processes at a
tiny size, written after pytorch/tutorials recipes_source/recipes/amp_recipe.py
(https://github.com/pytorch/tutorials/blob/db77dcf6e3637924f43852c014f2af9978b0f891/
recipes_source/recipes/amp_recipe.py): the forward under ``torch.autocast``,
``scaler.scale(loss).backward()``, ``scaler.step(opt)``, ``scaler.update()``, then
``opt.zero_grad()``. On the CPU: bfloat16 autocast and ``torch.amp.GradScaler("cpu")``; the
batches come from two worker processes. As published: clean."""

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Noisy(Dataset):
    """Inputs and targets of a fixed linear map, noise drawn in the worker."""

    def __init__(self, n, d_in, d_out):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, d_in, generator=g)
        self.y = self.x @ torch.randn(d_in, d_out, generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def make_model(in_size, out_size, num_layers):
    layers = []
    for _ in range(num_layers - 1):
        layers += [nn.Linear(in_size, in_size), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(in_size, out_size))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--in-size", type=int, default=32)
    parser.add_argument("--out-size", type=int, default=8)
    parser.add_argument("--num-layers", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-amp", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    use_amp = not args.no_amp
    net = make_model(args.in_size, args.out_size, args.num_layers)
    opt = torch.optim.SGD(net.parameters(), lr=0.001)
    loss_fn = nn.MSELoss()
    scaler = torch.amp.GradScaler("cpu", enabled=use_amp)
    loader = DataLoader(Noisy(128, args.in_size, args.out_size), batch_size=args.batch_size,
                        shuffle=True, num_workers=args.workers)
    for epoch in range(args.epochs):
        for input, target in loader:
            with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=use_amp):
                output = net(input)
                loss = loss_fn(output.float(), target)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
        print(f"epoch {epoch} loss {loss.item():.4f}")
