"""Adversarial discriminative domain adaptation (ADDA) on a shifted synthetic classification task.

Paper: Eric Tzeng, Judy Hoffman, Kate Saenko and Trevor Darrell, "Adversarial Discriminative
Domain Adaptation", CVPR 2017, arXiv:1702.05464 (2017).
Reference implementations: erictzeng/adda (TensorFlow; tools/train.py pre-trains the source
model, tools/train_adda.py restores it into both the 'source' and the 'target' scopes, builds
the adversary on the concatenated source and target features, and minimizes the adversary loss
over the adversary variables and the inverted-label mapping loss over the target variables only)
and its PyTorch port corenel/pytorch-adda (main.py; core/pretrain.py, train_src: one Adam over
encoder + classifier with cross-entropy; core/adapt.py, train_tgt: per step 2.1 zero the critic,
encode source and target, critic on feat_concat.detach() with source label 1 and target label 0,
backward, critic step; 2.2 zero both optimizers, re-encode the target, critic on the live target
features with the flipped label 1, backward, target-encoder step; models/lenet.py LeNetEncoder,
LeNetClassifier; models/discriminator.py Discriminator; Adam betas (0.5, 0.9)).

The source domain is four Gaussian classes in 16 dimensions; the target domain is the same
classes pushed through a fixed random near-identity linear map and shifted, and its labels are
only used for the final evaluation. Phase 1 (its own loop) pre-trains the source encoder (a
two-layer MLP standing in for LeNet's encoder) and the source classifier (ReLU, dropout and a
linear layer, as LeNetClassifier) with one Adam optimizer on the labelled source data. The
target encoder, built at the start like every network, is then initialised with the source
encoder's weights (load_state_dict). Phase 2 (its own loop) is the adversarial adaptation: the
source encoder and the classifier stay fixed (no optimizer holds them), the critic (a three-layer
MLP with two logits) learns to tell source features (label 1) from detached target features
(label 0) with its own Adam, and the target encoder is trained with its own Adam to fool the
critic through the GAN inverted-label loss on its live features. Finally the classifier is applied
to the target data through the source encoder (source only) and the adapted target encoder, under
torch.no_grad().
Bug: the critic step no longer starts with optimizer_critic.zero_grad(), so from the second
adaptation step the critic is updated with its own loss gradient plus the leftover gradient of
the inverted-label mapping loss from the previous target-encoder step.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--out", type=str, default=None)
parser.add_argument("--pre_steps", type=int, default=30)
parser.add_argument("--adapt_steps", type=int, default=40)
parser.add_argument("--batch_size", type=int, default=32)
parser.add_argument("--dim", type=int, default=16)
parser.add_argument("--n_classes", type=int, default=4)
parser.add_argument("--feat_dim", type=int, default=16)
parser.add_argument("--c_lr", type=float, default=2e-3)
parser.add_argument("--tgt_lr", type=float, default=1e-3)
parser.add_argument("--d_lr", type=float, default=1e-3)
parser.add_argument("--beta1", type=float, default=0.5)
parser.add_argument("--beta2", type=float, default=0.9)
args = parser.parse_args()

torch.manual_seed(args.seed)
torch.set_num_threads(1)

class_means = 2.0 * torch.randn(args.n_classes, args.dim)
domain_map = torch.eye(args.dim) + 0.8 * torch.randn(args.dim, args.dim) / args.dim ** 0.5
domain_shift = 1.5 * torch.randn(args.dim)


def make_domain(n, target):
    y = torch.randint(0, args.n_classes, (n,))
    x = class_means[y] + 0.7 * torch.randn(n, args.dim)
    if target:
        x = x @ domain_map + domain_shift
    return x, y


class Encoder(nn.Module):
    def __init__(self, dim, hidden, feat_dim):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU())
        self.fc1 = nn.Linear(hidden, feat_dim)

    def forward(self, x):
        return self.fc1(self.encoder(x))


class Classifier(nn.Module):
    def __init__(self, feat_dim, n_classes):
        super().__init__()
        self.fc2 = nn.Linear(feat_dim, n_classes)

    def forward(self, feat):
        out = F.dropout(F.relu(feat), p=0.1, training=self.training)
        return self.fc2(out)


class Discriminator(nn.Module):
    def __init__(self, input_dims, hidden_dims, output_dims):
        super().__init__()
        self.layer = nn.Sequential(
            nn.Linear(input_dims, hidden_dims), nn.ReLU(),
            nn.Linear(hidden_dims, hidden_dims), nn.ReLU(),
            nn.Linear(hidden_dims, output_dims))

    def forward(self, feat):
        return self.layer(feat)


n_pre = args.pre_steps * args.batch_size
n_adapt = args.adapt_steps * args.batch_size
x_src_train, y_src_train = make_domain(n_pre, target=False)
x_src_adapt, _ = make_domain(n_adapt, target=False)
x_tgt_adapt, _ = make_domain(n_adapt, target=True)
x_tgt_eval, y_tgt_eval = make_domain(256, target=True)

src_encoder = Encoder(args.dim, 32, args.feat_dim)
src_classifier = Classifier(args.feat_dim, args.n_classes)
tgt_encoder = Encoder(args.dim, 32, args.feat_dim)
critic = Discriminator(args.feat_dim, 32, 2)
criterion = nn.CrossEntropyLoss()

# ---- phase 1: train the source encoder and classifier on labelled source data ----
src_encoder.train()
src_classifier.train()
optimizer = torch.optim.Adam(
    list(src_encoder.parameters()) + list(src_classifier.parameters()),
    lr=args.c_lr, betas=(args.beta1, args.beta2))
for step in range(args.pre_steps):
    i = step * args.batch_size
    images = x_src_train[i:i + args.batch_size]
    labels = y_src_train[i:i + args.batch_size]
    optimizer.zero_grad()
    preds = src_classifier(src_encoder(images))
    loss = criterion(preds, labels)
    loss.backward()
    optimizer.step()
    if step % 10 == 0 or step == args.pre_steps - 1:
        print(f"pre-train step {step:3d} loss {loss.item():.4f}")

# ---- phase 2: adversarial adaptation of the target encoder ----
tgt_encoder.load_state_dict(src_encoder.state_dict())
tgt_encoder.train()
critic.train()
optimizer_tgt = torch.optim.Adam(tgt_encoder.parameters(), lr=args.tgt_lr,
                                 betas=(args.beta1, args.beta2))
optimizer_critic = torch.optim.Adam(critic.parameters(), lr=args.d_lr,
                                    betas=(args.beta1, args.beta2))
for step in range(args.adapt_steps):
    i = step * args.batch_size
    images_src = x_src_adapt[i:i + args.batch_size]
    images_tgt = x_tgt_adapt[i:i + args.batch_size]

    # 2.1 train the critic
    feat_src = src_encoder(images_src)
    feat_tgt = tgt_encoder(images_tgt)
    feat_concat = torch.cat((feat_src, feat_tgt), 0)
    pred_concat = critic(feat_concat.detach())
    label_src = torch.ones(feat_src.size(0), dtype=torch.long)
    label_tgt = torch.zeros(feat_tgt.size(0), dtype=torch.long)
    label_concat = torch.cat((label_src, label_tgt), 0)
    loss_critic = criterion(pred_concat, label_concat)
    loss_critic.backward()
    optimizer_critic.step()
    acc = (pred_concat.argmax(1) == label_concat).float().mean()

    # 2.2 train the target encoder with the inverted label
    optimizer_critic.zero_grad()
    optimizer_tgt.zero_grad()
    feat_tgt = tgt_encoder(images_tgt)
    pred_tgt = critic(feat_tgt)
    label_tgt = torch.ones(feat_tgt.size(0), dtype=torch.long)
    loss_tgt = criterion(pred_tgt, label_tgt)
    loss_tgt.backward()
    optimizer_tgt.step()
    if step % 10 == 0 or step == args.adapt_steps - 1:
        print(f"adapt step {step:3d} d_loss {loss_critic.item():.4f} "
              f"g_loss {loss_tgt.item():.4f} acc {acc.item():.3f}")

src_encoder.eval()
src_classifier.eval()
tgt_encoder.eval()
with torch.no_grad():
    acc_src_only = (src_classifier(src_encoder(x_tgt_eval)).argmax(1) == y_tgt_eval).float()
    acc_adapted = (src_classifier(tgt_encoder(x_tgt_eval)).argmax(1) == y_tgt_eval).float()
print(f"target acc source-only {acc_src_only.mean().item():.3f} "
      f"adapted {acc_adapted.mean().item():.3f}")

if args.out:
    torch.save({"src_encoder": src_encoder.state_dict(),
                "src_classifier": src_classifier.state_dict(),
                "tgt_encoder": tgt_encoder.state_dict(),
                "critic": critic.state_dict()}, args.out)
