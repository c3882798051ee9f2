"""CoTTA: continual test-time adaptation of a small classifier on a drifting synthetic stream.

Paper: Qin Wang, Olga Fink, Luc Van Gool, Dengxin Dai, "Continual Test-Time Domain Adaptation",
CVPR 2022, arXiv:2203.13208.
Reference implementation: qinenergy/cotta, cifar/cotta.py (CoTTA.forward_and_adapt,
update_ema_variables, softmax_entropy, collect_params, copy_model_and_optimizer,
configure_model).

Phase 1 trains an MLP classifier with batch normalization on a synthetic source task (four
Gaussian classes in 10-d). Phase 2 adapts it online on an unlabeled target stream whose inputs
drift (growing offset, gain and noise across four successive domains). Before adaptation all
weights and biases are made trainable and batch norm uses batch statistics; the source weights
are kept as a deep-copied state dict, and two deep copies are made: an anchor (the frozen source
model) and the EMA teacher, frozen for autograd and never stepped by the optimizer. For each
target batch the teacher prediction is computed without gradient: if the anchor's mean
confidence falls below a threshold it is the average of the teacher's logits over random
augmentations, otherwise the teacher's logits on the batch itself. The student is trained by the
soft cross-entropy to that prediction (the only differentiated path), then the teacher follows
the student by EMA and a random fraction of the student's weights is restored to the source
weights, both without autograd.
As published: clean.
"""
import argparse
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

IN_DIM, HIDDEN, N_CLASSES = 10, 32, 4
SRC_STEPS, SRC_BATCH, SRC_LR = 80, 64, 1e-2
N_DOMAINS, BATCHES_PER_DOMAIN, TGT_BATCH, TTA_LR = 4, 12, 32, 1e-3
N_AUG, EMA_MOMENTUM, RESTORE_PROB, CONF_THRESHOLD = 8, 0.99, 0.02, 0.9


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(IN_DIM, HIDDEN), nn.BatchNorm1d(HIDDEN), nn.ReLU(),
            nn.Linear(HIDDEN, HIDDEN), nn.BatchNorm1d(HIDDEN), nn.ReLU(),
            nn.Linear(HIDDEN, N_CLASSES))

    def forward(self, x):
        return self.net(x)


def sample_source(centers, n):
    y = torch.randint(0, N_CLASSES, (n,))
    return centers[y] + 0.8 * torch.randn(n, IN_DIM), y


def sample_target(centers, drift_dir, domain, step, n):
    x, y = sample_source(centers, n)
    level = domain + step / BATCHES_PER_DOMAIN
    x = x * (1.0 + 0.2 * level) + 0.6 * level * drift_dir
    return x + 0.3 * domain * torch.randn_like(x), y


def augment(x):
    gain = 1.0 + 0.1 * torch.randn(1, x.shape[1])
    return x * gain + 0.1 * torch.randn_like(x)


def soft_cross_entropy(student_logits, teacher_logits):
    return -(teacher_logits.softmax(1) * student_logits.log_softmax(1)).sum(1)


def configure_for_tta(model):
    model.train()
    model.requires_grad_(True)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm1d):
            m.track_running_stats = False
            m.running_mean = None
            m.running_var = None
    return model


@torch.no_grad()
def update_ema(teacher, student, momentum):
    for t, s in zip(teacher.parameters(), student.parameters()):
        t.mul_(momentum).add_(s, alpha=1.0 - momentum)


@torch.no_grad()
def stochastic_restore(model, source_state, prob):
    for name, p in model.named_parameters():
        if p.requires_grad:
            keep_source = torch.rand(p.shape) < prob
            p.copy_(torch.where(keep_source, source_state[name], p))


def pretrain_source(model, centers):
    opt = torch.optim.Adam(model.parameters(), lr=SRC_LR)
    model.train()
    for step in range(1, SRC_STEPS + 1):
        x, y = sample_source(centers, SRC_BATCH)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 40 == 0:
            print(f"source step {step} loss {loss.item():.4f}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=str, default=None)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    centers = 0.7 * torch.randn(N_CLASSES, IN_DIM)
    drift_dir = torch.randn(IN_DIM)
    model = Classifier()
    pretrain_source(model, centers)

    model = configure_for_tta(model)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(params, lr=TTA_LR, betas=(0.9, 0.999))
    source_state = copy.deepcopy(model.state_dict())
    anchor = copy.deepcopy(model).requires_grad_(False)
    teacher = copy.deepcopy(model).requires_grad_(False)

    for domain in range(N_DOMAINS):
        correct, n_aug_used = 0, 0
        for step in range(BATCHES_PER_DOMAIN):
            x, y = sample_target(centers, drift_dir, domain, step, TGT_BATCH)
            student_logits = model(x)
            with torch.no_grad():
                anchor_conf = anchor(x).softmax(1).max(1)[0]
                teacher_logits = teacher(x)
                if anchor_conf.mean() < CONF_THRESHOLD:
                    teacher_logits = torch.stack([teacher(augment(x))
                                                  for _ in range(N_AUG)]).mean(0)
                    n_aug_used += 1
            loss = soft_cross_entropy(student_logits, teacher_logits).mean(0)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            update_ema(teacher, model, EMA_MOMENTUM)
            stochastic_restore(model, source_state, RESTORE_PROB)
            correct += (teacher_logits.argmax(1) == y).sum().item()
        acc = correct / (BATCHES_PER_DOMAIN * TGT_BATCH)
        print(f"domain {domain} loss {loss.item():.4f} acc {acc:.3f} "
              f"augmented batches {n_aug_used}/{BATCHES_PER_DOMAIN}")

    if args.out:
        torch.save({"model": model.state_dict(), "teacher": teacher.state_dict(),
                    "anchor": anchor.state_dict(), "source": source_state}, args.out)


if __name__ == "__main__":
    main()
