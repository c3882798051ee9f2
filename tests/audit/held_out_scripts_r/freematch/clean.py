"""FreeMatch semi-supervised classification at a tiny size, written after Wang, Chen, Heng, Hou,
Fan, Wu, Wang, Savvides, Shinozaki, Raj, Schiele and Xie, "FreeMatch: Self-adaptive Thresholding
for Semi-supervised Learning" (ICLR 2023, arXiv:2205.07246): a FixMatch-style consistency loss, the
cross-entropy of the strong view's prediction against the hard pseudo-label of the weak view,
masked by a self-adaptive threshold (SAT): an EMA tau of the weak view's mean top confidence is the
global threshold, modulated per class by an EMA p~ of the weak view's class probabilities divided
by its maximum, the EMAs started at 1 / C; plus a self-adaptive class fairness term (SAF) between
the EMA class probabilities and the masked strong views' mean probability, each normalised by a
histogram of hard predictions. With the authors' code in microsoft/Semi-supervised-learning (USB,
https://github.com/microsoft/Semi-supervised-learning, semilearn/algorithms/freematch/
freematch.py FreeMatch.train_step: the labelled and the strong-view logits with gradient, the weak
view's under torch.no_grad(), sup_loss the labelled cross-entropy, the mask from the masking hook,
hard pseudo-labels from PseudoLabelingHook.gen_ulb_targets (which detaches the logits), unsup_loss
the masked cross-entropy of the strong view, ent_loss from entropy_loss when the mask is not empty,
total = sup_loss + lambda_u * unsup_loss + lambda_e * ent_loss; entropy_loss: the masked strong
probabilities, hist_s their argmax histogram, p_model scaled by 1 / label_hist and mean strong
probability scaled by 1 / hist_s, both scalers detached and infinities set to 0, each renormalised,
and sum(mod_prob_model * log(mod_mean_prob_s)); semilearn/algorithms/freematch/utils.py
FreeMatchThresholingHook.masking: softmax of the detached weak logits, update under
@torch.no_grad() of time_p, p_model and label_hist by EMA with momentum m, then mask = max_probs >=
time_p * p_model[max_idx] / max(p_model)). FreeMatch itself needs no warm-up; here a short
supervised warm-up comes first (phase 1) so that the tiny model's first pseudo-labels mean
something, then FreeMatch (phase 2). The EMA momentum is 0.9 instead of 0.999 for a 60-step
run; the statistics start at 1 / C as in the paper. The data: four Gaussian classes in eight
dimensions, 16 labelled points and 512 unlabelled ones; the weak view adds a little noise, the
strong view drops features at random and adds more noise.
As published: clean."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--warmup-steps", type=int, default=20, help="phase 1: supervised steps")
parser.add_argument("--steps", type=int, default=60, help="phase 2: FreeMatch steps")
parser.add_argument("--lb-batch", type=int, default=16)
parser.add_argument("--uratio", type=int, default=4, help="unlabelled per labelled example")
parser.add_argument("--ema-p", type=float, default=0.9, help="momentum of the SAT statistics")
parser.add_argument("--lambda-u", type=float, default=1.0)
parser.add_argument("--lambda-e", type=float, default=0.01, help="weight of the fairness term")
parser.add_argument("--out", default=None, help="where to save the model and the SAT state")
args = parser.parse_args()
torch.manual_seed(args.seed)

n_classes, dim = 4, 8
centres = 1.5 * torch.randn(n_classes, dim)
y_l = torch.arange(n_classes).repeat(4)
x_l = centres[y_l] + torch.randn(len(y_l), dim)
y_u = torch.randint(0, n_classes, (512,))
x_u = centres[y_u] + torch.randn(len(y_u), dim)


def weak(x):
    return x + 0.1 * torch.randn_like(x)


def strong(x):
    keep = (torch.rand_like(x) > 0.3).to(x.dtype)
    return x * keep + 0.5 * torch.randn_like(x)


def fairness_loss(mask, logits_s, p_model, label_hist):
    """SAF: the EMA class probabilities against the masked strong views' mean probability."""
    probs_s = logits_s[mask.bool()].softmax(-1)
    hist_s = torch.bincount(probs_s.argmax(-1), minlength=n_classes).to(probs_s.dtype)
    hist_s = hist_s / hist_s.sum()
    hist_scaler = torch.where(label_hist > 0, 1.0 / label_hist, torch.zeros_like(label_hist))
    mod_p_model = p_model * hist_scaler.detach()
    mod_p_model = mod_p_model / mod_p_model.sum()
    mean_scaler = torch.where(hist_s > 0, 1.0 / hist_s, torch.zeros_like(hist_s))
    mod_mean_prob = probs_s.mean(0) * mean_scaler.detach()
    mod_mean_prob = mod_mean_prob / mod_mean_prob.sum()
    return (mod_p_model * torch.log(mod_mean_prob + 1e-12)).sum()


