"""Adversarial debiasing with gradient projection (equality of odds) on synthetic tabular data.

Paper: Brian Hu Zhang, Blake Lemoine and Margaret Mitchell, "Mitigating Unwanted Biases with
Adversarial Learning", arXiv:1801.07593 (AAAI/ACM Conference on AI, Ethics, and Society, AIES
2018).
Reference implementation: Trusted-AI/AIF360, aif360/algorithms/inprocessing/
adversarial_debiasing.py (AdversarialDebiasing._classifier_model: one ReLU hidden layer with
dropout, Glorot weights, zero biases, a logit output; AdversarialDebiasing._adversary_model:
s = sigmoid((1 + |c|) * pred_logit) with a learned scalar c and a linear layer on
[s, s * y, s * (1 - y)]; AdversarialDebiasing.fit: two Adam optimizers at 0.005, the
classifier gradient of the label loss minus its projection on the unit adversary gradient minus
adversary_loss_weight times the adversary gradient, applied first, then the adversary minimising
its loss on the same forward pass; debias=False trains the plain classifier).

Data: each row has six standard-normal features and two noisy proxies of a binary protected
attribute z; the label y is drawn from a logistic model of the features that also leans on z, so
a plain classifier's scores separate the groups. Training runs in two phases with their own
loops. Phase 1 pre-trains the classifier alone on the label loss (the debias=False mode).
Phase 2 is the adversarial debiasing of the paper: the classifier's forward pass gives the label
loss and, through the adversary, the adversary loss; torch.autograd.grad takes both gradients
with respect to the classifier parameters, and each parameter's gradient is set to
g_pred - (g_pred . u) u - alpha * g_adv with u = g_adv / |g_adv|, then the classifier Adam steps;
the adversary is then fitted by its own Adam on the classifier logits of that forward pass,
detached. Both Adams run at 0.005 (the reference's decay by 0.96 every 1000 steps never acts
in 60 steps and is left out). c starts at 1 instead of the reference's 0: the subgradient of
|c| at 0 is 0 in both TensorFlow and torch, which would pin c at 0. The evaluation reports
accuracy and, for equality of odds, the gap in mean score between the groups within each label,
under torch.no_grad().
Bug: the adversary's Adam optimizer is built over classifier.parameters() (a copy-paste slip),
so the adversary never trains and the classifier is debiased against a fixed random adversary.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--n_train", type=int, default=2048)
parser.add_argument("--pretrain_steps", type=int, default=20)
parser.add_argument("--debias_steps", type=int, default=40)
parser.add_argument("--batch_size", type=int, default=64)
parser.add_argument("--hidden", type=int, default=32)
parser.add_argument("--keep_prob", type=float, default=0.8)
parser.add_argument("--lr", type=float, default=5e-3)
parser.add_argument("--adversary_loss_weight", type=float, default=0.1)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)


def make_data(n):
    z = torch.bernoulli(torch.full((n, 1), 0.5))
    u = torch.randn(n, 6)
    proxies = z + 0.5 * torch.randn(n, 2)
    w = torch.tensor([[1.0], [-0.8], [0.6], [0.4], [-0.3], [0.2]])
    y = torch.bernoulli(torch.sigmoid(u @ w + 2.0 * (z - 0.5)))
    return torch.cat([u, proxies], 1), y, z


class Classifier(nn.Module):
    def __init__(self, n_features, n_hidden, keep_prob):
        super().__init__()
        self.fc1 = nn.Linear(n_features, n_hidden)
        self.drop = nn.Dropout(1.0 - keep_prob)
        self.fc2 = nn.Linear(n_hidden, 1)
        for layer in (self.fc1, self.fc2):
            nn.init.xavier_uniform_(layer.weight)
            nn.init.zeros_(layer.bias)

    def forward(self, x):
        return self.fc2(self.drop(F.relu(self.fc1(x))))


class Adversary(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Parameter(torch.tensor(1.0))
        self.fc = nn.Linear(3, 1)
        nn.init.xavier_uniform_(self.fc.weight)
        nn.init.zeros_(self.fc.bias)

    def forward(self, pred_logits, y):
        s = torch.sigmoid((1.0 + torch.abs(self.c)) * pred_logits)
        return self.fc(torch.cat([s, s * y, s * (1.0 - y)], 1))


def batch(step):
    idx = torch.randint(0, args.n_train, (args.batch_size,))
    return x_train[idx], y_train[idx], z_train[idx]


x_train, y_train, z_train = make_data(args.n_train)
x_eval, y_eval, z_eval = make_data(1024)
classifier = Classifier(x_train.size(1), args.hidden, args.keep_prob)
adversary = Adversary()
classifier_opt = torch.optim.Adam(classifier.parameters(), lr=args.lr)
adversary_opt = torch.optim.Adam(classifier.parameters(), lr=args.lr)

# Phase 1: plain classifier pre-training
classifier.train()
for step in range(args.pretrain_steps):
    x, y, z = batch(step)
    classifier_opt.zero_grad()
    pred_loss = F.binary_cross_entropy_with_logits(classifier(x), y)
    pred_loss.backward()
    classifier_opt.step()
    if step % 10 == 0 or step == args.pretrain_steps - 1:
        print(f"pretrain {step:3d} classifier loss {pred_loss.item():.4f}")

# Phase 2: adversarial debiasing with the projected classifier gradient
params = list(classifier.parameters())
tiny = torch.finfo(torch.float32).tiny
for step in range(args.debias_steps):
    x, y, z = batch(step)
    pred_logits = classifier(x)
    pred_loss = F.binary_cross_entropy_with_logits(pred_logits, y)
    adv_loss = F.binary_cross_entropy_with_logits(adversary(pred_logits, y), z)
    pred_grads = torch.autograd.grad(pred_loss, params, retain_graph=True)
    adv_grads = torch.autograd.grad(adv_loss, params)
    classifier_opt.zero_grad()
    for p, g_pred, g_adv in zip(params, pred_grads, adv_grads):
        unit_adv = g_adv / (g_adv.norm() + tiny)
        p.grad = g_pred - (g_pred * unit_adv).sum() * unit_adv
        p.grad -= args.adversary_loss_weight * g_adv
    classifier_opt.step()

    adversary_opt.zero_grad()
    adv_fit_loss = F.binary_cross_entropy_with_logits(adversary(pred_logits.detach(), y), z)
    adv_fit_loss.backward()
    adversary_opt.step()
    if step % 10 == 0 or step == args.debias_steps - 1:
        print(f"debias {step:3d} classifier loss {pred_loss.item():.4f} "
              f"adversary loss {adv_fit_loss.item():.4f} c {adversary.c.item():.3f}")

classifier.eval()
with torch.no_grad():
    scores = torch.sigmoid(classifier(x_eval))
    acc = ((scores > 0.5).float() == y_eval).float().mean()
    gaps = [scores[(z_eval == 1) & (y_eval == v)].mean()
            - scores[(z_eval == 0) & (y_eval == v)].mean() for v in (0.0, 1.0)]
print(f"eval accuracy {acc.item():.3f} group score gap given y=0 {gaps[0].item():.3f}, "
      f"given y=1 {gaps[1].item():.3f}")

if args.out:
    torch.save({"classifier": classifier.state_dict(), "adversary": adversary.state_dict()},
               args.out)
