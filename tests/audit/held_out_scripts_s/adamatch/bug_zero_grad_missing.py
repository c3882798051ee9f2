"""AdaMatch for unsupervised domain adaptation of a tiny classifier, written after Berthelot,
Roelofs, Sohn, Carlini and Kurakin, "AdaMatch: A Unified Approach to Semi-Supervised Learning and
Domain Adaptation" (ICLR 2022, arXiv:2106.04732): labelled source and unlabelled target batches,
each as a weak and a strong view, go through the network together; random logit interpolation
mixes the source logits of that joint pass with those of a source-only pass (whose batch-norm
statistics are thrown away), per logit, with uniform weights; target pseudo-labels are the
weak-view target probabilities with distribution alignment (times the running mean of the source
probabilities over that of the target probabilities, renormalised), cut from the graph; a target
example counts when its aligned confidence reaches a relative threshold, tau times the mean
source confidence; the loss is the source cross-entropy of both views plus a cosine-warmed weight
times the masked cross-entropy of the strong target view against the hard pseudo-label. With the
authors' code, google-research/adamatch (https://github.com/google-research/adamatch,
domain_adaptation/adamatch.py AdaMatch.__init__ loss_function: logit_bn_x from the source-only
pass with the model's variables saved and assigned back, logit from the concatenated source and
target batch, logit_sx += (logit_bn_x - logit_sx) * uniform, confidence_ratio from
softmax(stop_gradient(logit_sx_weak)), p_labeled an ExponentialMovingAverage and p_unlabeled a
MovingAverage over 128 batches, pseudo_labels = stop_gradient of the aligned, renormalised
probabilities, pseudo_mask = max >= confidence_ratio, xe the mean of the two source
cross-entropies, xeu the masked sparse cross-entropy of logit_tu_strong against the argmax, loss =
xe + wu(progress) * xeu + wd * 0.5 * sum of squared kernels, wu a ScheduleCosPhases from 0 to 1
over the first half; train_op: the learning rate from ScheduleCos, the Momentum optimizer applied
to the gradient, model_ema.update_ema() after it; ablation/adamatch_pretrain.py starts from a
pretrained network). Here the network is first trained on the source alone for a few steps (the
pretrained start), then AdaMatch runs with its own SGD-with-momentum optimizer cleared before
each backward; the statistics' windows are shortened to the tiny run, and the EMA model is kept
under torch.no_grad(). The data: four Gaussian classes in R^8; the target domain is a linear
distortion and shift of the source with unbalanced classes, all made in the script; weak and
strong views add small and large noise (the strong one also drops features). The network is an
MLP with batch norm, which the logit interpolation needs.
Bug: the AdaMatch loop never clears the gradients: optimizer.zero_grad() is missing before
loss.backward(), the line the warm-up loop has, where the reference computes a fresh gradient at
every step (domain_adaptation/adamatch.py train_op: g, v = gv(...) then self.opt(lr, g)); the
first AdaMatch step adds its gradient to the warm-up's last one still held in .grad, and every
later step to the sum of all the earlier ones, so SGD with momentum follows the running total of
stale source and target gradients, which grows step after step and swamps the current batch."""

import argparse
import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--warmup-steps", type=int, default=30, help="source-only steps")
parser.add_argument("--steps", type=int, default=80, help="AdaMatch steps")
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--uratio", type=int, default=3)
parser.add_argument("--lr", type=float, default=0.03)
parser.add_argument("--lr-decay", type=float, default=0.25)
parser.add_argument("--wd", type=float, default=1e-3)
parser.add_argument("--confidence", type=float, default=0.9)
parser.add_argument("--out", default=None, help="where to save the model and its EMA")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_classes, dim, n_source, n_target = 4, 8, 512, 512
centres = 1.5 * torch.randn(n_classes, dim)
source_y = torch.randint(0, n_classes, (n_source,))
source_x = centres[source_y] + 0.7 * torch.randn(n_source, dim)
target_prior = torch.tensor([0.4, 0.3, 0.2, 0.1])
target_y = torch.multinomial(target_prior, n_target, replacement=True)
distortion = torch.eye(dim) + 0.3 * torch.randn(dim, dim)
target_x = (centres[target_y] + 0.7 * torch.randn(n_target, dim)) @ distortion + 0.5


def weak(x):
    return x + 0.1 * torch.randn_like(x)


def strong(x):
    keep = (torch.rand_like(x) > 0.2).float()
    return (x + 0.5 * torch.randn_like(x)) * keep


