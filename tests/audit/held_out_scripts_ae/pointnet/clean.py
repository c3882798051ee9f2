"""PointNet classification with input and feature T-Nets on synthetic point-cloud shapes.

Paper: Charles R. Qi, Hao Su, Kaichun Mo and Leonidas J. Guibas, "PointNet: Deep Learning on
Point Sets for 3D Classification and Segmentation", CVPR 2017, arXiv:1612.00593.
Reference implementations: charlesq34/pointnet (TensorFlow; models/pointnet_cls.py get_loss with
the feature-transform regularizer ||I - A A^T||^2 weighted 0.001, models/transform_nets.py) and
the PyTorch port fxia22/pointnet.pytorch, pointnet/model.py (STN3d: shared 1x1 convolutions,
max pooling, fully connected layers and an added identity giving the 3x3 input transform;
STNkd: the same for the k x k feature transform; PointNetfeat: input transform, per-point
convolutions, feature transform, max pooling to a global feature; PointNetCls: fully connected
head with dropout 0.3 and log_softmax; feature_transform_regularizer: the batch mean of the
Frobenius norm of A A^T - I) and utils/train_classification.py (Adam lr 0.001 with betas
(0.9, 0.999), StepLR halving the learning rate, per batch: zero_grad, classifier.train(),
forward, nll_loss plus 0.001 times the feature-transform regularizer when --feature_transform
is set, backward, step; evaluation in classifier.eval()), and pointnet/dataset.py (points
centred and scaled to the unit sphere, training augmentation by a random rotation about the up
axis and Gaussian jitter of 0.02).

Four shape classes (sphere, cube surface, cylinder side, cone side) are sampled in the script
with 64 points each and random anisotropic scales, then centred and scaled to the unit sphere.
The network is PointNet with all widths divided by 16 (64 -> 16 ... 1024 -> 64) and BatchNorm
after every layer but the last, with the feature transform on (a 16 x 16 STNkd). One Adam
optimizer holds every parameter of the classifier (both T-Nets, the point convolutions and the
head); each batch is augmented (rotation about y, jitter), the loss is the NLL of the
log-softmax outputs plus 0.001 times the orthogonality regularizer of the feature transform,
and StepLR halves the learning rate every two epochs (the initial learning rate is raised to
0.01 for the 40 updates of this tiny run). Test accuracy is computed in eval mode under
torch.no_grad() after every epoch.
As published: clean.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--num_points", type=int, default=64)
parser.add_argument("--n_train", type=int, default=160)
parser.add_argument("--n_test", type=int, default=64)
parser.add_argument("--batch_size", type=int, default=16)
parser.add_argument("--nepoch", type=int, default=4)
parser.add_argument("--width", type=int, default=16)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--step_size", type=int, default=2)
parser.add_argument("--gamma", type=float, default=0.5)
parser.add_argument("--reg_weight", type=float, default=0.001)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

N_CLASSES = 4


def sample_shape(label, n):
    if label == 0:  # sphere
        p = torch.randn(n, 3)
        p = p / p.norm(dim=1, keepdim=True)
    elif label == 1:  # cube surface
        p = torch.rand(n, 3) * 2 - 1
        face = torch.randint(0, 3, (n,))
        sign = torch.randint(0, 2, (n,)).float() * 2 - 1
        p[torch.arange(n), face] = sign
    else:  # cylinder (2) or cone (3) side, axis along y
        theta = torch.rand(n) * 2 * math.pi
        h = torch.rand(n)
        r = torch.ones(n) if label == 2 else 1.0 - h
        p = torch.stack([r * torch.cos(theta), 2 * h - 1, r * torch.sin(theta)], 1)
    p = p * (0.8 + 0.4 * torch.rand(1, 3))
    p = p - p.mean(0, keepdim=True)
    return p / p.norm(dim=1).max()


def make_dataset(n):
    labels = torch.arange(n) % N_CLASSES
    points = torch.stack([sample_shape(int(c), args.num_points) for c in labels])
    return points, labels


def augment(points):
    theta = torch.rand(points.size(0)) * 2 * math.pi
    c, s = torch.cos(theta), torch.sin(theta)
    rot = torch.zeros(points.size(0), 3, 3)
    rot[:, 0, 0], rot[:, 0, 2], rot[:, 1, 1] = c, -s, 1.0
    rot[:, 2, 0], rot[:, 2, 2] = s, c
    points = torch.bmm(points, rot)
    return points + 0.02 * torch.randn_like(points)


class STNkd(nn.Module):
    def __init__(self, k, w):
        super().__init__()
        self.k = k
        self.conv1 = nn.Conv1d(k, w, 1)
        self.conv2 = nn.Conv1d(w, 2 * w, 1)
        self.conv3 = nn.Conv1d(2 * w, 4 * w, 1)
        self.fc1 = nn.Linear(4 * w, 2 * w)
        self.fc2 = nn.Linear(2 * w, w)
        self.fc3 = nn.Linear(w, k * k)
        self.bn1 = nn.BatchNorm1d(w)
        self.bn2 = nn.BatchNorm1d(2 * w)
        self.bn3 = nn.BatchNorm1d(4 * w)
        self.bn4 = nn.BatchNorm1d(2 * w)
        self.bn5 = nn.BatchNorm1d(w)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = F.relu(self.bn3(self.conv3(x)))
        x = torch.max(x, 2)[0]
        x = F.relu(self.bn4(self.fc1(x)))
        x = F.relu(self.bn5(self.fc2(x)))
        x = self.fc3(x)
        iden = torch.eye(self.k).flatten().unsqueeze(0)
        return (x + iden).view(-1, self.k, self.k)


class PointNetfeat(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.stn = STNkd(3, w)
        self.conv1 = nn.Conv1d(3, w, 1)
        self.conv2 = nn.Conv1d(w, 2 * w, 1)
        self.conv3 = nn.Conv1d(2 * w, 4 * w, 1)
        self.bn1 = nn.BatchNorm1d(w)
        self.bn2 = nn.BatchNorm1d(2 * w)
        self.bn3 = nn.BatchNorm1d(4 * w)
        self.fstn = STNkd(w, w)

    def forward(self, x):
        trans = self.stn(x)
        x = torch.bmm(x.transpose(2, 1), trans).transpose(2, 1)
        x = F.relu(self.bn1(self.conv1(x)))
        trans_feat = self.fstn(x)
        x = torch.bmm(x.transpose(2, 1), trans_feat).transpose(2, 1)
        x = F.relu(self.bn2(self.conv2(x)))
        x = self.bn3(self.conv3(x))
        x = torch.max(x, 2)[0]
        return x, trans, trans_feat


class PointNetCls(nn.Module):
    def __init__(self, k, w):
        super().__init__()
        self.feat = PointNetfeat(w)
        self.fc1 = nn.Linear(4 * w, 2 * w)
        self.fc2 = nn.Linear(2 * w, w)
        self.fc3 = nn.Linear(w, k)
        self.dropout = nn.Dropout(p=0.3)
        self.bn1 = nn.BatchNorm1d(2 * w)
        self.bn2 = nn.BatchNorm1d(w)

    def forward(self, x):
        x, trans, trans_feat = self.feat(x)
        x = F.relu(self.bn1(self.fc1(x)))
        x = F.relu(self.bn2(self.dropout(self.fc2(x))))
        x = self.fc3(x)
        return F.log_softmax(x, dim=1), trans, trans_feat


def feature_transform_regularizer(trans):
    eye = torch.eye(trans.size(1)).unsqueeze(0)
    return torch.mean(torch.norm(torch.bmm(trans, trans.transpose(2, 1)) - eye, dim=(1, 2)))


train_points, train_labels = make_dataset(args.n_train)
test_points, test_labels = make_dataset(args.n_test)

classifier = PointNetCls(N_CLASSES, args.width)
optimizer = torch.optim.Adam(classifier.parameters(), lr=args.lr, betas=(0.9, 0.999))
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=args.step_size,
                                            gamma=args.gamma)
num_batch = args.n_train // args.batch_size

for epoch in range(args.nepoch):
    perm = torch.randperm(args.n_train)
    for i in range(num_batch):
        idx = perm[i * args.batch_size:(i + 1) * args.batch_size]
        points = augment(train_points[idx]).transpose(2, 1)
        target = train_labels[idx]
        optimizer.zero_grad()
        classifier.train()
        pred, trans, trans_feat = classifier(points)
        loss = F.nll_loss(pred, target)
        loss = loss + feature_transform_regularizer(trans_feat) * args.reg_weight
        loss.backward()
        optimizer.step()
        correct = pred.argmax(1).eq(target).sum().item()
        if i % 5 == 0:
            print(f"[{epoch}: {i}/{num_batch}] train loss {loss.item():.4f} "
                  f"accuracy {correct / args.batch_size:.3f}")
    scheduler.step()

    classifier.eval()
    with torch.no_grad():
        pred, _, _ = classifier(test_points.transpose(2, 1))
        test_acc = pred.argmax(1).eq(test_labels).float().mean().item()
    print(f"[{epoch}] test accuracy {test_acc:.3f}")

if args.out:
    torch.save({"classifier": classifier.state_dict()}, args.out)
