"""Minimax entropy (MME) for semi-supervised domain adaptation on synthetic two-domain data,
written after Saito, Kim, Sclaroff, Darrell and Saenko, "Semi-supervised Domain Adaptation via
Minimax Entropy" (ICCV 2019, arXiv:1904.06487): a feature extractor G and a cosine-similarity
classifier F (the L2-normalised feature times the class weight vectors, divided by a temperature
T) are trained with cross-entropy on the labeled source and the few labeled target examples;
on the unlabeled target examples the classifier maximises the entropy of its predictions, which
moves the class weight vectors (the prototypes) towards the target features, while the
extractor minimises the same entropy, which clusters the target features around the
prototypes. The minimax is one backward pass through a gradient-reversal layer between G and
F, with the entropy term weighted by lambda. With the authors' code, VisionLearningGroup/SSDA_MME
(https://github.com/VisionLearningGroup/SSDA_MME, model/basenet.py: GradReverse passes x forward
and multiplies the gradient by -lambd backward, Predictor reverses, normalises and applies fc
without bias divided by temp; utils/loss.py adentropy: lamda * mean(sum p log p) of the softmax
of F1(feat, reverse=True, eta), that is -lambda * H; main.py train: SGD with nesterov momentum
0.9 and weight decay 5e-4 for G and F1, inv_lr_scheduler on every step, then per step
zero_grad_all(), cross-entropy on the concatenated source and labeled target batch, backward,
optimizer_g.step() and optimizer_f.step(), zero_grad_all(), G on the unlabeled target batch,
adentropy, backward, optimizer_f.step() and optimizer_g.step(), zero_grad_all()), whose steps
this script follows with lambda = 0.1 and T = 0.05 as there. The gradient-reversal layer is
written as a static autograd Function; G is a small MLP trained from scratch, so its learning
rate multiplier is 1 (the authors use 0.1 for a pretrained backbone).
Bug: GradReverse.backward drops the minus sign, so G maximises the entropy along with F1."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=150)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--T", type=float, default=0.05, help="temperature of the cosine classifier")
parser.add_argument("--lamda", type=float, default=0.1, help="weight of the entropy term")
parser.add_argument("--out", default=None, help="where to save the extractor and the classifier")
args = parser.parse_args()
torch.manual_seed(args.seed)
torch.set_num_threads(1)  # tiny models: extra threads only add overhead

# synthetic domains: class means in 16-D; the target domain is a rotated, shifted copy
num_class, dim, n_source, n_unl, n_per_class = 4, 16, 400, 400, 3
class_means = 2.0 * torch.randn(num_class, dim)
rotation = torch.linalg.qr(torch.eye(dim) + 0.6 * torch.randn(dim, dim))[0]
shift = 0.8 * torch.randn(dim)


def sample(n, target):
    labels = torch.arange(n) % num_class
    x = class_means[labels] + torch.randn(n, dim)
    if target:
        x = x @ rotation + shift
    return x, labels


x_source, y_source = sample(n_source, target=False)
x_target, y_target = sample(num_class * n_per_class, target=True)  # three labeled per class
x_unl, y_unl = sample(n_unl, target=True)  # labels used only to report accuracy


class GradReverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, lambd):
        ctx.lambd = lambd
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.lambd, None


def grad_reverse(x, lambd=1.0):
    return GradReverse.apply(x, lambd)


class Predictor(nn.Module):
    """Cosine-similarity classifier: normalised features, bias-free weights, temperature."""

    def __init__(self, num_class, inc, temp):
        super().__init__()
        self.fc = nn.Linear(inc, num_class, bias=False)
        self.temp = temp

    def forward(self, x, reverse=False, eta=1.0):
        if reverse:
            x = grad_reverse(x, eta)
        x = F.normalize(x)
        return self.fc(x) / self.temp


def adentropy(F1, feat, lamda, eta=1.0):
    """lamda * mean(sum p log p) = -lamda * H: F1 descends it (maximises H), G through the
    reversal ascends it (minimises H)."""
    prob = F.softmax(F1(feat, reverse=True, eta=eta), dim=1)
    return lamda * torch.mean(torch.sum(prob * torch.log(prob + 1e-5), 1))


G = nn.Sequential(nn.Linear(dim, 64), nn.ReLU(), nn.Linear(64, 32))
F1 = Predictor(num_class, 32, args.T)
optimizer_g = torch.optim.SGD(G.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4,
                              nesterov=True)
optimizer_f = torch.optim.SGD(F1.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4,
                              nesterov=True)


def zero_grad_all():
    optimizer_g.zero_grad()
    optimizer_f.zero_grad()


def inv_lr_scheduler(optimizer, step, gamma=1e-4, power=0.75):
    for param_group in optimizer.param_groups:
        param_group["lr"] = args.lr * (1 + gamma * step) ** (-power)


for step in range(args.steps):
    inv_lr_scheduler(optimizer_g, step)
    inv_lr_scheduler(optimizer_f, step)
    idx_s = torch.randint(0, n_source, (args.batch_size,))
    idx_u = torch.randint(0, n_unl, (args.batch_size,))

    # labeled source and target: cross-entropy trains G and F1
    zero_grad_all()
    data = torch.cat([x_source[idx_s], x_target])
    target = torch.cat([y_source[idx_s], y_target])
    loss = F.cross_entropy(F1(G(data)), target)
    loss.backward()
    optimizer_g.step()
    optimizer_f.step()
    zero_grad_all()

    # unlabeled target: F1 maximises the entropy, G minimises it through the reversal
    output = G(x_unl[idx_u])
    loss_t = adentropy(F1, output, args.lamda)
    loss_t.backward()
    optimizer_f.step()
    optimizer_g.step()
    zero_grad_all()
    if step % 50 == 0 or step == args.steps - 1:
        with torch.no_grad():
            acc = (F1(G(x_unl)).argmax(1) == y_unl).float().mean().item()
        print(f"step {step} loss {loss.item():.4f} entropy {-loss_t.item() / args.lamda:.4f} "
              f"unlabeled target accuracy {acc:.3f}")

if args.out:
    torch.save({"G": G.state_dict(), "F1": F1.state_dict()}, args.out)
