"""SwAV at a tiny size, written after Caron, Misra, Mairal, Goyal, Bojanowski and Joulin,
"Unsupervised Learning of Visual Features by Contrasting Cluster Assignments" (NeurIPS 2020,
arXiv:2006.09882), with the training loop of facebookresearch/swav
(https://github.com/facebookresearch/swav, main_swav.py train and distributed_sinkhorn): at every
iteration the prototypes are normalised in place under torch.no_grad(); the codes of each view are
computed by the Sinkhorn-Knopp algorithm from the prototype scores cut from the graph (the
reference detaches them under torch.no_grad()); each view's scores predict the other view's codes
(the swapped prediction loss), which trains the backbone, the projection head and the prototypes;
during the first ``freeze_prototypes_niters`` iterations (counted in iterations, across epochs) the
prototypes' gradients are cancelled before the step. SGD stands in for LARS. An MLP on vectors
drawn around a few centres, made in the script. Injected bug: the prototype scores the codes are
computed from are not cut from the graph, so the Sinkhorn-Knopp codes, the targets of the swapped
prediction, carry gradient and the loss also trains the network through its own targets."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--iters-per-epoch", type=int, default=5)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--nmb-prototypes", type=int, default=10)
parser.add_argument("--temperature", type=float, default=0.1)
parser.add_argument("--epsilon", type=float, default=0.05)
parser.add_argument("--sinkhorn-iterations", type=int, default=3)
parser.add_argument("--freeze-prototypes-niters", type=int, default=4)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, hidden, feat = 16, 48, 16
centres = 2.0 * torch.randn(6, dim)


def batch(n):
    return centres[torch.randint(0, len(centres), (n,))] + 0.5 * torch.randn(n, dim)


def augment(x):
    return x * (1 + 0.2 * torch.randn_like(x)) + 0.3 * torch.randn_like(x)


class SwAVNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(),
                                      nn.Linear(hidden, hidden), nn.ReLU())
        self.projection_head = nn.Sequential(nn.Linear(hidden, hidden), nn.BatchNorm1d(hidden),
                                             nn.ReLU(), nn.Linear(hidden, feat))
        self.prototypes = nn.Linear(feat, args.nmb_prototypes, bias=False)

    def forward(self, x):
        z = F.normalize(self.projection_head(self.backbone(x)), dim=1, p=2)
        return z, self.prototypes(z)


def sinkhorn(out):
    Q = torch.exp(out / args.epsilon).t()  # (prototypes, samples)
    K, B = Q.shape
    Q = Q / Q.sum()
    for _ in range(args.sinkhorn_iterations):
        Q = Q / Q.sum(dim=1, keepdim=True) / K
        Q = Q / Q.sum(dim=0, keepdim=True) / B
    return (Q * B).t()


model = SwAVNet()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-6)
crops, crops_for_assign, bs = 2, [0, 1], args.batch_size
for epoch in range(args.epochs):
    for it in range(args.iters_per_epoch):
        iteration = epoch * args.iters_per_epoch + it
        with torch.no_grad():
            w = model.prototypes.weight.data.clone()
            model.prototypes.weight.copy_(F.normalize(w, dim=1, p=2))
        x = batch(bs)
        embedding, output = model(torch.cat([augment(x) for _ in range(crops)]))
        loss = 0
        for crop_id in crops_for_assign:
            out = output[bs * crop_id:bs * (crop_id + 1)]
            q = sinkhorn(out)
            subloss = 0
            for v in [v for v in range(crops) if v != crop_id]:
                p = output[bs * v:bs * (v + 1)] / args.temperature
                subloss -= torch.mean(torch.sum(q * F.log_softmax(p, dim=1), dim=1))
            loss += subloss / (crops - 1)
        loss /= len(crops_for_assign)
        optimizer.zero_grad()
        loss.backward()
        if iteration < args.freeze_prototypes_niters:
            model.prototypes.weight.grad = None
        optimizer.step()
        print(f"epoch {epoch} iteration {iteration} swapped loss {loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
