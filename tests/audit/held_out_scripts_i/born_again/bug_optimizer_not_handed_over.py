"""Born-again networks at a tiny size, written after Furlanello, Lipton, Tschannen, Itti and
Anandkumar, "Born-Again Neural Networks" (ICML 2018, arXiv:1805.04770), section 3 (the sequence of
teaching selves and its ensembles), with the PyTorch implementation
nocotan/born_again_neuralnet (https://github.com/nocotan/born_again_neuralnet, ban/updater.py
BANUpdater.update, kd_loss and register_last_model; train.py main, its "Born Again..." block) as
its fork AnTuo1998/born_again_neuralnet (https://github.com/AnTuo1998/born_again_neuralnet,
train.py main) runs it: at the end of each generation the trained weights are loaded into a new
network, the last model, which teaches the next generation; then a fresh network of the same
architecture and a fresh Adam over its parameters are handed to the updater (updater.optimizer =
optimizer; updater.model = model). Generation 0 is trained on the labels alone; generation
k + 1 on (1 - alpha) * cross-entropy + alpha * T^2 * KL(teacher_T || student_T), the teacher being
the frozen generation k (eval(), requires_grad_(False), read under torch.no_grad() as the
reference's .detach() does). At the end the generations' averaged predictions (the BAN ensemble)
are scored. A Gaussian mixture with some flipped labels, made in the script. Injected bug: the
new generation's Adam is built but never handed to the updater (updater.optimizer = optimizer
left out, as nocotan's train.py leaves it out and AnTuo1998's fork puts it back), so from
generation 1 the updater clears and steps the first generation's optimizer, whose parameters
(generation 0's network, already copied into the teacher) get no gradient, while the backward
writes the new student's gradients, which no optimizer holds: generations 1 and 2 never train,
and generation 1 teaches generation 2 with its initial weights.
"""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--generations", type=int, default=3)
parser.add_argument("--steps", type=int, default=25)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--alpha", type=float, default=0.5)
parser.add_argument("--temperature", type=float, default=4.0)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_classes, in_dim, hidden_dim, n_train = 4, 8, 32, 512
centres = 1.5 * torch.randn(n_classes, in_dim)
labels = torch.randint(0, n_classes, (n_train,))
inputs = centres[labels] + torch.randn(n_train, in_dim)
flipped = torch.rand(n_train) < 0.15
labels = torch.where(flipped, torch.randint(0, n_classes, (n_train,)), labels)
test_labels = torch.randint(0, n_classes, (256,))
test_inputs = centres[test_labels] + torch.randn(256, in_dim)


def make_network():
    return nn.Sequential(nn.Linear(in_dim, hidden_dim), nn.ReLU(),
                         nn.Linear(hidden_dim, hidden_dim), nn.ReLU(),
                         nn.Linear(hidden_dim, n_classes))


def kd_loss(outputs, labels, teacher_outputs, alpha, temperature):
    soft = F.kl_div(F.log_softmax(outputs / temperature, dim=1),
                    F.softmax(teacher_outputs / temperature, dim=1), reduction="batchmean")
    return alpha * temperature ** 2 * soft + (1.0 - alpha) * F.cross_entropy(outputs, labels)


class BANUpdater:
    """Trains the current generation; from generation 1 its loss reads the last model."""

    def __init__(self, model, optimizer):
        self.model = model
        self.optimizer = optimizer
        self.last_model = None
        self.gen = 0

    def update(self, x, y):
        self.optimizer.zero_grad()
        outputs = self.model(x)
        if self.gen > 0:
            with torch.no_grad():
                teacher_outputs = self.last_model(x)
            loss = kd_loss(outputs, y, teacher_outputs, args.alpha, args.temperature)
        else:
            loss = F.cross_entropy(outputs, y)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def register_last_model(self, weights):
        self.last_model = make_network()
        self.last_model.load_state_dict(weights)
        self.last_model.requires_grad_(False)
        self.last_model.eval()


def accuracy(logits, targets):
    return (logits.argmax(1) == targets).float().mean().item()


model = make_network()
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
updater = BANUpdater(model, optimizer)
generations = []
for gen in range(args.generations):
    for step in range(args.steps):
        idx = torch.randint(0, n_train, (args.batch_size,))
        loss = updater.update(inputs[idx], labels[idx])
    with torch.no_grad():
        test_acc = accuracy(updater.model(test_inputs), test_labels)
    print(f"generation {gen} loss {loss:.4f} test accuracy {test_acc:.3f}")
    generations.append(updater.model)
    if gen + 1 < args.generations:
        # born again: the trained network teaches a fresh one of the same architecture
        updater.register_last_model(updater.model.state_dict())
        updater.gen += 1
        model = make_network()
        optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
        updater.model = model

with torch.no_grad():
    ensemble = torch.stack([F.softmax(net(test_inputs), dim=1) for net in generations]).mean(0)
print(f"BAN ensemble test accuracy {accuracy(ensemble, test_labels):.3f}")

if args.out:
    torch.save({f"generation_{k}": net.state_dict() for k, net in enumerate(generations)},
               args.out)
