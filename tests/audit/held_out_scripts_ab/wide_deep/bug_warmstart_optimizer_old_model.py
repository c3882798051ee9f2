"""Wide & Deep joint training on synthetic app-install impressions, warm-started on a new day.

Paper: Heng-Tze Cheng, Levent Koc, Jeremiah Harmsen, Tal Shaked, Tushar Chandra, Hrishi Aradhye,
Glen Anderson, Greg Corrado, Wei Chai, Mustafa Ispir et al., "Wide & Deep Learning for
Recommender Systems", DLRS workshop at RecSys 2016, arXiv:1606.07792 (2016): a wide linear model
over raw and cross-product transformed sparse features and a deep feed-forward network over
learned embeddings, their logits summed into one logistic output and trained jointly on the
shared log loss, the wide part with FTRL (L1 regularized) and the deep part with AdaGrad
(section 3.3); new models are warm-started from the previous model's embeddings and linear
weights (section 4).
Reference implementation: tensorflow/estimator,
tensorflow_estimator/python/estimator/canned/dnn_linear_combined.py
(_dnn_linear_combined_model_fn: logits = dnn_logits + linear_logits; _train_op_fn: the default
'Adagrad' dnn_optimizer minimizes the loss over the dnn-scope variables and the default 'Ftrl'
linear_optimizer over the linear-scope variables, both grouped into one train op;
DNNLinearCombinedClassifier(warm_start_from=...)), with TensorFlow's FtrlOptimizer update
(learning_rate_power -0.5, initial_accumulator_value 0.1, l1/l2 strengths).

Each impression has an installed app, an impression app and a device class (categorical) and
two dense features; the click logit mixes an embedding affinity (generalization), a sparse set
of strongly liked (installed, impression) pairs (memorization), the dense features and a device
offset. The wide part sums zero-initialized weights of the one-hot installed and impression
apps, their cross product and the device, plus a bias; the deep part concatenates 8-d
embeddings of the three categories with the dense features and runs a 32-16 ReLU MLP. One
backward of the mean logistic loss feeds two optimizers: an FTRL-Proximal optimizer (written
here as a torch.optim.Optimizer) over the wide module and Adagrad over the deep module; each
step zeroes both, runs forward, the loss, backward and steps both. Phase 1 trains 40 steps on
day 1; phase 2 builds a new model, warm-starts its wide weights and embeddings from the day-1
model (its MLP freshly initialized), builds fresh FTRL and Adagrad optimizers over it and trains
20 steps on day 2, where a few new pairs became popular; evaluation runs under torch.no_grad().
Bug: the phase-2 Adagrad is built over the day-1 model's deep part (model.deep) instead of
the warm-started model2.deep, so on day 2 the new MLP and embeddings never update.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--n_apps", type=int, default=16)
parser.add_argument("--n_devices", type=int, default=4)
parser.add_argument("--emb_dim", type=int, default=8)
parser.add_argument("--hidden", type=str, default="32,16")
parser.add_argument("--batch_size", type=int, default=64)
parser.add_argument("--steps1", type=int, default=40)
parser.add_argument("--steps2", type=int, default=20)
parser.add_argument("--ftrl_lr", type=float, default=0.3)
parser.add_argument("--ftrl_l1", type=float, default=0.001)
parser.add_argument("--ftrl_l2", type=float, default=0.001)
parser.add_argument("--adagrad_lr", type=float, default=0.1)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

V, D = args.n_apps, args.n_devices
true_inst = torch.randn(V, 4)
true_imp = torch.randn(V, 4)
true_dev = torch.randn(D) * 0.5
liked_day1 = (torch.rand(V, V) < 0.1).float() * 2.5
liked_day2 = torch.maximum(liked_day1, (torch.rand(V, V) < 0.05).float() * 2.5)


def make_day(n, liked):
    inst = torch.randint(0, V, (n,))
    imp = torch.randint(0, V, (n,))
    dev = torch.randint(0, D, (n,))
    dense = torch.randn(n, 2)
    logit = (0.5 * (true_inst[inst] * true_imp[imp]).sum(1) + liked[inst, imp]
             + 0.5 * dense[:, 0] - 0.3 * dense[:, 1] + true_dev[dev] - 0.8)
    y = torch.bernoulli(torch.sigmoid(logit))
    cat = torch.stack([inst, imp, dev], 1)
    wide_idx = torch.stack([inst, V + imp, 2 * V + inst * V + imp, 2 * V + V * V + dev], 1)
    return cat, dense, wide_idx, y


class Ftrl(torch.optim.Optimizer):
    """FTRL-Proximal (McMahan et al. 2013) with TensorFlow's learning_rate_power = -0.5."""

    def __init__(self, params, lr=0.1, l1=0.0, l2=0.0, initial_accumulator_value=0.1):
        super().__init__(params, dict(lr=lr, l1=l1, l2=l2, init_acc=initial_accumulator_value))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            lr, l1, l2 = group["lr"], group["l1"], group["l2"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["accum"] = torch.full_like(p, group["init_acc"])
                    state["linear"] = torch.zeros_like(p)
                g = p.grad
                accum, linear = state["accum"], state["linear"]
                new_accum = accum + g * g
                sigma = (new_accum.sqrt() - accum.sqrt()) / lr
                linear.add_(g - sigma * p)
                quadratic = new_accum.sqrt() / lr + 2 * l2
                w = (torch.sign(linear) * l1 - linear) / quadratic
                p.copy_(torch.where(linear.abs() > l1, w, torch.zeros_like(w)))
                accum.copy_(new_accum)


class Wide(nn.Module):
    def __init__(self, n_features):
        super().__init__()
        self.weight = nn.Embedding(n_features, 1)
        nn.init.zeros_(self.weight.weight)
        self.bias = nn.Parameter(torch.zeros(1))

    def forward(self, wide_idx):
        return self.weight(wide_idx).sum(dim=(1, 2)) + self.bias


class Deep(nn.Module):
    def __init__(self, vocab_sizes, emb_dim, n_dense, hidden):
        super().__init__()
        self.embeddings = nn.ModuleList([nn.Embedding(v, emb_dim) for v in vocab_sizes])
        for emb in self.embeddings:
            nn.init.normal_(emb.weight, 0.0, emb_dim ** -0.5)
        layers, width = [], emb_dim * len(vocab_sizes) + n_dense
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        layers.append(nn.Linear(width, 1))
        self.mlp = nn.Sequential(*layers)

    def forward(self, cat, dense):
        embs = [emb(cat[:, i]) for i, emb in enumerate(self.embeddings)]
        return self.mlp(torch.cat(embs + [dense], 1)).squeeze(1)


class WideDeep(nn.Module):
    def __init__(self):
        super().__init__()
        hidden = [int(h) for h in args.hidden.split(",")]
        self.wide = Wide(2 * V + V * V + D)
        self.deep = Deep([V, V, D], args.emb_dim, 2, hidden)

    def forward(self, cat, dense, wide_idx):
        return self.wide(wide_idx) + self.deep(cat, dense)


def train(model, wide_opt, deep_opt, data, steps, phase):
    cat, dense, wide_idx, y = data
    model.train()
    for step in range(steps):
        s = slice(step * args.batch_size, (step + 1) * args.batch_size)
        wide_opt.zero_grad()
        deep_opt.zero_grad()
        logits = model(cat[s], dense[s], wide_idx[s])
        loss = F.binary_cross_entropy_with_logits(logits, y[s])
        loss.backward()
        wide_opt.step()
        deep_opt.step()
        if step % 10 == 0 or step == steps - 1:
            print(f"{phase} step {step:3d} logloss {loss.item():.4f}")


def evaluate(model, data, name):
    cat, dense, wide_idx, y = data
    model.eval()
    with torch.no_grad():
        logits = model(cat, dense, wide_idx)
        loss = F.binary_cross_entropy_with_logits(logits, y)
        acc = ((logits > 0).float() == y).float().mean()
    print(f"{name} eval logloss {loss.item():.4f} acc {acc.item():.3f}")


day1 = make_day(args.steps1 * args.batch_size, liked_day1)
day2 = make_day(args.steps2 * args.batch_size, liked_day2)
day2_eval = make_day(1024, liked_day2)

# Phase 1: joint training of the day-1 model.
model = WideDeep()
wide_opt = Ftrl(model.wide.parameters(), lr=args.ftrl_lr, l1=args.ftrl_l1, l2=args.ftrl_l2)
deep_opt = torch.optim.Adagrad(model.deep.parameters(), lr=args.adagrad_lr,
                               initial_accumulator_value=0.1)
train(model, wide_opt, deep_opt, day1, args.steps1, "day1")
evaluate(model, day2_eval, "day1 model")

# Phase 2: warm-start a new model from the day-1 embeddings and linear weights.
model2 = WideDeep()
model2.wide.load_state_dict(model.wide.state_dict())
model2.deep.embeddings.load_state_dict(model.deep.embeddings.state_dict())
wide_opt2 = Ftrl(model2.wide.parameters(), lr=args.ftrl_lr, l1=args.ftrl_l1, l2=args.ftrl_l2)
deep_opt2 = torch.optim.Adagrad(model.deep.parameters(), lr=args.adagrad_lr,
                                initial_accumulator_value=0.1)
train(model2, wide_opt2, deep_opt2, day2, args.steps2, "day2")
evaluate(model2, day2_eval, "day2 model")

if args.out:
    torch.save({"day1_model": model.state_dict(), "day2_model": model2.state_dict()}, args.out)
