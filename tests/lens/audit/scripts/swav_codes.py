"""SwAV's swapped prediction at a tiny size, written after Caron, Misra, Mairal, Goyal,
Bojanowski and Joulin, "Unsupervised Learning of Visual Features by Contrasting Cluster
Assignments" (NeurIPS 2020, arXiv:2006.09882) and facebookresearch/swav (main_swav.py,
``train`` and ``distributed_sinkhorn``): the normalised embeddings of two views are scored
against a set of learned prototypes (a linear layer, renormalised before each step); the code
of each view is computed from its own scores under ``torch.no_grad()`` by a few Sinkhorn-Knopp
iterations, and the loss is the cross-entropy between the code of one view, a TARGET
distribution, and the softmax over the prototypes of the other view. The codes come from the
same network in the same step and are cut on purpose; the scores of the predicting view train
the network and the prototypes. Vectors made in the script, views by masking and noise. SGD
with momentum. As published: clean. ``--out PATH`` saves the network's and the prototypes'
weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--epsilon", type=float, default=0.05)
parser.add_argument("--temperature", type=float, default=0.1)
parser.add_argument("--sinkhorn-iterations", type=int, default=3)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, feat, nmb_prototypes = 12, 8, 10
centers = torch.randn(6, dim)
data = centers[torch.randint(0, 6, (96,))] + 0.3 * torch.randn(96, dim)

model = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, feat))
prototypes = nn.Linear(feat, nmb_prototypes, bias=False)
optimizer = torch.optim.SGD([*model.parameters(), *prototypes.parameters()], lr=0.05,
                            momentum=0.9)


def distributed_sinkhorn(out):
    Q = torch.exp(out / args.epsilon).t()
    B, K = Q.shape[1], Q.shape[0]
    Q /= torch.sum(Q)
    for _ in range(args.sinkhorn_iterations):
        Q /= torch.sum(Q, dim=1, keepdim=True)
        Q /= K
        Q /= torch.sum(Q, dim=0, keepdim=True)
        Q /= B
    Q *= B
    return Q.t()


def augment(x):
    return x * (torch.rand_like(x) > 0.2) + 0.1 * torch.randn_like(x)


for step in range(args.steps):
    with torch.no_grad():
        prototypes.weight.copy_(F.normalize(prototypes.weight, dim=1))
    batch = data[16 * (step % 6):16 * (step % 6) + 16]
    embedding = F.normalize(model(torch.cat([augment(batch), augment(batch)])), dim=1)
    output = prototypes(embedding)
    bs = len(batch)
    loss = 0
    for crop_id in range(2):
        with torch.no_grad():
            q = distributed_sinkhorn(output[bs * crop_id:bs * (crop_id + 1)].detach())
        x = output[bs * (1 - crop_id):bs * (2 - crop_id)] / args.temperature
        loss = loss - torch.mean(torch.sum(q * F.log_softmax(x, dim=1), dim=1)) / 2
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({**{f"model.{k}": v for k, v in model.state_dict().items()},
                **{f"prototypes.{k}": v for k, v in prototypes.state_dict().items()}}, args.out)
