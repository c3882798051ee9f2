"""L2-SP fine-tuning of a small pre-trained MLP on a small target task, written after Li,
Grandvalet and Davoine, "Explicit Inductive Bias for Transfer Learning with Convolutional
Networks" (ICML 2018, arXiv:1802.01483): when a network pre-trained on a source problem is
fine-tuned on a target problem, the weights it shares with the source network are not decayed
towards zero but towards their starting point, the pre-trained weights w0, with the penalty
Omega(w) = alpha / 2 * ||w_S - w0_S||^2 + beta / 2 * ||w_new||^2, where w_S are the
pre-trained (backbone) weights being fine-tuned and w_new the new target-specific layer that has
no starting point and gets the usual L2 decay. Two phases: pre-training of a backbone and a
source head on a large source task, then L2-SP fine-tuning of a copy of the backbone with a new
head on a small target task. With the implementation of thuml/Transfer-Learning-Library
(https://github.com/thuml/Transfer-Learning-Library, tllib/regularization/delta.py:
SPRegularization stores the source model's parameters, detached, as the starting point at
construction and returns the sum over the target backbone's named parameters of
0.5 * ||param - source_weight[name]||^2; L2Regularization returns 0.5 * ||param||^2 summed over
the new head; examples/task_adaptation/image_classification/delta.py main builds the source
classifier from the same pre-trained weights, sets requires_grad = False on all its parameters
and puts it in eval mode, builds the target classifier whose backbone starts from those weights
and a new head, and an SGD optimizer (momentum, Nesterov) over the target classifier, with a
10x smaller backbone learning rate under --finetune; train, with --regularization-type l2_sp, adds
trade_off_backbone * SP term + trade_off_head * head term to the cross-entropy and calls
optimizer.zero_grad(), loss.backward(), optimizer.step()), whose steps this script follows,
with alpha = 0.1 and beta = 0.01 and the 10x smaller backbone rate. Here the starting point is a
detached clone of the fine-tuned backbone's parameters taken right after it is copied from the
pre-trained one; both tasks are labelled through the same latent features of the inputs, and the
networks are small MLPs.
Bug: the pre-trained backbone is frozen before it is deep-copied, so the copy that is fine-tuned
inherits requires_grad=False: the backbone never moves and only the new head is trained."""

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--pretrain-steps", type=int, default=100)
parser.add_argument("--finetune-steps", type=int, default=80)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--pretrain-lr", type=float, default=0.05)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--alpha", type=float, default=0.1, help="weight of the SP penalty")
parser.add_argument("--beta", type=float, default=0.01, help="weight of the L2 on the new head")
parser.add_argument("--out", default=None, help="where to save the pre-trained and fine-tuned nets")
args = parser.parse_args()
torch.manual_seed(args.seed)
torch.set_num_threads(1)  # tiny networks: intra-op threads only add overhead

in_dim, n_latent, hidden, feat_dim, n_source, n_target = 16, 8, 64, 32, 10, 4

# both tasks label the inputs through the same latent features tanh(x P); the source task has
# many examples and ten classes, the target task few examples and four other classes
projection = torch.randn(in_dim, n_latent) / 2
source_readout = torch.randn(n_latent, n_source)
target_readout = torch.randn(n_latent, n_target)


def make_task(n, readout):
    x = torch.randn(n, in_dim)
    scores = torch.tanh(x @ projection) @ readout
    return x, (scores + 0.2 * torch.randn_like(scores)).argmax(1)


x_source, y_source = make_task(2000, source_readout)
x_target, y_target = make_task(80, target_readout)


def make_backbone():
    return nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, feat_dim),
                         nn.ReLU())


# phase 1: pre-training of the backbone and the source head on the source task
pre_backbone = make_backbone()
source_head = nn.Linear(feat_dim, n_source)
pre_optimizer = torch.optim.SGD(list(pre_backbone.parameters()) + list(source_head.parameters()),
                                lr=args.pretrain_lr, momentum=0.9)
for step in range(args.pretrain_steps):
    idx = torch.randint(0, len(x_source), (args.batch_size,))
    source_loss = F.cross_entropy(source_head(pre_backbone(x_source[idx])), y_source[idx])
    pre_optimizer.zero_grad()
    source_loss.backward()
    pre_optimizer.step()
    if step % 50 == 0:
        print(f"pretrain {step} loss {source_loss.item():.4f}")

# phase 2: L2-SP fine-tuning of a copy of the backbone, with a new head, on the target task
pre_backbone.requires_grad_(False)
backbone = copy.deepcopy(pre_backbone)
pre_backbone.eval()
head = nn.Linear(feat_dim, n_target)
starting_point = {name: p.detach().clone() for name, p in backbone.named_parameters()}


def sp_regularization():
    """0.5 * ||w - w0||^2 over the fine-tuned backbone, w0 the pre-trained starting point."""
    return sum(0.5 * (p - starting_point[name]).pow(2).sum()
               for name, p in backbone.named_parameters())


def head_regularization():
    """0.5 * ||w||^2 over the new head, which has no starting point."""
    return sum(0.5 * p.pow(2).sum() for p in head.parameters())


optimizer = torch.optim.SGD([{"params": backbone.parameters(), "lr": 0.1 * args.lr},
                             {"params": head.parameters()}],
                            lr=args.lr, momentum=0.9, nesterov=True)
for step in range(args.finetune_steps):
    idx = torch.randint(0, len(x_target), (32,))
    logits = head(backbone(x_target[idx]))
    cls_loss = F.cross_entropy(logits, y_target[idx])
    loss_reg_backbone = sp_regularization()
    loss_reg_head = head_regularization()
    loss = cls_loss + args.alpha * loss_reg_backbone + args.beta * loss_reg_head
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 40 == 0:
        with torch.no_grad():
            drift = (backbone(x_target) - pre_backbone(x_target)).pow(2).mean()
        print(f"finetune {step} loss {cls_loss.item():.4f} sp {loss_reg_backbone.item():.5f} "
              f"feature drift {drift.item():.5f}")

if args.out:
    torch.save({"pre_backbone": pre_backbone.state_dict(), "source_head": source_head.state_dict(),
                "backbone": backbone.state_dict(), "head": head.state_dict()}, args.out)
