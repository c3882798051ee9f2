"""NNCLR at a tiny size, written after Dwibedi, Aytar, Tompson, Sermanet and Zisserman, "With a
Little Help from My Friends: Nearest-Neighbor Contrastive Learning of Visual Representations" (ICCV
2021, arXiv:2104.14548), with lightly-ai/lightly (https://github.com/lightly-ai/lightly,
examples/pytorch/nnclr.py, lightly/models/modules/nn_memory_bank.py NNMemoryBankModule,
lightly/models/modules/memory_bank.py MemoryBankModule) and the loss of vturrisi/solo-learn
(https://github.com/vturrisi/solo-learn, solo/losses/nnclr.py nnclr_loss_func). Two augmented views
go through a backbone, a projector and a predictor; the projection ``z`` is cut from the graph after
the predictor has read it (``z = z.detach()``), and its nearest neighbour in a support set (a FIFO
queue of past projections, filled with random unit vectors at first, stored without graph, looked up
before the current batch is added) replaces it as the positive of an InfoNCE loss against the other
view's prediction ``p``, symmetrised; the neighbour carries no gradient, so the loss trains the
backbone, the projector and the predictor through ``p``. Two phases: NNCLR pretraining, then a linear
classifier trained on the frozen backbone's features, computed under torch.no_grad(). Augmentations
are multiplicative and additive noise on vectors of a few classes made in the script. Injected bug:
the predictor reads the projection cut from the graph (the stop-gradient put on its input instead of
after it), so the loss trains the predictor alone and the backbone and the projector never train."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--pretrain-steps", type=int, default=12)
parser.add_argument("--probe-steps", type=int, default=10)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--queue-size", type=int, default=256)
parser.add_argument("--temperature", type=float, default=0.1)
parser.add_argument("--lr", type=float, default=0.06)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, hidden, proj_dim, n_classes, n_points = 16, 64, 32, 4, 512
labels = torch.randint(0, n_classes, (n_points,))
data = 2 * torch.randn(n_classes, dim)[labels] + torch.randn(n_points, dim)


def augment(x):
    return x * (1 + 0.2 * torch.randn_like(x)) + 0.3 * torch.randn_like(x)


class NNCLR(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                                      nn.ReLU())
        self.projection_head = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(),
                                             nn.Linear(hidden, proj_dim))
        self.prediction_head = nn.Sequential(nn.Linear(proj_dim, hidden), nn.ReLU(),
                                             nn.Linear(hidden, proj_dim))

    def forward(self, x):
        z = self.projection_head(self.backbone(x))
        p = self.prediction_head(z.detach())
        z = z.detach()
        return z, p


class SupportSet:
    """A FIFO queue of past projections, random unit vectors at first."""

    def __init__(self, size, dimension):
        self.bank = F.normalize(torch.randn(size, dimension), dim=1)
        self.ptr = 0

    def nearest_neighbour(self, z):
        similarity = F.normalize(z, dim=1) @ F.normalize(self.bank, dim=1).T
        return self.bank[similarity.argmax(dim=1)]

    def enqueue(self, z):
        self.bank[self.ptr:self.ptr + z.shape[0]] = z.detach()
        self.ptr = (self.ptr + z.shape[0]) % self.bank.shape[0]


def nnclr_loss(nn_z, p, temperature):
    logits = F.normalize(nn_z, dim=1) @ F.normalize(p, dim=1).T / temperature
    return F.cross_entropy(logits, torch.arange(nn_z.shape[0]))


model = NNCLR()
support_set = SupportSet(args.queue_size, proj_dim)
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

# phase 1: NNCLR pretraining
for step in range(args.pretrain_steps):
    x = data[torch.randint(0, n_points, (args.batch_size,))]
    z0, p0 = model(augment(x))
    z1, p1 = model(augment(x))
    nn0 = support_set.nearest_neighbour(z0)
    nn1 = support_set.nearest_neighbour(z1)
    support_set.enqueue(z1)
    loss = 0.5 * (nnclr_loss(nn0, p1, args.temperature) + nnclr_loss(nn1, p0, args.temperature))
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    print(f"pretrain {step} NNCLR loss {loss.item():.4f}")

# phase 2: linear evaluation on the frozen backbone
probe = nn.Linear(hidden, n_classes)
probe_optimizer = torch.optim.SGD(probe.parameters(), lr=0.1, momentum=0.9)
for step in range(args.probe_steps):
    idx = torch.randint(0, n_points, (args.batch_size,))
    with torch.no_grad():
        features = model.backbone(data[idx])
    loss = F.cross_entropy(probe(features), labels[idx])
    probe_optimizer.zero_grad()
    loss.backward()
    probe_optimizer.step()
    print(f"probe {step} cross-entropy {loss.item():.4f}")

if args.out:
    torch.save({"model": model.state_dict(), "probe": probe.state_dict(),
                "support_set": support_set.bank.clone()}, args.out)
