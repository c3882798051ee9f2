"""ReSSL, relational self-supervised learning with weak augmentation, of a small MLP encoder on
synthetic vectors, written after Zheng, You, Wang, Qian, Zhang, Wang and Xu, "ReSSL: Relational
Self-Supervised Learning with Weak Augmentation" (NeurIPS 2021, arXiv:2107.09282): a student
encoder sees a strongly augmented view and a momentum (EMA) teacher a weakly augmented view of
each sample; both L2-normalised embeddings are compared with a memory queue of past teacher
embeddings, and the teacher's relation, the softmax of its similarities to the queue at a low
temperature (0.04), sharpened, is the target of a cross-entropy against the student's relation
(softmax at temperature 0.1); the teacher is an exponential moving average of the student and
the queue is filled with the teacher's embeddings. With the authors' code, mingkai-zheng/ReSSL
(https://github.com/mingkai-zheng/ReSSL, network/ressl.py ReSSL: encoder_q and encoder_k built
alike and the key encoder initialised from the query encoder; forward computes q =
encoder_q(im_q) with gradient, then under torch.no_grad() the _momentum_update_key_encoder
(param_k = m * param_k + (1 - m) * param_q) and k = encoder_k(im_k), logitsq and logitsk
against self.queue.clone().detach(), and _dequeue_and_enqueue(k) under torch.no_grad();
network/backbone.py BackBone: a projection head and F.normalize; ressl.py train: loss =
-sum(softmax(logitsk.detach() / t) * log_softmax(logitsq / 0.1)).mean() with t = 0.04,
optimizer.zero_grad(), loss.backward(), optimizer.step(), SGD with momentum 0.9 and weight
decay 1e-4), whose steps this script follows. Here the teacher is kept out of the optimizer
and only run under torch.no_grad() instead of having its parameters marked
requires_grad = False, the learning rate is constant (no warm-up and cosine schedule), the
data are points of eight Gaussian clusters in 24 dimensions, the weak view adds a little
noise and the strong view rescales the features, masks a fifth of them and adds more noise,
and there is no batch shuffling (no BatchNorm).
As published: clean."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=80)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--queue-size", type=int, default=256)
parser.add_argument("--momentum", type=float, default=0.99, help="m of the EMA teacher")
parser.add_argument("--t-teacher", type=float, default=0.04)
parser.add_argument("--t-student", type=float, default=0.1)
parser.add_argument("--out", default=None, help="where to save student, teacher and queue")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_clusters, in_dim, dim, n_points = 8, 24, 16, 1024
centres = 1.5 * torch.randn(n_clusters, in_dim)
data = centres[torch.randint(0, n_clusters, (n_points,))] + 0.5 * torch.randn(n_points, in_dim)


def weak_view(x):
    return x + 0.05 * torch.randn_like(x)


def strong_view(x):
    scale = 1 + 0.3 * torch.randn(len(x), 1)
    keep = (torch.rand_like(x) > 0.2).float()
    return scale * x * keep + 0.3 * torch.randn_like(x)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_dim, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
        self.head = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, dim))

    def forward(self, x):
        return F.normalize(self.head(self.net(x)), dim=1)


@torch.no_grad()
def momentum_update(student, teacher, m):
    for param_q, param_k in zip(student.parameters(), teacher.parameters()):
        param_k.data = param_k.data * m + param_q.data * (1 - m)


@torch.no_grad()
def dequeue_and_enqueue(queue, keys, ptr):
    queue[:, ptr:ptr + len(keys)] = keys.t()
    return (ptr + len(keys)) % queue.shape[1]


student = Encoder()
teacher = copy.deepcopy(student)
queue = F.normalize(torch.randn(dim, args.queue_size), dim=0)
queue_ptr = 0
optimizer = torch.optim.SGD(student.parameters(), lr=0.02, momentum=0.9, weight_decay=1e-4)

for step in range(args.steps):
    x = data[torch.randint(0, n_points, (args.batch_size,))]
    im_q, im_k = strong_view(x), weak_view(x)
    q = student(im_q)
    with torch.no_grad():
        momentum_update(student, teacher, args.momentum)
        k = teacher(im_k)
    logits_q = q @ queue.clone().detach()
    logits_k = k @ queue.clone().detach()
    queue_ptr = dequeue_and_enqueue(queue, k, queue_ptr)
    target = F.softmax(logits_k.detach() / args.t_teacher, dim=1)
    loss = -torch.sum(target * F.log_softmax(logits_q / args.t_student, dim=1), dim=1).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 20 == 0:
        print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({"student": student.state_dict(), "teacher": teacher.state_dict(),
                "queue": queue}, args.out)
