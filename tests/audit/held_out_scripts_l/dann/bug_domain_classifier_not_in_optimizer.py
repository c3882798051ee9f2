"""Domain-adversarial training at a tiny size, written after Ganin and Lempitsky, "Unsupervised
Domain Adaptation by Backpropagation" (ICML 2015, arXiv:1409.7495), section 3: a feature
extractor G_f, a label predictor G_y trained on labelled source examples and a domain classifier
G_d trained on source and unlabelled target examples through a gradient reversal layer, identity
forward and -lambda times the gradient backward, so that one SGD step moves G_d to tell the
domains apart and G_f to make them indistinguishable, with the schedules of its experiments,
lambda_p = 2 / (1 + exp(-10 p)) - 1 and the learning rate mu_0 / (1 + 10 p)^0.75 as training
progress p goes from 0 to 1; the toy task is the rotated inter-twinning moons of the journal
version (Ganin et al., JMLR 2016, arXiv:1505.07818). Written with CuthbertCai/pytorch_DANN
(https://github.com/CuthbertCai/pytorch_DANN, models/models.py: GradReverse and
Domain_classifier, which reverses its input; main.py, one SGD with momentum 0.9 over the param
groups of the feature extractor, the class classifier and the domain classifier; train/train.py
train, whose 'source' mode steps an SGD over the feature extractor and the class classifier
alone, and whose 'dann' mode computes the features of both domains with their graph, the class
loss on the source and the domain loss on both, then one backward and one step; and
util/utils.py optimizer_scheduler) and fungtion/DANN (https://github.com/fungtion/DANN,
models/functions.py ReverseLayerF, models/model.py CNNModel.forward, train/main.py, whose
target batches go through the same forward as the source ones). Two phases: a source-only
warm-up of the feature extractor and the label predictor, then domain-adversarial training
towards the rotated, unlabelled target domain. Injected bug: the domain-adversarial phase's SGD is
built over the param groups of the feature extractor and the class classifier only, as for the
source-only phase (CuthbertCai/pytorch_DANN's main.py gives its SGD a third group,
domain_classifier.parameters(), and fungtion/DANN's Adam holds the whole CNNModel), so the domain
classifier's .grad is filled at every backward but never stepped: it keeps its initial weights and
the feature extractor is trained, through the reversal, against a fixed random domain classifier;
second phase of a two-phase script."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--source-steps", type=int, default=20)
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--rotation", type=float, default=35.0, help="degrees")
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

feature_dim = 16


def make_moons(n):
    y = torch.randint(0, 2, (n,))
    angle = torch.rand(n) * math.pi
    x = torch.stack([angle.cos() - y, (1 - 2 * y) * angle.sin() + 0.5 * y - 0.25], dim=1)
    return x + 0.1 * torch.randn(n, 2), y


def rotate(x, degrees):
    a = math.radians(degrees)
    return x @ torch.tensor([[math.cos(a), math.sin(a)], [-math.sin(a), math.cos(a)]])


xs, ys = make_moons(512)
xt, yt = make_moons(512)
xt = rotate(xt, args.rotation)  # target labels yt are only used to report accuracy


class GradReverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, constant):
        ctx.constant = constant
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output.neg() * ctx.constant, None


feature_extractor = nn.Sequential(nn.Linear(2, feature_dim), nn.ReLU(),
                                  nn.Linear(feature_dim, feature_dim), nn.ReLU())
class_classifier = nn.Linear(feature_dim, 2)
domain_classifier = nn.Sequential(nn.Linear(feature_dim, feature_dim), nn.ReLU(),
                                  nn.Linear(feature_dim, 2))


def accuracy(x, y):
    with torch.no_grad():
        return (class_classifier(feature_extractor(x)).argmax(1) == y).float().mean().item()


# phase 1: source only
optimizer = torch.optim.SGD(list(feature_extractor.parameters())
                            + list(class_classifier.parameters()), lr=0.01, momentum=0.9)
for step in range(args.source_steps):
    idx = torch.randint(0, len(xs), (args.batch_size,))
    class_loss = F.cross_entropy(class_classifier(feature_extractor(xs[idx])), ys[idx])
    optimizer.zero_grad()
    class_loss.backward()
    optimizer.step()
print(f"source only: source {accuracy(xs, ys):.3f} target {accuracy(xt, yt):.3f}")

# phase 2: domain-adversarial training, one SGD over the three parts
optimizer = torch.optim.SGD([{"params": feature_extractor.parameters()},
                             {"params": class_classifier.parameters()}],
                            lr=args.lr, momentum=0.9)
domain_labels = torch.cat([torch.zeros(args.batch_size), torch.ones(args.batch_size)]).long()
for step in range(args.steps):
    p = step / args.steps
    constant = 2.0 / (1.0 + math.exp(-10 * p)) - 1
    for group in optimizer.param_groups:
        group["lr"] = args.lr / (1.0 + 10 * p) ** 0.75
    idx_s = torch.randint(0, len(xs), (args.batch_size,))
    idx_t = torch.randint(0, len(xt), (args.batch_size,))
    src_feature = feature_extractor(xs[idx_s])
    tgt_feature = feature_extractor(xt[idx_t])
    class_loss = F.cross_entropy(class_classifier(src_feature), ys[idx_s])
    features = torch.cat([src_feature, tgt_feature])
    domain_preds = domain_classifier(GradReverse.apply(features, constant))
    domain_loss = F.cross_entropy(domain_preds, domain_labels)
    loss = class_loss + domain_loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} class {class_loss.item():.4f} domain {domain_loss.item():.4f}")
print(f"dann: source {accuracy(xs, ys):.3f} target {accuracy(xt, yt):.3f}")

if args.out:
    torch.save({**{f"feature_extractor.{k}": v for k, v in feature_extractor.state_dict().items()},
                **{f"class_classifier.{k}": v for k, v in class_classifier.state_dict().items()},
                **{f"domain_classifier.{k}": v
                   for k, v in domain_classifier.state_dict().items()}}, args.out)
