"""Evidential deep learning: a classifier that outputs Dirichlet evidence.

Paper: Murat Sensoy, Lance Kaplan and Melih Kandemir, "Evidential Deep Learning to Quantify
Classification Uncertainty", NeurIPS 2018, arXiv:1806.01768.
Reference implementation: dougbrion/pytorch-classification-uncertainty, losses.py
(relu_evidence, kl_divergence, loglikelihood_loss, mse_loss, edl_mse_loss) and train.py
(train_model), with the Adam and StepLR set-up of main.py.

A small MLP classifies points drawn from overlapping Gaussian clusters into K = 4 classes. Its
outputs pass through a ReLU to give non-negative evidence, and alpha = evidence + 1 are the
parameters of a Dirichlet over class probabilities. The loss is the expected squared error under
that Dirichlet (error plus variance terms) plus an annealed KL term that pushes the misleading
evidence towards the uniform Dirichlet: alpha_tilde = y + (1 - y) * alpha removes the evidence
of the true class, and KL(Dir(alpha_tilde) || Dir(1)) is weighted by min(1, epoch / 10), so it is
off in epoch 0. Both terms are differentiated through alpha into the network; no part of the
loss is detached. The uncertainty u = K / S, the mean evidence and the accuracy are computed
under no_grad for reporting only. Adam with weight decay and a step schedule trains all weights,
with gradients cleared before every batch. As published: clean.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F


def relu_evidence(logits):
    return F.relu(logits)


def kl_divergence(alpha, num_classes):
    ones = torch.ones(1, num_classes)
    sum_alpha = alpha.sum(dim=1, keepdim=True)
    first = (torch.lgamma(sum_alpha) - torch.lgamma(alpha).sum(dim=1, keepdim=True)
             + torch.lgamma(ones).sum(dim=1, keepdim=True)
             - torch.lgamma(ones.sum(dim=1, keepdim=True)))
    second = ((alpha - ones) * (torch.digamma(alpha) - torch.digamma(sum_alpha))).sum(
        dim=1, keepdim=True)
    return first + second


def loglikelihood_loss(y, alpha):
    S = alpha.sum(dim=1, keepdim=True)
    err = ((y - alpha / S) ** 2).sum(dim=1, keepdim=True)
    var = (alpha * (S - alpha) / (S * S * (S + 1))).sum(dim=1, keepdim=True)
    return err + var


def edl_mse_loss(logits, y, epoch, num_classes, annealing_step):
    evidence = relu_evidence(logits)
    alpha = evidence + 1
    loglik = loglikelihood_loss(y, alpha)
    annealing_coef = min(1.0, epoch / annealing_step)
    alpha_tilde = y + (1 - y) * alpha
    kl = annealing_coef * kl_divergence(alpha_tilde, num_classes)
    return (loglik + kl).mean()


def make_data(n, d_in, num_classes):
    centers = torch.randn(num_classes, d_in) * 1.5
    labels = torch.randint(0, num_classes, (n,))
    x = centers[labels] + torch.randn(n, d_in)
    return x, labels


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=str, default=None)
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--annealing_step", type=int, default=10)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    num_classes, d_in = 4, 8
    x_all, labels_all = make_data(256, d_in, num_classes)
    model = nn.Sequential(nn.Linear(d_in, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                          nn.Linear(64, num_classes))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=0.005)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=7, gamma=0.1)

    for epoch in range(args.epochs):
        model.train()
        perm = torch.randperm(x_all.shape[0])
        stats = torch.zeros(4)
        for start in range(0, x_all.shape[0], args.batch):
            idx = perm[start:start + args.batch]
            inputs, labels = x_all[idx], labels_all[idx]
            y = F.one_hot(labels, num_classes).float()

            optimizer.zero_grad()
            logits = model(inputs)
            loss = edl_mse_loss(logits, y, epoch, num_classes, args.annealing_step)
            loss.backward()
            optimizer.step()

            with torch.no_grad():
                evidence = relu_evidence(logits)
                alpha = evidence + 1
                u = num_classes / alpha.sum(dim=1, keepdim=True)
                match = (logits.argmax(dim=1) == labels).float()
                stats += torch.stack([loss.detach(), match.mean(), u.mean(),
                                      evidence.sum(dim=1).mean()])
        scheduler.step()
        stats /= (x_all.shape[0] + args.batch - 1) // args.batch
        if epoch % 3 == 0 or epoch == args.epochs - 1:
            print(f"epoch {epoch:2d} loss {stats[0]:.4f} acc {stats[1]:.3f} "
                  f"u {stats[2]:.3f} evidence {stats[3]:.2f}")

    if args.out:
        torch.save({"model": model.state_dict()}, args.out)


if __name__ == "__main__":
    main()
