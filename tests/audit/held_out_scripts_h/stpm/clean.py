"""Student-teacher feature pyramid matching at a tiny size, written after Wang, Han, Ding and
Huang, "Student-Teacher Feature Pyramid Matching for Anomaly Detection" (BMVC 2021,
arXiv:2103.04257), section 3, with the PyTorch implementations hcw-00/STPM_anomaly_detection
(https://github.com/hcw-00/STPM_anomaly_detection, train.py: STPM.load_model, STPM.train, cal_loss,
cal_anomaly_map) and openvinotoolkit/anomalib (https://github.com/openvinotoolkit/anomalib,
src/anomalib/models/image/stpm/: torch_model.py STPMModel, loss.py STPMLoss, lightning_model.py
Stpm.training_step and configure_optimizers). Two phases: a
small convolutional backbone is first trained as a classifier on labelled images of several kinds
(standing in for the ImageNet-pretrained teacher) by its own Adam; it is then frozen
(requires_grad = False on its parameters, eval(), its features computed under torch.no_grad()),
and a student of the same architecture, started from random weights, is trained on normal images
of one kind only so that its features at the ends of the three stages match the teacher's: at
each scale both feature maps are L2-normalised along the channels and the loss is
0.5 / (h * w) times the summed squared difference, summed over the scales, with SGD (momentum 0.9,
weight decay 1e-4) over the student's parameters, cleared at every step. The anomaly map of a test
image is the product over the scales of the upsampled per-pixel distances. Textured images made in
the script, some with a bright defect for the test. As published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--pretrain-steps", type=int, default=15)
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--pretrain-lr", type=float, default=0.01)
parser.add_argument("--lr", type=float, default=0.02)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_kinds, size = 4, 16
coords = torch.linspace(-1, 1, size)
yy, xx = torch.meshgrid(coords, coords, indexing="ij")
angles = torch.arange(n_kinds).float() * torch.pi / n_kinds
textures = torch.stack([torch.sin(6 * (xx * a.cos() + yy * a.sin())) for a in angles])


def make_images(kinds, noise=0.3):
    base = textures[kinds].unsqueeze(1) * torch.tensor([1.0, 0.6, 0.3]).view(1, 3, 1, 1)
    return base + noise * torch.randn(len(kinds), 3, size, size)


pretrain_kinds = torch.randint(0, n_kinds, (256,))
pretrain_images = make_images(pretrain_kinds)
normal_images = make_images(torch.zeros(128, dtype=torch.long))
test_images = make_images(torch.zeros(8, dtype=torch.long))
test_images[4:, :, 5:9, 5:9] += 2.0


class Backbone(nn.Module):
    """Three stages (16x16, 8x8, 4x4) and a classifier head used only to pretrain the teacher."""

    def __init__(self):
        super().__init__()
        self.stages = nn.ModuleList([
            nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU()),
            nn.Sequential(nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU()),
            nn.Sequential(nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU())])
        self.fc = nn.Linear(32, n_kinds)

    def forward(self, x):
        features = []
        for stage in self.stages:
            x = stage(x)
            features.append(x)
        return features, self.fc(x.mean((2, 3)))


def stpm_loss(features_s, features_t):
    loss = 0.0
    for fs, ft in zip(features_s, features_t):
        h, w = fs.shape[2:]
        fs_norm, ft_norm = F.normalize(fs, dim=1), F.normalize(ft, dim=1)
        loss = loss + 0.5 / (h * w) * F.mse_loss(fs_norm, ft_norm, reduction="sum")
    return loss


def anomaly_map(features_s, features_t):
    amap = torch.ones(features_s[0].size(0), 1, size, size)
    for fs, ft in zip(features_s, features_t):
        distance = 0.5 * (F.normalize(fs, dim=1) - F.normalize(ft, dim=1)).pow(2).sum(1, True)
        amap = amap * F.interpolate(distance, size=size, mode="bilinear", align_corners=False)
    return amap


# phase 1: the teacher, a classifier of the several kinds
teacher = Backbone()
pretrain_optimizer = torch.optim.Adam(teacher.parameters(), lr=args.pretrain_lr)
for step in range(args.pretrain_steps):
    idx = torch.randint(0, len(pretrain_images), (args.batch_size,))
    loss = F.cross_entropy(teacher(pretrain_images[idx])[1], pretrain_kinds[idx])
    pretrain_optimizer.zero_grad()
    loss.backward()
    pretrain_optimizer.step()
    print(f"pretrain {step} loss {loss.item():.4f}")

# phase 2: the student matches the frozen teacher's feature pyramid on normal images
for p in teacher.parameters():
    p.requires_grad = False
teacher.eval()
student = Backbone()
optimizer = torch.optim.SGD(student.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
for step in range(args.steps):
    batch = normal_images[torch.randint(0, len(normal_images), (args.batch_size,))]
    optimizer.zero_grad()
    with torch.no_grad():
        features_t, _ = teacher(batch)
    features_s, _ = student(batch)
    loss = stpm_loss(features_s, features_t)
    loss.backward()
    optimizer.step()
    print(f"student {step} loss {loss.item():.4f}")

student.eval()
with torch.no_grad():
    scores = anomaly_map(student(test_images)[0], teacher(test_images)[0]).amax((1, 2, 3))
print("anomaly scores, normal then defective:", " ".join(f"{s:.4f}" for s in scores.tolist()))

if args.out:
    torch.save({"teacher": teacher.state_dict(), "student": student.state_dict()}, args.out)
