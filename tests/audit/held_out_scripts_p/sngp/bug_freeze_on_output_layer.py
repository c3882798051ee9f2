"""SNGP, the spectral-normalized neural Gaussian process, at a tiny size, written after Liu, Lin,
Padhy, Tran, Bedrax-Weiss and Lakshminarayanan, "Simple and Principled Uncertainty Estimation
with Deterministic Deep Learning via Distance Awareness" (NeurIPS 2020, arXiv:2006.10108),
section 3 and algorithm 1: residual hidden layers whose weights are spectrally normalized to a
bound c, and a Gaussian-process output layer approximated with random Fourier features,
phi(h) = sqrt(2 / D) cos(W h + b) with W and b drawn once and fixed, logits beta^T phi(h) with
beta trained by the ordinary loss; in the final epoch the Laplace precision ridge * I + sum phi
phi^T is accumulated over the minibatches, and its inverse gives the predictive variance
ridge * phi*^T Sigma phi* used at test time (the mean-field logits divide by sqrt(1 + pi / 8
var)). With google/edward2 (https://github.com/google/edward2,
edward2/tensorflow/layers/random_feature.py: RandomFeatureGaussianProcess, whose
_random_feature layer is built with trainable=False and whose call computes the random
features from the layer-normalized input and the MAP logits from the trainable
_gp_output_layer; reset_covariance_matrix, called at the start of each epoch;
LaplaceRandomFeatureCovariance.make_precision_matrix_update_op, with momentum < 0 the exact sum
precision + phi^T phi "by passing through data once (say in the final epoch)", an assign that
carries no gradient; compute_predictive_covariance, inv(precision) and the ridge factor;
edward2/tensorflow/layers/normalization.py SpectralNormalization.update_weights: one power
iteration, sigma = v W u, and W scaled by norm_multiplier / sigma only when that is below 1).
Here the spectral normalization follows torch's spectral_norm for the gradient (u and v from
the power iteration are constants, sigma is differentiated through W). Two phases: the first
epochs train without the covariance (the reset at each epoch would discard it), the final epoch
trains and accumulates the precision from the detached random features. Data: two interleaved
moons made in the script.
Bug: the freeze meant for the fixed random-feature projection is put on the output layer,
gp.output.requires_grad_(False) for gp.random_feature.requires_grad_(False) (edward2 builds
_random_feature with trainable=False and trains _gp_output_layer, the GP's beta), so the
optimizer, built over the parameters that require gradients, trains the random Fourier
frequencies and phases W and b and never the output weights: the features stop being random
features of an RBF kernel, the logits are a fixed random projection of them, and the precision
and covariance are those of learned features."""

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--lr", type=float, default=5e-3)
parser.add_argument("--out", default=None, help="where to save the trained weights")
args = parser.parse_args()
torch.manual_seed(args.seed)

hidden, n_blocks, n_features, n_classes = 32, 2, 64, 2
spec_norm_bound, ridge = 0.95, 1.0


def make_moons(n):
    t = torch.rand(n) * math.pi
    upper = torch.stack([t.cos(), t.sin()], 1)
    lower = torch.stack([1 - t.cos(), 0.5 - t.sin()], 1)
    label = torch.randint(0, 2, (n,))
    x = torch.where(label[:, None] == 0, upper, lower) + 0.1 * torch.randn(n, 2)
    return x, label


train_x, train_y = make_moons(256)
test_x = torch.cat([make_moons(64)[0], 3.0 * torch.randn(64, 2)])


class SpectralLinear(nn.Module):
    """A linear layer whose weight is scaled down to spectral norm c when its estimate exceeds c."""

    def __init__(self, d_in, d_out):
        super().__init__()
        self.layer = nn.Linear(d_in, d_out)
        self.register_buffer("u", F.normalize(torch.randn(d_out), dim=0))
        self.register_buffer("v", F.normalize(torch.randn(d_in), dim=0))

    def forward(self, h):
        w = self.layer.weight
        if self.training:
            with torch.no_grad():
                self.v.copy_(F.normalize(w.t() @ self.u, dim=0))
                self.u.copy_(F.normalize(w @ self.v, dim=0))
        sigma = self.u @ w @ self.v
        if sigma.item() > spec_norm_bound:
            w = w * (spec_norm_bound / sigma)
        return F.linear(h, w, self.layer.bias)


class Body(nn.Module):
    def __init__(self):
        super().__init__()
        self.input_layer = nn.Linear(2, hidden)
        self.blocks = nn.ModuleList([SpectralLinear(hidden, hidden) for _ in range(n_blocks)])

    def forward(self, x):
        h = self.input_layer(x)
        for block in self.blocks:
            h = h + F.relu(block(h))
        return h


class RandomFeatureGP(nn.Module):
    def __init__(self):
        super().__init__()
        self.input_norm = nn.LayerNorm(hidden)
        self.random_feature = nn.Linear(hidden, n_features)
        nn.init.normal_(self.random_feature.weight, std=1.0)
        nn.init.uniform_(self.random_feature.bias, 0.0, 2 * math.pi)
        self.output = nn.Linear(n_features, n_classes, bias=False)
        self.register_buffer("precision", ridge * torch.eye(n_features))

    def features(self, h):
        return math.sqrt(2.0 / n_features) * torch.cos(self.random_feature(self.input_norm(h)))

    def reset_precision(self):
        self.precision.copy_(ridge * torch.eye(n_features))


body, gp = Body(), RandomFeatureGP()
gp.output.requires_grad_(False)
params = [p for m in (body, gp) for p in m.parameters() if p.requires_grad]
optimizer = torch.optim.Adam(params, lr=args.lr)
n_batches = len(train_x) // args.batch_size

# phase 1: the first epochs, trained without the covariance
for epoch in range(args.epochs - 1):
    perm = torch.randperm(len(train_x))
    for b in range(n_batches):
        idx = perm[b * args.batch_size:(b + 1) * args.batch_size]
        logits = gp.output(gp.features(body(train_x[idx])))
        loss = F.cross_entropy(logits, train_y[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")

# phase 2: the final epoch trains on and accumulates the precision from the batches' features
gp.reset_precision()
perm = torch.randperm(len(train_x))
for b in range(n_batches):
    idx = perm[b * args.batch_size:(b + 1) * args.batch_size]
    phi = gp.features(body(train_x[idx]))
    with torch.no_grad():
        gp.precision += phi.t() @ phi
    logits = gp.output(phi)
    loss = F.cross_entropy(logits, train_y[idx])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"epoch {args.epochs - 1} loss {loss.item():.4f}")

# prediction: the covariance is the inverse of the final epoch's precision
body.eval()
gp.eval()
with torch.no_grad():
    covariance = torch.linalg.inv(gp.precision)
    phi_test = gp.features(body(test_x))
    test_logits = gp.output(phi_test)
    test_var = ridge * ((phi_test @ covariance) * phi_test).sum(1)
    test_probs = F.softmax(test_logits / torch.sqrt(1 + math.pi / 8 * test_var)[:, None], dim=1)
print(f"predictive variance: in-distribution {test_var[:64].mean():.4f}, "
      f"far {test_var[64:].mean():.4f}")

if args.out:
    torch.save({**{f"body.{k}": v for k, v in body.state_dict().items()},
                **{f"gp.{k}": v for k, v in gp.state_dict().items()},
                "covariance": covariance, "test_var": test_var, "test_probs": test_probs},
               args.out)
