"""Distributed data-parallel training at a tiny size, written after pytorch/examples
distributed/ddp-tutorial-series/multigpu_torchrun.py (https://github.com/pytorch/examples/blob/
f62b4aec7bff832fc65b59aa62d60e94ddd6b39e/distributed/ddp-tutorial-series/multigpu_torchrun.py):
a ``Trainer`` class whose ``_run_batch`` clears, runs, backpropagates and steps, the model in
``DistributedDataParallel``, a ``DistributedSampler``, ``init_process_group`` from torchrun's
environment. On the CPU with gloo; run without torchrun, it is one process of a world of one.
As published: clean."""

import argparse
import os
import tempfile

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def ddp_setup():
    if "WORLD_SIZE" in os.environ:  # started by torchrun
        dist.init_process_group(backend="gloo")
    else:
        store = os.path.join(tempfile.mkdtemp(), "store")
        dist.init_process_group(backend="gloo", init_method=f"file://{store}", rank=0,
                                world_size=1)


class Trainer:
    def __init__(self, model, train_data, optimizer):
        self.train_data = train_data
        self.optimizer = optimizer
        self.model = DDP(model)

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        output = self.model(source)
        loss = F.cross_entropy(output, targets)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def _run_epoch(self, epoch):
        self.train_data.sampler.set_epoch(epoch)
        for source, targets in self.train_data:
            loss = self._run_batch(source, targets)
        print(f"[rank {dist.get_rank()}] Epoch {epoch} | loss {loss:.4f}")

    def train(self, max_epochs):
        for epoch in range(max_epochs):
            self._run_epoch(epoch)


def main(total_epochs, batch_size):
    ddp_setup()
    dataset = TensorDataset(torch.randn(64, 20), torch.randint(0, 3, (64,)))
    model = torch.nn.Sequential(torch.nn.Linear(20, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    train_data = DataLoader(dataset, batch_size=batch_size, shuffle=False,
                            sampler=DistributedSampler(dataset))
    Trainer(model, train_data, optimizer).train(total_epochs)
    dist.destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--total-epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    main(args.total_epochs, args.batch_size)
