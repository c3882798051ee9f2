"""Activation-based attention transfer at a tiny size, written after Zagoruyko and Komodakis,
"Paying More Attention to Attention: Improving the Performance of Convolutional Neural Networks via
Attention Transfer" (ICLR 2017, arXiv:1612.03928), section 3.1, with szagoruyko/attention-transfer
(https://github.com/szagoruyko/attention-transfer, cifar.py: resnet, at, at_loss, main and its
h(sample); utils.py distillation). Two phases: a wide teacher is first trained by cross-entropy
(the reference loads one trained beforehand); then a thinner student of the same depth is trained
by cross-entropy plus beta/2 times the attention-transfer loss at the end of each of its three
groups (beta = 1e3 in the paper, scaled down here for maps 16 times smaller): the attention map
at(x) of a group's output is the mean over channels of its squared activations, flattened and
L2-normalised per sample, and the loss is the mean squared difference of the student's and the
teacher's maps (the spatial sizes match; the widths need not). As in cifar.py, the teacher's
parameters are merged with the student's into one collection after being frozen with
requires_grad = False, and the optimizer is built over those that still require gradient, so the
teacher's forward runs with autograd on but no gradient reaches its weights. Noisy images of a few
classes, each a coloured square in its own quadrant, made in the script. Injected bug: the teacher
is not frozen before its parameters are merged with the student's (cifar.py's
``v.requires_grad = False`` left out), so the list of parameters that require gradient, which the
optimizer is built over, holds the teacher's too; the attention-transfer loss, computed from the
teacher's maps with their graph, then trains the teacher towards the student's attention as well
as the student towards the teacher's, and the weight decay shrinks the teacher; second phase of a
two-phase script."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--teacher-steps", type=int, default=20)
parser.add_argument("--student-steps", type=int, default=10)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--teacher-lr", type=float, default=0.1)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--beta", type=float, default=50.0)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_classes, n_images, size = 4, 256, 8
patterns = torch.zeros(n_classes, 3, size, size)
for c in range(n_classes):
    top, left = 4 * (c // 2), 4 * (c % 2)
    patterns[c, :, top:top + 4, left:left + 4] = torch.randn(3, 1, 1)
labels = torch.randint(0, n_classes, (n_images,))
images = patterns[labels] + 0.5 * torch.randn(n_images, 3, size, size)


class GroupNet(nn.Module):
    """A stem and three groups of width k * (4, 8, 16), the last two at stride 2; the forward
    returns the logits and the outputs of the three groups."""

    def __init__(self, k):
        super().__init__()
        widths = [4 * k, 8 * k, 16 * k]
        self.conv0 = nn.Conv2d(3, widths[0], 3, padding=1)
        self.groups = nn.ModuleList()
        for i, (w_in, w_out) in enumerate(zip([widths[0], *widths[:2]], widths)):
            stride = 1 if i == 0 else 2
            self.groups.append(nn.Sequential(
                nn.ReLU(), nn.Conv2d(w_in, w_out, 3, stride=stride, padding=1)))
        self.fc = nn.Linear(widths[2] * 4, n_classes)

    def forward(self, x):
        o = self.conv0(x)
        group_outputs = []
        for group in self.groups:
            o = group(o)
            group_outputs.append(o)
        o = F.relu(o).flatten(1)
        return self.fc(o), group_outputs


def at(x):
    return F.normalize(x.pow(2).mean(1).view(x.size(0), -1), dim=1)


def at_loss(x, y):
    return (at(x) - at(y)).pow(2).mean()


# phase 1: the teacher, cross-entropy
teacher = GroupNet(2)
teacher_optimizer = torch.optim.SGD(teacher.parameters(), lr=args.teacher_lr, momentum=0.9,
                                    weight_decay=5e-4)
for step in range(args.teacher_steps):
    idx = torch.randint(0, n_images, (args.batch_size,))
    loss = F.cross_entropy(teacher(images[idx])[0], labels[idx])
    teacher_optimizer.zero_grad()
    loss.backward()
    teacher_optimizer.step()
    print(f"teacher {step} loss {loss.item():.4f}")

# phase 2: the student, cross-entropy + beta/2 * attention transfer at each group
student = GroupNet(1)
params = nn.ModuleDict({"student": student, "teacher": teacher})
optimizable = [p for p in params.parameters() if p.requires_grad]
optimizer = torch.optim.SGD(optimizable, lr=args.lr, momentum=0.9, weight_decay=5e-4)
for step in range(args.student_steps):
    idx = torch.randint(0, n_images, (args.batch_size,))
    x, y = images[idx], labels[idx]
    y_s, g_s = student(x)
    y_t, g_t = teacher(x)
    loss_groups = [at_loss(a, b) for a, b in zip(g_s, g_t)]
    loss_cls = F.cross_entropy(y_s, y)
    loss = loss_cls + args.beta / 2 * sum(loss_groups)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"student {step} cls {loss_cls.item():.4f} "
          f"at {' '.join(f'{v.item():.5f}' for v in loss_groups)}")

if args.out:
    torch.save({"teacher": teacher.state_dict(), "student": student.state_dict()}, args.out)
