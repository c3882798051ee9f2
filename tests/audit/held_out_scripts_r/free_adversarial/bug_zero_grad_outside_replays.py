"""Free adversarial training of a tiny classifier, written after Shafahi, Najibi, Ghiasi, Xu,
Dickerson, Studer, Davis, Taylor and Goldstein, "Adversarial Training for Free!" (NeurIPS 2019,
arXiv:1904.12843): each minibatch is replayed m times in a row, and a single backward pass of the
cross-entropy at the perturbed input x + delta gives at once the model's gradient, used for an SGD
step, and the gradient with respect to the perturbation, used for an FGSM ascent step
delta <- clip(delta + eps * sign(grad_delta), -eps, eps); the perturbation is never reset, it is
carried from replay to replay and from minibatch to minibatch, and the number of epochs is divided
by m so that the total number of updates stays that of natural training. With the authors' code,
mahyarnajibi/FreeAdversarialTraining (https://github.com/mahyarnajibi/FreeAdversarialTraining,
main_free.py: main divides configs.TRAIN.epochs by configs.ADV.n_repeats; train keeps a module-level
global_noise_data, and for each of the n_repeats replays makes noise_batch from it as a fresh leaf
with requires_grad=True, clamps input + noise_batch to [0, 1], calls optimizer.zero_grad() and
loss.backward(), adds fgsm(noise_batch.grad, fgsm_step) to global_noise_data, clamps it to
[-clip_eps, clip_eps] and calls optimizer.step()), and with the re-implementation in
locuslab/fast_adversarial (https://github.com/locuslab/fast_adversarial, CIFAR10/train_free.py:
main keeps one persistent delta with requires_grad = True for the whole run and, per replay, calls
opt.zero_grad(), backward, writes clamp(delta + epsilon * sign(delta.grad)) into delta.data, calls
opt.step() and then delta.grad.zero_(), since the optimizer does not clear the perturbation's
gradient). This script follows the second form: a persistent leaf delta sized for a full batch,
updated in place under torch.no_grad(), its gradient cleared by hand after each replay; the input
x + delta is clamped to [0, 1] as in main_free.py. The data: points of the unit cube around four
class centres, made in the script; the model is a small MLP trained by SGD with momentum.
Bug: the model's gradients are cleared once per minibatch, before the replay loop, instead of in
each replay right before its backward (main_free.py and train_free.py call zero_grad() in every
replay), so the gradients of the m replays of a minibatch pile up in the model's .grad and replay j
steps along the sum of the gradients of replays 0..j, taken at earlier weights and earlier
perturbations: the effective step grows with j and stale gradients are applied again."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--epochs", type=int, default=12, help="natural-training epochs, divided by m")
parser.add_argument("--replays", type=int, default=4, help="m, replays of each minibatch")
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--eps", type=float, default=0.08, help="clip of the perturbation (l_inf)")
parser.add_argument("--fgsm-step", type=float, default=0.08, help="ascent step on delta")
parser.add_argument("--out", default=None, help="where to save the model and the perturbation")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_train, dim, n_classes = 256, 12, 4
centres = torch.rand(n_classes, dim)
labels = torch.randint(0, n_classes, (n_train,))
data = (centres[labels] + 0.35 * torch.randn(n_train, dim)).clamp(0, 1)

model = nn.Sequential(nn.Linear(dim, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                      nn.Linear(64, n_classes))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)

# the perturbation, one row per example of a full batch, carried over the whole run
delta = torch.zeros(args.batch_size, dim, requires_grad=True)

epochs = math.ceil(args.epochs / args.replays)
step = 0
for epoch in range(epochs):
    perm = torch.randperm(n_train)
    for start in range(0, n_train, args.batch_size):
        idx = perm[start:start + args.batch_size]
        x, y = data[idx], labels[idx]
        n = x.size(0)
        optimizer.zero_grad()
        for _ in range(args.replays):
            logits = model((x + delta[:n]).clamp(0, 1))
            loss = F.cross_entropy(logits, y)
            loss.backward()
            # ascend on the perturbation with the gradient the same backward gave
            with torch.no_grad():
                delta[:n] += args.fgsm_step * delta.grad[:n].sign()
                delta.clamp_(-args.eps, args.eps)
            delta.grad.zero_()
            optimizer.step()
            if step % 20 == 0:
                acc = (logits.argmax(1) == y).float().mean().item()
                print(f"step {step} loss {loss.item():.3f} adv acc {acc:.2f}")
            step += 1

if args.out:
    torch.save({"model": model.state_dict(), "delta": delta.detach().clone()}, args.out)
