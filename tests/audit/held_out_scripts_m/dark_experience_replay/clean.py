"""Dark experience replay (DER++) at a tiny size, written after Buzzega, Boschini, Porrello,
Abati and Calderara, "Dark Experience for General Continual Learning: a Strong, Simple Baseline"
(NeurIPS 2020, arXiv:2004.07211), the DER++ objective: a reservoir buffer keeps past examples
with their labels and the logits the network gave them when they were seen, and each step adds to
the cross-entropy on the stream alpha * ||h(x') - z'||^2 on one buffer sample (x', z') and
beta * CE(h(x''), y'') on another (x'', y''), the stored logits z' being constants. With
aimagelab/mammoth (https://github.com/aimagelab/mammoth, models/derpp.py Derpp.observe:
opt.zero_grad(), the stream loss, two get_data calls on the buffer, each sample replayed through
self.net with its graph, alpha * F.mse_loss(buf_outputs, buf_logits) and
beta * self.loss(buf_outputs, buf_labels), each term backpropagated before opt.step() (the script
sums them into one backward), then buffer.add_data(examples=not_aug_inputs, labels=labels,
logits=outputs.data); utils/buffer.py Buffer with reservoir sampling and get_data applying the
transform). Two tasks of a class-incremental stream made in the script, two Gaussian classes
each, one head over all four classes and one SGD throughout; the buffer keeps the un-augmented
inputs and augments them when they are replayed. As published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps-per-task", type=int, default=20)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--minibatch-size", type=int, default=16)
parser.add_argument("--buffer-size", type=int, default=64)
parser.add_argument("--alpha", type=float, default=0.3)
parser.add_argument("--beta", type=float, default=0.5)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

in_dim, hidden_dim, n_tasks, classes_per_task = 10, 32, 2, 2
n_classes = n_tasks * classes_per_task
centres = 1.5 * torch.randn(n_classes, in_dim)


def task_batch(task, n):
    y = task * classes_per_task + torch.randint(0, classes_per_task, (n,))
    return centres[y] + torch.randn(n, in_dim), y


def augment(x):
    return x + 0.1 * torch.randn_like(x)


class ReservoirBuffer:
    def __init__(self, size):
        self.size, self.seen = size, 0
        self.examples = torch.zeros(size, in_dim)
        self.labels = torch.zeros(size, dtype=torch.long)
        self.logits = torch.zeros(size, n_classes)

    def __len__(self):
        return min(self.seen, self.size)

    def add_data(self, examples, labels, logits):
        for i in range(len(examples)):
            slot = self.seen if self.seen < self.size else int(torch.randint(0, self.seen + 1, ()))
            self.seen += 1
            if slot < self.size:
                self.examples[slot] = examples[i]
                self.labels[slot] = labels[i]
                self.logits[slot] = logits[i]

    def get_data(self, n):
        choice = torch.randperm(len(self))[:n]
        return augment(self.examples[choice]), self.labels[choice], self.logits[choice]


net = nn.Sequential(nn.Linear(in_dim, hidden_dim), nn.ReLU(),
                    nn.Linear(hidden_dim, hidden_dim), nn.ReLU(),
                    nn.Linear(hidden_dim, n_classes))
optimizer = torch.optim.SGD(net.parameters(), lr=args.lr)
buffer = ReservoirBuffer(args.buffer_size)

for task in range(n_tasks):  # the stream: task 0's classes, then task 1's
    for step in range(args.steps_per_task):
        not_aug_inputs, labels = task_batch(task, args.batch_size)
        optimizer.zero_grad()
        outputs = net(augment(not_aug_inputs))
        loss = F.cross_entropy(outputs, labels)
        if len(buffer) > 0:
            buf_inputs, _, buf_logits = buffer.get_data(args.minibatch_size)
            buf_outputs = net(buf_inputs)
            loss = loss + args.alpha * F.mse_loss(buf_outputs, buf_logits)
            buf_inputs, buf_labels, _ = buffer.get_data(args.minibatch_size)
            buf_outputs = net(buf_inputs)
            loss = loss + args.beta * F.cross_entropy(buf_outputs, buf_labels)
        loss.backward()
        optimizer.step()
        buffer.add_data(not_aug_inputs, labels, outputs.detach())
    print(f"task {task} done, loss {loss.item():.4f}")

with torch.no_grad():
    for task in range(n_tasks):
        x, y = task_batch(task, 200)
        print(f"accuracy on task {task}: {(net(x).argmax(1) == y).float().mean().item():.3f}")

if args.out:
    torch.save({**{f"net.{k}": v for k, v in net.state_dict().items()},
                "buffer.logits": buffer.logits.clone()}, args.out)
