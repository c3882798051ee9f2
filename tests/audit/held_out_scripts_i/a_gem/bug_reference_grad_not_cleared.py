"""Averaged gradient episodic memory at a tiny size, written after Chaudhry, Ranzato, Rohrbach and
Elhoseiny, "Efficient Lifelong Learning with A-GEM" (ICLR 2019, arXiv:1812.00420), section 4 and
equation 11, with facebookresearch/agem (https://github.com/facebookresearch/agem,
model/model.py: store_ref_grads computes the reference gradient on a batch drawn from the
episodic memory, the projection g - (g^T g_ref / g_ref^T g_ref) g_ref applied when g^T g_ref < 0)
and the PyTorch layout of aimagelab/mammoth (https://github.com/aimagelab/mammoth, models/agem.py
AGem.observe and project, models/gem.py store_grad and overwrite_grad: the current batch's
gradient is stored, the network's gradients are cleared with self.net.zero_grad(), the memory
batch's loss is backpropagated and its gradient stored as the reference, and the (projected)
current gradient is written back into .grad before the optimizer's step; AGem.end_task fills
the buffer). Two tasks in a class-incremental setting with one shared four-way head: the first
task (classes 0 and 1) is learnt with an empty memory, so observe is plain SGD; its end fills the
episodic memory with samples of the first task; the second task (classes 2 and 3) is learnt with
the A-GEM projection against a memory batch at every step. Gaussian clusters made in the script.
Injected bug: the network's gradients are not cleared between the current batch's
backward and the memory batch's (the net.zero_grad() of AGem.observe left out), so the memory
loss's backward adds to the current gradient still in .grad and the reference gradient is
g + g_ref: the test g^T (g + g_ref) < 0 and the projection read the wrong reference, and the
second task's steps no longer keep the memory loss from rising; second phase of a two-phase
script."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps-per-task", type=int, default=30)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--memory-size", type=int, default=40)
parser.add_argument("--memory-batch-size", type=int, default=20)
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

in_dim, hidden_dim, n_classes = 10, 32, 4
centres = 1.5 * torch.randn(n_classes, in_dim)
tasks = [(0, 1), (2, 3)]


def sample_task(classes, n):
    labels = torch.tensor(classes)[torch.randint(0, len(classes), (n,))]
    return centres[labels] + torch.randn(n, in_dim), labels


net = nn.Sequential(nn.Linear(in_dim, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, hidden_dim),
                    nn.ReLU(), nn.Linear(hidden_dim, n_classes))
optimizer = torch.optim.SGD(net.parameters(), lr=args.lr)
params = list(net.parameters())
memory_x = torch.empty(0, in_dim)
memory_y = torch.empty(0, dtype=torch.long)


def flat_grad():
    """store_grad: the parameters' .grad laid end to end in one new vector."""
    return torch.cat([p.grad.reshape(-1) for p in params])


def overwrite_grad(vector):
    offset = 0
    for p in params:
        p.grad.copy_(vector[offset:offset + p.numel()].view_as(p))
        offset += p.numel()


def project(grad, grad_ref):
    return grad - torch.dot(grad, grad_ref) / torch.dot(grad_ref, grad_ref) * grad_ref


def observe(x, y):
    optimizer.zero_grad()
    loss = F.cross_entropy(net(x), y)
    loss.backward()
    projected = False
    if len(memory_x) > 0:
        grad = flat_grad()
        idx = torch.randint(0, len(memory_x), (args.memory_batch_size,))
        mem_loss = F.cross_entropy(net(memory_x[idx]), memory_y[idx])
        mem_loss.backward()
        grad_ref = flat_grad()
        if torch.dot(grad, grad_ref).item() < 0:
            grad = project(grad, grad_ref)
            projected = True
        overwrite_grad(grad)
    optimizer.step()
    return loss.item(), projected


for task, classes in enumerate(tasks):
    n_projected = 0
    for step in range(args.steps_per_task):
        loss, projected = observe(*sample_task(classes, args.batch_size))
        n_projected += projected
        if step % 10 == 0:
            print(f"task {task} step {step} loss {loss:.4f}")
    # end_task: the episodic memory receives samples of the task just learnt
    new_x, new_y = sample_task(classes, args.memory_size)
    memory_x, memory_y = torch.cat([memory_x, new_x]), torch.cat([memory_y, new_y])
    with torch.no_grad():
        accuracy = [(net(x).argmax(1) == y).float().mean().item()
                    for x, y in (sample_task(c, 200) for c in tasks)]
    print(f"after task {task}: projected {n_projected} steps, accuracy per task {accuracy}")

if args.out:
    torch.save({k: v.detach().clone() for k, v in net.state_dict().items()}, args.out)
