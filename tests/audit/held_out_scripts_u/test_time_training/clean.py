"""Test-time training (TTT) with rotation prediction, of a small MLP classifier of synthetic 8 x 8
images that meets a distribution shift at test time, written after Sun, Wang, Liu, Miller, Efros
and Hardt, "Test-Time Training with Self-Supervision for Generalization under Distribution
Shifts" (ICML 2020, arXiv:1909.13231): a shared feature extractor theta_e carries two heads,
the main classifier theta_m and a self-supervised head theta_s that predicts by how many
quarter turns (0, 90, 180 or 270 degrees) an input was rotated; training minimises the sum of
the main loss and the rotation loss over all three, and at test time, before predicting a test
batch, the shared extractor alone is fine-tuned on that unlabelled batch by the rotation loss,
then the main head predicts from the adapted features. Two phases: joint training on the
training distribution, then test-time training on a stream of shifted test batches; in the
online version (TTT-Online) the adapted extractor carries over from batch to batch. With the
authors' code, yueatsprograms/ttt_cifar_release
(https://github.com/yueatsprograms/ttt_cifar_release, main.py: one SGD optimizer over
list(net.parameters()) + list(head.parameters()), the classifier and the rotation head, and
per batch optimizer.zero_grad(), loss = criterion(net(inputs), labels), inputs_ssh, labels_ssh =
rotate_batch(inputs, 'rand'), loss += criterion(ssh(inputs_ssh), labels_ssh), loss.backward(),
optimizer.step(), ssh = ExtractorHead(ext, head) sharing ext with net (utils/test_helpers.py
build_model, models/SSHead.py); test_calls/test_adapt.py with --fix_ssh and --online:
optimizer_ssh = optim.SGD(ext.parameters(), lr), and adapt_single rotates the test input at
random, then optimizer_ssh.zero_grad(), loss_ssh.backward(), optimizer_ssh.step() niter
times before test_single predicts with net under torch.no_grad()), whose steps this script
follows. Here the adapted extractor is a copy of the jointly trained one, as test_adapt.py
works on a model loaded from the joint checkpoint, the rotation head is held fixed during
adaptation, a whole test batch is adapted on at once, and the shift adds a constant offset
(a change of brightness) to every pixel of the noisy class patterns.
As published: clean."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--joint-steps", type=int, default=200)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--test-batches", type=int, default=20)
parser.add_argument("--test-batch-size", type=int, default=32)
parser.add_argument("--tt-lr", type=float, default=0.05)
parser.add_argument("--niter", type=int, default=1)
parser.add_argument("--out", default=None, help="where to save the jointly trained and adapted nets")
args = parser.parse_args()
torch.manual_seed(args.seed)
torch.set_num_threads(1)

n_classes, side = 4, 8
templates = torch.randn(n_classes, side, side)


def sample_train(n):
    labels = torch.randint(0, n_classes, (n,))
    return 0.4 * templates[labels] + torch.randn(n, side, side), labels


def sample_shifted(n):
    labels = torch.randint(0, n_classes, (n,))
    return 0.4 * templates[labels] + torch.randn(n, side, side) + 1.5, labels


def rotate_batch(inputs):
    """Rotates every input by a random number of quarter turns; the number is the label."""
    labels = torch.randint(0, 4, (len(inputs),))
    rotated = inputs.clone()
    for k in range(1, 4):
        rotated[labels == k] = torch.rot90(inputs[labels == k], k, dims=(1, 2))
    return rotated, labels


ext = nn.Sequential(nn.Flatten(), nn.Linear(side * side, 64), nn.ReLU(), nn.Linear(64, 32),
                    nn.ReLU())
main_head = nn.Linear(32, n_classes)
ssh_head = nn.Linear(32, 4)

# phase 1: joint training of the extractor, the main head and the rotation head
parameters = list(ext.parameters()) + list(main_head.parameters()) + list(ssh_head.parameters())
optimizer = torch.optim.SGD(parameters, lr=args.lr, momentum=0.9, weight_decay=5e-4)
for step in range(args.joint_steps):
    inputs, labels = sample_train(args.batch_size)
    optimizer.zero_grad()
    loss = F.cross_entropy(main_head(ext(inputs)), labels)
    inputs_ssh, labels_ssh = rotate_batch(inputs)
    loss_ssh = F.cross_entropy(ssh_head(ext(inputs_ssh)), labels_ssh)
    loss = loss + loss_ssh
    loss.backward()
    optimizer.step()
    if step % 50 == 0:
        print(f"joint {step} loss {loss.item():.4f} rotation {loss_ssh.item():.4f}")

# phase 2: online test-time training of a copy of the extractor on the shifted test stream
tt_ext = copy.deepcopy(ext)
ssh_head.requires_grad_(False)
tt_optimizer = torch.optim.SGD(tt_ext.parameters(), lr=args.tt_lr)
correct, correct_before = 0, 0
for batch in range(args.test_batches):
    inputs, labels = sample_shifted(args.test_batch_size)
    with torch.no_grad():
        correct_before += (main_head(ext(inputs)).argmax(1) == labels).sum().item()
    for _ in range(args.niter):
        inputs_ssh, labels_ssh = rotate_batch(inputs)
        tt_optimizer.zero_grad()
        loss_ssh = F.cross_entropy(ssh_head(tt_ext(inputs_ssh)), labels_ssh)
        loss_ssh.backward()
        tt_optimizer.step()
    with torch.no_grad():
        correct += (main_head(tt_ext(inputs)).argmax(1) == labels).sum().item()
n_test = args.test_batches * args.test_batch_size
print(f"shifted test accuracy: joint {correct_before / n_test:.3f}, after TTT {correct / n_test:.3f}")

if args.out:
    torch.save({"ext": ext.state_dict(), "main_head": main_head.state_dict(),
                "ssh_head": ssh_head.state_dict(), "tt_ext": tt_ext.state_dict()}, args.out)
