"""SimMatch, semi-supervised classification with pseudo-labels and similarity matching, written
after Zheng, You, Huang, Wang, Qian and Xu, "SimMatch: Semi-supervised Learning with Similarity
Matching" (CVPR 2022, arXiv:2203.06915): a labeled memory bank holds one normalised projection
per labeled example and its label; for an unlabeled image the weak view's class probabilities
(the FixMatch pseudo-label) and its similarity distribution over the bank (softmax of cosine
similarities / T) calibrate each other, the instance target scaled by the class probability of
each bank entry's label (unfolding) and the pseudo-label smoothed by the similarity mass
aggregated per class (aggregation); the strong view is trained by cross-entropy to the
thresholded pseudo-label and by cross-entropy of its own similarity distribution to the
calibrated instance target, both targets fixed; the bank entries of the labeled batch are
replaced by a moving average of their new projections. With the USB implementation,
microsoft/Semi-supervised-learning (semilearn/algorithms/simmatch/simmatch.py, SimMatch_Net:
backbone, classifier and an l2-normalised MLP projection head; SimMatch.train_step: the
teacher_prob / factor / aggregated_prob block under torch.no_grad(), in_loss = sum(-teacher_prob
* log student_prob), consistency_loss to probs_x_ulb_w with the FixedThresholdingHook mask,
total_loss = sup_loss + lambda_u * unsup_loss + lambda_in * in_loss; update_bank under
@torch.no_grad(), with use_ema_teacher False for the small data sets, the bank an EMA with
ema_bank = 0.7 of the live model's labeled projections, renormalised), which follows the
authors' KyleZheng1997/simmatch. Here the script follows the small-data path (no EMA teacher,
the weak view through the live model), distribution alignment is left out, and the warm-up
that USB gets by zeroing in_loss in the first epoch is a phase of supervised training on the
labeled examples, after which the bank is filled with their projections. The data are
2-d Gaussian blobs embedded in 8 dimensions, weak and strong views made by additive noise.
Bug: the projection head is left out of the main phase's optimizer, which is built over
list(model.backbone.parameters()) + list(model.classifier.parameters()), where USB's
AlgorithmBase builds the optimizer over all of SimMatch_Net's parameters, the mlp_proj head
included (as the authors' code does for its encoder and head): the head gets the gradient of
the instance-similarity loss in its .grad but is never stepped, so the projections that fill
the labeled bank and that the similarity targets are computed from stay those of the random
head, and the instance-matching term can only adapt the backbone through a fixed random
projection, from the first SimMatch update on."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--warmup-steps", type=int, default=50)
parser.add_argument("--steps", type=int, default=150)
parser.add_argument("--T", type=float, default=0.1)
parser.add_argument("--p-cutoff", type=float, default=0.8)
parser.add_argument("--smoothing-alpha", type=float, default=0.9)
parser.add_argument("--ema-bank", type=float, default=0.7)
parser.add_argument("--lambda-u", type=float, default=1.0)
parser.add_argument("--lambda-in", type=float, default=1.0)
parser.add_argument("--out", default=None, help="where to save the model and the bank")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_classes, in_dim, hidden, proj_dim = 4, 8, 32, 16
n_labeled, n_unlabeled = 16, 512
centers = 3 * torch.randn(n_classes, 2)
mixing = torch.randn(2, in_dim)


def make_data(n):
    y = torch.randint(0, n_classes, (n,))
    x2 = centers[y] + 1.2 * torch.randn(n, 2)
    return torch.tanh(x2 @ mixing / 3) + 0.1 * torch.randn(n, in_dim), y


x_lb, y_lb = make_data(n_labeled)
x_ulb, _ = make_data(n_unlabeled)


def weak(x):
    return x + 0.05 * torch.randn_like(x)


def strong(x):
    return x * (torch.rand_like(x) > 0.2).float() + 0.3 * torch.randn_like(x)


class SimMatchNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(),
                                      nn.Linear(hidden, hidden), nn.ReLU())
        self.classifier = nn.Linear(hidden, n_classes)
        self.mlp_proj = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(),
                                      nn.Linear(hidden, proj_dim))

    def forward(self, x):
        feat = self.backbone(x)
        return self.classifier(feat), F.normalize(self.mlp_proj(feat), dim=1)


@torch.no_grad()
def make_targets(logits_w, feats_w, bank, labels_bank):
    """Pseudo-label and calibrated instance target of the weak view (unfolding, aggregation)."""
    probs_w = logits_w.softmax(1)
    teacher_prob_orig = (feats_w @ bank / args.T).softmax(1)
    factor = probs_w.gather(1, labels_bank.expand(len(probs_w), -1))
    teacher_prob = teacher_prob_orig * factor
    teacher_prob = teacher_prob / teacher_prob.sum(1, keepdim=True)
    aggregated = torch.zeros_like(probs_w).scatter_add(
        1, labels_bank.expand(len(probs_w), -1), teacher_prob_orig)
    pseudo = args.smoothing_alpha * probs_w + (1 - args.smoothing_alpha) * aggregated
    return pseudo, teacher_prob


model = SimMatchNet()

# phase 1: supervised warm-up on the labeled examples
warmup_optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
for step in range(args.warmup_steps):
    logits, _ = model(weak(x_lb))
    sup_loss = F.cross_entropy(logits, y_lb)
    warmup_optimizer.zero_grad()
    sup_loss.backward()
    warmup_optimizer.step()
    if step % 25 == 0:
        print(f"warm-up {step} loss {sup_loss.item():.4f}")

# labeled memory bank: one projection per labeled example (columns) and its label
with torch.no_grad():
    mem_bank = model(x_lb)[1].t().clone()
labels_bank = y_lb.clone()

# phase 2: SimMatch
optimizer = torch.optim.SGD(
    list(model.backbone.parameters()) + list(model.classifier.parameters()), lr=0.05, momentum=0.9)
for step in range(args.steps):
    idx_lb = torch.randperm(n_labeled)[:8]
    idx_ulb = torch.randint(0, n_unlabeled, (64,))
    logits_lb, feats_lb = model(weak(x_lb[idx_lb]))
    logits_w, feats_w = model(weak(x_ulb[idx_ulb]))
    logits_s, feats_s = model(strong(x_ulb[idx_ulb]))
    bank = mem_bank.clone()

    sup_loss = F.cross_entropy(logits_lb, y_lb[idx_lb])
    pseudo, teacher_prob = make_targets(logits_w, feats_w, bank, labels_bank)
    student_log_prob = (feats_s @ bank / args.T).log_softmax(1)
    in_loss = -(teacher_prob * student_log_prob).sum(1).mean()
    max_prob = pseudo.max(1).values
    mask = (max_prob >= args.p_cutoff).float()
    unsup_loss = (-(pseudo * logits_s.log_softmax(1)).sum(1) * mask).mean()
    total_loss = sup_loss + args.lambda_u * unsup_loss + args.lambda_in * in_loss

    with torch.no_grad():
        mem_bank[:, idx_lb] = F.normalize(
            args.ema_bank * mem_bank[:, idx_lb] + (1 - args.ema_bank) * feats_lb.t(), dim=0)

    optimizer.zero_grad()
    total_loss.backward()
    optimizer.step()
    if step % 50 == 0:
        print(f"simmatch {step} sup {sup_loss.item():.4f} unsup {unsup_loss.item():.4f}"
              f" in {in_loss.item():.4f} mask {mask.mean().item():.2f}")

if args.out:
    torch.save({"model": model.state_dict(), "mem_bank": mem_bank}, args.out)
