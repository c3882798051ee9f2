"""DeepCluster at a tiny size, written after Caron, Bojanowski, Joulin and Douze, "Deep Clustering
for Unsupervised Learning of Visual Features" (ECCV 2018, arXiv:1807.05520), with
facebookresearch/deepcluster (https://github.com/facebookresearch/deepcluster, main.py main, train
and compute_features, clustering.py preprocess_features, Kmeans and cluster_assign, util.py
UnifLabelSampler). Each epoch: the features of the whole data set are computed under
torch.no_grad() with the classifier layer removed, PCA-whitened and L2-normalised, and clustered by
k-means; the cluster indices are the pseudo-labels; the top (classifier) layer is started again,
since the new indices are unrelated to the last ones (main.py builds a new layer and, in train, a
new optimizer_tl for it; here the layer, built with the model and held by its own optimizer_tl, is
re-initialised in place from the second epoch on); then the feature network and the top layer are
trained by cross-entropy on the pseudo-labels, with batches drawn uniformly over the clusters. A
small MLP in place of the convnet, on 2-D points of a few Gaussian blobs made in the script.
Injected bug: from the second epoch the top layer is started again as a new nn.Linear (for a reset
of the layer optimizer_tl holds), made after the optimizers are built, so the classifier the loss
reads is never stepped while optimizer_tl keeps the old, unused layer; the feature network is
trained through a random classifier."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--steps-per-epoch", type=int, default=8)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--clusters", type=int, default=6)
parser.add_argument("--pca-dim", type=int, default=8)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--wd", type=float, default=1e-5)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_points, hidden = 512, 32
centres = 3 * torch.randn(5, 2)
data = centres[torch.randint(0, 5, (n_points,))] + torch.randn(n_points, 2)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(2, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                                      nn.ReLU())
        self.top_layer = nn.Linear(hidden, args.clusters)

    def forward(self, x, with_top_layer=True):
        x = self.features(x)
        return self.top_layer(x) if with_top_layer else x


def preprocess_features(features, pca_dim):
    """PCA-whitening to pca_dim dimensions, then L2 normalisation of the rows."""
    centred = features - features.mean(0)
    _, singular_values, v = torch.linalg.svd(centred, full_matrices=False)
    whitened = centred @ v[:pca_dim].t() / (singular_values[:pca_dim] + 1e-5)
    return F.normalize(whitened, dim=1)


def kmeans(features, k, iterations=10):
    centroids = features[torch.randperm(len(features))[:k]].clone()
    for _ in range(iterations):
        assign = torch.cdist(features, centroids).argmin(1)
        for j in range(k):
            if (assign == j).any():
                centroids[j] = features[assign == j].mean(0)
    return torch.cdist(features, centroids).argmin(1)


model = Net()
optimizer = torch.optim.SGD(model.features.parameters(), lr=args.lr, momentum=0.9,
                            weight_decay=args.wd)
optimizer_tl = torch.optim.SGD(model.top_layer.parameters(), lr=args.lr, weight_decay=args.wd)
for epoch in range(args.epochs):
    # features of the whole data set, without the top layer, and their clustering
    model.eval()
    with torch.no_grad():
        features = model(data, with_top_layer=False)
    pseudo_labels = kmeans(preprocess_features(features, args.pca_dim), args.clusters)
    counts = torch.bincount(pseudo_labels, minlength=args.clusters).float()
    sampling_weights = 1.0 / counts[pseudo_labels]

    if epoch > 0:  # new pseudo-labels: the classifier starts again
        model.top_layer = nn.Linear(hidden, args.clusters)

    model.train()
    for step in range(args.steps_per_epoch):
        idx = torch.multinomial(sampling_weights, args.batch_size, replacement=True)
        output = model(data[idx])
        loss = F.cross_entropy(output, pseudo_labels[idx])
        optimizer.zero_grad()
        optimizer_tl.zero_grad()
        loss.backward()
        optimizer.step()
        optimizer_tl.step()
        print(f"epoch {epoch} step {step} loss {loss.item():.4f}")

if args.out:
    torch.save(model.state_dict(), args.out)
