"""An autoencoder in Lightning with manual optimization at a tiny size, written after
Lightning's README ``LitAutoEncoder`` and its manual-optimization guide (https://github.com/
Lightning-AI/pytorch-lightning/blob/47e2f152751fe271d5245d8eb88c8fd8b3e7765f/docs/source-pytorch/
model/manual_optimization.rst): ``opt = self.optimizers()``, ``opt.zero_grad()``,
``self.manual_backward(loss)``, ``opt.step()``. As published: clean."""

import argparse

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--max-steps", type=int, default=4)
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--seed", type=int, default=7)
args = parser.parse_args()
L.seed_everything(args.seed, verbose=False)


class LitAutoEncoder(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.automatic_optimization = False
        self.encoder = nn.Sequential(nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 3))
        self.decoder = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 16))

    def training_step(self, batch, batch_idx):
        opt = self.optimizers()
        (x,) = batch
        z = self.encoder(x)
        loss = F.mse_loss(self.decoder(z), x)
        opt.zero_grad()
        self.manual_backward(loss)
        opt.step()
        self.log("train_loss", loss)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


data = DataLoader(TensorDataset(torch.randn(64, 16)), batch_size=args.batch_size)
trainer = L.Trainer(max_steps=args.max_steps, accelerator="cpu", devices=1, logger=False,
                    enable_checkpointing=False, enable_progress_bar=False,
                    enable_model_summary=False)
trainer.fit(LitAutoEncoder(), data)
