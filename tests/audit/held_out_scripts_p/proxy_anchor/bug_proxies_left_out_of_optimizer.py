"""Proxy Anchor loss for deep metric learning at a tiny size, written after Kim, Kim, Cho and Kwak,
"Proxy Anchor Loss for Deep Metric Learning" (CVPR 2020, arXiv:2003.13911), section 3.3: one
learnable proxy per class, and for every proxy that has a positive in the batch the softplus
of the scaled sum over its positives of exp(-alpha (cos - delta)), averaged over those proxies,
plus for every proxy the softplus of the sum over its negatives of exp(alpha (cos + delta)),
averaged over all classes, so that each proxy, taken as an anchor, pulls and pushes the whole
batch at once. With tjddus9597/Proxy-Anchor-CVPR2020
(https://github.com/tjddus9597/Proxy-Anchor-CVPR2020, code/losses.py: Proxy_Anchor, which holds
the proxies as an nn.Parameter initialised with kaiming_normal_ (fan_out), takes the cosine of
the l2-normalised embeddings and proxies, one-hot positive and negative masks, and
pos_term / neg_term as above with mrg = 0.1, alpha = 32; code/train.py: the param groups, the
backbone without its embedding layer at lr, the embedding layer at lr and criterion.proxies at
lr * 100, in one AdamW; the warm-up, which at epoch 0 sets requires_grad = False on every
parameter of the model but the embedding layer and the loss's, and sets it back to True at
epoch == args.warm; per batch opt.zero_grad(), loss.backward(), clip_grad_value_ at 10 on the
model's and the criterion's parameters, opt.step()). Two phases: a warm-up in which the MLP
backbone is frozen and only the embedding layer and the proxies train, then all of them. Eight
classes of points made in the script, a nonlinear map of Gaussian clusters.
Bug: the param group of the loss's proxies is left out of the AdamW (train.py appends
{'params': criterion.proxies, 'lr': lr * 100} to param_groups for Proxy_Anchor), so the proxies,
an nn.Parameter of the criterion rather than of the model, get a gradient at every backward but are
never stepped: they keep their kaiming_normal_ initialisation, and the embedding is trained towards
random fixed class directions."""

import argparse

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--warm-steps", type=int, default=10)
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--weight-decay", type=float, default=1e-4)
parser.add_argument("--mrg", type=float, default=0.1)
parser.add_argument("--alpha", type=float, default=32.0)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

in_dim, hidden_dim, sz_embed, nb_classes = 16, 48, 24, 8
centres = 2.0 * torch.randn(nb_classes, in_dim)
mixing = torch.randn(in_dim, in_dim) / in_dim ** 0.5
train_y = torch.randint(0, nb_classes, (1024,))
train_x = torch.tanh((centres[train_y] + torch.randn(1024, in_dim)) @ mixing)


def l2_norm(x):
    return x / torch.sqrt(x.pow(2).sum(1, keepdim=True) + 1e-12)


class ProxyAnchor(nn.Module):
    def __init__(self, nb_classes, sz_embed, mrg=0.1, alpha=32.0):
        super().__init__()
        self.proxies = nn.Parameter(torch.randn(nb_classes, sz_embed))
        nn.init.kaiming_normal_(self.proxies, mode="fan_out")
        self.nb_classes, self.mrg, self.alpha = nb_classes, mrg, alpha

    def forward(self, x, t):
        cos = F.linear(l2_norm(x), l2_norm(self.proxies))
        p_one_hot = F.one_hot(t, self.nb_classes).float()
        n_one_hot = 1 - p_one_hot
        pos_exp = torch.exp(-self.alpha * (cos - self.mrg))
        neg_exp = torch.exp(self.alpha * (cos + self.mrg))
        num_valid_proxies = int((p_one_hot.sum(0) != 0).sum())
        p_sim_sum = torch.where(p_one_hot == 1, pos_exp, torch.zeros_like(pos_exp)).sum(0)
        n_sim_sum = torch.where(n_one_hot == 1, neg_exp, torch.zeros_like(neg_exp)).sum(0)
        pos_term = torch.log(1 + p_sim_sum).sum() / num_valid_proxies
        neg_term = torch.log(1 + n_sim_sum).sum() / self.nb_classes
        return pos_term + neg_term


class EmbeddingNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(in_dim, hidden_dim), nn.ReLU(),
                                      nn.Linear(hidden_dim, hidden_dim), nn.ReLU())
        self.embedding = nn.Linear(hidden_dim, sz_embed)

    def forward(self, x):
        return self.embedding(self.backbone(x))


model = EmbeddingNet()
criterion = ProxyAnchor(nb_classes, sz_embed, mrg=args.mrg, alpha=args.alpha)
param_groups = [
    {"params": list(model.backbone.parameters())},
    {"params": list(model.embedding.parameters()), "lr": args.lr * 1},
]
opt = torch.optim.AdamW(param_groups, lr=args.lr, weight_decay=args.weight_decay)


def train_step(tag, step):
    idx = torch.randint(0, len(train_x), (args.batch_size,))
    m = model(train_x[idx])
    loss = criterion(m, train_y[idx])
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_value_(model.parameters(), 10)
    torch.nn.utils.clip_grad_value_(criterion.parameters(), 10)
    opt.step()
    if step % 5 == 0:
        print(f"{tag} {step} loss {loss.item():.4f}")


# phase 1: warm-up, the backbone frozen; only the embedding layer and the proxies train
frozen_params = list(model.backbone.parameters())
for param in frozen_params:
    param.requires_grad = False
for step in range(args.warm_steps):
    train_step("warm-up", step)

# phase 2: the backbone unfrozen, everything trains
for param in frozen_params:
    param.requires_grad = True
for step in range(args.steps):
    train_step("train", step)

if args.out:
    torch.save({**{f"model.{k}": v for k, v in model.state_dict().items()},
                "criterion.proxies": criterion.proxies.detach().clone()}, args.out)
