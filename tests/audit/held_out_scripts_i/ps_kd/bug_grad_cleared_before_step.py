"""Progressive self-knowledge distillation at a tiny size, written after Kim, Ji, Yoon and Hwang,
"Self-Knowledge Distillation with Progressive Refinement of Targets" (ICCV 2021,
arXiv:2006.12000), section 3 and algorithm 1, with lgcnsai/PS-KD-Pytorch
(https://github.com/lgcnsai/PS-KD-Pytorch, main.py: main_worker, which allocates the
all_predictions matrix and sets alpha_t = alpha_T * (epoch + 1) / end_epoch each epoch, with
adjust_learning_rate's cosine schedule; train, which fills all_predictions with the one-hot
labels at epoch 0, builds soft_targets = (1 - alpha_t) * targets_one_hot + alpha_t *
all_predictions[input_indices], clears, backpropagates and steps SGD, then stores
softmax_output.cpu().detach() for the next epoch; loss/pskd_loss.py Custom_CrossEntropy_PSKD).
The model is its own teacher: the targets of epoch t mix the labels with the model's predictions
of the same samples at epoch t - 1, kept as numbers, so the loss differentiates the current
predictions alone, with an alpha that grows over training. A small multilayer perceptron on a
Gaussian mixture with some flipped labels, made in the script, each sample with its index, SGD
with Nesterov momentum and weight decay. Injected bug: the gradients are cleared between the
backward and the step (loss.backward(); optimizer.zero_grad(); optimizer.step() for the reference's
zero_grad, backward, step), so every step finds the gradients the backward just wrote set to
None and skips every parameter: the network never trains (not even its weight decay), and
all_predictions stores the untrained network's predictions as the next epoch's targets."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--epochs", type=int, default=6)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--lr", type=float, default=0.1)
parser.add_argument("--weight-decay", type=float, default=5e-4)
parser.add_argument("--alpha-T", type=float, default=0.8, dest="alpha_T")
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_classes, in_dim, hidden_dim, n_train = 5, 10, 64, 256
centres = 1.2 * torch.randn(n_classes, in_dim)
clean_labels = torch.randint(0, n_classes, (n_train,))
inputs = centres[clean_labels] + torch.randn(n_train, in_dim)
flipped = torch.rand(n_train) < 0.2
labels = torch.where(flipped, torch.randint(0, n_classes, (n_train,)), clean_labels)
test_labels = torch.randint(0, n_classes, (256,))
test_inputs = centres[test_labels] + torch.randn(256, in_dim)

net = nn.Sequential(nn.Linear(in_dim, hidden_dim), nn.ReLU(),
                    nn.Linear(hidden_dim, hidden_dim), nn.ReLU(),
                    nn.Linear(hidden_dim, n_classes))
optimizer = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9,
                            weight_decay=args.weight_decay, nesterov=True)


def adjust_learning_rate(epoch):
    lr = 0.5 * args.lr * (1.0 + math.cos(math.pi * epoch / args.epochs))
    for group in optimizer.param_groups:
        group["lr"] = lr


def pskd_loss(outputs, targets):
    """Cross-entropy against soft targets: (-targets * log_softmax).mean(0).sum()."""
    return (-targets * F.log_softmax(outputs, dim=1)).mean(0).sum()


all_predictions = torch.zeros(n_train, n_classes)
identity_matrix = torch.eye(n_classes)
for epoch in range(args.epochs):
    adjust_learning_rate(epoch)
    alpha_t = max(0.0, args.alpha_T * (epoch + 1) / args.epochs)
    net.train()
    order = torch.randperm(n_train)
    total_loss, correct = 0.0, 0
    for start in range(0, n_train, args.batch_size):
        input_indices = order[start:start + args.batch_size]
        targets = labels[input_indices]
        targets_one_hot = identity_matrix[targets]
        if epoch == 0:
            all_predictions[input_indices] = targets_one_hot
        # the targets of this epoch: the labels mixed with the predictions of the last one
        soft_targets = (1 - alpha_t) * targets_one_hot + alpha_t * all_predictions[input_indices]
        outputs = net(inputs[input_indices])
        softmax_output = F.softmax(outputs, dim=1)
        loss = pskd_loss(outputs, soft_targets)
        loss.backward()
        optimizer.zero_grad()
        optimizer.step()
        total_loss += loss.item() * len(input_indices)
        correct += (outputs.argmax(1) == targets).sum().item()
        all_predictions[input_indices] = softmax_output.detach()
    net.eval()
    with torch.no_grad():
        test_acc = (net(test_inputs).argmax(1) == test_labels).float().mean().item()
    print(f"epoch {epoch} alpha_t {alpha_t:.3f} loss {total_loss / n_train:.4f} "
          f"train accuracy {correct / n_train:.3f} test accuracy {test_acc:.3f}")

if args.out:
    torch.save({"net": net.state_dict(), "all_predictions": all_predictions}, args.out)
