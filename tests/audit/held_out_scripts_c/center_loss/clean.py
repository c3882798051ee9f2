"""Center loss at a tiny size, written after Wen, Zhang, Li and Qiao, "A Discriminative Feature
Learning Approach for Deep Face Recognition" (ECCV 2016), Algorithm 1, with the softmax-plus-center
objective of KaiyangZhou/pytorch-center-loss (https://github.com/KaiyangZhou/pytorch-center-loss/
blob/082ffa21c065426843f26129be51bb1cfd554806/center_loss.py): ``L = L_S + lambda / 2 *
||x_i - c_{y_i}||^2``. The class centers are not learned by the optimizer here but updated as the
paper's Algorithm 1 does, ``c_j <- c_j - alpha * delta c_j`` with
``delta c_j = sum_{y_i = j} (c_j - x_i) / (1 + n_j)``, from the minibatch's deep features taken
out of the graph. A two-dimensional feature layer (the paper's LeNets++ ``ip1``) and a softmax
classifier on vectors made in the script. As published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--lambda-c", type=float, default=0.1)
parser.add_argument("--alpha", type=float, default=0.5)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, feat_dim, classes = 10, 2, 4
means = 1.5 * torch.randn(classes, dim)


def batch(n):
    y = torch.randint(0, classes, (n,))
    return means[y] + torch.randn(n, dim), y


class CenterLoss(nn.Module):
    def __init__(self, num_classes, feat_dim, alpha):
        super().__init__()
        self.alpha = alpha
        self.register_buffer("centers", torch.zeros(num_classes, feat_dim))

    def forward(self, features, labels):
        return (features - self.centers[labels]).pow(2).sum(1).mean() / 2

    def update(self, features, labels):
        diff = self.centers[labels] - features
        delta = torch.zeros_like(self.centers).index_add(0, labels, diff)
        counts = torch.bincount(labels, minlength=self.centers.size(0)).to(features)
        self.centers = self.centers - self.alpha * delta / (1 + counts).unsqueeze(1)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.ip1 = nn.Linear(dim, feat_dim)
        self.ip2 = nn.Linear(feat_dim, classes)

    def forward(self, x):
        features = self.ip1(x)
        return features, self.ip2(F.relu(features))


model = Net()
center_loss = CenterLoss(classes, feat_dim, args.alpha)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
model.train()
for step in range(args.steps):
    x, y = batch(args.batch_size)
    features, logits = model(x)
    loss_softmax = F.cross_entropy(logits, y)
    loss_center = center_loss(features, y)
    loss = loss_softmax + args.lambda_c * loss_center
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    center_loss.update(features.detach(), y)
    print(f"step {step} softmax {loss_softmax.item():.4f} center {loss_center.item():.4f}")

if args.out:
    torch.save({"model": model.state_dict(), "center_loss": center_loss.state_dict()}, args.out)
