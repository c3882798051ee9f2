"""SwAV with its prototypes frozen for the first iterations, at a tiny size, written after Caron,
Misra, Mairal, Goyal, Bojanowski and Joulin, "Unsupervised Learning of Visual Features by
Contrasting Cluster Assignments" (NeurIPS 2020, arXiv:2006.09882) and facebookresearch/swav
(main_swav.py, ``train``): two views scored against learned prototypes, codes by Sinkhorn-Knopp
under ``torch.no_grad()``, each view predicting the other's code, and the prototypes' gradients
cancelled (``p.grad = None``) for the first ``--freeze-prototypes-niters`` iterations. BUG
INJECTED: the condition compares the EPOCH, not the run's iteration counter, with that
threshold counted in iterations: at the defaults (3 epochs, threshold 3) ``epoch < 3`` holds at
every iteration, and the prototypes never train, though the optimizer holds them and the loss
gives them gradient. The fix is the condition's line (``iteration``, not ``epoch``). Vectors
made in the script. SGD with momentum. ``--out PATH`` saves the model's state_dict after the
run, ``--init-out PATH`` before it."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--batch-size", type=int, default=24)
parser.add_argument("--freeze-prototypes-niters", type=int, default=3)
parser.add_argument("--epsilon", type=float, default=0.05)
parser.add_argument("--temperature", type=float, default=0.1)
parser.add_argument("--sinkhorn-iterations", type=int, default=3)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
parser.add_argument("--init-out", default=None, help="where to save the tensors before training")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, feat, nmb_prototypes = 12, 8, 10
centers = torch.randn(6, dim)
data = centers[torch.randint(0, 6, (96,))] + 0.3 * torch.randn(96, dim)


class SwAVNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, feat))
        self.prototypes = nn.Linear(feat, nmb_prototypes, bias=False)

    def forward(self, x):
        z = F.normalize(self.backbone(x), dim=1)
        return z, self.prototypes(z)


model = SwAVNet()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
if args.init_out:
    torch.save(model.state_dict(), args.init_out)


def augment(x):
    return x * (torch.rand_like(x) > 0.2) + 0.1 * torch.randn_like(x)


def distributed_sinkhorn(out):
    q = torch.exp(out / args.epsilon).t()
    k, b = q.shape
    q /= q.sum()
    for _ in range(args.sinkhorn_iterations):
        q /= q.sum(dim=1, keepdim=True)
        q /= k
        q /= q.sum(dim=0, keepdim=True)
        q /= b
    q *= b
    return q.t()


iters_per_epoch = len(data) // args.batch_size
for epoch in range(args.epochs):
    order = torch.randperm(len(data))
    for it in range(iters_per_epoch):
        iteration = epoch * iters_per_epoch + it
        batch = data[order[it * args.batch_size:(it + 1) * args.batch_size]]
        scores = [model(augment(batch))[1] for _ in range(2)]
        loss = 0
        for i in range(2):
            with torch.no_grad():
                q = distributed_sinkhorn(scores[i].detach())
            log_p = F.log_softmax(scores[1 - i] / args.temperature, dim=1)
            loss = loss - torch.mean(torch.sum(q * log_p, dim=1))
        loss = loss / 2
        optimizer.zero_grad()
        loss.backward()
        # cancel the gradients of the prototypes for the first iterations of the run
        if epoch < args.freeze_prototypes_niters:
            for name, p in model.named_parameters():
                if "prototypes" in name:
                    p.grad = None
        optimizer.step()
        print(f"epoch {epoch} iteration {iteration} loss {loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
