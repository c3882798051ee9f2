"""RankNet warm-up, then LambdaRank fine-tuning, on synthetic queries with graded relevance.

Papers: Chris Burges, Tal Shaked, Erin Renshaw, Ari Lazier, Matt Deeds, Nicole Hamilton and Greg
Hullender, "Learning to Rank using Gradient Descent", ICML 2005; Christopher J. C. Burges,
"From RankNet to LambdaRank to LambdaMART: An Overview", Microsoft Research Technical Report
MSR-TR-2010-82 (2010).
Reference implementation: allegro/allRank, allrank/models/model.py (FCModel: optional LayerNorm
on the input features, then Linear + activation layers; OutputLayer: one Linear to a scalar
score per document; make_model: Xavier-uniform init of every matrix),
allrank/models/losses/rankNet.py (rankNet: every ordered document pair of a slate, keep the pairs
whose true label difference is positive, BCEWithLogitsLoss on the score differences against 1),
allrank/models/losses/lambdaLoss.py (lambdaLoss with weighing_scheme="lambdaRank_scheme": sort
the slate by the current predictions, gains 2^y - 1 over the ideal DCG, discounts log2(1 + rank),
pair weights |G_i - G_j| * |1/D_i - 1/D_j|, i.e. |delta NDCG| of swapping the pair, with sigma
and reduction "sum"), allrank/training/train_utils.py (loss_batch: loss.backward(),
clip_grad_norm_, opt.step(), opt.zero_grad(); fit with an optional StepLR scheduler).

Each query is a slate of documents with random features; a fixed random two-layer "teacher"
scores them and the scores are cut at global quantiles into graded relevance labels 0..4. The
ranker is an FCModel (LayerNorm, two Linear + ReLU layers of width 32) followed by an
OutputLayer. Phase 1 (warm-up) trains with the plain RankNet loss, the mean binary cross
entropy of sigmoid(sigma * (s_i - s_j)) over all pairs with y_i > y_j, under Adam. Phase 2
fine-tunes the whole model with LambdaRank: the same pairwise cross entropy, now weighted per
pair by |delta NDCG| computed from the ranking induced by the current scores (the weights are
constants of the step; ranks carry no gradient), summed over pairs and averaged over the
queries of the batch, with a fresh Adam over all parameters at a lower learning rate and a StepLR
schedule. Both phases clip the gradient norm before each step and zero the gradients after it,
as allRank's loss_batch does. NDCG@10 on held-out queries is computed under torch.no_grad().
Bug: the LambdaRank fine-tuning optimizer is built over model.input_layer only, so the
output layer is frozen in phase 2 while its gradients pile up unused in .grad.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--n_train", type=int, default=256)
parser.add_argument("--n_eval", type=int, default=64)
parser.add_argument("--slate_len", type=int, default=12)
parser.add_argument("--n_features", type=int, default=16)
parser.add_argument("--hidden", type=int, default=32)
parser.add_argument("--batch_size", type=int, default=16)
parser.add_argument("--warmup_epochs", type=int, default=2)
parser.add_argument("--finetune_epochs", type=int, default=2)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--lr_finetune", type=float, default=1e-3)
parser.add_argument("--sigma", type=float, default=1.0)
parser.add_argument("--clip", type=float, default=5.0)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)


def make_queries(n_queries, slate_len, n_features, teacher_w1, teacher_w2, cuts=None):
    x = torch.randn(n_queries, slate_len, n_features)
    s = torch.tanh(x @ teacher_w1) @ teacher_w2 + 0.3 * torch.randn(n_queries, slate_len)
    if cuts is None:
        cuts = torch.quantile(s.flatten(), torch.tensor([0.5, 0.75, 0.9, 0.97]))
    y = torch.bucketize(s, cuts).float()
    return x, y, cuts


class FCModel(nn.Module):
    def __init__(self, n_features, sizes):
        super().__init__()
        self.input_norm = nn.LayerNorm(n_features)
        dims = [n_features] + sizes
        self.layers = nn.ModuleList([nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:])])
        self.activation = nn.ReLU()

    def forward(self, x):
        x = self.input_norm(x)
        for layer in self.layers:
            x = self.activation(layer(x))
        return x


class OutputLayer(nn.Module):
    def __init__(self, d_model):
        super().__init__()
        self.w_1 = nn.Linear(d_model, 1)

    def forward(self, x):
        return self.w_1(x).squeeze(-1)


class LTRModel(nn.Module):
    def __init__(self, n_features, hidden):
        super().__init__()
        self.input_layer = FCModel(n_features, [hidden, hidden])
        self.output_layer = OutputLayer(hidden)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def forward(self, x):
        return self.output_layer(self.input_layer(x))


def pair_terms(scores, labels, sigma):
    s_i = scores.unsqueeze(2)
    s_j = scores.unsqueeze(1)
    true_diffs = labels.unsqueeze(2) - labels.unsqueeze(1)
    pair_mask = true_diffs > 0
    logits = sigma * (s_i - s_j)
    bce = F.binary_cross_entropy_with_logits(logits, torch.ones_like(logits), reduction="none")
    return bce, pair_mask


def ranknet_loss(scores, labels, sigma):
    bce, pair_mask = pair_terms(scores, labels, sigma)
    return bce[pair_mask].mean()


def lambdarank_weights(scores, labels):
    n = scores.shape[1]
    order = scores.argsort(dim=1, descending=True)
    ranks = order.argsort(dim=1).float()
    discounts = torch.log2(ranks + 2.0)
    ideal = labels.sort(dim=1, descending=True).values
    max_dcg = ((2.0 ** ideal - 1.0) / torch.log2(torch.arange(n).float() + 2.0)).sum(1)
    gains = (2.0 ** labels - 1.0) / max_dcg.clamp(min=1e-10).unsqueeze(1)
    inv_d = 1.0 / discounts
    delta_g = (gains.unsqueeze(2) - gains.unsqueeze(1)).abs()
    delta_d = (inv_d.unsqueeze(2) - inv_d.unsqueeze(1)).abs()
    return delta_g * delta_d


def lambdarank_loss(scores, labels, sigma):
    bce, pair_mask = pair_terms(scores, labels, sigma)
    weights = lambdarank_weights(scores.detach(), labels)
    return (weights * bce)[pair_mask].sum() / scores.shape[0]


def ndcg_at_k(scores, labels, k=10):
    n = scores.shape[1]
    disc = 1.0 / torch.log2(torch.arange(n).float() + 2.0)
    ranked = torch.gather(labels, 1, scores.argsort(dim=1, descending=True))
    dcg = ((2.0 ** ranked - 1.0) * disc)[:, :k].sum(1)
    ideal = labels.sort(dim=1, descending=True).values
    idcg = ((2.0 ** ideal - 1.0) * disc)[:, :k].sum(1)
    return (dcg / idcg.clamp(min=1e-10)).mean()


teacher_w1 = torch.randn(args.n_features, 16) / args.n_features ** 0.5
teacher_w2 = torch.randn(16)
x_train, y_train, cuts = make_queries(args.n_train, args.slate_len, args.n_features,
                                      teacher_w1, teacher_w2)
x_eval, y_eval, _ = make_queries(args.n_eval, args.slate_len, args.n_features,
                                 teacher_w1, teacher_w2, cuts)

model = LTRModel(args.n_features, args.hidden)
n_batches = args.n_train // args.batch_size


def evaluate(tag):
    model.eval()
    with torch.no_grad():
        ndcg = ndcg_at_k(model(x_eval), y_eval)
    model.train()
    print(f"{tag} eval ndcg@10 {ndcg.item():.4f}")


# Phase 1: RankNet warm-up.
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
model.train()
for epoch in range(args.warmup_epochs):
    perm = torch.randperm(args.n_train)
    for b in range(n_batches):
        idx = perm[b * args.batch_size:(b + 1) * args.batch_size]
        scores = model(x_train[idx])
        loss = ranknet_loss(scores, y_train[idx], args.sigma)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        optimizer.step()
        optimizer.zero_grad()
    print(f"ranknet epoch {epoch} loss {loss.item():.4f}")
    evaluate(f"ranknet epoch {epoch}")

# Phase 2: LambdaRank fine-tuning with |delta NDCG| pair weights.
ft_optimizer = torch.optim.Adam(model.input_layer.parameters(), lr=args.lr_finetune)
scheduler = torch.optim.lr_scheduler.StepLR(ft_optimizer, step_size=1, gamma=0.5)
for epoch in range(args.finetune_epochs):
    perm = torch.randperm(args.n_train)
    for b in range(n_batches):
        idx = perm[b * args.batch_size:(b + 1) * args.batch_size]
        scores = model(x_train[idx])
        loss = lambdarank_loss(scores, y_train[idx], args.sigma)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        ft_optimizer.step()
        ft_optimizer.zero_grad()
    scheduler.step()
    print(f"lambdarank epoch {epoch} loss {loss.item():.4f}")
    evaluate(f"lambdarank epoch {epoch}")

if args.out:
    torch.save({"model": model.state_dict()}, args.out)
