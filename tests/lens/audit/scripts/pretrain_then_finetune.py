"""Unsupervised pre-training then supervised fine-tuning at a tiny size, after Erhan et al.,
"Why Does Unsupervised Pre-training Help Deep Learning?" (JMLR 11, 2010), the two-stage recipe
of Bengio et al., "Greedy Layer-Wise Training of Deep Networks" (NeurIPS 2006): the encoder is
first trained as an auto-encoder on the inputs alone (a reconstruction loss, plain SGD), then
the same model, encoder and a classifier head, is fine-tuned on the labels (cross-entropy,
Adam). The inputs (two noisy clusters in 4-d, mixed into 16-d and standardized) are made in
the script. As published: both optimizers are built at the start, each steps the model in a phase
of its own, one after the other. ``--out PATH`` saves the model's weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--pretrain-iterations", type=int, default=6)
parser.add_argument("--finetune-iterations", type=int, default=6)
parser.add_argument("--out", default=None)
args = parser.parse_args()
torch.manual_seed(args.seed)

IN, HIDDEN, CLASSES = 16, 8, 2


class AutoEncoderClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(IN, HIDDEN), nn.Sigmoid())
        self.decoder = nn.Linear(HIDDEN, IN)
        self.head = nn.Linear(HIDDEN, CLASSES)

    def reconstruct(self, x):
        return self.decoder(self.encoder(x))

    def forward(self, x):
        return self.head(self.encoder(x))


mixing = torch.randn(4, IN)
labels = torch.randint(0, CLASSES, (128,))
latent = torch.randn(128, 4) + (labels.float()[:, None] * 2 - 1)
inputs = latent @ mixing + 0.1 * torch.randn(128, IN)
inputs = (inputs - inputs.mean(0)) / inputs.std(0)

model = AutoEncoderClassifier()
opt_pre = torch.optim.SGD(model.parameters(), lr=0.5)
opt_ft = torch.optim.Adam(model.parameters(), lr=1e-2)

# phase 1: unsupervised pre-training (the labels are not read)
for it in range(args.pretrain_iterations):
    idx = torch.randint(0, inputs.shape[0], (32,))
    x = inputs[idx]
    loss = F.mse_loss(model.reconstruct(x), x)
    opt_pre.zero_grad()
    loss.backward()
    opt_pre.step()
    print(f"pretrain iteration {it} reconstruction {loss.item():.4f}")

# phase 2: supervised fine-tuning of the whole model
for it in range(args.finetune_iterations):
    idx = torch.randint(0, inputs.shape[0], (32,))
    loss = F.cross_entropy(model(inputs[idx]), labels[idx])
    opt_ft.zero_grad()
    loss.backward()
    opt_ft.step()
    print(f"finetune iteration {it} cross-entropy {loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
