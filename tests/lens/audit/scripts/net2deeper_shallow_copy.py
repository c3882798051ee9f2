"""Net2DeeperNet at a tiny size, written after Chen, Goodfellow and Shlens, "Net2Net:
Accelerating Learning via Knowledge Transfer" (ICLR 2016, arXiv:1511.05641), section 2.3, with
the layer-by-layer growth of erogol/Net2Net (net2net.py ``deeper``): a teacher MLP (its hidden
layers an ``nn.ModuleList``) is trained, then a deeper student is made from the teacher's
layers with one more hidden layer initialised to the identity after a ReLU, so that the
student computes the teacher's function at the start. The student is trained with its own SGD
optimizer, and the teacher is trained on for the same steps as the baseline it is compared
with. Gaussian clusters made in the script, a cross-entropy loss.
Injected bug: the student's layers are ``copy.copy(teacher.blocks)``, a new list of the teacher's
own layers: both optimizers step the same weights, and the networks never train apart.
``--out PATH`` saves the teacher's and the student's weights."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--teacher-steps", type=int, default=10)
parser.add_argument("--steps", type=int, default=10)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, hidden, classes = 8, 24, 4
means = 2.0 * torch.randn(classes, dim)


def batch(n):
    y = torch.randint(0, classes, (n,))
    return means[y] + torch.randn(n, dim), y


class MLP(nn.Module):
    def __init__(self, blocks, head):
        super().__init__()
        self.blocks = nn.ModuleList(blocks)
        self.head = head

    def forward(self, x):
        for block in self.blocks:
            x = F.relu(block(x))
        return self.head(x)


def identity_layer(width):
    layer = nn.Linear(width, width)
    with torch.no_grad():
        layer.weight.copy_(torch.eye(width))
        layer.bias.zero_()
    return layer


def train_step(net, optimizer):
    x, y = batch(args.batch_size)
    loss = F.cross_entropy(net(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


teacher = MLP([nn.Linear(dim, hidden), nn.Linear(hidden, hidden)], nn.Linear(hidden, classes))
teacher_opt = torch.optim.SGD(teacher.parameters(), lr=0.1, momentum=0.9)
for _ in range(args.teacher_steps):
    loss = train_step(teacher, teacher_opt)
print(f"teacher after {args.teacher_steps} steps: loss {loss:.4f}")

blocks = copy.copy(teacher.blocks)
student = MLP([*blocks, identity_layer(hidden)], copy.deepcopy(teacher.head))
x_check, _ = batch(16)
with torch.no_grad():
    gap = (student(x_check) - teacher(x_check)).abs().max().item()
print(f"student computes the teacher's function: max gap {gap:.2e}")
student_opt = torch.optim.SGD(student.parameters(), lr=0.05, momentum=0.9)

for step in range(args.steps):
    student_loss = train_step(student, student_opt)
    teacher_loss = train_step(teacher, teacher_opt)
    print(f"step {step} student {student_loss:.4f} teacher {teacher_loss:.4f}")

if args.out:
    torch.save({"teacher": teacher.state_dict(), "student": student.state_dict()}, args.out)
