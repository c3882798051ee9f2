"""SimCLR contrastive pre-training, then linear evaluation on the frozen encoder.

Paper: Ting Chen, Simon Kornblith, Mohammad Norouzi and Geoffrey Hinton, "A Simple Framework for
Contrastive Learning of Visual Representations", arXiv:2002.05709, ICML 2020.
Reference implementation: Spijkervet/SimCLR, simclr/simclr.py (SimCLR: the encoder with its fc
replaced by an identity, giving h, and the projector g = Linear(no bias), ReLU, Linear(no bias),
giving z; forward(x_i, x_j) returns h_i, h_j, z_i, z_j), simclr/modules/nt_xent.py (NT_Xent:
cosine similarities of the 2N projections over a temperature, the positive pair against the
2(N - 1) others, summed cross-entropy divided by 2N), main.py (train: zero_grad, model(x_i, x_j),
NT_Xent(z_i, z_j), backward, Adam step over model.parameters(), encoder and projector together)
and linear_evaluation.py (inference: the representations h computed under torch.no_grad() from
the pre-trained model in eval mode; train: a LogisticRegression on those frozen features with
its own Adam, zero_grad, cross-entropy, backward, step; test). The other common PyTorch port,
sthalles/SimCLR, simclr.py (SimCLR.info_nce_loss, SimCLR.train), trains the same way.

Data: 16-d points from four latent classes (class prototype + noise). The two views of each
point are made by a random "crop" (a contiguous block of four features zeroed), a random
per-sample gain and offset (the colour-jitter analogue) and Gaussian noise. Phase 1 pre-trains
the MLP encoder and the projection head with NT-Xent (temperature 0.5) on unlabeled batches;
phase 2 discards the projector, extracts h for a small labeled set under torch.no_grad() and
trains a linear classifier on it with a fresh Adam, then reports test accuracy.
As published: clean.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--pretrain_steps", type=int, default=40)
parser.add_argument("--linear_steps", type=int, default=30)
parser.add_argument("--batch_size", type=int, default=32)
parser.add_argument("--logistic_batch_size", type=int, default=32)
parser.add_argument("--dim", type=int, default=16)
parser.add_argument("--n_classes", type=int, default=4)
parser.add_argument("--n_features", type=int, default=32)
parser.add_argument("--projection_dim", type=int, default=16)
parser.add_argument("--temperature", type=float, default=0.5)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--logistic_lr", type=float, default=1e-2)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

prototypes = 1.5 * torch.randn(args.n_classes, args.dim)


def make_data(n):
    y = torch.randint(0, args.n_classes, (n,))
    return prototypes[y] + 0.7 * torch.randn(n, args.dim), y


def augment(x):
    start = torch.randint(0, x.size(1) - 3, (x.size(0), 1))
    cols = torch.arange(x.size(1)).unsqueeze(0)
    crop = ((cols < start) | (cols >= start + 4)).float()
    gain = 1.0 + 0.3 * (torch.rand(x.size(0), 1) - 0.5)
    offset = 0.2 * torch.randn(x.size(0), 1)
    return gain * x * crop + offset + 0.1 * torch.randn_like(x)


class Encoder(nn.Module):
    def __init__(self, dim, n_features):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, 64), nn.ReLU(),
                                 nn.Linear(64, n_features), nn.ReLU())

    def forward(self, x):
        return self.net(x)


class SimCLR(nn.Module):
    def __init__(self, encoder, projection_dim, n_features):
        super().__init__()
        self.encoder = encoder
        self.n_features = n_features
        self.projector = nn.Sequential(
            nn.Linear(n_features, n_features, bias=False),
            nn.ReLU(),
            nn.Linear(n_features, projection_dim, bias=False),
        )

    def forward(self, x_i, x_j):
        h_i = self.encoder(x_i)
        h_j = self.encoder(x_j)
        z_i = self.projector(h_i)
        z_j = self.projector(h_j)
        return h_i, h_j, z_i, z_j


class NTXent(nn.Module):
    def __init__(self, batch_size, temperature):
        super().__init__()
        self.batch_size = batch_size
        self.temperature = temperature
        n = 2 * batch_size
        mask = torch.ones(n, n, dtype=torch.bool)
        mask.fill_diagonal_(False)
        idx = torch.arange(batch_size)
        mask[idx, idx + batch_size] = False
        mask[idx + batch_size, idx] = False
        self.register_buffer("mask", mask)

    def forward(self, z_i, z_j):
        n = 2 * self.batch_size
        z = torch.cat((z_i, z_j), dim=0)
        sim = F.cosine_similarity(z.unsqueeze(1), z.unsqueeze(0), dim=2) / self.temperature
        sim_i_j = torch.diag(sim, self.batch_size)
        sim_j_i = torch.diag(sim, -self.batch_size)
        positives = torch.cat((sim_i_j, sim_j_i), dim=0).reshape(n, 1)
        negatives = sim[self.mask].reshape(n, -1)
        logits = torch.cat((positives, negatives), dim=1)
        labels = torch.zeros(n, dtype=torch.long)
        return F.cross_entropy(logits, labels, reduction="sum") / n


class LogisticRegression(nn.Module):
    def __init__(self, n_features, n_classes):
        super().__init__()
        self.model = nn.Linear(n_features, n_classes)

    def forward(self, x):
        return self.model(x)


x_unlabeled, _ = make_data(args.pretrain_steps * args.batch_size)
x_train, y_train = make_data(args.linear_steps * args.logistic_batch_size // 2)
x_test, y_test = make_data(256)

# Phase 1: contrastive pre-training of encoder + projection head.
encoder = Encoder(args.dim, args.n_features)
model = SimCLR(encoder, args.projection_dim, args.n_features)
criterion = NTXent(args.batch_size, args.temperature)
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

model.train()
for step in range(args.pretrain_steps):
    x = x_unlabeled[step * args.batch_size:(step + 1) * args.batch_size]
    x_i, x_j = augment(x), augment(x)
    optimizer.zero_grad()
    h_i, h_j, z_i, z_j = model(x_i, x_j)
    loss = criterion(z_i, z_j)
    loss.backward()
    optimizer.step()
    if step % 10 == 0 or step == args.pretrain_steps - 1:
        print(f"pretrain step {step:3d} nt-xent {loss.item():.4f}")

# Phase 2: linear evaluation on the frozen representations h.
simclr_model = model
simclr_model.eval()


def inference(x):
    with torch.no_grad():
        h, _, _, _ = simclr_model(x, x)
    return h.detach()


train_X, test_X = inference(x_train), inference(x_test)
classifier = LogisticRegression(simclr_model.n_features, args.n_classes)
optimizer = torch.optim.Adam(classifier.parameters(), lr=args.logistic_lr)

n_batches = len(train_X) // args.logistic_batch_size
for step in range(args.linear_steps):
    b = step % n_batches
    x = train_X[b * args.logistic_batch_size:(b + 1) * args.logistic_batch_size]
    y = y_train[b * args.logistic_batch_size:(b + 1) * args.logistic_batch_size]
    optimizer.zero_grad()
    output = classifier(x)
    loss = F.cross_entropy(output, y)
    loss.backward()
    optimizer.step()
    if step % 10 == 0 or step == args.linear_steps - 1:
        acc = (output.argmax(1) == y).float().mean()
        print(f"linear step {step:3d} loss {loss.item():.4f} acc {acc.item():.3f}")

with torch.no_grad():
    test_acc = (classifier(test_X).argmax(1) == y_test).float().mean()
print(f"linear eval test acc {test_acc.item():.3f}")

if args.out:
    torch.save({"simclr": model.state_dict(), "classifier": classifier.state_dict()}, args.out)