model = nn.Sequential(nn.Linear(dim, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                      nn.Linear(64, n_classes))
optimizer = torch.optim.SGD(model.parameters(), lr=0.03, momentum=0.9, nesterov=True,
                            weight_decay=5e-4)

# phase 1: supervised warm-up on the labelled points
for step in range(args.warmup_steps):
    idx = torch.randint(0, len(y_l), (args.lb_batch,))
    sup_loss = F.cross_entropy(model(weak(x_l[idx])), y_l[idx])
    optimizer.zero_grad()
    sup_loss.backward()
    optimizer.step()
    if step % 10 == 0:
        print(f"warm-up {step} sup {sup_loss.item():.3f}")

# phase 2: FreeMatch with self-adaptive thresholds and the fairness term
time_p = torch.tensor(1.0 / n_classes)
p_model = torch.ones(n_classes) / n_classes
label_hist = torch.ones(n_classes) / n_classes
m = args.ema_p
for step in range(args.steps):
    idx = torch.randint(0, len(y_l), (args.lb_batch,))
    uidx = torch.randint(0, len(y_u), (args.lb_batch * args.uratio,))
    x_lb, y_lb = weak(x_l[idx]), y_l[idx]
    x_ulb_w, x_ulb_s = weak(x_u[uidx]), strong(x_u[uidx])

    logits_x_lb = model(x_lb)
    with torch.no_grad():
        logits_x_ulb_w = model(x_ulb_w)
    logits_x_ulb_s = model(x_ulb_s)
    sup_loss = F.cross_entropy(logits_x_lb, y_lb)

    # SAT: update the EMA statistics from the weak view, then the mask
    with torch.no_grad():
        probs_x_ulb_w = torch.softmax(logits_x_ulb_w.detach(), dim=-1)
        max_probs, max_idx = probs_x_ulb_w.max(dim=-1)
        time_p = time_p * m + (1 - m) * max_probs.mean()
        p_model = p_model * m + (1 - m) * probs_x_ulb_w.mean(dim=0)
        hist = torch.bincount(max_idx, minlength=n_classes).to(p_model.dtype)
        label_hist = label_hist * m + (1 - m) * hist / hist.sum()
        mod = p_model / p_model.max()
        mask = max_probs.ge(time_p * mod[max_idx]).to(max_probs.dtype)
    pseudo_label = max_idx

    unsup_loss = (F.cross_entropy(logits_x_ulb_s, pseudo_label, reduction="none") * mask).mean()
    if mask.sum() > 0:
        ent_loss = fairness_loss(mask, logits_x_ulb_s, p_model, label_hist)
    else:
        ent_loss = torch.zeros(())
    total_loss = sup_loss + args.lambda_u * unsup_loss + args.lambda_e * ent_loss

    optimizer.zero_grad()
    total_loss.backward()
    optimizer.step()
    if step % 10 == 0:
        print(f"freematch {step} sup {sup_loss.item():.3f} unsup {unsup_loss.item():.3f} "
              f"ent {ent_loss.item():.3f} mask {mask.mean().item():.2f} tau {time_p.item():.3f}")

if args.out:
    torch.save({"model": model.state_dict(), "time_p": time_p, "p_model": p_model,
                "label_hist": label_hist}, args.out)
