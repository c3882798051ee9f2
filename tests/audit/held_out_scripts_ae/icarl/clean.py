"""iCaRL class-incremental learning on synthetic Gaussian classes, three tasks of two classes.

Paper: Sylvestre-Alvise Rebuffi, Alexander Kolesnikov, Georg Sperl and Christoph H. Lampert,
"iCaRL: Incremental Classifier and Representation Learning", CVPR 2017, arXiv:1611.07725.
Reference implementations: srebuffi/iCaRL, iCaRL-TheanoLasagne/main_cifar_100_theano.py (the
loop over batches of classes: one-hot targets whose old-class columns are overwritten with the
sigmoid outputs of network2, the frozen copy of the network taken after the previous increment
and read through func_pred; binary cross-entropy averaged over the outputs with an L2 weight
decay of 1e-5; SGD with momentum 0.9 whose learning rate is reset at every increment and divided
by lr_factor at lr_strat; herding with w_t = w_t + mu - D[:, ind_max] on L2-normalized features;
the class means of the exemplars for the nearest-mean-of-exemplars classifier), and the PyTorch
port donlee90/icarl, model.py (iCaRLNet: feature_extractor followed by a bias-free fc;
increment_classes builds a larger nn.Linear and copies the old rows into it;
update_representation, construct_exemplar_set, reduce_exemplar_sets, classify) and main.py (the
loop over groups of classes with a fixed memory K split as m = K / n_classes).

Each class is a Gaussian blob in 12 dimensions; the tasks bring classes {0, 1}, {2, 3} and
{4, 5} one after another. The network is a two-layer ReLU feature extractor (16 features) and a
growing bias-free linear classifier with one sigmoid output per class seen so far. Every task is
its own training phase: before a new task the current network is copied into old_model (a
deepcopy kept in eval mode and read only under torch.no_grad(), never optimized), the classifier
grows by two rows (the old rows copied), and a fresh SGD optimizer (momentum 0.9, weight decay
1e-5) with a MultiStepLR decay is built over the grown network. The training set of a task is
the new classes' data plus the exemplar memory; each batch's targets are one-hot over the seen
classes, with the old-class columns replaced by sigmoid(old_model(x)) (distillation), and the
loss is the mean binary cross-entropy on the logits. After each task the memory of 20 exemplars
is shared out as m = 20 // n_seen per class: old sets are cut to their first m, new sets are
chosen by herding on normalized features, and test points are classified by the nearest mean of
exemplars.
As published: clean.
"""
import argparse
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--n_tasks", type=int, default=3)
parser.add_argument("--classes_per_task", type=int, default=2)
parser.add_argument("--n_per_class", type=int, default=40)
parser.add_argument("--n_test", type=int, default=20)
parser.add_argument("--dim", type=int, default=12)
parser.add_argument("--sep", type=float, default=1.2)
parser.add_argument("--hidden", type=int, default=32)
parser.add_argument("--feature_size", type=int, default=16)
parser.add_argument("--memory", type=int, default=20)
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--batch_size", type=int, default=16)
parser.add_argument("--lr", type=float, default=0.2)
parser.add_argument("--momentum", type=float, default=0.9)
parser.add_argument("--wdecay", type=float, default=1e-5)
parser.add_argument("--lr_factor", type=float, default=5.0)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

n_total = args.n_tasks * args.classes_per_task
centers = args.sep * torch.randn(n_total, args.dim)


def make_split(classes, n):
    x = torch.cat([centers[c] + torch.randn(n, args.dim) for c in classes])
    y = torch.cat([torch.full((n,), c, dtype=torch.long) for c in classes])
    return x, y


