"""Progressive Neural Networks, transfer from one task to a second through lateral connections
from a frozen first column, on two tiny synthetic classification tasks, written after Rusu,
Rabinowitz, Desjardins, Soyer, Kirkpatrick, Kavukcuoglu, Pascanu and Hadsell, "Progressive Neural
Networks" (arXiv:1606.04671, 2016): column 1 is trained on task 1 and then frozen; for task 2 a
new column is added whose layer i receives its own layer i - 1 and, through a lateral adapter,
the hidden layer i - 1 of column 1, h2_i = relu(W_i h2_{i-1} + U_i relu(V_i (alpha_i *
h1_{i-1}))) (the paper's non-linear adapter: a learnt scalar alpha, a projection V and the lateral
weights U), and only column 2 and its adapters are trained on task 2, so task 1 cannot be
forgotten. With two public implementations: TomVeniat/ProgressiveNeuralNetworks.pytorch
(https://github.com/TomVeniat/ProgressiveNeuralNetworks.pytorch,
src/model/ProgressiveNeuralNetworks.py PNN.freeze_columns sets requires_grad = False on every
existing column before PNN.new_task adds the next one of PNNLinearBlock layers, each holding the
lateral Linear layers u of the previous columns, and PNN.forward feeds every column's layer outputs
to the next layer of the later columns; main.py main calls freeze_columns() and new_task(), builds
the optimizer over model.parameters(t), the new column's parameters with its laterals, and runs
zero_grad(), backward() and step() per batch) and ContinualAI/avalanche (avalanche/models/pnn.py:
MLPAdapter with alphas, V and U, as Eq. 2 of the paper; PNNColumn.forward adds the adapter output
to the column's own layer; PNNLayer._add_column freezes the old parameters with requires_grad =
False before appending the new column). Here the adapters of column 2 are kept in their own
ModuleList, column 1 is frozen with requires_grad_(False) and run with the graph on (its outputs
carry no graph back to its frozen weights), and the phase-2 optimizer takes the parameters that
require grad of the whole progressive network. The data: Gaussian inputs labelled by two related
random rules, task 2 a perturbed copy of task 1's rule, so that column 1's features help.
As published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--task1-steps", type=int, default=150)
parser.add_argument("--task2-steps", type=int, default=150)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--out", default=None, help="where to save both columns and the adapters")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, hidden, n_classes, n_data = 8, 24, 3, 512


class Column(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(dim, hidden), nn.Linear(hidden, hidden),
                                     nn.Linear(hidden, n_classes)])

    def forward(self, x, laterals=None):
        """Logits and the hidden activations; laterals[i] is added to layer i + 1's input."""
        hiddens = []
        h = x
        for i, layer in enumerate(self.layers):
            z = layer(h)
            if laterals is not None and i > 0:
                z = z + laterals[i - 1]
            if i < len(self.layers) - 1:
                h = F.relu(z)
                hiddens.append(h)
        return z, hiddens


class Adapter(nn.Module):
    """U relu(V (alpha * h)), the non-linear lateral connection of the paper."""

    def __init__(self, n_out):
        super().__init__()
        self.alpha = nn.Parameter(torch.full((1,), 0.1))
        self.V = nn.Linear(hidden, hidden // 2)
        self.U = nn.Linear(hidden // 2, n_out)

    def forward(self, h):
        return self.U(F.relu(self.V(self.alpha * h)))


rule1 = torch.randn(dim, n_classes)
rule2 = rule1 + 0.5 * torch.randn(dim, n_classes)
x_data = torch.randn(n_data, dim)
y_task1 = (x_data @ rule1).argmax(1)
y_task2 = (x_data @ rule2).argmax(1)

# phase 1: column 1 on task 1
column1 = Column()
optimizer1 = torch.optim.Adam(column1.parameters(), lr=args.lr)
for step in range(args.task1_steps):
    idx = torch.randint(0, n_data, (args.batch_size,))
    logits, _ = column1(x_data[idx])
    loss = F.cross_entropy(logits, y_task1[idx])
    optimizer1.zero_grad()
    loss.backward()
    optimizer1.step()
    if step % 50 == 0:
        print(f"task 1 step {step} loss {loss.item():.4f}")

# phase 2: a new column with lateral adapters from the frozen column 1
column2 = Column()
adapters = nn.ModuleList([Adapter(hidden), Adapter(n_classes)])
column1.requires_grad_(False)
pnn = nn.ModuleDict({"column1": column1, "column2": column2, "adapters": adapters})
optimizer2 = torch.optim.Adam([p for p in pnn.parameters() if p.requires_grad], lr=args.lr)
for step in range(args.task2_steps):
    idx = torch.randint(0, n_data, (args.batch_size,))
    _, column1_hiddens = column1(x_data[idx])
    laterals = [adapter(h) for adapter, h in zip(adapters, column1_hiddens)]
    logits, _ = column2(x_data[idx], laterals)
    loss = F.cross_entropy(logits, y_task2[idx])
    optimizer2.zero_grad()
    loss.backward()
    optimizer2.step()
    if step % 50 == 0:
        print(f"task 2 step {step} loss {loss.item():.4f}")

with torch.no_grad():
    task1_acc = (column1(x_data)[0].argmax(1) == y_task1).float().mean().item()
    hiddens = column1(x_data)[1]
    logits = column2(x_data, [adapter(h) for adapter, h in zip(adapters, hiddens)])[0]
    task2_acc = (logits.argmax(1) == y_task2).float().mean().item()
print(f"task 1 accuracy {task1_acc:.3f} task 2 accuracy {task2_acc:.3f}")

if args.out:
    torch.save({"column1": column1.state_dict(), "column2": column2.state_dict(),
                "adapters": adapters.state_dict()}, args.out)
