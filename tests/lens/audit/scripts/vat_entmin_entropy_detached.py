"""Virtual adversarial training with entropy minimisation (VAT+EntMin) at a tiny size, written
after Miyato, Maeda, Koyama and Ishii, "Virtual Adversarial Training: A Regularization Method for
Supervised and Semi-Supervised Learning" (TPAMI 2018, arXiv:1704.03976) and takerum/vat_tf
(train_semisup.py, the ``vatent`` method): cross-entropy on labelled points, and on unlabelled
points the local distributional smoothness (whose target, the prediction at ``x``, is rightly
detached) and the entropy of the prediction at ``x``, which the method trains. Bug twin of
vat_entmin.py: the entropy is computed from the detached logits (``ent =
entropy(logits_u.detach())``), so the entropy term is made of cut values only: it changes the
printed loss and trains nothing, and the classifier is no longer pushed to confident
predictions on the unlabelled points. The fix is that line, without the ``.detach()``. ``--out
PATH`` saves the classifier's weights."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--xi", type=float, default=0.1)
parser.add_argument("--eps", type=float, default=0.5)
parser.add_argument("--out", default=None, help="where to save the trained tensors")
args = parser.parse_args()
torch.manual_seed(args.seed)

dim, classes = 6, 3
centers = 2.0 * torch.randn(classes, dim)
labels = torch.arange(classes).repeat(4)
labelled = centers[labels] + 0.5 * torch.randn(len(labels), dim)
unlabelled = centers[torch.randint(0, classes, (96,))] + 0.5 * torch.randn(96, dim)

model = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, classes))
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)


def kl_div_with_logits(target_logits, logits):
    """KL(p_target || p), the target side a fixed distribution."""
    q = F.softmax(target_logits, dim=1)
    return (q * (F.log_softmax(target_logits, dim=1) - F.log_softmax(logits, dim=1))).sum(1).mean()


def entropy(logits):
    """The mean entropy of the predicted class distributions."""
    return -(F.softmax(logits, dim=1) * F.log_softmax(logits, dim=1)).sum(1).mean()


def virtual_adversarial_loss(x, logits):
    target = logits.detach()
    d = args.xi * F.normalize(torch.randn_like(x), dim=1)
    d.requires_grad_()
    distance = kl_div_with_logits(target, model(x + d))
    grad = torch.autograd.grad(distance, d)[0]
    r_adv = args.eps * F.normalize(grad, dim=1)
    return kl_div_with_logits(target, model(x + r_adv))


for step in range(args.steps):
    x_u = unlabelled[24 * (step % 4):24 * (step % 4) + 24]
    logits_l = model(labelled)
    logits_u = model(x_u)
    lds = virtual_adversarial_loss(x_u, logits_u)
    ent = entropy(logits_u.detach())
    loss = F.cross_entropy(logits_l, labels) + lds + ent
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

if args.out:
    torch.save({f"model.{k}": v for k, v in model.state_dict().items()}, args.out)
