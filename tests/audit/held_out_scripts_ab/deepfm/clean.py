"""DeepFM click-through-rate model trained on synthetic categorical click logs, in two phases.

Paper: Huifeng Guo, Ruiming Tang, Yunming Ye, Zhenguo Li and Xiuqiang He, "DeepFM: A
Factorization-Machine based Neural Network for CTR Prediction", IJCAI 2017, arXiv:1703.04247.
Reference implementation: shenweichen/DeepCTR-Torch, deepctr_torch/models/deepfm.py (DeepFM:
one embedding table per sparse field shared by the FM and the deep part, logit = linear_logit +
dnn_linear(dnn(concatenated embeddings)) + fm(stacked embeddings), then PredictionLayer),
deepctr_torch/layers/interaction.py (FM: 0.5 * sum over the embedding axis of the square of the
sum minus the sum of the squares), deepctr_torch/layers/core.py (DNN: Linear + ReLU stacks with
weights drawn from N(0, init_std); PredictionLayer: a learned scalar bias and a sigmoid),
deepctr_torch/models/basemodel.py (Linear: one 1-d embedding per field for the first-order
term; BaseModel.fit: forward, zero_grad, binary_cross_entropy with reduction='sum' plus
get_regularization_loss, an L2 norm penalty on the embedding tables and the linear part,
backward, step; _get_optim("adam") builds Adam over self.parameters()).

Six categorical fields with 5 to 20 values each; a hidden FM-plus-nonlinear teacher gives each
row a click probability and labels are Bernoulli draws. The embeddings have size 4, the deep
part two hidden layers of 32 units, and init_std is 0.01 (the reference default is 1e-4; larger
here so a run of a few dozen steps moves). Phase 1 trains on "day 1" logs for three shuffled
epochs with Adam over every parameter. Phase 2 warm-starts from the phase-1 model and fine-tunes
on the newest "day 2" log, where the first-order click bias of two fields has drifted, with a
fresh Adam at a lower learning rate, as deployed CTR systems retrain incrementally each day.
Both loops do forward, zero_grad, summed BCE plus the L2 penalty, backward, step; logloss and
AUC are measured under torch.no_grad() after each phase.
As published: clean.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--embedding_size", type=int, default=4)
parser.add_argument("--hidden", type=int, default=32)
parser.add_argument("--init_std", type=float, default=0.01)
parser.add_argument("--l2_reg_embedding", type=float, default=1e-5)
parser.add_argument("--l2_reg_linear", type=float, default=1e-5)
parser.add_argument("--batch_size", type=int, default=128)
parser.add_argument("--n_day1", type=int, default=1536)
parser.add_argument("--n_day2", type=int, default=768)
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--ft_epochs", type=int, default=2)
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--ft_lr", type=float, default=3e-3)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

FIELDS = {"user": 20, "item": 12, "category": 8, "device": 5, "hour": 12, "site": 10}
NAMES = list(FIELDS)

# hidden click teacher: first-order weights, latent factors and a nonlinear cross
true_w = {f: 0.8 * torch.randn(v) for f, v in FIELDS.items()}
true_v = {f: 0.6 * torch.randn(v, 3) for f, v in FIELDS.items()}


def make_log(n, drift=0.0):
    x = torch.stack([torch.randint(0, v, (n,)) for v in FIELDS.values()], 1)
    first = sum(true_w[f][x[:, i]] for i, f in enumerate(NAMES))
    vs = torch.stack([true_v[f][x[:, i]] for i, f in enumerate(NAMES)], 1)
    second = 0.5 * (vs.sum(1).pow(2) - vs.pow(2).sum(1)).sum(1)
    cross = torch.tanh(vs[:, 0, 0] * vs[:, 1, 1] * 3.0)
    logit = first + second + cross - 1.0
    if drift:
        logit = logit + drift * (true_w["device"][x[:, 3]] - true_w["hour"][x[:, 4]])
    y = torch.bernoulli(torch.sigmoid(logit))
    return x, y


class Linear(nn.Module):
    def __init__(self, init_std):
        super().__init__()
        self.embedding_dict = nn.ModuleDict({f: nn.Embedding(v, 1) for f, v in FIELDS.items()})
        for emb in self.embedding_dict.values():
            nn.init.normal_(emb.weight, mean=0.0, std=init_std)

    def forward(self, x):
        sparse = [self.embedding_dict[f](x[:, i:i + 1]) for i, f in enumerate(NAMES)]
        return torch.cat(sparse, dim=-1).sum(-1)  # (B, 1)


class FM(nn.Module):
    def forward(self, fm_input):
        square_of_sum = torch.pow(torch.sum(fm_input, dim=1, keepdim=True), 2)
        sum_of_square = torch.sum(fm_input * fm_input, dim=1, keepdim=True)
        cross_term = square_of_sum - sum_of_square
        return 0.5 * torch.sum(cross_term, dim=2)  # (B, 1)


class DNN(nn.Module):
    def __init__(self, inputs_dim, hidden_units, init_std):
        super().__init__()
        dims = [inputs_dim] + list(hidden_units)
        self.linears = nn.ModuleList(
            [nn.Linear(dims[i], dims[i + 1]) for i in range(len(dims) - 1)])
        for name, tensor in self.linears.named_parameters():
            if "weight" in name:
                nn.init.normal_(tensor, mean=0.0, std=init_std)

    def forward(self, x):
        for fc in self.linears:
            x = F.relu(fc(x))
        return x


class PredictionLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros((1,)))

    def forward(self, logit):
        return torch.sigmoid(logit + self.bias)


class DeepFM(nn.Module):
    def __init__(self, embedding_size, hidden_units, init_std, l2_reg_embedding, l2_reg_linear):
        super().__init__()
        self.embedding_dict = nn.ModuleDict(
            {f: nn.Embedding(v, embedding_size) for f, v in FIELDS.items()})
        for emb in self.embedding_dict.values():
            nn.init.normal_(emb.weight, mean=0.0, std=init_std)
        self.linear_model = Linear(init_std)
        self.dnn = DNN(len(FIELDS) * embedding_size, hidden_units, init_std)
        self.dnn_linear = nn.Linear(hidden_units[-1], 1, bias=False)
        self.fm = FM()
        self.out = PredictionLayer()
        self.regularization_weight = [
            (list(self.embedding_dict.parameters()), l2_reg_embedding),
            (list(self.linear_model.parameters()), l2_reg_linear),
        ]

    def forward(self, x):
        sparse_embedding_list = [self.embedding_dict[f](x[:, i:i + 1])
                                 for i, f in enumerate(NAMES)]  # each (B, 1, k)
        linear_logit = self.linear_model(x)
        dnn_input = torch.flatten(torch.cat(sparse_embedding_list, dim=-1), start_dim=1)
        dnn_logit = self.dnn_linear(self.dnn(dnn_input))
        logit = linear_logit + dnn_logit
        fm_input = torch.cat(sparse_embedding_list, dim=1)
        logit = logit + self.fm(fm_input)
        return self.out(logit)

    def get_regularization_loss(self):
        total = torch.zeros((1,))
        for weights, decay in self.regularization_weight:
            total = total + decay * sum(torch.norm(w, p=2) for w in weights)
        return total


def auc(y, p):
    order = torch.argsort(p)
    ranks = torch.empty_like(p)
    ranks[order] = torch.arange(1, len(p) + 1, dtype=p.dtype)
    n_pos = y.sum()
    n_neg = len(y) - n_pos
    return ((ranks[y == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)).item()


def evaluate(model, x, y):
    model.eval()
    with torch.no_grad():
        p = model(x).squeeze(-1)
        logloss = F.binary_cross_entropy(p, y).item()
    model.train()
    return logloss, auc(y, p)


x_day1, y_day1 = make_log(args.n_day1)
x_day2, y_day2 = make_log(args.n_day2, drift=1.5)
x_test, y_test = make_log(1024, drift=1.5)

model = DeepFM(args.embedding_size, (args.hidden, args.hidden), args.init_std,
               args.l2_reg_embedding, args.l2_reg_linear)

# phase 1: train on the day-1 log
optim = torch.optim.Adam(model.parameters(), lr=args.lr)
model.train()
step = 0
for epoch in range(args.epochs):
    perm = torch.randperm(args.n_day1)
    for i in range(0, args.n_day1, args.batch_size):
        idx = perm[i:i + args.batch_size]
        x, y = x_day1[idx], y_day1[idx]
        y_pred = model(x).squeeze(-1)
        optim.zero_grad()
        loss = F.binary_cross_entropy(y_pred, y, reduction="sum")
        total_loss = loss + model.get_regularization_loss()
        total_loss.backward()
        optim.step()
        if step % 12 == 0:
            print(f"day1 step {step:3d} loss {loss.item() / len(idx):.4f}")
        step += 1
ll, a = evaluate(model, x_test, y_test)
print(f"after day 1: test logloss {ll:.4f} auc {a:.4f}")

# phase 2: warm start, fine-tune on the newest day-2 log with a fresh optimizer
ft_optim = torch.optim.Adam(model.parameters(), lr=args.ft_lr)
step = 0
for epoch in range(args.ft_epochs):
    perm = torch.randperm(args.n_day2)
    for i in range(0, args.n_day2, args.batch_size):
        idx = perm[i:i + args.batch_size]
        x, y = x_day2[idx], y_day2[idx]
        y_pred = model(x).squeeze(-1)
        ft_optim.zero_grad()
        loss = F.binary_cross_entropy(y_pred, y, reduction="sum")
        total_loss = loss + model.get_regularization_loss()
        total_loss.backward()
        ft_optim.step()
        if step % 6 == 0:
            print(f"day2 step {step:3d} loss {loss.item() / len(idx):.4f}")
        step += 1
ll, a = evaluate(model, x_test, y_test)
print(f"after day 2: test logloss {ll:.4f} auc {a:.4f}")

if args.out:
    torch.save({"model": model.state_dict()}, args.out)
