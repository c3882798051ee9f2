"""Invariant risk minimisation (IRMv1) on a tiny coloured-digits task, written after Arjovsky,
Bottou, Gulrajani and Lopez-Paz, "Invariant Risk Minimization" (arXiv:1907.02893), section 3.1 (the
IRMv1 objective: sum over training environments of R^e(w.Phi) + lambda * ||grad_{w | w=1.0}
R^e(w.Phi)||^2) and section 5.2, with facebookresearch/InvariantRiskMinimization
(https://github.com/facebookresearch/InvariantRiskMinimization, code/colored_mnist/main.py:
make_environment, MLP, mean_nll, penalty, which multiplies the logits by a dummy scale
torch.tensor(1.).requires_grad_() and takes autograd.grad(loss, [scale], create_graph=True) so that
the squared gradient is itself differentiated; the train loop with an L2 term on the weights and
penalty_weight 1.0 until penalty_anneal_iters, then the large weight with the whole loss divided by
it) and facebookresearch/DomainBed (https://github.com/facebookresearch/DomainBed,
domainbed/algorithms.py IRM.update, which at the anneal step builds a new Adam over
self.network.parameters(), featurizer and classifier, "because it doesn't like the sharp jump in
gradient magnitudes"). Two phases: a warm-up with penalty weight 1, then the annealed penalty with a
fresh Adam. Data made in the script: ten noisy digit prototypes, the label (digit < 5) flipped with
probability 0.25, a colour equal to the label flipped with probability e per environment (0.2 and
0.1 for training, 0.9 for the test), written by zeroing one of two channels. Injected bug: the
gradient of the risk with respect to the dummy scale is taken without create_graph=True, so
autograd.grad returns it as a constant: the squared gradient ||grad_{w | w=1.0} R^e||^2 is computed
and printed but has no graph, and neither phase's loss differentiates the invariance penalty: the
network is trained by the risk and the L2 term alone (plain ERM, divided by the penalty weight in
the second phase)."""

import argparse

import torch
import torch.nn.functional as F
from torch import autograd, nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--hidden-dim", type=int, default=32)
parser.add_argument("--n-per-env", type=int, default=512)
parser.add_argument("--anneal-iters", type=int, default=30)
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--penalty-weight", type=float, default=1000.0)
parser.add_argument("--l2-weight", type=float, default=1e-3)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

side = 7
prototypes = (torch.rand(10, side, side) < 0.4).float()


def bernoulli(p, n):
    return (torch.rand(n) < p).float()


def make_environment(n, e):
    digits = torch.randint(0, 10, (n,))
    images = (prototypes[digits] + 0.3 * torch.randn(n, side, side)).clamp(0, 1)
    labels = ((digits < 5).float() - bernoulli(0.25, n)).abs()
    colors = (labels - bernoulli(e, n)).abs()
    images = torch.stack([images, images], dim=1)
    images[torch.arange(n), (1 - colors).long()] *= 0
    return {"images": images.flatten(1), "labels": labels[:, None]}


envs = [make_environment(args.n_per_env, 0.2), make_environment(args.n_per_env, 0.1),
        make_environment(args.n_per_env, 0.9)]

featurizer = nn.Sequential(nn.Linear(2 * side * side, args.hidden_dim), nn.ReLU(),
                           nn.Linear(args.hidden_dim, args.hidden_dim), nn.ReLU())
classifier = nn.Linear(args.hidden_dim, 1)
network = nn.Sequential(featurizer, classifier)
for module in network.modules():
    if isinstance(module, nn.Linear):
        nn.init.xavier_uniform_(module.weight)
        nn.init.zeros_(module.bias)


def mean_nll(logits, y):
    return F.binary_cross_entropy_with_logits(logits, y)


def mean_accuracy(logits, y):
    return ((logits > 0).float() == y).float().mean()


def penalty(logits, y):
    scale = torch.tensor(1.0).requires_grad_()
    loss = mean_nll(logits * scale, y)
    grad = autograd.grad(loss, [scale])[0]
    return torch.sum(grad ** 2)


def irm_objective(penalty_weight):
    nlls, accs, penalties = [], [], []
    for env in envs[:2]:
        logits = network(env["images"])
        nlls.append(mean_nll(logits, env["labels"]))
        accs.append(mean_accuracy(logits, env["labels"]))
        penalties.append(penalty(logits, env["labels"]))
    train_nll, train_penalty = torch.stack(nlls).mean(), torch.stack(penalties).mean()
    weight_norm = sum(w.norm().pow(2) for w in network.parameters())
    loss = train_nll + args.l2_weight * weight_norm + penalty_weight * train_penalty
    if penalty_weight > 1.0:
        loss = loss / penalty_weight
    return loss, train_nll, train_penalty, torch.stack(accs).mean()


def test_accuracy():
    with torch.no_grad():
        return mean_accuracy(network(envs[2]["images"]), envs[2]["labels"]).item()


# phase 1: warm-up, penalty weight 1
optimizer = torch.optim.Adam(network.parameters(), lr=args.lr)
for step in range(args.anneal_iters):
    loss, nll, pen, acc = irm_objective(1.0)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"warm-up {step} nll {nll.item():.4f} penalty {pen.item():.5f} acc {acc.item():.3f}")

# phase 2: the annealed penalty, with Adam reset over the whole network
optimizer = torch.optim.Adam(network.parameters(), lr=args.lr)
for step in range(args.steps):
    loss, nll, pen, acc = irm_objective(args.penalty_weight)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"irm {step} nll {nll.item():.4f} penalty {pen.item():.5f} acc {acc.item():.3f} "
          f"test acc {test_accuracy():.3f}")

if args.out:
    torch.save({"featurizer": featurizer.state_dict(), "classifier": classifier.state_dict()},
               args.out)
