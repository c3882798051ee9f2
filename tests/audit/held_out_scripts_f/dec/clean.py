"""Deep embedded clustering at a tiny size, written after Xie, Girshick and Farhadi, "Unsupervised
Deep Embedding for Clustering Analysis" (ICML 2016, arXiv:1511.06335), section 3, with
vlukiyanov/pt-dec (https://github.com/vlukiyanov/pt-dec, ptdec/dec.py DEC, ptdec/cluster.py
ClusterAssignment, ptdec/model.py train and target_distribution, examples/mnist/mnist.py). Two
phases: a denoising autoencoder is pretrained on reconstruction; then the encoder and the cluster
centres are trained by the KL divergence from the soft assignments ``Q`` (a Student's t kernel
between features and centres) to the target distribution ``P`` computed from ``Q`` for each batch
and cut from the graph (``.detach()``). As in the reference, the clustering optimizer is built
before the centres are initialised by k-means on the encoder's features, which are copied under
torch.no_grad() into the parameter it holds. Points of a few Gaussian clusters in a low-dimensional
space, lifted by a random map, made in the script. As published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--pretrain-steps", type=int, default=15)
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--clusters", type=int, default=4)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, hidden, embedding_dim, n_points = 20, 32, 4, 256
lift = torch.randn(3, dim)
labels = torch.randint(0, args.clusters, (n_points,))
data = torch.tanh((3 * torch.randn(args.clusters, 3)[labels] + torch.randn(n_points, 3)) @ lift / 3)


class ClusterAssignment(nn.Module):
    def __init__(self, cluster_number, embedding_dimension, alpha=1.0):
        super().__init__()
        self.alpha = alpha
        initial_cluster_centers = torch.zeros(cluster_number, embedding_dimension)
        nn.init.xavier_uniform_(initial_cluster_centers)
        self.cluster_centers = nn.Parameter(initial_cluster_centers)

    def forward(self, batch):
        norm_squared = torch.sum((batch.unsqueeze(1) - self.cluster_centers) ** 2, 2)
        numerator = 1.0 / (1.0 + (norm_squared / self.alpha))
        numerator = numerator ** (float(self.alpha + 1) / 2)
        return numerator / torch.sum(numerator, dim=1, keepdim=True)


class DEC(nn.Module):
    def __init__(self, cluster_number, hidden_dimension, encoder):
        super().__init__()
        self.encoder = encoder
        self.assignment = ClusterAssignment(cluster_number, hidden_dimension)

    def forward(self, batch):
        return self.assignment(self.encoder(batch))


def target_distribution(batch):
    weight = (batch ** 2) / torch.sum(batch, 0)
    return (weight.t() / torch.sum(weight, 1)).t()


def kmeans(features, k, iterations=10):
    centres = features[torch.randperm(len(features))[:k]].clone()
    for _ in range(iterations):
        assign = torch.cdist(features, centres).argmin(1)
        for j in range(k):
            if (assign == j).any():
                centres[j] = features[assign == j].mean(0)
    return centres


encoder = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, embedding_dim))
decoder = nn.Sequential(nn.Linear(embedding_dim, hidden), nn.ReLU(), nn.Linear(hidden, dim))

# phase 1: denoising autoencoder pretraining
ae_optimizer = torch.optim.Adam([*encoder.parameters(), *decoder.parameters()], lr=5e-3)
for step in range(args.pretrain_steps):
    batch = data[torch.randint(0, n_points, (args.batch_size,))]
    loss = F.mse_loss(decoder(encoder(F.dropout(batch, 0.1))), batch)
    ae_optimizer.zero_grad()
    loss.backward()
    ae_optimizer.step()
    print(f"pretrain {step} reconstruction {loss.item():.4f}")

# phase 2: clustering
dec = DEC(args.clusters, embedding_dim, encoder)
optimizer = torch.optim.SGD(dec.parameters(), lr=0.05, momentum=0.9)
with torch.no_grad():
    centres = kmeans(encoder(data), args.clusters)
    dec.assignment.cluster_centers.copy_(centres)
loss_function = nn.KLDivLoss(reduction="sum")
for step in range(args.steps):
    batch = data[torch.randint(0, n_points, (args.batch_size,))]
    output = dec(batch)
    target = target_distribution(output).detach()
    loss = loss_function(output.log(), target) / output.shape[0]
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"cluster {step} KL {loss.item():.4f}")

if args.out:
    torch.save({"dec": dec.state_dict(), "decoder": decoder.state_dict()}, args.out)