model = nn.Sequential(nn.Linear(dim, 64), nn.BatchNorm1d(64), nn.ReLU(),
                      nn.Linear(64, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, n_classes))
bn_layers = [m for m in model if isinstance(m, nn.BatchNorm1d)]

# phase 1: source-only pre-training, the starting point of AdaMatch
warmup_optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for step in range(args.warmup_steps):
    idx = torch.randint(0, n_source, (args.batch_size,))
    loss = F.cross_entropy(model(weak(source_x[idx])), source_y[idx])
    warmup_optimizer.zero_grad()
    loss.backward()
    warmup_optimizer.step()
    if step % 10 == 0:
        print(f"warm-up step {step} loss {loss.item():.3f}")

# phase 2: AdaMatch
model_ema = copy.deepcopy(model)
p_source = torch.full((n_classes,), 1.0 / n_classes)
p_target_history = [torch.full((n_classes,), 1.0 / n_classes)]
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
for step in range(args.steps):
    progress = step / args.steps
    for group in optimizer.param_groups:
        group["lr"] = args.lr * math.cos(math.acos(args.lr_decay) * progress)
    wu = 0.5 - 0.5 * math.cos(math.pi * min(1.0, progress / 0.5))
    s_idx = torch.randint(0, n_source, (args.batch_size,))
    t_idx = torch.randint(0, n_target, (args.batch_size * args.uratio,))
    x_s, y_s, x_t = source_x[s_idx], source_y[s_idx], target_x[t_idx]
    x_source = torch.cat([weak(x_s), strong(x_s)])
    x_target = torch.cat([weak(x_t), strong(x_t)])

    # random logit interpolation: a source-only pass whose batch-norm statistics are discarded
    saved = [[b.clone() for b in m.buffers()] for m in bn_layers]
    logits_source_only = model(x_source)
    for m, (mean, var, count) in zip(bn_layers, saved):
        m.running_mean, m.running_var, m.num_batches_tracked = mean, var, count
    logits = model(torch.cat([x_source, x_target]))
    logits_s, logits_t = logits.split([2 * args.batch_size, 2 * len(t_idx)])
    lam = torch.rand_like(logits_s)
    logits_s = logits_s + (logits_source_only - logits_s) * lam
    logits_s_weak, logits_s_strong = logits_s.chunk(2)
    logits_t_weak, logits_t_strong = logits_t.chunk(2)

    # relative confidence threshold and distribution alignment, with no gradient
    confidence_ratio = F.softmax(logits_s_weak.detach(), 1).max(1)[0].mean() * args.confidence
    probs_t = F.softmax(logits_t_weak, 1)
    with torch.no_grad():
        p_source = 0.9 * p_source + 0.1 * F.softmax(logits_s_weak, 1).mean(0)
        p_target_history = [*p_target_history[-15:], probs_t.mean(0)]
        p_target = torch.stack(p_target_history).mean(0)
    pseudo = probs_t * (1e-6 + p_source) / (1e-6 + p_target)
    pseudo = (pseudo / pseudo.sum(1, keepdim=True)).detach()
    mask = (pseudo.max(1)[0] >= confidence_ratio).float()

    xe = 0.5 * (F.cross_entropy(logits_s_weak, y_s) + F.cross_entropy(logits_s_strong, y_s))
    xeu = (F.cross_entropy(logits_t_strong, pseudo.argmax(1), reduction="none") * mask).mean()
    l2 = 0.5 * sum(m.weight.pow(2).sum() for m in model if isinstance(m, nn.Linear))
    loss = xe + wu * xeu + args.wd * l2

    loss.backward()
    optimizer.step()
    with torch.no_grad():
        for p_ema, p in zip(model_ema.state_dict().values(), model.state_dict().values()):
            if p.dtype.is_floating_point:
                p_ema.lerp_(p, 1 - 0.99)
            else:
                p_ema.copy_(p)
    if step % 20 == 0:
        print(f"AdaMatch step {step} xe {xe.item():.3f} xeu {xeu.item():.3f}"
              f" mask {mask.mean().item():.2f} ratio {confidence_ratio.item():.3f}")

model.eval()
with torch.no_grad():
    accuracy = (model(target_x).argmax(1) == target_y).float().mean()
print(f"target accuracy {accuracy.item():.3f}")

if args.out:
    torch.save({"model": model.state_dict(), "model_ema": model_ema.state_dict()}, args.out)