class ICaRLNet(nn.Module):
    def __init__(self, dim, hidden, feature_size, n_classes):
        super().__init__()
        self.feature_extractor = nn.Sequential(
            nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, feature_size), nn.ReLU())
        self.fc = nn.Linear(feature_size, n_classes, bias=False)

    def forward(self, x):
        return self.fc(self.feature_extractor(x))

    def increment_classes(self, n):
        old_weight = self.fc.weight.data
        self.fc = nn.Linear(self.fc.in_features, self.fc.out_features + n, bias=False)
        self.fc.weight.data[:old_weight.size(0)] = old_weight


def normalized_features(net, x):
    with torch.no_grad():
        f = net.feature_extractor(x)
    return f / f.norm(dim=1, keepdim=True).clamp_min(1e-8)


def herding(feats, m):
    mu = feats.mean(0)
    w = mu.clone()
    chosen = []
    for _ in range(1000):
        if len(chosen) == m:
            break
        i = int(torch.argmax(feats @ w))
        if i not in chosen:
            chosen.append(i)
        w = w + mu - feats[i]
    return torch.tensor(chosen, dtype=torch.long)


def exemplar_means(net, exemplar_x):
    means = []
    for x in exemplar_x:
        mu = normalized_features(net, x).mean(0)
        means.append(mu / mu.norm().clamp_min(1e-8))
    return torch.stack(means)


model = ICaRLNet(args.dim, args.hidden, args.feature_size, args.classes_per_task)
old_model = None
exemplar_x, exemplar_y = [], []
test_x, test_y = [], []
class_means = None
update = 0

for t in range(args.n_tasks):
    classes = list(range(t * args.classes_per_task, (t + 1) * args.classes_per_task))
    x_new, y_new = make_split(classes, args.n_per_class)
    x_te, y_te = make_split(classes, args.n_test)
    test_x.append(x_te)
    test_y.append(y_te)
    n_old = t * args.classes_per_task
    n_seen = n_old + args.classes_per_task

    if t > 0:
        old_model = copy.deepcopy(model)
        old_model.eval()
        model.increment_classes(args.classes_per_task)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                                weight_decay=args.wdecay)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(
        optimizer, milestones=[args.epochs - 1], gamma=1.0 / args.lr_factor)

    x_train = torch.cat([x_new] + exemplar_x)
    y_train = torch.cat([y_new] + exemplar_y)
    model.train()
    for epoch in range(args.epochs):
        perm = torch.randperm(len(x_train))
        for i in range(0, len(x_train), args.batch_size):
            idx = perm[i:i + args.batch_size]
            x, y = x_train[idx], y_train[idx]
            targets = F.one_hot(y, n_seen).float()
            if old_model is not None:
                with torch.no_grad():
                    q = torch.sigmoid(old_model(x))
                targets[:, :n_old] = q[:, :n_old]
            optimizer.zero_grad()
            logits = model(x)
            loss = F.binary_cross_entropy_with_logits(logits, targets)
            loss.backward()
            optimizer.step()
            update += 1
        scheduler.step()
        print(f"task {t} epoch {epoch} update {update:3d} loss {loss.item():.4f}")

    # exemplar memory: cut the old sets, herd the new ones
    m = args.memory // n_seen
    exemplar_x = [ex[:m] for ex in exemplar_x]
    exemplar_y = [ey[:m] for ey in exemplar_y]
    for c in classes:
        xc = x_new[y_new == c]
        chosen = herding(normalized_features(model, xc), m)
        exemplar_x.append(xc[chosen])
        exemplar_y.append(torch.full((m,), c, dtype=torch.long))

    # nearest-mean-of-exemplars classification on all classes seen so far
    model.eval()
    class_means = exemplar_means(model, exemplar_x)
    xs, ys = torch.cat(test_x), torch.cat(test_y)
    preds = torch.cdist(normalized_features(model, xs), class_means).argmin(1)
    acc = (preds == ys).float().mean().item()
    print(f"task {t} classes {n_seen} memory {m}/class NME accuracy {acc:.3f}")

if args.out:
    torch.save({"model": model.state_dict(), "class_means": class_means}, args.out)
